"""The serving call path (backend/direct_call.py): an inference graph whose aot_autograd
wrappers have nothing to do is called straight from Dynamo; every other graph keeps them.
Each case checks which path was taken (the debug log line) and the numbers against eager,
including the effects the wrappers exist for (input mutation, aliasing, autograd, autocast)."""
import logging

import pytest
import torch

import fxcpp
from helpers import assert_same, clone_inputs


@pytest.fixture(autouse=True)
def _reset():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _paths(caplog):
    direct = sum("is called directly" in r.getMessage() for r in caplog.records)
    kept = [r.getMessage().split(": ", 2)[-1] for r in caplog.records if "keeps aot_autograd" in r.getMessage()]
    return direct, kept


def _run(fn, *inputs, grad=False, options=None, caplog):
    caplog.set_level(logging.DEBUG, logger="fxcpp")
    compiled = torch.compile(fn, backend="fxcpp", options=options)
    with torch.set_grad_enabled(grad):
        ref_in = clone_inputs(inputs)
        ref = fn(*ref_in)
        for _ in range(3):  # the first call compiles; the later ones run the path chosen
            res_in = clone_inputs(inputs)
            res = compiled(*res_in)
    assert_same(ref, res)
    assert_same(ref_in, res_in)  # inputs as eager leaves them (mutated or not)
    return ref, res, _paths(caplog)


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).eval()


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_inference_graph_is_called_directly(mode, caplog):
    model = _mlp()
    x = torch.randn(4, 16)
    caplog.set_level(logging.DEBUG, logger="fxcpp")
    compiled = torch.compile(model, backend="fxcpp")
    ctx = torch.no_grad() if mode == "no_grad" else torch.inference_mode()
    with ctx:
        ref = model(x)
        outs = [compiled(x) for _ in range(3)]
    for out in outs:
        assert_same(ref, out)
        assert not out.requires_grad
    assert _paths(caplog) == (1, [])


def test_several_outputs_and_a_repeated_output(caplog):
    def f(x, y):
        a = torch.relu(x @ y)
        return a, a.sum(-1), a, x.shape[0] * 2
    ref, res, (direct, kept) = _run(f, torch.randn(5, 7), torch.randn(7, 3), caplog=caplog)
    assert direct == 1 and kept == []
    assert res[0] is res[2]  # eager returns one tensor twice; so does the direct path


def test_weights_change_on_the_direct_path(caplog):
    model = _mlp()
    x = torch.randn(2, 16)
    caplog.set_level(logging.DEBUG, logger="fxcpp")
    compiled = torch.compile(model, backend="fxcpp")
    with torch.no_grad():
        compiled(x)
        model[0].weight.data.mul_(2)  # no version counter moves
        assert_same(model(x), compiled(x))
        model[2].bias.add_(1)
        assert_same(model(x), compiled(x))
    assert _paths(caplog)[0] == 1


def test_input_mutation_keeps_the_wrappers(caplog):
    def f(x, y):
        x.add_(1)  # aot writes the new value back into the caller's tensor
        return x * y
    _, _, (direct, kept) = _run(f, torch.randn(8), torch.randn(8), caplog=caplog)
    assert direct == 0 and any("mutates an input" in k for k in kept)


def test_output_aliasing_an_input_keeps_the_wrappers(caplog):
    def f(x):
        return x.view(2, 4), x.sin()
    _, res, (direct, kept) = _run(f, torch.randn(8), caplog=caplog)
    assert direct == 0 and any("aliases" in k for k in kept)


def test_training_graph_keeps_the_wrappers(caplog):
    model = _mlp().train()
    x = torch.randn(4, 16)
    caplog.set_level(logging.DEBUG, logger="fxcpp")
    compiled = torch.compile(model, backend="fxcpp")
    out = compiled(x)
    out.sum().backward()
    ref_grad = torch.autograd.grad(model(x).sum(), model[0].weight)[0]
    assert_same(ref_grad, model[0].weight.grad)
    assert _paths(caplog)[0] == 0


def test_autocast_at_compile_time_keeps_the_wrappers(caplog):
    model = _mlp()
    x = torch.randn(4, 16)
    caplog.set_level(logging.DEBUG, logger="fxcpp")
    compiled = torch.compile(model, backend="fxcpp")
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        ref = model(x)
        res = compiled(x)
        res = compiled(x)
    assert res.dtype == ref.dtype == torch.bfloat16
    assert_same(ref, res)
    direct, kept = _paths(caplog)
    assert direct == 0 and any("autocast" in k for k in kept)


def test_autocast_after_a_direct_compile_recompiles(caplog):
    # The direct path skips aot's autocast guard; Dynamo's global-state guard must catch it.
    model = _mlp()
    x = torch.randn(4, 16)
    compiled = torch.compile(model, backend="fxcpp")
    with torch.no_grad():
        compiled(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            ref, res = model(x), compiled(x)
    assert res.dtype == ref.dtype == torch.bfloat16
    assert_same(ref, res)


@pytest.mark.parametrize("options", [{"verify": True}, {"profile": True}])
def test_verify_and_profile_still_run_on_the_direct_path(options, caplog):
    model = _mlp()
    _, _, (direct, _) = _run(model, torch.randn(3, 16), options=options, caplog=caplog)
    assert direct == 1


def test_interpreter_partitions_on_the_direct_path(caplog):
    # A higher-order op (torch.cond) stays in the Interpreter: the direct path calls the
    # CompiledAtenGraph, which runs the parent graph with its C++ partitions.
    def f(x):
        y = torch.relu(x) + 1
        return torch.cond(y.sum() > 0, lambda t: t * 2, lambda t: t - 3, (y,))

    x = torch.randn(6)
    _, _, (direct, _) = _run(f, x, caplog=caplog)
    assert direct == 1
    torch._dynamo.reset()
    with torch.no_grad():
        report = fxcpp.explain(f, x)
    assert report.kernel_counts["interpreter"] >= 1, report


def test_explain_reports_direct_path_kernels():
    with torch.no_grad():
        report = fxcpp.explain(_mlp(), torch.randn(2, 16))
    assert report.kernel_counts["onednn"] >= 2
