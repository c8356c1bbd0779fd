"""fxcpp.shape_prop(gm, *example_inputs): fxcpp's C++ shape and dtype propagation over a
GraphModule, written where torch.fx.passes.shape_prop.ShapeProp writes it:
node.meta["tensor_meta"] (a TensorMetadata: shape, dtype, requires_grad, stride,
memory_format, is_quantized, qparams), so a user can call ours where they called that.

How: the graph runs once on the (real) example inputs, as ShapeProp runs it, so every value,
tensor or not, flows to the nodes after it. Each tensor-producing node is then traced alone
to its ATen ops, on FakeTensors shaped as its inputs were when it ran (no real compute, no
side effect run twice), and those are lowered with only their inputs' metas: the C++
shape_propagation pass gives the node's shape and dtype. They must equal the run's (else
FxcppShapeError, naming the node: a fxcpp shape-rule bug); the C++ pass keeps no strides, so
the TensorMetadata written is the run's. node.meta["fxcpp_shape_source"] says whether the C++
rules gave the node's shapes ("fxcpp") or the core had no rule or could not take the op
("run", with the reason in node.meta["fxcpp_shape_error"]).
"""
from __future__ import annotations

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.shape_prop import TensorMetadata, _extract_tensor_metadata
from torch.utils import _pytree as pytree

from . import _C, lowering


class FxcppShapeError(RuntimeError):
    """fxcpp's shape rule and the graph's run disagree on a node's shape or dtype."""


class _Run(fx.Interpreter):
    """Runs the graph as ShapeProp does. Keeps each node's value, its tensors' metadata, and a
    FakeTensor stand-in for each of them, both as they were when the node ran (a later in-place
    op, as_strided_ or unsqueeze_ say, may change the same tensor object)."""

    def __init__(self, gm):
        super().__init__(gm)
        self.vals, self.metas, self.fakes = {}, {}, {}
        self.mode = FakeTensorMode(allow_non_fake_inputs=True)  # the module's weights stay real tensors

    def run_node(self, n):
        out = super().run_node(n)
        self.vals[n] = out
        self.metas[n] = [_extract_tensor_metadata(v) for v in _tensors(out)]
        self.fakes[n] = fx.node.map_aggregate(out, self._fake)
        return out

    def _fake(self, v):
        if not isinstance(v, torch.Tensor):
            return v
        with self.mode:
            f = torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device)
        return f.requires_grad_(v.requires_grad) if v.requires_grad else f


def _tensors(value) -> list:
    found: list = []
    fx.node.map_aggregate(value, lambda v: found.append(v) if isinstance(v, torch.Tensor) else None)
    return found


def _cpp_metas_of_aten_graph(gm: fx.GraphModule, placeholder_vals: list) -> tuple[list, dict]:
    """Lower an ATen graph with only its inputs' metas, run shape_propagation; returns the
    value metas and lowering's env (FX node -> value id or ids)."""
    saved = {}
    for p, v in zip(gm.graph.find_nodes(op="placeholder"), placeholder_vals):
        saved[p] = p.meta.get("val")
        p.meta["val"] = v
    try:
        g, env = lowering.lower_graph(gm, keep_meta=False)
    finally:
        for p, v in saved.items():
            if v is None:
                p.meta.pop("val", None)
            else:
                p.meta["val"] = v
    _C.run_pass(g, "shape_propagation")
    return g.value_metas(), env


def _node_alone(gm: fx.GraphModule, n: fx.Node, fakes: dict, mode):
    """n's own ATen graph, traced on FakeTensors with its inputs' metadata as the run had them
    (no real compute, so an in-place op or a BatchNorm's running stats are not run twice), and
    those inputs."""
    leaves, spec = pytree.tree_flatten((n.args, n.kwargs))
    tensor_pos = [i for i, a in enumerate(leaves) if isinstance(a, fx.Node) and isinstance(fakes[a], torch.Tensor)]
    const = [fakes[a] if isinstance(a, fx.Node) else a for a in leaves]
    target = gm.get_submodule(n.target) if n.op == "call_module" else n.target

    def call(*tensors):
        flat = list(const)
        for i, t in zip(tensor_pos, tensors):
            flat[i] = t
        args, kwargs = pytree.tree_unflatten(flat, spec)
        if n.op == "call_method":
            return getattr(args[0], target)(*args[1:], **kwargs)
        return target(*args, **kwargs)

    inputs = [fakes[leaves[i]] for i in tensor_pos]
    with mode:
        return make_fx(call, tracing_mode="real")(*inputs), inputs


def _check(n: fx.Node, cpp, ran: TensorMetadata):
    if cpp is None:
        return
    sizes = [s if isinstance(s, int) else str(s) for s in cpp[1]]
    ran_sizes = [int(s) if not isinstance(s, torch.SymInt) else str(s) for s in ran.shape]
    if cpp[0] != ran.dtype or sizes != ran_sizes:
        raise FxcppShapeError(f"fxcpp: node '{n.name}' ({n.format_node()}): fxcpp's shape rule gives "
                              f"{cpp[0]} {sizes}, torch gives {ran.dtype} {ran_sizes}")


def shape_prop(gm: fx.GraphModule, *example_inputs) -> fx.GraphModule:
    """Write node.meta["tensor_meta"] (and "fxcpp_shape_source", "type") on every node of gm
    whose value holds a tensor, shaped like the value as ShapeProp does (a tuple of
    TensorMetadata for a tuple of tensors, non-tensor leaves as they are); returns gm."""
    if any(isinstance(x, FakeTensor) for x in example_inputs):
        raise TypeError("fxcpp.shape_prop takes real example inputs (it runs the graph once, as ShapeProp does "
                        "without a fake mode); got a FakeTensor")
    run = _Run(gm)
    run.run(*example_inputs)  # with autograd as the caller has it: requires_grad is recorded, as ShapeProp does
    for n in gm.graph.nodes:
        if n not in run.vals:
            continue
        out = run.vals[n]
        n.meta["type"] = type(out)
        ran = run.metas[n]
        if not ran:
            continue
        cpp: list = []
        if n.op in ("call_function", "call_method", "call_module"):
            try:  # the node's own ATen ops, given its inputs' metas: what the C++ rules make of them
                sub, inputs = _node_alone(gm, n, run.fakes, run.mode)
                sub_metas, sub_env = _cpp_metas_of_aten_graph(sub, inputs)
                outs = pytree.tree_leaves(sub.graph.output_node().args[0])
                cpp = [sub_metas[sub_env[o]] if isinstance(sub_env.get(o), int) else None for o in outs]
            except Exception as e:  # noqa: BLE001 - an op the core cannot take, or a data-dependent shape:
                cpp = []            # the run's metas stand, and the reason is kept
                n.meta["fxcpp_shape_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        cpp = (cpp + [None] * len(ran))[:len(ran)]
        for c, r in zip(cpp, ran):
            _check(n, c, r)  # equal shape and dtype, or FxcppShapeError: the metas written are then the run's
        metas_in_order = iter(ran)
        n.meta["tensor_meta"] = fx.node.map_aggregate(out, lambda v: next(metas_in_order) if isinstance(v, torch.Tensor) else v)
        n.meta["fxcpp_shape_source"] = ("input" if n.op in ("placeholder", "get_attr") else "output" if n.op == "output"
                                        else "fxcpp" if all(c is not None for c in cpp) else "run")
    return gm
