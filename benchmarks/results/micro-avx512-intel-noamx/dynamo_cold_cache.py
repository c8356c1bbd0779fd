"""Why Dynamo's floor grows with the weight's size on this host: it is paid with cold caches.
One nn.Linear(K, K) on a 1 x K fp32 input under no_grad. Before each timed call a sum over an
S MiB buffer evicts the caches (as a large weight streamed by the previous call does), then the
call is timed: eager, Dynamo alone (a backend that calls the graph as given, which also times
Dynamo's own part: from the call to the graph's start) and fxcpp. Medians of 300, us.

    python benchmarks/results/micro-avx512-intel-noamx/dynamo_cold_cache.py 256
"""
import sys
import time

import torch
import torch.nn as nn

import fxcpp  # noqa: F401 (registers the backend)

torch.manual_seed(0)
K = int(sys.argv[1])
m = nn.Linear(K, K).eval()
x = torch.randn(1, K)
start, pre = [0.0], []


def passthrough(gm, example_inputs):
    def run(*args):
        pre.append(time.perf_counter() - start[0])
        return gm(*args)
    return run


fns = {"eager": m, "dynamo_alone": torch.compile(lambda x: m(x), backend=passthrough),
       "fxcpp": torch.compile(lambda x: m(x), backend="fxcpp")}
med = lambda v: sorted(v)[len(v) // 2] * 1e6  # noqa: E731
print(f"K = {K} ({K * K * 4 / 2**20:.2f} MiB weight); columns: us per call; dynamo_pre: Dynamo's part before the graph")
with torch.no_grad():
    for f in fns.values():
        f(x), f(x)
    for mib in (0, 1, 4, 16):
        buf = torch.ones(mib << 18) if mib else None
        ts = {k: [] for k in fns}
        pre.clear()
        for _ in range(300):
            for k, f in fns.items():
                if buf is not None:
                    buf.sum()
                start[0] = time.perf_counter()
                f(x)
                ts[k].append(time.perf_counter() - start[0])
        print(f"evict {mib:2d} MiB: " + "  ".join(f"{k} {med(v):6.1f}" for k, v in ts.items())
              + f"  dynamo_pre {med(pre):5.1f}")
