"""A fused pointwise group lays out its outputs as eager's TensorIterator does, so every view
eager's graph takes of them stays valid (found decoding a LLaMA: the rotary-embedded query
stayed transposed in eager, SDPA's output followed it, and a later view needed that)."""
import pytest
import torch

import fxcpp
from helpers import assert_same


@pytest.fixture(autouse=True)
def _reset():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _check(fn, *inputs):
    compiled = torch.compile(fn, backend="fxcpp")
    with torch.no_grad():
        ref = fn(*inputs)
        res = compiled(*inputs)
        report = fxcpp.explain(fn, *inputs)
    assert report.kernel_counts["cpu_fused"] >= 1, report
    ref_l = ref if isinstance(ref, tuple) else (ref,)
    res_l = res if isinstance(res, tuple) else (res,)
    for a, b in zip(ref_l, res_l):
        assert_same(a, b)
        assert a.stride() == b.stride(), (a.stride(), b.stride())
    return res


def test_view_of_a_transposed_pointwise_result():
    def f(x):
        y = torch.relu(x.transpose(0, 1) * 2 + 1)  # eager keeps x's memory order
        return y.transpose(0, 1).view(2, 12) + 0  # a view only that order allows
    _check(f, torch.randn(2, 3, 4))


@pytest.mark.parametrize("case", ["scale", "where", "minimum_add", "sub_two_uses"])
def test_reshape_of_a_strided_pointwise_result(case):
    """reshape of a strided value is aot's clone(memory_format=contiguous_format) and a view:
    the clone must give the contiguous layout it states, whatever the group before it lays
    out (fuzz seeds 4149, 4391, 6703, 5514 raised "view size is not compatible")."""
    xt = torch.randn(4, 6).transpose(0, 1)  # [6, 4], transposed
    y = torch.randn(6, 4)
    fns = {
        "scale": lambda x, y: (x * 1.5).clamp_(min=-1.0).reshape(24),
        "where": lambda x, y: torch.where(x > 0, x, x).reshape(24),
        "minimum_add": lambda x, y: (torch.minimum(x, y) + 2.0).reshape(2, 12),
        "sub_two_uses": lambda x, y: ((x - y).reshape(1, 24), (x - y) + 1),
    }
    _check(fns[case], xt, y)


def test_rotary_then_attention_then_view():
    # The LLaMA attention pattern: q, k transposed by a view; rotary pointwise; SDPA; view back.
    def f(q, k, v, cos, sin):
        q = q.view(1, 8, 4, 16).transpose(1, 2)
        k = k.view(1, 8, 4, 16).transpose(1, 2)
        v = v.view(1, 8, 4, 16).transpose(1, 2)

        def rot(t):
            return torch.cat([-t[..., 8:], t[..., :8]], -1)

        q = q * cos + rot(q) * sin
        k = k * cos + rot(k) * sin
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return o.transpose(1, 2).view(1, 8, -1)
    xs = [torch.randn(1, 8, 64) for _ in range(3)] + [torch.randn(8, 16), torch.randn(8, 16)]
    _check(f, *xs)


@pytest.mark.parametrize("case", ["channels_last", "permuted", "broadcast_first", "expanded", "contiguous"])
def test_output_strides_match_eager(case):
    if case == "channels_last":
        x = torch.randn(2, 5, 3, 4).to(memory_format=torch.channels_last)
        y = torch.randn(2, 5, 3, 4)
    elif case == "permuted":
        x = torch.randn(4, 3, 5).permute(2, 0, 1)
        y = torch.randn(5, 4, 3)
    elif case == "broadcast_first":  # a broadcast first operand abstains; the second decides
        x = torch.randn(1, 4, 1)
        y = torch.randn(3, 5, 4).transpose(1, 2)
    elif case == "expanded":
        x = torch.randn(4, 1).expand(4, 6)
        y = torch.randn(6, 4).t()
    else:
        x, y = torch.randn(3, 4, 5), torch.randn(3, 4, 5)

    def f(a, b):
        return torch.sigmoid(a * 3 - b) + b.exp(), (a + 1).neg()
    _check(f, x, y)


@pytest.mark.parametrize("case", ["centered", "rmsnorm", "softmax"])
def test_row_group_outputs_keep_eagers_layout(case):
    # Written out op by op, a normalization follows its input's order (TensorIterator);
    # softmax's own kernel writes contiguous. Found by the fuzzer's stride check (seeds 71, 119, 128).
    x = torch.randn(2, 8, 5).transpose(-1, -2)
    w = torch.randn(8)

    def f(x):
        if case == "centered":
            return x - x.mean(-1, keepdim=True)
        if case == "rmsnorm":
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
        return torch.softmax(x * 0.5, -1)
    _check(f, x)


@pytest.mark.parametrize("case", ["mulmul_outer_first", "mulmul_inner_first", "muladd_outer_first",
                                  "submul_outer_first"])
def test_a_folded_pair_of_ops_is_laid_out_as_its_two_eager_ops(case):
    """The builder folds outer(c, inner(a, b)) into one instruction (MulMul, MulAdd, SubMul)
    whose operands are (a, b, c). Eager lays out inner(a, b) from a and b, then the outer
    result from c and that, in the outer op's own order: x1 * (x0 * x1) of a transposed x0 is
    contiguous, as x1 is (fuzzer seed 5527 had it transposed)."""
    x0 = torch.randn(2, 17, 8).transpose(-1, -2)  # [2, 8, 17], transposed
    x1 = torch.randn(2, 8, 17)
    fns = {
        "mulmul_outer_first": lambda x0, x1: x1 * (x0 * x1),
        "mulmul_inner_first": lambda x0, x1: (x0 * x1) * x1,
        "muladd_outer_first": lambda x0, x1: x1 + x0 * x1,
        "submul_outer_first": lambda x0, x1: x1 * (x0 - x1),
    }
    _check(fns[case], x0, x1)
