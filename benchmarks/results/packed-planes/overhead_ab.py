"""Per-block overhead cases, one process per build (PYTHONPATH picks the old copy), medians in us."""
import statistics, sys, time, torch, fxcpp
import torch.nn.functional as F
torch.set_num_threads(2)
torch.manual_seed(0)
def t(f, n):
    f(); f(); s = []
    for _ in range(n):
        a = time.perf_counter(); f(); s.append(time.perf_counter() - a)
    return statistics.median(s) * 1e6
chain = lambda x: (torch.relu(x * 2 + 1) - 0.5) * x
cases = {
  "chain 16M (64 MiB)": (chain, [torch.randn(1 << 24)], 30),
  "chain 1M": (chain, [torch.randn(1 << 20)], 300),
  "x^T*2+y rows of 64 (12x2048x64)": (lambda x, y: (x.transpose(0, 1) * 2 + y).relu(), [torch.randn(2048, 12, 64), torch.randn(12, 2048, 64)], 300),
  "x^T*2+y rows of 32 (16x4096x32)": (lambda x, y: (x.transpose(0, 1) * 2 + y).relu(), [torch.randn(4096, 16, 32), torch.randn(16, 4096, 32)], 300),
  "softmax 4096x4096": (lambda x: torch.softmax(x * 0.125, -1), [torch.randn(4096, 4096)], 30),
  "residual LN 8192x768": (lambda x, r, w, b: F.layer_norm(x + r, (768,), w, b), [torch.randn(8192, 768), torch.randn(8192, 768), torch.randn(768), torch.randn(768)], 100),
}
out = [sys.argv[1]]
with torch.no_grad():
    for name, (fn, xs, n) in cases.items():
        torch._dynamo.reset()
        c = torch.compile(fn, backend="fxcpp")
        ref = fn(*xs)
        assert torch.allclose(c(*xs), ref, atol=1e-5, rtol=1e-5), name
        out.append(f"{name}: {t(lambda: c(*xs), n):.1f}")
print(" | ".join(out), flush=True)
