"""A/B of the bounds a oneDNN conv/Linear records on its output for the next one (commit
9953e8f, runtime/value_bounds.h), which spare that one its per-call read of its input before the
plain clamps, against reading every input as before (_C._set_value_bounds(False)). One process:
each (model, dtype) compiled once with fxcpp, then samples of both settings interleaved call by
call (the order alternating), each after one settling call of its own setting. Reported: the
median of each setting, on / off, and the checks per call that took a bound or read an input.

    python benchmarks/results/value-bounds/ab.py [samples] > benchmarks/results/value-bounds/ab.txt
"""
import os
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)
MODELS = ["mobilenetv2", "resnet20", "resnet50", "convnext_tiny"]


def main():
    from benchmarks import suite
    from fxcpp import _C

    samples = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    torch.set_num_threads(2)
    print(f"host: {_C.host_info()['summary']}; torch {torch.__version__}; {samples} samples per setting; ms")
    print("| model | dtype | reads off | on: bounds taken / reads | off ms | on ms | on / off |")
    print("|---|---|---|---|---|---|---|")
    for name in MODELS:
        spec = next(s for s in suite.SUITE if s.name == name)
        for dt, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            model, inputs = spec.build(spec.batches[0])
            model, inputs = suite.to_dtype(model, inputs, dtype, "cpu")
            ns = {}
            exec("def call(*a):\n    return suite.call(spec, model, a)", {"suite": suite, "spec": spec, "model": model}, ns)
            f = torch.compile(ns["call"], backend="fxcpp")
            counts = {}
            times = {True: [], False: []}
            with torch.no_grad():
                f(*inputs)
                for on in (True, False):
                    _C._set_value_bounds(on)
                    f(*inputs)
                    s0 = _C.onednn_stats()
                    f(*inputs)
                    s1 = _C.onednn_stats()
                    counts[on] = tuple(s1[k] - s0[k] for k in ("input_bounds_known", "input_reads"))
                for i in range(samples):
                    for on in ((True, False) if i % 2 else (False, True)):
                        _C._set_value_bounds(on)
                        f(*inputs)
                        t0 = time.perf_counter()
                        f(*inputs)
                        times[on].append((time.perf_counter() - t0) * 1e3)
            _C._set_value_bounds(True)
            off, on = statistics.median(times[False]), statistics.median(times[True])
            print(f"| {name} | {dt} | {counts[False][1]} | {counts[True][0]} / {counts[True][1]} | {off:.3f} | {on:.3f} | "
                  f"{on / off:.3f} |", flush=True)
            torch._dynamo.reset()


if __name__ == "__main__":
    main()
