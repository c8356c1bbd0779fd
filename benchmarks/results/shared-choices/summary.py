"""ab.txt -> a table: per case, first-call seconds before and after (min-max over rounds), the
ratio of medians, nodes measured / shared, and the second call (unchanged work)."""
import collections
import statistics
import sys

rows = collections.defaultdict(lambda: {"before": [], "after": []})
meta = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) < 12 or p[0] != "round":
        continue
    which, case = p[2], tuple(p[3:6])
    rows[case][which].append((float(p[7]), float(p[9])))
    meta[case, which] = (p[11], p[13])
print("| model | batch | dtype | first call before (s) | after (s) | after / before (medians) | measured / shared before | after | second call before / after (s) |")
print("|---|---|---|---|---|---|---|---|---|")
for case, r in rows.items():
    b, a = [x[0] for x in r["before"]], [x[0] for x in r["after"]]
    sb, sa = statistics.median(x[1] for x in r["before"]), statistics.median(x[1] for x in r["after"])
    print(f"| {' | '.join(case)} | {min(b):.2f}-{max(b):.2f} | {min(a):.2f}-{max(a):.2f} | "
          f"{statistics.median(a) / statistics.median(b):.2f} | {'/'.join(meta[case, 'before'])} | {'/'.join(meta[case, 'after'])} | "
          f"{sb:.3f} / {sa:.3f} |")
