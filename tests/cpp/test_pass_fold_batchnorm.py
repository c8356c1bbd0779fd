"""fold_batchnorm: conv/linear + inference BatchNorm fold into one node; refusals; idempotence."""
import pytest
import torch
import torch.nn.functional as F

from fxcpp import _C
from graphs import fused, lowered, pipeline_until, run, targets

# These tests are about the oneDNN kernels: a build without them (FXCPP_ONEDNN=0, e.g. on a
# GPU machine without oneDNN) has nothing here to test.
pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")


def _bn_params(c):
    torch.manual_seed(1)
    return [torch.randn(c), torch.randn(c), torch.randn(c), torch.rand(c) + 0.5]


def _conv_bn(x, w, b, g, be, m, v):
    return F.batch_norm(F.conv2d(x, w, b, padding=1), m, v, g, be, training=False, eps=1e-3)


def test_folds_conv_bn():
    xs = [torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), torch.randn(4)] + _bn_params(4)
    _, g = lowered(_conv_bn, *xs)
    pipeline_until(g, "onednn_lower")
    assert _C.run_pass(g, "fold_batchnorm") is True
    assert targets(g) == ["onednn::conv"]
    (node,) = fused(g)
    assert node["bn"] and "native_batch_norm" in node["covers"]
    assert _C.run_pass(g, "fold_batchnorm") is False  # idempotent
    torch.testing.assert_close(run(g, *xs)[0], _conv_bn(*xs), atol=1e-4, rtol=1e-4)


def test_folds_linear_bn():
    def linear_bn(x, w, g, be, m, v):
        return F.batch_norm(F.linear(x, w), m, v, g, be, training=False)

    xs = [torch.randn(6, 8), torch.randn(5, 8)] + _bn_params(5)
    _, g = lowered(linear_bn, *xs)
    pipeline_until(g, "fold_batchnorm")
    assert [n["bn"] for n in fused(g)] == [True]
    torch.testing.assert_close(run(g, *xs)[0], linear_bn(*xs), atol=1e-4, rtol=1e-4)


def test_refuses_when_the_conv_output_is_used_elsewhere():
    def f(x, w, b, g, be, m, v):
        c = F.conv2d(x, w, b)
        return F.batch_norm(c, m, v, g, be, training=False) + c

    xs = [torch.randn(1, 3, 6, 6), torch.randn(4, 3, 3, 3), torch.randn(4)] + _bn_params(4)
    _, g = lowered(f, *xs)
    pipeline_until(g, "onednn_lower")
    before = str(g)
    assert _C.run_pass(g, "fold_batchnorm") is False
    assert str(g) == before
    torch.testing.assert_close(run(g, *xs)[0], f(*xs), atol=1e-4, rtol=1e-4)


def test_refuses_when_the_conv_output_is_a_graph_output():
    def f(x, w, b, g, be, m, v):
        c = F.conv2d(x, w, b)
        return F.batch_norm(c, m, v, g, be, training=False), c

    xs = [torch.randn(1, 3, 6, 6), torch.randn(4, 3, 3, 3), torch.randn(4)] + _bn_params(4)
    _, g = lowered(f, *xs)
    pipeline_until(g, "onednn_lower")
    assert _C.run_pass(g, "fold_batchnorm") is False
    assert "aten::native_batch_norm" in targets(g)
