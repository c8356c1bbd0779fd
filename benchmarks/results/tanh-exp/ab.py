"""tanh from exp (runtime/cpu/tanh_exp.h) against the build before it (at::vec's Sleef tanh):
GPT-2's GELU written out op by op on one layer's MLP activation at batch 8 ([1024, 3072]), the
tanh GELU (F.gelu(approximate="tanh") * 2) on the same, make micro's pointwise4_tanh
(tanh(relu(x * 2 + 1)) on 16M values) and a tanh chain on an L2-sized block ([256, 1024]), fp32
and bf16, eager and fxcpp, each build in its own process, builds alternating, three rounds.
Medians of 300 calls, 2 threads. The builds are installed copies of the package:

    python benchmarks/results/tanh-exp/ab.py /tmp/ab/before /tmp/ab/after > benchmarks/results/tanh-exp/ab.txt
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from benchmarks.ab_installs import print_case_rows, print_rounds  # noqa: E402


def gelu_new(x):
    import torch

    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def cases_for(dt):
    import torch
    import torch.nn.functional as F

    return {"gpt2_gelu": (gelu_new, (1024, 3072)),
            "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh") * 2, (1024, 3072)),
            "pw4_tanh": (lambda x: torch.tanh(torch.relu(x * 2 + 1)), (1 << 24,)),
            "tanh_l2": (lambda x: torch.tanh(x * 2 + 1), (256, 1024))}


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        print_case_rows(cases_for)
    else:
        print_rounds(__file__, sys.argv[1:], "benchmarks/results/tanh-exp/ab.py " + " ".join(sys.argv[1:]))
