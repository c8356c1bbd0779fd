"""Where the time of a compiled small-M Linear goes (issue 10's GEMV rows on the Intel AMX host,
where `make micro` has fxcpp at 1.03-1.37x eager's time at M = 1 in fp32): the same
nn.Linear(K, K) on a [M, K] fp32 input, eager, torch.compile with backend="eager" (Dynamo
alone), and fxcpp with each path forced (FXCPP_KERNEL_CHOICE: our GEMV, eager's ATen ops
inside our plan, oneDNN). Per cell the lower of two interleaved rounds, each the median of
3000 calls; 2 threads.

    python benchmarks/results/micro-amx/call_path.py > benchmarks/results/micro-amx/call_path.txt
"""
import json
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)
from benchmarks.machine import machine_info  # noqa: E402

sys.path.remove(ROOT)
import fxcpp  # noqa: E402,F401


def median_us(fn, x, n=3000):
    for _ in range(50):
        fn(x)
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn(x)
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2] * 1e6


def main():
    torch.set_num_threads(2)
    print(json.dumps(machine_info(2, "benchmarks/results/micro-amx/call_path.py")))
    print(f"{'K x K':>11} {'M':>3} {'eager':>8} {'dynamo':>8} {'gemv':>8} {'aten':>8} {'onednn':>8}  (us per call)")
    for k in (512, 1024, 2048):
        for m in (1, 4):
            torch.manual_seed(0)
            lin = torch.nn.Linear(k, k).eval()
            x = torch.randn(m, k)
            fns = {"eager": lin}
            with torch.no_grad():
                torch._dynamo.reset()
                for choice in ("gemv", "aten", "onednn"):
                    os.environ["FXCPP_KERNEL_CHOICE"] = choice
                    call = eval(compile("lambda x: lin(x)", f"<{choice} {k} {m}>", "eval"), {"lin": lin})
                    fns[choice] = torch.compile(call, backend="fxcpp")
                    fns[choice](x)  # compiled and measured while the choice is set
                os.environ.pop("FXCPP_KERNEL_CHOICE")
                fns["dynamo"] = torch.compile(eval(compile("lambda x: lin(x)", f"<dynamo {k} {m}>", "eval"),
                                                   {"lin": lin}), backend="eager")
                rounds = {name: [] for name in fns}
                for _ in range(2):
                    for name, fn in fns.items():
                        rounds[name].append(median_us(fn, x))
            cells = " ".join(f"{min(rounds[n]):8.1f}" for n in ("eager", "dynamo", "gemv", "aten", "onednn"))
            print(f"{k:>5} x {k:<5} {m:>3} {cells}")


if __name__ == "__main__":
    main()
