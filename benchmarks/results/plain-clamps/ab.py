"""A/B of the per-call NaN check that lets relu/clip/hardsigmoid run as oneDNN's own clamps
(commit 98cce2e) against the NaN-preserving chain at every call (FXCPP_PLAIN_CLAMPS=0, the
behaviour before it). Each round runs one process per setting, alternating; a process builds
the models in fp32 and bf16, compiles them with fxcpp (an empty choice cache of its own) and
times every (model, dtype) interleaved, 15 samples each after one settling call. Reported: the
median over rounds of each process's median, in ms, and bf16 / fp32.

    python benchmarks/results/plain-clamps/ab.py [rounds] > benchmarks/results/plain-clamps/ab.txt
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODELS = ["mobilenetv2", "resnet20", "resnet50"]


def child():
    import torch

    sys.path.insert(0, ROOT)
    from benchmarks import suite

    torch.set_num_threads(2)
    fns = {}
    for name in MODELS:
        spec = next(s for s in suite.SUITE if s.name == name)
        for dt, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            model, inputs = spec.build(spec.batches[0])
            model, inputs = suite.to_dtype(model, inputs, dtype, "cpu")
            # A code object of its own per (model, dtype): one shared lambda would make every call
            # walk Dynamo's cache entries of the others first.
            ns = {}
            exec("def call(*a):\n    return suite.call(spec, model, a)", {"suite": suite, "spec": spec, "model": model}, ns)
            f = torch.compile(ns["call"], backend="fxcpp")
            with torch.no_grad():
                f(*inputs)
            fns[(name, dt)] = (f, inputs)
    samples = {k: [] for k in fns}
    with torch.no_grad():
        for _ in range(15):
            for k, (f, inputs) in fns.items():
                f(*inputs)  # settle: the sample times this configuration, not its neighbour's caches
                t0 = time.perf_counter()
                f(*inputs)
                samples[k].append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"ms": {f"{m}/{d}": statistics.median(v) for (m, d), v in samples.items()}}))


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    runs = {"chain at every call (FXCPP_PLAIN_CLAMPS=0)": [], "plain clamps where checked": []}
    for _ in range(rounds):
        for label, flag in (("chain at every call (FXCPP_PLAIN_CLAMPS=0)", "0"), ("plain clamps where checked", "1")):
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, FXCPP_PLAIN_CLAMPS=flag, FXCPP_CACHE_DIR=cache)
                out = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True,
                                     check=True, cwd=ROOT)
            runs[label].append(json.loads(out.stdout.strip().splitlines()[-1])["ms"])
    import torch
    sys.path.insert(0, ROOT)
    from fxcpp import _C

    print(f"host: {_C.host_info()['summary']}; torch {torch.__version__}; {rounds} rounds; median over rounds, ms")
    print("| model | setting | fp32 | bf16 | bf16 / fp32 |")
    print("|---|---|---|---|---|")
    for m in MODELS:
        for label, rs in runs.items():
            f = statistics.median(r[f"{m}/fp32"] for r in rs)
            b = statistics.median(r[f"{m}/bf16"] for r in rs)
            print(f"| {m} | {label} | {f:.3f} | {b:.3f} | {b / f:.2f} |")


if __name__ == "__main__":
    child() if "--child" in sys.argv else main()
