"""onednn_lower: which convolutions and matmuls become oneDNN nodes, numbers, idempotence."""
import pytest
import torch
import torch.nn.functional as F

from fxcpp import _C
from graphs import fused, lowered, pipeline_until, run, targets

# These tests are about the oneDNN kernels: a build without them (FXCPP_ONEDNN=0, e.g. on a
# GPU machine without oneDNN) has nothing here to test.
pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")

CASES = {
    "conv1d": (lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), [(2, 4, 16), (6, 4, 3), (6,)]),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, padding=1, dilation=2), [(2, 4, 9, 9), (6, 4, 3, 3), (6,)]),
    "conv2d_groups": (lambda x, w, b: F.conv2d(x, w, b, groups=2, stride=2), [(1, 4, 9, 9), (6, 2, 3, 3), (6,)]),
    "conv2d_depthwise": (lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=4), [(1, 4, 8, 8), (4, 1, 3, 3), (4,)]),
    "conv3d": (lambda x, w, b: F.conv3d(x, w, b, padding=(1, 0, 1)), [(1, 3, 5, 6, 7), (4, 3, 3, 3, 3), (4,)]),
    "conv_transpose2d": (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
                         [(1, 4, 5, 5), (4, 3, 3, 3), (3,)]),
    "conv_transpose2d_groups": (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, groups=2),
                                [(1, 4, 5, 5), (4, 3, 3, 3), (6,)]),
    "linear": (lambda x, w, b: F.linear(x, w, b), [(5, 8), (3, 8), (3,)]),
    "linear_3d": (lambda x, w, b: F.linear(x, w, b), [(2, 5, 8), (3, 8), (3,)]),
    "linear_nobias": (lambda x, w: F.linear(x, w), [(2, 5, 8), (3, 8)]),
    "mm": (lambda a, b: a @ b, [(5, 8), (8, 3)]),
    "bmm": (lambda a, b: torch.bmm(a, b), [(2, 5, 8), (2, 8, 3)]),
    "matmul_broadcast": (lambda a, b: torch.matmul(a, b), [(2, 3, 5, 8), (8, 4)]),
    "matmul_batched_transposed": (lambda a, b: a @ b.transpose(-1, -2), [(2, 5, 8), (2, 4, 8)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_lowers_to_onednn_and_keeps_numbers(case, dtype):
    fn, shapes = CASES[case]
    torch.manual_seed(0)
    xs = [torch.randn(s, dtype=dtype) for s in shapes]
    _, g = lowered(fn, *xs)
    pipeline_until(g, "dce")
    assert _C.run_pass(g, "onednn_lower") is True
    ts = targets(g)
    assert any(t.startswith("onednn::") for t in ts)
    assert not {"aten::convolution", "aten::addmm", "aten::mm", "aten::bmm"} & set(ts), ts
    assert _C.run_pass(g, "onednn_lower") is False  # idempotent
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-4
    torch.testing.assert_close(run(g, *xs)[0], fn(*xs), atol=tol, rtol=tol)


def test_linear_absorbs_its_views_and_transpose():
    x, w, b = torch.randn(2, 5, 8), torch.randn(3, 8), torch.randn(3)
    _, g = lowered(lambda x, w, b: F.linear(x, w, b), x, w, b)
    pipeline_until(g, "onednn_lower")
    _C.run_pass(g, "dce")
    (node,) = fused(g)
    assert node["name"] == "addmm" and node["weight_nk"] and node["flatten_src"]
    assert targets(g) == ["onednn::matmul"]


def test_bias_free_linear_absorbs_its_unsafe_view_so_relu_can_fuse():
    # aot decomposes a bias-free Linear on 3-d input as view → mm → _unsafe_view (T5's FFN).
    x, w = torch.randn(2, 5, 8), torch.randn(3, 8)
    fn = lambda x, w: torch.relu(F.linear(x, w))  # noqa: E731
    gm, g = lowered(fn, x, w)
    assert "aten._unsafe_view" in str(gm.graph)  # the pattern this test is about
    pipeline_until(g, "fuse_postops")
    _C.run_pass(g, "dce")
    (node,) = fused(g)
    assert node["flatten_src"] and node["weight_nk"] and len(node["post_ops"]) == 1
    assert targets(g) == ["onednn::matmul"]
    torch.testing.assert_close(run(g, x, w)[0], fn(x, w), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("fn, shapes, dtype", [
    (lambda a, b: a @ b, [(5, 8), (8, 3)], torch.float64),                   # oneDNN kernels: fp32/bf16 only
    (lambda a, b: torch.addmm(a, a[:, :3] @ b[:3], b, beta=0.5), [(5, 5), (5, 5)], torch.float32),  # beta != 1
    (lambda a, b, c: torch.addmm(c, a, b), [(5, 8), (8, 3), (5, 3)], torch.float32),  # bias is not per column
])
def test_refuses_what_the_kernels_do_not_run(fn, shapes, dtype):
    xs = [torch.randn(s, dtype=dtype) for s in shapes]
    _, g = lowered(fn, *xs)
    pipeline_until(g, "dce")
    before = str(g)
    _C.run_pass(g, "onednn_lower")
    assert "aten::addmm" in targets(g) or "aten::mm" in targets(g)
    torch.testing.assert_close(run(g, *xs)[0], fn(*xs))
    if dtype == torch.float64:
        assert str(g) == before


def test_folds_a_zero_constant_pad_into_the_conv():
    def f(x, w, b):
        return F.conv2d(F.pad(x, (0, 1, 2, 1)), w, b, stride=2)

    xs = [torch.randn(1, 4, 9, 8), torch.randn(6, 4, 3, 3), torch.randn(6)]
    _, g = lowered(f, *xs)
    pipeline_until(g, "onednn_lower")
    assert targets(g) == ["onednn::conv"]
    (node,) = fused(g)
    assert "constant_pad_nd" in node["covers"]
    torch.testing.assert_close(run(g, *xs)[0], f(*xs), atol=1e-4, rtol=1e-4)


def test_keeps_a_nonzero_pad():
    def f(x, w):
        return F.conv2d(F.pad(x, (1, 1, 1, 1), value=1.0), w)

    xs = [torch.randn(1, 4, 6, 6), torch.randn(6, 4, 3, 3)]
    _, g = lowered(f, *xs)
    pipeline_until(g, "onednn_lower")
    assert targets(g) == ["aten::constant_pad_nd", "onednn::conv"]
    torch.testing.assert_close(run(g, *xs)[0], f(*xs), atol=1e-4, rtol=1e-4)
