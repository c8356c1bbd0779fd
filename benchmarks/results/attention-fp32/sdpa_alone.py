import torch, time, sys
import torch.nn.functional as F
torch.manual_seed(0)
def bench(f, n=20):
    for _ in range(3): f()
    t = time.perf_counter()
    for _ in range(n): f()
    return (time.perf_counter() - t) / n * 1e6
def med(xs): xs = sorted(xs); return xs[len(xs) // 2]
with torch.no_grad():
  for (b, h, L, d, causal) in [(1, 12, 128, 64, False), (8, 12, 128, 64, False), (1, 12, 128, 64, True), (8, 12, 128, 64, True), (1, 12, 197, 64, False), (8, 12, 197, 64, False), (1, 8, 128, 64, False), (1, 16, 512, 64, True)]:
    q, k, v = (torch.randn(b, L, h, d).transpose(1, 2) for _ in range(3))
    for dt in (torch.bfloat16, torch.float16):
        qq, kk, vv = q.to(dt), k.to(dt), v.to(dt)
        bufs = [torch.empty_like(t, dtype=torch.float32) for t in (qq, kk, vv)]
        out = torch.empty_like(qq)
        def widened():
            for bb, t in zip(bufs, (qq, kk, vv)): bb.copy_(t)
            out.copy_(F.scaled_dot_product_attention(*bufs, is_causal=causal))
        fns = {"fp32": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
               "native": lambda: F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal),
               "as-fp32": widened}
        r = {name: [] for name in fns}
        for _ in range(7):
            for name, f in fns.items(): r[name].append(bench(f))
        m = {k2: med(v2) for k2, v2 in r.items()}
        print(f"{str(dt)[6:]:9s} b{b} h{h} L{L} d{d} causal={causal}: fp32 {m['fp32']:8.1f}  native {m['native']:8.1f}  as-fp32 {m['as-fp32']:8.1f}  as-fp32/native {m['as-fp32']/m['native']:.2f}")
