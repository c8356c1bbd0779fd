"""A/B of the centered sums in one pass (commit 55004f9: a variance's sum(v - m) and
sum((v - m)^2) run in one pass over the block, where they took two) against the commit before
it (30a7d3c), on the kernels that have a variance (a lone var, var_mean + its norm, a
standardization written out, layer_norm + GELU + residual) and on softmax, which has none (the
control for drift). [4096, 768], fp32 and bf16.

Two installs side by side: after `make build` at each commit, copy the installed package
(`python -c "import fxcpp, os; print(os.path.dirname(fxcpp.__file__))"`) into DIR/fxcpp. Each
round runs one process per install, alternating; a process times every kernel interleaved, 40
samples each after five settling calls. Reported: the median over rounds of each process's
median, in ms, and after / before.

    python benchmarks/results/var-mean/ab_paired.py BEFORE_DIR AFTER_DIR [rounds] > benchmarks/results/var-mean/ab_paired.txt
"""
import json
import os
import sys

sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from benchmarks.ab_installs import main as ab_main, own_code, time_interleaved  # noqa: E402


def kernels():
    import torch
    import torch.nn.functional as F

    def var_mean_norm(x, w, b):
        v, m = torch.var_mean(x, -1, keepdim=True, unbiased=False)
        return (x - m) * torch.rsqrt(v + 1e-5) * w

    return {
        "var": lambda x, w, b: x.var(-1),
        "var_mean_norm": var_mean_norm,
        "standardize": lambda x, w, b: (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-5),
        "ln_gelu_residual": lambda x, w, b: x + F.gelu(F.layer_norm(x, (x.shape[-1],), w, b)),
        "softmax (control)": lambda x, w, b: torch.softmax(x, -1),
    }


def child():
    import torch

    import fxcpp  # noqa: F401  (the install on PYTHONPATH)

    torch.set_num_threads(2)
    torch.manual_seed(0)
    fns = {}
    for dt, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        args = [torch.randn(4096, 768).to(dtype), torch.randn(768).to(dtype), torch.randn(768).to(dtype)]
        for kname, fn in kernels().items():
            fns[f"{kname}/{dt}"] = (torch.compile(own_code(fn), backend="fxcpp"), args)
    print(json.dumps(time_interleaved({k: (lambda f=f, a=a: f(*a)) for k, (f, a) in fns.items()}, 40, 5)))


if __name__ == "__main__":
    child() if "--child" in sys.argv else ab_main(__file__, "benchmarks/results/var-mean/ab_paired.py", ["kernel", "dtype"])
