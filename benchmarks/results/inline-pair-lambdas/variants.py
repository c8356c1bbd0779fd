"""Several installs against /tmp/ab/before, alternating, on the cases where the inlining variants
differed (medians of 200 calls, 2 threads; each figure: the variant's median over rounds / before's).
    python benchmarks/results/inline-pair-lambdas/variants.py ROUNDS LABEL=DIR [LABEL=DIR ...] [--cases NAME;NAME]
variants.txt says which cases and installs each recorded run had."""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))

DEFAULT = ["silu(a) * b [1024, 2048] fp32", "sigmoid(x) * x + 1 [1024, 2048] fp32", "exp(x) * 2 [1024, 2048] fp32",
           "tanh(x) * 2 [1024, 1024] fp32", "softmax(x * 0.125 + m) [4096, 4096] fp32", "log_softmax(x) [4096, 4096] fp32"]
names = DEFAULT
if "--cases" in sys.argv:
    names = sys.argv[sys.argv.index("--cases") + 1].split(";")

if "--child" in sys.argv:
    from benchmarks.ab_transcendentals import child

    child(names)
else:
    rounds = int(sys.argv[1])
    dirs = {"before": "/tmp/ab/before"}
    dirs.update(a.split("=", 1) for a in sys.argv[2:] if "=" in a)
    extra = ["--cases", ";".join(names)]
    runs = {k: [] for k in dirs}
    for _ in range(rounds):
        for k, d in dirs.items():
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"] + extra,
                                 env=dict(os.environ, PYTHONPATH=d), capture_output=True, text=True, check=True)
            runs[k].append(json.loads(out.stdout.strip().splitlines()[-1]))
    for n in names:
        b = statistics.median(r[n] for r in runs["before"])
        print(f"{n:44s} before {b:7.3f}  " +
              "  ".join(f"{k} {statistics.median(r[n] for r in runs[k]) / b:.3f}" for k in dirs if k != "before"))
