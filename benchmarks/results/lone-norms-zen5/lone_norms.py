# One install (PYTHONPATH): lone LayerNorm / softmax under fxcpp, median us per case; prints JSON.
import torch, fxcpp, time, json
import torch.nn.functional as F
torch.manual_seed(0)
out = {}
def bench(f, x, n):
    for _ in range(5): f(x)
    ts = []
    for _ in range(11):
        t = time.perf_counter()
        for _ in range(n): f(x)
        ts.append((time.perf_counter() - t) / n * 1e6)
    ts.sort(); return ts[5]
with torch.no_grad():
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        for rows, L in ((128, 768), (1024, 768), (4096, 768), (512, 4096)):
            ln = torch.nn.LayerNorm(L).eval().to(dt)
            x = torch.randn(rows, L).to(dt)
            torch._dynamo.reset(); c = torch.compile(lambda x: ln(x), backend="fxcpp")
            out[f"ln {rows}x{L} {str(dt)[6:]}"] = bench(c, x, max(10, 2000000 // x.numel()))
        for shape in ((12 * 128, 128), (8 * 12 * 128, 128), (128, 32000)):
            x = torch.randn(*shape).to(dt)
            torch._dynamo.reset(); c = torch.compile(lambda x: torch.softmax(x, -1), backend="fxcpp")
            out[f"softmax {shape[0]}x{shape[1]} {str(dt)[6:]}"] = bench(c, x, max(10, 2000000 // x.numel()))
print(json.dumps(out))
