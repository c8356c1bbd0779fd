# Dynamo guards compiled code on the thread count: a change recompiles it (eager backend and fxcpp alike). Run with TORCH_LOGS=recompiles.
import torch, torch.nn as nn, fxcpp  # noqa: F401
from torch._dynamo.utils import counters
model = nn.Sequential(nn.Linear(64, 32), nn.GELU(), nn.Linear(32, 4)).eval()
for backend in ("eager", "fxcpp"):
    torch.set_num_threads(2)
    torch._dynamo.reset(); counters.clear()
    c = torch.compile(model, backend=backend, dynamic=True)
    with torch.no_grad():
        c(torch.randn(4, 64)); torch.set_num_threads(1); c(torch.randn(7, 64))
    print(backend, dict(counters["stats"]))
