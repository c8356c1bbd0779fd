"""relu, clip and hardsigmoid after a packed conv or Linear run as oneDNN's own clamps (one
instruction each, but NaN comes out as a bound) at calls whose input, operands and weight prove
that no NaN or inf can reach them, and as the NaN-preserving chain at every other call. Both must
give eager's values; explain() says which ran."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxcpp
from fxcpp import _C

from test_onednn_nonfinite import ACTS, SPECIAL, Depthwise1x1, Linear1, _same_nonfinite

pytestmark = [pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)"),
              pytest.mark.usefixtures("onednn_forced")]

# Finite, with signed zeros, denormals and large values, as many as SPECIAL (Depthwise1x1's channels).
FINITE = [0.0, -0.0, 1e-40, -1e-40, 1e20, -1e20, 0.1, -0.1, 0.5, 2.0, -2.0, 3.0,
          -3.0, 5.9999, 6.0, 7.0, -7.0, 1.0, -1.0, 88.0, -100.0, 1e-3, -1e-3, 4.5]
assert len(FINITE) == len(SPECIAL)

CLAMPS = {name: ACTS[name] for name in ("relu", "relu6", "hardtanh", "hardsigmoid", "clamp", "clamp_lo",
                                         "clamp_max", "relu_then_add")}
CLAMPS["scale_then_relu6"] = lambda y: F.relu6(y * 3.0 - 1.0)
PLAIN = "clamps plain where the input is checked finite"
# A bf16 Linear where oneDNN has neither native bf16 nor brgemm matmul (below AVX-512) reads its
# weight widened at each call rather than packed (matmul_kernel.cpp, widens_per_call).
WIDENED_PER_CALL = not _C.host_info()["native_bf16"] and not _C.host_info()["onednn_isa"].startswith("avx512")
FELL_BACK = "NaN-preserving post-ops at a call"


def _model(anchor, act, dtype):
    return (Linear1 if anchor == "linear" else Depthwise1x1)(act).eval().to(dtype)


def _values(values, anchor, dtype):
    v = torch.tensor(values, dtype=dtype)
    return v.reshape(-1, 1) if anchor == "linear" else v.reshape(1, -1, 1, 1)


def _check(model, x):
    # A bf16 denormal input flushed to zero by the kernel (DAZ) gives a zero of either sign: on an
    # Intel host with AMX, oneDNN 3.2's brdgmm_dw depthwise kernel returns -0 for -1e-40 where
    # eager's (torch's newer oneDNN, jit_dw) returns +0; the AMD hosts gave +0 in both. Values agree.
    flushed = (x != 0) & (x.abs() < torch.finfo(x.dtype).tiny) if x.dtype == torch.bfloat16 else None
    with torch.no_grad():
        text = str(fxcpp.explain(model, x))
        torch._dynamo.reset()
        _same_nonfinite(model(x).float(), torch.compile(model, backend="fxcpp")(x).float(), any_zero_sign=flushed)
    return text


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("anchor", ["linear", "conv"])
@pytest.mark.parametrize("act", sorted(CLAMPS))
def test_finite_input_runs_the_plain_clamps_with_eagers_values(act, anchor, dtype):
    model = _model(anchor, CLAMPS[act], dtype)
    text = _check(model, _values(FINITE, anchor, dtype))
    if anchor == "linear" and dtype == torch.bfloat16 and WIDENED_PER_CALL:
        # No pack, so no weight bound: the NaN-preserving chain at every call (values checked above).
        assert "widened to fp32 at each call" in text and PLAIN not in text, text
        return
    assert PLAIN in text and FELL_BACK not in text, text


@pytest.mark.parametrize("anchor", ["linear", "conv"])
@pytest.mark.parametrize("act", ["relu", "relu6", "clamp", "hardsigmoid"])
def test_nan_or_inf_input_runs_the_nan_preserving_chain(act, anchor):
    model = _model(anchor, CLAMPS[act], torch.float32)
    text = _check(model, _values(SPECIAL, anchor, torch.float32))
    assert FELL_BACK in text, text


def test_a_result_too_large_to_bound_runs_the_nan_preserving_chain():
    """Finite input and weight whose products overflow to ±inf: the weight's bound rules the
    plain clamps out (inf - inf would be NaN, turned into a bound by them), and relu6 of ±inf
    is 6 and 0 as in eager."""
    model = nn.Sequential(nn.Linear(1, 1), nn.ReLU6()).eval()
    with torch.no_grad():
        model[0].weight.fill_(1e30)
        model[0].bias.zero_()
    x = torch.tensor([1e10, -1e10, 1.0, -1e-30] * 8).reshape(-1, 1)
    text = _check(model, x)
    assert FELL_BACK in text, text


def test_a_nan_weight_and_its_repair_are_both_seen():
    model = _model("conv", F.relu6, torch.float32)
    x = _values(FINITE, "conv", torch.float32)
    with torch.no_grad():
        model.conv.weight[3] = float("nan")
        compiled = torch.compile(model, backend="fxcpp")
        _same_nonfinite(model(x), compiled(x))  # channel 3 is NaN in both
        model.conv.weight.fill_(1.0)  # re-packed, with a finite bound again
        out = compiled(x)
        _same_nonfinite(model(x), out)
        assert not out.isnan().any()


class ConvAddRelu(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x, r):
        return F.relu(self.conv(x) + r)


def test_a_nan_in_an_operand_added_before_the_clamp_is_kept():
    torch.manual_seed(0)
    model = ConvAddRelu().eval()
    x, r = torch.randn(1, 8, 6, 6), torch.randn(1, 8, 6, 6)
    r[0, 2, 3, 3] = float("nan")
    r[0, 5, 1, 1] = -float("inf")
    with torch.no_grad():
        report = fxcpp.explain(model, x, r)
        assert report.kernel_counts["aten"] == 0, report
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="fxcpp")
        _same_nonfinite(model(x, r), compiled(x, r))
        r2 = torch.randn(1, 8, 6, 6)  # then a finite operand: the plain clamps again
        torch.testing.assert_close(compiled(x, r2), model(x, r2))
    assert FELL_BACK in str(report), report


def test_a_strided_input_is_checked_too():
    """A non-dense input is read by ATen's max instead of the bit-pattern scan."""
    model = _model("conv", F.relu6, torch.float32)
    wide = torch.randn(1, len(SPECIAL), 1, 2)
    wide[0, :, 0, 0] = torch.tensor(SPECIAL)

    def f(t):
        return model(t[..., ::2])

    with torch.no_grad():
        _same_nonfinite(f(wide), torch.compile(f, backend="fxcpp")(wide))


def test_the_switch_keeps_the_nan_preserving_chain_at_every_call(monkeypatch):
    monkeypatch.setenv("FXCPP_PLAIN_CLAMPS", "0")
    model = _model("conv", F.relu6, torch.float32)
    text = _check(model, _values(FINITE, "conv", torch.float32))
    assert PLAIN not in text and "weight packed once" in text, text
