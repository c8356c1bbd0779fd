# RSS, live tensors and Python objects every 200 compiles of test_soak's compile-and-discard loop, to 3000.
import gc, sys, os, time
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests")
sys.path[:0] = [os.path.join(here, "python"), here]  # from any directory (the repo root was assumed)
import torch, fxcpp, test_soak
from test_soak import _Block, _drop_generated_sources, _rss_mb, _live_tensors
torch.manual_seed(0)
keep = set(torch.fx.graph_module._loader.eval_cache)
widths = [8 + 4 * i for i in range(10)]
t0 = time.time()
for i in range(3001):
    d = widths[i % 10]
    block = _Block(d).eval(); gm = torch.fx.symbolic_trace(block); x = torch.randn(4, d)
    with torch.no_grad():
        fxcpp.compile(gm, [x])(x)
    _drop_generated_sources(keep)
    if i % 200 == 0:
        gc.collect()
        print(f"{i:5d} rss {_rss_mb():8.1f} MiB  tensors {_live_tensors():6d}  objects {len(gc.get_objects()):8d}  t {time.time()-t0:6.1f}s", flush=True)
