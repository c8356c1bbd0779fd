"""One op's cost inside Dynamo's compiled frame against the same call in a loop of its own.

Each backend below is handed the Dynamo graph of `x + 1` (x: 16 fp32 values, under no_grad)
and returns a callable that ignores it and does one thing: allocate a 0-d tensor (the floor),
run a prebuilt fxcpp plan (ATen's add with a wrapped 1, the fused x * 2 + 1, ATen's abs), or
call ATen from Python. The same callables are also timed from Python directly. us per call,
median of 5 loops of 10000 calls, 2 threads.

    python benchmarks/results/overhead-aten-in-dynamo/aten_in_frame.py
"""
import os
import sys
import time
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../../../tests/cpp"))
import fxcpp  # noqa: E402,F401
from fxcpp import _C  # noqa: E402
from graphs import lowered  # noqa: E402

torch.set_num_threads(2)


def per_call(f, x):
    for _ in range(200):
        f(x)
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(10000):
            f(x)
        runs.append((time.perf_counter() - t0) / 10000 * 1e6)
    return sorted(runs)[2]


def own_code(fn, tag):
    code = fn.__code__.replace(co_name=f"{fn.__name__}_{tag}")
    return types.FunctionType(code, fn.__globals__, code.co_name)


def plus1(x):
    return x + 1


x = torch.randn(16)


def plan(fn):
    _, g = lowered(fn, x, static=set())
    _C.run_pipeline(g)
    return _C.Executable(g)


plans = {"plan: ATen add (x + 1)": plan(lambda t: t + 1), "plan: fused x * 2 + 1": plan(lambda t: t * 2 + 1),
         "plan: ATen abs": plan(lambda t: t.abs())}
add = torch.ops.aten.add.Tensor
callables = {"torch.empty(()) (the floor)": lambda *a: (torch.empty(()),), "Python: aten.add.Tensor(x, 1)": lambda *a: (add(a[0], 1),),
             "Python: x + 1": lambda *a: (a[0] + 1,)}
callables.update({k: (lambda e: (lambda *a: e(*a)))(e) for k, e in plans.items()})
print(f"host: {fxcpp._C.host_info()['summary']}; torch {torch.__version__}")
print(f"{'callable':34s} {'from Python':>12s} {'in Dynamo':>10s} {'in Dynamo - floor':>18s}")
with torch.no_grad():
    rows = {}
    for i, (name, c) in enumerate(callables.items()):
        torch._dynamo.reset()
        compiled = torch.compile(own_code(plus1, f"b{i}"), backend=lambda gm, ex, c=c: c)
        rows[name] = (per_call(c, x), per_call(compiled, x))
    floor = rows["torch.empty(()) (the floor)"][1]
    for name, (direct, inside) in rows.items():
        print(f"{name:34s} {direct:12.2f} {inside:10.2f} {inside - floor:18.2f}")
