"""fxcpp.passes: the textbook torch.fx transformations, each usable on its own GraphModule
(returns it, rewritten, linted and recompiled) or as a user pass in Options:

    gm = fxcpp.passes.remove_dropout(torch.fx.symbolic_trace(model.eval()))
    torch.compile(model, backend="fxcpp", options={
        "pre_passes": [fxcpp.passes.replace_op(torch.relu, torch.nn.functional.gelu)],
        "aten_passes": [fxcpp.passes.decompose({torch.ops.aten.silu.default: lambda x: x * torch.sigmoid(x)})],
    })

None of them changes what the graph computes, except replace_op and decompose, which compute
what the caller asked for. None mutates a module the graph holds: a folded conv is a new module.
"""
from __future__ import annotations

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.fusion import fuse_conv_bn_eval

__all__ = ["remove_dropout", "fuse_conv_bn", "replace_op", "decompose"]

_DROPOUT_MODULES = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)
_DROPOUT_FUNCTIONS = {F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout,
                      torch.dropout, torch.feature_dropout, torch.alpha_dropout, torch.feature_alpha_dropout}
_CONV_BN = {nn.Conv1d: nn.BatchNorm1d, nn.Conv2d: nn.BatchNorm2d, nn.Conv3d: nn.BatchNorm3d}


def _done(gm: fx.GraphModule) -> fx.GraphModule:
    gm.graph.eliminate_dead_code()
    gm.graph.lint()
    gm.recompile()
    return gm


def _module(gm: fx.GraphModule, n: fx.Node):
    return gm.get_submodule(n.target) if n.op == "call_module" else None


def _dropout_is_identity(gm: fx.GraphModule, n: fx.Node) -> bool:
    """A dropout that returns its input unchanged: a module in eval mode, a functional call with
    training=False or p=0, ATen's dropout with train=False. A training dropout stays."""
    if n.op == "call_module":
        m = _module(gm, n)
        return isinstance(m, _DROPOUT_MODULES) and (not m.training or m.p == 0)
    if n.op == "call_function" and n.target in _DROPOUT_FUNCTIONS:
        p = n.args[1] if len(n.args) > 1 else n.kwargs.get("p", 0.5)
        training = n.args[2] if len(n.args) > 2 else n.kwargs.get("training", n.kwargs.get("train", n.target in (
            F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout)))
        return training is False or p == 0
    if n.op == "call_function" and n.target is torch.ops.aten.dropout.default:
        return n.args[2] is False or n.args[1] == 0
    if n.op == "call_method" and n.target == "dropout":
        return False  # Tensor.dropout does not exist; kept for clarity of the rule
    return False


def remove_dropout(gm: fx.GraphModule) -> fx.GraphModule:
    """Remove every dropout that is the identity (eval mode, training=False, p=0); its users read
    its input. A dropout that would drop values is left where it is."""
    for n in list(gm.graph.nodes):
        if _dropout_is_identity(gm, n):
            n.replace_all_uses_with(n.args[0])
            gm.graph.erase_node(n)
    gm.delete_all_unused_submodules()
    return _done(gm)


def fuse_conv_bn(gm: fx.GraphModule) -> fx.GraphModule:
    """Fold an eval-mode BatchNorm into the convolution before it (call_module pairs, as
    torch.fx.symbolic_trace gives them) when the conv's output feeds only the BatchNorm. The
    folded conv is a new module; the graph's own conv and BatchNorm modules are not touched."""
    for bn_node in list(gm.graph.nodes):
        if bn_node.op != "call_module" or not bn_node.args or not isinstance(bn_node.args[0], fx.Node):
            continue
        conv_node = bn_node.args[0]
        conv, bn = _module(gm, conv_node), _module(gm, bn_node)
        if conv is None or type(conv) not in _CONV_BN or type(bn) is not _CONV_BN[type(conv)]:
            continue
        if conv.training or bn.training or not bn.track_running_stats or len(conv_node.users) != 1:
            continue
        fused = fuse_conv_bn_eval(conv, bn)  # a deep copy of conv with the BatchNorm folded in
        # One name per (conv, BatchNorm) pair: a conv called twice, each time before its own
        # BatchNorm, folds twice.
        base = f"{conv_node.target}_{bn_node.target}_folded".replace(".", "_")
        name, k = base, 0
        while hasattr(gm, name):
            k += 1
            name = f"{base}_{k}"
        gm.add_submodule(name, fused)
        with gm.graph.inserting_before(conv_node):
            new = gm.graph.call_module(name, conv_node.args, conv_node.kwargs)
        new.meta.update(bn_node.meta)
        bn_node.replace_all_uses_with(new)
        gm.graph.erase_node(bn_node)
        gm.graph.erase_node(conv_node)
    gm.delete_all_unused_submodules()
    return _done(gm)


def replace_op(old, new):
    """A pass that makes every call of `old` call `new` instead (call_function targets: torch
    functions or ATen OpOverloads; a str names a Tensor method, for call_method nodes). The two
    must take the same arguments."""
    if not (callable(old) or isinstance(old, str)) or not (callable(new) or isinstance(new, str)):
        raise TypeError("fxcpp.passes.replace_op takes two callables (or two method names)")

    def replace(gm: fx.GraphModule) -> fx.GraphModule:
        for n in gm.graph.nodes:
            if (n.op == "call_function" and n.target is old) or (n.op == "call_method" and n.target == old):
                n.target = new
        return _done(gm)

    replace.__qualname__ = f"replace_op({getattr(old, '__name__', old)} -> {getattr(new, '__name__', new)})"
    return replace


def decompose(rules: dict):
    """A pass that rewrites every call_function node whose target is a key of `rules` as what
    rules[target] computes, traced through torch.fx Proxies (the decomposition recipe of the
    torch.fx docs): rules[target] is called with the node's arguments as Proxies and its result
    replaces the node. Other nodes are copied as they are."""
    if not isinstance(rules, dict) or not all(callable(v) for v in rules.values()):
        raise TypeError("fxcpp.passes.decompose takes a dict {target: callable}")

    def run(gm: fx.GraphModule) -> fx.GraphModule:
        graph = fx.Graph()
        graph._codegen = gm.graph._codegen
        tracer = fx.proxy.GraphAppendingTracer(graph)
        env: dict = {}
        for n in gm.graph.nodes:
            if n.op == "call_function" and n.target in rules:
                args = fx.node.map_arg(n.args, lambda a: fx.Proxy(env[a], tracer))
                kwargs = fx.node.map_arg(n.kwargs, lambda a: fx.Proxy(env[a], tracer))
                out = rules[n.target](*args, **kwargs)
                if not isinstance(out, fx.Proxy):
                    raise TypeError(f"the rule for {n.target} returned a {type(out).__name__}, not the traced value "
                                    f"of its arguments (node {n.name!r}; a rule returns one value: nodes with "
                                    "several outputs are not decomposed)")
                if out.node not in env.values():  # a new node (not an input handed back): the value it stands for
                    out.node.meta.update(n.meta)
                env[n] = out.node
            else:
                env[n] = graph.node_copy(n, lambda a: env[a])
        gm.graph = graph
        return _done(gm)

    run.__qualname__ = f"decompose({', '.join(getattr(k, '__name__', str(k)) for k in rules)})"
    return run
