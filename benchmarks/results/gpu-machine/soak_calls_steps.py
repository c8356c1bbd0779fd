"""test_soak.soak_calls step by step, RSS after each: where the 10^5-call soak's growth comes from."""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../tests"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../tests/python"))
import torch, fxcpp, test_soak
from test_soak import _rss_mb, _state

torch.manual_seed(0)
model = test_soak._Block().eval()
x = torch.randn(8, 64)
compiled = torch.compile(model, backend=sys.argv[1] if len(sys.argv) > 1 else "fxcpp")
with torch.no_grad():
    ref = model(x)
    for _ in range(10_000):
        out = compiled(x)
    print(f"torch {torch.__version__} warm-up        {_rss_mb():.1f}", flush=True)
    if compiled._orig_mod is model and (len(sys.argv) < 2 or sys.argv[1] == "fxcpp"):
        print(fxcpp.explain(compiled, x).kernel_counts, f"explain {_rss_mb():.1f}", flush=True)
    del out
    rss0 = _state()[0]
    print(f"rss0 {rss0:.1f}  after _state {_rss_mb():.1f}", flush=True)
    for i in range(1, 200_001):
        compiled(x)
        if i % 20_000 == 0:
            print(f"{i:7d} {_rss_mb():.1f}", flush=True)
    print(f"rss1 {_state()[0]:.1f}", flush=True)
