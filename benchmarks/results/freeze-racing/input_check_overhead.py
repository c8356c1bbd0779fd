# Per-call time of a plan: a 4-op graph on 16 elements (1 input) and a 3-Linear MLP graph (7 inputs), plan.run directly.
import sys, time, torch, torch.nn.functional as F
sys.path.insert(0, "/work/main/tests/cpp")
from graphs import lowered
from fxcpp import _C
torch.set_num_threads(2)
def tiny(x):
    return ((x + 1) * 2).relu().sigmoid()
def mlp(x, w1, b1, w2, b2, w3, b3):
    return F.linear(F.relu(F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)), w3, b3)
cases = {"tiny16": (tiny, [torch.randn(16)]),
         "mlp7": (mlp, [torch.randn(1, 16), torch.randn(16, 16), torch.randn(16), torch.randn(16, 16), torch.randn(16), torch.randn(16, 16), torch.randn(16)])}
for name, (fn, args) in cases.items():
    _, g = lowered(fn, *args, static=set() if name == "tiny16" else None)
    _C.run_pipeline(g); ex = _C.Executable(g)
    for _ in range(2000): ex.run(args)
    best = []
    for rep in range(7):
        n = 20000
        t0 = time.perf_counter()
        for _ in range(n): ex.run(args)
        best.append((time.perf_counter() - t0) / n * 1e6)
    best.sort()
    print(f"{name} median {best[3]:.3f} us  min {best[0]:.3f}")
