"""Variances in the CPU fused kernels: torch.var_mean (a custom norm's statistics) fuses with what
reads it, a variance alone fuses too (ATen's var/std/var_mean accumulate Welford in double, one
element at a time: ~18x slower than the fused kernel), and a correction larger than the row
gives eager's inf / NaN, not a negative variance."""
import pytest
import torch

import fxcpp
from test_cpu_fused import DTYPES, compare, make_inputs


def var_mean_norm(x, w):  # a LayerNorm written with torch.var_mean (timm's StdConv, custom norms)
    v, m = torch.var_mean(x, -1, keepdim=True, unbiased=False)
    return (x - m) * torch.rsqrt(v + 1e-5) * w


CASES = {
    "var_mean_norm": (var_mean_norm, [(24, 200), (200,)]),
    "var_mean_alone": (lambda x: torch.var_mean(x, -1), [(12, 100)]),
    "var_mean_two_dims_keepdim": (lambda x: torch.var_mean(x, (-2, -1), correction=0, keepdim=True), [(3, 5, 6, 7)]),
    "std_alone": (lambda x: x.std(-1), [(16, 300)]),
    "var_alone_keepdim": (lambda x: x.var(-1, keepdim=True, correction=0), [(4, 9, 33)]),
}


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_variance_fuses_and_matches_eager(name, dtype):
    fn, shapes = CASES[name]
    report, _, _ = compare(fn, make_inputs(shapes, DTYPES[dtype]))
    assert len({r.group for r in report.rows if r.kernel == "cpu_fused"}) == 1, report


def test_var_mean_is_one_kernel_with_its_readers():
    report, _, _ = compare(var_mean_norm, make_inputs(CASES["var_mean_norm"][1], torch.float32))
    ops = {r.op for r in report.rows if r.kernel == "cpu_fused"}
    assert {"aten::var_mean.correction", "aten::sub.Tensor", "aten::rsqrt", "aten::mul.Tensor"} <= ops, report


# A correction at or above the row's length: eager divides by max(n - correction, 0), so a
# positive sum of squares gives inf and a zero one NaN. The fused kernel divided by n - correction
# and gave negative values (-0.46 where eager gives inf) before it clamped the divisor.
@pytest.mark.parametrize("cols, correction", [(2, 3), (2, 2), (1, 2), (5, 7.5), (4, 0)])
@pytest.mark.parametrize("op", ["var", "std", "var_mean"])
def test_correction_beyond_the_row(op, cols, correction):
    def fn(x):
        if op == "var_mean":
            v, m = torch.var_mean(x, -1, correction=correction)
            return v * 2 + m
        return getattr(x, op)(-1, correction=correction) * 2 + 1

    x = torch.randn(6, cols)
    x[0] = 1.5  # a row of equal values: a sum of squares of 0
    torch._dynamo.reset()
    with torch.no_grad():
        report = fxcpp.explain(fn, x)
        torch._dynamo.reset()
        res = torch.compile(fn, backend="fxcpp")(x)
        ref = fn(x)
    assert report.kernel_counts["cpu_fused"] > 0, report
    assert torch.equal(ref.isnan(), res.isnan()) and torch.equal(ref.isinf(), res.isinf()), (ref, res)
    fin = ref.isfinite()
    torch.testing.assert_close(res[fin], ref[fin], rtol=1e-5, atol=1e-6)


def centered_values_returned(x):  # the centered values are read again: no pass may skip them
    d = x - x.mean(-1, keepdim=True)
    return d, (d * d).mean(-1)


def centered_sums_returned(x):
    d = x - x.mean(-1, keepdim=True)
    return d.sum(-1), (d * d).sum(-1) + 1


def two_variances(x, y):  # two means, two corrections, in one kernel
    return x.var(-1, keepdim=True) * (x - y) + y.std(-1, keepdim=True)


def var_then_norm(x):
    v = x.var(-1, keepdim=True, correction=0)
    return (x - x.mean(-1, keepdim=True)) * torch.rsqrt(v + 1e-6) + v


# A variance's centered sums run in one pass (interp_rows.h, centered_sums) where the program
# allows it: these programs put the centered values' other readers around that pass.
SHARED = {
    "centered_values_returned": (centered_values_returned, [(20, 130)]),
    "centered_sums_returned": (centered_sums_returned, [(20, 130)]),
    "two_variances": (two_variances, [(16, 100), (16, 100)]),
    "var_then_norm": (var_then_norm, [(8, 4, 768)]),
}


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(SHARED))
def test_centered_sums_with_other_readers(name, dtype):
    fn, shapes = SHARED[name]
    compare(fn, make_inputs(shapes, DTYPES[dtype]))


@pytest.mark.parametrize("cols", [7, 16, 33, 768, 1000])
@pytest.mark.parametrize("op", ["var", "std", "var_mean"])
def test_a_variance_alone_of_equal_values_is_zero(op, cols):
    x = torch.full((5, cols), 2000.2)
    x[1] = -3.3e-3
    fn = (lambda x: torch.var_mean(x, -1)) if op == "var_mean" else (lambda x: getattr(x, op)(-1))
    torch._dynamo.reset()
    with torch.no_grad():
        assert fxcpp.explain(fn, x).kernel_counts["cpu_fused"] > 0
        torch._dynamo.reset()
        res = torch.compile(fn, backend="fxcpp")(x)
    v = res[0] if op == "var_mean" else res
    assert torch.equal(v, torch.zeros(5)), v
    if op == "var_mean":
        assert torch.equal(res[1], x[:, 0]), res[1]


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_a_layer_norms_two_centered_sums_share_one_pass(dtype):
    """A LayerNorm's program subtracts the mean before it sums the squares (sub; rsum; ...;
    rsumsq): both sums come from the one pass (interp_rows.h), counted once the second sum is
    taken from it. The second sum used to run a pass of its own in this order."""
    from fxcpp import _C

    n = 768
    fn = lambda x, w, b: torch.nn.functional.layer_norm(x, (n,), w, b).relu()  # noqa: E731
    xs = make_inputs([(64, n), (n,), (n,)], DTYPES[dtype])
    before = _C.cpu_fused_stats()["fused_reductions"]
    compare(fn, xs)
    assert _C.cpu_fused_stats()["fused_reductions"] > before
