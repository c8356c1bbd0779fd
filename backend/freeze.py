"""Options.freeze: a compiled inference graph releases the parameters it holds packed.

By default every oneDNN weight is kept twice: the parameter (the model's) and its packed copy
(ours), re-packed whenever the parameter changes. With `freeze=True` the process keeps one:
while Dynamo compiles an inference graph, fxcpp puts a `ReleasedTensor` in place of each
parameter or buffer that only oneDNN kernels read (a weight, a bias, a folded BatchNorm's
tensors), on every module that holds it, and hands the tensors to the plan
(runtime/executor_freeze.cpp). The graph's first call packs each one and lets go of it as
soon as its kernels run from their packs (they are frozen: runtime/onednn/fused_kernel.h), so
the first call holds one pack more than eager, not every weight twice. A tensor a kernel
still reads as it is (eager's ATen path measured faster there) stays with the plan: one copy
too. Releasing at compile time is what Inductor's `freezing_discard_parameters` does, and for
the same reason: Dynamo builds its guards after the backend returns, so they expect the
stand-in and nothing recompiles.

What the user gives up, as with Inductor's freezing:
- weight changes are no longer seen by the frozen kernels;
- eager code that reads a released tensor (the module called outside torch.compile, its
  state_dict) raises an error naming it, and so does a graph compiled later that reads one
  (a recompile for a new input shape, another backend): serve a frozen model under
  `torch.compiler.set_stance("fail_on_recompile")`, with the shapes it will see compiled
  first (`mark_dynamic`).
First calls racing from several threads each start a Dynamo compile (Dynamo looks its cache
up before taking its compile lock); those after the first trace the stand-ins (Dynamo can:
fake values under its trace) and get the first compile's function back (reuse).
A graph that is not frozen says why in the log: a training graph, one whose aot_autograd
runtime wrappers have work to do (an input mutation, an output alias), or one that does not
run wholly in C++.
"""
from __future__ import annotations

import gc
import logging
import weakref

import torch
from torch.utils import _pytree as pytree

from .compiled import FxcppCompileError


log = logging.getLogger("fxcpp")

# Tensors a frozen graph reads as they are (not from a pack): never released by another graph.
# id -> weak reference (a WeakSet would compare tensors with ==, which is elementwise).
_read_in_place: dict[int, weakref.ref] = {}


def _pin(t: torch.Tensor) -> None:
    key = id(t)
    _read_in_place[key] = weakref.ref(t, lambda _: _read_in_place.pop(key, None))


def _pinned(t: torch.Tensor) -> bool:
    r = _read_in_place.get(id(t))
    return r is not None and r() is t


class ReleasedTensor(torch.Tensor):
    """A released parameter or buffer: a tensor of its shape, strides, dtype and device with no
    storage (a wrapper subclass, no memory). Any op on it raises, naming it, except under a fake
    mode: Dynamo can trace a module holding it (a racing first call's compile, freeze.reuse)."""

    @staticmethod
    def __new__(cls, t, name: str, device=None):
        return torch.Tensor._make_wrapper_subclass(cls, t.shape, strides=t.stride(), dtype=t.dtype,
                                                   device=device or t.device, requires_grad=t.requires_grad)

    def __init__(self, t, name: str, device=None):
        # The shape on the meta device: what Dynamo fakes when it traces the stand-in.
        self._released_meta = t if t.is_meta else t.detach().to(device="meta")
        self.released_name = name

    def __tensor_flatten__(self):
        return ["_released_meta"], (self.released_name, self.device)

    @staticmethod
    def __tensor_unflatten__(inner, ctx, outer_size, outer_stride):
        name, device = ctx
        return ReleasedTensor(inner["_released_meta"], name, device)

    def __repr__(self, *, tensor_contents=None):
        return f"ReleasedTensor({self.released_name!r}, shape={tuple(self.shape)}, dtype={self.dtype})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        mode = _fake_mode(args, kwargs)
        if mode is not None:  # Dynamo's trace (fake values only, no graph recorded): its metadata
            def fake(a):
                if not isinstance(a, ReleasedTensor):
                    return a
                with mode:
                    return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)

            args, kwargs = pytree.tree_map(fake, (args, kwargs))
            return func(*args, **kwargs)
        name = next(a.released_name for a in pytree.arg_tree_leaves(*args, **kwargs)
                    if isinstance(a, ReleasedTensor))
        raise RuntimeError(
            f"{_released(name)}, so {func} cannot read it. A frozen model runs only through the graphs compiled "
            f"before the release: compile without freeze=True to call it eagerly, read its state_dict or compile "
            f"graphs for new input shapes, and serve a frozen model under "
            f"torch.compiler.set_stance('fail_on_recompile'), so that a new shape raises instead of compiling.")


