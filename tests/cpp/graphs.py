"""Helpers for the C++ core tests: ATen graphs from Python functions, lowered to fxcpp._C."""
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from fxcpp import _C, lowering

F32 = torch.float32
CPU = torch.device("cpu")


def aten_graph(fn, *inputs):
    """The ATen-level FX graph of fn (FakeTensor metas in node.meta['val'])."""
    return make_fx(fn, tracing_mode="fake")(*inputs)


def lowered(fn, *inputs, keep_meta=True, static=None):
    """fn's graph lowered to C++. The tests' functions take (activation, *parameters), as a
    module's forward sees them: every input but the first is static unless `static` says."""
    gm = aten_graph(fn, *inputs)
    g, _ = lowering.lower_graph(gm, keep_meta=keep_meta, static=set(range(1, len(inputs))) if static is None else static)
    return gm, g


def run(g, *inputs):
    return _C.Executable(g).run(list(inputs))


def meta(shape, dtype=F32):
    return (dtype, list(shape), None, CPU)


def targets(g):
    return _C.Graph.node_targets(g)


def fused(g):
    """The oneDNN fusion nodes of g: [{name, target, anchor_op, post_ops, covers, bn, ...}]."""
    return g.fused_nodes()


def pipeline_until(g, last):
    """Run the pipeline's passes in order up to and including `last`."""
    for name in _C.pass_names():
        _C.run_pass(g, name)
        if name == last:
            return g
    raise ValueError(last)
