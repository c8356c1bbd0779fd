"""One nn.Linear(K, K) on a 1 x K fp32 input under no_grad: eager, and compiled with
aot_eager, Dynamo alone (backend="eager") and fxcpp, called interleaved (400 rounds, medians, us).

    python benchmarks/results/micro-avx512-intel-noamx/dynamo_floor_linear.py 1024
"""
import torch, torch.nn as nn, torch.nn.functional as F, time, sys
torch.manual_seed(0)
K=N=int(sys.argv[1])
m = nn.Linear(K,N).eval(); x = torch.randn(1,K)
import fxcpp
fs = {"eager": lambda: m(x)}
for be in ("aot_eager", "eager", "fxcpp"):
    c = torch.compile(lambda x: m(x), backend=be)
    fs["compiled:" + be] = (lambda c: (lambda: c(x)))(c)
with torch.no_grad():
    for f in fs.values(): f(); f()
    ts = {k: [] for k in fs}
    for _ in range(400):
        for k in ts:
            t=time.perf_counter(); fs[k](); ts[k].append(time.perf_counter()-t)
print(K, {k: round(sorted(v)[200]*1e6,1) for k,v in ts.items()})
