"""Cases whose rows do not flatten (a head-split view beside a contiguous tensor), eager vs fxcpp, medians in us.
One process per build; PYTHONPATH picks an old copy."""
import statistics, sys, time, torch, fxcpp
import torch.nn.functional as F
torch.set_num_threads(2)
torch.manual_seed(0)
def t(f, n=60):
    f(); f(); s = []
    for _ in range(n):
        a = time.perf_counter(); f(); s.append(time.perf_counter() - a)
    return statistics.median(s) * 1e6
def pair(t_, h, d):
    return (torch.randn(t_, h, d), torch.randn(h, t_, d))
cases = [
 ("pointwise (x^T*2+y).relu(), 12 x 2048 x 64", lambda x, y: (x.transpose(0, 1) * 2 + y).relu(), pair(2048, 12, 64)),
 ("pointwise (x^T*2+y).relu(), 16 x 4096 x 32", lambda x, y: (x.transpose(0, 1) * 2 + y).relu(), pair(4096, 16, 32)),
 ("softmax(x^T*0.125+y), 12 x 2048 x 64", lambda x, y: torch.softmax(x.transpose(0, 1) * 0.125 + y, -1), pair(2048, 12, 64)),
 ("layer_norm(x^T+y), 12 x 2048 x 64", lambda x, y: F.layer_norm(x.transpose(0, 1) + y, (64,)), pair(2048, 12, 64)),
 ("(x^T*y).sum(-1), 12 x 2048 x 64", lambda x, y: (x.transpose(0, 1) * y).sum(-1), pair(2048, 12, 64)),
 ("pointwise bf16, 12 x 2048 x 64", lambda x, y: (x.transpose(0, 1) * 2 + y).relu(), tuple(a.bfloat16() for a in pair(2048, 12, 64))),
]
with torch.no_grad():
    for name, fn, xs in cases:
        torch._dynamo.reset()
        c = torch.compile(fn, backend="fxcpp")
        ok = torch.allclose(c(*xs).float(), fn(*xs).float(), atol=1e-2, rtol=1e-2)
        te, tf = t(lambda: fn(*xs)), t(lambda: c(*xs))
        print(f"{sys.argv[1]} | {name} | eager {te:.0f} | fxcpp {tf:.0f} | fxcpp/eager {tf / te:.2f} | matches {ok}", flush=True)
