"""The same calls timed by themselves and two by two (one after the other in one loop): what a
call costs after another that ran different code (its instructions and data no longer cached).

    python benchmarks/results/overhead-icache-avx2/pair.py
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ovh import floor_alloc, fxcpp_capturing, plan, tiny  # noqa: E402

torch.set_num_threads(2)
x = torch.randn(16)
def t(f, n=100000):
    for _ in range(100): f()
    best = 1e9
    for r in range(3):
        t0 = time.perf_counter()
        for _ in range(n): f()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best
with torch.no_grad():
    fa = torch.compile(lambda x: tiny(x), backend=floor_alloc); fa(x)
    fx = torch.compile(lambda x: tiny(x), backend=fxcpp_capturing); fx(x)
    p = plan["fn"]
    emp = lambda: torch.empty(())
    r = {}
    r["floor_alloc"] = t(lambda: fa(x))
    r["plan"] = t(lambda: p(x))
    r["empty"] = t(emp)
    r["eager"] = t(lambda: tiny(x))
    r["floor_alloc+plan"] = t(lambda: (fa(x), p(x)))
    r["floor_alloc+empty"] = t(lambda: (fa(x), emp()))
    r["eager+plan"] = t(lambda: (tiny(x), p(x)))
    r["eager+empty"] = t(lambda: (tiny(x), emp()))
    r["fxcpp"] = t(lambda: fx(x))
for k, v in r.items(): print(f"{k:20s} {v:6.2f}")
