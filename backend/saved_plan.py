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

    def __init__(self, saved_values: dict, user_index: dict):
        self.g, self.calls, self.position = _C.Graph(), [], 0
        self.saved_values, self.user_index = saved_values, user_index

    def add_input(self, name, kind, meta, is_static=False):
        # ("input", name, kind, meta, is_static, saved value or None, the caller's argument index or None)
        k = self.position
        self.position += 1
        self.calls.append(("input", name, kind, _meta(meta), bool(is_static), self.saved_values.get(k),
                           self.user_index.get(k)))
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
        if not isinstance(x, torch.Tensor):
            raise FxcppSaveError(f"fxcpp.save: an example input is a {type(x).__name__}; the runner takes tensors")
        if x.device.type != "cpu":
            raise FxcppSaveError(f"fxcpp.save: an input is on {x.device}; the runner runs CPU plans")
    opts = Options.parse(options).replace(profile=True)  # profile: calls go through CompiledAtenGraph, which captures
    # fullgraph: a graph break raises here, whether or not Dynamo would compile the frame it
    # resumes in (torch 2.11 after threads raced a compile did not: one graph, half the function).
    compiled = torch.compile(model_or_fn, backend=functools.partial(backend, options=opts), dynamic=False,
                             fullgraph=True)
    graphs: list = []
    with torch.no_grad():
        with recording(graphs):
            try:
                compiled(*example_inputs)
            except torch._dynamo.exc.Unsupported as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise FxcppSaveError(f"fxcpp.save: Dynamo cannot make one graph of it (a graph break: {first}); "
                                     "the runner runs one graph") from e
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
    _check_no_runtime_work(g.aot_meta)
    args = captured[0]
    # Which of the caller's arguments each graph input is (Dynamo orders its inputs by first use,
    # not by argument); anything else (a weight, a buffer, a tensor the model holds) is saved.
    user_index, saved = {}, {}
    for k, a in enumerate(args):
        j = next((j for j, x in enumerate(example_inputs) if a is x), None)
        if j is not None and k not in g.static:
            user_index[k] = j
        elif isinstance(a, torch.Tensor):
            saved[k] = a.detach()  # a plain tensor: LibTorch's unpickler knows no Parameter
        else:
            raise FxcppSaveError(f"fxcpp.save: graph input {k} is a {type(a).__name__}, not a tensor from the "
                                 "example inputs or the model")
    rec = _RecordingGraph(saved, user_index)
    lowering.lower_graph(g.gm, static=g.static, graph=rec)
    foreign = sorted({c[2] for c in rec.calls if c[0] == "node" and c[2].split("::")[0] not in _LIBTORCH_NAMESPACES})
    if foreign:  # registered from Python (torch.library) or by another library: not in the runner
        raise FxcppSaveError(f"fxcpp.save: the graph calls {', '.join(foreign)}, which LibTorch alone does not have")
    torch.save({"format": FORMAT, "version": VERSION, "calls": rec.calls, "pack_weights": opts.pack_weights,
                "disabled_passes": list(opts.disable_passes), "num_inputs": len(example_inputs)}, path)


def _check_no_runtime_work(meta) -> None:
    """The runner runs the graph alone: refuse what aot's runtime wrappers would have to do
    around it (write mutated inputs back, rebuild aliased outputs, thread effect tokens)."""
    if meta is None:
        raise FxcppSaveError("fxcpp.save: aot_autograd's metadata for the graph is not available")
    if any(i.mutates_data or i.mutates_metadata for i in meta.input_info):
        raise FxcppSaveError("fxcpp.save: the model writes to an input or a buffer (a train-mode BatchNorm's "
                             "running stats, an in-place op on an argument); the runner returns outputs only")
    from torch._functorch._aot_autograd.schemas import OutputType

    if any(o.output_type != OutputType.non_alias for o in meta.output_info):
        raise FxcppSaveError("fxcpp.save: an output is a view of an input or of another output; the runner "
                             "returns fresh tensors only")
    if meta.num_intermediate_bases or getattr(meta, "tokens", None):
        raise FxcppSaveError("fxcpp.save: aot_autograd adds runtime work around this graph (effect tokens or "
                             "intermediate bases)")
