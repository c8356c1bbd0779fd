"""Under dynamic shapes a compiled graph lays out its outputs as eager does, as its static
graph does. The passes read the layout from the traced strides, which a dynamic dim makes
symbolic ("8*s0"); they had read only static strides, so the graph Dynamo compiles at a new
batch size returned contiguous outputs where eager's were channels-last or transposed (found
by the fuzzer's calls with a new first-dim size: seeds 9, 24, 71, 119, 168, 189, 195, 275,
340, 346)."""
import pytest
import torch
import torch.nn.functional as F

from fxcpp.explain import Report, recording
from helpers import assert_same


@pytest.fixture(autouse=True)
def _reset():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _run_dynamic(fn, *inputs):
    """One call of fn compiled with symbolic sizes; checked against eager, strides included."""
    rec: list = []
    with torch.no_grad(), recording(rec):
        ref = fn(*inputs)
        res = torch.compile(fn, backend="fxcpp", dynamic=True)(*inputs)
    report = Report(rec)
    assert None in report.planned_peak_bytes.values(), "no graph was compiled with symbolic sizes"
    assert_same(ref, res)
    assert res.stride() == ref.stride(), (res.stride(), ref.stride())
    return report


def _rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


@pytest.mark.parametrize("seq", [5, 9])
def test_a_fused_row_group_over_a_transposed_input_stays_transposed(seq):
    # [2, seq, 8] read as [2, 8, seq]: strides (8*s0, 1, 8), a symbolic outermost stride.
    x, w = torch.randn(2, seq, 8), torch.randn(seq)
    report = _run_dynamic(lambda x, w: _rms_norm(x.transpose(1, 2), w), x, w)
    assert report.kernel_counts["cpu_fused"] >= 1, report


def test_a_convolution_of_a_channels_last_input_writes_channels_last_under_symbolic_sizes():
    # Batch, height and width symbolic: strides (3*s1*s2, 1, 3*s2, 3).
    conv = torch.nn.Conv2d(3, 8, 3, padding=1).eval()
    x = torch.randn(2, 3, 6, 5).to(memory_format=torch.channels_last)
    report = _run_dynamic(lambda x: torch.relu(conv(x)), x)
    assert report.kernel_counts["onednn"] >= 1, report


def test_a_convolution_keeps_channels_last_at_a_new_batch_size():
    """The fuzzer's case (seed 9): compiled static first, then again with the batch symbolic."""
    conv = torch.nn.Conv2d(3, 3, 1, groups=3).eval()
    f = torch.compile(lambda x: conv(F.relu(x)), backend="fxcpp")
    with torch.no_grad():
        for n in (2, 4, 7):
            x = torch.randn(n, 3, 4, 8).to(memory_format=torch.channels_last)
            ref, res = conv(F.relu(x)), f(x)
            assert_same(ref, res)
            assert res.stride() == ref.stride(), (n, res.stride(), ref.stride())


def test_a_dense_layout_is_read_from_symbolic_strides():
    from fxcpp import _C

    order = _C.dense_dim_order
    assert order([2, 8, "s0"], ["8*s0", 1, 8]) == [1, 2, 0]
    assert order(["s0", 3, "s1", "s2"], ["3*s1*s2", 1, "3*s2", 3]) == [1, 3, 2, 0]
    assert order(["s0", 3, "s1", "s2"], ["s1*s2*3", 1, "s2*3", 3]) == [1, 3, 2, 0]  # any factor order
    assert order([4, 1, 5], [5, 7, 1]) == [2, 0]  # a size-1 dim lies anywhere
    assert order([4, 5], [5, 2]) is None  # gaps
    assert order([4, 5], [1, 1]) is None  # overlapping
    assert order(["s0", 5], ["s0 + 1", 1]) is None  # not a product: cannot be told
    assert order([2, 0, 3], [0, 3, 1]) is None  # empty: no layout
