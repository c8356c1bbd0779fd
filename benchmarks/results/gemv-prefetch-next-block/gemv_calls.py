"""nn.Linear(K, N) compiled by fxcpp (a function calling the module; its default path, the GEMV
at these M) at M = 1, 4, 16, fp32 and bf16: us per call, median of 5 loops, one JSON line, for
the install on PYTHONPATH. Alternating two installs:

    for r in 1 2; do for v in before after; do
      echo "$v $(PYTHONPATH=/tmp/ab/$v python benchmarks/results/gemv-prefetch-next-block/gemv_calls.py)"; done; done
"""
import json, os, statistics, sys, time
import torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))
import fxcpp
from benchmarks.micro.run import _own_code
def manual(f, x, n):
    for _ in range(20): f(x)
    best = []
    for r in range(5):
        t0 = time.perf_counter()
        for _ in range(n): f(x)
        best.append((time.perf_counter() - t0) / n * 1e6)
    return sorted(best)[2]
shapes = [(512, 512), (512, 2048), (1024, 1024), (2048, 2048), (4096, 4096)]
res = {}
with torch.no_grad():
    for dtype in (torch.float32, torch.bfloat16):
        for k, n in shapes:
            for m in (1, 4, 16):
                torch.manual_seed(0)
                lin = torch.nn.Linear(k, n).eval().to(dtype)
                x = torch.randn(m, k, dtype=dtype)
                def call(x): return lin(x)
                torch._dynamo.reset()
                f = torch.compile(_own_code(call, "c"), backend="fxcpp")
                f(x)
                reps = max(50, int(2e8 / (k * n * dtype.itemsize + 1e5)))
                res[f"{str(dtype)[6:]} M={m} {k}x{n}"] = round(manual(f, x, reps), 2)
print(json.dumps(res))
