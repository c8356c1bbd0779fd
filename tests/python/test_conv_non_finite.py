"""A NaN or inf in a bf16 convolution's input stays where eager puts it (conv_kernel.cpp,
spreads_non_finite). oneDNN's bf16 convolutions read input channels in pairs; with an odd number
per group, the last pair's second value is the next pixel's (or group's) first channel, times a
zero weight: a NaN or inf there made NaN at an output eager gives finite (found by the fuzzer,
grammar 4 seed 1937: a softmax over fully masked rows, then a 1x1 convolution of one channel).
Such calls run eager's ATen path; finite calls keep oneDNN's. (Eager's own bf16 convolution leaks
the same way in other layouts on an AVX-512-BF16 host, e.g. a channels-last RGB input: fxcpp then
gives eager's values, the reference here. Under FXCPP_BF16=fp32 fxcpp computes exactly and those
cases differ from eager on such a host.)"""
import pytest
import torch
import torch.nn.functional as F

import fxcpp
from fxcpp import _C
from helpers import assert_same, aten_runs_natively

pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")

ONEDNN_BF16 = _C.host_info()["onednn_bf16"]


@pytest.fixture
def native_bf16(monkeypatch):
    """oneDNN's bf16 kernels wherever it has them, also where fxcpp computes bf16 in fp32 by
    default because fp32 is faster there (host.h, native_bf16)."""
    monkeypatch.setenv("FXCPP_BF16", "native")

# (in channels, out channels, groups, kernel, stride, transposed): each leaked on the AVX-512-BF16
# host before the fix but the depthwise one (one channel in and out per group: oneDNN's
# depthwise kernel reads no pairs) and the even ones, which are here to show they stay on oneDNN.
CASES = {
    "1x1_one_channel": (1, 4, 1, 1, 1, False),
    "1x1_rgb": (3, 8, 1, 1, 1, False),
    "3x3_rgb": (3, 8, 1, 3, 1, False),
    "3x3_five_channels_stride_2": (5, 8, 1, 3, 2, False),
    "grouped_five_per_group": (15, 6, 3, 1, 1, False),
    "depthwise_multiplier_2": (6, 12, 6, 3, 1, False),
    "transposed_one_channel": (1, 4, 1, 3, 2, True),
    "depthwise": (8, 8, 8, 3, 1, False),
    "even_channels": (16, 8, 1, 3, 1, False),
}
CHECKED = {"1x1_one_channel", "1x1_rgb", "3x3_rgb", "3x3_five_channels_stride_2", "grouped_five_per_group",
           "depthwise_multiplier_2", "transposed_one_channel"}


