"""Table from lone_plans.py's alternating runs (lines "<install> <json>"): per op and dtype, the
range over sizes of the median-over-rounds ratio
  - fused alone / ATen alone, where the current build fuses op(x) alone (both plans of op(x));
  - fused op(x) * 2 / ATen op(x), where it leaves op(x) on ATen (the fused kernel with an extra
    multiply against ATen's op: below 1, fusing it alone would pay).
    python compare.py raw.txt
"""
import json
import statistics
import sys
from collections import defaultdict

runs = defaultdict(list)
for line in open(sys.argv[1]):
    name, _, js = line.partition(" ")
    if js.strip():
        runs[name].append(json.loads(js))
cur, nol = runs["current"], runs["nolone"]
print("host:", cur[0]["host"], "torch", cur[0]["torch"], f"rounds: {len(cur)} current, {len(nol)} nolone")
keys = [k for k in cur[0] if k not in ("host", "torch")]
rows = defaultdict(list)
for k in keys:
    dt, op, n = k.split()
    fused_alone = cur[0][k]["alone_fused"]
    aten = statistics.median(r[k]["alone"] for r in (nol if fused_alone else cur))
    ours = statistics.median(r[k]["alone" if fused_alone else "times2"] for r in cur)
    rows[(op, dt)].append((int(n), ours / aten, aten, fused_alone))
print("ratio per size (4096, 65536, 1638400, 4194304); in parentheses ATen's us; * = fused alone now")
for (op, dt), rs in rows.items():
    cells = "  ".join(f"{r:5.2f} ({a:8.1f})" for _, r, a, _ in sorted(rs))
    print(f"{dt:8s} {op:11s} {'*' if rs[0][3] else ' '} {cells}")
