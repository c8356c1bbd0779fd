"""fp32 Linears with a narrow output (N < 12) run on the GEMV at any M where oneDNN would run
brgemm (runtime/onednn/matmul_kernel.cpp, narrow_output).

brgemm sums each output along K in one accumulator; below 12 columns eager's GEMM (MKL's narrow
path, as measured on the AMD hosts) lands closer to fp64: brgemm gave 1.3-3.6x eager's error from
K = 64 on, past the harness rule's 2x in 23 shapes of 90 (benchmarks/results/narrow-n-gemv/). The
GEMV sums over vector lanes: 0.35-1.04x eager's error, in oneDNN's time. FXCPP_KERNEL_CHOICE=ours
keeps eager's ops out (a first call may measure them faster) and leaves the GEMV to its rules; on
a host without brgemm (AVX2: oneDNN's gemm:jit, eager's accuracy) the rule is off."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from fxcpp import _C
from helpers import assert_frozen_runs_other_batches, assert_same, onednn_impls

pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")

BRGEMM = _C.host_info()["onednn_isa"].startswith("avx512")  # oneDNN runs brgemm for fp32 matmuls
NARROW = "(a narrow output, N = "


@pytest.fixture(autouse=True)
def _ours(monkeypatch):
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "ours")


def _rmse(y, y64):
    return ((y.double() - y64) ** 2).mean().sqrt().item()


def _compiled(m, *xs, **kw):
    torch._dynamo.reset()
    with torch.no_grad():
        return torch.compile(m, backend="fxcpp", **kw)(*xs)


@pytest.mark.parametrize("M,K,N", [(64, 512, 3), (64, 128, 3), (1001, 768, 2), (40, 300, 11), (8, 2048, 8)])
def test_narrow_output_error_at_most_eagers(M, K, N):
    """Narrow outputs (brgemm: 1.4-2.9x eager's error at these shapes on the Zen 5 host) run the
    GEMV, within 1.3x of eager's error."""
    torch.manual_seed(0)
    lin = nn.Linear(K, N, bias=False).eval()
    lin.weight.data = torch.randn(N, K)
    a = torch.randn(M, K) * 1000
    with torch.no_grad():
        ye = lin(a)
        y64 = F.linear(a.double(), lin.weight.double())
    yc = _compiled(lin, a)
    impls = onednn_impls(lin, a)
    if BRGEMM:
        assert len(impls) == 1 and impls[0].startswith("gemv") and NARROW in impls[0], impls
        assert _rmse(yc, y64) <= 1.3 * _rmse(ye, y64), (_rmse(yc, y64), _rmse(ye, y64))
    else:
        assert not any(NARROW in i for i in impls), impls
    assert_same(ye, yc, fp64_ref=y64)


@pytest.mark.parametrize("N", [12, 64])
def test_wider_outputs_stay_on_onednn(N):
    lin = nn.Linear(256, N).eval()
    impls = onednn_impls(lin, torch.randn(64, 256))
    assert len(impls) == 1 and not impls[0].startswith("gemv"), impls


def test_small_m_keeps_its_own_rule():
    """Where the small-M rule takes the GEMV anyway, explain() names no narrow output."""
    impls = onednn_impls(nn.Linear(256, 3).eval(), torch.randn(1, 256))
    assert len(impls) == 1 and impls[0].startswith("gemv") and NARROW not in impls[0], impls


def test_bf16_is_not_a_narrow_output():
    lin = nn.Linear(256, 3).eval().to(torch.bfloat16)
    x = torch.randn(64, 256, dtype=torch.bfloat16)
    assert not any(NARROW in i for i in onednn_impls(lin, x))
    assert_same(lin(x).detach(), _compiled(lin, x))


def test_onednn_forced_keeps_brgemm(monkeypatch):
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "onednn")
    impls = onednn_impls(nn.Linear(256, 3).eval(), torch.randn(64, 256))
    assert len(impls) == 1 and not impls[0].startswith("gemv"), impls


class _Head(nn.Module):
    """A token-classification head: bias, GELU, a residual of the output's shape, over [B, S, K]."""

    def __init__(self, k=96, n=5):
        super().__init__()
        self.lin = nn.Linear(k, n)

    def forward(self, x, r):
        return F.gelu(self.lin(x)) + r


@pytest.mark.parametrize("batch,seq", [(3, 67), (1, 300)])
def test_head_with_post_ops_over_3d_input(batch, seq):
    """Many rows (300 > one 64-row tile: the GEMV splits them across threads), a flattened 3-d
    input, bias and post-ops; and the same at a row count that is no multiple of anything."""
    torch.manual_seed(0)
    m = _Head().eval()
    x, r = torch.randn(batch, seq, 96), torch.randn(batch, seq, 5)
    with torch.no_grad():
        ref = m(x, r)
    assert_same(ref, _compiled(m, x, r))
    impls = onednn_impls(m, x, r)
    assert any(i.startswith("gemv") and NARROW in i for i in impls) == BRGEMM, impls


def test_non_finite_values():
    torch.manual_seed(0)
    lin = nn.Linear(64, 3).eval()
    x = torch.randn(80, 64)
    x[3, 5], x[7, 0], x[9, 63] = float("nan"), float("inf"), float("-inf")
    with torch.no_grad():
        ref = lin(x)
    assert_same(ref, _compiled(lin, x))


def test_weight_change_through_data_is_seen():
    torch.manual_seed(0)
    lin = nn.Linear(64, 3).eval()
    x = torch.randn(80, 64)
    c = torch.compile(lin, backend="fxcpp")
    with torch.no_grad():
        assert_same(lin(x), c(x))
        lin.weight.data.mul_(2)
        lin.bias.data.add_(1)
        assert_same(lin(x), c(x))


def test_weight_not_contiguous_is_packed_once():
    """A weight whose rows are not contiguous (a transposed parameter) is packed into rows."""
    torch.manual_seed(0)

    class T(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(64, 3))  # [K, N]: x @ w

        def forward(self, x):
            return x @ self.w

    m = T().eval()
    x = torch.randn(80, 64)
    with torch.no_grad():
        ref = m(x)
    assert_same(ref, _compiled(m, x))
    if BRGEMM:
        impls = onednn_impls(m, x)
        assert len(impls) == 1 and impls[0].startswith("gemv") and "packed once" in impls[0], impls


def test_freeze_other_batches():
    """Options.freeze: the parameter released, the GEMV runs from its pack at other row counts."""
    torch.manual_seed(0)
    m = _Head().eval()
    xs = {b: (torch.randn(b, 96), torch.randn(b, 5)) for b in (70, 2, 3, 130)}
    assert_frozen_runs_other_batches(m, xs, lambda: m.lin.weight)


@pytest.mark.parametrize("layout", ["row_slice", "transposed", "every_other_row"])
def test_strided_inputs(layout):
    """The GEMV reads rows through their stride (a slice of wider rows), copies what it cannot
    (a transposed input)."""
    torch.manual_seed(0)
    lin = nn.Linear(64, 3).eval()
    base = {"row_slice": lambda: torch.randn(70, 100)[:, 10:74], "transposed": lambda: torch.randn(64, 70).t(),
            "every_other_row": lambda: torch.randn(140, 64)[::2]}[layout]()
    with torch.no_grad():
        ref = lin(base)
    assert_same(ref, _compiled(lin, base))
