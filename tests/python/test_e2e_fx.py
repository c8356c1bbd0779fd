"""End-to-end: the direct API, fxcpp.compile(gm, example_inputs), on torch.fx graphs
(symbolic_trace output, hand-edited graphs, custom tracers, torch.fx.wrap functions),
and custom torch.library ops under torch.compile(backend="fxcpp")."""
import pytest
import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F
from fxcpp.explain import Report, recording
from helpers import assert_same, clone_inputs, compile_fxcpp

import fxcpp
from fxcpp import _C

# ---------------------------------------------------------------- module-level helpers


def gated(x):
    """Python control flow on a tensor value: opaque to symbolic tracing."""
    if x.sum() > 0:
        return x * 2
    return x - 1


torch.fx.wrap("gated")


@torch.library.custom_op("fxcpp_test::mysin", mutates_args=())
def mysin(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.sin(x) * scale


@mysin.register_fake
def _(x, scale):
    return torch.empty_like(x)


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * torch.cos(x) * ctx.scale, None


def _setup_context(ctx, inputs, output):
    x, scale = inputs
    ctx.save_for_backward(x)
    ctx.scale = scale


mysin.register_autograd(_backward, setup_context=_setup_context)




def compile_and_report(gm, inputs, options=None):
    """fxcpp.compile + one call, recording the ATen graphs it compiled."""
    graphs = []
    with recording(graphs):
        compiled = fxcpp.compile(gm, clone_inputs(inputs), options=options)
        out = compiled(*clone_inputs(inputs))
    assert graphs, "fxcpp.compile compiled no ATen graph"
    return compiled, out, Report(graphs)


def assert_cpp_only(report):
    kc = report.kernel_counts
    assert kc["interpreter"] == 0, f"{kc}\n{report}"
    assert kc["aten"] > 0, kc
    assert not report.fallbacks, report.fallbacks


# ---------------------------------------------------------------- models


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.ln = nn.LayerNorm(16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        h = self.ln(self.fc1(x)).relu()  # call_module + call_method
        h = h.view(h.size(0), -1).transpose(0, 1).contiguous().t()
        return self.fc2(torch.relu(h)).softmax(dim=-1)


class LeafNorm(nn.Module):
    """A module a custom tracer keeps as a leaf (call_module in the graph)."""

    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w


class WithLeaf(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.norm = LeafNorm(8)

    def forward(self, x):
        return F.gelu(self.norm(self.fc(x)))


class LeafTracer(fx.Tracer):
    def is_leaf_module(self, m, qualname):
        return isinstance(m, LeafNorm) or super().is_leaf_module(m, qualname)


class WithWrapped(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.b = nn.Linear(6, 3)

    def forward(self, x):
        return self.b(gated(torch.tanh(self.a(x))))


class NestedOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 5)

    def forward(self, x, y):
        h = self.fc(x)
        return {"h": h, "pair": (h + y, [h.sum(dim=1), y.abs()])}, h.max(dim=-1).values


# ---------------------------------------------------------------- tests


def test_symbolic_trace_call_module_and_method():
    model = Block().eval()
    gm = fx.symbolic_trace(model)
    ops = {n.op for n in gm.graph.nodes}
    assert {"call_module", "call_method", "call_function"} <= ops
    x = torch.randn(3, 8)
    _, out, report = compile_and_report(gm, [x])
    with torch.no_grad():
        assert_same(model(x), out)
    assert_cpp_only(report)
    ran = {r.op for r in report.rows if r.kernel in ("aten", "cpu_fused")}
    assert any("native_layer_norm" in op for op in ran), ran  # the LayerNorm module ran in C++
    linear_kernel = "onednn" if _C.has_onednn() else "aten"
    on_kernel = {r.op for r in report.rows if r.kernel == linear_kernel}
    assert any("addmm" in op or "mm" in op for op in on_kernel), on_kernel  # the Linear modules
    assert any("_softmax" in op for op in ran), ran  # the .softmax method


def test_symbolic_trace_no_grad_inference():
    model = Block().eval()
    for p in model.parameters():
        p.requires_grad_(False)
    gm = fx.symbolic_trace(model)
    x = torch.randn(3, 8)
    _, out, report = compile_and_report(gm, [x])
    assert_same(model(x), out)
    assert_cpp_only(report)
    assert [g.kind for g in report.graphs] == ["inference"]


def test_hand_transformed_graph():
    model = Block().eval()
    gm = fx.symbolic_trace(model)
    relus = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch.relu]
    assert len(relus) == 1
    for n in relus:
        n.target = torch.sigmoid
    # insert `out * 3 + 1` before the output
    out_node = gm.graph.output_node()
    last = out_node.args[0]
    with gm.graph.inserting_before(out_node):
        scaled = gm.graph.call_function(torch.mul, (last, 3.0))
        shifted = gm.graph.call_function(torch.add, (scaled, 1.0))
    out_node.args = (shifted,)
    gm.graph.lint()
    gm.recompile()

    def reference(x):
        h = model.ln(model.fc1(x)).relu()
        h = h.view(h.size(0), -1).transpose(0, 1).contiguous().t()
        return model.fc2(torch.sigmoid(h)).softmax(dim=-1) * 3.0 + 1.0

    x = torch.randn(4, 8)
    _, out, report = compile_and_report(gm, [x])
    with torch.no_grad():
        assert_same(reference(x), out)
        assert_same(gm(x), out)
        assert not torch.allclose(model(x) * 3.0 + 1.0, out)  # the edit really changed the result
    assert_cpp_only(report)
    ran = {r.op for r in report.rows}
    assert any("sigmoid" in op for op in ran), ran


def test_custom_tracer_leaf_module_runs_in_cpp():
    model = WithLeaf().eval()
    graph = LeafTracer().trace(model)
    gm = fx.GraphModule(model, graph)
    leaf_calls = [n for n in gm.graph.nodes if n.op == "call_module" and n.target == "norm"]
    assert len(leaf_calls) == 1  # the leaf stayed a call_module
    x = torch.randn(3, 8)
    _, out, report = compile_and_report(gm, [x])
    with torch.no_grad():
        assert_same(model(x), out)
    assert_cpp_only(report)
    ran = {r.op for r in report.rows if r.kernel in ("aten", "cpu_fused")}
    assert any("rsqrt" in op for op in ran), ran  # the leaf module's body ran in C++


def _wrapped_case(sign):
    model = WithWrapped().eval()
    gm = fx.symbolic_trace(model)
    wrapped = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is gated]
    assert len(wrapped) == 1
    with torch.no_grad():
        model.b.bias.zero_()
        model.a.bias.fill_(sign * 10)  # picks the branch of the Python `if`
    return model, gm, torch.randn(3, 6)


def test_fx_wrap_function_matches_eager():
    for sign in (1.0, -1.0):  # both branches
        model, gm, x = _wrapped_case(sign)
        compiled = fxcpp.compile(gm, [x])
        with torch.no_grad():
            assert_same(model(x), compiled(x))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_fx_wrap_rest_runs_in_cpp(sign):
    model, gm, x = _wrapped_case(sign)
    compiled, out, report = compile_and_report(gm, [x], options={"fallback": "error"})
    with torch.no_grad():
        ref = model(x)
    assert_same(ref, out)
    assert_same(ref, compiled(x.clone()))
    kc = report.kernel_counts
    assert kc["aten"] > 0, kc  # the Linear / tanh parts ran in C++
    assert not report.fallbacks, report.fallbacks


def test_fx_wrap_node_reported_as_interpreter():
    model, gm, x = _wrapped_case(1.0)
    _, out, report = compile_and_report(gm, [x])
    with torch.no_grad():
        assert_same(model(x), out)
    kc = report.kernel_counts
    assert kc["interpreter"] >= 1, f"{kc}\n{report}"  # the wrapped function
    assert kc["aten"] > 0, kc


def test_fx_wrap_control_flow_follows_value():
    """The wrapped function is not specialized on the example input's branch."""
    model = WithWrapped().eval()
    gm = fx.symbolic_trace(model)
    with torch.no_grad():
        model.a.weight.zero_()
        model.a.bias.fill_(5.0)
    x = torch.randn(2, 6)
    compiled = fxcpp.compile(gm, [x])
    with torch.no_grad():
        assert_same(model(x), compiled(x))
        model.a.bias.fill_(-5.0)  # now the other branch of `gated`
        assert_same(model(x), compiled(x))


def test_nested_outputs():
    model = NestedOut().eval()
    gm = fx.symbolic_trace(model)
    x, y = torch.randn(2, 5), torch.randn(2, 5)
    _, out, report = compile_and_report(gm, [x, y])
    with torch.no_grad():
        ref = model(x, y)
    assert_same(ref, out)
    assert isinstance(out, tuple) and isinstance(out[0], dict)
    assert isinstance(out[0]["pair"], tuple) and isinstance(out[0]["pair"][1], list)
    assert_cpp_only(report)


def test_different_batch_size_than_example():
    model = Block().eval()
    gm = fx.symbolic_trace(model)
    compiled = fxcpp.compile(gm, [torch.randn(3, 8)])
    graphs = []
    with recording(graphs), torch.no_grad():
        for b in (3, 5, 1, 3, 5):
            x = torch.randn(b, 8)
            assert_same(model(x), compiled(x))
    # batches 5 and 1 are new signatures; 3 was compiled by fxcpp.compile, and repeats hit the cache
    assert len({id(g) for g in graphs}) == 2, [g.kind for g in graphs]
    assert_cpp_only(Report(graphs))


def test_plan_cache_eviction_still_correct():
    model = Block().eval()
    gm = fx.symbolic_trace(model)
    compiled = fxcpp.compile(gm, [torch.randn(2, 8)], options={"plan_cache_size": 1})
    with torch.no_grad():
        for b in (2, 4, 2, 4):
            x = torch.randn(b, 8)
            assert_same(model(x), compiled(x))


def test_direct_api_training_gradients():
    model = Block().train()
    gm = fx.symbolic_trace(model)
    x = torch.randn(3, 8)
    compiled = fxcpp.compile(gm, [x])
    compiled(x).pow(2).sum().backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model(x).pow(2).sum().backward()
    assert_same({n: p.grad for n, p in model.named_parameters()}, got)


def test_custom_library_op_torch_compile():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return mysin(self.fc(x), 0.5) + 1

    model = M().eval()
    x = torch.randn(3, 4)
    with torch.no_grad():
        ref = model(x)
        res = compile_fxcpp(model, options={"fallback": "error"})(x)
    assert_same(ref, res)
    report = fxcpp.explain(model, x)
    kc = report.kernel_counts
    assert kc["interpreter"] == 0, f"{kc}\n{report}"
    assert kc["aten"] >= 1, kc
    assert any("fxcpp_test::mysin" in r.op and r.kernel == "aten" for r in report.rows), str(report)


def test_custom_library_op_in_fx_graph():
    def fn(x):
        return torch.ops.fxcpp_test.mysin(x, 2.0).relu()

    gm = fx.symbolic_trace(fn)
    x = torch.randn(4, 3)
    _, out, report = compile_and_report(gm, [x])
    assert_same(fn(x), out)
    assert_cpp_only(report)
    assert any("mysin" in r.op for r in report.rows), str(report)


def test_custom_library_op_backward():
    def fn(x):
        return mysin(x * 2, 3.0).sum()

    x = torch.randn(5, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    compile_fxcpp(fn, options={"fallback": "error"})(x).backward()
    fn(xr).backward()
    assert_same(xr.grad, x.grad)


def test_compile_rejects_non_graphmodule():
    with pytest.raises(TypeError, match="GraphModule"):
        fxcpp.compile(Block(), [torch.randn(2, 8)])
