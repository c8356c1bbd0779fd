"""RSS while test_soak's block is called through torch.compile, per backend (argv[1]), every 2*10^4
calls after a 10^4-call warm-up; 'plan' calls fxcpp's compiled callable directly, without Dynamo.
Tells fxcpp's growth from torch's own."""
import os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../tests"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../tests/python"))
import torch, torch.fx
import fxcpp
import test_soak

backend, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 300_000
torch.manual_seed(0)
model = test_soak._Block().eval()
x = torch.randn(8, 64)
with torch.no_grad():
    if backend == "plan":
        f = fxcpp.compile(torch.fx.symbolic_trace(model), [x])
    else:
        f = torch.compile(model, backend=backend)
    for _ in range(10_000):
        f(x)
    t0 = time.perf_counter()
    print(f"{backend} torch {torch.__version__} after warm-up rss {test_soak._rss_mb():.1f} MiB", flush=True)
    for i in range(1, n + 1):
        f(x)
        if i % 20_000 == 0:
            print(f"{backend} {i:7d} rss {test_soak._rss_mb():.1f} MiB t {time.perf_counter() - t0:.1f}s", flush=True)
