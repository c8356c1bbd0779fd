"""make micro's softmax_scale_mask row alone, fxcpp only, one install per process (PYTHONPATH):

    cd /tmp && for r in 1 2 3 4; do for d in old6a new; do PYTHONPATH=/tmp/ab/$d python softmax_ab.py; done; done

old6a: 6a4bb96 built with pip install --target; new: c923ab6's install (b5350c6 adds only a
test and README text). Median of 40 calls; the rounds alternate, run by hand on 2026-11-26."""
import torch, time, statistics, fxcpp, sys
torch.set_num_threads(2)
x = torch.randn(4096, 4096); m = torch.randn(1, 4096)
f = torch.compile(lambda x, m: torch.softmax(x * 0.125 + m, dim=-1), backend="fxcpp")
with torch.no_grad():
    for _ in range(3): f(x, m)
    ts=[]
    for _ in range(40):
        t=time.perf_counter(); f(x, m); ts.append(time.perf_counter()-t)
t = statistics.median(ts)
print(fxcpp.__file__.split("/")[3], "%.2f ms %.1f GB/s" % (t*1e3, 134.2e6/t/1e9))
