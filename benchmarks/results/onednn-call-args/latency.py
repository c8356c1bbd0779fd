"""Median ms per call of one model at batch 1 (compiled with fxcpp, under no_grad), for ab.sh.
Usage: python latency.py MODEL DTYPE   (MODEL: resnet20, mlp, bert_base; DTYPE: float32, bfloat16)"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
import torch  # noqa: E402

import fxcpp  # noqa: E402,F401  registers the backend
from benchmarks import suite  # noqa: E402


def main():
    name, dt = sys.argv[1], getattr(torch, sys.argv[2])
    torch.manual_seed(0)
    torch.set_num_threads(2)
    ((spec, batch),) = suite.find([name], quick=False)[:1]
    model, inputs = suite.to_dtype(*spec.build(1), dt, "cpu")
    c = torch.compile(model, backend="fxcpp")
    with torch.no_grad():
        for _ in range(30):
            suite.call(spec, c, inputs)
        n = max(10, int(0.05 / max(1e-6, _once(spec, c, inputs))))
        ts = []
        for _ in range(21):
            t = time.perf_counter()
            for _ in range(n):
                suite.call(spec, c, inputs)
            ts.append((time.perf_counter() - t) / n * 1e3)
    print(f"{name} {sys.argv[2]} {statistics.median(ts):.4f}")


def _once(spec, c, inputs):
    t = time.perf_counter()
    suite.call(spec, c, inputs)
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
