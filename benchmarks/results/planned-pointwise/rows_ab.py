"""Cheap pointwise programs over [rows, hidden] with a broadcast bias (they do not flatten): planned
(a row, or 1024-element pieces, per block) against packed rows (run_rows_packed), in one process:
_C._set_planned(on) alternating, 4 rounds, median ms of 30 calls each.
    python rows_ab.py"""
import statistics, time
import torch
import fxcpp
from fxcpp import _C

torch.set_num_threads(2)
g = torch.Generator().manual_seed(0)
SHAPES = [(4096, 64), (2048, 128), (1024, 256), (1024, 384), (768, 512), (512, 768), (384, 1024),
          (16384, 128), (8192, 256), (8192, 384), (4096, 768), (3072, 1024), (4096, 3072), (65536, 1024)]
cases = {}
for t, h in SHAPES:
    x, b, r = torch.randn(t, h, generator=g), torch.randn(h, generator=g), torch.randn(t, h, generator=g)
    f = eval("lambda x, b, r: torch.relu(x + b) * 0.5 + r")  # eval: a code object per case (Dynamo's cache)
    cases[f"relu(x+b)*.5+r [{t},{h}]"] = (torch.compile(f, backend="fxcpp"), (x, b, r))
    f2 = eval("lambda x, b: torch.clamp(x * b - 1, -2.0, 2.0)")
    cases[f"clamp(x*b-1) [{t},{h}]"] = (torch.compile(f2, backend="fxcpp"), (x, b))


def t(f, a, n=30):
    f(*a); f(*a); s = []
    for _ in range(n):
        t0 = time.perf_counter(); y = f(*a); s.append(time.perf_counter() - t0); del y
    return statistics.median(s) * 1e3


res = {k: {True: [], False: []} for k in cases}
with torch.no_grad():
    for r in range(4):
        for on in ((True, False) if r % 2 == 0 else (False, True)):
            _C._set_planned(on)
            for k, (f, a) in cases.items():
                res[k][on].append(t(f, a))
print(_C.host_info()["summary"])
print("rows under 384 elements are not planned (packed rows in both columns: a null check)")
for k, d in res.items():
    print(f"{k:32s} planned {statistics.median(d[True]):8.3f}  packed rows {statistics.median(d[False]):8.3f}"
          f"  ratio {statistics.median(d[True]) / statistics.median(d[False]):.2f}")
