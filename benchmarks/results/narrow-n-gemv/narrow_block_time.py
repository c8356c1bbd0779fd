"""fp32 Linear with an output narrower than the GEMV's 4-row block (N = 1, 2, 3) and N = 4:
fxcpp's GEMV (FXCPP_KERNEL_CHOICE=ours) against eager, in one process, alternated over ROUNDS
rounds. Run on the build before and after the N-row blocks of gemv_rows.h.

    PYTHONPATH=. python benchmarks/results/narrow-n-gemv/narrow_block_time.py   # narrow_block_time_zen5_*.txt
    PYTHONPATH=. python benchmarks/results/narrow-n-gemv/narrow_block_time.py --ns 5,6,7,8,9,11 --ms 4096,16384
        # the last block of N = 5-11 (narrow_tail_time_zen5_*.txt)

Each cell: median over rounds of the median of 200 calls (40 at M = 4096, 20 at 16384) after 3 warm-up calls,
in us, of the whole compiled call (Dynamo's guards included, hence eager's lead at small M)."""
import argparse
import os
import statistics
import sys
import time

import torch

import fxcpp
from benchmarks.machine import machine_info

ROUNDS = 7


class Wrap(torch.nn.Module):  # a module of its own per mode: Dynamo keeps one compiled entry each
    def __init__(self, lin):
        super().__init__()
        self.lin = lin

    def forward(self, x):
        return self.lin(x)


def med(f, a, n):
    for _ in range(3):
        f(a)
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f(a)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


ap = argparse.ArgumentParser()
ap.add_argument("--ns", default="1,2,3,4")
ap.add_argument("--ms", default="64,512,4096,16384")
args = ap.parse_args()
torch.manual_seed(0)
m = machine_info(torch.get_num_threads(), " ".join(["PYTHONPATH=. python benchmarks/results/narrow-n-gemv/narrow_block_time.py"] + sys.argv[1:]))
print(m["cpu_model"], "|", fxcpp._C.host_info()["summary"], "| torch", m["torch_version"], "| commit",
      m["git_commit"][:10], m["date"])
print(f"{'M':>5} {'K':>5} {'N':>3} | {'default':>8} {'eager':>8} us | default/eager | default kernel")
for M in map(int, args.ms.split(",")):
    for K in (768, 2048):
        for N in map(int, args.ns.split(",")):
            lin = torch.nn.Linear(K, N).eval()
            a = torch.randn(M, K)
            fs = {}
            for mode in ("ours",):
                os.environ["FXCPP_KERNEL_CHOICE"] = mode
                torch._dynamo.reset()
                fs[mode] = torch.compile(Wrap(lin), backend="fxcpp")
                with torch.no_grad():
                    fs[mode](a)
            os.environ["FXCPP_KERNEL_CHOICE"] = "ours"
            impl = next((r.impl for r in fxcpp.explain(Wrap(lin), a).rows if r.kernel == "onednn" and r.impl), "?")
            fs["eager"] = lin
            n = 20 if M >= 16384 else 40 if M >= 4096 else 200
            r = {k: [] for k in fs}
            with torch.no_grad():
                for _ in range(ROUNDS):
                    for k, f in fs.items():
                        r[k].append(med(f, a, n))
            d, e = (statistics.median(r[k]) * 1e6 for k in ("ours", "eager"))
            print(f"{M:>5} {K:>5} {N:>3} | {d:>8.1f} {e:>8.1f} us | {d / e:>13.2f} | "
                  f"{impl.removeprefix('onednn ').split(' (')[0].split(',')[0]}", flush=True)
