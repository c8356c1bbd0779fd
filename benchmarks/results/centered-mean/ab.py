"""A/B of the corrected mean (commit 976484d: a fused row mean subtracted from its own values
is corrected by the centered values' sum, one more accumulator in the variance's pass) against
the commit before it, on the kernels it touches (layer_norm, a standardization written out,
var) and on softmax, which it leaves alone (the control for drift).

Two installs of fxcpp side by side: after `make build` at each commit, copy the installed
package (`python -c "import fxcpp, os; print(os.path.dirname(fxcpp.__file__))"`) into
DIR/fxcpp. Each round runs one process per install, alternating; a process times every
kernel interleaved, 40 samples each after five settling calls. Reported: the median over
rounds of each process's median, in ms, and after / before.

    python benchmarks/results/centered-mean/ab.py BEFORE_DIR AFTER_DIR [rounds] > benchmarks/results/centered-mean/ab.txt
"""
import json
import os
import sys

sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from benchmarks.ab_installs import main as ab_main, own_code, time_interleaved  # noqa: E402

SHAPES = {"8192x768": (8192, 768), "256x16384": (256, 16384)}  # rows in a block; rows phased


def kernels():
    import torch
    import torch.nn.functional as F

    def ln_gelu_residual(x, r, w, b):  # the suite's probe
        return F.gelu(F.layer_norm(x + r, (x.shape[-1],), w, b))

    def standardize(x, r, w, b):
        x = x + r
        return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-5)

    def var(x, r, w, b):
        return (x + r).var(-1)

    def softmax(x, r, w, b):
        return torch.softmax(x + r, -1)

    return {"ln_gelu_residual": ln_gelu_residual, "standardize": standardize, "var": var, "softmax (control)": softmax}


def child():
    import torch

    import fxcpp  # noqa: F401  (the install on PYTHONPATH)

    torch.set_num_threads(2)
    torch.manual_seed(0)
    fns = {}
    for sname, (rows, cols) in SHAPES.items():
        for dt, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            args = [torch.randn(rows, cols).to(dtype), torch.randn(rows, cols).to(dtype),
                    torch.randn(cols).to(dtype), torch.randn(cols).to(dtype)]
            for kname, fn in kernels().items():
                f = torch.compile(own_code(fn), backend="fxcpp")
                fns[f"{kname}/{sname}/{dt}"] = (f, args)
    print(json.dumps(time_interleaved({k: (lambda f=f, a=a: f(*a)) for k, (f, a) in fns.items()}, 40, 5)))


if __name__ == "__main__":
    child() if "--child" in sys.argv else ab_main(__file__, "benchmarks/results/centered-mean/ab.py", ["kernel", "shape", "dtype"])
