"""A LayerNorm or softmax alone (left to ATen by cpu_fusion's worth_it rule) against the same op
with a ReLU after it (fused), eager and fxcpp, fp32 and bf16, 2 threads: min of two 0.6 s loops.

    python benchmarks/results/cpu-fusion-amx/lone_norms.py > benchmarks/results/cpu-fusion-amx/lone_norms.txt
"""
import torch, time, fxcpp
F = torch.nn.functional
def tm(f, a, t=0.6):
    f(*a); s = time.perf_counter(); k = 0
    while time.perf_counter() - s < t: f(*a); k += 1
    return (time.perf_counter() - s) / k * 1e3
for dt in (torch.float32, torch.bfloat16):
  for (r, n) in [(4096, 4096), (16384, 768), (2048, 768)]:
    x = torch.randn(r, n, dtype=dt); w = torch.randn(n, dtype=dt); b = torch.randn(n, dtype=dt)
    cases = {"ln": lambda x, w, b: F.layer_norm(x, (n,), w, b),
             "ln_relu": lambda x, w, b: F.layer_norm(x, (n,), w, b).relu(),
             "softmax": lambda x, w, b: torch.softmax(x, -1),
             "softmax_relu": lambda x, w, b: torch.softmax(x, -1).relu(),
             }
    with torch.no_grad():
      for name, f in cases.items():
        c = torch.compile(f, backend="fxcpp")
        e = [tm(f, (x, w, b)) for _ in range(2)]
        fx = [tm(c, (x, w, b)) for _ in range(2)]
        k = fxcpp.explain(f, x, w, b).kernel_counts
        print(f"{str(dt)[6:]:9s} {r}x{n:5d} {name:13s} eager {min(e):7.3f} ms  fxcpp {min(fx):7.3f} ms  {'fused' if k['cpu_fused'] else 'aten'}", flush=True)
      torch._dynamo.reset()
