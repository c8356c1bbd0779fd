"""A bf16/fp16 weight computed in fp32 is widened by oneDNN's reorder as it is packed
(onednn::weight_for_reorder): its pack must hold exactly the widened weight, whatever the layout
the reorder reads (a Linear's [N, K], a transposed view, grouped and transposed convolutions), in
each way a pack is made (packed once, frozen, reordered per call with pack_weights=False), and a
changed weight must still be seen. A non-dense weight is converted first, as before.

The reference is the same computation in fp32 from the same low-precision tensors, rounded once,
which is what the widened path computes: the two differ by accumulation order only. A folded
BatchNorm is the exception: the fold is rounded to the weight's dtype before it is widened
(onednn::fold_batchnorm), so conv + BatchNorm is judged by the harness's rule against eager."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxcpp
from fxcpp import _C
from helpers import assert_same

pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")


class TransposedWeightLinear(nn.Module):
    """A weight stored [K, N] and read as [N, K] through .t(): dense, not contiguous."""

    def __init__(self, k=48, n=40):
        super().__init__()
        self.w = nn.Parameter(torch.randn(k, n) * 0.2)
        self.b = nn.Parameter(torch.randn(n) * 0.2)

    def forward(self, x):
        return F.linear(x, self.w.t(), self.b)


class StridedWeightLinear(nn.Module):
    """Every other row of a parameter: not dense, so it is converted before the reorder."""

    def __init__(self, k=48, n=40):
        super().__init__()
        self.w = nn.Parameter(torch.randn(2 * n, k) * 0.2)

    def forward(self, x):
        return F.linear(x, self.w[::2])


MODELS = {
    "linear": (lambda: nn.Sequential(nn.Linear(48, 40), nn.ReLU()), lambda: torch.randn(32, 48)),
    "linear_transposed_weight": (TransposedWeightLinear, lambda: torch.randn(32, 48)),
    "linear_strided_weight": (StridedWeightLinear, lambda: torch.randn(32, 48)),
    "conv": (lambda: nn.Conv2d(8, 16, 3, padding=1), lambda: torch.randn(2, 8, 10, 10)),
    "conv_grouped": (lambda: nn.Conv2d(8, 16, 3, padding=1, groups=4), lambda: torch.randn(2, 8, 10, 10)),
    "conv_transposed": (lambda: nn.ConvTranspose2d(8, 6, 3, stride=2), lambda: torch.randn(2, 8, 6, 6)),
    "conv_bn": (
        lambda: nn.Sequential(nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)),
        lambda: torch.randn(2, 8, 10, 10),
    ),
}
OPTIONS = {"packed": {}, "frozen": {"freeze": True}, "unpacked": {"pack_weights": False}}


def _fp32_reference(model, x, dtype):
    """The model computed in fp32 from its own low-precision parameters, rounded once; with a
    folded BatchNorm, eager's result and the fp64 model's."""
    with torch.no_grad():
        if isinstance(model, nn.Sequential) and isinstance(model[-1], nn.BatchNorm2d):
            return model(x), copy.deepcopy(model).double()(x.double())
        return copy.deepcopy(model).float()(x.float()).to(dtype), None


def _assert_widened(res, reference, dtype):
    ref, fp64 = reference
    assert res.dtype == dtype and res.shape == ref.shape
    if fp64 is not None:
        assert_same(ref, res, fp64_ref=fp64)
        return
    # One rounding of an fp32 result: at most one ulp of the output's dtype apart where the
    # two accumulation orders land on either side of a rounding boundary.
    ulp = 2.0**-7 if dtype == torch.bfloat16 else 2.0**-10
    torch.testing.assert_close(res.float(), ref.float(), rtol=ulp, atol=ulp * 1e-2)


@pytest.mark.parametrize("how", sorted(OPTIONS))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_widened_weight_is_exact_in_every_layout_and_stays_fresh(name, dtype, how, monkeypatch):
    monkeypatch.setenv("FXCPP_BF16", "fp32")  # bf16 computed in fp32 on any host (fp16 always is)
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "onednn")  # the path under test, not a measured choice
    torch.manual_seed(0)
    make, inp = MODELS[name]
    model, x = make().eval().to(dtype), inp().to(dtype)
    if name == "conv_bn":
        with torch.no_grad():
            model[1].running_mean.normal_()
            model[1].running_var.uniform_(0.5, 2)
    options = OPTIONS[how]
    ref = _fp32_reference(model, x, dtype)
    torch._dynamo.reset()
    with torch.no_grad():  # on a copy: explain with freeze=True releases the model's parameters
        report = fxcpp.explain(copy.deepcopy(model), x, options=dict(options))
    widened = [r.impl for r in report.rows if r.kernel == "onednn" and r.impl.startswith("onednn:")]
    assert widened and all("-as-fp32" in i for i in widened), report
    torch._dynamo.reset()
    if how == "frozen":  # freezing releases the parameters: the reference is taken before
        compiled = torch.compile(model, backend="fxcpp", options=options)
        with torch.no_grad():
            for _ in range(2):
                _assert_widened(compiled(x), ref, dtype)
        return
    compiled = torch.compile(model, backend="fxcpp", options=options)
    with torch.no_grad():
        _assert_widened(compiled(x), ref, dtype)
        _assert_widened(compiled(x), ref, dtype)
        # No version bump: a pack's copy-on-write guard sees it (unpacked, the weight is read per call).
        next(model.parameters()).data.mul_(2)
        _assert_widened(compiled(x), _fp32_reference(model, x, dtype), dtype)
