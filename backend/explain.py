"""explain(): compile, run, and report which kernel ran each FX node, and how long it took."""
from __future__ import annotations

import contextlib
import dataclasses
import operator
from collections import Counter
from dataclasses import dataclass

import torch
import torch.fx as fx

from . import lowering
from . import compiled as _compiled
from .compiled import CppPartition, InterpretedGraph
from .options import Options

KERNELS = ("onednn", "cpu_fused", "cuda", "aten", "interpreter")


@dataclass
class NodeRow:
    graph: str       # "0:inference", "1:forward", ...
    node: str        # the ATen-level FX node name
    op: str          # its target
    partition: str   # "cpp0", "cpp1", ... or "interpreter"
    group: str       # the fused group (a fused node's name), "" when not fused
    kernel: str      # one of KERNELS, "prim" (size arithmetic in C++), or "removed" (by a pass)
    shape: str
    dtype: str
    time_us: float | None
    impl: str = ""   # the implementation the kernel ran, and why (oneDNN nodes: "onednn brg:avx512_core, weight packed once")
    # What ran at the calls so far: `kernel`, or "aten" where that kernel kept eager's ATen ops
    # (measured faster, a refused primitive), or "<kernel>+aten" where it ran both.
    ran: str = ""


def _shape_dtype(node: fx.Node | None) -> tuple[str, str]:
    val = node.meta.get("val") if node is not None else None
    if isinstance(val, (list, tuple)):
        val = next((v for v in val if isinstance(v, torch.Tensor)), None)
    if isinstance(val, torch.Tensor):
        return str(list(val.shape)), str(val.dtype).replace("torch.", "")
    return ("" if val is None else type(val).__name__), ""


def op_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return lowering.op_target(target)
    return f"{getattr(target, '__module__', '') or ''}.{getattr(target, '__name__', str(target))}".lstrip(".")


def _cpp_rows(tag: str, gm: fx.GraphModule, part: CppPartition, label: str) -> list[NodeRow]:
    """One row per call_function node of the partition, in graph order. Every FX node a
    fused step replaced gets that step's kernel and its name as `group`; the step's time
    goes on the step's own row (the anchor)."""
    step_of = {}
    for i, (name, _, kind, _, covers) in enumerate(part.steps):
        for c in covers:
            step_of[c] = (i, kind, name if len(covers) > 1 else "")
    times = part.last_times
    notes = part.exe.step_notes()
    ran = part.exe.step_ran()
    rows = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        shape, dtype = _shape_dtype(n)
        impl = ""
        if n.name in step_of:
            i, kind, group = step_of[n.name]
            own = part.steps[i][0] == n.name
            t = times[i] / 1e3 if own and times is not None and i < len(times) else None
            impl = notes[i] if own else ""
            step_ran = ran[i]  # every FX node of a fused step ran as its step did
        else:  # getitem on a tuple output is a value reference in C++; other absent nodes a pass removed
            kind, t, group = ("prim" if n.target is operator.getitem else "removed"), None, ""
            step_ran = kind
        rows.append(NodeRow(tag, n.name, op_name(n.target), label, group, kind, shape, dtype, t, impl, step_ran))
    return rows


def _interp_rows(tag: str, nodes, times: dict | None, label="interpreter") -> list[NodeRow]:
    rows = []
    for n in nodes:
        if n.op == "call_function":
            shape, dtype = _shape_dtype(n)
            t = times.get(n.name) / 1e3 if times and n.name in times else None
            rows.append(NodeRow(tag, n.name, op_name(n.target), label, "", "interpreter", shape, dtype, t, ran="interpreter"))
    return rows


def rows_of(g) -> list[NodeRow]:
    tag = f"{g.id}:{g.kind}"
    if isinstance(g, InterpretedGraph):  # only its torch.fx.wrap calls; compiled parts report themselves
        return _interp_rows(tag, [n for n in g.parent.graph.nodes if n.target is not operator.getitem], g.interp_times)
    if g.single is not None:
        return _cpp_rows(tag, g.gm, g.single, "cpp0")
    rows = []
    times = g.interp_times
    for n in g.parent.graph.nodes:
        if n.op == "call_module" and n.target in g.partitions:
            label = n.target.replace("fxcpp_", "")
            rows += _cpp_rows(tag, g.partitions[n.target].fx, g.partitions[n.target], label)
        elif n.op == "call_module":  # a partition that fell back to the Interpreter
            rows += _interp_rows(tag, g.parent.get_submodule(n.target).graph.nodes, None)
        elif n.op == "call_function" and not (n.target is operator.getitem and n.args[0].op == "call_module"):
            rows += _interp_rows(tag, [n], times)
    return rows


