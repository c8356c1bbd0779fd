"""A oneDNN conv or Linear checks at each call that no NaN or inf can reach its relu/clip before
running them as oneDNN's own clamps, which reads its input (max |x|). Where that input is an
earlier conv's output in the same call, the earlier conv records a bound on it instead
(runtime/value_bounds.h: ReLU6 gives 6), and the read is skipped. The values must stay eager's,
NaN and inf included, and a bound must never outlive the values it was recorded for."""
import os
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxcpp
from fxcpp import _C, lowering

from test_onednn_nonfinite import _same_nonfinite

pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")


@pytest.fixture(autouse=True)
def _onednn_path(monkeypatch):
    # These shapes are small enough that a first call could keep eager's ops; the checks are oneDNN's.
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "onednn")
    torch._dynamo.reset()
    yield
    _C._set_value_bounds(True)


class Block(nn.Module):
    """MobileNetV2's inverted residual: expand 1x1 + ReLU6, depthwise 3x3 + ReLU6, project 1x1
    (no activation) + the block's input."""

    def __init__(self, c, e=3):
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(c, c * e, 1, bias=False), nn.BatchNorm2d(c * e), nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(c * e, c * e, 3, padding=1, groups=c * e, bias=False),
                                nn.BatchNorm2d(c * e), nn.ReLU6())
        self.project = nn.Sequential(nn.Conv2d(c * e, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.project(self.dw(self.expand(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU6())
        self.blocks = nn.Sequential(Block(16), Block(16))
        self.head = nn.Sequential(nn.Conv2d(16, 32, 1), nn.ReLU6())

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def _net(dtype):
    torch.manual_seed(0)
    net = Net()
    for m in net.modules():  # BatchNorm statistics other than the identity
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    return net.eval().to(dtype)


def _call_counts(compiled, x):
    """The outputs of one call, and how many checks took a recorded bound and read an input."""
    s0 = _C.onednn_stats()
    out = compiled(x)
    s1 = _C.onednn_stats()
    return out, s1["input_bounds_known"] - s0["input_bounds_known"], s1["input_reads"] - s0["input_reads"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_clamped_convs_after_the_first_read_no_input(dtype):
    net, x = _net(dtype), torch.randn(2, 3, 32, 32, dtype=dtype)
    with torch.no_grad():
        compiled = torch.compile(net, backend="fxcpp")
        compiled(x)
        out, known, reads = _call_counts(compiled, x)
        # Six convs end in ReLU6: the stem reads the model's input, and each later one takes its
        # input's bound from the conv that wrote it (a block's output: its projection plus the
        # block's input, both bounded).
        assert (known, reads) == (5, 1)
        _C._set_value_bounds(False)
        off, known_off, reads_off = _call_counts(compiled, x)
        assert (known_off, reads_off) == (0, 6)
        # The same kernels either way: the bound only spares the read.
        assert torch.equal(out, off)
        ref = net(x)
    if dtype == torch.float32:
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    else:
        ref64 = _net(torch.float64)(x.double())
        assert fxcpp.verify.same_as_eager(ref, out, fp64_ref=ref64, tol=1e-2)


@pytest.mark.parametrize("where", ["input", "first_conv_weight", "middle_conv_weight", "overflow"])
def test_a_nan_or_inf_reaching_a_later_conv_is_seen(where):
    net, x = _net(torch.float32), torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        compiled = torch.compile(net, backend="fxcpp")
        compiled(x)
        compiled(x)  # bounds recorded at this call must not carry over to the next
        if where == "input":
            x[0, 1, 5, 7] = float("nan")
            x[1, 0, 9, 9] = float("inf")
        elif where == "first_conv_weight":
            net.stem[0].weight.data[3, 1, 1, 1] = float("nan")
        elif where == "middle_conv_weight":
            net.blocks[0].dw[0].weight.data[5, 0, 1, 1] = float("inf")
        else:  # finite weights whose products pass fp32's range: inf, then inf - inf
            w = net.blocks[1].project[0].weight.data
            w.copy_(w.sign() * 3e38)
        out, known, reads = _call_counts(compiled, x)
        ref = net(x)
    assert ref.isnan().any() or ref.isinf().any(), "the case must carry a non-finite value to the end"
    assert reads > 1  # past the non-finite value, later convs read their inputs again
    _same_nonfinite(ref, out)


def test_a_plan_writing_into_an_intermediate_keeps_no_bounds():
    # aot's graphs write only into their inputs, and a traced graph reads an in-place op's
    # result, not the value it wrote into. A graph that reads the written value itself (here:
    # a conv's clamped output multiplied past fp32's range in place, then read by a second
    # conv) could meet a bound recorded before the write: such a plan keeps no bounds at all.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cpp"))
    from graphs import aten_graph

    def fn(x, w1, w2):
        h = F.hardtanh(F.conv2d(x, w1), 0.0, 6.0)
        h.mul_(1e38)
        return F.hardtanh(F.conv2d(h, w2), 0.0, 6.0)

    torch.manual_seed(0)
    args = [torch.randn(1, 4, 8, 8), torch.randn(8, 4, 1, 1), torch.randn(8, 8, 1, 1)]
    gm = aten_graph(fn, *args)
    nodes = {n.name: n for n in gm.graph.nodes}
    nodes["convolution_1"].replace_input_with(nodes["mul_"], nodes["hardtanh"])
    next(n for n in gm.graph.nodes if n.op == "output").args = ((nodes["hardtanh_1"], nodes["mul_"]),)
    gm.recompile()
    ref = gm(args[0].clone(), *args[1:])[0]
    assert ref.isnan().any()
    g, _ = lowering.lower_graph(gm, keep_meta=True, static={1, 2})
    _C.run_pipeline(g)
    assert _C.Graph.node_targets(g) == ["onednn::conv", "aten::mul_.Tensor", "onednn::conv"]
    exe = _C.Executable(g)
    for _ in range(2):
        s0 = _C.onednn_stats()
        out = exe.run(list(args))[0]
        assert _C.onednn_stats()["input_bounds_known"] == s0["input_bounds_known"]
        _same_nonfinite(ref, out)


def test_linears_pass_bounds_too():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU6(), nn.Linear(128, 32),
                        nn.Hardtanh(-2.0, 2.0)).eval()
    x = torch.randn(64, 64)
    with torch.no_grad():
        compiled = torch.compile(mlp, backend="fxcpp")
        compiled(x)
        out, known, reads = _call_counts(compiled, x)
        assert (known, reads) == (2, 1)
        torch.testing.assert_close(out, mlp(x), rtol=1e-4, atol=1e-4)
        x[3, 7] = float("nan")
        out, known, reads = _call_counts(compiled, x)
        _same_nonfinite(mlp(x), out)


def test_calls_from_many_threads_keep_their_own_bounds():
    # One call's table is its own: a thread whose input holds a NaN beside threads whose inputs
    # are finite (which record bounds) still gets eager's NaN, and they their values.
    from helpers import errors_in_threads

    net = _net(torch.float32)
    finite = torch.randn(2, 3, 32, 32)
    poisoned = finite.clone()
    poisoned[1, 2, 3, 4] = float("nan")
    with torch.no_grad():
        refs = [net(finite), net(poisoned)]
        compiled = torch.compile(net, backend="fxcpp")
        compiled(finite)
        compiled(poisoned)
        bad = []

        def worker(k):
            for i in range(20):
                which = (i + k) % 2
                try:
                    _same_nonfinite(refs[which], compiled(poisoned if which else finite))
                except AssertionError as e:
                    bad.append(str(e)[:200])

        errors = errors_in_threads(*[lambda k=k: worker(k) for k in range(4)])
    assert not errors, errors[:1]
    assert not bad, bad[:1]
