"""The fused transcendental cases that the results folders' A/B scripts time, two installs side by side.

Each `benchmarks/results/<folder>/ab.py` calls `main`, which times the cases RUNS names for that
folder: the parent alternates the installs in /tmp/ab/{before,after} (benchmarks/ab_installs.py)
and prints after / before per case; the child (`--child`) times each case, medians of 200 calls,
2 threads.
"""
from __future__ import annotations

import json
import math
import os
import sys


def cases():
    """{name: (function, inputs)}, built in the child (after torch is imported there)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    c = math.sqrt(2 / math.pi)

    def gpt2_gelu(t):  # GPT-2's GELU as the model writes it, op by op
        return 0.5 * t * (1.0 + torch.tanh(c * (t + 0.044715 * torch.pow(t, 3.0))))

    ln = lambda x, w, b: F.layer_norm(x, (768,), w, b)  # noqa: E731
    return {
        "gelu(x) * 2 [4096, 3072] fp32": (lambda t: F.gelu(t) * 2, (torch.randn(4096, 3072),)),
        "gelu(x) * 2 [4096, 3072] bf16": (lambda t: F.gelu(t) * 2, (torch.randn(4096, 3072).bfloat16(),)),
        "gelu_tanh(x) * 2 [4096, 3072] fp32": (lambda t: F.gelu(t, approximate="tanh") * 2, (torch.randn(4096, 3072),)),
        "gelu_tanh(x) * 2 [4096, 3072] bf16": (lambda t: F.gelu(t, approximate="tanh") * 2,
                                               (torch.randn(4096, 3072).bfloat16(),)),
        "GPT-2 GELU written out [1024, 3072] fp32": (gpt2_gelu, (torch.randn(1024, 3072),)),
        "GPT-2 GELU written out [1024, 3072] bf16": (gpt2_gelu, (torch.randn(1024, 3072).bfloat16(),)),
        "tanh(x) * 2 [1024, 1024] fp32": (lambda t: torch.tanh(t) * 2, (torch.randn(1024, 1024),)),
        "tanh(relu(x * 2 + 1)) [16M] fp32": (lambda t: torch.tanh(torch.relu(t * 2 + 1)), (torch.randn(1 << 24),)),
        "silu(a) * b [1024, 2048] fp32": (lambda a, b: F.silu(a) * b, (torch.randn(1024, 2048), torch.randn(1024, 2048))),
        "sigmoid(x) * x + 1 [1024, 2048] fp32": (lambda t: torch.sigmoid(t) * t + 1, (torch.randn(1024, 2048),)),
        "exp(x) * 2 [1024, 2048] fp32": (lambda t: torch.exp(t) * 2, (torch.randn(1024, 2048),)),
        "softmax(x * 0.125 + m) [4096, 4096] fp32": (lambda x, m: torch.softmax(x * 0.125 + m, dim=-1),
                                                     (torch.randn(4096, 4096), torch.randn(1, 4096))),
        "log_softmax(x) [4096, 4096] fp32": (lambda x: torch.log_softmax(x, dim=-1), (torch.randn(4096, 4096),)),
        "LayerNorm+GELU+residual [4096, 768] fp32": (
            lambda x, r, w, b: F.gelu(ln(x, w, b)) + r,
            (torch.randn(4096, 768), torch.randn(4096, 768), torch.randn(768), torch.randn(768))),
        "the probe x + gelu(ln(x)) [4096, 768] fp32": (
            lambda x, w, b: x + F.gelu(ln(x, w, b)), (torch.randn(4096, 768), torch.randn(768), torch.randn(768))),
        "the probe x + gelu(ln(x)) [4096, 768] bf16": (
            lambda x, w, b: x + F.gelu(ln(x, w, b)),
            (torch.randn(4096, 768).bfloat16(), torch.randn(768).bfloat16(), torch.randn(768).bfloat16())),
    }


# The cases each recorded run timed (its folder's ab.txt), by the folder's name.
_FIRST_SIX = ["gelu(x) * 2 [4096, 3072] fp32", "gelu(x) * 2 [4096, 3072] bf16", "gelu_tanh(x) * 2 [4096, 3072] fp32",
              "tanh(x) * 2 [1024, 1024] fp32", "silu(a) * b [1024, 2048] fp32", "sigmoid(x) * x + 1 [1024, 2048] fp32"]
RUNS = {
    "inline-exp": _FIRST_SIX + ["softmax(x * 0.125 + m) [4096, 4096] fp32", "LayerNorm+GELU+residual [4096, 768] fp32"],
    "lockstep-pairs": _FIRST_SIX + ["softmax(x * 0.125 + m) [4096, 4096] fp32", "log_softmax(x) [4096, 4096] fp32",
                                    "LayerNorm+GELU+residual [4096, 768] fp32", "the probe x + gelu(ln(x)) [4096, 768] fp32",
                                    "the probe x + gelu(ln(x)) [4096, 768] bf16"],
    "inline-pair-lambdas": None,  # every case
}


def child(names: list[str] | None = None) -> None:
    """Times the named cases (all where None) and prints their medians as one JSON line."""
    import torch

    from benchmarks.ab_installs import median_ms

    torch.set_num_threads(2)
    table = cases()
    out = {}
    with torch.no_grad():
        for k in names or list(table):
            f, a = table[k]
            c = torch.compile(f, backend="fxcpp")
            out[k] = median_ms(lambda: c(*a), calls=200)
    print(json.dumps(out))


def main(script: str) -> None:
    """Run from a results folder's ab.py (its cases: RUNS[folder]): the child's side with --child,
    else the alternating parent."""
    names = RUNS[os.path.basename(os.path.dirname(os.path.abspath(script)))]
    if "--child" in sys.argv:
        return child(names)
    import fxcpp

    from benchmarks.ab_installs import alternate

    print("host:", fxcpp._C.host_info()["summary"])
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for k, (b, a) in alternate(os.path.abspath(script), "/tmp/ab/before", "/tmp/ab/after", rounds).items():
        print(f"{k:44s} before {b:8.3f} ms  after {a:8.3f} ms  after/before {a / b:.2f}")
