"""layout_propagation: which convolutions write channels-last, numbers, output layouts, idempotence."""
import pytest
import torch
import torch.nn.functional as F

from fxcpp import _C
from graphs import fused, lowered, pipeline_until, run

# These tests are about the oneDNN kernels: a build without them (FXCPP_ONEDNN=0, e.g. on a
# GPU machine without oneDNN) has nothing here to test.
pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")


@pytest.fixture(autouse=True)
def _onednn_path(monkeypatch):
    """The layouts are oneDNN's: run its path even where eager's ops measure faster (tiny convs)."""
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "onednn")


def conv_pool_conv(x, w1, w2):
    return F.conv2d(F.max_pool2d(F.conv2d(x, w1, padding=1).relu(), 2), w2, padding=1)


def conv_then_flatten(x, w1, w2):
    return F.conv2d(x, w1, padding=1).flatten(2)  # a view that needs the contiguous layout


def conv_then_output(x, w1, w2):
    y = F.conv2d(x, w1, padding=1)
    return F.max_pool2d(y, 2), F.conv2d(y, w2, padding=1)  # the pooled value is a graph output


def conv_permute_layernorm(x, w1, w2):  # ConvNeXt: conv → NHWC → LayerNorm
    return F.layer_norm(F.conv2d(x, w1, padding=3, groups=8).permute(0, 2, 3, 1), [8])


def conv_permute_output(x, w1, w2):  # the permuted value is returned: its strides must be eager's
    return F.conv2d(x, w1, padding=1).permute(0, 2, 3, 1)


def conv_permute_relu_output(x, w1, w2):  # a pointwise op carries the permuted strides out
    return F.conv2d(x, w1, padding=1).permute(0, 2, 3, 1).relu() * 2


def conv_mean(x, w1, w2):
    return F.conv2d(x, w1, padding=1).relu().mean((2, 3))


CASES = {
    # fn -> channels_last flag of each conv in graph order
    "conv_pool_conv": (conv_pool_conv, [True, False]),
    "conv_then_flatten": (conv_then_flatten, [False]),
    "conv_then_output": (conv_then_output, [False, False]),
    "conv_permute_layernorm": (conv_permute_layernorm, [True]),
    "conv_permute_output": (conv_permute_output, [False]),
    "conv_permute_relu_output": (conv_permute_relu_output, [False]),
    "conv_mean": (conv_mean, [True]),
}


def test_a_channels_last_input_gives_a_channels_last_output_under_any_consumer():
    """Eager writes a channels-last input's convolution channels-last: a transposed view of it
    returned (fuzz seed 2237) must carry eager's strides, which a contiguous result would not."""
    def fn(x, w):
        return F.conv2d(x, w).transpose(-1, -2)

    x = torch.randn(1, 16, 8, 8).contiguous(memory_format=torch.channels_last)
    w = torch.randn(5, 16, 1, 1)
    _, g = lowered(fn, x, w)
    pipeline_until(g, "fuse_postops")
    assert _C.run_pass(g, "layout_propagation") is True
    assert [n["channels_last"] for n in fused(g)] == [True]
    ref, got = fn(x, w), run(g, x, w)[0]
    torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4)
    assert got.stride() == ref.stride()


@pytest.mark.parametrize("case", sorted(CASES))
def test_channels_last_where_every_consumer_reads_any_layout(case):
    fn, expected = CASES[case]
    torch.manual_seed(0)
    groups = 8 if case == "conv_permute_layernorm" else 1
    k = 7 if groups == 8 else 3
    xs = [torch.randn(2, 8, 12, 12), torch.randn(8, 8 // groups, k, k), torch.randn(8, 8, 3, 3)]
    _, g = lowered(fn, *xs)
    pipeline_until(g, "fuse_postops")
    changed = _C.run_pass(g, "layout_propagation")
    assert [n["channels_last"] for n in fused(g)] == expected
    assert changed is any(expected)
    assert _C.run_pass(g, "layout_propagation") is False  # idempotent
    ref = fn(*xs)
    ref = ref if isinstance(ref, tuple) else (ref,)
    got = run(g, *xs)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
        assert a.stride() == b.stride()  # graph outputs come back in eager's layout


def _reorders(capfd, fn):
    """oneDNN reorders run while calling fn (from oneDNN's verbose log)."""
    capfd.readouterr()
    _C.onednn_set_verbose(1)
    try:
        fn()
    finally:
        _C.onednn_set_verbose(0)
    out = capfd.readouterr().out
    return [line for line in out.splitlines() if ",exec," in line and ",reorder," in line]


def _chain(x, w):
    return F.conv2d(F.relu(F.conv2d(F.conv2d(x, w, padding=1), w, padding=1)), w, padding=1)


def test_a_chain_of_convolutions_reorders_only_at_its_ends(capfd):
    x, w = torch.randn(2, 8, 10, 10), torch.randn(8, 8, 3, 3)
    _, g = lowered(_chain, x, w)
    pipeline_until(g, "layout_propagation")
    assert [n["channels_last"] for n in fused(g)] == [True, True, False]
    exe = _C.Executable(g)
    exe.run([x, w])  # first call: primitives built, weights packed (reorders of their own)
    out = []
    reorders = _reorders(capfd, lambda: out.append(exe.run([x, w])[0]))
    # One reorder: the contiguous input into channels-last. Nothing between the convolutions;
    # the last one's channels-last result becomes contiguous through an ATen copy.
    assert len(reorders) == 1, reorders
    torch.testing.assert_close(out[0], _chain(x, w), atol=1e-4, rtol=1e-4)
    assert out[0].is_contiguous()


def test_a_channels_last_input_is_read_without_a_reorder(capfd):
    x = torch.randn(2, 8, 10, 10).contiguous(memory_format=torch.channels_last)
    w = torch.randn(8, 8, 3, 3)
    _, g = lowered(_chain, x, w)
    pipeline_until(g, "layout_propagation")
    exe = _C.Executable(g)
    exe.run([x, w])
    assert _reorders(capfd, lambda: exe.run([x, w])) == []


def test_a_graph_output_that_eager_returns_channels_last_stays_channels_last():
    x = torch.randn(2, 8, 10, 10).contiguous(memory_format=torch.channels_last)
    w = torch.randn(8, 8, 3, 3)
    _, g = lowered(lambda x, w: F.conv2d(x, w, padding=1), x, w)
    pipeline_until(g, "layout_propagation")
    assert [n["channels_last"] for n in fused(g)] == [True]
    out = run(g, x, w)[0]
    ref = F.conv2d(x, w, padding=1)
    assert out.stride() == ref.stride()  # eager's own (channels-last) layout, no copy to contiguous
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
