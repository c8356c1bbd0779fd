"""Per call, fxcpp against floor_alloc: instructions (Ir) and simulated L1 instruction-cache
misses (I1mr) per function and per library, from four callgrind outputs (cg.<mode>.0 and
cg.<mode>.N made by ovh.py), the n = 0 run subtracted.

    python callgrind_diff.py 10000 > callgrind_diff.txt
"""
import collections, re, subprocess, sys
def table(f):
    out = subprocess.run(["callgrind_annotate", "--show=Ir,I1mr,D1mr", "--sort=I1mr", "--threshold=100", f], capture_output=True, text=True).stdout
    d = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+([\d,]+) \([^)]*\)\s+([\d,]+) \([^)]*\)\s+(.*)$", line)
        if m and "PROGRAM TOTALS" not in line:
            name = m.group(4).split(" [")[0]
            lib = m.group(4).split(" [")[-1].split("/")[-1].rstrip("]") if " [" in m.group(4) else ""
            key = (name[-110:], lib)
            v = tuple(int(m.group(i).replace(",", "")) for i in (1, 2, 3))
            d[key] = tuple(a + b for a, b in zip(d.get(key, (0, 0, 0)), v))
    return d
N = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
per = {}
for mode in ("fxcpp", "floor_alloc"):
    a, b = table(f"cg.{mode}.0"), table(f"cg.{mode}.{N}")
    per[mode] = {k: tuple((b.get(k, (0,0,0))[i] - a.get(k, (0,0,0))[i]) / N for i in range(3)) for k in set(a) | set(b)}
keys = set(per["fxcpp"]) | set(per["floor_alloc"])
rows = []
for k in keys:
    f, g = per["fxcpp"].get(k, (0,0,0)), per["floor_alloc"].get(k, (0,0,0))
    rows.append((f[1] - g[1], f[0] - g[0], f, g, k))
rows.sort(key=lambda r: -abs(r[0]))
print("dI1mr  dIr   fx(Ir,I1mr)  floor(Ir,I1mr)  function [lib]")
for r in rows[:45]:
    print(f"{r[0]:7.1f} {r[1]:7.1f}  {r[2][0]:7.0f} {r[2][1]:6.1f}  {r[3][0]:7.0f} {r[3][1]:6.1f}  {r[4][0]} [{r[4][1]}]")
# by library
bylib = collections.defaultdict(lambda: [0,0,0,0])
for k in keys:
    f, g = per["fxcpp"].get(k, (0,0,0)), per["floor_alloc"].get(k, (0,0,0))
    L = bylib[k[1]]; L[0] += f[0]; L[1] += f[1]; L[2] += g[0]; L[3] += g[1]
print("\nby library: fx Ir, fx I1mr, floor Ir, floor I1mr")
for lib, v in sorted(bylib.items(), key=lambda kv: -(kv[1][1])):
    if max(abs(x) for x in v) > 5: print(f"{lib:40s} {v[0]:8.0f} {v[1]:7.1f} {v[2]:8.0f} {v[3]:7.1f}")
