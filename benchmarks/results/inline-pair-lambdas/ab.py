"""A/B: the tanh and tanh-GELU lambdas and their pair calls forced inline (after) or as GCC 12 left
them (before: out of line in the AVX2 build, a call per VecPair). Two installs built side by side in
/tmp/ab/{before,after} (benchmarks/ab_installs.py); every case of benchmarks/ab_transcendentals.py.
    python benchmarks/results/inline-pair-lambdas/ab.py [rounds]"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))
from benchmarks.ab_transcendentals import main  # noqa: E402

main(__file__)
