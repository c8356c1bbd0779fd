"""Every argument kind of ATen schemas crosses into C++ and runs there (no Interpreter)."""
import pytest
import torch
import torch.nn.functional as F

from fxcpp import _C, lowering
from graphs import aten_graph

CASES = {
    # dtype, layout, device, float scalar, int list
    "factory_kwargs": (lambda x: x + torch.full((2, 3), 1.5, dtype=torch.float64, layout=torch.strided, device="cpu"),
                       (torch.randn(2, 3),)),
    "memory_format": (lambda x: x.clone(memory_format=torch.channels_last) * 1, (torch.randn(1, 2, 3, 3),)),
    "tensor_list": (lambda x, y: torch.cat([x, y, x], dim=1), (torch.randn(2, 3), torch.randn(2, 1))),
    "optional_tensor_list_with_none": (lambda x, i: x[:, i], (torch.randn(3, 5), torch.tensor([4, 0, 2]))),
    "optional_tensor_none": (lambda x, w: F.layer_norm(x, (4,), w, None), (torch.randn(2, 4), torch.randn(4))),
    "float_list": (lambda x: F.interpolate(x, scale_factor=(2.0, 1.5), mode="nearest"), (torch.randn(1, 1, 4, 4),)),
    "string_arg": (lambda x: F.gelu(x, approximate="tanh"), (torch.randn(7),)),
    "bool_and_int_args": (lambda x: x.cumsum(0).sum(1, keepdim=True), (torch.randn(3, 4),)),
    "tuple_outputs": (lambda x: (torch.var_mean(x, 1), x.max(0), torch.topk(x, 2)), (torch.randn(4, 6),)),
    "list_output": (lambda x: [t * 2 for t in x.split(2, 0)], (torch.randn(6, 2),)),
    "int_scalar_tensor_arg": (lambda x: torch.ops.aten.mul.Tensor(x, 3), (torch.randn(3),)),
    "negative_dims_and_none_optional_ints": (lambda x: x[..., -2:].flip(-1).unsqueeze(-1), (torch.randn(2, 5),)),
}


def _flat(x):
    return [t for t in torch.utils._pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_arguments_cross_and_results_match_eager(case):
    fn, inputs = CASES[case]
    gm = aten_graph(fn, *inputs)
    assert all(lowering.is_supported(n) for n in gm.graph.nodes), [n.format_node() for n in gm.graph.nodes
                                                                    if not lowering.is_supported(n)]
    g, _ = lowering.lower_graph(gm)
    _C.run_pipeline(g)
    outs = _C.Executable(g).run(list(inputs))
    expected = _flat(fn(*inputs))
    assert len(_flat(outs)) == len(expected)
    for got, want in zip(_flat(outs), expected):
        torch.testing.assert_close(got, want)


def test_symint_inputs_and_size_arithmetic():
    # dynamic shapes: SymInt placeholders and sym_size / operator arithmetic run as prims in C++
    from torch.fx.experimental.proxy_tensor import make_fx

    def fn(x):
        n = x.shape[0]
        return x.view(n * 2, -1).sum(1) * (n // 2)

    gm = make_fx(fn, tracing_mode="symbolic")(torch.randn(4, 6))
    targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert any("sym_size" in t for t in targets) and any("mul" in t for t in targets)
    g, _ = lowering.lower_graph(gm)
    _C.run_pipeline(g)
    exe = _C.Executable(g)
    for b in (2, 4, 6):
        x = torch.randn(b, 6)
        torch.testing.assert_close(exe.run([x])[0], fn(x))


def test_unsupported_arguments_go_to_the_interpreter():
    gen = torch.Generator().manual_seed(0)
    gm = aten_graph(lambda x: x + 1, torch.randn(2))
    node = next(n for n in gm.graph.nodes if n.op == "call_function")
    node.args = (node.args[0], gen)  # a Generator cannot cross into C++
    assert not lowering.is_supported(node)
    node.args = (node.args[0], 1j)  # neither can a complex scalar
    assert not lowering.is_supported(node)
