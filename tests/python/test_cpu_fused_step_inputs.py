"""A fused group's bf16/fp16 values on a path into an op that steps (a comparison, floor, sign,
...) carry eager's rounding after every op. Kept in fp32, a value just above a tie compared
true where eager's rounded one compared equal: `(log1p(|x @ p|) > x).to(bf16) * x` returned x
where eager returned 0 (fuzzer grammar 2, seed 68403). Rounding only the compared value once
is not eager either: `(v - mean) / (std + 1e-5) < v` rounded once gave v's own value where
eager's chain of rounded ops stays below it (seed 68081)."""
import os
import sys

import pytest
import torch

import fxcpp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz"))
import fuzz  # noqa: E402
from grammar import generate  # noqa: E402

DTYPES = [torch.bfloat16, torch.float16]


def _log1p_chain(x):
    return torch.log1p(x.abs() * 3)


def _normalized_chain(x):
    m = x.mean(-1, keepdim=True)
    return (x - m) / (x.std(-1, keepdim=True) + 1e-5)


def _fused(f, *xs):
    counts = fxcpp.explain(torch.compile(f, backend="fxcpp"), *xs).kernel_counts
    assert counts.get("cpu_fused", 0) >= 1 and counts.get("aten", 0) == 0, counts


@pytest.mark.parametrize("chain", [_log1p_chain, _normalized_chain])
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_chain_compared_with_eagers_own_value_ties_as_in_eager(chain, dtype):
    """y is eager's value of the chain: eager's `chain(x) >= y` is all true, `> y` all false.
    Any element the fused chain computes unrounded, or rounds only at its end, breaks a tie."""
    torch.manual_seed(0)
    x = torch.randn(64, 257).to(dtype)
    with torch.no_grad():
        y = chain(x)

        def ge_gt(x, y):
            v = chain(x)
            return v >= y, v > y, torch.floor(v * 8) - torch.floor(y * 8)

        _fused(ge_gt, x, y)
        ge, gt, floors = torch.compile(ge_gt, backend="fxcpp")(x, y)
    assert ge.all(), f"{(~ge).sum().item()} of {ge.numel()} elements fell below eager's own value"
    assert not gt.any(), f"{gt.sum().item()} of {gt.numel()} elements rose above eager's own value"
    assert (floors == 0).all()


@pytest.mark.parametrize("seed", [68081, 68403])
def test_the_fuzzer_programs_that_found_it(seed):
    status, detail = fuzz.check(generate(seed, grammar=2))
    assert status == "ok", detail


def test_a_chain_that_reaches_no_step_stays_in_fp32():
    """Rounding after every op costs an instruction each: only the paths into a step pay it."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cpp"))
    from graphs import lowered

    x = torch.randn(64, 64).bfloat16()
    for f, rounds in ((lambda x: torch.log1p(x.abs() * 3) * x, False), (lambda x: torch.log1p(x.abs() * 3) > x, True)):
        _, g = lowered(f, x, static=set())
        fxcpp._C.run_pipeline(g)
        (node,) = g.cpu_fused_nodes()
        assert ("round_bf16" in node["program"]) == rounds, node["program"]
