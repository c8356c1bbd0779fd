# After an idle gap, how long does the next call take? Both eager and fxcpp, ResNet-20 batch 1.
# python benchmarks/results/resnet20-b1-avx2-interleave/idle_gap.py float32|bfloat16 (bf16 under the AVX2 emulation)
import sys, time, torch, statistics
sys.path.insert(0, __import__("os").path.join(__import__("os").path.dirname(__file__), "../../.."))
torch.set_num_threads(2)
import fxcpp
from benchmarks import suite
spec = [s for s in suite.SUITE if s.name == "resnet20"][0]
dt = getattr(torch, sys.argv[1])
model, inputs = spec.build(1)
model, inputs = suite.to_dtype(model, inputs, dt, "cpu")
c = torch.compile(model, backend="fxcpp")
def med(fn, gap, n=15):
    ts = []
    for i in range(n):
        if gap: time.sleep(gap)
        t0 = time.perf_counter(); fn(*inputs); ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3
with torch.no_grad():
    for _ in range(10): c(*inputs); model(*inputs)
    for gap in (0, 0.001, 0.005, 0.02, 0.05):
        print(dt, f"gap {gap*1e3:4.0f} ms: fxcpp {med(c, gap):6.2f} ms   eager {med(model, gap):6.2f} ms", flush=True)
