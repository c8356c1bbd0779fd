"""fp32 attention as oneDNN's two matmuls (FXCPP_ATTENTION=matmuls): the P V matmul reduces over
the keys, so at S > 1024 it takes gemm:jit as a long-K Linear does. Error against fp64 (v scaled
by 1000) and time, in this process's mode:

    PYTHONPATH=. python benchmarks/results/onednn-long-k-accuracy/attention.py
    FXCPP_MATMUL_LONG_K=0 PYTHONPATH=. python benchmarks/results/onednn-long-k-accuracy/attention.py   # brgemm
"""
import os
import statistics
import time

import torch
import torch.nn.functional as F

import fxcpp
from benchmarks.machine import machine_info

os.environ["FXCPP_ATTENTION"] = "matmuls"
m = machine_info(torch.get_num_threads(), "python benchmarks/results/onednn-long-k-accuracy/attention.py")
print(m["cpu_model"], "|", fxcpp._C.host_info()["summary"], "| torch", m["torch_version"], "| commit",
      m["git_commit"][:10], m["date"], "| FXCPP_MATMUL_LONG_K =", os.environ.get("FXCPP_MATMUL_LONG_K", "(default)"))


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


for B, H, L in [(1, 2, 256), (1, 2, 2048), (1, 1, 2816), (3, 1, 1536)]:  # scores under 32 MB: the matmuls run
    torch._dynamo.reset()
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, L, 64) for _ in range(3))
    c = torch.compile(sdpa, backend="fxcpp")
    with torch.no_grad():
        ve = v * 1000
        y64 = sdpa(q.double(), k.double(), ve.double())
        rm = lambda y: ((y.double() - y64) ** 2).mean().sqrt().item()  # noqa: E731
        ratio = rm(c(q, k, ve)) / rm(sdpa(q, k, ve))

        def med(f):
            for _ in range(3):
                f(q, k, v)
            ts = []
            for _ in range(15):
                t0 = time.perf_counter()
                f(q, k, v)
                ts.append(time.perf_counter() - t0)
            return statistics.median(ts) * 1e3
        te, tc = med(sdpa), med(c)
        impl = next(r.impl for r in fxcpp.explain(sdpa, q, k, v).rows if r.impl).split(" + ")[-1][:60]
    print(f"[{B}, {H}, {L}, 64]: error ratio to eager {ratio:.2f}; eager {te:.2f} ms, fxcpp {tc:.2f} ms; P V: {impl}")
