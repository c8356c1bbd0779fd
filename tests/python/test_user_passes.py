"""User FX passes (Options.pre_passes / aten_passes / decompositions, backend/user_passes.py)
and the pass library (fxcpp.passes): each changes what explain() reports, matches eager on
the graph it means, and a broken pass is named in a clear error."""
import math

import pytest
import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

import fxcpp
from helpers import assert_same

aten = torch.ops.aten


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.drop = nn.Linear(16, 32), nn.Linear(32, 8), nn.Dropout(0.2)

    def forward(self, x):
        return self.fc2(self.drop(F.gelu(self.fc1(x))))


def _model_and_input():
    torch.manual_seed(0)
    return MLP().eval(), torch.randn(4, 16)


def _ops(report) -> set:
    return {r.op for r in report.rows}


def _explain(model, x, **options):
    torch._dynamo.reset()
    with torch.no_grad():
        return fxcpp.explain(model, x, options=options)


def _compiled(model, x, **options):
    torch._dynamo.reset()
    with torch.no_grad():
        return torch.compile(model, backend="fxcpp", options=options)(x)


def gelu_to_silu(gm: fx.GraphModule):  # a torch-level pass, editing in place (returns None)
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is F.gelu:
            n.target, n.kwargs = F.silu, {}


def test_a_pre_pass_changes_the_torch_graph_and_what_runs():
    model, x = _model_and_input()
    report = _explain(model, x, pre_passes=[gelu_to_silu])
    assert "aten::silu" in _ops(report) and "aten::gelu" not in _ops(report), report
    assert [r.name for _, r in report.user_passes] == ["gelu_to_silu"]
    assert "pre pass gelu_to_silu" in str(report)
    ref = model.fc2(F.silu(model.fc1(x)))
    assert_same(ref, _compiled(model, x, pre_passes=[gelu_to_silu]))


def _pattern(x, w, b):
    return aten.gelu.default(aten.addmm.default(b, x, w))


def _replacement(x, w, b):  # tanh-approximated GELU: a different kernel in explain()
    return aten.gelu.default(aten.addmm.default(b, x, w), approximate="tanh")


def test_a_replace_pattern_rule_on_the_aten_graph():
    model, x = _model_and_input()
    report = _explain(model, x, aten_passes=[(_pattern, _replacement)])
    (tag, rec), = report.user_passes
    assert rec.stage == "aten" and rec.name.startswith("replace_pattern(_pattern")
    gelus = [r for r in report.rows if r.op == "aten::gelu"]
    assert gelus, report
    ref = model.fc2(F.gelu(model.fc1(x), approximate="tanh"))
    out = _compiled(model, x, aten_passes=[(_pattern, _replacement)])
    assert_same(ref, out)
    assert not torch.allclose(out, model(x), atol=1e-6)  # it did change the computation


def _gelu_erf(x, approximate="none"):  # run by aot while it traces: real ATen ops come out
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


def test_a_decomposition_table_changes_the_aten_graph():
    model, x = _model_and_input()
    report = _explain(model, x, decompositions={aten.gelu.default: _gelu_erf})
    assert "aten::gelu" not in _ops(report) and "aten::erf" in _ops(report), report
    assert_same(model(x), _compiled(model, x, decompositions={aten.gelu.default: _gelu_erf}))


def test_passes_from_the_library_as_user_passes():
    model, x = _model_and_input()
    silu = fxcpp.passes.decompose({aten.silu.default: lambda a: aten.mul.Tensor(a, aten.sigmoid.default(a))})
    opts = dict(pre_passes=[fxcpp.passes.remove_dropout, fxcpp.passes.replace_op(F.gelu, F.silu)], aten_passes=[silu])
    report = _explain(model, x, **opts)
    names = [r.name for _, r in report.user_passes]
    assert names == ["remove_dropout", "replace_op(gelu -> silu)", "decompose(silu.default)"], names
    assert "aten::silu" not in _ops(report) and "aten::sigmoid" in _ops(report), report
    assert_same(model.fc2(F.silu(model.fc1(x))), _compiled(model, x, **opts))


