"""fuse_postops: every post-op the table knows, on conv, linear and bmm; chains; refusals; idempotence."""
import pytest
import torch
import torch.nn.functional as F

from fxcpp import _C
from graphs import fused, lowered, pipeline_until, run, targets

# These tests are about the oneDNN kernels: a build without them (FXCPP_ONEDNN=0, e.g. on a
# GPU machine without oneDNN) has nothing here to test.
pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")

# name -> (fn of (y, other) applied after the anchor, expected post-op algs)
POST = {
    "relu": (lambda y, o: torch.relu(y), ["relu"]),
    "gelu_erf": (lambda y, o: F.gelu(y), ["gelu_erf"]),
    "gelu_tanh": (lambda y, o: F.gelu(y, approximate="tanh"), ["gelu_tanh"]),
    "silu": (lambda y, o: F.silu(y), ["swish"]),
    "sigmoid": (lambda y, o: torch.sigmoid(y), ["logistic"]),
    "tanh": (lambda y, o: torch.tanh(y), ["tanh"]),
    "hardswish": (lambda y, o: F.hardswish(y), ["hardswish"]),
    "hardsigmoid": (lambda y, o: F.hardsigmoid(y), ["hardsigmoid"]),
    "leaky_relu": (lambda y, o: F.leaky_relu(y, 0.2), ["relu"]),
    "elu": (lambda y, o: F.elu(y, 0.7), ["elu"]),
    "hardtanh": (lambda y, o: F.hardtanh(y, -0.5, 0.5), ["clip"]),
    "relu6": (lambda y, o: F.relu6(y), ["clip"]),
    "clamp": (lambda y, o: y.clamp(min=-0.3), ["clip"]),
    "add_scalar": (lambda y, o: y + 0.5, ["linear"]),
    "sub_scalar": (lambda y, o: y - 0.5, ["linear"]),
    "rsub_scalar": (lambda y, o: 0.5 - y, ["linear"]),
    "mul_scalar": (lambda y, o: y * 3.0, ["linear"]),
    "div_scalar": (lambda y, o: y / 4.0, ["linear"]),
    "add_tensor": (lambda y, o: y + o, ["add"]),
    "sub_tensor": (lambda y, o: y - o, ["sub"]),
    "rsub_tensor": (lambda y, o: o - y, ["linear", "add"]),
    "mul_tensor": (lambda y, o: y * o, ["mul"]),
    "div_tensor": (lambda y, o: y / o, ["div"]),
    "chain": (lambda y, o: torch.relu(F.gelu(y * 0.5 + o) - 1.0).clamp(max=2.0), ["linear", "add", "gelu_erf", "linear", "relu", "clip"]),
}

# anchor -> (fn(x, w, b), shapes of x, w, b, shape of a broadcast operand)
ANCHORS = {
    "conv": (lambda x, w, b: F.conv2d(x, w, b, padding=1), [(2, 3, 6, 6), (4, 3, 3, 3), (4,)], (4, 1, 1)),
    "linear": (lambda x, w, b: F.linear(x, w, b), [(2, 5, 8), (6, 8), (6,)], (6,)),
    "bmm": (lambda x, w, b: torch.bmm(x, w) + b, [(2, 5, 8), (2, 8, 6), (6,)], (5, 6)),
}


@pytest.mark.parametrize("post", sorted(POST))
@pytest.mark.parametrize("anchor", sorted(ANCHORS))
def test_fuses_post_op(anchor, post):
    afn, shapes, oshape = ANCHORS[anchor]
    pfn, algs = POST[post]
    torch.manual_seed(0)
    xs = [torch.randn(s) for s in shapes] + [torch.rand(oshape) + 0.5]  # an operand safe to divide by

    def f(x, w, b, o):
        return pfn(afn(x, w, b), o)

    _, g = lowered(f, *xs)
    pipeline_until(g, "fold_batchnorm")
    assert _C.run_pass(g, "fuse_postops") is True
    (node,) = fused(g)
    got = [p[1] for p in node["post_ops"]]
    if anchor == "bmm":  # bmm's own `+ b` is the first post-op
        assert got[0] == "add"
        got = got[1:]
    assert got == algs
    assert _C.run_pass(g, "fuse_postops") is False  # idempotent
    _C.run_pass(g, "dce")  # drops a Linear's t(w)
    assert all(t.startswith("onednn::") for t in targets(g)), targets(g)  # nothing left in ATen
    torch.testing.assert_close(run(g, *xs)[0], f(*xs), atol=1e-4, rtol=1e-4)


