"""The guard options PyTorch offers for serving, with fxcpp (README: Serving):
guard_filter_fn drops guards a service knows it does not need; set_stance pins the
compiled graphs so a call that would recompile fails (or runs eagerly) instead."""
import pytest
import torch

from helpers import assert_same


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).eval()


@pytest.mark.parametrize("name", ["skip_guard_on_globals_unsafe", "keep_tensor_guards_unsafe",
                                  "skip_guard_on_all_nn_modules_unsafe"])
def test_guard_filter_fn(name):
    model = _mlp()
    compiled = torch.compile(model, backend="fxcpp", options={"guard_filter_fn": getattr(torch.compiler, name)})
    x = torch.randn(3, 16)
    with torch.no_grad():
        for _ in range(3):
            assert_same(model(x), compiled(x))
        model[0].weight.mul_(2)  # a weight update is still seen: fxcpp checks it, not a guard
        assert_same(model(x), compiled(x))


def _warm():
    """The model and its compiled form, warmed up on a [3, 16] input with static shapes."""
    model = _mlp()
    compiled = torch.compile(model, backend="fxcpp", dynamic=False)
    with torch.no_grad():
        compiled(torch.randn(3, 16))
    return model, compiled


def test_set_stance_fail_on_recompile():
    model, compiled = _warm()
    with torch.no_grad():
        with torch.compiler.set_stance("fail_on_recompile"):
            x = torch.randn(3, 16)
            assert_same(model(x), compiled(x))  # the warm shape runs
            with pytest.raises(Exception, match="(?i)recompil"):
                compiled(torch.randn(5, 16))  # a new shape would recompile: refused


def test_set_stance_eager_on_recompile():
    model, compiled = _warm()
    with torch.no_grad():
        with torch.compiler.set_stance("eager_on_recompile"):
            x = torch.randn(7, 16)
            assert_same(model(x), compiled(x))  # runs eagerly, correct
