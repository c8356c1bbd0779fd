"""Pointwise programs of cheap ops (run_pointwise, interp.h) with the next block's input lines asked
for at each block's start on and off, in one process (fxcpp._C._set_row_prefetch turns off every
DRAM prefetch of cheap programs), alternating per timing, a triad timed before each pair (this VM's
bandwidth drifts from minute to minute). Each case: median time per setting over the rounds, and
the median of the per-round ratios on/off (paired: drift between rounds cancels). 1M elements: the
call within the last-level cache (the path does not run); 16M: 64 MiB a tensor, from DRAM.

    python benchmarks/results/pointwise-prefetch-dram/ab.py --rounds 9 > benchmarks/results/pointwise-prefetch-dram/ab.txt
"""
import argparse
import os
import statistics
import sys

import torch
import torch.utils.benchmark as tb

import fxcpp
from fxcpp import _C

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from benchmarks.micro import native  # noqa: E402  the STREAM triad make micro times


def chain(x):  # make micro's 4-op chain
    return (torch.relu(x * 2 + 1) - 0.5) * x


def fma3(x, y, z):
    return x * y + z


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    print(f"host: {_C.host_info()['summary']}; fxcpp {fxcpp.__file__}; 2 threads; {args.rounds} rounds")
    print("| case | elements | dtype | MB moved | off: ms (% triad) | on: ms (% triad) | on / off (paired median, range) |")
    print("|---|---|---|---|---|---|---|")
    for n in (1 << 20, 1 << 24):
        for dt, s in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
            for name, fn, k in (("4-op chain", chain, 1), ("x * y + z", fma3, 3)):
                xs = [torch.randn(n).to(dt) for _ in range(k)]
                torch._dynamo.reset()
                c = torch.compile(fn, backend="fxcpp")
                with torch.no_grad():
                    c(*xs)
                    moved = sum(a.nbytes for a in xs) + xs[0].nbytes
                    t = {True: [], False: []}
                    pct = {True: [], False: []}
                    ratios = []
                    paced0 = _C.cpu_fused_stats()["pointwise_paced_blocks"]
                    for _ in range(args.rounds):
                        triad = native.stream_triad(2, 64, 10)["gbps_median"]
                        for on in (False, True):
                            _C._set_row_prefetch(on)
                            c(*xs)
                            sec = tb.Timer("c(*a)", globals=dict(c=c, a=xs), num_threads=2).blocked_autorange(min_run_time=0.3).median
                            t[on].append(sec)
                            pct[on].append(100 * moved / sec / 1e9 / triad)
                        ratios.append(t[True][-1] / t[False][-1])
                    _C._set_row_prefetch(True)
                    fired = _C.cpu_fused_stats()["pointwise_paced_blocks"] > paced0
                med = statistics.median
                print(f"| {name} | {n} | {s} | {moved / 1e6:.1f} | {med(t[False]) * 1e3:.2f} ({med(pct[False]):.0f}%) | "
                      f"{med(t[True]) * 1e3:.2f} ({med(pct[True]):.0f}%) | {med(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
                      f"{'' if fired else ' (path not taken)'} |", flush=True)


if __name__ == "__main__":
    main()
