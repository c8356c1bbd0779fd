"""after / before per case from alternating `before {json}` / `after {json}` lines: medians of the rounds."""
import json
import statistics
import sys

rows = [line.split(" ", 1) for line in open(sys.argv[1]) if line.strip() and not line.startswith("#")]
runs = {v: [json.loads(r[1]) for r in rows if r[0] == v] for v in ("before", "after")}
for k in runs["before"][0]:
    b = [x[k] for x in runs["before"]]
    a = [x[k] for x in runs["after"]]
    print(f"{k:44s} before {b}  after {a}  after/before {statistics.median(a) / statistics.median(b):.2f}")
