"""A/B: exp_u10, gelu_erf, tanh_exp and sigmoid always inlined (after) or as GCC left them
(before: exp_u10<false>, gelu_erf, tanh_exp out of line under AVX2). Two installs built side by
side in /tmp/ab/{before,after} (benchmarks/ab_installs.py); medians of 200 calls, 2 threads.
    python benchmarks/results/inline-exp/ab.py [rounds]"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))
from benchmarks.ab_transcendentals import main  # noqa: E402

main(__file__)  # the cases of the recorded run (ab.txt): RUNS in benchmarks/ab_transcendentals.py
