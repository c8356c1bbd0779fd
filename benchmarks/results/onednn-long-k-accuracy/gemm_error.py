"""fp32 Linear: how far fxcpp's matmul and eager's (MKL) land from an fp64 reference, by shape.
Found by `tests/fuzz/fuzz.py --large --train` (run 41 in tests/fuzz/README.md): two programs with a
K = 2048 Linear failed the harness rule at their second training step, and both match eager with
FXCPP_KERNEL_CHOICE=aten.

    PYTHONPATH=. python benchmarks/results/onednn-long-k-accuracy/gemm_error.py   # gemm_error.txt
    FXCPP_MATMUL_LONG_K=0 PYTHONPATH=. python benchmarks/results/onednn-long-k-accuracy/gemm_error.py \
        # gemm_error_brgemm.txt: brgemm at every K, as before the fix

Each row: y = a @ w.T, a = 1000 * randn(M, K), w = randn(N, K); RMSE against fp64 of eager and of
fxcpp with FXCPP_KERNEL_CHOICE=onednn (oneDNN forced: its own measured choice takes ATen for some
of these shapes), their ratio, and what explain() says ran."""
import os

import torch

import fxcpp
from benchmarks.machine import machine_info

os.environ["FXCPP_KERNEL_CHOICE"] = "onednn"
torch.manual_seed(0)
m = machine_info(torch.get_num_threads(), "python benchmarks/results/onednn-long-k-accuracy/gemm_error.py"
                 + (f" (FXCPP_MATMUL_LONG_K={os.environ['FXCPP_MATMUL_LONG_K']})" if "FXCPP_MATMUL_LONG_K" in os.environ else ""))
print(m["cpu_model"], "|", fxcpp._C.host_info()["summary"], "| torch", m["torch_version"], "| commit",
      m["git_commit"][:10], m["date"])
print(f"{'M':>5} {'K':>5} {'N':>5} | {'eager RMSE':>10} {'fxcpp RMSE':>10} {'ratio':>5} | kernel")
for M, K, N in [(64, 3, 512), (64, 64, 64), (64, 512, 3), (512, 768, 768), (64, 2048, 3), (64, 2048, 64),
                (256, 2048, 256), (512, 3072, 768), (128, 4096, 1024), (64, 8192, 16)]:
    torch._dynamo.reset()
    lin = torch.nn.Linear(K, N, bias=False).eval()
    lin.weight.data = torch.randn(N, K)
    a = torch.randn(M, K) * 1000
    with torch.no_grad():
        ye, yc = lin(a), torch.compile(lin, backend="fxcpp")(a)
        y64 = torch.nn.functional.linear(a.double(), lin.weight.double())
    rm = lambda y: ((y.double() - y64) ** 2).mean().sqrt().item()  # noqa: E731
    impl = next((r.impl for r in fxcpp.explain(lin, a).rows if r.kernel == "onednn" and r.impl), "?").split(";")[0]
    print(f"{M:>5} {K:>5} {N:>5} | {rm(ye):>10.4g} {rm(yc):>10.4g} {rm(yc) / rm(ye):>5.2f} | {impl}")
