"""One nn.Linear(K, N) in bf16 or fp16 on an [M, K] input, under no_grad, in a process of its own
(two weights in one process no longer fit this VM's cache slice together): eager, or compiled by
fxcpp with FXCPP_KERNEL_CHOICE=aten (eager's own ops where ATen runs the dtype natively), the
same with FXCPP_ATEN_WIDEN=1 (operands widened to fp32, the rule before), fxcpp's default, or
its GEMV or oneDNN path forced (FXCPP_KERNEL_CHOICE=gemv / onednn).
Median of 200 calls, us.

    python benchmarks/results/aten-native-alternative/linear_path.py 1024 4096 1 bf16 aten
"""
import os
import sys
import time

import torch

K, N, M = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[sys.argv[4]]
mode = sys.argv[5]  # eager | aten | aten_widened | default | gemv | onednn
torch.manual_seed(0)
lin = torch.nn.Linear(K, N).to(dtype).eval()
x = torch.randn(M, K, dtype=dtype)
fn = lin
if mode != "eager":
    import fxcpp  # noqa: F401 (registers the backend)
    if mode.startswith("aten"):
        os.environ["FXCPP_KERNEL_CHOICE"] = "aten"
    if mode in ("gemv", "onednn"):
        os.environ["FXCPP_KERNEL_CHOICE"] = mode
    if mode == "aten_widened":
        os.environ["FXCPP_ATEN_WIDEN"] = "1"
    fn = torch.compile(lin, backend="fxcpp")
with torch.no_grad():
    out = fn(x)
    native = (torch.ops.mkldnn._is_mkldnn_bf16_supported if dtype == torch.bfloat16
              else torch.ops.mkldnn._is_mkldnn_fp16_supported)()
    assert mode != "aten" or torch.equal(out, lin(x)) or not native  # the ATen path is eager's own op
    ts = []
    for _ in range(200):
        t = time.perf_counter()
        fn(x)
        ts.append(time.perf_counter() - t)
print(f"{K}x{N} M={M} {sys.argv[4]} {mode}: {sorted(ts)[100] * 1e6:.1f} us")
