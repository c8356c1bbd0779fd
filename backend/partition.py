"""Partitioning: which nodes run in the C++ core, which in a torch.fx.Interpreter.

Two levels:
- torch level (`split_opaque`): a call to a Python function wrapped with
  `torch.fx.wrap` is opaque: it stays in the parent graph and runs in the
  Interpreter; the rest of the graph is compiled through aot_autograd.
- ATen level (`split_aten`): dispatcher ops (any OpOverload, custom
  torch.library ops included), operator.getitem and symbolic-size arithmetic
  go to C++ partitions; anything else (higher-order ops, Python callables)
  stays in the parent graph, which runs in the Interpreter.
Both reuse torch.fx's CapabilityBasedPartitioner.
"""
from __future__ import annotations

import operator

import torch.fx as fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from . import lowering

CPP_PREFIX = "fxcpp_cpp_"
AOT_PREFIX = "fxcpp_aot_"


class _Support(OperatorSupportBase):
    def __init__(self, pred):
        self.pred = pred

    def is_node_supported(self, submodules, node: fx.Node) -> bool:
        return self.pred(node)


def _split(gm: fx.GraphModule, pred, prefix: str) -> tuple[fx.GraphModule, list[str]]:
    """Fuse the nodes `pred` accepts into submodules named prefix<i>; returns (gm, names)."""
    partitioner = CapabilityBasedPartitioner(gm, _Support(pred), allows_single_node_partition=True)
    partitions = partitioner.propose_partitions()
    if not partitions:
        return gm, []
    split = partitioner.fuse_partitions(partitions, prefix=prefix)
    names = [n.target for n in split.graph.nodes if n.op == "call_module" and str(n.target).startswith(prefix)]
    return split, names


def all_supported(gm: fx.GraphModule) -> bool:
    return all(lowering.is_supported(n) for n in gm.graph.nodes)


def split_aten(gm: fx.GraphModule, isolated=frozenset()) -> tuple[fx.GraphModule, list[str]]:
    """C++ partitions of the supported nodes; the `isolated` ones (by name; with the getitems
    of their outputs) stay in the parent graph."""
    def runs_in_cpp(n: fx.Node) -> bool:
        if n.op != "call_function" or n.name in isolated:
            return False
        if n.target is operator.getitem and isinstance(n.args[0], fx.Node) and n.args[0].name in isolated:
            return False
        return lowering.is_supported(n)

    return _split(gm, runs_in_cpp, CPP_PREFIX)


def is_fx_wrapped(target) -> bool:
    """Was `target` wrapped with torch.fx.wrap (opaque to symbolic tracing)?"""
    from torch.fx import _symbolic_trace as st

    globs = getattr(target, "__globals__", None)
    name = getattr(target, "__name__", None)
    return globs is not None and (id(globs), name) in st._wrapped_fns_to_patch


def opaque_nodes(gm: fx.GraphModule) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and is_fx_wrapped(n.target)]


def split_opaque(gm: fx.GraphModule) -> tuple[fx.GraphModule, list[str]]:
    def traceable(n: fx.Node) -> bool:
        return n.op in ("call_function", "call_method", "call_module") and not is_fx_wrapped(n.target)

    return _split(gm, traceable, AOT_PREFIX)
