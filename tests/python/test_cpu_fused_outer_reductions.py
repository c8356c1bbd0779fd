"""Reductions over leading and middle dims in the CPU fused kernels (issue 9: "over the
innermost or an outer dimension"): x.sum(0), a bias gradient's sum over the batch, statistics
over [0, 2, 3], softmax over dim 0 or 1, with their prologue and epilogue. The group runs over
its domain permuted so that the reduced dims come last (Program::perm), and where the rows then
lie side by side in memory the interpreter runs them by columns (interp_columns.h): each check
below says which, through `column_calls`."""

import pytest
import torch
import torch.nn.functional as F

import fxcpp
from fxcpp import _C
from helpers import assert_same, errors_in_threads
from test_cpu_fused import DTYPES, compare, make_inputs


def standardize_over_batch(x):  # the kept dims lead: x.mean(0) without keepdim broadcasts as [1, C]
    return (x - x.mean(0)) / (x.std(0) + 1e-5)


def batch_norm_written_out(x, w, b):  # training BatchNorm's statistics, written out op by op; w, b [1, C, 1, 1]
    m = x.mean((0, 2, 3), keepdim=True)
    v = x.var((0, 2, 3), keepdim=True, correction=0)
    return (x - m) * torch.rsqrt(v + 1e-5) * w + b


def channels_last(shape):
    return lambda g: torch.randn(shape, generator=g).contiguous(memory_format=torch.channels_last)


# name: (fn, input shapes, whether the kernel runs by columns). A shape may be a function of a
# generator (a layout other than contiguous).
CASES = {
    "sum0_prologue_epilogue": (lambda x, w: (x * 2.0).sum(0) * w + 1.0, [(300, 96), (96,)], True),
    "bias_grad_keepdim": (lambda g, x: (g * torch.sigmoid(x)).sum(0, keepdim=True), [(257, 80), (257, 80)], True),
    "mean_middle_dim": (lambda x: (x.relu() + 1.0).mean(1), [(4, 70, 33)], True),
    "amax_amin_dim0": (lambda x: (x * 3.0).amax(0) - (x + 1.0).amin(0), [(120, 40)], True),
    "var_dim0_alone": (lambda x: x.var(0), [(200, 64)], True),
    "std_dim0_epilogue": (lambda x: x.std(0, keepdim=True) * 2.0 + 1.0, [(90, 48)], True),
    "var_mean_dim0": (lambda x: torch.var_mean(x * 2.0, 0), [(70, 65)], True),
    "standardize_over_batch": (standardize_over_batch, [(150, 40)], True),
    "bn_stats_channels_last": (batch_norm_written_out, [channels_last((4, 32, 6, 7)), (1, 32, 1, 1), (1, 32, 1, 1)], True),
    "bn_stats_contiguous": (batch_norm_written_out, [(3, 8, 5, 6), (1, 8, 1, 1), (1, 8, 1, 1)], False),  # rows do not merge: made contiguous
    "softmax_dim0": (lambda x: torch.softmax(x * 0.5, 0), [(33, 70)], True),
    "softmax_dim1_of_3d": (lambda x: torch.softmax(x, 1) + 1.0, [(2, 19, 40)], True),
    "log_softmax_dim1_of_4d": (lambda x: F.log_softmax(x + 1.0, 1), [(2, 21, 5, 7)], True),  # H, W merge: 35 lanes
    "two_dims_apart": (lambda x: (x * x).sum((0, 2)), [(3, 40, 5)], False),
    "leading_two_dims": (lambda x: (x - 1.0).sum((0, 1)) * 2.0, [(4, 50, 48)], True),
    "row_broadcast_operand": (lambda x, b: (x * 2.0 + b).sum(0), [(120, 40), (120, 1)], True),  # b: one per step
    "narrow_columns": (lambda x: (x * 3.0).amin(0), [(500, 3)], False),
    "long_rows": (lambda x: (x + 1.0).sum(0) + (x * x).amax(0), [(5000, 37)], True),  # chunks and splits
    # Lanes as wide as a transformer's row: a block holds several steps of them (kColBlock), and
    # the step counts below leave a short last block.
    "wide_lanes_centered": (lambda x: x - x.mean(0), [(263, 768)], True),
    "wide_lanes_var_epilogue": (lambda x, w: x.var(0) * w + 1.0, [(130, 1000), (1000,)], True),
    "lanes_over_two_blocks": (lambda x: (x * 2.0).sum(0) - x.amax(0), [(70, 1500)], True),
}


