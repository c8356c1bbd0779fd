"""The Dynamo backend, wired through aot_autograd.

backend(gm, example_inputs): Dynamo's torch-level graph → user pre passes (user_passes.py)
→ aot_autograd → forward / backward / inference ATen graphs → user aten passes →
CompiledAtenGraph each (compiled.py: partition, lower, C++ passes, plan). A graph holding
torch.fx.wrap calls is split first; each traceable piece is compiled per input signature
(specialized.py), as the direct API fxcpp.compile does (direct_api.py).
"""
from __future__ import annotations

import contextlib
import copy
import itertools
import logging
import warnings

import torch
import torch._dynamo
import torch.fx as fx
from torch._dynamo.backends.common import aot_autograd

from torch._dynamo.exc import RestartAnalysis

from . import compile_session, freeze, partition, precompile, user_passes
from .direct_call import direct_call
from .compiled import CompiledAtenGraph, EagerFallback, dynamo_static_indices, FxcppCompileError, InterpretedGraph, dump
from .options import Options
from .specialized import ShapeSpecialized
from .user_passes import FxcppPassError

log = logging.getLogger("fxcpp")
_dynamo_graph_ids = itertools.count()


def _aot_backend(opts: Options, dump_subdir: str, static_hint: set | None = None, compiled: list | None = None,
                 pass_records: list | None = None):
    """compiled: gets (CompiledAtenGraph, aot's ViewAndMutationMeta) for each graph aot compiles.
    pass_records: what the pre passes did, kept on each ATen graph with its own aten passes."""
    def compiler_for(kind):
        def compile_aten(gm: fx.GraphModule, example_inputs):
            records = list(pass_records or ())
            gm = user_passes.apply(gm, opts.aten_passes, "aten", opts, f"{dump_subdir}/{kind}", records)
            cag = CompiledAtenGraph(gm, opts, kind, dump_subdir, static_hint, records)
            if compiled is not None:
                compiled.append((cag, cag.aot_meta))
            return cag

        return compile_aten

    return aot_autograd(
        fw_compiler=compiler_for("forward"),
        bw_compiler=compiler_for("backward"),
        inference_compiler=compiler_for("inference"),
        decompositions=dict(opts.decompositions or {}),  # the user's table; aot's own defaults otherwise
    )


def _interpret(gm: fx.GraphModule):
    def run(*args):
        return fx.Interpreter(gm).run(*args)

    return run


def compile_torch_graph(gm: fx.GraphModule, example_inputs, opts: Options, eager_fn, static_hint=None,
                        pass_records=None, direct_out: list | None = None):
    """Compile a torch-level graph; on failure apply Options.fallback. static_hint: which of
    aot's inputs hold parameters and buffers, outside Dynamo (which records them itself).
    pass_records: what pre passes a caller already ran did (its opts then have none).
    direct_out: gets the CompiledAtenGraph when the result calls it directly (direct_call.py).
    Marked as compiling throughout (compile_session.py): aot's trace must not make other
    threads' compiled calls fail, inside Dynamo or outside it (the direct API, fx.wrap pieces)."""
    with compile_session.marked():
        return _compile_torch_graph(gm, example_inputs, opts, eager_fn, static_hint, pass_records, direct_out)


def _compile_torch_graph(gm, example_inputs, opts, eager_fn, static_hint, pass_records, direct_out):
    frozen = freeze.reuse(gm, example_inputs, opts)  # it reads released weights: a racing compile's, or an error
    if frozen is not None:
        return frozen
    as_called = (gm, opts)  # before the pre passes: what a racing compile's reuse compares
    subdir = f"graph{next(_dynamo_graph_ids)}"
    dump(opts, subdir, "torch_graph.py", gm.code)
    records: list = list(pass_records or ())
    if opts.pre_passes:  # on a copy of the graph: the caller's (and a plan cache's next compile) stays as it was
        gm = user_passes.apply(_graph_copy(gm), opts.pre_passes, "pre", opts, subdir, records)
        eager_fn = gm.forward
        opts = opts.replace(pre_passes=())  # run once: the pieces of a torch.fx.wrap split must not run them again
    try:
        if partition.opaque_nodes(gm):
            return _compile_with_opaque(gm, opts, records)
        compiled: list = []
        fn = _aot_backend(opts, subdir, static_hint, compiled, records)(gm, example_inputs)
        direct = direct_call(gm, example_inputs, compiled, opts)
        if opts.freeze:
            freeze.release(gm, example_inputs, compiled, direct or fn, as_called)
        if direct is not None and direct_out is not None:
            direct_out.append(compiled[0][0])
        return direct or fn
    except EagerFallback as e:
        warnings.warn(f"fxcpp: running the graph eagerly (Options.fallback='eager'): {e}", stacklevel=2)
        return eager_fn
    except (FxcppCompileError, FxcppPassError, RestartAnalysis):  # RestartAnalysis: Dynamo's own control flow
        raise
    except Exception as e:  # noqa: BLE001 - aot tracing itself failed
        if opts.fallback == "error":
            raise FxcppCompileError(f"fxcpp could not compile the graph: {e}") from e
        warnings.warn(f"fxcpp: the graph runs in the Interpreter (aot_autograd failed: {type(e).__name__}: {e})", stacklevel=2)
        return eager_fn if opts.fallback == "eager" else _interpret(gm)