def test_user_passes_in_the_direct_api_leave_the_callers_graph_alone():
    model, x = _model_and_input()
    gm = fx.symbolic_trace(model)
    code = gm.code
    with torch.no_grad():
        out = fxcpp.compile(gm, [x], options={"pre_passes": [fxcpp.passes.remove_dropout, gelu_to_silu]})(x)
    assert gm.code == code and any(n.op == "call_module" and n.target == "drop" for n in gm.graph.nodes)
    assert_same(model.fc2(F.silu(model.fc1(x))), out)


def test_each_pass_is_dumped(tmp_path):
    model, x = _model_and_input()
    _compiled(model, x, pre_passes=[fxcpp.passes.remove_dropout], aten_passes=[(_pattern, _replacement)],
              dump_dir=str(tmp_path))
    pre = list(tmp_path.rglob("pre_user_pass0.py"))
    post = list(tmp_path.rglob("aten_user_pass0.py"))
    header, code = pre[0].read_text().split("\n", 1)
    assert header == "# after remove_dropout" and "dropout" not in code
    assert "dropout" in next(tmp_path.rglob("torch_graph.py")).read_text()  # the graph before the passes
    assert post and "tanh" in post[0].read_text()


def raising_pass(gm):
    raise KeyError("no such node")


def returns_a_number(gm):
    return 3


def breaks_the_graph(gm):  # a node reads a value defined after it
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    nodes[0].args = (nodes[-1],) + tuple(nodes[0].args[1:])
    return gm


@pytest.mark.parametrize("stage", ["pre_passes", "aten_passes"])
@pytest.mark.parametrize("bad,message", [(raising_pass, "raising_pass raised KeyError"),
                                         (returns_a_number, "returns_a_number returned a int"),
                                         (breaks_the_graph, "breaks_the_graph left a broken graph")])
def test_a_broken_pass_is_named(stage, bad, message):
    model, x = _model_and_input()
    with pytest.raises(Exception, match=message):
        _compiled(model, x, **{stage: [bad]})


def test_options_check_the_passes():
    with pytest.raises(ValueError, match="pre_passes takes callables"):
        fxcpp.Options(pre_passes=["remove_dropout"])
    with pytest.raises(ValueError, match="decompositions must be a dict"):
        fxcpp.Options(decompositions=[aten.gelu.default])
    assert fxcpp.Options(aten_passes=gelu_to_silu).aten_passes == (gelu_to_silu,)


# --- the library on its own GraphModules ---

def test_remove_dropout_removes_only_identity_dropouts():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.ReLU(), nn.AlphaDropout(0.1)).eval()
    gm = fxcpp.passes.remove_dropout(fx.symbolic_trace(m))
    assert not [n for n in gm.graph.nodes if n.op == "call_module" and "Dropout" in type(gm.get_submodule(n.target)).__name__]
    x = torch.randn(3, 8)
    assert_same(m(x), gm(x))

    def f(x):
        return F.dropout(x, 0.3, training=True) + F.dropout(x, 0.3, training=False)

    gm = fxcpp.passes.remove_dropout(fx.symbolic_trace(f))
    kept = [n for n in gm.graph.nodes if n.target is F.dropout]
    assert len(kept) == 1 and kept[0].kwargs["training"] is True  # a dropout that drops stays
    train = nn.Sequential(nn.Dropout(0.5)).train()
    assert any(n.op == "call_module" for n in fxcpp.passes.remove_dropout(fx.symbolic_trace(train)).graph.nodes)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_fuse_conv_bn_folds_eval_pairs_without_touching_the_model(dims):
    torch.manual_seed(0)
    conv, bn = {1: (nn.Conv1d, nn.BatchNorm1d), 2: (nn.Conv2d, nn.BatchNorm2d), 3: (nn.Conv3d, nn.BatchNorm3d)}[dims]
    m = nn.Sequential(conv(3, 8, 3), bn(8), nn.ReLU(), conv(8, 4, 1), bn(4)).eval()
    for b in (m[1], m[4]):
        b.running_mean.uniform_(-1, 1)
        b.running_var.uniform_(0.5, 2)
        b.weight.data.uniform_(0.5, 1.5)
    w0 = m[0].weight.clone()
    gm = fxcpp.passes.fuse_conv_bn(fx.symbolic_trace(m))
    kinds = [type(gm.get_submodule(n.target)).__name__ for n in gm.graph.nodes if n.op == "call_module"]
    assert not any("BatchNorm" in k for k in kinds) and kinds.count(conv.__name__) == 2, kinds
    x = torch.randn(2, 3, *([6] * dims))
    assert_same(m(x), gm(x))
    assert torch.equal(m[0].weight, w0)  # the model's own conv is not changed
    with torch.no_grad():
        assert_same(m(x), fxcpp.compile(gm, [x])(x))


