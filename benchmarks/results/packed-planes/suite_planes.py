"""Which suite models run packed rows of planes (cpu_fused_stats()['packed_plane_calls'] per forward), and
fxcpp's fp32 time on them (median of 20, one process per build; the old build lacks the counter)."""
import os, statistics, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))
import torch, fxcpp
from benchmarks import suite
torch.set_num_threads(2)
for name in sys.argv[2:]:
    name, _, want = name.partition(":")
    spec, batch = [(s, b) for s, b in suite.find([name], False) if not want or b == int(want)][0]
    torch.manual_seed(0)
    model, inputs = spec.build(batch)
    torch._dynamo.reset()
    f = torch.compile(lambda *a, m=model: suite.call(spec, m, a), backend="fxcpp")
    with torch.no_grad():
        for _ in range(3): f(*inputs)
        st = fxcpp._C.cpu_fused_stats().get("packed_plane_calls", -1)
        f(*inputs)
        per = fxcpp._C.cpu_fused_stats().get("packed_plane_calls", -1) - st if st >= 0 else "n/a"
        ts = []
        for _ in range(20):
            t = time.perf_counter(); f(*inputs); ts.append(time.perf_counter() - t)
    print(f"{sys.argv[1]} {name} b{batch}: packed plane calls per forward {per}, fxcpp fp32 {statistics.median(ts) * 1e3:.2f} ms", flush=True)
