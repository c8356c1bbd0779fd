"""make micro's bandwidth kernels on 64 and 256 rows (in cache) against the full size, compiled
with fxcpp: us per call (best of 5 loops), ns an element, GB/s of minimal traffic. 2 threads.

    python benchmarks/results/micro-avx512-zen5/in_cache.py [kernel ...] > in_cache.txt
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))
import torch
import torch.nn.functional as F

import fxcpp  # noqa: F401  (registers the backend)
from benchmarks.ab_installs import best_us

torch.set_num_threads(2)
cases = {
 "tanh_chain": (lambda x: torch.tanh(torch.relu(x * 2 + 1)), lambda R, n: [torch.randn(R, n)], 2),
 "pw4": (lambda x: torch.relu(x * 2 + 1) * 3, lambda R, n: [torch.randn(R, n)], 2),
 "softmax": (lambda x, m: torch.softmax(x * 0.125 + m, dim=-1), lambda R, n: [torch.randn(R, n), torch.randn(1, n)], 2),
 "add_ln": (lambda x, r, w, b: F.layer_norm(x + r, (x.shape[-1],), w, b), lambda R, n: [torch.randn(R, n), torch.randn(R, n), torch.randn(n), torch.randn(n)], 3),
 "rmsnorm": (lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, lambda R, n: [torch.randn(R, n), torch.randn(n)], 2),
}
sel = sys.argv[1:] or list(cases)
for name in sel:
    fn, mk, words = cases[name]
    n = {"softmax": 4096, "add_ln": 768, "rmsnorm": 1024}.get(name, 1024)
    for R in [64, 256, 16384 * 1024 // n]:
        xs = mk(R, n)
        f = torch.compile(fn, backend="fxcpp", dynamic=False)
        with torch.no_grad():
            t = best_us(lambda: f(*xs), max(3, (1 << 26) // (R * n) // 4)) * 1e-6
        print(f"{name:10s} R={R:6d} n={n} {t*1e6:9.1f} us  {t/(R*n)*1e9:.3f} ns/elt  {4*words*R*n/t/1e9:.1f} GB/s", flush=True)
        torch._dynamo.reset()
