"""The GEMV on outputs narrower than its 4-row weight block (N = 1, 2, 3: a classifier or
regression head) takes a block of exactly N rows and up to 8 activation rows per pass
(runtime/cpu/gemv_rows.h). Every output keeps its own vector accumulator whatever the block shape
(an N that 4 does not divide repeats rows in its last block), so Linear(K, n) must equal the first
n columns of a Linear(K, 4 * ceil(n / 4)) whose first rows are the same, bit for bit, at every row
count (row tails, several tiles, a lone block split by rows).
FXCPP_KERNEL_CHOICE=gemv forces the GEMV at any M on every host."""
import pytest
import torch
import torch.nn as nn

from fxcpp import _C
from helpers import assert_same, onednn_impls

pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")


@pytest.fixture(autouse=True)
def _gemv(monkeypatch):
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "gemv")


def _run(m, x):
    torch._dynamo.reset()
    with torch.no_grad():
        y = torch.compile(m, backend="fxcpp")(x)
    impls = onednn_impls(m, x)
    assert len(impls) == 1 and impls[0].startswith("gemv"), impls
    return y


def _pair(n, k, dtype, bias=True):
    """Linear(k, n) and Linear(k, 4 * ceil(n / 4)) sharing their first n weight rows and bias
    entries: the wide one runs whole 4-row blocks only."""
    wide = nn.Linear(k, -(-n // 4) * 4, bias=bias).eval()
    narrow = nn.Linear(k, n, bias=bias).eval()
    with torch.no_grad():
        narrow.weight.copy_(wide.weight[:n])
        if bias:
            narrow.bias.copy_(wide.bias[:n])
    return narrow.to(dtype), wide.to(dtype)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 8, 9, 17, 64, 65, 300])
def test_narrow_block_equals_the_wide_blocks_columns(n, m):
    torch.manual_seed(n * 1000 + m)
    narrow, wide = _pair(n, 100, torch.float32)  # K = 100: a vector tail on AVX2 and AVX-512
    x = torch.randn(m, 100)
    yn, yw = _run(narrow, x), _run(wide, x)
    assert torch.equal(yn, yw[:, :n])
    with torch.no_grad():
        assert_same(narrow(x), yn)


@pytest.mark.parametrize("n", [5, 6, 7, 9, 11])
@pytest.mark.parametrize("m", [1, 3, 16, 65])
def test_a_last_block_with_repeated_rows(n, m):
    torch.manual_seed(n * 100 + m)
    narrow, wide = _pair(n, 100, torch.float32)
    x = torch.randn(m, 100)
    yn, yw = _run(narrow, x), _run(wide, x)
    assert torch.equal(yn, yw[:, :n])
    with torch.no_grad():
        assert_same(narrow(x), yn)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_narrow_block_low_precision_weights(n, dtype):
    torch.manual_seed(n)
    narrow, wide = _pair(n, 256, dtype, bias=False)
    x = torch.randn(37, 256, dtype=dtype)
    yn, yw = _run(narrow, x), _run(wide, x)
    assert torch.equal(yn, yw[:, :n])
    with torch.no_grad():
        assert_same(narrow(x), yn)


@pytest.mark.parametrize("n", [1, 2])
def test_lone_block_split_by_rows(n):
    """M <= 64 with one weight block: rows of 8 KB are split into tiles (across threads where
    there are two), each row written once."""
    torch.manual_seed(7)
    narrow, wide = _pair(n, 2048, torch.float32)
    x = torch.randn(64, 2048)
    yn, yw = _run(narrow, x), _run(wide, x)
    assert torch.equal(yn, yw[:, :n])
    with torch.no_grad():
        assert_same(narrow(x), yn)


def test_non_finite_rows_stay_in_their_rows():
    torch.manual_seed(3)
    narrow, _ = _pair(1, 64, torch.float32)
    x = torch.randn(20, 64)
    x[3, 5] = float("nan")
    x[11, 0] = float("inf")
    y = _run(narrow, x)
    with torch.no_grad():
        ye = narrow(x)
    assert torch.isnan(y[3]).all() and torch.equal(torch.isfinite(y), torch.isfinite(ye))
    assert_same(ye, y)
