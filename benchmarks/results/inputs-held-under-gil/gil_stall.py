"""One model's call alone, and beside a Python thread that spins (switch interval 10 ms): median
ms of 20 and 10 calls. 10 x (Linear(256, 256) + LayerNorm(256)), 40 parameters, input [64, 256].

    python gil_stall.py eager|inductor|fxcpp          (PYTHONPATH=$BASE for the build before)
"""
import statistics
import sys
import threading
import time

import torch

import fxcpp

torch.manual_seed(0)
m = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.LayerNorm(256))
                          for _ in range(10)]).eval()
x = torch.randn(64, 256)
c = m if sys.argv[1] == "eager" else torch.compile(m, backend=sys.argv[1])
stop = False


def spin():
    n = 0
    while not stop:
        n += 1


with torch.no_grad():
    for _ in range(20):
        c(x)
    quiet = []
    for _ in range(20):
        t = time.perf_counter(); c(x); quiet.append(time.perf_counter() - t)
    sys.setswitchinterval(0.01)
    th = threading.Thread(target=spin)
    th.start()
    busy = []
    for _ in range(10):
        t = time.perf_counter(); c(x); busy.append(time.perf_counter() - t)
    stop = True
    th.join()
where = "" if sys.argv[1] != "fxcpp" else f" ({fxcpp.__file__.rsplit('/', 2)[0]})"
print(f"{sys.argv[1]}{where}: alone {statistics.median(quiet) * 1e3:.3f} ms, "
      f"beside a spinning thread {statistics.median(busy) * 1e3:.1f} ms")
