"""cpu_fusion: which nodes a group takes (and refuses), the program it carries, idempotence,
and the numbers against the unfused graph."""
import pytest
import torch
import torch.nn.functional as F

from fxcpp import _C
from graphs import lowered, pipeline_until, run, targets


def _fused(fn, *xs, static=None):
    """(graph after the CPU fusion, the same graph with it off) for fn(*xs)."""
    _, g = lowered(fn, *xs, static=static)
    pipeline_until(g, "fuse_postops")
    assert _C.run_pass(g, "cpu_fusion") in (True, False)
    _, ref = lowered(fn, *xs, static=static)
    pipeline_until(ref, "fuse_postops")
    return g, ref


def _check_numbers(g, ref, xs):
    for a, b in zip(run(g, *xs), run(ref, *xs)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_a_chain_becomes_one_node_and_the_pass_is_idempotent():
    x = torch.randn(8, 16)
    g, ref = _fused(lambda x: torch.relu(x * 2.0 + 1.0) - x, x, static=set())
    assert targets(g) == ["cpu::fused"]
    (node,) = g.cpu_fused_nodes()
    assert node["covers"] == ["mul", "add", "relu", "sub"] and node["phases"] == 1
    assert _C.run_pass(g, "cpu_fusion") is False
    _check_numbers(g, ref, [x])


def test_layer_norm_with_residual_and_epilogue_is_one_node_with_two_outputs():
    x, r, w, b = torch.randn(4, 32), torch.randn(4, 32), torch.randn(32), torch.randn(32)

    def f(x, r, w, b):
        s = x + r
        return s, F.gelu(F.layer_norm(s, (32,), w, b))

    g, ref = _fused(f, x, r, w, b, static=set())
    (node,) = g.cpu_fused_nodes()
    assert node["outputs"] == 2 and node["row_dims"] == 1 and node["phases"] == 3
    assert "single:" in node["program"]  # the one-list form for rows that fit a block
    _check_numbers(g, ref, [x, r, w, b])


def test_one_op_alone_is_left_to_aten():
    x = torch.randn(4, 8)
    for fn in (lambda x: torch.relu(x), lambda x: torch.softmax(x, -1), lambda x: x.sum(-1)):
        g, _ = _fused(fn, x, static=set())
        assert not g.cpu_fused_nodes(), targets(g)


def test_a_side_effect_closes_groups():
    x = torch.randn(6)
    g = _C.Graph()
    xi = g.add_input("x", "Tensor", (torch.float32, [6], [1], torch.device("cpu")))
    meta = (torch.float32, [6], [1], torch.device("cpu"))
    (a,) = g.add_node("a", "aten::mul.Tensor", [("v", xi), ("c", 2.0)], {}, "", [("Tensor", meta)])
    (b,) = g.add_node("b", "aten::relu", [("v", a)], {}, "", [("Tensor", meta)])
    g.add_node("m", "aten::add_.Tensor", [("v", xi), ("c", 1.0)], {}, "", [("Tensor", meta)])  # mutates x
    (c,) = g.add_node("c", "aten::neg", [("v", b)], {}, "", [("Tensor", meta)])
    (d,) = g.add_node("d", "aten::exp", [("v", c)], {}, "", [("Tensor", meta)])
    g.set_outputs([("v", d)])
    assert _C.run_pass(g, "cpu_fusion") is True
    covers = [n["covers"] for n in g.cpu_fused_nodes()]
    assert covers == [["a", "b"], ["c", "d"]], covers  # nothing fused across the in-place add
    t = x.clone()
    torch.testing.assert_close(run(g, t)[0], torch.exp(-torch.relu(x * 2)))
    torch.testing.assert_close(t, x + 1)


def test_no_group_closes_a_cycle_through_an_outside_node():
    x = torch.randn(4, 4)

    def f(x):
        a = x * 2.0
        b = torch.mm(a, a)  # outside any group (not a CPU-fusion op)
        return torch.relu(a) + b  # reads a (group) and b (which reads a)

    g, ref = _fused(f, x, static=set())
    _check_numbers(g, ref, [x])
    # topological order holds: every node's inputs come before it
    g.verify()


def test_keepdim_false_row_values_never_meet_full_size_ones():
    """[B, T] next to [B, T, C] would broadcast wrongly: the reduction and its full-size reader stay apart."""
    x = torch.randn(5, 5, 5)  # B == T == C: [B, T] broadcasts as [1, B, T], and a wrong reading would not raise
    g, ref = _fused(lambda x: (x * 2.0) - x.relu().sum(-1), x, static=set())
    _check_numbers(g, ref, [x])


@pytest.mark.parametrize("dims", [(-1,), (-2, -1)])
def test_reductions_over_trailing_dims_fuse_with_prologue_and_epilogue(dims):
    x = torch.randn(3, 6, 10)
    g, ref = _fused(lambda x: (x.exp() * 0.5).sum(dims, keepdim=True) + 1.0, x, static=set())
    (node,) = g.cpu_fused_nodes()
    assert node["row_dims"] == len(dims)
    _check_numbers(g, ref, [x])


@pytest.mark.parametrize("dims, perm", [((0,), [1, 2, 0]), ((1,), [0, 2, 1]), ((0, 2), [1, 0, 2]), ((0, 1), [2, 0, 1])])
def test_reductions_over_other_dims_fuse_over_a_permuted_domain(dims, perm):
    x = torch.randn(3, 6, 10)
    g, ref = _fused(lambda x: (x * 2.0).sum(dims) + 1.0, x, static=set())
    (node,) = g.cpu_fused_nodes()
    assert node["row_dims"] == len(dims) and node["perm"] == perm, node["program"]
    assert _C.run_pass(g, "cpu_fusion") is False
    _check_numbers(g, ref, [x])


def test_keepdim_false_row_values_meet_full_size_ones_only_over_leading_dims():
    """x - x.mean(0) broadcasts [C] as [1, C], the kept dims, as the group reads it: one node.
    x - x.sum(1) of [A, B, C] broadcasts [A, C] as [1, A, C]: not the kept dims (right-aligned
    broadcasting pairs the wrong dims), so the reduction and its full-size reader stay apart."""
    x = torch.randn(5, 5)
    g, ref = _fused(lambda x: x - (x * 2.0).mean(0), x, static=set())
    (node,) = g.cpu_fused_nodes()
    assert node["covers"] == ["mul", "mean", "sub"] and node["perm"] == [1, 0], node
    _check_numbers(g, ref, [x])
    x3 = torch.randn(5, 5, 5)
    g, ref = _fused(lambda x: x - (x * 2.0).sum(1), x3, static=set())
    assert all("sub" not in n["covers"] for n in g.cpu_fused_nodes()), g.cpu_fused_nodes()
    _check_numbers(g, ref, [x3])


def test_softmax_scales_by_the_reciprocal_of_the_sum_as_eager_does():
    # ATen's softmax kernel computes 1 / sum once per row and multiplies: a per-element division
    # would cost more and round differently from eager.
    x, m = torch.randn(8, 64), torch.randn(1, 64)
    g, ref = _fused(lambda x, m: torch.softmax(x * 0.125 + m, -1), x, m, static=set())
    (node,) = g.cpu_fused_nodes()
    single = node["program"].split("single:")[1]
    assert "recip" in single and " div " not in single, node["program"]
    _check_numbers(g, ref, [x, m])
