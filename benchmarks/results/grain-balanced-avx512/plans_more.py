"""More pointwise programs with a transcendental (and one without) at 4K-12K elements (plans.py, other ops):
the plan (_C.Executable.run), best of 7 loops, 2 threads, one JSON line for the installed build.
Alternating two installs (README.md here):

    for r in 1 2 3; do for v in before after; do
      echo "$v $(PYTHONPATH=/tmp/ab/$v python benchmarks/results/grain-balanced-avx512/plans_more.py)"; done; done >> more_raw.txt
    python benchmarks/results/grain-balanced/compare.py more_raw.txt

Arguments, if any, keep only the cases whose name contains one of them ("float32 tanh").
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/cpp"))
import torch
import torch.nn.functional as F
from graphs import lowered
from fxcpp import _C

torch.set_num_threads(2)
OPS = {"silu": lambda x: F.silu(x), "gelu_erf*2": lambda x: F.gelu(x) * 2, "mish": lambda x: F.mish(x), "softplus": lambda x: F.softplus(x), "sin": lambda x: torch.sin(x), "log*2": lambda x: torch.log(x.abs() + 1) * 2, "exp*x": lambda x: torch.exp(x) * x, "exp+sigmoid": lambda x: torch.exp(x) + torch.sigmoid(x),
       "x*2+1 (no transcendental)": lambda x: x * 2 + 1}
SHAPES = [(4096,), (4097,), (6144,), (8192,), (8193,), (12288,)]
res = {}
for dtype in (torch.float32, torch.bfloat16):
    for name, op in OPS.items():
        for shape in SHAPES:
            key = f"{str(dtype)[6:]} {name} {list(shape)}"
            if sys.argv[1:] and not any(a in key for a in sys.argv[1:]):
                continue
            x = torch.randn(*shape).to(dtype)
            _, g = lowered(op, x, static=set())
            _C.run_pipeline(g)
            ex = _C.Executable(g)
            xs = [x]
            reps = max(200, int(2e6 / (x.numel() + 500)))
            for _ in range(20):
                ex.run(xs)
            b = 1e9
            for r in range(7):
                t = time.perf_counter()
                for _ in range(reps):
                    ex.run(xs)
                b = min(b, (time.perf_counter() - t) / reps)
            res[key] = round(b * 1e6, 2)
print(json.dumps(res))
