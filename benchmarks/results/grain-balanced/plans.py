"""Pointwise programs with a transcendental (and one without) at 2K-64K elements: us per call of
the plan (_C.Executable.run), best of 7 loops, 2 threads, one JSON line for the installed build.
Alternating two installs (README):

    for r in 1 2 3; do for v in before after; do
      echo "$v $(PYTHONPATH=/tmp/ab/$v python benchmarks/results/grain-balanced/plans.py)"; done; done >> ab_raw.txt
    python benchmarks/results/grain-balanced/compare.py ab_raw.txt

`--more`: other programs (SiLU, erf-GELU, Mish, softplus, sin, log, exp * x, exp + sigmoid) at
4K-12K elements (grain-balanced-avx512/). Other arguments keep only the cases whose name
contains one of them ("float32 tanh").
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../../../tests/cpp"))
sys.path.append(os.path.join(HERE, "../../.."))  # benchmarks.ab_installs; the install under test stays first
import torch
import torch.nn.functional as F
from graphs import lowered

from benchmarks.ab_installs import best_us
from fxcpp import _C

torch.set_num_threads(2)
args = sys.argv[1:]
if "--more" in args:
    args.remove("--more")
    OPS = {"silu": lambda x: F.silu(x), "gelu_erf*2": lambda x: F.gelu(x) * 2, "mish": lambda x: F.mish(x),
           "softplus": lambda x: F.softplus(x), "sin": lambda x: torch.sin(x),
           "log*2": lambda x: torch.log(x.abs() + 1) * 2, "exp*x": lambda x: torch.exp(x) * x,
           "exp+sigmoid": lambda x: torch.exp(x) + torch.sigmoid(x), "x*2+1 (no transcendental)": lambda x: x * 2 + 1}
    SHAPES = [(4096,), (4097,), (6144,), (8192,), (8193,), (12288,)]
else:
    OPS = {"exp": torch.exp, "sigmoid": torch.sigmoid, "tanh*2": lambda x: torch.tanh(x) * 2,
           "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "x*2+1 (no transcendental)": lambda x: x * 2 + 1}
    SHAPES = [(2048,), (4096,), (4097,), (6144,), (8192,), (8193,), (12288,), (16385,), (32769,), (65536,), (5, 3001),
              (3, 7, 1025)]
res = {}
for dtype in (torch.float32, torch.bfloat16):
    for name, op in OPS.items():
        for shape in SHAPES:
            key = f"{str(dtype)[6:]} {name} {list(shape)}"
            if args and not any(a in key for a in args):
                continue
            x = torch.randn(*shape).to(dtype)
            _, g = lowered(op, x, static=set())
            _C.run_pipeline(g)
            ex = _C.Executable(g)
            xs = [x]
            res[key] = best_us(lambda: ex.run(xs), max(200, int(2e6 / (x.numel() + 500))), loops=7, warmup=20)
print(json.dumps(res))
