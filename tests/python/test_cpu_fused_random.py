"""A seeded random-graph test: hundreds of pointwise / reduction / norm programs
(random_graphs.py), each through the whole C++ pipeline (the CPU fusion included) and compared
with eager by the harness rule. A failure prints the program's seed and description;
FXCPP_RANDOM_GRAPHS=N runs N programs instead of the default."""
import os
import sys

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from fxcpp import _C, lowering
from helpers import assert_same
from random_graphs import make_program

N = int(os.environ.get("FXCPP_RANDOM_GRAPHS", "240"))
BATCH = 40


def run_compiled(fn, xs):
    gm = make_fx(fn, tracing_mode="fake")(*xs)
    g, _ = lowering.lower_graph(gm)
    _C.run_pipeline(g)
    return _C.Executable(g).run(list(xs)), g


@pytest.mark.parametrize("start", range(0, N, BATCH))
def test_random_programs_match_eager(start):
    fused = 0
    for seed in range(start, min(start + BATCH, N)):
        fn, xs, desc = make_program(seed)
        with torch.no_grad():
            ref = fn(*xs)
            ref64 = fn(*[x.double() if x.is_floating_point() else x for x in xs])
            try:
                res, g = run_compiled(fn, xs)
            except Exception as e:  # noqa: BLE001 - reported with the program
                raise AssertionError(f"{desc}\n  compile/run failed: {type(e).__name__}: {e}") from e
        fused += len(g.cpu_fused_nodes())
        try:
            assert_same(list(ref), list(res), fp64_ref=list(ref64))
        except AssertionError as e:
            raise AssertionError(f"{desc}\n{g}\n{e}") from None
    assert fused > 0  # the batch exercised the fused kernels at all
