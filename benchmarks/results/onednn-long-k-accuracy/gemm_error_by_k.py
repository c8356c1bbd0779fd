"""fp32 Linear, oneDNN's brgemm (FXCPP_MATMUL_LONG_K=0, FXCPP_KERNEL_CHOICE=onednn) against eager's
GEMM (MKL): RMSE against fp64 by K at three output widths, on the host this runs on. Where the
ratio starts to grow, and whether a narrow output (N = 3, a classifier head) differs.

    PYTHONPATH=. python benchmarks/results/onednn-long-k-accuracy/gemm_error_by_k.py   # gemm_error_by_k_zen5.txt

a = 1000 * randn(M, K), w = randn(N, K), as gemm_error.py."""
import os

os.environ["FXCPP_KERNEL_CHOICE"] = "onednn"
os.environ["FXCPP_MATMUL_LONG_K"] = "0"

import torch  # noqa: E402

import fxcpp  # noqa: E402
from benchmarks.machine import machine_info  # noqa: E402

torch.manual_seed(0)
m = machine_info(torch.get_num_threads(), "PYTHONPATH=. python benchmarks/results/onednn-long-k-accuracy/gemm_error_by_k.py")
print(m["cpu_model"], "|", fxcpp._C.host_info()["summary"], "| torch", m["torch_version"], "| commit",
      m["git_commit"][:10], m["date"])
print(f"{'M':>5} {'K':>5} {'N':>5} | {'eager RMSE':>10} {'brgemm RMSE':>11} {'ratio':>5}")
for M, N in [(64, 3), (64, 64), (256, 256)]:
    for K in [128, 256, 384, 512, 768, 1024, 2048]:
        torch._dynamo.reset()
        lin = torch.nn.Linear(K, N, bias=False).eval()
        lin.weight.data = torch.randn(N, K)
        a = torch.randn(M, K) * 1000
        with torch.no_grad():
            ye, yc = lin(a), torch.compile(lin, backend="fxcpp")(a)
            y64 = torch.nn.functional.linear(a.double(), lin.weight.double())
        rm = lambda y: ((y.double() - y64) ** 2).mean().sqrt().item()  # noqa: E731
        print(f"{M:>5} {K:>5} {N:>5} | {rm(ye):>10.4g} {rm(yc):>11.4g} {rm(yc) / rm(ye):>5.2f}")
