"""Medians per (model, dtype) and build from ab.sh's output, and new / base of the medians."""
import collections
import statistics
import sys

d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) == 4:
        d[(parts[1], parts[2], parts[0])].append(float(parts[3]))
print("| model | dtype | base ms (median, range) | new ms (median, range) | new / base |")
print("|---|---|---|---|---|")
for m, dt in dict.fromkeys((k[0], k[1]) for k in d):
    b, n = d[(m, dt, "base")], d[(m, dt, "new")]
    mb, mn = statistics.median(b), statistics.median(n)
    print(f"| {m} | {dt} | {mb:.4f} ({min(b):.4f}-{max(b):.4f}) | {mn:.4f} ({min(n):.4f}-{max(n):.4f}) | {mn / mb:.2f} |")