def test_fuse_conv_bn_leaves_training_pairs_and_conv_outputs_read_twice():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
    gm = fxcpp.passes.fuse_conv_bn(fx.symbolic_trace(m))
    assert sum(n.op == "call_module" for n in gm.graph.nodes) == 2

    class Shared(nn.Module):  # the conv's output is read besides the BatchNorm: no fold
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

        def forward(self, x):
            y = self.conv(x)
            return self.bn(y) + y

    s = Shared().eval()
    gm = fxcpp.passes.fuse_conv_bn(fx.symbolic_trace(s))
    assert sum(n.op == "call_module" for n in gm.graph.nodes) == 2
    x = torch.randn(1, 3, 5, 5)
    assert_same(s(x), gm(x))


def test_replace_op_and_decompose_on_their_own():
    def f(x):
        return torch.relu(x) + x.relu()

    gm = fxcpp.passes.replace_op("relu", "sigmoid")(fxcpp.passes.replace_op(torch.relu, torch.tanh)(fx.symbolic_trace(f)))
    x = torch.randn(10)
    assert_same(torch.tanh(x) + x.sigmoid(), gm(x))

    def g(x):
        return F.gelu(x) * 2

    d = fxcpp.passes.decompose({F.gelu: lambda a: a * 0.5 * (1.0 + torch.erf(a * (1 / math.sqrt(2))))})
    gm = d(fx.symbolic_trace(g))
    assert not [n for n in gm.graph.nodes if n.target is F.gelu] and [n for n in gm.graph.nodes if n.target is torch.erf]
    assert_same(g(x), gm(x))
    with pytest.raises(TypeError, match="not the traced value"):
        fxcpp.passes.decompose({F.gelu: lambda a: 1.0})(fx.symbolic_trace(g))


def test_a_pre_pass_keeps_the_weights_static():
    """aot finds Dynamo's parameters through attributes of the graph; the pre passes' copy keeps
    them, so weights stay static inputs (packed once, cached) and are not per-call inputs."""
    model, x = _model_and_input()
    plain = _explain(model, x)
    passed = _explain(model, x, pre_passes=[gelu_to_silu])
    assert passed.graphs[0].static and passed.graphs[0].static == plain.graphs[0].static


@torch.fx.wrap
def _opaque_scale(t):
    return t * 3.0


def _doubles_the_output(gm):  # not idempotent: run twice, it would give 4x
    out = gm.graph.output_node()
    with gm.graph.inserting_before(out):
        out.args = (fx.node.map_arg(out.args[0], lambda v: gm.graph.call_function(torch.mul, (v, 2.0))),)


def test_pre_passes_run_once_around_a_wrapped_function():
    def f(x):
        return _opaque_scale(torch.relu(x)) + 1.0

    gm = fx.symbolic_trace(f)
    x = torch.randn(5)
    with torch.no_grad():
        out = fxcpp.compile(gm, [x], options={"pre_passes": [_doubles_the_output]})(x)
    assert_same(f(x) * 2.0, out)


def test_decomposition_keys_must_be_overloads():
    with pytest.raises(ValueError, match="OpOverloads"):
        fxcpp.Options(decompositions={aten.gelu: _gelu_erf})


def test_fuse_conv_bn_folds_a_conv_called_twice_into_two_convs():
    class TwoUses(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn1, self.bn2 = nn.Conv2d(3, 3, 3, padding=1), nn.BatchNorm2d(3), nn.BatchNorm2d(3)

        def forward(self, x):
            return self.bn2(self.conv(self.bn1(self.conv(x))))

    torch.manual_seed(0)
    m = TwoUses().eval()
    for b in (m.bn1, m.bn2):
        b.running_mean.uniform_(-1, 1)
        b.running_var.uniform_(0.5, 2)
    gm = fxcpp.passes.fuse_conv_bn(fx.symbolic_trace(m))
    convs = [n.target for n in gm.graph.nodes if n.op == "call_module"]
    assert len(convs) == 2 and len(set(convs)) == 2, convs
    x = torch.randn(1, 3, 6, 6)
    assert_same(m(x), gm(x))
