"""Medians per (model, dtype) and build from serve_ab.sh's output: python serve_summary.py serve_ab.txt"""
import collections
import statistics
import sys

d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    p = line.split("|")
    if len(p) < 8:
        continue
    v, m, dt = p[0].split()
    d[(m, dt, v)].append((float(p[3]), float(p[6])))  # req/s, p99 ms
print("| model | dtype | req/s before (runs) | req/s after (runs) | after / before (medians) | p99 ms before -> after (medians) |")
print("|---|---|---|---|---|---|")
for m, dt in dict.fromkeys((k[0], k[1]) for k in d):
    b, n = d[(m, dt, "base")], d[(m, dt, "new")]
    mb, mn = statistics.median(x[0] for x in b), statistics.median(x[0] for x in n)
    print(f"| {m} | {dt} | {mb:.0f} ({', '.join(str(int(x[0])) for x in b)}) | {mn:.0f} ({', '.join(str(int(x[0])) for x in n)}) "
          f"| {mn / mb:.2f} | {statistics.median(x[1] for x in b):.2f} -> {statistics.median(x[1] for x in n):.2f} |")
