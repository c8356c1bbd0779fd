"""A GraphModule compiled per concrete input signature: the direct API's plan cache
(fxcpp.compile, direct_api.py), and each traceable piece of a graph split around
torch.fx.wrap calls (compiler.py)."""
from __future__ import annotations

import collections
import threading

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from .options import Options


def _signature(args) -> tuple:
    sig = []
    for a in args:
        if isinstance(a, torch.Tensor):
            sig.append((tuple(a.shape), a.stride(), a.dtype, a.device, a.requires_grad))
        else:
            sig.append((type(a), a))
    return tuple(sig)


class ShapeSpecialized(torch.nn.Module):
    """A GraphModule compiled per concrete input signature (LRU, Options.plan_cache_size).
    aot needs a flat tuple output: a flat copy is compiled and its output rebuilt.
    static_hint: which positional inputs hold parameters or buffers; the module's own
    parameters and buffers are static too (aot lifts them, in this order, before the inputs)."""

    def __init__(self, gm: fx.GraphModule, opts: Options, static_hint=frozenset(), pass_records=()):
        super().__init__()
        self.flat, self.out_spec = _flat_output_copy(gm)
        # Pre passes run once, here, on the flat copy (not per signature); the lifted parameters
        # are counted after them (a pass may fold or add parameters).
        self.pass_records = list(pass_records)
        if opts.pre_passes:
            from . import user_passes

            self.flat = user_passes.apply(self.flat, opts.pre_passes, "pre", opts, "direct", self.pass_records)
            opts = opts.replace(pre_passes=())
        self.opts = opts
        lifted = (len(list(self.flat.named_parameters(remove_duplicate=False)))
                  + len(list(self.flat.named_buffers(remove_duplicate=False))))
        self.static_hint = set(range(lifted)) | {lifted + k for k in static_hint}
        self.cache: collections.OrderedDict = collections.OrderedDict()
        self.lock = threading.Lock()

    def compiled_for(self, args):
        key = _signature(args)
        with self.lock:
            fn = self.cache.get(key)
            if fn is not None:
                self.cache.move_to_end(key)
                return fn
        from .compiler import compile_torch_graph  # (compiler.py imports this module)

        fn = compile_torch_graph(self.flat, list(args), self.opts, self.flat.forward, self.static_hint, self.pass_records)
        with self.lock:
            self.cache[key] = fn
            while len(self.cache) > self.opts.plan_cache_size:
                self.cache.popitem(last=False)
        return fn

    def forward(self, *args):
        outs = self.compiled_for(args)(*args)
        return pytree.tree_unflatten(list(outs), self.out_spec)


def _flat_output_copy(gm: fx.GraphModule):
    """A copy of gm returning a flat tuple, and the spec to rebuild the output."""
    graph = fx.Graph()
    env = {}
    spec = None
    for node in gm.graph.nodes:
        if node.op == "output":
            leaves, spec = pytree.tree_flatten(node.args[0])
            graph.output(tuple(env[x] if isinstance(x, fx.Node) else x for x in leaves))
        else:
            env[node] = graph.node_copy(node, lambda n: env[n])
    return fx.GraphModule(gm, graph), spec