def _peak_bytes(g) -> int | None:
    peaks = [p.exe.planned_peak_bytes() for p in g.cpp_partitions()]
    return None if any(b < 0 for b in peaks) else sum(peaks)  # partitions run one after another


class Report:
    def __init__(self, graphs: list):
        self.graphs = graphs
        self.rows: list[NodeRow] = [r for g in graphs for r in rows_of(g)]
        counts = Counter(r.kernel for r in self.rows)
        self.kernel_counts = {k: counts.get(k, 0) for k in KERNELS}
        # The same over what ran (NodeRow.ran): a oneDNN node that kept eager's ATen ops counts
        # as aten here; one that ran both counts under each.
        ran = Counter(k for r in self.rows for k in r.ran.split("+"))
        self.ran_counts = {k: ran.get(k, 0) for k in KERNELS}
        self.fallbacks = [f for g in graphs for f in g.fallbacks]
        # Options.freeze: the parameters and buffers each graph released (backend/freeze.py).
        self.released = {f"{g.id}:{g.kind}": list(g.released) for g in graphs if getattr(g, "released", None)}
        # What Options.pre_passes / aten_passes did to each graph (user_passes.PassRecord).
        self.user_passes = [(f"{g.id}:{g.kind}", r) for g in graphs for r in getattr(g, "user_passes", ())]
        # Per graph: the peak bytes of intermediates its C++ plans hold during one call
        # (inputs and parameters not counted; None when a size is symbolic).
        self.planned_peak_bytes = {f"{g.id}:{g.kind}": _peak_bytes(g) for g in graphs
                                   if not isinstance(g, InterpretedGraph)}

    def __str__(self) -> str:
        head = ["graph", "node", "op", "partition", "group", "kernel", "shape", "dtype", "time_us", "impl"]
        body = [[r.graph, r.node, r.op, r.partition, r.group,
                 r.kernel if r.ran in ("", r.kernel) else f"{r.kernel}, ran {r.ran}", r.shape, r.dtype,
                 "" if r.time_us is None else f"{r.time_us:.1f}", r.impl] for r in self.rows]
        widths = [max(len(str(x)) for x in col) for col in zip(head, *body)] if body else [len(h) for h in head]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        lines = [fmt.format(*head), fmt.format(*["-" * w for w in widths])] + [fmt.format(*b) for b in body]
        lines.append("")
        lines.append("kernel counts: " + ", ".join(f"{k}={v}" for k, v in self.kernel_counts.items()))
        if self.ran_counts != self.kernel_counts:
            lines.append("ran: " + ", ".join(f"{k}={v}" for k, v in self.ran_counts.items()) +
                         " (a kernel that kept eager's ATen ops counts as aten; its impl says why)")
        for tag, b in self.planned_peak_bytes.items():
            lines.append(f"planned peak {tag}: " + ("unknown (symbolic sizes)" if b is None else f"{b / 2**20:.2f} MiB"))
        for tag, r in self.user_passes:
            lines.append(f"user pass {tag}: {r}")
        for tag, names in self.released.items():
            lines.append(f"released {tag} (Options.freeze): {len(names)} tensors: " + ", ".join(names))
        for f in self.fallbacks:
            lines.append("fallback: " + f)
        return "\n".join(lines)

    __repr__ = __str__


@contextlib.contextmanager
def recording(into: list):
    """Collect every graph fxcpp compiles inside the block (for Report(into))."""
    with _compiled._recorders_lock:
        _compiled._recorders.append(into)
    try:
        yield into
    finally:
        with _compiled._recorders_lock:
            _compiled._recorders.remove(into)


def explain(model_or_fn, *inputs, options=None) -> Report:
    """Compile with fxcpp, run twice (the second run is timed), report per FX node."""
    opts = Options.parse(options).replace(profile=True)
    # By name, not as a callable: Dynamo keeps, past torch._dynamo.reset(), weak references to
    # the parameters of a graph compiled by a callable backend (aot_eager's too), and
    # torch.utils.swap_tensors then refuses them.
    compiled = torch.compile(model_or_fn, backend="fxcpp",
                             options={f.name: getattr(opts, f.name) for f in dataclasses.fields(opts)})
    graphs: list = []
    with recording(graphs):
        compiled(*inputs)
    if not graphs:
        raise RuntimeError("fxcpp.explain: Dynamo compiled no graph (is the recompile limit reached, "
                           "or does the function contain no tensor ops?)")
    compiled(*inputs)  # warm run: the per-node times of this call are reported
    return Report(graphs)
