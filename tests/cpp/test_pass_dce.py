"""dce: structure, numbers, idempotence, and the nodes it must keep."""
import torch

from fxcpp import _C
from graphs import lowered, run, targets


def _unused_chain(x):
    dead = torch.neg(x).exp()  # noqa: F841 - dead on purpose
    return torch.relu(x)


def test_dce_removes_a_dead_chain_and_keeps_numbers():
    x = torch.randn(4, 4)
    _, before = lowered(_unused_chain, x)
    _, g = lowered(_unused_chain, x)
    assert targets(g) == ["aten::neg", "aten::exp", "aten::relu"]
    assert _C.run_pass(g, "dce") is True
    assert targets(g) == ["aten::relu"]
    assert _C.run_pass(g, "dce") is False  # idempotent (before an Executable freezes the graph)
    torch.testing.assert_close(run(g, x), run(before, x))
    torch.testing.assert_close(run(g, x)[0], torch.relu(x))


def test_dce_keeps_mutating_and_random_ops():
    g = _C.Graph()
    x = g.add_input("x", "Tensor", (torch.float32, [3], None, torch.device("cpu")))
    g.add_node("add_", "aten::add_.Tensor", [("v", x), ("c", 1.0)], {}, "", [("Tensor", None)])
    g.add_node("rand", "aten::rand_like", [("v", x)], {}, "", [("Tensor", None)])
    (r,) = g.add_node("relu", "aten::relu", [("v", x)], {}, "", [("Tensor", None)])
    g.add_node("unused", "aten::neg", [("v", x)], {}, "", [("Tensor", None)])
    g.set_outputs([("v", r)])
    assert _C.run_pass(g, "dce") is True
    assert targets(g) == ["aten::add_.Tensor", "aten::rand_like", "aten::relu"]
    t = torch.zeros(3)
    (out,) = run(g, t)
    torch.testing.assert_close(t, torch.ones(3))  # the in-place add still ran
    torch.testing.assert_close(out, torch.ones(3))


def test_dce_keeps_graph_outputs():
    x = torch.randn(3)
    _, g = lowered(lambda x: (x.neg(), x.exp()), x)
    assert _C.run_pass(g, "dce") is False
    assert targets(g) == ["aten::neg", "aten::exp"]
