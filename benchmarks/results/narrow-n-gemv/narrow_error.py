"""fp32 Linear with a narrow output: RMSE against fp64 of eager's GEMM, of oneDNN's brgemm (as
fxcpp ran every such Linear before: FXCPP_KERNEL_CHOICE=onednn, FXCPP_MATMUL_LONG_K=0) and of
fxcpp's default path (FXCPP_KERNEL_CHOICE=ours: its own kernel by its own rules, never eager's
ops), by M, K and N.

    PYTHONPATH=. python benchmarks/results/narrow-n-gemv/narrow_error.py   # narrow_error_zen5.txt

a = 1000 * randn(M, K), w = randn(N, K), no bias (as onednn-long-k-accuracy/gemm_error.py)."""
import os

import torch

import fxcpp
from benchmarks.machine import machine_info


def compiled(lin, a, choice, long_k=None):
    os.environ["FXCPP_KERNEL_CHOICE"] = choice
    os.environ.pop("FXCPP_MATMUL_LONG_K", None)
    if long_k is not None:
        os.environ["FXCPP_MATMUL_LONG_K"] = long_k
    torch._dynamo.reset()
    y = torch.compile(lin, backend="fxcpp")(a)
    impl = next((r.impl for r in fxcpp.explain(lin, a).rows if r.kernel == "onednn" and r.impl), "?")
    return y, impl.removeprefix("onednn ").split(" (")[0].split(",")[0]


torch.manual_seed(0)
m = machine_info(torch.get_num_threads(), "PYTHONPATH=. python benchmarks/results/narrow-n-gemv/narrow_error.py")
print(m["cpu_model"], "|", fxcpp._C.host_info()["summary"], "| torch", m["torch_version"], "| commit",
      m["git_commit"][:10], m["date"])
print(f"{'M':>5} {'K':>5} {'N':>3} | {'eager RMSE':>10} | {'brgemm/eager':>12} | {'default/eager':>13} default kernel")
for M in (8, 64, 1001):
    for N in (2, 3, 4, 8, 9, 11, 12, 16):
        for K in (64, 128, 512, 768, 2048):
            lin = torch.nn.Linear(K, N, bias=False).eval()
            lin.weight.data = torch.randn(N, K)
            a = torch.randn(M, K) * 1000
            with torch.no_grad():
                ye = lin(a)
                y64 = torch.nn.functional.linear(a.double(), lin.weight.double())
                yb, _ = compiled(lin, a, "onednn", "0")
                yd, impl = compiled(lin, a, "ours")
            rm = lambda y: ((y.double() - y64) ** 2).mean().sqrt().item()  # noqa: E731
            print(f"{M:>5} {K:>5} {N:>3} | {rm(ye):>10.4g} | {rm(yb) / rm(ye):>12.2f} | {rm(yd) / rm(ye):>13.2f} {impl}",
                  flush=True)