def _conv(case):
    ic, oc, g, k, s, transposed = CASES[case]
    gen = torch.Generator().manual_seed(0)
    if transposed:
        w = torch.randn(ic, oc // g, k, k, generator=gen).bfloat16()
        return (lambda x, w: F.conv_transpose2d(x, w, None, stride=s, groups=g)), w, ic
    w = torch.randn(oc, ic // g, k, k, generator=gen).bfloat16()
    return (lambda x, w: F.conv2d(x, w, None, stride=s, padding=k // 2, groups=g)), w, ic


def _input(ic, bad, channels_last=False):
    x = torch.randn(2, ic, 6, 10, generator=torch.Generator().manual_seed(1)).bfloat16()
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    if bad is not None:  # at a row's end and start, in the last and first channel, and inside
        x[1, ic - 1, 3, 9] = bad
        x[0, 0, 2, 0] = bad
        x[1, ic // 2, 4, 5] = bad
    return x


def _assert_like_eager(ref, res, exact=None):
    """eager's NaN, inf and values. Given `exact` (fp64), an output where eager has a NaN but
    the exact result has none must be the exact one: where fxcpp computes bf16 in fp32
    (host.h, native_bf16), eager's own bf16 convolution can still be oneDNN's and spread a NaN
    to a neighbour (the Intel AVX512-FP16 host: 32 NaN for 1x1_rgb's input, fp64 24), and the
    harness's fp64-reference rule takes the more accurate result."""
    if exact is not None:  # eager's NaN where the exact value is finite or inf: the exact one is wanted
        spurious = ref.isnan() & ~exact.isnan()
        ref = torch.where(spurious, exact.to(ref.dtype), ref)
    assert torch.equal(ref.isnan(), res.isnan()), (ref.isnan() != res.isnan()).nonzero()[:5]
    assert torch.equal(ref.isinf(), res.isinf()), (ref.isinf() != res.isinf()).nonzero()[:5]
    assert_same(ref, res)


@pytest.mark.parametrize("choice", ["onednn", "aten"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["contiguous", "channels_last"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_non_finite_inputs_stay_where_eager_puts_them(case, bad, channels_last, choice, monkeypatch):
    """Each path forced: left to itself, the first call's timing picks one (fused_kernel.h),
    and where bf16 computes in fp32 the two may differ at eager's spurious NaN: the oneDNN
    path computes exactly, the ATen path is eager's own convolution wherever ATen runs bf16
    natively (reference.h, aten_runs_natively), its spurious NaN included."""
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", choice)
    fn, w, ic = _conv(case)
    x = _input(ic, bad, channels_last)
    torch._dynamo.reset()
    eagers_own = _C.host_info()["native_bf16"] or (choice == "aten" and aten_runs_natively(torch.bfloat16))
    exact = None if eagers_own else fn(x.double(), w.double())
    with torch.no_grad():
        _assert_like_eager(fn(x, w), torch.compile(fn, backend="fxcpp")(x, w), exact)


@pytest.mark.skipif(not ONEDNN_BF16, reason="oneDNN has no bf16 convolutions on this host: no channel pairs")
@pytest.mark.parametrize("case", sorted(CASES))
def test_only_odd_channel_groups_check_their_input_and_finite_calls_stay_on_onednn(case, native_bf16):
    """explain(): a checked convolution says why a call with a NaN ran ATen's path; a finite call
    after it runs oneDNN's again, and matches eager."""
    fn, w, ic = _conv(case)
    compiled = torch.compile(fn, backend="fxcpp")
    torch._dynamo.reset()
    with torch.no_grad():
        report = fxcpp.explain(fn, _input(ic, float("nan")), w)
        (impl,) = [r.impl for r in report.rows if r.kernel == "onednn"]
        assert ("not all finite" in impl) == (case in CHECKED), impl
        torch._dynamo.reset()
        for bad in (float("nan"), None, float("inf"), None):
            x = _input(ic, bad)
            _assert_like_eager(fn(x, w), compiled(x, w))
        finite = _input(ic, None)
        report = fxcpp.explain(fn, finite, w)
    (impl,) = [r.impl for r in report.rows if r.kernel == "onednn"]
    assert impl.startswith("onednn ") or impl.startswith("aten: eager's ops were faster"), impl


@pytest.mark.skipif(not ONEDNN_BF16, reason="oneDNN has no bf16 convolutions on this host: no channel pairs")
@pytest.mark.parametrize("batchnorm", [False, True], ids=["conv_relu", "conv_batchnorm_relu"])
def test_a_frozen_convolution_given_a_nan_computes_from_its_kept_pack(batchnorm, monkeypatch, native_bf16):
    """Frozen (Options.freeze), eager's path has no weight to read: such a call computes ATen's
    convolution from the weight the kernel's pack holds (BatchNorm folded in), in fp32, and gives
    eager's NaN and inf where eager does; finite calls go on from the pack."""
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "onednn")  # the weight is released, not kept for eager's ops
    torch.manual_seed(0)
    layers = [torch.nn.Conv2d(3, 8, 1)] + ([torch.nn.BatchNorm2d(8)] if batchnorm else []) + [torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).eval()
    if batchnorm:
        with torch.no_grad():
            model[1].running_mean.normal_()
            model[1].running_var.uniform_(0.5, 2)
    model = model.bfloat16()
    calls = [_input(3, None), _input(3, float("nan")), _input(3, -float("inf")), _input(3, None)]
    with torch.no_grad():
        refs = [model(x) for x in calls]
        refs64 = [model.double()(x.double()) for x in calls]
        model.bfloat16()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fxcpp", options={"freeze": True})
    with torch.no_grad():
        for x, ref, ref64 in zip(calls, refs, refs64):
            res = compiled(x)
            assert torch.equal(ref.isnan(), res.isnan()) and torch.equal(ref.isinf(), res.isinf())
            assert_same(ref, res, fp64_ref=ref64)
    assert any(type(p).__name__ == "ReleasedTensor" for p in model.parameters())
    torch._dynamo.reset()
