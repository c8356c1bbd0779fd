"""Non-finite values through every oneDNN post-op: NaN stays NaN, ±inf and signed zeros come
out as eager's kernels give them (oneDNN's own relu/clip/hardsigmoid would turn NaN into a
bound; at a call that could carry NaN or inf into them the kernels build those from
NaN-preserving steps: test_onednn_plain_clamps.py)."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxcpp
from fxcpp import _C

pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")

SPECIAL = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-40, -1e-40, 1e30, -1e30,
           0.1, -0.1, 0.5, 2.0, -2.0, 3.0, -3.0, 5.9999, 6.0, 7.0, -7.0, 1.0, -1.0, 88.0, -100.0]

ACTS = {
    "relu": F.relu,
    "leaky_relu": lambda y: F.leaky_relu(y, 0.1),
    "gelu": F.gelu,
    "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
    "silu": F.silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "elu": F.elu,
    "hardtanh": F.hardtanh,
    "relu6": F.relu6,
    "clamp": lambda y: y.clamp(-0.5, 2.0),
    "clamp_lo": lambda y: y.clamp(min=-0.5),
    "clamp_hi": lambda y: y.clamp(max=2.0),
    "clamp_min0": lambda y: y.clamp_min(0.0),
    "clamp_max": lambda y: y.clamp_max(1.5),
    "scale_shift": lambda y: y * 3.0 - 1.0,
    "div": lambda y: y / 4.0,
    "relu_then_add": lambda y: F.relu(y) + 1.0,
}


class Linear1(nn.Module):
    """y = x * 1 + 0 elementwise, through a Linear: the special values reach the post-op as they are."""

    def __init__(self, act):
        super().__init__()
        self.fc, self.act = nn.Linear(1, 1), act
        with torch.no_grad():
            self.fc.weight.fill_(1.0)
            self.fc.bias.zero_()

    def forward(self, x):
        return self.act(self.fc(x))


class Depthwise1x1(nn.Module):
    """The same through a depthwise 1x1 convolution with unit weights."""

    def __init__(self, act, c=len(SPECIAL)):
        super().__init__()
        self.conv, self.act = nn.Conv2d(c, c, 1, groups=c, bias=False), act
        with torch.no_grad():
            self.conv.weight.fill_(1.0)

    def forward(self, x):
        return self.act(self.conv(x))


def _inputs(anchor):
    v = torch.tensor(SPECIAL)
    return v.reshape(-1, 1) if anchor == "linear" else v.reshape(1, -1, 1, 1)


def _same_nonfinite(ref, res, any_zero_sign=None):
    """NaN where eager has NaN, eager's infinities, eager's zero signs (except where
    `any_zero_sign` marks a position whose zero may carry either sign) and eager's values."""
    assert torch.equal(ref.isnan(), res.isnan()), f"NaN positions differ:\nref={ref.flatten()}\nres={res.flatten()}"
    fin = ~ref.isnan()
    r, c = ref[fin], res[fin]
    assert torch.equal(r.isinf(), c.isinf()) and torch.equal(r[r.isinf()], c[r.isinf()]), f"inf differs:\n{r}\n{c}"
    zero = r == 0
    if any_zero_sign is not None:
        zero &= ~any_zero_sign.expand_as(ref)[fin]
    assert torch.equal(r[zero].signbit(), c[zero].signbit()), f"zero signs differ:\n{r}\n{c}"
    torch.testing.assert_close(c[~r.isinf()], r[~r.isinf()], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("anchor", ["linear", "conv"])
@pytest.mark.parametrize("act", sorted(ACTS))
def test_special_values_through_post_ops(act, anchor):
    model = (Linear1 if anchor == "linear" else Depthwise1x1)(ACTS[act]).eval()
    x = _inputs(anchor)
    with torch.no_grad():
        report = fxcpp.explain(model, x)
    assert report.kernel_counts["aten"] == 0, f"the activation did not fuse:\n{report}"
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fxcpp")
    with torch.no_grad():
        _same_nonfinite(model(x), compiled(x))
