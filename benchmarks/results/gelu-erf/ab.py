"""GELU's erf taken as a normal tail (runtime/cpu/gelu_erf.h) against the build before it: the
LayerNorm+GELU+residual probe ([4096, 768]) and a GELU chain (gelu(x) * 2 on [4096, 3072]), fp32
and bf16, eager and fxcpp, each build in its own process, builds alternating, three rounds.
Medians of 300 calls, 2 threads. The builds are installed copies of the package:

    python benchmarks/results/gelu-erf/ab.py /tmp/ab/old /tmp/ab/new > benchmarks/results/gelu-erf/ab.txt
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from benchmarks.ab_installs import print_case_rows, print_rounds  # noqa: E402


def cases_for(dt):
    import torch
    import torch.nn.functional as F

    ln = torch.nn.LayerNorm(768).eval().to(dt)
    return {"probe": (lambda x: x + F.gelu(ln(x)), (4096, 768)),
            "gelu_chain": (lambda x: F.gelu(x) * 2, (4096, 3072))}


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        print_case_rows(cases_for)
    else:
        print_rounds(__file__, sys.argv[1:], "benchmarks/results/gelu-erf/ab.py " + " ".join(sys.argv[1:]))
