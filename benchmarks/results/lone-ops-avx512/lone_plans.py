"""One op alone, plan against plan, on whatever host runs it: us per call of _C.Executable.run on
the ATen graph of op(x) (fused or ATen, whatever the installed build's rule picks) and of op(x) * 2
(always fused), per op, dtype and size; best of 5 loops, 2 threads; one JSON line. Run with two
installs alternating, the build under test and one whose faster_fused_alone returns false (so its
op(x) plan is ATen's kernel), then compare.py:

    for r in 1 2 3; do for v in current nolone; do
      echo "$v $(PYTHONPATH=/tmp/ab/$v python benchmarks/results/lone-ops-avx512/lone_plans.py)"; done; done > raw.txt
    python benchmarks/results/lone-ops-avx512/compare.py raw.txt

Arguments, if any, name the ops to run (the rest are skipped).
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
OPS = {"exp": torch.exp, "expm1": torch.expm1, "log": torch.log, "log1p": torch.log1p,
       "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "sin": torch.sin, "cos": torch.cos,
       "tanh": torch.tanh, "sigmoid": torch.sigmoid, "erf": torch.erf, "silu": F.silu, "gelu": F.gelu,
       "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "hardswish": F.hardswish, "mish": F.mish,
       "softplus": F.softplus, "elu": F.elu, "relu": torch.relu, "abs": torch.abs}
SIZES = [(4096,), (65536,), (1, 512, 3199), (2048, 2048)]
if sys.argv[1:]:
    OPS = {k: OPS[k] for k in sys.argv[1:]}


def plan(fn, x):
    _, g = lowered(fn, x, static=set())
    _C.run_pipeline(g)
    return _C.Executable(g), bool(g.cpu_fused_nodes())


def best(ex, xs, n):
    return best_us(lambda: ex.run(xs), n)


out = {"host": _C.host_info()["summary"], "torch": torch.__version__}
for dt in (torch.float32, torch.bfloat16, torch.float16):
    for name, op in OPS.items():
        for s in SIZES:
            torch.manual_seed(0)
            pos = name in ("log", "sqrt", "rsqrt", "reciprocal")
            x = (torch.rand(s).add_(0.01) if pos else torch.randn(s)).to(dt)
            n = max(3, int(2e7 / x.numel()) if x.numel() < 1e6 else 10)
            alone, fused_alone = plan(lambda t: op(t), x)
            twice, fused_twice = plan(lambda t: op(t) * 2, x)
            assert fused_twice, (name, dt)
            out[f"{str(dt)[6:]} {name} {x.numel()}"] = {"alone": best(alone, [x], n), "alone_fused": fused_alone,
                                                        "times2": best(twice, [x], n)}
print(json.dumps(out), flush=True)
