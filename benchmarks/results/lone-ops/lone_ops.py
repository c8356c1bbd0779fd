"""One op alone: the fused kernel against ATen's, per op, dtype and size (for cpu_ops.cpp's
faster_fused_alone). The fused side computes op(x) * 2 (a second op, so that the fusion takes it
whatever its lone-op rule), the ATen side op(x) alone in a plan (_C.Executable, the pipeline run
on the ATen graph) or, where the plan fuses it, the op called directly. Ratio < 1: the fused
kernel, with an extra multiply, is faster than ATen's op. Best of 5 timed loops, 2 threads.

    python benchmarks/results/lone-ops/lone_ops.py > benchmarks/results/lone-ops/lone_ops.txt
    python benchmarks/results/lone-ops/lone_ops.py --sizes 4096,8192,16384,32768,65536 tanh   (some ops, 1-d sizes)
"""
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/cpp"))
import time
import torch
from graphs import lowered
from fxcpp import _C
import torch.nn.functional as F
torch.set_num_threads(2)
def best(f, n):
    for _ in range(3): f()
    b = 1e9
    for r in range(5):
        t = time.perf_counter()
        for _ in range(n): f()
        b = min(b, (time.perf_counter() - t) / n)
    return b * 1e6
def fused(fn, xs):
    _, g = lowered(fn, *xs, static=set()); _C.run_pipeline(g); ex = _C.Executable(g)
    assert g.cpu_fused_nodes(), "not fused"
    return lambda: ex.run(xs)
def aten(fn, xs):
    _, g = lowered(fn, *xs, static=set()); _C.run_pipeline(g); ex = _C.Executable(g)
    if g.cpu_fused_nodes(): return lambda: fn(*xs)  # 32 MiB and up: the plan fuses it already (fresh mapping)
    return lambda: ex.run(xs)
ops = {"exp": torch.exp, "expm1": torch.expm1, "log": torch.log, "log1p": torch.log1p,
       "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "sin": torch.sin, "cos": torch.cos,
       "tanh": torch.tanh, "sigmoid": torch.sigmoid, "erf": torch.erf, "silu": F.silu, "gelu": F.gelu,
       "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "hardswish": F.hardswish, "mish": F.mish,
       "softplus": F.softplus, "elu": F.elu, "relu": torch.relu, "abs": torch.abs}
sizes = [(4096,), (65536,), (1, 512, 3199), (2048, 2048)]
args = sys.argv[1:]
if "--sizes" in args:
    i = args.index("--sizes")
    sizes = [(int(n),) for n in args[i + 1].split(",")]
    del args[i:i + 2]
if args:
    ops = {k: ops[k] for k in args}
import fxcpp
print("host:", fxcpp._C.host_info()["summary"], "torch", torch.__version__)
print("ratio = fused op(x)*2 / plan with ATen op(x) alone; <1: the fused lone op is faster")
print("columns:", ", ".join(str(list(s)) for s in sizes), "elements; in parentheses ATen's time")
for dt in (torch.float32, torch.bfloat16, torch.float16):
    for name, op in ops.items():
        row = []
        for s in sizes:
            x = torch.rand(s).add_(0.01).to(dt) if name in ("log", "sqrt", "rsqrt", "reciprocal") else torch.randn(s).to(dt)
            n = max(3, int(2e7 / x.numel()) if x.numel() < 1e6 else 10)
            a = best(aten(lambda t: op(t), [x]), n); f = best(fused(lambda t: op(t) * 2, [x]), n)
            row.append(f"{f/a:5.2f} ({a:8.1f}us)")
        print(f"{str(dt)[6:]:8s} {name:11s} " + "  ".join(row), flush=True)
