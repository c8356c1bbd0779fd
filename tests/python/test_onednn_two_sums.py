"""A GEMM or convolution with two residual adds fused as post-ops, one of them accumulated in
place into its operand's buffer (oneDNN's sum post-op, which reads dst). Only that one may be
the sum: the kernels had made every add of the node a sum as soon as one ran in place, so the
other operand was never read and dst was added twice. Found by the fuzzer's training steps
(seeds 72, 86, 211, 344): the backward of x @ x.T beside a layer_norm of x adds three
gradients into one."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxcpp
from fxcpp import _C
from helpers import assert_same

pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")


@pytest.fixture(autouse=True)
def _reset():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _bmm_two_sums(g, x):
    return (x * 3) + (torch.bmm(g, x) + (x * 2))


def _bmm_three_sums(g, x):
    return (x * 4) + ((x * 3) + (torch.bmm(g, x) + (x * 2)))


def _bmm_one_value_twice(g, x):
    y = x * 2
    return y + (torch.bmm(g, x) + y)


_linear = nn.Linear(8, 8).eval()
_conv = nn.Conv2d(8, 8, 3, padding=1).eval()


def _linear_two_sums(g, x):
    return (x * 3) + (_linear(x) + (x * 2))


def _conv_two_sums(x):
    return (x * 3) + (_conv(x) + (x * 2))


CASES = {
    "bmm_two_sums": (_bmm_two_sums, lambda: (torch.randn(3, 16, 16), torch.randn(3, 16, 8))),
    "bmm_three_sums": (_bmm_three_sums, lambda: (torch.randn(3, 16, 16), torch.randn(3, 16, 8))),
    "bmm_one_value_twice": (_bmm_one_value_twice, lambda: (torch.randn(3, 16, 16), torch.randn(3, 16, 8))),
    "linear_two_sums": (_linear_two_sums, lambda: (torch.randn(3, 16, 16), torch.randn(3, 16, 8))),
    "conv_two_sums": (_conv_two_sums, lambda: (torch.randn(2, 8, 6, 6).to(memory_format=torch.channels_last),)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_two_residual_adds_fused_into_one_node(case):
    fn, make = CASES[case]
    torch.manual_seed(0)
    args = make()
    with torch.no_grad():
        ref = fn(*args)
        for _ in range(2):  # the first call measures both paths, the second runs the chosen one
            assert_same(ref, torch.compile(fn, backend="fxcpp")(*args))
        report = fxcpp.explain(fn, *args)
    adds = [r for r in report.rows if r.op == "aten::add.Tensor"]
    assert len(adds) >= 2 and all(r.kernel == "onednn" for r in adds), report  # fused as post-ops


def test_gradient_of_a_bmm_of_x_with_itself_beside_a_layer_norm_of_x():
    """The fuzzer's seed 72: grad x = g @ x + (x^T @ g)^T + layer_norm's, one oneDNN node."""
    torch.manual_seed(0)
    x, w, b = torch.randn(3, 16, 8), torch.randn(8), torch.randn(8)

    def f(x, w, b):
        return torch.matmul(x, x.transpose(-1, -2)) + 1.5, F.layer_norm(x, (8,), w, b)

    def grads(fn):
        xs = [t.clone().requires_grad_() for t in (x, w, b)]
        outs = fn(*xs)
        gen = torch.Generator().manual_seed(0)
        sum((o * torch.randn(o.shape, generator=gen)).sum() for o in outs).backward()
        return [t.grad for t in xs]

    for ref, got in zip(grads(f), grads(torch.compile(f, backend="fxcpp"))):
        assert_same(ref, got)
