"""One thread, one install (PYTHONPATH): the best of 15 means of 20 calls, ms, for a softmax, a log_softmax,
tanh and exp on [512, 4096] (8 MiB, inside the 32 MiB L3). Run alternately under each install:
    for r in 1 2 3; do for v in before after; do PYTHONPATH=/tmp/ab/$v python single_thread.py; done; done"""
import time

import torch

torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.randn(512, 4096)
m = torch.randn(1, 4096)
fs = {"softmax": lambda x, m: torch.softmax(x * 0.125 + m, dim=-1), "log_softmax": lambda x, m: torch.log_softmax(x, dim=-1),
      "tanh": lambda x, m: torch.tanh(x) * 2, "exp": lambda x, m: torch.exp(x) * 2}
out = []
with torch.no_grad():
    for k, f in fs.items():
        c = torch.compile(f, backend="fxcpp")
        for _ in range(5):
            c(x, m)
        ts = []
        for _ in range(15):
            t = time.perf_counter()
            for _ in range(20):
                c(x, m)
            ts.append((time.perf_counter() - t) / 20)
        out.append(f"{k} {min(ts) * 1e3:.3f}")
print(" ".join(out))
