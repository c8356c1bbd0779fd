"""The graph IR through the bindings: building, normalization, printing, verification, errors."""
import pytest
import torch

from fxcpp import _C
from graphs import meta


def test_add_node_normalizes_args_and_fills_defaults():
    g = _C.Graph()
    x = g.add_input("x", "Tensor", meta([2, 3]))
    # aten::add.Tensor(self, other, *, alpha=1): alpha comes from the schema default.
    (y,) = g.add_node("add", "aten::add.Tensor", [("v", x), ("v", x)], {}, "", [("Tensor", meta([2, 3]))])
    g.set_outputs([("v", y)])
    g.verify()
    assert "aten::add.Tensor(%x, %x, 1)" in str(g)
    t = torch.randn(2, 3)
    (out,) = _C.Executable(g).run([t])
    torch.testing.assert_close(out, t + t)


def test_keyword_argument_goes_to_its_schema_slot():
    g = _C.Graph()
    x = g.add_input("x", "Tensor", meta([4]))
    (y,) = g.add_node("add", "aten::add.Tensor", [("v", x), ("v", x)], {"alpha": ("c", 3)}, "", [("Tensor", None)])
    g.set_outputs([("v", y)])
    t = torch.arange(4.0)
    torch.testing.assert_close(_C.Executable(g).run([t])[0], t + 3 * t)


@pytest.mark.parametrize("target, args, kwargs, message", [
    ("aten::no_such_op", [], {}, "no operator with this name"),
    ("aten::add.Tensor", [], {}, "missing required argument 'self'"),
    ("aten::relu", [("c", 1), ("c", 2)], {}, "got 2 positional args"),
    ("aten::relu", [], {"nope": ("c", 1)}, "unknown keyword argument 'nope'"),
])
def test_bad_nodes_raise_naming_the_node(target, args, kwargs, message):
    g = _C.Graph()
    with pytest.raises(_C.FxcppNodeError, match=rf"node 'bad_node' \({target}\).*{message}"):
        g.add_node("bad_node", target, args, kwargs, "", [("Tensor", None)])


def test_verifier_rejects_duplicate_names():
    g = _C.Graph()
    x = g.add_input("x", "Tensor", meta([2]))
    g.add_node("r", "aten::relu", [("v", x)], {}, "", [("Tensor", None)])
    (y,) = g.add_node("r", "aten::neg", [("v", x)], {}, "", [("Tensor", None)])
    g.set_outputs([("v", y)])
    with pytest.raises(_C.FxcppNodeError, match="node 'r' .*duplicate node name"):
        g.verify()


def test_verifier_requires_meta_after_propagation_when_asked():
    g = _C.Graph()
    x = g.add_input("x", "Tensor", meta([2]))
    (y,) = g.add_node("mystery", "aten::relu", [("v", x)], {}, "", [("Tensor", None)])
    g.set_outputs([("v", y)])
    with pytest.raises(_C.FxcppNodeError, match="no tensor meta"):
        g.verify(require_meta=True)
    _C.run_pass(g, "shape_propagation")
    g.verify(require_meta=True)


def test_unknown_value_reference_is_rejected_at_the_boundary():
    g = _C.Graph()
    with pytest.raises(ValueError, match="unknown value id 7"):
        g.add_node("n", "aten::relu", [("v", 7)], {}, "", [("Tensor", None)])


def test_unknown_pass_name_lists_the_passes():
    with pytest.raises(ValueError, match="passes are: verify, shape_propagation, remove_noops, dce"):
        _C.run_pass(_C.Graph(), "fuse_everything")


def test_constants_and_lists_cross_into_cpp():
    g = _C.Graph()
    x = g.add_input("x", "Tensor", meta([2, 3]))
    w = g.add_constant("w", torch.full((2,), 2.0))
    (v,) = g.add_node("view", "aten::view", [("v", x), ("l", [("c", 3), ("c", 2)])], {}, "", [("Tensor", None)])
    (s,) = g.add_node("sum", "aten::sum.dim_IntList", [("v", v), ("l", [("c", 0)]), ("c", True)],
                      {"dtype": ("c", torch.float64)}, "", [("Tensor", None)])
    (m,) = g.add_node("mul", "aten::mul.Tensor", [("v", s), ("v", w)], {}, "", [("Tensor", None)])
    g.set_outputs([("v", m), ("c", None)])
    t = torch.randn(2, 3)
    out, none = _C.Executable(g).run([t])
    torch.testing.assert_close(out, t.view(3, 2).sum(0, keepdim=True, dtype=torch.float64) * torch.full((2,), 2.0))
    assert none is None


def test_graph_is_read_only_once_an_executable_exists():
    g = _C.Graph()
    x = g.add_input("x", "Tensor", meta([2]))
    (y,) = g.add_node("r", "aten::relu", [("v", x)], {}, "", [("Tensor", None)])
    g.set_outputs([("v", y)])
    exe = _C.Executable(g)
    with pytest.raises(RuntimeError, match="cannot run a pass: an Executable was built from this graph"):
        _C.run_pass(g, "dce")
    with pytest.raises(RuntimeError, match="cannot add a node"):
        g.add_node("n", "aten::neg", [("v", x)], {}, "", [("Tensor", None)])
    torch.testing.assert_close(exe.run([torch.tensor([-1.0, 2.0])])[0], torch.tensor([0.0, 2.0]))