def _released(name: str) -> str:
    return f"fxcpp: {name!r} was released by torch.compile(..., options={{'freeze': True}}) once its compiled graph had packed it"


def _fake_mode(args, kwargs):
    """The FakeTensorMode an op on a ReleasedTensor runs under while Dynamo traces, if any. None
    under make_fx's proxy mode (aot_autograd, export): recording the op would put a read of the
    released tensor in a graph (fxcpp's own compile never gets there: reuse)."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    stack = _get_current_dispatch_mode_stack()
    if any(isinstance(m, ProxyTorchDispatchMode) for m in stack):
        return None
    for m in stack:
        if isinstance(m, FakeTensorMode):
            return m
    for a in pytree.arg_tree_leaves(*args, **kwargs):
        if isinstance(a, FakeTensor):
            return a.fake_mode
        if isinstance(a, ReleasedTensor) and isinstance(a._released_meta, FakeTensor):
            return a._released_meta.fake_mode
    return None


def _source_name(src) -> str:
    return src.name() if callable(src.name) else src.name  # a property in torch 2.13, a method in some older ones


def _drop_tensor_guards(sources: list) -> bool:
    """Remove Dynamo's TENSOR_MATCH guards on these sources from the guards it is about to build
    (its type, device and dispatch keys would no longer match a ReleasedTensor); the frozen
    kernels check the shape and dtype themselves. False where Dynamo's guard set is not there
    to edit (then nothing may be released)."""
    ctx = torch._guards.TracingContext.try_get()
    guards = getattr(getattr(ctx, "guards_context", None), "dynamo_guards", None)
    inner = getattr(guards, "inner", None)
    if inner is None:
        return False
    names = {_source_name(s) for s in sources}

    def released(g) -> bool:
        src = g.originating_source
        fn = getattr(g.create_fn, "func", g.create_fn)  # Dynamo passes a functools.partial
        return getattr(fn, "__name__", "") == "TENSOR_MATCH" and _source_name(src) in names

    drop = [g for g in inner if released(g)]
    if len(drop) != len(names):  # not one per source: leave Dynamo's guards as they are
        return False
    for g in drop:
        inner.discard(g) if hasattr(inner, "discard") else inner.remove(g)
        by_source = getattr(guards, "source_to_guards", None)
        if by_source is not None and g in by_source.get(g.originating_source, ()):
            by_source[g.originating_source].remove(g)
    return True


def _owners(targets: dict) -> list:
    """(module, attribute, tensor) for every module whose parameters or buffers hold a target."""
    found = []
    for obj in gc.get_objects():
        if issubclass(type(obj), torch.nn.Module):  # type(): isinstance would run proxies' __class__
            for d in (obj._parameters, obj._buffers):
                for name, t in d.items():
                    if t is not None and targets.get(id(t)) is t:
                        found.append((obj, name, t))
    return found


def _why_not(gm, example_inputs, compiled: list) -> str | None:
    """Why the graph cannot be frozen: it must be an inference graph run wholly by one plan,
    called with Dynamo's arguments one for one and nothing for aot's wrappers to do."""
    from .precompile import precompiling

    if precompiling():
        return "torch's aot_compile is saving the graph (a loaded one takes its weights as inputs again)"
    if len(compiled) != 1 or compiled[0][0].kind != "inference":
        return "not an inference graph (autograd is on)"
    cag, meta = compiled[0]
    if cag.single is None:
        return "part of the graph runs outside C++"
    if meta is None or any(i.mutates_data or i.mutates_metadata for i in meta.input_info):
        return "the graph mutates an input (or aot's metadata is not available)"
    if next(gm.parameters(), None) is not None or next(gm.buffers(), None) is not None:
        return "the Dynamo graph holds parameters or buffers (aot prepends them)"
    if sum(1 for n in cag.gm.graph.nodes if n.op == "placeholder") != len(example_inputs):
        return "aot rewrote the arguments (deduplicated, synthetic base or effect tokens)"
    return None


def release(gm, example_inputs, compiled: list, fn, as_called) -> list[str]:
    """Release what the inference graph aot just compiled from Dynamo's `gm` can run without once
    packed, handing it to the graph's plan; returns the attribute names released. fn: what the
    compile returns to Dynamo (a racing compile of the same frame gets it again: reuse);
    as_called: (Dynamo's graph, the options) as the compile got them, before any pre pass."""
    why = _why_not(gm, example_inputs, compiled)
    if why is not None:
        log.info("fxcpp: Options.freeze: graph not frozen, its weights stay fresh: %s", why)
        return []
    cag = compiled[0][0]
    exe = cag.single.exe
    # A symbolic size's example is a SymInt: its hint is the concrete value (reading it as an
    # int would guard on it, specializing a dynamic dimension).
    args = [x.node.hint if isinstance(x, torch.SymInt) else x for x in example_inputs]
    if any(a is None for a in args):
        log.info("fxcpp: Options.freeze: graph %d not frozen: a symbolic input has no concrete value", cag.id)
        return []
    positions = set(exe.freeze_candidates(args))
    for i in cag.static - positions:
        if isinstance(example_inputs[i], torch.Tensor):
            _pin(example_inputs[i])
    positions = [i for i in sorted(positions) if not _pinned(example_inputs[i])]
    if not positions:
        log.info("fxcpp: Options.freeze: graph %d holds no weight it could release", cag.id)
        return []
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    sources = [getattr(placeholders[i], "_dynamo_source", None) for i in positions]
    if None in sources or not _drop_tensor_guards(sources):
        log.info("fxcpp: Options.freeze: graph %d not frozen, its parameters are kept: Dynamo's guards on them "
                 "could not be edited", cag.id)
        return []
    exe.adopt_released(args, positions)
    targets = {id(example_inputs[i]): example_inputs[i] for i in positions}
    released, stand_ins = [], {}
    for module, name, t in _owners(targets):
        # One stand-in per tensor, on every module holding it: a tensor shared by two modules
        # stays one tensor to Dynamo (one graph input), as it was when the graph was traced.
        if id(t) not in stand_ins:
            stand_ins[id(t)] = ReleasedTensor(t, f"{type(module).__name__}.{name}")
            if isinstance(t, torch.nn.Parameter):
                stand_ins[id(t)]._is_param = True  # nn.Module's setattr takes it as a Parameter
        setattr(module, name, stand_ins[id(t)])
        released.append(f"{type(module).__name__}.{name}")
    cag.released = released
    _remember(as_called[0], example_inputs, positions, stand_ins, fn, as_called[1])
    log.info("fxcpp: Options.freeze: released %d parameter/buffer tensor(s) of inference graph %d; its first call "
             "packs each and lets go of it", len(released), cag.id)
    return released


# Graphs frozen in this process, for a compile that traces their released stand-ins: first calls
# racing from several threads each start a Dynamo compile (Dynamo looks its cache up before it
# takes its compile lock), and those after the first trace the same frame again, now holding
# ReleasedTensors. Each entry: (graph key, {position: weak ref to its stand-in}, weak ref to the
# function returned to Dynamo).
_frozen: list[tuple] = []


def _graph_key(gm, example_inputs, released_positions, opts) -> tuple:
    """What must match for a compile to reuse a frozen graph: Dynamo's graph node for node (its
    placeholders name their sources), each input's metadata and the options."""
    nodes = tuple((n.op, n.name, str(n.target), str(n.args), str(n.kwargs)) for n in gm.graph.nodes)

    def meta(i, x):
        if isinstance(x, torch.Tensor):
            kind = "released" if i in released_positions else type(x).__name__
            return (kind, str(tuple(x.shape)), str(x.stride()), x.dtype, x.device, x.requires_grad)
        return (type(x).__name__, str(x))

    return nodes, tuple(meta(i, x) for i, x in enumerate(example_inputs)), opts


def _remember(gm, example_inputs, positions, stand_ins: dict, fn, opts) -> None:
    try:
        fn_ref = weakref.ref(fn)
    except TypeError:
        fn_ref = lambda: fn  # noqa: E731 - not weakly referenceable: kept as long as the process
    # The positions a module's stand-in now fills (what a racing compile finds released there).
    by_position = {i: weakref.ref(stand_ins[id(example_inputs[i])]) for i in positions if id(example_inputs[i]) in stand_ins}
    _frozen[:] = [e for e in _frozen if e[2]() is not None]
    _frozen.append((_graph_key(gm, example_inputs, set(by_position), opts), by_position, fn_ref))


def reuse(gm, example_inputs, opts):
    """For a Dynamo graph whose inputs include released tensors: the function of the frozen graph
    it repeats (a racing first call's compile), or an error naming the released tensor (a graph
    compiled after the release, which cannot read it). None when no input is released."""
    positions = {i for i, x in enumerate(example_inputs) if isinstance(x, ReleasedTensor)}
    if not positions:
        return None
    key = _graph_key(gm, example_inputs, positions, opts)
    for entry_key, by_position, fn_ref in _frozen:
        fn = fn_ref()
        if fn is None or entry_key != key or set(by_position) != positions:
            continue
        if all(by_position[i]() is example_inputs[i] for i in positions):
            log.info("fxcpp: Options.freeze: a compile of a frozen graph's frame again (first calls racing from "
                     "threads) reuses its plan")
            return fn
    name = example_inputs[min(positions)].released_name
    raise FxcppCompileError(
        f"{_released(name)}, and a graph compiled after the release reads it (a new input shape or a changed model): "
        f"serve a frozen model under torch.compiler.set_stance('fail_on_recompile'), with the shapes it will see "
        f"compiled first (mark_dynamic).")
