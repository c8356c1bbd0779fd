"""fxcpp.save(model_or_fn, path, *example_inputs): a compiled plan out of Python.

The file (torch.save's zip format, which LibTorch's torch::jit::pickle_load reads) holds the
lowered ATen graph as the builder calls that made it, the options that shape the plan, and
the weights (the values of the graph's static inputs). fxcpp_run (csrc/tools/fxcpp_run.cpp,
LibTorch and fxcpp_core only) replays the calls, runs the same C++ passes and runs the plan:

    fxcpp.save(model.eval(), "model.fxcpp", x)
    torch.save([x], "inputs.pt")
    $ build/fxcpp_run model.fxcpp inputs.pt outputs.pt      # cmake --build build --target fxcpp_run

Supported: inference graphs on CPU that run wholly in the C++ core, with static shapes, calling
ATen's own ops. Refused, with FxcppSaveError saying why: a graph with nodes the core cannot run
(they would need the Python Interpreter), an op registered from Python or another library
(torch.library), more than one graph (a graph break), a training graph, symbolic sizes, CUDA
tensors. The weights are saved as they are at save time: a later change to the model is
not in the file.
"""
from __future__ import annotations

import functools

import torch

from . import _C, lowering
from .explain import recording
from .options import Options

FORMAT, VERSION = "fxcpp-plan", 1
_LIBTORCH_NAMESPACES = {"aten", "prims", "prim"}  # what fxcpp_run can call: ATen's ops and the core's prims


class FxcppSaveError(ValueError):
    """The model cannot be saved as a plan the C++ runner runs; the message says why."""


def _arg(a):
    tag, x = a
    if tag == "c":
        return ("c", _C.plan_constant(x) if not isinstance(x, torch.Tensor) else x.detach())
    if tag == "l":
        return ("l", [_arg(e) for e in x])
    return (tag, x)


def _meta(m):
    if m is None:
        return None
    dtype, sizes, strides, device = m
    if any(not isinstance(s, int) for s in sizes):
        raise FxcppSaveError(f"fxcpp.save: symbolic sizes {sizes}: the runner takes static shapes (compile with dynamic=False)")
    return (_C.plan_constant(dtype), list(sizes), None if strides is None else list(strides), str(device))


class _RecordingGraph:
    """Stands in for _C.Graph while lowering: builds the real graph (so errors surface here)
    and keeps each builder call in the form the C++ loader replays."""

    def __init__(self, static_values: dict):
        self.g, self.calls, self.static_values, self.position = _C.Graph(), [], static_values, 0

    def add_input(self, name, kind, meta, is_static=False):
        value = self.static_values.get(self.position) if is_static else None
        self.position += 1
        self.calls.append(("input", name, kind, _meta(meta), bool(is_static), value))
        return self.g.add_input(name, kind, meta, is_static)

    def add_constant(self, name, value):
        self.calls.append(("constant", name, value.detach() if isinstance(value, torch.Tensor) else _C.plan_constant(value)))
        return self.g.add_constant(name, value)

    def add_node(self, name, target, args, kwargs, fx_repr, outputs):
        self.calls.append(("node", name, target, [_arg(a) for a in args], [(k, _arg(v)) for k, v in kwargs.items()],
                           fx_repr, [(kind, _meta(m)) for kind, m in outputs]))
        return self.g.add_node(name, target, args, kwargs, fx_repr, outputs)

    def set_outputs(self, outs):
        self.calls.append(("outputs", [_arg(a) for a in outs]))
        return self.g.set_outputs(outs)


def save(model_or_fn, path, *example_inputs, options=None) -> None:
    """Compile model_or_fn for example_inputs (inference, static shapes) and write its plan
    and weights to path, for fxcpp_run. Raises FxcppSaveError where the runner could not run it."""
    from .compiler import backend

    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.device.type != "cpu":
            raise FxcppSaveError(f"fxcpp.save: an input is on {x.device}; the runner runs CPU plans")
    opts = Options.parse(options).replace(profile=True)  # profile: calls go through CompiledAtenGraph, which captures
    compiled = torch.compile(model_or_fn, backend=functools.partial(backend, options=opts), dynamic=False)
    graphs: list = []
    with torch.no_grad():
        with recording(graphs):
            compiled(*example_inputs)
        if len(graphs) != 1:
            raise FxcppSaveError(f"fxcpp.save: Dynamo made {len(graphs)} graphs (a graph break?); the runner "
                                 "runs one (torch.compile(..., fullgraph=True) shows where it breaks)")
        g = graphs[0]
        if getattr(g, "kind", None) != "inference":
            raise FxcppSaveError(f"fxcpp.save: a {getattr(g, 'kind', 'torch-level')} graph; the runner runs inference graphs")
        if g.single is None:
            nodes = [n.format_node() for n in g.parent.graph.nodes if n.op == "call_function"] if g.parent else []
            raise FxcppSaveError("fxcpp.save: some nodes run in the Python Interpreter, which the runner does not have: "
                                 + ("; ".join(nodes[:5]) or "; ".join(g.fallbacks)))
        g.capture = []
        try:
            compiled(*example_inputs)
        finally:
            captured, g.capture = g.capture, None
    if len(captured) != 1:
        raise FxcppSaveError("fxcpp.save: the compiled graph was not called once on the second call")
    args = captured[0]
    # Plain tensors: LibTorch's unpickler knows no Parameter.
    static_values = {i: args[i].detach() if isinstance(args[i], torch.Tensor) else args[i] for i in g.static}
    rec = _RecordingGraph(static_values)
    lowering.lower_graph(g.gm, static=g.static, graph=rec)
    foreign = sorted({c[2] for c in rec.calls if c[0] == "node" and c[2].split("::")[0] not in _LIBTORCH_NAMESPACES})
    if foreign:  # registered from Python (torch.library) or by another library: not in the runner
        raise FxcppSaveError(f"fxcpp.save: the graph calls {', '.join(foreign)}, which LibTorch alone does not have")
    torch.save({"format": FORMAT, "version": VERSION, "calls": rec.calls, "pack_weights": opts.pack_weights,
                "disabled_passes": list(opts.disable_passes)}, path)