def _residual(x, w, b, r):
    y = F.conv2d(x, w, b, padding=1)
    return torch.relu(y + r.relu())  # r.relu() dies at the add: a Sum post-op


def test_residual_add_of_a_dead_buffer_is_a_sum_in_place():
    xs = [torch.randn(2, 4, 6, 6), torch.randn(4, 4, 3, 3), torch.randn(4), torch.randn(2, 4, 6, 6)]
    _, g = lowered(_residual, *xs)
    pipeline_until(g, "fuse_postops")
    conv = [n for n in fused(g) if n["anchor_op"] == "aten::convolution"][0]
    assert [p[0] for p in conv["post_ops"]] == ["sum", "eltwise"]
    r = xs[3].clone()
    torch.testing.assert_close(run(g, *xs)[0], _residual(*xs), atol=1e-4, rtol=1e-4)
    assert torch.equal(xs[3], r)  # the user's tensor is never the sum buffer


def test_residual_add_of_a_graph_input_is_binary():
    def f(x, w, b, r):
        return F.conv2d(x, w, b, padding=1) + r

    xs = [torch.randn(2, 4, 6, 6), torch.randn(4, 4, 3, 3), torch.randn(4), torch.randn(2, 4, 6, 6)]
    _, g = lowered(f, *xs)
    pipeline_until(g, "fuse_postops")
    (node,) = fused(g)
    assert [p[0] for p in node["post_ops"]] == ["binary"]
    r = xs[3].clone()
    torch.testing.assert_close(run(g, *xs)[0], f(*xs), atol=1e-4, rtol=1e-4)
    assert torch.equal(xs[3], r)


@pytest.mark.parametrize("name, fn", [
    ("middle value is a graph output", lambda x, w, b: (lambda y: (torch.relu(y), y))(F.linear(x, w, b))),
    ("middle value used elsewhere", lambda x, w, b: (lambda y: torch.relu(y) + y.sum())(F.linear(x, w, b))),
    ("post-op grows the shape", lambda x, w, b: F.linear(x, w, b) + torch.ones(3, 5, 6)),
    ("post-op changes the dtype", lambda x, w, b: F.linear(x, w, b) + torch.ones(6, dtype=torch.float64)),
    ("not a post-op", lambda x, w, b: torch.exp(F.linear(x, w, b))),
])
def test_refuses_and_leaves_the_graph_untouched(name, fn):
    xs = [torch.randn(5, 8), torch.randn(6, 8), torch.randn(6)]
    _, g = lowered(fn, *xs)
    pipeline_until(g, "fold_batchnorm")
    before = str(g)
    assert _C.run_pass(g, "fuse_postops") is False, name
    assert str(g) == before
    ref = fn(*xs)
    got = run(g, *xs)
    ref = ref if isinstance(ref, tuple) else (ref,)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_a_post_op_laid_out_by_its_other_operand_stays_apart():
    # Eager lays x * bmm(x, x^T) out as x, the first operand: transposed for a transposed x. The
    # bmm writes its result contiguous, so the mul stays apart (fuzzer seed 21725). With the
    # bmm's result first, eager follows it, and the mul is fused.
    x = torch.randn(2, 16, 16).transpose(-1, -2)
    for f, fuses in ((lambda x: x * torch.matmul(x, x.transpose(-1, -2)), False),
                     (lambda x: torch.matmul(x, x.transpose(-1, -2)) * x, True)):
        _, g = lowered(f, x)
        pipeline_until(g, "fold_batchnorm")
        assert _C.run_pass(g, "fuse_postops") is fuses
        (got,) = run(g, x)
        ref = f(x)
        assert got.stride() == ref.stride()
        torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4)
