"""A oneDNN node's post-op chain stays within what oneDNN takes (32 post-ops per primitive).

- Up to that limit each binary post-op is one more argument of the call: a Linear followed by
  25 residual adds is one oneDNN call of 29 arguments (call_args.h takes 40; it took 24, and such a
  chain raised "a oneDNN call with more than 24 arguments" at its first call).
- Past it the chain stops (fuse_postops.cpp: kMaxOnednnPostOps, counting the 2-5 post-ops a
  NaN-preserving relu/clip/hardsigmoid takes) and the rest runs as other kernels, rather than
  oneDNN refusing the whole node at its first call and all of it running as ATen ops.
"""
import warnings

import pytest
import torch
import torch.nn as nn

import fxcpp
from fxcpp import _C
from helpers import assert_same

pytestmark = [pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)"),
              pytest.mark.usefixtures("onednn_forced")]


class Residuals(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 32)

    def forward(self, x, *rs):
        y = self.lin(x)
        for r in rs:
            y = y + r
        return y


class Clamps(nn.Module):  # each clamp is a NaN-preserving clip of five oneDNN post-ops
    def __init__(self, n):
        super().__init__()
        self.lin, self.n = nn.Linear(64, 32), n

    def forward(self, x):
        y = self.lin(x)
        for i in range(self.n):
            y = torch.clamp(y, -10.0 + i, 10.0 - i)
        return y


def _run(model, *args):
    """Compiled output over three calls (a new input each time) checked against eager; the rows."""
    compiled = torch.compile(model, backend="fxcpp")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # "oneDNN refused the primitive" is a warning
        for k in range(3):
            a = [t + k for t in args]
            assert_same(model(*a), compiled(*a))
    torch._dynamo.reset()
    with torch.no_grad():
        report = fxcpp.explain(model, *args)
    return [r for r in report.rows if r.op in ("aten::add.Tensor", "aten::clamp")]


def _onednn_rows(rows):
    assert all(r.ran in ("onednn", "cpu_fused", "aten") for r in rows), {r.ran for r in rows}
    return sum(r.kernel == "onednn" and r.ran == "onednn" for r in rows)


def test_25_residual_adds_are_one_call():
    torch.manual_seed(0)
    m = Residuals().eval()
    x, rs = torch.randn(8, 64), [torch.randn(8, 32) for _ in range(25)]
    rows = _run(m, x, *rs)
    assert len(rows) == 25 and _onednn_rows(rows) == 25


def test_40_residual_adds_stop_at_the_limit():
    torch.manual_seed(0)
    m = Residuals().eval()
    x, rs = torch.randn(8, 64), [torch.randn(8, 32) for _ in range(40)]
    rows = _run(m, x, *rs)
    assert len(rows) == 40 and _onednn_rows(rows) == 32  # oneDNN's limit


def test_clamps_count_their_nan_preserving_steps():
    torch.manual_seed(0)
    m = Clamps(8).eval()
    x = torch.randn(8, 64) * 30
    x[0, :5] = float("nan")  # NaN rows stay NaN, as eager's clamp keeps them
    rows = _run(m, x)
    assert len(rows) == 8 and _onednn_rows(rows) == 6  # 6 x 5 = 30 post-ops; a seventh would make 35
