import json, sys, statistics
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
keys = list(runs[0]["res"])
print(f"{'case/MiB moved':28s} {'always ms':>10s} {'never ms':>10s}  always/never per round")
for k in keys:
    a = [r["res"][k] for r in runs if r["mode"] == "always"]; n = [r["res"][k] for r in runs if r["mode"] == "never"]
    print(f"{k:28s} {statistics.median(a):10.3f} {statistics.median(n):10.3f}  " + " ".join(f"{x/y:.2f}" for x, y in zip(a, n)))
