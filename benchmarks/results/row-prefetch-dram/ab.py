"""Packed-row programs with the per-row prefetch of the next block on and off, in one process
(fxcpp._C._set_row_prefetch), alternating per timing, with a triad timed before each pair (this
VM's bandwidth drifts by tens of percent from minute to minute). Each case: median time over the
rounds for each setting, and the median of the per-round ratios on/off (paired, so drift between
rounds cancels). Sizes: 1024 rows (the call within the last-level cache: the path does not run),
4096 and 16384 (more than the cache; bf16 at 4096 moves less than it for rms and bias_relu).

    python benchmarks/results/row-prefetch-dram/ab.py --rounds 9 > benchmarks/results/row-prefetch-dram/ab.txt
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

H = 768


def add_ln(x, r, w, b):
    return torch.nn.functional.layer_norm(x + r, (H,), w, b)


def rms(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def bias_relu(x, w, b):
    return (x * w + b).relu()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    print(f"host: {_C.host_info()['summary']}; fxcpp {fxcpp.__file__}; 2 threads; {args.rounds} rounds")
    print("| case | rows | dtype | MB moved | off: us (% triad) | on: us (% triad) | on / off (paired median, range) |")
    print("|---|---|---|---|---|---|---|")
    for R in (1024, 4096, 16384):
        for dt, s in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
            for name, fn, xs in (("residual LayerNorm", add_ln, (torch.randn(R, H), torch.randn(R, H), torch.randn(H), torch.randn(H))),
                                 ("RMSNorm", rms, (torch.randn(R, H), torch.randn(H))),
                                 ("bias + ReLU", bias_relu, (torch.randn(R, H), torch.randn(H), torch.randn(H)))):
                xs = [a.to(dt) for a in xs]
                torch._dynamo.reset()
                c = torch.compile(fn, backend="fxcpp")
                c(*xs)
                moved = sum(a.nbytes for a in xs) + xs[0].nbytes
                t = {True: [], False: []}
                pct = {True: [], False: []}
                ratios = []
                for _ in range(args.rounds):
                    triad = native.stream_triad(2, 64, 10)["gbps_median"]
                    for on in (False, True):
                        _C._set_row_prefetch(on)
                        c(*xs)
                        sec = tb.Timer("c(*a)", globals=dict(c=c, a=xs), num_threads=2).blocked_autorange(min_run_time=0.15).median
                        t[on].append(sec)
                        pct[on].append(100 * moved / sec / 1e9 / triad)
                    ratios.append(t[True][-1] / t[False][-1])
                _C._set_row_prefetch(True)
                med = statistics.median
                print(f"| {name} | {R} | {s} | {moved / 1e6:.1f} | {med(t[False]) * 1e6:.1f} ({med(pct[False]):.0f}%) | "
                      f"{med(t[True]) * 1e6:.1f} ({med(pct[True]):.0f}%) | {med(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |",
                      flush=True)


if __name__ == "__main__":
    main()
