"""The compiled objects aot_autograd calls: one per forward, backward or inference graph.

`CompiledAtenGraph` holds the ATen graph's C++ partitions (`CppPartition`, each an
`fxcpp._C.Executable`) and, when some nodes cannot run in C++, the parent graph
that runs in a torch.fx.Interpreter. When the whole graph is one C++ partition,
a call goes straight to C++ (`_boxed_call`: aot passes the args list, which we
clear so inputs can be freed early).
"""
from __future__ import annotations

import itertools
import logging
import os
import threading
import time
import warnings

import torch
import torch._guards
import torch.fx as fx

from . import _C, choice_cache, lowering, partition
from .options import Options

log = logging.getLogger("fxcpp")


class FxcppCompileError(RuntimeError):
    """A graph (partition) could not be compiled and Options.fallback is "error"."""


class EagerFallback(Exception):
    """Options.fallback == "eager": the caller runs the whole Dynamo graph eagerly."""


def dump(opts: Options, subdir: str, name: str, text: str) -> None:
    if not opts.dump_dir:
        return
    d = os.path.join(opts.dump_dir, subdir)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "w") as f:
        f.write(text)


class CppPartition(torch.nn.Module):
    """One C++ partition: lowering → pass pipeline → Executable."""

    def __init__(self, gm: fx.GraphModule, opts: Options, label: str, dump_subdir: str, static=frozenset()):
        super().__init__()
        self.label = label
        self.opts = opts
        self.fx = gm  # the ATen partition it was built from (explain, verify)
        out = gm.graph.output_node().args[0]
        self.single_output = not isinstance(out, (tuple, list))
        t0 = time.perf_counter()
        cgraph, self.env = lowering.lower_graph(gm, static=static)
        t1 = time.perf_counter()
        ran = _C.run_pipeline(cgraph, list(opts.disable_passes), opts.verify_each_pass, bool(opts.dump_dir))
        t2 = time.perf_counter()
        for i, (name, changed, text) in enumerate(ran):
            dump(opts, dump_subdir, f"{label}_pass{i}_{name}.txt", f"# changed: {changed}\n{text}")
        self.choices = choice_cache.open_for(gm, opts, label, static)
        self.exe = _C.Executable(cgraph, opts.pack_weights, self.choices)
        t3 = time.perf_counter()
        self.passes = [(name, changed) for name, changed, _ in ran]
        dump(opts, dump_subdir, f"{label}_plan.txt", str(self.exe))
        self.steps = self.exe.steps()
        self.last_times = None  # ns per step of the last profiled call
        # Where compile time goes: FX -> C++ graph (Python), the pass pipeline (C++), the plan.
        log.debug("fxcpp: %s: passes %s; %d steps; lowering %.1f ms, passes %.1f ms, plan %.1f ms", label, self.passes,
                  len(self.steps), (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3)

    def run_list(self, args) -> list:
        if self.opts.profile:
            outs, self.last_times = self.exe.run_profiled(args)
            return outs
        return self.exe.run(args)

    def forward(self, *args):
        outs = self.run_list(args)
        return outs[0] if self.single_output else tuple(outs)


def interpret(owner, gm: fx.GraphModule, args):
    """Run gm in the Interpreter; with Options.profile, keep per-node times on owner.interp_times."""
    times = {} if owner.opts.profile else None
    out = _TimingInterpreter(gm, times).run(*args)
    owner.interp_times = times
    return out


class _TimingInterpreter(fx.Interpreter):
    """Runs the parent graph, timing the nodes that run in the Interpreter."""

    def __init__(self, gm, times: dict | None):
        super().__init__(gm)
        self.times = times

    def run_node(self, n):
        if self.times is None:
            return super().run_node(n)
        t0 = time.perf_counter_ns()
        out = super().run_node(n)
        self.times[n.name] = time.perf_counter_ns() - t0
        return out


_graph_ids = itertools.count()
_recorders: list = []  # explain() collects the graphs compiled while it runs
_recorders_lock = threading.Lock()


def record(graph) -> None:
    with _recorders_lock:
        for r in _recorders:
            r.append(graph)


class InterpretedGraph:
    """A torch-level graph whose torch.fx.wrap calls run in the Interpreter; its
    traceable parts are call_module nodes compiled through aot (recorded on their own)."""

    kind = "torch"

    def __init__(self, parent: fx.GraphModule, opts: Options):
        self.parent = parent
        self.opts = opts
        self.id = next(_graph_ids)
        self.fallbacks: list[str] = []
        self.interp_times: dict | None = None
        record(self)

    def __call__(self, *args):
        return interpret(self, self.parent, args)


def dynamo_static_indices(gm: fx.GraphModule) -> set:
    """The placeholder positions Dynamo marked as parameters or buffers (in a torch-level graph)."""
    return {i for i, n in enumerate(gm.graph.find_nodes(op="placeholder"))
            if n.meta.get("tensor_dict", {}).get("_dynamo_static_input_type")}


def static_inputs(gm: fx.GraphModule, kind: str, hint: set | None, aot_meta=None) -> set:
    """The placeholder positions holding parameters and buffers (the same tensor every call).

    Under Dynamo, aot records them (fw_metadata.static_input_indices, what Inductor reads
    too). Outside it, the caller's hint: the direct API's module parameters (aot lifts them
    first), or a torch.fx.wrap piece's inputs that Dynamo marked static. A backward graph's
    inputs are saved tensors and gradients: new each call. Unknown: none."""
    if kind == "backward":
        return set()
    n = sum(1 for p in gm.graph.nodes if p.op == "placeholder")
    indices = getattr(aot_meta, "static_input_indices", None)
    if indices is not None and all(0 <= i < n for i in indices):
        return set(indices)
    return {i for i in (hint or ()) if i < n}


def _copy_graph_module(gm: fx.GraphModule) -> fx.GraphModule:
    """A new GraphModule over a copy of gm's graph (node metas shared, attributes taken from gm)."""
    g = fx.Graph()
    out, out_node = g.graph_copy(gm.graph, {}, return_output_node=True)
    g.output(out).meta = dict(out_node.meta)
    return fx.GraphModule(gm, g)


class CompiledAtenGraph:
    """What fxcpp returns to aot_autograd for one ATen graph (forward, backward or inference)."""

    _boxed_call = True

    def __init__(self, gm: fx.GraphModule, opts: Options, kind: str, dump_subdir: str, static_hint: set | None = None,
                 pass_records: list | None = None):
        # An instance attribute too: torch._dynamo.disable's functools.wraps copies only __dict__.
        self._boxed_call = True
        self.gm = gm  # the ATen graph (kept for verify mode and for the Interpreter fallback)
        self.opts = opts
        self.kind = kind
        self.id = next(_graph_ids)
        self.fallbacks: list[str] = []  # why a partition runs in the Interpreter
        self.single: CppPartition | None = None
        self.parent: fx.GraphModule | None = None
        self.partitions: dict[str, CppPartition] = {}
        self.interp_times: dict | None = None
        self.capture: list | None = None
        self.released: list[str] = []  # what Options.freeze released (backend/freeze.py)
        # aot's ViewAndMutationMeta for this graph (input mutations, output aliases): fxcpp.save reads it.
        self.aot_meta = getattr(torch._guards.TracingContext.try_get(), "fw_metadata", None)
        self.user_passes = list(pass_records or ())  # user_passes.PassRecord: what Options' passes did
        # verify's eager reference: a split rewrites self.gm in place (its partitions become C++
        # submodules), so verify mode keeps the graph as traced in a copy.
        self.reference_gm = _copy_graph_module(gm) if opts.verify else None
        dump(opts, dump_subdir, f"{kind}_aten.py", gm.code)
        self.static = static_inputs(gm, kind, static_hint, self.aot_meta)
        t0 = time.perf_counter()
        if partition.all_supported(gm):
            try:
                self.single = CppPartition(gm, opts, f"{kind}_cpp0", dump_subdir, self.static)
            except Exception as e:  # noqa: BLE001 - policy decides: interpreter, eager or error
                bad = self._node_to_isolate(e, gm, frozenset())
                if bad is None:
                    self._fallback(e, "the whole graph")
                    self.parent = gm
                else:
                    self._fallback(e, f"node '{bad}'")
                    self._build_split(dump_subdir, frozenset({bad}), unsplit=gm)
        else:
            self._build_split(dump_subdir)
        log.debug("fxcpp: compiled the %s graph (%d nodes) in %.1f ms", kind, len(gm.graph.nodes),
                  (time.perf_counter() - t0) * 1e3)
        record(self)

    def cpp_partitions(self) -> list:
        """Its C++ partitions (one when the whole graph runs in C++)."""
        return [self.single] if self.single is not None else list(self.partitions.values())

    def _build_split(self, dump_subdir, isolated: frozenset = frozenset(), unsplit: fx.GraphModule | None = None):
        """C++ partitions around the nodes the core cannot take and the `isolated` ones; with
        `unsplit` (the traced graph, kept whole), a failing node may be isolated too."""
        if unsplit is not None:  # the split rewrites the graph it is given: each try splits a fresh copy
            self.gm = _copy_graph_module(unsplit)
        # Before the split rewrites it: the position of each of the graph's placeholders.
        position = {n.name: i for i, n in enumerate(n for n in self.gm.graph.nodes if n.op == "placeholder")}
        parent, names = partition.split_aten(self.gm, isolated)
        self.partitions = {}
        for i, name in enumerate(names):
            sub = parent.get_submodule(name)
            call = next(n for n in parent.graph.nodes if n.op == "call_module" and n.target == name)
            # A partition input is static when it is one of the graph's static inputs.
            static = {k for k, a in enumerate(call.args)
                      if isinstance(a, fx.Node) and a.op == "placeholder" and position.get(a.name) in self.static}
            try:
                cpp = CppPartition(sub, self.opts, f"{self.kind}_cpp{i}", dump_subdir, static)
            except Exception as e:  # noqa: BLE001
                bad = self._node_to_isolate(e, unsplit, isolated)
                if bad is not None:  # split again, that node alone in the Interpreter
                    self._fallback(e, f"node '{bad}'")
                    return self._build_split(dump_subdir, isolated | {bad}, unsplit)
                self._fallback(e, f"partition {name}")
                continue
            self.partitions[name] = cpp
            setattr(parent, name, cpp)
        self.parent = parent
        interp = [n.format_node() for n in parent.graph.nodes if n.op == "call_function"]
        if interp:
            log.info("fxcpp: %d node(s) of the %s graph run in the Interpreter: %s", len(interp), self.kind, "; ".join(interp))

    # A graph the core takes whole but fails to compile at one FX node (a shape rule or the
    # lowering disagreeing with the traced graph) runs that node in the Interpreter and the rest
    # in C++, up to this many nodes per graph; past it, with no node named, or in a graph split
    # already for nodes the core does not take, the partition falls back as a whole.
    MAX_ISOLATED = 8

    def _node_to_isolate(self, err: Exception, unsplit: fx.GraphModule | None, isolated: frozenset) -> str | None:
        if unsplit is None or self.opts.fallback != "interpreter" or len(isolated) >= self.MAX_ISOLATED:
            return None
        name = getattr(err, "node_name", None)
        if not name or name in isolated:
            return None
        node = next((n for n in unsplit.graph.nodes if n.name == name), None)
        return name if node is not None and node.op == "call_function" else None

    def _fallback(self, err: Exception, what: str):
        if self.opts.fallback == "error":
            raise FxcppCompileError(f"fxcpp could not compile {what} of the {self.kind} graph: {err}") from err
        if self.opts.fallback == "eager" and self.kind != "backward":
            raise EagerFallback(str(err)) from err
        msg = f"fxcpp: {what} of the {self.kind} graph runs in the Interpreter: {err}"
        warnings.warn(msg, stacklevel=2)
        log.warning(msg)
        self.fallbacks.append(msg)

    def __call__(self, args: list):
        if self.capture is not None:  # fxcpp.save takes the weights from a call's arguments
            self.capture.append(list(args))
        if self.opts.verify:
            from .verify import verified_call

            outs = verified_call(self, args)
            args.clear()
            return outs
        return self.run(args)

    def run(self, args: list):
        if self.single is not None:
            outs = self.single.run_list(args)
        else:
            outs = interpret(self, self.parent, args)
        args.clear()
        return outs

    def run_reference(self, args):
        """The ATen graph run eagerly, node by node (verify mode's reference)."""
        return fx.Interpreter(self.reference_gm if self.reference_gm is not None else self.gm).run(*args)
