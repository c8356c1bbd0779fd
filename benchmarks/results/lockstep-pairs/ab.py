"""A/B: the transcendentals computed two vectors at a time in lockstep (after, vec_pair.h) or one
vector at a time (before). Two installs built side by side in /tmp/ab/{before,after}
(benchmarks/ab_installs.py); medians of 200 calls, 2 threads.
    python benchmarks/results/lockstep-pairs/ab.py [rounds]"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))
from benchmarks.ab_transcendentals import main  # noqa: E402

main(__file__)  # the cases of the recorded run (ab.txt): RUNS in benchmarks/ab_transcendentals.py