def _graph_copy(gm: fx.GraphModule) -> fx.GraphModule:
    """A GraphModule over a copy of gm's graph (node metas shallow-copied), sharing its submodules
    and parameters: a pass may rewrite the copy's graph and set new attributes on it freely."""
    graph = fx.Graph()
    graph._codegen = copy.deepcopy(gm.graph._codegen)  # Dynamo's graphs flatten their inputs with pytree
    val_map: dict = {}
    graph.output(graph.graph_copy(gm.graph, val_map))
    out = fx.GraphModule(gm, graph)
    out.meta.update(gm.meta)
    # What aot reads to find Dynamo's parameters (static inputs): without it a pass would turn
    # every weight into a per-call input (never packed, never cached).
    if hasattr(gm, "_param_name_to_source"):
        out._param_name_to_source = gm._param_name_to_source
    for old, new in val_map.items():
        if hasattr(old, "_dynamo_source"):
            new._dynamo_source = old._dynamo_source
    return out


def _compile_with_opaque(gm: fx.GraphModule, opts: Options, pass_records=()):
    """torch.fx.wrap functions stay in the parent graph (Interpreter); each traceable
    partition compiles through aot at its first call per input signature."""
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    static = {placeholders[i].name for i in dynamo_static_indices(gm)}  # parameters, buffers
    parent, names = partition.split_opaque(gm)
    for name in names:
        call = next(n for n in parent.graph.nodes if n.op == "call_module" and n.target == name)
        hint = {k for k, a in enumerate(call.args) if isinstance(a, fx.Node) and a.name in static}
        setattr(parent, name, ShapeSpecialized(parent.get_submodule(name), opts, static_hint=hint, pass_records=pass_records))
    log.info("fxcpp: torch.fx.wrap functions run in the Interpreter: %s",
             [n.format_node() for n in partition.opaque_nodes(parent)])
    return InterpretedGraph(parent, opts)


PARAMETERS_AS_CONSTANTS = (
    "fxcpp: torch._dynamo.config.inline_inbuilt_nn_modules is False (`import openvino.torch` sets it; "
    "torch 2.11 obeys it, 2.13 ignores it): Dynamo then takes module parameters for constants and does "
    "not guard their identity, so a parameter replaced after compiling (module.weight = nn.Parameter(...)) is not seen "
    "by this compiled code, fxcpp's or any backend's, until torch._dynamo.reset(); changes in place are "
    "seen. fxcpp's direct call path and freeze=True are off in this mode. Set it back to True after the import.")


def _warn_if_parameters_are_constants(gm: fx.GraphModule):
    """Dynamo hands the backend a graph that holds the modules' parameters only when
    inline_inbuilt_nn_modules is off (the default turned it on in torch 2.5; 2.13 ignores it)."""
    with warnings.catch_warnings():  # torch 2.13 deprecates reading it
        warnings.simplefilter("ignore", FutureWarning)
        inline = getattr(torch._dynamo.config, "inline_inbuilt_nn_modules", True)
    if inline is False and next(gm.parameters(), None) is not None:
        warnings.warn(PARAMETERS_AS_CONSTANTS, stacklevel=3)


def backend(gm: fx.GraphModule, example_inputs, *, mode=None, options=None):
    """The Dynamo backend: torch.compile(model, backend="fxcpp", options={...})."""
    opts = Options.parse(options)
    _warn_if_parameters_are_constants(gm)
    if mode not in (None, "default"):
        log.info("fxcpp: mode=%r has no effect yet; compiling with the defaults", mode)
    saving = precompile.precompiling()  # torch's aot_compile asks for something it can save
    direct: list = []
    with precompile.compiling_plainly() if saving else contextlib.nullcontext():
        fn = compile_torch_graph(gm, example_inputs, opts, gm.forward, direct_out=direct if saving else None)
    return precompile.PrecompiledGraph.of(gm, opts, fn, direct[0] if direct else None) if saving else fn
