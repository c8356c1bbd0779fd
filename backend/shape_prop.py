"""fxcpp.shape_prop(gm, *example_inputs): fxcpp's C++ shape and dtype propagation over a
GraphModule, written where torch.fx.passes.shape_prop.ShapeProp writes it:
node.meta["tensor_meta"] (a TensorMetadata: shape, dtype, requires_grad, stride,
memory_format, is_quantized, qparams), so a user can call ours where they called that.

How: the graph runs once on the example inputs, as ShapeProp runs it (on FakeTensors when
the inputs are FakeTensors, then with no real compute), so every value, tensor or not, flows
to the nodes after it. Each tensor-producing node's shape and dtype then come from the C++
shape_propagation pass, node by node: the node (an ATen op, a call_module, a torch function,
a Tensor method) is traced to its ATen ops alone, on its inputs' values, and those are lowered
with only their inputs' metas. The C++ pass keeps no strides, so strides, memory
format and requires_grad come from that run. A node the C++ core has no rule for keeps the
run's meta; node.meta["fxcpp_shape_source"] says which ("fxcpp" or "run"). Where the two
disagree on a shape or dtype, that is a fxcpp shape-rule bug and it raises,
naming the node.
"""
from __future__ import annotations

import contextlib

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.shape_prop import TensorMetadata, _extract_tensor_metadata
from torch.utils import _pytree as pytree

from . import _C, lowering


class FxcppShapeError(RuntimeError):
    """fxcpp's shape rule and the graph's run disagree on a node's shape or dtype."""


class _Run(fx.Interpreter):
    """Keeps each node's value, and its tensors' metadata as they were when the node ran (a
    later in-place op, as_strided_ say, may restride the same tensor object)."""

    def __init__(self, gm, mode):
        super().__init__(gm)
        self.mode, self.vals, self.metas = mode, {}, {}

    def run_node(self, n):
        with self.mode if self.mode is not None else contextlib.nullcontext():
            out = super().run_node(n)
        self.vals[n] = out
        self.metas[n] = [_extract_tensor_metadata(v) for v in _tensors(out)]
        return out


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


def _node_alone(gm: fx.GraphModule, n: fx.Node, vals: dict):
    """n's own ATen graph (traced from the values its inputs had in the run), and those inputs."""
    leaves, spec = pytree.tree_flatten((n.args, n.kwargs))
    tensor_pos = [i for i, a in enumerate(leaves) if isinstance(a, fx.Node) and isinstance(vals[a], torch.Tensor)]
    const = [vals[a] if isinstance(a, fx.Node) else a for a in leaves]
    target = gm.get_submodule(n.target) if n.op == "call_module" else n.target

    def call(*tensors):
        flat = list(const)
        for i, t in zip(tensor_pos, tensors):
            flat[i] = t
        args, kwargs = pytree.tree_unflatten(flat, spec)
        if n.op == "call_method":
            return getattr(args[0], target)(*args[1:], **kwargs)
        return target(*args, **kwargs)

    inputs = [vals[leaves[i]] for i in tensor_pos]
    return make_fx(call, tracing_mode="real")(*inputs), inputs


def _meta_from(cpp, ran: TensorMetadata) -> TensorMetadata:
    """TensorMetadata with the C++ shape and dtype, the run's strides and the rest."""
    if cpp is None or not all(isinstance(s, int) for s in cpp[1]):
        return ran
    t = torch.empty_strided(cpp[1], ran.stride, dtype=cpp[0], device="meta")
    return _extract_tensor_metadata(t)._replace(requires_grad=ran.requires_grad)


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
    fake = [x for x in example_inputs if isinstance(x, FakeTensor)]
    run = _Run(gm, fake[0].fake_mode if fake else None)
    run.run(*example_inputs)  # with autograd as the caller has it: requires_grad is recorded, as ShapeProp does
    for n in gm.graph.nodes:
        ran = run.metas.get(n)
        if not ran:
            continue
        cpp: list = []
        if n.op in ("call_function", "call_method", "call_module"):
            try:  # the node's own ATen ops, given its inputs' metas: what the C++ rules make of them
                sub, inputs = _node_alone(gm, n, run.vals)
                sub_metas, sub_env = _cpp_metas_of_aten_graph(sub, inputs)
                outs = pytree.tree_leaves(sub.graph.output_node().args[0])
                cpp = [sub_metas[sub_env[o]] if isinstance(sub_env.get(o), int) else None for o in outs]
            except lowering.LoweringError:
                cpp = []  # an op the core cannot take: the run's metas stand
        cpp = (cpp + [None] * len(ran))[:len(ran)]
        for c, r in zip(cpp, ran):
            _check(n, c, r)
        metas_in_order = iter([_meta_from(c, r) for c, r in zip(cpp, ran)])
        out = run.vals[n]
        n.meta["tensor_meta"] = fx.node.map_aggregate(out, lambda v: next(metas_in_order) if isinstance(v, torch.Tensor) else v)
        n.meta["fxcpp_shape_source"] = ("input" if n.op in ("placeholder", "get_attr") else "output" if n.op == "output"
                                        else "fxcpp" if all(c is not None for c in cpp) else "run")
        n.meta["type"] = type(out)
    return gm
