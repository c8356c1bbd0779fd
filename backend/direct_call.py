"""The serving call path: an inference graph whose aot_autograd runtime wrappers have
nothing to do is called straight from Dynamo's compiled frame.

aot_autograd wraps every compiled graph in runtime wrappers (input-mutation write-back,
output-alias replay, grad-mode and autocast toggles, effect tokens, deduplicated
arguments, RNG state, subclass unwrapping). For an inference graph that mutates no input,
returns no alias, and was traced with autocast off, every one of them is the identity: the
graph's placeholders are Dynamo's arguments one for one, and the C++ executor already
runs with autograd off. Then the wrappers cost ~1.5 us per call on a 2-core host (of a
~7 us eager call on a tiny graph), so we skip them. Anything else keeps aot's wrappers.
"""
from __future__ import annotations

import logging

import torch
import torch.fx as fx
from torch._functorch._aot_autograd.schemas import OutputType

log = logging.getLogger("fxcpp")


def _why_not(gm: fx.GraphModule, example_inputs, compiled: list) -> str | None:
    """Why the aot wrappers are needed, or None when they are the identity."""
    if len(compiled) != 1:
        return f"{len(compiled)} graphs were compiled (training needs the autograd wrapper)"
    cag, meta = compiled[0]
    if cag.kind != "inference":
        return f"a {cag.kind} graph"
    if meta is None:
        return "aot's metadata is not available"
    if next(gm.parameters(), None) is not None or next(gm.buffers(), None) is not None:
        return "the Dynamo graph holds parameters or buffers (aot prepends them)"
    if torch._C._is_any_autocast_enabled():
        return "autocast is on (aot disables it around the call)"
    if any(not isinstance(x, (torch.Tensor, int, float, bool, torch.SymInt)) for x in example_inputs):
        return "an input is not a tensor or a number"
    if any(type(x) not in (torch.Tensor, torch.nn.Parameter) for x in example_inputs if isinstance(x, torch.Tensor)):
        return "a tensor subclass input"
    placeholders = sum(1 for n in cag.gm.graph.nodes if n.op == "placeholder")
    if placeholders != len(example_inputs):
        return "aot rewrote the arguments (deduplicated, synthetic base or effect tokens)"
    if any(i.mutates_data or i.mutates_metadata or getattr(i, "mutates_storage_metadata", False)
           for i in meta.input_info):
        return "the graph mutates an input"
    if any(o.output_type != OutputType.non_alias for o in meta.output_info):
        return "an output aliases an input or another output"
    if (meta.num_intermediate_bases or getattr(meta, "tokens", None) or meta.is_rng_op_functionalized
            or getattr(meta, "dynamic_outputs", True) or meta.grad_enabled_mutation is not None):
        return "aot has runtime work (intermediate bases, effect tokens, RNG state, dynamic outputs or a grad-mode change)"
    return None


def direct_call(gm: fx.GraphModule, example_inputs, compiled: list, opts):
    """A function Dynamo can call in place of aot's wrapped one, or None.
    compiled: [(CompiledAtenGraph, aot's ViewAndMutationMeta)] built while aot traced gm."""
    why = _why_not(gm, example_inputs, compiled)
    if why is not None:
        log.debug("fxcpp: the call keeps aot_autograd's runtime wrappers: %s", why)
        return None
    return call_of(compiled[0][0], opts)


def call_of(cag, opts):
    """The direct call of an inference graph that needs none of aot's wrappers."""
    if cag.single is None or opts.verify or opts.profile:
        def call(*args):
            return cag(list(args))
    else:
        call = cag.single.exe  # its __call__(*args) is the C++ run, no Python frame in between
    log.debug("fxcpp: inference graph %d is called directly, without aot_autograd's runtime wrappers", cag.id)
    return call
