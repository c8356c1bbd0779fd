"""A row mean subtracted from its own values, with no sum of their squares in the group
(x - x.mean(0), a centering written out), is shifted by the row's first value where the
group reduces other dims than the trailing ones (it runs by columns): m = s + sum(v - s) / n,
with s a per-row load (Program::row_first) and the sum in the mean's own pass. Two passes over
the tensor, as eager makes; the corrected mean it replaces made three. Trailing rows keep the
corrected mean (its extra pass is over L1 or L2, cheaper there than the shift's scalar work). Accurate to the spread of the row, not its size; a row
of equal values centers to exactly 0; a row holding inf or NaN, or one whose shifted values
overflow, falls back to the plain sum(v) / n of the same pass, as eager's mean is."""
import pytest
import torch

from fxcpp import _C
from test_cpu_fused import _plain_run, compare

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def center_dim0(x):
    return x - x.mean(0)


def center_last(x):
    return x - x.mean(-1, keepdim=True)


def center_middle_of_prologue(x, y):  # v computed from two inputs, y broadcast along the rows
    v = x * 2.0 + y
    return (v - v.mean(1, keepdim=True)) * 0.5


def center_nhwc(x):  # over N, H, W of a channels-last tensor (BatchNorm's centering)
    return x - x.mean((0, 2, 3), keepdim=True)


def channels_last(shape):
    return torch.randn(shape).contiguous(memory_format=torch.channels_last)


# name: (fn, input makers, runs by columns, the node args viewed at their rows' first element)
PATTERNS = {
    "center_dim0": (center_dim0, [lambda: torch.randn(300, 64)], True, [0]),
    "center_last": (center_last, [lambda: torch.randn(4, 10000)], False, []),  # trailing: corrected, 3 passes
    "center_middle_of_prologue": (center_middle_of_prologue,
                                  [lambda: torch.randn(4, 50, 40), lambda: torch.randn(50, 1)], True, [0, 1]),
    "center_nhwc": (center_nhwc, [lambda: channels_last((4, 32, 6, 7))], True, [0]),
}


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_centering_fuses_and_matches_eager(name, dtype):
    fn, makers, by_columns, first = PATTERNS[name]
    torch.manual_seed(0)
    xs = [m().to(DTYPES[dtype]) for m in makers]
    before = _C.cpu_fused_stats()["column_calls"]
    compare(fn, xs)
    assert (_C.cpu_fused_stats()["column_calls"] > before) == by_columns
    _, g = _plain_run(fn, xs)
    (node,) = g.cpu_fused_nodes()
    assert node["phases"] == (2 if first else 3), node["program"]  # shifted: the mean's pass, the output's
    assert sorted(node["row_first"]) == first, node["program"]


