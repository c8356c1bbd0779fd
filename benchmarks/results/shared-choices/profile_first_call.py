"""cProfile of one suite model's first compiled call (no choice cache), top 60 by cumulative time.
Usage: python profile_first_call.py MODEL BATCH DTYPE"""
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
os.environ["FXCPP_CACHE"] = "0"
import torch  # noqa: E402

import fxcpp  # noqa: E402,F401
from benchmarks import suite  # noqa: E402
name, batch, dt = sys.argv[1], int(sys.argv[2]), getattr(torch, sys.argv[3])
torch.manual_seed(0); torch.set_num_threads(2)
((spec, _),) = suite.find([name], quick=False)[:1]
model, inputs = suite.to_dtype(*spec.build(batch), dt, "cpu")
with torch.no_grad():
    suite.call(spec, model, inputs)
    c = torch.compile(model, backend="fxcpp")
    pr = cProfile.Profile(); t = time.perf_counter(); pr.enable()
    suite.call(spec, c, inputs)
    pr.disable(); print("first", time.perf_counter() - t)
st = pstats.Stats(pr); st.sort_stats("cumulative").print_stats(60)
