"""Pointwise programs of cheap ops, planned (interp_plan.h) against run_pointwise, in one process:
_C._set_planned(on) alternating, ROUNDS rounds, median ms of 30 calls each (after 2 warm-up calls).
    python ab.py [ROUNDS]
Every case is torch.compile(backend="fxcpp") of the lambda; the 64 MiB cases measure DRAM."""
import statistics, sys, time, types
import torch
import fxcpp
from fxcpp import _C

torch.set_num_threads(2)
N = 1 << 24
g = torch.Generator().manual_seed(0)
x, y, z = (torch.randn(N, generator=g) for _ in range(3))
xb = x.bfloat16()
m, b, w = torch.randn(2048, 8192, generator=g), torch.randn(2048, 1, generator=g), torch.randn(8192, generator=g)
small, mid, l3 = torch.randn(4096, generator=g), torch.randn(1 << 18, generator=g), torch.randn(1 << 21, generator=g)


def chain(tag):  # its own code object per case: Dynamo would otherwise share one (dynamic-shape) compile
    f = lambda x: (torch.relu(x * 2 + 1) - 0.5) * x
    return types.FunctionType(f.__code__.replace(co_name=f"chain_{tag}"), globals())


CASES = {
    "chain 64MiB": (chain("64m"), (x,)),
    "x*y+z 64MiB": (lambda x, y, z: x * y + z, (x, y, z)),
    "relu(x*y+z) 64MiB": (lambda x, y, z: torch.relu(x * y + z), (x, y, z)),
    "bf16 x*2+1 ->fp32 32MiB": (lambda x: x.float() * 2 + 1, (xb,)),
    "(m-b)*w [2048,8192]": (lambda m, b, w: torch.clamp((m - b) * w, -2.0, 2.0), (m, b, w)),
    "chain 8MiB (in L3)": (chain("8m"), (l3,)),
    "chain 1MiB": (chain("1m"), (mid,)),
    "chain 16KiB": (chain("16k"), (small,)),
}
fns = {k: (torch.compile(f, backend="fxcpp"), a) for k, (f, a) in CASES.items()}


def t(f, a, n=30):
    f(*a); f(*a); s = []
    for _ in range(n):
        t0 = time.perf_counter(); r = f(*a); s.append(time.perf_counter() - t0); del r
    return statistics.median(s) * 1e3


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
res = {k: {True: [], False: []} for k in CASES}
with torch.no_grad():
    for r in range(rounds):
        for on in ((True, False) if r % 2 == 0 else (False, True)):
            _C._set_planned(on)
            for k, (f, a) in fns.items():
                res[k][on].append(t(f, a))
print(fxcpp._C.host_info()["summary"])
print(f"{'case':26s} {'planned ms (min-max)':>22s} {'run_pointwise ms':>22s}  ratio of medians")
for k, d in res.items():
    on, off = d[True], d[False]
    print(f"{k:26s} {statistics.median(on):8.3f} ({min(on):.3f}-{max(on):.3f}) {statistics.median(off):8.3f} ({min(off):.3f}-{max(off):.3f})"
          f"  {statistics.median(on) / statistics.median(off):.2f}")
print("planned calls", _C.cpu_fused_stats()["planned_calls"])
