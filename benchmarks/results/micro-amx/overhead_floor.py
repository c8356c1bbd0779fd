"""Issue 12's tiny graph (make micro's host-overhead row) against Dynamo's own floor on this
host: ((x + 1) * 2).relu().sum() on 16 fp32 values under no_grad, eager; torch.compile with
backend="eager" (Dynamo, then the FX graph's ops in Python); a backend that returns a constant
and does no work (Dynamo's guards and frame alone: what no backend can go under); the same
returning a fresh 0-d tensor at each call (an output's allocation and release); and fxcpp
(called directly, without aot's wrappers). torch.utils.benchmark medians, two rounds, 2 threads.

    python benchmarks/results/micro-amx/overhead_floor.py > benchmarks/results/micro-amx/overhead_floor.txt
"""
import json
import os
import sys

import torch
import torch.utils.benchmark as tb

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)
from benchmarks.machine import machine_info  # noqa: E402

sys.path.remove(ROOT)
import fxcpp  # noqa: E402,F401


def tiny(x):
    return ((x + 1) * 2).relu().sum()


def floor_backend(gm, example_inputs):
    out = torch.zeros(())
    return lambda *args: (out,)


def floor_alloc_backend(gm, example_inputs):  # the floor, returning a fresh 0-d tensor as fxcpp's plan does
    return lambda *args: (torch.empty(()),)


def us(fn, x):
    return tb.Timer("fn(x)", globals={"fn": fn, "x": x}, num_threads=2).blocked_autorange(min_run_time=0.7).median * 1e6


def main():
    torch.set_num_threads(2)
    print(json.dumps(machine_info(2, "benchmarks/results/micro-amx/overhead_floor.py")))
    x = torch.randn(16)
    fns = {"eager": tiny}
    with torch.no_grad():
        for name, backend in (("dynamo_eager", "eager"), ("dynamo_floor", floor_backend),
                              ("floor_alloc", floor_alloc_backend), ("fxcpp", "fxcpp")):
            code = eval(compile("lambda x: tiny(x)", f"<{name}>", "eval"), {"tiny": tiny})  # a cache entry each
            fns[name] = torch.compile(code, backend=backend)
            fns[name](x)
        print("us per call: " + "  ".join(f"{n:>12}" for n in fns))
        for _ in range(2):
            print("             " + "  ".join(f"{us(fn, x):12.2f}" for fn in fns.values()))


if __name__ == "__main__":
    main()
