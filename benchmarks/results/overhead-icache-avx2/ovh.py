"""make micro's tiny graph, ((x + 1) * 2).relu().sum() on 16 fp32 values under no_grad, called n
times in one mode: eager, floor_alloc (Dynamo with a backend returning a fresh 0-d tensor and
doing nothing else), fxcpp (Dynamo calling fxcpp's plan directly), plan (the plan called from
Python, no Dynamo), empty (torch.empty(()) from Python). Under callgrind, run with n = 0 and
n = 10000 and subtract (callgrind_diff.py):

    valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file=cg.fxcpp.10000 \
        $(python -c 'import sys; print(sys.executable)') ovh.py fxcpp 10000
"""
import sys
import time

import torch

import fxcpp  # noqa: F401  (registers the backend)


def tiny(x):
    return ((x + 1) * 2).relu().sum()


def floor_alloc(gm, ex):  # Dynamo's floor with one fresh output, as fxcpp's plan returns
    return lambda *args: (torch.empty(()),)


plan = {}


def fxcpp_capturing(gm, ex):  # fxcpp's backend, keeping what it gives Dynamo (the plan)
    from fxcpp.compiler import backend
    plan["fn"] = backend(gm, ex)
    return plan["fn"]


def main():
    mode, n = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(2)
    x = torch.randn(16)
    with torch.no_grad():
        if mode == "eager":
            f = tiny
        elif mode == "floor_alloc":
            f = torch.compile(lambda x: tiny(x), backend=floor_alloc)
        elif mode == "fxcpp":
            f = torch.compile(lambda x: tiny(x), backend=fxcpp_capturing)
        elif mode == "plan":
            torch.compile(lambda x: tiny(x), backend=fxcpp_capturing)(x)
            f = plan["fn"]
        elif mode == "empty":
            f = lambda x: torch.empty(())  # noqa: E731
        for _ in range(100):
            f(x)
        t = time.perf_counter()
        for _ in range(n):
            f(x)
        dt = time.perf_counter() - t
    print(mode, f"{dt / max(n, 1) * 1e6:.2f} us/call", type(plan.get("fn")))


if __name__ == "__main__":
    main()
