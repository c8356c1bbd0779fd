"""oneDNN fusion end to end through torch.compile: every pattern fires (explain), numbers match eager."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxcpp
from helpers import assert_same
from fxcpp import _C

# These tests are about the oneDNN kernels: a build without them (FXCPP_ONEDNN=0, e.g. on a
# GPU machine without oneDNN) has nothing here to test.
pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")

ANCHOR_OPS = {"aten::convolution", "aten::addmm", "aten::mm", "aten::bmm"}


class ConvBnAct(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.act = act

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class ResidualBlock(nn.Module):  # conv + add + relu, the ResNet pattern Inductor fuses only with freezing
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(8, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.c2(torch.relu(self.c1(x))) + x)


class DeconvAdd(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)

    def forward(self, x, skip):
        return self.up(x) + skip


class LinearChain(nn.Module):  # linear + add + relu, mul/div post-ops, a long chain
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(32, 64)
        self.l2 = nn.Linear(64, 32)

    def forward(self, x, r):
        h = torch.relu(self.l1(x) + 0.5)
        return torch.tanh(F.gelu(self.l2(h) * 2.0 + r) / 3.0)


class Attention(nn.Module):  # batched matmuls on activations, a scaled score
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(32, 96)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        s = torch.softmax(q @ k.transpose(-1, -2) / 4.0, dim=-1)
        return s @ v


class Conv1d3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(4, 8, 3, padding=1)
        self.c3 = nn.Conv3d(4, 4, 3, padding=1, groups=4)

    def forward(self, x1, x3):
        return F.silu(self.c1(x1)), F.hardswish(self.c3(x3))


CASES = {
    "conv_bn_relu": (lambda: ConvBnAct(nn.ReLU()), lambda: [torch.randn(2, 8, 12, 12)]),
    "conv_bn_silu": (lambda: ConvBnAct(nn.SiLU()), lambda: [torch.randn(2, 8, 12, 12)]),
    "conv_bn_hardswish": (lambda: ConvBnAct(nn.Hardswish()), lambda: [torch.randn(2, 8, 12, 12)]),
    "conv_bn_leaky_relu": (lambda: ConvBnAct(nn.LeakyReLU(0.1)), lambda: [torch.randn(2, 8, 12, 12)]),
    "conv_bn_relu6": (lambda: ConvBnAct(nn.ReLU6()), lambda: [torch.randn(2, 8, 12, 12)]),
    "residual_block": (ResidualBlock, lambda: [torch.randn(2, 8, 10, 10)]),
    "deconv_add": (DeconvAdd, lambda: [torch.randn(1, 8, 5, 5), torch.randn(1, 4, 10, 10)]),
    "linear_chain": (LinearChain, lambda: [torch.randn(4, 7, 32), torch.randn(32)]),
    "attention": (Attention, lambda: [torch.randn(2, 6, 32)]),
    "conv1d_conv3d": (Conv1d3d, lambda: [torch.randn(2, 4, 20), torch.randn(1, 4, 5, 6, 7)]),
}


def _randomize_bn(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.normal_()
                m.running_var.uniform_(0.5, 2.0)
                m.weight.normal_()
                m.bias.normal_()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", sorted(CASES))
def test_pattern_fuses_and_matches_eager(case, dtype):
    make, inputs = CASES[case]
    torch.manual_seed(0)
    model = make().eval().to(dtype)
    _randomize_bn(model)
    xs = [x.to(dtype) for x in inputs()]
    torch._dynamo.reset()
    with torch.no_grad():
        report = fxcpp.explain(model, *xs)
    assert report.kernel_counts["onednn"] > 0, str(report)
    left = [r for r in report.rows if r.op in ANCHOR_OPS and r.kernel != "onednn"]
    assert not left, left  # no convolution or matmul left to ATen
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fxcpp")
    with torch.no_grad():
        fp64 = copy.deepcopy(model).double()(*[x.double() for x in xs])
        assert_same(model(*xs), compiled(*xs), fp64_ref=fp64)


def test_fused_rows_name_their_group():
    torch.manual_seed(0)
    model = ConvBnAct(nn.ReLU()).eval()
    with torch.no_grad():  # an inference graph (with grad on, the conv output is saved for backward)
        report = fxcpp.explain(model, torch.randn(1, 8, 6, 6))
    rows = {r.op: r for r in report.rows}
    conv = rows["aten::convolution"]
    assert conv.kernel == "onednn" and conv.group == conv.node and conv.time_us is not None
    for op in ("aten::_native_batch_norm_legit_no_training", "aten::relu"):
        assert rows[op].kernel == "onednn" and rows[op].group == conv.node


def test_disabling_the_fusion_passes_keeps_aten():
    torch.manual_seed(0)
    model = ResidualBlock().eval()
    x = torch.randn(1, 8, 6, 6)
    off = {"disable_passes": ["onednn_lower", "fold_batchnorm", "fuse_postops", "layout_propagation"]}
    report = fxcpp.explain(model, x, options=off)
    assert report.kernel_counts["onednn"] == 0 and report.kernel_counts["aten"] > 0
    torch._dynamo.reset()
    with torch.no_grad():
        assert_same(model(x), torch.compile(model, backend="fxcpp", options=off)(x))


def test_dynamic_batch_builds_one_primitive_per_shape():
    torch.manual_seed(0)
    model = LinearChain().eval()
    compiled = torch.compile(model, backend="fxcpp", dynamic=True)
    with torch.no_grad():
        for b in (1, 3, 8, 3):
            x, r = torch.randn(b, 5, 32), torch.randn(32)
            assert_same(model(x, r), compiled(x, r))


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("channels_last", [False, True])
def test_conv_fed_by_conv_runs_oneDNN_not_its_reference(batch, channels_last):
    """A convolution reading another's channels-last output at batch 1: the size-1 N dim's
    stride must not be rewritten into an unreadable format (every batch-1 ResNet-50
    convolution after the first had fallen to oneDNN's reference implementation, then ATen)."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                      nn.Conv2d(32, 32, 1), nn.ReLU(), nn.Conv2d(32, 16, 3, padding=1)).eval()
    x = torch.randn(batch, 16, 14, 14)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    with torch.no_grad():
        report = fxcpp.explain(m, x)
        convs = [r for r in report.rows if r.op == "aten::convolution"]
        assert len(convs) == 3 and not any("reference" in r.impl for r in convs), report
        torch._dynamo.reset()
        assert_same(m(x), torch.compile(m, backend="fxcpp")(x))
