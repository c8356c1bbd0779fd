"""RSS around a compiled model's first call, and the free heap glibc holds at its end.

    python first_call_peak.py FREEZE(0|1) [MODEL=bert_base] [DTYPE=bf16]

One process per line of the results: eager's call first (its RSS and peak), then the compiled
model's first call (Dynamo, aot_autograd, fxcpp's compile, the packing) and a second call.
Peaks are the process's ru_maxrss, so the compiled line's peak is eager's where it is lower."""
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))
from benchmarks import suite  # noqa: E402

import fxcpp  # noqa: E402,F401


def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20


def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


freeze = sys.argv[1] == "1"
name = sys.argv[2] if len(sys.argv) > 2 else "bert_base"
dtype = torch.bfloat16 if (sys.argv[3] if len(sys.argv) > 3 else "bf16") == "bf16" else torch.float32
spec = [s for s in suite.SUITE if s.name == name][0]
model, inputs = spec.build(1)
model, inputs = suite.to_dtype(model, inputs, dtype, "cpu")
print(f"{name} {dtype} freeze={int(freeze)} choice={os.environ.get('FXCPP_KERNEL_CHOICE', 'measured')}")
with torch.no_grad():
    suite.call(spec, model, inputs)
    print(f"after eager call: rss {rss():.0f} peak {peak():.0f}")
    c = torch.compile(lambda *a: suite.call(spec, model, a), backend="fxcpp", options={"freeze": freeze})
    t0 = time.perf_counter()
    c(*inputs)
    t1 = time.perf_counter()
    print(f"after first call: rss {rss():.0f} peak {peak():.0f} (compile and first call {t1 - t0:.2f} s)")
    c(*inputs)
    print(f"after second call: rss {rss():.0f} peak {peak():.0f}")
