"""fp32 Conv2d: how far fxcpp's convolution and eager's land from an fp64 reference, by shape.
Found 2026-12-02 while checking whether the long-K matmul finding (../onednn-long-k-accuracy/)
reaches convolutions: it does, further.

    PYTHONPATH=. python benchmarks/results/onednn-conv-accuracy/conv_error.py   # conv_error.txt

Each row: y = conv2d(x, w), x = 1000 * randn(2, C, H, H), w = randn(32, C, k, k), no padding; RMSE
against fp64 of eager (which runs torch's own oneDNN on NCHW-blocked layouts), of eager on
channels-last tensors (torch's oneDNN on NHWC), of eager with mkldnn off (ATen's own kernels) and
of fxcpp with FXCPP_KERNEL_CHOICE=onednn (NHWC, as its layout propagation chooses); fxcpp's ratio
to eager's, and what explain() says ran. The reduction length is C * k * k."""
import os

import torch

import fxcpp
from benchmarks.machine import machine_info

os.environ["FXCPP_KERNEL_CHOICE"] = "onednn"
m = machine_info(torch.get_num_threads(), "python benchmarks/results/onednn-conv-accuracy/conv_error.py")
print(m["cpu_model"], "|", fxcpp._C.host_info()["summary"], "| torch", m["torch_version"], "| commit",
      m["git_commit"][:10], m["date"])
print(f"{'C':>5} {'k':>2} {'H':>3} {'C*k*k':>6} | {'eager':>9} {'eager NHWC':>10} {'no mkldnn':>9} {'fxcpp':>9} {'ratio':>5} | kernel")
for C, k, H in [(16, 3, 16), (64, 3, 16), (128, 3, 12), (256, 3, 10), (512, 3, 10), (1024, 3, 8),
                (256, 1, 14), (1024, 1, 7), (2048, 1, 7)]:
    torch._dynamo.reset()
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(C, 32, k, bias=False).eval()
    conv.weight.data = torch.randn_like(conv.weight)
    x = torch.randn(2, C, H, H) * 1000
    with torch.no_grad():
        ye, yc = conv(x), torch.compile(conv, backend="fxcpp")(x)
        cl = torch.channels_last
        ycl = torch.nn.functional.conv2d(x.to(memory_format=cl), conv.weight.to(memory_format=cl))
        with torch.backends.mkldnn.flags(enabled=False):
            yn = conv(x)
        y64 = torch.nn.functional.conv2d(x.double(), conv.weight.double())
        rows = fxcpp.explain(conv, x).rows
    rm = lambda y: ((y.double() - y64) ** 2).mean().sqrt().item()  # noqa: E731
    impl = next((r.impl for r in rows if r.kernel == "onednn" and r.impl), "?").split(",")[0]
    print(f"{C:>5} {k:>2} {H:>3} {C * k * k:>6} | {rm(ye):>9.4g} {rm(ycl):>10.4g} {rm(yn):>9.4g} {rm(yc):>9.4g} {rm(yc) / rm(ye):>5.2f} | {impl}")
