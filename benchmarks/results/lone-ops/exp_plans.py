"""A lone exp's plan (fused or ATen, whatever the installed build's rule picks), per dtype and size:
us per call, best of 7 loops, one JSON line. Both sides are plans (_C.Executable.run), unlike
lone_ops.py, whose ATen side is torch.exp called from Python where the plan fuses the op.
Alternating two installs (the README's exp_plans.txt):

    for r in 1 2 3; do for v in before after; do
      echo "$v $(PYTHONPATH=/tmp/ab/$v python benchmarks/results/lone-ops/exp_plans.py)"; done; done
"""
import os, sys, time, json
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/cpp"))
import torch
from graphs import lowered
from fxcpp import _C
torch.set_num_threads(2)
res = {}
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    for n in (256, 1024, 4096, 8192, 8193, 12288, 16384, 65536):
        x = torch.randn(n).to(dtype)
        _, g = lowered(torch.exp, x, static=set()); _C.run_pipeline(g); ex = _C.Executable(g)
        kind = "fused" if g.cpu_fused_nodes() else "aten"
        xs = [x]
        reps = max(200, int(2e6 / (n + 500)))
        for _ in range(20): ex.run(xs)
        b = 1e9
        for r in range(7):
            t = time.perf_counter()
            for _ in range(reps): ex.run(xs)
            b = min(b, (time.perf_counter() - t) / reps)
        res[f"{str(dtype)[6:]} {n}"] = (kind, round(b * 1e6, 2))
print(json.dumps(res))
