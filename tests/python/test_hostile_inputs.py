"""Hostile inputs the other tests did not cover (issue 13): inputs that alias each other or a
parameter, a changed dtype or rank at call time, non-finite and denormal values through the
GEMV, and torch.compile of one model from several threads at once. Each case is compared with
eager on its own copies of the inputs, mutations included."""
import threading

import pytest
import torch

import fxcpp
from helpers import assert_same, clone_inputs, errors_in_threads


@pytest.fixture(autouse=True)
def _reset():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _linear(d_in=16, d_out=8):
    torch.manual_seed(0)
    return torch.nn.Linear(d_in, d_out).eval()


def _same_as_eager(fn, make_inputs, grad=False):
    """fn on fresh inputs, eager and compiled (twice: the first call compiles): outputs and
    the inputs as the call leaves them must equal eager's."""
    compiled = torch.compile(fn, backend="fxcpp")
    with torch.set_grad_enabled(grad):
        ref_in = make_inputs()
        ref = fn(*ref_in)
        for _ in range(2):
            res_in = make_inputs()
            res = compiled(*res_in)
            assert_same(ref, res)
            assert_same(ref_in, res_in)


def test_the_same_tensor_passed_twice():
    lin = _linear(16, 16)

    def f(a, b):
        return torch.relu(lin(a)) + b * 2

    def mutating(a, b):
        a.mul_(3)  # b is a: eager's b sees the write
        return lin(b) + a

    torch.manual_seed(1)
    x = torch.randn(4, 16)
    _same_as_eager(f, lambda: [x.clone()] * 2)
    _same_as_eager(mutating, lambda: [x.clone()] * 2)


def test_overlapping_views_of_one_tensor():
    def f(a, b):
        a.add_(1)  # b overlaps a: eager's b sees the write where they overlap
        return torch.tanh(b) * a.sum()

    torch.manual_seed(2)
    base = torch.randn(33)

    def inputs():
        x = base.clone()
        return [x[:-1], x[1:]]

    _same_as_eager(f, inputs)


def test_a_parameter_passed_as_an_input():
    lin = _linear(16, 16)

    def f(x, w):
        return lin(x) @ w

    torch.manual_seed(3)
    x = torch.randn(4, 16)
    with torch.no_grad():
        _same_as_eager(f, lambda: [x, lin.weight])
        compiled = torch.compile(f, backend="fxcpp")
        compiled(x, lin.weight)
        lin.weight.mul_(2)  # the input and the packed weight are one tensor: both must see it
        assert_same(f(x, lin.weight), compiled(x, lin.weight))


@pytest.mark.parametrize("change", ["dtype", "rank"])
def test_a_changed_dtype_or_rank_recompiles_correctly(change):
    def f(x, w):
        return torch.nn.functional.gelu(x @ w) + x.sum(-1, keepdim=True)

    torch.manual_seed(4)
    x, w = torch.randn(4, 16), torch.randn(16, 16)
    compiled = torch.compile(f, backend="fxcpp")
    with torch.no_grad():
        assert_same(f(x, w), compiled(x, w))
        if change == "dtype":
            for dt in (torch.bfloat16, torch.float16, torch.float64):
                assert_same(f(x.to(dt), w.to(dt)), compiled(x.to(dt), w.to(dt)))
        else:
            x3 = torch.randn(2, 3, 16)
            assert_same(f(x3, w), compiled(x3, w))
        assert_same(f(x, w), compiled(x, w))  # the first signature still runs right


def test_a_dtype_eager_refuses_is_refused_and_the_next_call_works():
    lin = _linear()
    compiled = torch.compile(lin, backend="fxcpp")
    x = torch.randn(4, 16)
    with torch.no_grad():
        assert_same(lin(x), compiled(x))
        with pytest.raises(RuntimeError, match="dtype|BFloat16|Float"):
            lin(x.bfloat16())
        with pytest.raises(Exception, match="dtype|BFloat16|Float"):
            compiled(x.bfloat16())
        assert_same(lin(x), compiled(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_non_finite_and_denormal_values_through_the_gemv(dtype, monkeypatch):
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "gemv")
    lin = _linear(64, 32).to(dtype)
    torch.manual_seed(5)
    x = torch.randn(1, 64)
    x[0, :6] = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e-40, -1e-40, 0.0])
    x = x.to(dtype)
    compiled = torch.compile(lin, backend="fxcpp")
    with torch.no_grad():
        ref, res = lin(x), compiled(x)
        impls = [r.impl for r in fxcpp.explain(compiled, x).rows if r.impl]
    assert any(i.startswith("gemv") for i in impls), impls
    assert torch.equal(ref.isnan(), res.isnan())
    finite = ~ref.isnan()
    assert_same(ref[finite], res[finite])
    with torch.no_grad():  # denormals alone: a result of exactly eager's sign and scale
        xd = torch.full((1, 64), 1e-38).to(dtype)
        assert_same(lin(xd), compiled(xd))


def test_one_model_compiled_from_eight_threads_at_once():
    """Eight threads each compiling the model, then one compiled function first called from
    eight threads (its compile and first-call measurement racing)."""
    torch.manual_seed(6)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).eval()
    inputs = [torch.randn(b, 32) for b in (1, 2, 3, 4, 5, 6, 7, 8)]
    with torch.no_grad():
        refs = [model(x) for x in inputs]
    start = threading.Barrier(8)
    results = [None] * 8

    def worker(i):
        compiled = torch.compile(model, backend="fxcpp")  # each thread its own compile
        start.wait()
        with torch.no_grad():
            results[i] = [compiled(x) for x in clone_inputs(inputs)]

    shared = torch.compile(model, backend="fxcpp")

    def first_calls(i):  # one compiled function whose first call comes from eight threads at once
        start.wait()
        with torch.no_grad():
            results[i] = [shared(x) for x in clone_inputs(inputs)]

    for target in (worker, first_calls):
        torch._dynamo.reset()  # the second phase compiles afresh, from its racing first calls
        results[:] = [None] * len(results)
        errors = errors_in_threads(*[lambda i=i: target(i) for i in range(len(results))], timeout=600)
        assert not errors, errors  # a TimeoutError among them: a compiling thread hung
        for res in results:
            for ref, out in zip(refs, res):
                assert_same(ref, out)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a second device: CUDA")
def test_a_changed_device_recompiles_correctly():
    def f(x, w):
        return torch.relu(x @ w) * 2

    torch.manual_seed(7)
    x, w = torch.randn(4, 16), torch.randn(16, 8)
    compiled = torch.compile(f, backend="fxcpp")
    with torch.no_grad():
        assert_same(f(x, w), compiled(x, w))
        xc, wc = x.cuda(), w.cuda()
        out = compiled(xc, wc)
        assert out.device.type == "cuda"
        assert_same(f(xc, wc), out)
        assert_same(f(x, w), compiled(x, w))
