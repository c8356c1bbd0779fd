"""The executor seen from Python: thread safety, errors naming the node, buffer release."""

import pytest
import torch

import fxcpp
from fxcpp import _C
from helpers import compile_fxcpp, errors_in_threads


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.ln = torch.nn.LayerNorm(64)
        self.fc2 = torch.nn.Linear(64, 16)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.ln(self.fc1(x)))).softmax(-1)


def test_eight_threads_thousand_calls_each_match_single_thread():
    torch.manual_seed(0)
    model = Block().eval()
    compiled = compile_fxcpp(model)
    x = torch.randn(4, 32)
    with torch.no_grad():
        expected = compiled(x)
    assert fxcpp.explain(model, x).kernel_counts["interpreter"] == 0
    mismatches = []

    def worker():
        with torch.no_grad():
            for _ in range(1000):
                out = compiled(x)
                if not torch.equal(out, expected):
                    mismatches.append(out)

    errors = errors_in_threads(*[worker] * 8)
    assert not errors, errors[:1]
    assert not mismatches, f"{len(mismatches)} of 8000 calls differ from the single-thread result"


def test_executable_run_from_threads_directly():
    # The C++ object itself (GIL released inside run) from many threads.
    g = _C.Graph()
    x = g.add_input("x", "Tensor", (torch.float32, [64, 64], None, torch.device("cpu")))
    (y,) = g.add_node("mm", "aten::mm", [("v", x), ("v", x)], {}, "", [("Tensor", None)])
    (z,) = g.add_node("tanh", "aten::tanh", [("v", y)], {}, "", [("Tensor", None)])
    g.set_outputs([("v", z)])
    exe = _C.Executable(g)
    t = torch.randn(64, 64)
    expected = torch.tanh(t @ t)
    bad = []

    def worker():
        for _ in range(200):
            if not torch.allclose(exe.run([t])[0], expected):
                bad.append(1)

    errors = errors_in_threads(*[worker] * 8)
    assert not errors, errors[:1]
    assert not bad


def test_plan_releases_buffers_at_last_use():
    g = _C.Graph()
    x = g.add_input("x", "Tensor", (torch.float32, [8], None, torch.device("cpu")))
    (a,) = g.add_node("a", "aten::relu", [("v", x)], {}, "", [("Tensor", None)])
    (b,) = g.add_node("b", "aten::neg", [("v", a)], {}, "", [("Tensor", None)])
    (c,) = g.add_node("c", "aten::exp", [("v", b)], {}, "", [("Tensor", None)])
    g.set_outputs([("v", c)])
    plan = str(_C.Executable(g))
    assert "a = aten::relu  release: %x" in plan
    assert "b = aten::neg  release: %a" in plan
    assert "c = aten::exp  release: %b" in plan


def test_run_time_error_names_the_node_and_does_not_crash():
    def f(x, idx):
        return torch.relu(x)[idx]  # an out-of-range index fails inside the kernel

    compiled = compile_fxcpp(f)
    x = torch.randn(4)
    assert torch.equal(compiled(x, torch.tensor([1, 2])), torch.relu(x)[torch.tensor([1, 2])])
    with pytest.raises(RuntimeError, match=r"node 'index' \(aten::index\.Tensor\).*failed at run time.*out of bounds") as err:
        compiled(x, torch.tensor([7]))
    assert isinstance(err.value, fxcpp.FxcppNodeError) and err.value.node_name == "index"
    # Still usable afterwards.
    assert torch.equal(compiled(x, torch.tensor([0])), torch.relu(x)[torch.tensor([0])])


def test_wrong_input_count_is_a_clear_error():
    g = _C.Graph()
    g.add_input("x", "Tensor", None)
    g.set_outputs([])
    with pytest.raises(ValueError, match="takes 1 inputs, got 2"):
        _C.Executable(g).run([torch.ones(1), torch.ones(1)])


def test_unsupported_python_value_is_a_type_error():
    g = _C.Graph()
    g.add_input("x", "any", None)
    g.set_outputs([])
    with pytest.raises(TypeError, match="cannot pass a value of type object"):
        _C.Executable(g).run([object()])
