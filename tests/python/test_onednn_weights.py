"""Prepacked and folded weights stay fresh: in-place changes, load_state_dict, optimizer steps and
replaced parameters reach the next call (identity and version counter); run() is thread-safe."""
import copy
import threading

import pytest
import torch
import torch.nn as nn

import fxcpp
from helpers import assert_same
from fxcpp import _C

# These tests are about the oneDNN kernels: a build without them (FXCPP_ONEDNN=0, e.g. on a
# GPU machine without oneDNN) has nothing here to test.
pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")


def conv_model():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()).eval()


def linear_model():
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8)).eval()


def conv_bn_model():
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU()).eval()
    with torch.no_grad():
        m[1].running_mean.normal_()
        m[1].running_var.uniform_(0.5, 2)
    return m


MODELS = {
    "conv": (conv_model, lambda: torch.randn(2, 3, 8, 8)),
    "linear": (linear_model, lambda: torch.randn(4, 16)),
    "conv_bn": (conv_bn_model, lambda: torch.randn(2, 3, 8, 8)),
}


def _compiled(name):
    torch.manual_seed(0)
    make, inp = MODELS[name]
    model = make()
    x = inp()
    report = fxcpp.explain(model, x)
    assert report.kernel_counts["onednn"] > 0  # the weights really are prepacked by oneDNN kernels
    torch._dynamo.reset()
    return model, torch.compile(model, backend="fxcpp"), x


def _check(model, compiled, x):
    with torch.no_grad():
        assert_same(model(x), compiled(x))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_in_place_change_is_seen(name):
    model, compiled, x = _compiled(name)
    _check(model, compiled, x)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(2).add_(0.1)
        for b in model.buffers():
            if b.is_floating_point():
                b.add_(0.3)
    _check(model, compiled, x)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_load_state_dict_is_seen(name):
    model, compiled, x = _compiled(name)
    _check(model, compiled, x)
    other = copy.deepcopy(model)
    with torch.no_grad():
        for p in other.parameters():
            p.normal_()
    model.load_state_dict(other.state_dict())
    _check(model, compiled, x)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_optimizer_step_is_seen(name):
    model, compiled, x = _compiled(name)
    _check(model, compiled, x)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model(x).square().mean().backward()  # eager training step, then compiled inference
    opt.step()
    _check(model, compiled, x)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_replaced_parameter_is_seen(name):
    model, compiled, x = _compiled(name)
    _check(model, compiled, x)
    first = model[0]
    first.weight = nn.Parameter(torch.randn_like(first.weight))
    _check(model, compiled, x)


def test_inputs_are_not_mutated_by_in_place_sums():
    class Res(nn.Module):
        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(4, 4, 3, padding=1)

        def forward(self, x):
            return torch.relu(self.c(x) + torch.sigmoid(x))  # sigmoid(x) dies at the add: a Sum

    torch.manual_seed(0)
    model = Res().eval()
    x = torch.randn(1, 4, 6, 6)
    keep = x.clone()
    compiled = torch.compile(model, backend="fxcpp")
    with torch.no_grad():
        assert_same(model(x), compiled(x))
    assert torch.equal(x, keep)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_many_threads_share_one_compiled_model(name):
    model, compiled, x = _compiled(name)
    with torch.no_grad():
        compiled(x)  # compile once, before the threads
        xs = [torch.randn_like(x) for _ in range(8)]
        refs = [model(xi) for xi in xs]
    errors = []

    def worker(i):
        try:
            with torch.no_grad():
                for _ in range(25):
                    out = compiled(xs[i])
                    if not torch.allclose(out, refs[i], atol=1e-4, rtol=1e-4):
                        errors.append(f"thread {i}: wrong result")
                        return
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {i}: {e!r}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
