"""Reductions over leading and middle dims (issue 9): eager, fxcpp and Inductor with freezing,
2 threads, fp32 and bf16. One process; every (case, dtype, config) timed interleaved in a
shuffled order, 30 samples each after five settling calls, each sample following one untimed
call of its own. Reported: medians in ms and each config's time over eager's. Last, a training
step of an MLP (fp32), whose backward sums each Linear's gradient over the batch.

    python benchmarks/results/outer-reductions/bench.py > benchmarks/results/outer-reductions/results.txt

With PYTHONPATH pointing at another fxcpp install (the build before reductions over other dims
fused), `--fxcpp-only` times eager and fxcpp alone, for the A/B in README.md. `--only=TEXT` keeps the
cases whose name holds TEXT.
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

sys.path.remove(ROOT)  # fxcpp: the installed one (or PYTHONPATH's), never the source folder
import fxcpp  # noqa: E402,F401


def standardize_over_batch(x):
    return (x - x.mean(0)) / (x.std(0) + 1e-5)


def batch_norm_written_out(x):  # training BatchNorm's statistics, written out
    m = x.mean((0, 2, 3), keepdim=True)
    v = x.var((0, 2, 3), keepdim=True, correction=0)
    return (x - m) * torch.rsqrt(v + 1e-5)


def channels_last(t):
    return t.contiguous(memory_format=torch.channels_last)


# name: (fn, input makers)
CASES = {
    "bias_grad_sigmoid [8192,768] sum(0)": (lambda g, x: (g * torch.sigmoid(x)).sum(0), [(8192, 768), (8192, 768)]),
    "sum0_epilogue [8192,768]": (lambda x, w: (x * 2.0).sum(0) * w + 1.0, [(8192, 768), (768,)]),
    "center_dim0 [8192,768]": (lambda x: x - x.mean(0), [(8192, 768)]),
    "center_last [8192,768]": (lambda x: x - x.mean(-1, keepdim=True), [(8192, 768)]),  # packed rows: corrected mean
    "center_dim0 [65536,768]": (lambda x: x - x.mean(0), [(65536, 768)]),  # 200 MB: from DRAM on every host
    "center_long_rows [1024,65536]": (lambda x: x - x.mean(-1, keepdim=True), [(1024, 65536)]),  # phased rows
    "var_dim0 [8192,768]": (lambda x: x.var(0), [(8192, 768)]),
    "standardize_dim0 [8192,768]": (standardize_over_batch, [(8192, 768)]),
    "amax_dim1 [32,512,768]": (lambda x: (x * 0.5).amax(1), [(32, 512, 768)]),
    "bn_stats NHWC [16,64,56,56]": (batch_norm_written_out, [(16, 64, 56, 56, "cl")]),
    "softmax_dim1 [8,64,4096]": (lambda x: torch.softmax(x * 0.5, 1), [(8, 64, 4096)]),
}


class MLP(torch.nn.Module):  # a training step: each Linear's bias gradient is a sum over the batch
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(768, 3072), torch.nn.Linear(3072, 768)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


def train_step(model):
    def step(x):
        with torch.enable_grad():  # timed under no_grad like the inference cases
            model(x).square().mean().backward()
    return step


def make(spec, dtype, g):
    cl = spec[-1] == "cl"
    t = torch.randn(spec[:-1] if cl else spec, generator=g).to(dtype)
    return channels_last(t) if cl else t


TRAIN = "MLP 768-3072-768 train step [2048,768]"


def main():
    fxcpp_only = "--fxcpp-only" in sys.argv
    only = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--only=")), "")  # cases whose name holds it
    torch.set_num_threads(2)
    inductor_config.freezing = True  # inference graphs only; training graphs are not frozen
    configs = ("eager", "fxcpp") if fxcpp_only else ("eager", "fxcpp", "inductor_freezing")
    g = torch.Generator().manual_seed(0)
    fns = {}
    for dt in (torch.float32, torch.bfloat16):
        for name, (fn, specs) in CASES.items():
            if only and only not in name:
                continue
            args = tuple(make(s, dt, g) for s in specs)
            for config in configs:
                f = own_code(fn)
                if config != "eager":
                    f = torch.compile(f, backend="fxcpp" if config == "fxcpp" else "inductor")
                fns[(name, str(dt).split(".")[1], config)] = (f, args)
    # Training (fp32 only: eager's backward in bf16 would be the question there, not the reductions).
    torch.manual_seed(0)
    base, x = MLP(), torch.randn(2048, 768, generator=g)
    for config in configs if not only or only in TRAIN else ():
        m = __import__("copy").deepcopy(base)
        step = train_step(m if config == "eager" else torch.compile(m, backend="fxcpp" if config == "fxcpp" else "inductor"))
        fns[(TRAIN, "float32", config)] = (step, (x,))
    med_ms = time_interleaved({k: (lambda f=f, a=a: f(*a)) for k, (f, a) in fns.items()}, 30, 5, shuffled=True)
    info = machine_info(2, "python benchmarks/results/outer-reductions/bench.py" + (" --fxcpp-only" if fxcpp_only else ""))
    info["fxcpp"] = os.path.dirname(fxcpp.__file__)
    print(json.dumps({k: info[k] for k in ("cpu_model", "host", "torch_version", "git_commit", "git_dirty", "date", "fxcpp")}))
    cols = "".join(f"{c + ' ms':>22s}" for c in configs)
    print(f"{'case':38s} {'dtype':9s}{cols}  " + "  ".join(f"{c} / eager" for c in configs[1:]))
    for name in [*CASES, TRAIN]:
        for dt in ("float32", "bfloat16") if name != TRAIN else ("float32",):
            if (name, dt, "eager") not in med_ms:
                continue
            med = {c: med_ms[(name, dt, c)] for c in configs}
            print(f"{name:38s} {dt:9s}" + "".join(f"{med[c]:22.3f}" for c in configs) + "  " +
                  "  ".join(f"{med[c] / med['eager']:13.2f}" for c in configs[1:]))


if __name__ == "__main__":
    main()
