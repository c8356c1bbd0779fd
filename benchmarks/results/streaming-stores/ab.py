"""A/B of the streaming-store rule: before, only fp32 outputs larger than the whole last-level
cache were written with streaming stores; after, every fresh fp32/bf16/fp16 output of a call
whose inputs and outputs together pass half of it (fused_kernel.cpp, `streaming`).

Two installs side by side: after `make build` at each commit, copy the installed package
(`python -c "import fxcpp, os; print(os.path.dirname(fxcpp.__file__))"`) into DIR/fxcpp. Each
round runs one process per install, alternating; a process times every kernel interleaved,
40 samples each after five settling calls. Reported: the median over rounds of each process's
median, in ms, and after / before. Cases: [4096, 768] (25 MB moved in fp32: streams after;
12.6 MB in bf16: does not), [8192, 768] bf16 (25 MB: streams after), [512, 768] (control: never).

    python benchmarks/results/streaming-stores/ab.py BEFORE_DIR AFTER_DIR [rounds] > benchmarks/results/streaming-stores/ab.txt
"""
import json
import os
import sys

sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from benchmarks.ab_installs import main as ab_main, own_code, time_interleaved  # noqa: E402

SHAPES = {"4096x768": ((4096, 768), ("fp32", "bf16")), "8192x768": ((8192, 768), ("bf16",)),
          "512x768": ((512, 768), ("fp32",))}


def kernels():
    import torch
    import torch.nn.functional as F

    def rms(x, w, b):
        h = x.float()
        return w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)

    return {
        "ln_gelu_residual": lambda x, w, b: x + F.gelu(F.layer_norm(x, (x.shape[-1],), w, b)),  # the suite's probe
        "softmax": lambda x, w, b: torch.softmax(x * 0.125, -1),
        "rmsnorm": rms,
        "pointwise_chain": lambda x, w, b: (x * 2.0 + 1.0).relu() * w,
    }


def child():
    import torch

    import fxcpp  # noqa: F401  (the install on PYTHONPATH)

    torch.set_num_threads(2)
    torch.manual_seed(0)
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    fns = {}
    for sname, (shape, dts) in SHAPES.items():
        for dt in dts:
            args = [torch.randn(shape).to(dtypes[dt]), torch.randn(shape[-1]).to(dtypes[dt]),
                    torch.randn(shape[-1]).to(dtypes[dt])]
            for kname, fn in kernels().items():
                fns[f"{kname}/{sname}/{dt}"] = (torch.compile(own_code(fn), backend="fxcpp"), args)
    print(json.dumps(time_interleaved({k: (lambda f=f, a=a: f(*a)) for k, (f, a) in fns.items()}, 40, 5)))


if __name__ == "__main__":
    child() if "--child" in sys.argv else ab_main(__file__, "benchmarks/results/streaming-stores/ab.py", ["kernel", "shape", "dtype"])
