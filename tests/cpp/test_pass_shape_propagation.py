"""shape_propagation: each rule recomputes the FakeTensor metas; a mismatch names the node."""
import pytest
import torch
import torch.nn.functional as F

from fxcpp import _C, lowering
from graphs import aten_graph, lowered

CASES = {
    "pointwise_promotion": (lambda a, i: (a + 1, i + 1.5, i / i, i > 0, a * 2, torch.where(i > 0, a, 0.5),
                                          torch.sigmoid(i), a.masked_fill(a > 0, 1.0)),
                            (torch.randn(3, 4), torch.randint(0, 5, (3, 4)))),
    "zero_dim_promotion": (lambda a, s: a + s, (torch.randn(2, 3), torch.tensor(2.0, dtype=torch.float64))),
    "broadcast": (lambda a, b: (a - b, torch.maximum(a, b)), (torch.randn(3, 1, 5), torch.randn(4, 1))),
    "linalg": (lambda x, w, b, bx: (F.linear(x, w, b), x @ w.t(), torch.bmm(bx, bx.transpose(1, 2))),
               (torch.randn(8, 16), torch.randn(4, 16), torch.randn(4), torch.randn(2, 3, 5))),
    "conv": (lambda x, w, wt: (F.conv2d(x, w, stride=2, padding=1), F.conv2d(x, w, dilation=2),
                               F.conv_transpose2d(x, wt, stride=2, output_padding=1),
                               F.conv2d(x, torch.ones(4, 1, 3, 3), groups=4)),
             (torch.randn(2, 4, 9, 9), torch.randn(6, 4, 3, 3), torch.randn(4, 3, 3, 3))),
    "conv1d_3d": (lambda x1, w1, x3, w3: (F.conv1d(x1, w1, padding=2), F.conv3d(x3, w3, stride=(1, 2, 2))),
                  (torch.randn(2, 3, 10), torch.randn(5, 3, 3), torch.randn(1, 2, 4, 6, 6), torch.randn(3, 2, 1, 3, 3))),
    "views": (lambda x: (x.view(6, -1), x.reshape(-1), x.permute(2, 0, 1), x.transpose(0, 2), x.unsqueeze(1),
                         x[:1].squeeze(0), x.expand(2, 2, 3, 4), x[:, 1:, ::2], x.select(1, 0), torch.cat([x, x], 1),
                         x.t() if x.dim() == 2 else x.flatten(1)),
              (torch.randn(2, 3, 4),)),
    "reductions": (lambda x, i: (x.sum(), x.sum(1), x.mean((0, 2), keepdim=True), x.amax(-1), i.sum(0),
                                 x.sum(1, dtype=torch.float64)),
                   (torch.randn(2, 3, 4), torch.randint(0, 3, (4, 5)))),
    "nn": (lambda x, w, idx, img: (F.softmax(x, -1), F.log_softmax(x, 0), F.layer_norm(x, (4,)), F.embedding(idx, w),
                                   F.max_pool2d(img, 3, 2, 1), F.avg_pool2d(img, 2), F.adaptive_avg_pool2d(img, (2, 3)),
                                   F.max_pool2d(img, 2, ceil_mode=True), F.gelu(x), F.silu(x), F.hardswish(x)),
           (torch.randn(3, 4), torch.randn(10, 6), torch.randint(0, 10, (2, 5)), torch.randn(1, 2, 7, 7))),
    "attention": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                  (torch.randn(2, 3, 8, 16), torch.randn(2, 3, 8, 16), torch.randn(2, 3, 8, 32))),
    "to_copy": (lambda x: (x.to(torch.bfloat16), x.double().sum()), (torch.randn(3, 3),)),
    "zero_dim": (lambda x: (x.sum(0), x.mean(-1), x.amax(0), x.sum(0, keepdim=True), torch.prod(x, 0)),
                 (torch.tensor(3.0),)),
}


def _metas_of(gm, g):
    """(computed C++ meta, FakeTensor meta) for every tensor output of every node."""
    pairs = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        vals = n.meta["val"] if isinstance(n.meta["val"], (list, tuple)) else [n.meta["val"]]
        multi = len(n.target._schema.returns) > 1
        for i, v in enumerate(vals):
            if isinstance(v, torch.Tensor):
                name = f"{n.name}.{i}" if multi else n.name
                pairs.append((n.name, g.value_meta(name), (str(v.dtype).replace("torch.", ""), list(v.shape))))
    return pairs


_DTYPE_NAMES = {"Float": "float32", "Double": "float64", "Long": "int64", "Bool": "bool", "BFloat16": "bfloat16",
                "Int": "int32", "Half": "float16"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rules_recompute_the_fake_tensor_metas(case):
    fn, inputs = CASES[case]
    gm, g = lowered(fn, *inputs, keep_meta=False)
    assert _C.run_pass(g, "shape_propagation") is True
    checked = 0
    for name, computed, expected in _metas_of(gm, g):
        if computed is None:
            continue  # an op without a rule (or an output the rule leaves open)
        dtype, sizes = computed
        assert (_DTYPE_NAMES.get(dtype, dtype), sizes) == expected, f"node {name}"
        checked += 1
    assert checked > 0
    assert _C.run_pass(g, "shape_propagation") is False  # idempotent: nothing left to fill


def test_every_case_agrees_with_the_traced_metas():
    # With the FakeTensor metas kept, propagation checks every rule against them.
    for fn, inputs in CASES.values():
        _, g = lowered(fn, *inputs)
        _C.run_pass(g, "shape_propagation")


def test_a_mismatch_is_an_error_naming_the_node():
    gm = aten_graph(lambda x: torch.relu(x) + 1, torch.randn(2, 3))
    relu = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.relu.default)
    relu.meta["val"] = relu.meta["val"].new_empty((3, 2))  # a wrong traced meta
    g, _ = lowering.lower_graph(gm)
    with pytest.raises(_C.FxcppNodeError, match=r"node 'relu' \(aten::relu\).*computed Float\[2, 3\].*meta is Float\[3, 2\]"):
        _C.run_pass(g, "shape_propagation")


def test_invalid_shapes_are_errors_naming_the_node():
    g = _C.Graph()
    a = g.add_input("a", "Tensor", (torch.float32, [2, 3], None, torch.device("cpu")))
    b = g.add_input("b", "Tensor", (torch.float32, [4, 5], None, torch.device("cpu")))
    (y,) = g.add_node("mm", "aten::mm", [("v", a), ("v", b)], {}, "", [("Tensor", None)])
    g.set_outputs([("v", y)])
    with pytest.raises(_C.FxcppNodeError, match=r"node 'mm' \(aten::mm\).*inner dimensions do not match: 3 vs 4"):
        _C.run_pass(g, "shape_propagation")


@pytest.mark.parametrize("target, args", [
    ("aten::select.int", [("c", 0), ("c", 0)]),
    ("aten::slice.Tensor", [("c", 0)]),
    ("aten::sum.dim_IntList", [("l", [("c", 3)])]),
    ("aten::cat", None),
])
def test_bad_ranks_are_errors_not_crashes(target, args):
    g = _C.Graph()
    x = g.add_input("x", "Tensor", (torch.float32, [], None, torch.device("cpu")))
    node_args = [("l", [("v", x), ("v", x)]), ("c", 0)] if args is None else [("v", x)] + args
    (y,) = g.add_node("bad", target, node_args, {}, "", [("Tensor", None)])
    g.set_outputs([("v", y)])
    with pytest.raises(_C.FxcppNodeError, match="node 'bad'"):
        _C.run_pass(g, "shape_propagation")
