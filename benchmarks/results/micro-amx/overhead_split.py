"""overhead_floor.py's columns, and two that split fxcpp's share: its plan called straight from
Python (the C++ callable Dynamo gets, no Dynamo), and torch.empty(()) from Python (what the
floor_alloc backend adds to the floor, without Dynamo). Three rounds, 2 threads.

    python benchmarks/results/micro-amx/overhead_split.py > benchmarks/results/micro-amx/overhead_split.txt
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import overhead_floor as of  # noqa: E402

from benchmarks.machine import machine_info  # noqa: E402  (overhead_floor put the repo root on the path)


def main():
    torch.set_num_threads(2)
    print(json.dumps(machine_info(2, "benchmarks/results/micro-amx/overhead_split.py")))
    x = torch.randn(16)
    plan = {}

    def fxcpp_capturing(gm, example_inputs):
        from fxcpp.compiler import backend
        plan["fn"] = backend(gm, example_inputs)
        return plan["fn"]

    fns = {"eager": of.tiny}
    with torch.no_grad():
        for name, backend in (("dynamo_floor", of.floor_backend), ("floor_alloc", of.floor_alloc_backend),
                              ("fxcpp", fxcpp_capturing)):
            code = eval(compile("lambda x: tiny(x)", f"<{name}>", "eval"), {"tiny": of.tiny})  # a cache entry each
            fns[name] = torch.compile(code, backend=backend)
            fns[name](x)
        print(f"fxcpp's callable: {type(plan['fn']).__module__}.{type(plan['fn']).__name__}")
        fns["plan_direct"] = plan["fn"]
        fns["torch.empty"] = lambda _: torch.empty(())
        print("us per call: " + "  ".join(f"{n:>12}" for n in fns))
        for _ in range(3):
            print("             " + "  ".join(f"{of.us(fn, x):12.2f}" for fn in fns.values()))


if __name__ == "__main__":
    main()
