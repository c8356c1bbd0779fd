"""explain(): compile, run, and report which kernel ran each FX node, and how long it took."""
from __future__ import annotations

import contextlib
import functools
from collections import Counter
from dataclasses import dataclass

import torch
import torch.fx as fx

from .compiled import CompiledAtenGraph, CppPartition
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


def _shape_dtype(node: fx.Node | None) -> tuple[str, str]:
    val = node.meta.get("val") if node is not None else None
    if isinstance(val, (list, tuple)):
        val = next((v for v in val if isinstance(v, torch.Tensor)), None)
    if isinstance(val, torch.Tensor):
        return str(list(val.shape)), str(val.dtype).replace("torch.", "")
    return ("" if val is None else type(val).__name__), ""


def _cpp_rows(tag: str, gm: fx.GraphModule, part: CppPartition, label: str) -> list[NodeRow]:
    nodes = {n.name: n for n in gm.graph.nodes}
    rows, ran = [], set()
    times = part.last_times
    for i, (name, target, kind, _) in enumerate(part.steps):
        ran.add(name)
        shape, dtype = _shape_dtype(nodes.get(name))
        t = times[i] / 1e3 if times is not None and i < len(times) else None
        rows.append(NodeRow(tag, name, target, label, "", kind, shape, dtype, t))
    for n in gm.graph.nodes:  # nodes a pass removed, and getitems folded into value references
        if n.op == "call_function" and n.name not in ran:
            shape, dtype = _shape_dtype(n)
            kernel = "prim" if n.target.__name__ == "getitem" else "removed"
            rows.append(NodeRow(tag, n.name, str(n.target), label, "", kernel, shape, dtype, None))
    return rows


def _interp_rows(tag: str, gm: fx.GraphModule, times: dict | None, label="interpreter") -> list[NodeRow]:
    rows = []
    for n in gm.graph.nodes:
        if n.op == "call_function":
            shape, dtype = _shape_dtype(n)
            t = times.get(n.name) / 1e3 if times and n.name in times else None
            rows.append(NodeRow(tag, n.name, str(n.target), label, "", "interpreter", shape, dtype, t))
    return rows


def rows_of(g: CompiledAtenGraph) -> list[NodeRow]:
    tag = f"{g.id}:{g.kind}"
    if g.single is not None:
        return _cpp_rows(tag, g.gm, g.single, "cpp0")
    rows = []
    times = g.interp_times
    for n in g.parent.graph.nodes:
        if n.op == "call_module" and n.target in g.partitions:
            label = n.target.replace("fxcpp_", "")
            rows += _cpp_rows(tag, g.parent.get_submodule(n.target), g.partitions[n.target], label)
        elif n.op == "call_module":  # a partition that fell back to the Interpreter
            rows += _interp_rows(tag, g.parent.get_submodule(n.target), None)
        elif n.op == "call_function" and not (n.target.__name__ == "getitem" and n.args[0].op == "call_module"):
            rows += _interp_rows(tag, _single_node_gm(n), times)
    return rows


def _single_node_gm(n: fx.Node):
    class _One:  # duck-typed: _interp_rows only walks .graph.nodes
        class graph:
            nodes = [n]

    return _One


class Report:
    def __init__(self, graphs: list[CompiledAtenGraph]):
        self.graphs = graphs
        self.rows: list[NodeRow] = [r for g in graphs for r in rows_of(g)]
        counts = Counter(r.kernel for r in self.rows)
        self.kernel_counts = {k: counts.get(k, 0) for k in KERNELS}
        self.fallbacks = [f for g in graphs for f in g.fallbacks]

    def __str__(self) -> str:
        head = ["graph", "node", "op", "partition", "kernel", "shape", "dtype", "time_us"]
        body = [[r.graph, r.node, r.op, r.partition, r.kernel, r.shape, r.dtype,
                 "" if r.time_us is None else f"{r.time_us:.1f}"] for r in self.rows]
        widths = [max(len(str(x)) for x in col) for col in zip(head, *body)] if body else [len(h) for h in head]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        lines = [fmt.format(*head), fmt.format(*["-" * w for w in widths])] + [fmt.format(*b) for b in body]
        lines.append("")
        lines.append("kernel counts: " + ", ".join(f"{k}={v}" for k, v in self.kernel_counts.items()))
        for f in self.fallbacks:
            lines.append("fallback: " + f)
        return "\n".join(lines)

    __repr__ = __str__


@contextlib.contextmanager
def recording(into: list):
    with CompiledAtenGraph._lock:
        CompiledAtenGraph.recorders.append(into)
    try:
        yield into
    finally:
        with CompiledAtenGraph._lock:
            CompiledAtenGraph.recorders.remove(into)


def explain(model_or_fn, *inputs, options=None) -> Report:
    """Compile with fxcpp, run twice (the second run is timed), report per FX node."""
    from .compiler import backend

    opts = Options.parse(options).replace(profile=True)
    compiled = torch.compile(model_or_fn, backend=functools.partial(backend, options=opts))
    graphs: list = []
    with recording(graphs):
        compiled(*inputs)
    if not graphs:
        raise RuntimeError("fxcpp.explain: Dynamo compiled no graph (is the recompile limit reached, "
                           "or does the function contain no tensor ops?)")
    compiled(*inputs)  # warm run: the per-node times of this call are reported
    return Report(graphs)
