# The parent at the workers' thread count (1) compiles and runs batch 4; a forked child runs batch 7: does Dynamo compile again there?
import multiprocessing, torch, torch.nn as nn, fxcpp  # noqa: F401
from torch._dynamo.utils import counters
torch.manual_seed(0); torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(64, 32), nn.GELU(), nn.Linear(32, 4)).eval()
for dyn in (None, True):
    torch._dynamo.reset(); counters.clear()
    c = torch.compile(model, backend="fxcpp", dynamic=dyn)
    with torch.no_grad():
        c(torch.randn(4, 64))
    before = counters["stats"]["unique_graphs"]
    def worker(q):
        torch.set_num_threads(1)
        with torch.no_grad():
            x = torch.randn(7, 64)
            ok = torch.allclose(c(x), model(x), atol=1e-5)
        q.put((ok, counters["stats"]["unique_graphs"]))
    ctx = multiprocessing.get_context("fork"); q = ctx.Queue()
    p = ctx.Process(target=worker, args=(q,)); p.start(); ok, after = q.get(timeout=120); p.join()
    print(f"dynamic={dyn}: parent graphs {before}, child graphs after a new shape {after}, matches eager {ok}")
