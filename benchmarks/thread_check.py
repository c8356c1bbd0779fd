"""Does this machine scale from 1 to N threads? A GEMM of BERT-base's size timed at each
thread count, with OpenMP's default (spinning) wait policy. On a VM whose vCPUs share
one physical core, spinning threads slow the GEMM down instead of speeding it up.

    python -m benchmarks.thread_check [--out benchmarks/results/thread_check.json]
"""
import argparse
import json
import time

import torch

from .machine import machine_info, physical_cores


def addmm_ms(threads: int, reps: int = 20) -> float:
    torch.set_num_threads(threads)
    a, w, b = torch.randn(128, 768), torch.randn(768, 768), torch.randn(768)
    for _ in range(3):
        torch.addmm(b, a, w)
    t0 = time.perf_counter()
    for _ in range(reps):
        torch.addmm(b, a, w)
    return (time.perf_counter() - t0) / reps * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    res = {"machine": machine_info(physical_cores(), "python -m benchmarks.thread_check"),
           "addmm_128x768x768_ms": {t: addmm_ms(t) for t in range(1, physical_cores() + 1)}}
    print(json.dumps(res["addmm_128x768x768_ms"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
