"""fxcpp's bf16 / fp32 time per suite model, the two dtypes timed in one interleaved loop, without
eager (whose bf16 on an AVX2-only host is emulated: minutes a model for GPT-2 and ConvNeXt).
    python benchmarks/results/dense-avx2-amd-all/fxcpp_ratio.py gpt2 convnext_tiny bert_base:8 ...
(name:batch picks a batch of the suite, the first otherwise; added on 2026-11-30, when the
ratio printed two decimals, now three)"""
import os, statistics, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))
import torch
import fxcpp
from benchmarks import suite

torch.set_num_threads(2)
print("host:", fxcpp._C.host_info()["summary"], "torch", torch.__version__)
for name in sys.argv[1:]:
    name, _, want = name.partition(":")
    spec, batch = [(s, b) for s, b in suite.find([name], False) if not want or b == int(want)][0]
    runs = {}
    for tag, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        torch.manual_seed(0)
        model, inputs = spec.build(batch)
        model, inputs = suite.to_dtype(model, inputs, dt, "cpu")
        torch._dynamo.reset()
        f = torch.compile(lambda *a, m=model: suite.call(spec, m, a), backend="fxcpp")
        with torch.no_grad():
            for _ in range(3):
                f(*inputs)
        runs[tag] = (f, inputs, [])
    with torch.no_grad():
        for _ in range(30):
            for tag, (f, inputs, ts) in runs.items():
                f(*inputs)  # one untimed call of its own first, as the harness's settle
                t = time.perf_counter(); f(*inputs); ts.append(time.perf_counter() - t)
    m = {tag: statistics.median(ts) * 1e3 for tag, (_, _, ts) in runs.items()}
    print(f"{name} b{batch}: fxcpp fp32 {m['fp32']:.2f} ms, bf16 {m['bf16']:.2f} ms, bf16/fp32 {m['bf16'] / m['fp32']:.3f}", flush=True)
