"""ATen's flash attention in bf16 against the same call on fp32-widened operands, rounded back, timed
interleaved (40 rounds, medians, ms). python benchmarks/results/bf16-ratio-avx512-skylake/sdpa_widened.py"""
import torch, time, statistics
import torch.nn.functional as F
torch.set_num_threads(2)
for B, L in ((1, 128), (8, 128), (8, 197)):
    q, k, v = (torch.randn(B, 12, L, 64).bfloat16() for _ in range(3))
    def nat(): return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    def wid(): return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True).bfloat16()
    ts = {"native": [], "widened": []}
    for _ in range(3): nat(); wid()
    for _ in range(40):
        for n, f in (("native", nat), ("widened", wid)):
            t = time.perf_counter(); f(); ts[n].append(time.perf_counter() - t)
    m = {n: statistics.median(s) * 1e3 for n, s in ts.items()}
    print(B, L, {n: round(x, 3) for n, x in m.items()}, "widened/native", round(m["widened"] / m["native"], 2))