@pytest.mark.parametrize("name, shape, shifted", [("center_dim0", (96, 80), True), ("center_last", (96, 80), False),
                                                   ("center_last", (3, 9000), False)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rows_of_equal_values_center_to_exactly_zero(name, shape, shifted, dtype):
    """Shifted (by columns) and corrected (packed and long trailing rows) alike. Rows of 3e38:
    eager's sum overflows and it gives -inf; fp64 gives 0, and so does the shifted mean
    (v - s is 0); the corrected one overflows as eager's sum does."""
    fn = PATTERNS[name][0]
    for value in (0.1, -2.0794415416798357, 1000.1, 12345.678, 3e38):
        x = torch.full(shape, value).to(dtype)
        torch._dynamo.reset()
        with torch.no_grad():
            res = torch.compile(fn, backend="fxcpp")(x)
        want = fn(x) if value == 3e38 and not shifted else torch.zeros_like(res)
        assert torch.equal(res, want), (value, res)


@pytest.mark.parametrize("name", ["center_dim0", "center_last"])
def test_offset_rows_are_centered_as_accurately_as_eager(name):
    """Rows far from 0 (where a mean's rounding matters most), with an outlier, tiny rows: by
    the harness rule against fp64 (more accurate than eager passes, less does not)."""
    fn = PATTERNS[name][0]
    torch.manual_seed(1)
    rows = [torch.randn(256, 48) * 1e-2 + 1e4, torch.randn(256, 48) * 10.0 - 3e3,
            torch.cat([torch.randn(255, 48), torch.full((1, 48), 1e5)]), torch.randn(2, 48), torch.randn(1, 48),
            torch.randn(9000, 4) * 1e-2 + 1e4]  # the last: long rows (phased) for center_last
    for x in rows:
        x = x if name == "center_dim0" else x.t().contiguous()
        compare(fn, [x], check_fused=x.numel() > 48)  # one row of one: nothing to fuse


@pytest.mark.parametrize("length", [40, 9000])
@pytest.mark.parametrize("name", ["center_dim0", "center_last"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_non_finite_rows_and_overflowing_shifts_give_eagers_values(name, dtype, length):
    """Rows 0-4: inf or NaN first (the shift is not finite), inf or -inf later, both. Rows 5-6:
    v - s overflows where neither v nor eager's sum does ([-3e38, 1e38, 1e38, 1e38, 0, ...] and
    [3e38, -3e38, ...]). The rest finite and ordinary."""
    torch.manual_seed(3)
    x = torch.randn(24, length)  # 24 columns in the dim-0 form: a vector of them runs by columns
    x[0, 0], x[1, 0], x[2, 7], x[3, 9], x[4, 3], x[4, 4] = (float("inf"), float("nan"), float("inf"),
                                                           float("-inf"), float("inf"), float("-inf"))
    x[5] = 0.0
    x[5, 0], x[5, 1:4] = -3e38, 1e38
    x[6, 0], x[6, 1] = 3e38, -3e38
    x = x.to(dtype)
    fn = PATTERNS[name][0]
    arg = x.t().contiguous() if name == "center_dim0" else x  # the rows above are its columns
    torch._dynamo.reset()
    with torch.no_grad():
        ref, res = fn(arg), torch.compile(fn, backend="fxcpp")(arg)
    if name == "center_dim0":
        ref, res = ref.t(), res.t()
    assert torch.equal(ref.isnan(), res.isnan()) and torch.equal(ref.isinf(), res.isinf()), (ref, res)
    assert torch.equal(ref.isinf() & (ref > 0), res.isinf() & (res > 0))
    huge, ordinary = ref[5:7].float(), ref[7:].float()
    assert huge.isfinite().all()  # eager's means of rows 5 and 6 are finite, and so are ours
    torch.testing.assert_close(res[5:7].float(), huge, rtol=2e-2, atol=3e36)  # 1% of the values' scale
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(res[7:].float(), ordinary, rtol=tol, atol=tol)
    finite = ref[:5].isfinite()
    torch.testing.assert_close(res[:5][finite].float(), ref[:5][finite].float(), rtol=tol, atol=tol)


def test_a_mean_the_group_also_returns_is_the_shifted_one():
    """Returned beside the centered values (in bf16 the group's other members read it rounded,
    the centering reads it unrounded: a constant row still centers to 0)."""
    def fn(x):
        m = x.mean(0)
        return m, x - m

    for dtype in (torch.float32, torch.bfloat16):
        torch.manual_seed(2)
        compare(fn, [(torch.randn(200, 33) + 50.0).to(dtype)])
        x = torch.full((200, 33), 7.3).to(dtype)
        torch._dynamo.reset()
        with torch.no_grad():
            m, c = torch.compile(fn, backend="fxcpp")(x)
        assert torch.equal(m, x[0]) and torch.equal(c, torch.zeros_like(c))


def test_strided_and_dynamic_inputs():
    """The first-element view follows each call's strides and sizes (a transposed input, then
    other row counts and lengths under dynamic shapes)."""
    fn = torch.compile(center_dim0, backend="fxcpp", dynamic=True)
    with torch.no_grad():
        for shape in ((40, 300), (33, 17), (128, 5)):
            x = torch.randn(shape).t()
            torch.testing.assert_close(fn(x), center_dim0(x), rtol=1e-5, atol=1e-5)
        compare(center_dim0, [torch.randn(64, 300)[:, ::3]])


def test_a_variance_keeps_the_corrected_mean():
    """With a sum of squares of the centered values in the group, the centered sum rides the
    squares' pass: no first-element operand."""
    fn = lambda x: (x - x.mean(0)) / (x.std(0) + 1e-5)  # noqa: E731
    x = torch.randn(300, 64)
    compare(fn, [x])
    _, g = _plain_run(fn, [x])
    (node,) = g.cpu_fused_nodes()
    assert node["row_first"] == [], node["program"]
