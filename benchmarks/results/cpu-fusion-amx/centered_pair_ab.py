"""A/B of the fix that lets a LayerNorm's two centered sums share their pass (interp_rows.h:
the pair's second sum ran a pass of its own when the subtraction came first, as it does in every
LayerNorm program). Two installs built side by side (benchmarks/ab_installs.py), alternating
processes, 3 rounds; each child times every case interleaved (median ms), 2 threads.

    python benchmarks/results/cpu-fusion-amx/centered_pair_ab.py BEFORE_DIR AFTER_DIR > benchmarks/results/cpu-fusion-amx/centered_pair_ab.txt
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def child():
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, ROOT)
    from benchmarks.ab_installs import time_interleaved

    torch.set_num_threads(2)
    torch.manual_seed(0)
    fns = {}
    for dt, tag in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        for rows, n in ((2048, 768), (4096, 768), (16384, 768)):
            x, r = torch.randn(rows, n, dtype=dt), torch.randn(rows, n, dtype=dt)
            w, b = torch.randn(n, dtype=dt), torch.randn(n, dtype=dt)
            cases = {"layer_norm+relu": (lambda x, r, w, b: F.layer_norm(x, (n,), w, b).relu()),
                     "add+layer_norm": (lambda x, r, w, b: F.layer_norm(x + r, (n,), w, b)),
                     "probe x+gelu(ln(x))": (lambda x, r, w, b: x + F.gelu(F.layer_norm(x, (n,), w, b)))}
            for name, f in cases.items():
                c = torch.compile(f, backend="fxcpp")
                fns[f"{name} [{rows},{n}] {tag}"] = (lambda c=c, a=(x, r, w, b): c(*a))
    print(json.dumps(time_interleaved(fns, samples=60, settle=3, shuffled=True)))


def main():
    sys.path.insert(0, ROOT)
    from benchmarks.ab_installs import alternate, header

    before, after = sys.argv[1], sys.argv[2]
    res = alternate(os.path.abspath(__file__), before, after, rounds=3)
    print(header(after, 3, "python benchmarks/results/cpu-fusion-amx/centered_pair_ab.py BEFORE AFTER"))
    print(f"{'case':40s} {'before':>8s} {'after':>8s}  after/before")
    for k, (b, a) in res.items():
        print(f"{k:40s} {b:8.3f} {a:8.3f}  {a / b:.2f}")


if __name__ == "__main__":
    child() if "--child" in sys.argv else main()
