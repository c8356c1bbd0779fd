"""fxcpp.shape_prop (backend/shape_prop.py): the C++ shape and dtype propagation, written as
torch.fx.passes.shape_prop.ShapeProp writes it, agrees with ShapeProp on every node of a zoo
of models, torch-level (symbolic_trace) and ATen-level (make_fx)."""
import math

import pytest
import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.shape_prop import ShapeProp

import fxcpp


class Attention(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.qkv, self.proj, self.heads = nn.Linear(d, 3 * d), nn.Linear(d, d), heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Dropout(0.1), nn.Linear(4 * d, d))

    def forward(self, x):
        b, s, d = x.size(0), x.size(1), x.size(2)  # sizes flow as ints
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


class Block(nn.Module):  # a ResNet basic block and its head
    def __init__(self, c=8):
        super().__init__()
        self.c1, self.b1, self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)
        self.fc = nn.Linear(c, 5)

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = F.relu(self.b2(self.c2(y)) + x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


def cnn():
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(72, 10))


def two_outputs(x, y):
    m = torch.var_mean(x, -1)  # a tuple of tensors
    return (m[0] * y.sum(), x.t().contiguous(), x.shape[0])


import test_e2e_models as e2e  # noqa: E402  (the end-to-end tests' models join the zoo)

ZOO = {
    "e2e_mlp": (e2e.MLP, lambda: [torch.randn(4, 16)]),
    "e2e_conv_bn": (lambda: e2e._randomize_bn(e2e.ConvBN()), lambda: [torch.randn(2, 3, 16, 16)]),
    "e2e_residual_block": (lambda: e2e._randomize_bn(e2e.ResidualBlock()), lambda: [torch.randn(2, 8, 10, 10)]),
    "e2e_sdpa_attention": (lambda: e2e.Attention(causal=True), lambda: [torch.randn(2, 6, 32)]),
    "e2e_layernorm_gelu": (e2e.LNGelu, lambda: [torch.randn(2, 5, 32)]),
    "e2e_embeddings": (e2e.Embed, lambda: [torch.randint(0, 50, (3, 7))]),
    "e2e_transformer_block": (e2e.TransformerBlock, lambda: [torch.randn(2, 6, 32)]),
    "cnn": (cnn, lambda: [torch.randn(2, 3, 8, 8)]),
    "attention": (Attention, lambda: [torch.randn(2, 6, 32)]),
    "resnet_block_channels_last": (Block, lambda: [torch.randn(2, 8, 6, 6).contiguous(memory_format=torch.channels_last)]),
    "attention_bf16": (lambda: Attention().to(torch.bfloat16), lambda: [torch.randn(2, 6, 32, dtype=torch.bfloat16)]),
    "two_outputs": (lambda: two_outputs, lambda: [torch.randn(4, 5), torch.randn(3)]),
}


def _traced(make, inputs, aten: bool):
    torch.manual_seed(0)
    m = make()
    if isinstance(m, nn.Module):
        m.eval()
    if aten:
        return make_fx(m)(*inputs)  # real tracing: ShapeProp cannot run a graph whose metas are another mode's fakes
    return fx.symbolic_trace(m)


@pytest.mark.parametrize("level", ["torch", "aten"])
@pytest.mark.parametrize("name", sorted(ZOO))
def test_agrees_with_shapeprop(name, level):
    make, inputs = ZOO[name]
    xs = inputs()
    ours = _traced(make, xs, level == "aten")
    theirs = _traced(make, xs, level == "aten")
    assert fxcpp.shape_prop(ours, *xs) is ours
    ShapeProp(theirs).propagate(*xs)
    compared = 0
    for a, b in zip(ours.graph.nodes, theirs.graph.nodes):
        assert a.name == b.name
        assert a.meta.get("tensor_meta") == b.meta.get("tensor_meta"), (a.format_node(), a.meta.get("tensor_meta"), b.meta.get("tensor_meta"))
        compared += "tensor_meta" in b.meta
    assert compared >= 5
    sources = [n.meta.get("fxcpp_shape_source") for n in ours.graph.nodes if n.op in ("call_function", "call_method", "call_module")
               and "tensor_meta" in n.meta]
    # The C++ rules gave the shape and dtype of most tensor-producing nodes (the rest: ops it has no
    # rule for; two_outputs is made of them).
    assert name == "two_outputs" or sources.count("fxcpp") >= 0.75 * len(sources), [(n.name, n.meta.get("fxcpp_shape_source")) for n in ours.graph.nodes]


def test_a_node_without_a_cpp_rule_keeps_the_runs_meta_and_says_so():
    x = torch.randn(4, 5)
    gm = make_fx(lambda x: torch.var_mean(x, -1))(x)
    fxcpp.shape_prop(gm, x)
    vm = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.var_mean.correction)
    assert vm.meta["fxcpp_shape_source"] == "run" and len(vm.meta["tensor_meta"]) == 2


def test_a_wrong_cpp_shape_rule_is_reported(monkeypatch):
    import importlib

    sp = importlib.import_module("fxcpp.shape_prop")  # the module (fxcpp.shape_prop is the function)

    real = sp._cpp_metas_of_aten_graph

    def lying(gm, vals):
        metas, env = real(gm, vals)
        return [None if m is None else (m[0], [s + 1 if isinstance(s, int) else s for s in m[1]]) + tuple(m[2:]) for m in metas], env

    monkeypatch.setattr(sp, "_cpp_metas_of_aten_graph", lying)
    with pytest.raises(sp.FxcppShapeError, match="fxcpp's shape rule gives"):
        fxcpp.shape_prop(fx.symbolic_trace(nn.Linear(4, 3)), torch.randn(2, 4))


def test_side_effects_run_once_and_metas_are_as_each_node_saw_them():
    def f(x):
        x.add_(1.0)        # an input written in place: once, as ShapeProp does
        a = x.clone()
        b = a.sum(-1)      # b's meta: a's shape before the unsqueeze_ below
        a.unsqueeze_(0)
        return a, b

    x = torch.randn(4, 3)
    x0 = x.clone()
    ours, theirs = fx.symbolic_trace(f), fx.symbolic_trace(f)
    fxcpp.shape_prop(ours, x)
    assert torch.equal(x, x0 + 1.0)
    ShapeProp(theirs).propagate(x0.clone())
    for a, b in zip(ours.graph.nodes, theirs.graph.nodes):
        assert a.meta.get("tensor_meta") == b.meta.get("tensor_meta"), a.format_node()


def test_fake_inputs_are_refused_with_a_clear_error():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with pytest.raises(TypeError, match="real example inputs"):
        fxcpp.shape_prop(fx.symbolic_trace(nn.Linear(4, 3)), FakeTensorMode().from_tensor(torch.randn(2, 4)))
