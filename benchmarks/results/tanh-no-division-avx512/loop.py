"""make micro's tanh chain on [256, 1024] as a plan, one thread, 30000 calls: ns an element.

    python benchmarks/results/tanh-no-division-avx512/loop.py
"""
import sys, os, time, torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/cpp"))
from graphs import lowered
from fxcpp import _C
torch.set_num_threads(1)
fn = lambda x: torch.tanh(torch.relu(x * 2 + 1))
x = torch.randn(256, 1024)
_, g = lowered(fn, x, static=set()); _C.run_pipeline(g); ex = _C.Executable(g)
for _ in range(10): ex.run([x])
t = time.perf_counter(); n = 30000
for _ in range(n): ex.run([x])
dt = (time.perf_counter() - t) / n
print(f"{dt*1e6:.1f} us  {dt/x.numel()*1e9:.3f} ns/elt 1 thread")
