"""A/B of the MKL bf16 path alone: fxcpp bf16 / fp32 per model, with MKL's bf16 GEMM (after:
the build of e7e183d) and the same tree with it switched off (before: mkl_bf16_gemm_available()
returning false, so the weight is widened per call for oneDNN's gemm as at a65d438). Installs
in /tmp/ab/{before,after} (benchmarks/ab_installs.py). Each child compiles fp32 and bf16 with
options={"cache": False} (no choice cache from earlier processes), then times them in one
interleaved loop (20 samples, each after one untimed call of its own).
    python benchmarks/results/mkl-bf16-gemm/ab_models.py [rounds] [models...]"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))
MODELS = ["gpt2", "bert_base", "vit_b16", "wav2vec2"]

if "--child" in sys.argv:
    import torch
    from benchmarks import suite

    torch.set_num_threads(2)
    names = [a for a in sys.argv[1:] if a != "--child"] or MODELS
    out = {}
    for name in names:
        spec, batch = [(s, b) for s, b in suite.find([name], False)][0]
        runs = {}
        for tag, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            torch.manual_seed(0)
            model, inputs = spec.build(batch)
            model, inputs = suite.to_dtype(model, inputs, dt, "cpu")
            torch._dynamo.reset()
            f = torch.compile(lambda *a, m=model: suite.call(spec, m, a), backend="fxcpp", options={"cache": False})
            with torch.no_grad():
                for _ in range(3):
                    f(*inputs)
            runs[tag] = (f, inputs, [])
        with torch.no_grad():
            for _ in range(20):
                for tag, (f, inputs, ts) in runs.items():
                    f(*inputs)
                    t = time.perf_counter()
                    f(*inputs)
                    ts.append(time.perf_counter() - t)
        m = {tag: statistics.median(ts) * 1e3 for tag, (_, _, ts) in runs.items()}
        out[f"{name} fp32 ms"], out[f"{name} bf16 ms"] = m["fp32"], m["bf16"]
        out[f"{name} bf16/fp32"] = m["bf16"] / m["fp32"]
    print(json.dumps(out))
else:
    import subprocess

    import fxcpp

    print("host:", fxcpp._C.host_info()["summary"])
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    models = sys.argv[2:] or MODELS
    runs = {"before": [], "after": []}
    for _ in range(rounds):
        for label in ("before", "after"):
            env = dict(os.environ, PYTHONPATH=f"/tmp/ab/{label}")
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", *models], env=env,
                               capture_output=True, text=True, check=True)
            runs[label].append(json.loads(p.stdout.strip().splitlines()[-1]))
    for k in runs["before"][0]:
        b = statistics.median(r[k] for r in runs["before"])
        a = statistics.median(r[k] for r in runs["after"])
        print(f"{k:24s} before {b:8.3f}  after {a:8.3f}")
