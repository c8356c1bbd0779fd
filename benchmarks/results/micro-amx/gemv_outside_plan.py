"""Where a compiled M = 1 Linear's time goes beyond its plan (issue 10's small-M rows, where
fxcpp is slower than eager through torch.compile though its plan alone is faster): nn.Linear(K,
4096) on a 1 x K fp32 input under no_grad, 2 threads. Per size, three rounds of: F.linear
(eager's kernel), the compiled call, the plan timed inside that call (a wrapper around
fxcpp's callable), the plan called directly, and the same frame compiled with a backend that
returns a constant (Dynamo's own floor), alone and right after each direct plan call (the
plan's weight stream has then passed through the caches). Medians of 300 calls, microseconds.

    python benchmarks/results/micro-amx/gemv_outside_plan.py > benchmarks/results/micro-amx/gemv_outside_plan.txt
"""
import json
import os
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)
from benchmarks.ab_installs import median_ms  # noqa: E402
from benchmarks.machine import machine_info  # noqa: E402

sys.path.remove(ROOT)
import fxcpp  # noqa: E402,F401
from fxcpp.compiler import backend as fxcpp_backend  # noqa: E402


def median_us(fn):
    return median_ms(fn) * 1e3  # 300 timed calls after 10 untimed ones


def median_us_after(before, fn, n=300):
    """fn's median time, each call right after an untimed call of before."""
    ts = []
    for _ in range(n):
        before()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e6


def main():
    torch.set_num_threads(2)
    print(json.dumps(machine_info(2, "benchmarks/results/micro-amx/gemv_outside_plan.py")))
    print(f"{'K x N':>11} {'F.linear':>9} {'compiled':>9} {'inside':>9} {'plan':>9} {'floor':>9} {'floor after plan':>17}  (us per call)")
    for k in (512, 1024, 4096):
        torch.manual_seed(0)
        lin, x = torch.nn.Linear(k, 4096).eval(), torch.randn(1, k)
        inner, plan = [], {}

        def timed(gm, example_inputs):
            p = plan["p"] = fxcpp_backend(gm, example_inputs)

            def run(*args):
                t0 = time.perf_counter()
                out = p(*args)
                inner.append(time.perf_counter() - t0)
                return out
            return run

        const = torch.zeros(1, 4096)
        with torch.no_grad():
            torch._dynamo.reset()
            compiled = torch.compile(eval(compile("lambda x: lin(x)", f"<fxcpp {k}>", "eval"), {"lin": lin}), backend=timed)
            floor = torch.compile(eval(compile("lambda x: lin(x)", f"<floor {k}>", "eval"), {"lin": lin}),
                                  backend=lambda gm, ex: (lambda *a: (const,)))
            compiled(x), floor(x)
            p = plan["p"]
            for _ in range(3):
                lin_us = median_us(lambda: torch.nn.functional.linear(x, lin.weight, lin.bias))
                inner.clear()
                comp_us = median_us(lambda: compiled(x))
                inside_us = statistics.median(inner[10:]) * 1e6
                plan_us = median_us(lambda: p(lin.weight, lin.bias, x))
                floor_us = median_us(lambda: floor(x))
                after_us = median_us_after(lambda: p(lin.weight, lin.bias, x), lambda: floor(x))
                print(f"{k:>5} x 4096 {lin_us:9.1f} {comp_us:9.1f} {inside_us:9.1f} {plan_us:9.1f} {floor_us:9.1f} {after_us:17.1f}")


if __name__ == "__main__":
    main()
