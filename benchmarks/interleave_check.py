"""One suite case, eager against fxcpp, timed the harness's way (first_call, then interleaved
median), with the path fxcpp's first call chose for each GEMM/convolution.

    python -m benchmarks.interleave_check --model mlp --batch 1 --dtype bf16 [--runs 3]

Where a case is slower under fxcpp than eager: run it with FXCPP_KERNEL_CHOICE=aten (eager's
kernels under fxcpp's call machinery) to separate the kernels' share from the call's fixed cost.
"""
import argparse
import statistics

import torch

from . import configs, suite
from .harness import DTYPES, first_call, timed


def once(model_name: str, batch: int, dtype: str) -> tuple[dict, list[str]]:
    from fxcpp.explain import Report

    torch._dynamo.reset()
    spec = next(s for s in suite.SUITE if s.name == model_name)
    model, inputs = spec.build(batch)
    model, inputs = suite.to_dtype(model, inputs, DTYPES[dtype], "cpu")
    rec = []
    with torch.no_grad():
        cfg = configs.CONFIGS["fxcpp"]
        fn = cfg.compile(lambda *x: suite.call(spec, model, x))
        first_call(cfg, fn, inputs, "cpu", rec)
        samples = timed({"eager": lambda *x: suite.call(spec, model, x), "fxcpp": fn}, inputs, "cpu", 30, 3)
    medians = {k: statistics.median(v) * 1e3 for k, v in samples.items()}
    return medians, [f"{r.node}: {r.impl}" for r in Report(rec).rows if r.impl]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args(argv)
    for _ in range(a.runs):
        ms, paths = once(a.model, a.batch, a.dtype)
        print(f"eager {ms['eager']:.3f} ms, fxcpp {ms['fxcpp']:.3f} ms ({ms['fxcpp'] / ms['eager']:.2f}x)")
        for p in paths:
            print("  " + p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
