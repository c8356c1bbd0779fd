"""One nn.Linear per GPT-2/BERT shape under fxcpp, fp32 and bf16 timed interleaved (60 rounds, medians, ms).
    python benchmarks/results/bf16-ratio-avx512-skylake/linear_ratio.py  (linear_ratio.txt)"""
import torch, time, statistics, fxcpp
torch.set_num_threads(2)
res = {}
for (M, K, N) in ((1024, 768, 768), (1024, 768, 3072), (1024, 3072, 768), (1024, 768, 2304)):
    fs = {}
    for dt in (torch.float32, torch.bfloat16):
        torch.manual_seed(0)
        lin = torch.nn.Linear(K, N).to(dt).eval(); x = torch.randn(M, K).to(dt)
        torch._dynamo.reset()
        c = torch.compile(lambda x, l=lin: l(x), backend="fxcpp")
        with torch.no_grad():
            for _ in range(3): c(x)
        fs[str(dt)[6:]] = (c, x)
    ts = {k: [] for k in fs}
    with torch.no_grad():
        for _ in range(60):
            for k, (c, x) in fs.items():
                c(x); t = time.perf_counter(); c(x); ts[k].append(time.perf_counter() - t)
    m = {k: statistics.median(v) * 1e3 for k, v in ts.items()}
    print(M, K, N, {k: round(v, 3) for k, v in m.items()}, "bf16/fp32", round(m["bfloat16"] / m["float32"], 3), flush=True)
