"""Whether Python's garbage collector runs inside timed calls of make micro's 4-op chain (session
58's note read 13% of a perf profile's samples in gc_collect_main), and whether make micro's
Timer reads the chain slower than a plain loop of calls does.

    PYTHONPATH=. python benchmarks/results/planned-pointwise/gc_in_calls.py   # gc_in_calls.txt

Part 1: gc.callbacks count the collections (per generation) during 300 calls of each backend.
Part 2: three rounds, each: a triad, make micro's Timer (blocked_autorange, 1 s), the median of
40 plain calls, and ATen's mul into a preallocated output (one read, one write: the same bytes)."""
import gc
import time

import torch
from torch.utils.benchmark import Timer

import fxcpp
from benchmarks.machine import machine_info
from benchmarks.micro import native

torch.set_num_threads(2)
m = machine_info(2, "python benchmarks/results/planned-pointwise/gc_in_calls.py")
print(m["cpu_model"], "|", fxcpp._C.host_info()["summary"], "| torch", m["torch_version"], "| commit", m["git_commit"][:10], "dirty" if m["git_dirty"] else "", m["date"])
x = torch.randn(1 << 24)


def chain(x):
    return (torch.relu(x * 2 + 1) - 0.5) * x


def own(fn, tag):  # a code object of its own, so that Dynamo compiles each backend apart
    import types
    code = fn.__code__.replace(co_name=f"chain_{tag}")
    return types.FunctionType(code, fn.__globals__, code.co_name)


print("Part 1: collections during 300 calls, [gen0, gen1, gen2] (seconds in them)")
for backend in ("eager", "fxcpp", "inductor"):
    fn = own(chain, backend)
    f = fn if backend == "eager" else torch.compile(fn, backend=backend)
    for _ in range(3):
        f(x)
    n, secs, t0 = [0, 0, 0], [0.0], [0.0]

    def cb(phase, info):
        if phase == "start":
            t0[0] = time.perf_counter()
        else:
            n[info["generation"]] += 1
            secs[0] += time.perf_counter() - t0[0]

    gc.callbacks.append(cb)
    t = time.perf_counter()
    for _ in range(300):
        f(x)
    took = time.perf_counter() - t
    gc.callbacks.remove(cb)
    print(f"  {backend:9s} {n} ({secs[0] * 1e3:.2f} ms of {took * 1e3:.0f} ms)")

print("Part 2: the chain over 64 MiB, fxcpp: Timer against a plain loop (ms; % of the triad)")
f = torch.compile(own(chain, "timer"), backend="fxcpp")
f(x), f(x)
y = torch.empty_like(x)
nbytes = 2 * x.nbytes
for r in range(3):
    triad = native.stream_triad(2, 64, 10)["gbps_median"]
    timer = Timer("f(x)", globals={"f": f, "x": x}, num_threads=2).blocked_autorange(min_run_time=1.0).median
    ts, ms = [], []
    for _ in range(40):
        t = time.perf_counter()
        f(x)
        ts.append(time.perf_counter() - t)
    for _ in range(40):
        t = time.perf_counter()
        torch.mul(x, 2.0, out=y)
        ms.append(time.perf_counter() - t)
    loop, mul = sorted(ts)[20], sorted(ms)[20]
    pct = lambda s: 100 * nbytes / s / 1e9 / triad  # noqa: E731
    print(f"  round {r}: triad {triad:.1f} GB/s | Timer {timer * 1e3:.2f} ({pct(timer):.0f}%) | loop {loop * 1e3:.2f} "
          f"({pct(loop):.0f}%) | ATen mul out= {mul * 1e3:.2f} ({pct(mul):.0f}%)")
