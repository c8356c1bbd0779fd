"""widen_chains: between oneDNN nodes that compute a bf16/fp16 model in fp32 (no native kernels
for the dtype here), values stay fp32 instead of being rounded and widened again; anything else
reads the model's dtype. FXCPP_BF16=fp32 makes bf16 compute in fp32 on any host (fp16 always
does), FXCPP_BF16=native the opposite, so every case runs on either host class."""
import pytest
import torch
import torch.nn.functional as F

from fxcpp import _C
from graphs import fused, lowered, pipeline_until, run

pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")

BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32


def _chain(x, w1, w2, w3):
    """conv -> relu -> conv (+ the first conv's output: a residual) -> relu -> conv."""
    a = torch.relu(F.conv2d(x, w1, padding=1))
    b = torch.relu(F.conv2d(a, w2, padding=1) + a)
    return F.conv2d(b, w3, padding=1)


def _inputs(dtype):
    torch.manual_seed(0)
    return [torch.randn(1, 8, 10, 10, dtype=dtype), *(torch.randn(8, 8, 3, 3, dtype=dtype) / 8 for _ in range(3))]


def _widened(fn, xs):
    _, g = lowered(fn, *xs)
    pipeline_until(g, "layout_propagation")
    changed = _C.run_pass(g, "widen_chains")
    return g, changed, [(n["anchor_op"], n["out_dtype"]) for n in fused(g)]


def _close_to_fp64(fn, xs, out):
    """The harness's rule: at least as close to fp64 as eager in the model's dtype (with slack)."""
    ref64 = fn(*[x.double() for x in xs])
    eager = fn(*xs)
    assert out.dtype == eager.dtype and out.shape == eager.shape
    err = (out.double() - ref64).abs().max().item()
    err_eager = (eager.double() - ref64).abs().max().item()
    assert err <= err_eager * 1.5 + 1e-3, (err, err_eager)


@pytest.mark.parametrize("dtype, force", [(BF16, "fp32"), (F16, None)])
def test_a_chain_of_widened_convs_stays_fp32_inside(dtype, force, monkeypatch):
    if force:
        monkeypatch.setenv("FXCPP_BF16", force)
    else:
        monkeypatch.delenv("FXCPP_BF16", raising=False)
    xs = _inputs(dtype)
    g, changed, outs = _widened(_chain, xs)
    assert changed is True
    assert [d for _, d in outs] == [F32, F32, dtype], outs  # the last one is the graph output
    assert _C.run_pass(g, "widen_chains") is False  # a second run changes nothing
    out = run(g, *xs)[0]
    _close_to_fp64(_chain, xs, out)


def test_native_bf16_keeps_every_dtype(monkeypatch):
    monkeypatch.setenv("FXCPP_BF16", "native")
    _, changed, outs = _widened(_chain, _inputs(BF16))
    assert changed is False and all(d == BF16 for _, d in outs), outs


def test_fp32_models_are_untouched(monkeypatch):
    monkeypatch.setenv("FXCPP_BF16", "fp32")
    _, changed, outs = _widened(_chain, _inputs(F32))
    assert changed is False and all(d == F32 for _, d in outs), outs


def test_values_read_elsewhere_keep_the_models_dtype(monkeypatch):
    """A value any non-oneDNN node reads, or a graph output, stays bf16 even when a widened
    conv reads it too."""
    monkeypatch.setenv("FXCPP_BF16", "fp32")

    def also_pooled(x, w1, w2, w3):
        a = F.conv2d(x, w1, padding=1)
        return F.conv2d(a, w2, padding=1), a.amax(dim=(2, 3))

    def also_returned(x, w1, w2, w3):
        a = F.conv2d(x, w1, padding=1)
        return F.conv2d(a, w2, padding=1), a

    for fn in (also_pooled, also_returned):
        xs = _inputs(BF16)
        g, changed, outs = _widened(fn, xs)
        assert changed is False and all(d == BF16 for _, d in outs), (fn.__name__, outs)
        for got, want in zip(run(g, *xs), fn(*xs)):
            assert got.dtype == want.dtype


def test_a_matmul_output_read_as_a_weight_is_not_widened(monkeypatch):
    """Only src and post-op operands may arrive fp32: a matmul whose output is another
    matmul's weight operand (attention's scores @ values) keeps bf16."""
    monkeypatch.setenv("FXCPP_BF16", "fp32")

    def f(x, w1, w2):
        v = F.linear(x, w1)             # [4, 6]
        return torch.mm(x[:, :6].t(), v) @ w2  # v is the weight of the mm

    torch.manual_seed(0)
    xs = [torch.randn(4, 8, dtype=BF16), torch.randn(6, 8, dtype=BF16), torch.randn(6, 5, dtype=BF16)]
    g, _, outs = _widened(f, xs)
    assert outs[0][1] == BF16, outs
    out = run(g, *xs)[0]
    assert out.dtype == BF16
    _close_to_fp64(f, xs, out)


@pytest.mark.parametrize("choice", ["onednn", "aten", "gemv"])
def test_linear_chain_on_every_path(choice, monkeypatch):
    """Linear -> GELU -> Linear (+ residual) in bf16 computed as fp32: the inner value stays fp32
    whichever path each node takes, ATen's included (its operands are widened to match)."""
    monkeypatch.setenv("FXCPP_BF16", "fp32")
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", choice)

    def mlp(x, w1, b1, w2, b2):
        h = F.gelu(F.linear(x, w1, b1))
        return F.linear(h, w2, b2) + x

    torch.manual_seed(0)
    for m in (1, 5):
        xs = [torch.randn(m, 16, dtype=BF16), torch.randn(32, 16, dtype=BF16) / 4, torch.randn(32, dtype=BF16),
              torch.randn(16, 32, dtype=BF16) / 4, torch.randn(16, dtype=BF16)]
        g, changed, outs = _widened(mlp, xs)
        assert outs[0][1] == F32 and outs[-1][1] == BF16, outs
        out = run(g, *xs)[0]
        _close_to_fp64(mlp, xs, out)
