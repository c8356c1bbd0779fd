"""A fused row mean that is subtracted from its own values (var/std, layer_norm, a
standardization written out) is corrected by the sum of the centered values (the corrected
two-pass algorithm). A row of equal values then has exactly that value as its mean and a
variance of exactly 0, as eager's Welford kernels give. Uncorrected, the mean's rounding came
out as a nonzero std, and (v - mean) / (std + 1e-5) as values up to 0.1 where eager and fp64
give 0. The fuzzer found it twice in grammar 2: seed 7110, a log_softmax of a constant row,
kept in fp32 inside the group, where eager's bf16 rounding made its sum exact; and seed 8972,
training through a standardized constant row."""
import os
import sys

import pytest
import torch
import torch.nn.functional as F
from helpers import same_as_eager

from fxcpp.explain import Report, recording

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz"))
import fuzz  # noqa: E402
from grammar import generate  # noqa: E402


def _stats_of_log_softmax(x):
    v = torch.log_softmax(x, -1)  # a constant row: every value -log(n), rarely a sum exact in fp32
    m = v.mean(-1, keepdim=True)
    return m, v.std(-1, keepdim=True), v.var(-1), v - m, (v - m) / (v.std(-1, keepdim=True) + 1e-5)


def _compiled(fn, *args):
    rec: list = []
    with torch.no_grad(), recording(rec):
        out = torch.compile(fn, backend="fxcpp")(*args)
    rows = Report(rec).rows
    assert {r.kernel for r in rows if r.op.startswith("aten::")} == {"cpu_fused"}, Report(rec)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n", [7, 8, 100, 1000])
def test_a_row_of_equal_values_has_that_mean_and_zero_variance(dtype, n):
    """In bf16 the mean is also an output, read rounded by the group's other members, but its
    own values (fp32 in the group) minus it read it unrounded: read rounded, the centered row
    was the mean's rounding error, and standardized it came out -132 where eager gives 0."""
    x = torch.zeros(3, n, dtype=dtype)
    m, s, var, centered, standardized = _compiled(_stats_of_log_softmax, x)
    assert torch.equal(m, torch.log_softmax(x, -1)[:, :1])  # eager's value, exactly
    for t in (s, var, centered, standardized):  # fp64 gives exactly 0 for each
        assert torch.equal(t, torch.zeros_like(t)), t


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("value", [-2.0794415416798357, 1000.1, 12345.678])
def test_layer_norm_of_equal_values_gives_its_bias(dtype, value):
    """Eager gives exactly the bias. Uncorrected, fp32 rows of 2000.2 (1000.1 doubled) came out
    0.1 from it, and of 24691.356 0.9: the mean's rounding error over sqrt(eps)."""
    x = torch.full((4, 100), value).to(dtype)
    w, b = torch.randn(100).to(dtype), torch.randn(100).to(dtype)
    out = _compiled(lambda x, w, b: F.layer_norm(x * 2, (100,), w, b), x, w, b)  # * 2: exact, and a group
    assert torch.equal(out, b.expand_as(out))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_variance_still_matches_eager_on_offset_and_spread_rows(dtype):
    """The correction changes nothing but rounding: rows far from 0 (where a mean's rounding
    matters most), rows with one outlier, tiny rows, a row of one value (var NaN as eager)."""
    torch.manual_seed(0)
    cases = [torch.randn(16, 300) * 1e-3 + 1e3, torch.randn(16, 300) * 10.0,
             torch.cat([torch.randn(16, 299), torch.full((16, 1), 1e4)], 1), torch.randn(5, 2), torch.randn(4, 1)]

    def fn(x):
        x = x * 2  # exact; a lone var or layer_norm of an input is left to ATen's kernel
        return (x.var(-1), x.std(-1, keepdim=True), F.layer_norm(x, (x.shape[-1],)),
                (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-5))

    for x in cases:
        x = x.to(dtype)
        torch._dynamo.reset()
        got = _compiled(fn, x)
        ref, ref64 = fn(x), fn(x.double())
        tol = 1e-3 if dtype == torch.float32 else 1e-2
        for r, g, r64 in zip(ref, got, ref64):
            assert same_as_eager(r, g, fp64_ref=r64, tol=tol), (x.shape, r, g)


def test_the_fuzzer_programs_that_found_it():
    status, detail = fuzz.check(generate(7110, 2))
    assert status == "ok", detail


def test_the_training_steps_of_a_standardized_constant_row():
    """Seed 8972 of grammar 2: where(x1 > 0, x0, x1) with x1 of shape [1] makes a row of equal
    values; std's backward divides its centered values by the std. Uncorrected, the forward
    saved a std of a few ulps and the gradient of x1 came out 120 where eager's is ~0."""
    status, detail = fuzz.check(generate(8972, 2), train=True)
    assert status == "ok", detail


# A row holding inf has an infinite mean (or NaN for inf and -inf), and the centered values'
# sum that corrects the mean is NaN there. Eager's x - x.mean() gives -inf beside a finite x;
# the corrected mean gave NaN everywhere in the row until the correction applied to finite
# means only.
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_row_with_inf_keeps_its_infinite_mean(dtype):
    x = torch.randn(6, 50).to(dtype)
    x[0, 7], x[1, 9], x[2, 3], x[2, 4], x[3, 5] = float("inf"), float("-inf"), float("inf"), float("-inf"), float("nan")
    fns = (lambda x: (x - x.mean(-1, keepdim=True)) * 2.0,
           lambda x: (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-5),
           lambda x: torch.nn.functional.layer_norm(x * 1.0, (50,)))
    for fn in fns:
        torch._dynamo.reset()
        with torch.no_grad():
            ref, res = fn(x), torch.compile(fn, backend="fxcpp")(x)
        assert torch.equal(ref.isnan(), res.isnan()) and torch.equal(ref.isinf(), res.isinf()), (ref[:4], res[:4])
        assert torch.equal(ref.isinf() & (ref > 0), res.isinf() & (res > 0))
