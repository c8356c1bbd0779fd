"""A variance alone and torch.var_mean: eager (ATen's Welford, accumulated in double one element
at a time), fxcpp (one cpu_fused kernel) and Inductor with freezing, on [4096, 768] in fp32 and
bf16, 2 threads. One process; every (case, config) timed interleaved in a shuffled order, 30
samples each after five settling calls, each sample following one untimed call of its own.
Reported: medians in ms and each config's speedup over eager.

    python benchmarks/results/var-mean/bench.py > benchmarks/results/var-mean/results.txt
"""
import json
import os
import sys

import torch
import torch._inductor.config as inductor_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)
from benchmarks.ab_installs import own_code, time_interleaved  # noqa: E402
from benchmarks.machine import machine_info  # noqa: E402

import fxcpp  # noqa: E402,F401


def var_mean_norm(x, w):  # a LayerNorm written with torch.var_mean
    v, m = torch.var_mean(x, -1, keepdim=True, unbiased=False)
    return (x - m) * torch.rsqrt(v + 1e-5) * w


CASES = {
    "var": lambda x, w: x.var(-1),
    "std": lambda x, w: x.std(-1),
    "var_mean": lambda x, w: torch.var_mean(x, -1),
    "var_mean_norm": var_mean_norm,
}


def main():
    torch.set_num_threads(2)
    torch.manual_seed(0)
    inductor_config.freezing = True
    fns = {}
    for dt in (torch.float32, torch.bfloat16):
        args = (torch.randn(4096, 768).to(dt), torch.randn(768).to(dt))
        for name, fn in CASES.items():
            for config in ("eager", "fxcpp", "inductor_freezing"):
                f = own_code(fn)
                if config != "eager":
                    f = torch.compile(f, backend="fxcpp" if config == "fxcpp" else "inductor")
                fns[(name, str(dt).split(".")[1], config)] = (f, args)
    med_ms = time_interleaved({k: (lambda f=f, a=a: f(*a)) for k, (f, a) in fns.items()}, 30, 5, shuffled=True)
    info = machine_info(2, "python benchmarks/results/var-mean/bench.py")
    print(json.dumps({k: info[k] for k in ("cpu_model", "isa_flags", "host", "torch_version", "git_commit", "git_dirty", "date")}))
    print(f"{'case':16s} {'dtype':9s} {'eager ms':>9s} {'fxcpp ms':>9s} {'inductor_freezing ms':>21s}  fxcpp speedup  inductor speedup")
    for name in CASES:
        for dt in ("float32", "bfloat16"):
            med = {c: med_ms[(name, dt, c)] for c in ("eager", "fxcpp", "inductor_freezing")}
            print(f"{name:16s} {dt:9s} {med['eager']:9.3f} {med['fxcpp']:9.3f} {med['inductor_freezing']:21.3f}"
                  f"  {med['eager'] / med['fxcpp']:12.1f}x  {med['eager'] / med['inductor_freezing']:15.1f}x")


if __name__ == "__main__":
    main()
