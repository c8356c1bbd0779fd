"""A/B: the transcendentals computed two vectors at a time in lockstep (after, vec_pair.h) or one
vector at a time (before). Two installs built side by side in /tmp/ab/{before,after}
(benchmarks/ab_installs.py); medians of 200 calls, 2 threads.
    python benchmarks/results/lockstep-pairs/ab.py [rounds]"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))
from benchmarks.ab_transcendentals import main  # noqa: E402

# The cases of the recorded run (ab.txt), by name; their definitions are in benchmarks/ab_transcendentals.py.
main(__file__, [
    "gelu(x) * 2 [4096, 3072] fp32",
    "gelu(x) * 2 [4096, 3072] bf16",
    "gelu_tanh(x) * 2 [4096, 3072] fp32",
    "tanh(x) * 2 [1024, 1024] fp32",
    "silu(a) * b [1024, 2048] fp32",
    "sigmoid(x) * x + 1 [1024, 2048] fp32",
    "softmax(x * 0.125 + m) [4096, 4096] fp32",
    "log_softmax(x) [4096, 4096] fp32",
    "LayerNorm+GELU+residual [4096, 768] fp32",
    "the probe x + gelu(ln(x)) [4096, 768] fp32",
    "the probe x + gelu(ln(x)) [4096, 768] bf16",
])