def inputs_for(shapes, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for s in shapes:
        out.append((s(g) if callable(s) else torch.randn(s, generator=g)).to(dtype))
    return out


def fuses_and_matches_eager(fn, shapes, by_columns, dtype):
    """fn on inputs of those shapes, compiled: fused, eager's numbers, run by columns or not as
    expected. Returns the reference and the result."""
    xs = inputs_for(shapes, DTYPES[dtype])
    before = _C.cpu_fused_stats()["column_calls"]
    report, ref, res = compare(fn, xs)
    ran_by_columns = _C.cpu_fused_stats()["column_calls"] > before
    assert ran_by_columns == by_columns, report
    return ref, res


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_outer_reduction_fuses_and_matches_eager(name, dtype):
    ref, res = fuses_and_matches_eager(*CASES[name], dtype)
    for r, e in zip(torch.utils._pytree.tree_leaves(res), torch.utils._pytree.tree_leaves(ref)):
        assert r.shape == e.shape and r.dtype == e.dtype
        if e.is_contiguous() or e.is_contiguous(memory_format=torch.channels_last):
            assert r.stride() == e.stride(), (r.stride(), e.stride())


def test_reductions_run_in_one_kernel_with_their_prologue_and_epilogue():
    fn, shapes, _ = CASES["sum0_prologue_epilogue"]
    report, _, _ = compare(fn, inputs_for(shapes, torch.float32))
    assert len({r.group for r in report.rows if r.kernel == "cpu_fused"}) == 1, report
    assert {"aten::mul.Tensor", "aten::sum.dim_IntList", "aten::add.Tensor"} <= {r.op for r in report.rows if r.kernel == "cpu_fused"}


def test_non_finite_values_come_out_as_eager_gives_them():
    x = torch.randn(64, 40)
    x[3, 0], x[7, 1], x[9, 2], x[:, 3] = float("nan"), float("inf"), float("-inf"), float("-inf")
    x[5, 4], x[6, 4] = float("inf"), float("-inf")  # inf - inf: NaN in the sum
    for fn in (lambda x: (x * 1.0).amax(0), lambda x: (x * 1.0).amin(0), lambda x: (x + 0.0).sum(0) * 2.0,
               lambda x: torch.softmax(x * 1.0, 0), lambda x: (x - x.mean(0)) * 2.0):
        torch._dynamo.reset()
        with torch.no_grad():
            ref, res = fn(x), torch.compile(fn, backend="fxcpp")(x)
        assert torch.equal(ref.isnan(), res.isnan()) and torch.equal(ref.isinf(), res.isinf()), (ref, res)
        fin = ref.isfinite()
        torch.testing.assert_close(res[fin], ref[fin], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", [lambda: torch.randn(48, 90).t(), lambda: torch.randn(80, 64)[:, ::2],
                                  lambda: torch.randn(3, 40, 30).transpose(0, 1)])
def test_strided_inputs(make):
    x = make()
    compare(lambda x: (x * 2.0).sum(0) - x.amax(0), [x])


@pytest.mark.parametrize("shape", [(0, 8), (8, 0), (0, 3, 4)])
def test_empty_tensors(shape):
    x = torch.randn(shape)
    compare(lambda x: (x * 2.0 + 1.0).sum(0) * 3.0, [x], check_fused=False)


def test_dynamic_shapes_follow_the_call():
    fn = lambda x, w: (x * w).sum(0) + x.amax(0)  # noqa: E731
    torch._dynamo.reset()
    c = torch.compile(fn, backend="fxcpp", dynamic=True)
    with torch.no_grad():
        for rows, cols in [(40, 32), (77, 32), (130, 48), (3, 48)]:
            x, w = torch.randn(rows, cols), torch.randn(cols)
            assert_same(fn(x, w), c(x, w))


def test_training_bias_gradients_match_eager():
    """A Linear's bias gradient is sum over the batch of the upstream gradient: in the backward
    graph it fuses with the activation's backward before it."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.GELU(), torch.nn.Linear(96, 32), torch.nn.Tanh())
    ref_model = __import__("copy").deepcopy(model)
    x = torch.randn(200, 64)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fxcpp")
    before = _C.cpu_fused_stats()["column_calls"]
    compiled(x).square().mean().backward()
    assert _C.cpu_fused_stats()["column_calls"] > before  # the bias gradients ran by columns
    ref_model(x).square().mean().backward()
    for (name, p), q in zip(model.named_parameters(), ref_model.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_many_threads_share_one_compiled_function():
    fn, shapes, _ = CASES["standardize_over_batch"]
    torch._dynamo.reset()
    c = torch.compile(fn, backend="fxcpp")
    xs = [torch.randn(150 + 10 * i, 40) for i in range(4)]
    with torch.no_grad():
        refs = [fn(x) for x in xs]
        for x in xs:  # compile every size before the threads start
            c(x)

        def work(i):
            for _ in range(20):
                torch.testing.assert_close(c(xs[i]), refs[i], rtol=1e-4, atol=1e-5)

        errors = errors_in_threads(*[lambda i=i: work(i) for i in range(4)])
    assert not errors, errors[0]


def test_explain_says_the_reduced_dims_were_moved_last():
    torch._dynamo.reset()
    with torch.no_grad():
        report = fxcpp.explain(lambda x: (x * 2.0).sum(0) + 1.0, torch.randn(30, 20))
    assert report.kernel_counts["cpu_fused"] == 3, report
    (impl,) = [r.impl for r in report.rows if r.kernel == "cpu_fused" and r.impl]
    assert "reduced dims moved last (dims 1,0)" in impl, report
