"""fxcpp's attention (causal SDPA at GPT-2's shapes) in fp32 and in bf16, timed interleaved (40 rounds,
medians, ms), with what explain() says ran. python benchmarks/results/bf16-ratio-avx512-skylake/sdpa_fxcpp.py"""
import torch, time, statistics, fxcpp
import torch.nn.functional as F
torch.set_num_threads(2)
for B, L in ((1, 128), (8, 128)):
    fs = {}
    for dt in (torch.float32, torch.bfloat16):
        q, k, v = (torch.randn(B, 12, L, 64).to(dt) for _ in range(3))
        torch._dynamo.reset()
        c = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), backend="fxcpp")
        with torch.no_grad():
            for _ in range(3): c(q, k, v)
            impl = [r.impl for r in fxcpp.explain(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v).rows if "attention" in r.op]
        fs[str(dt)[6:]] = (c, (q, k, v), impl)
    ts = {k: [] for k in fs}
    with torch.no_grad():
        for _ in range(40):
            for n, (c, a, _) in fs.items():
                c(*a); t = time.perf_counter(); c(*a); ts[n].append(time.perf_counter() - t)
    m = {n: statistics.median(v) * 1e3 for n, v in ts.items()}
    print(B, L, {n: round(x, 3) for n, x in m.items()}, "bf16/fp32", round(m["bfloat16"] / m["float32"], 2), {n: fs[n][2] for n in fs})
