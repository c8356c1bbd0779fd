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
  (a recompile for a new input shape). After such a failed compile Dynamo runs the module
  eagerly from then on, which cannot work either: serve a frozen model under
  `torch.compiler.set_stance("fail_on_recompile")` (a new shape then raises and the frozen
  graph keeps serving), with the shapes it will see compiled first (`mark_dynamic`), and
  compile it with `fullgraph=True`: first calls racing from several threads each start a
  compile, and those after the first trace the released weights. Without fullgraph they
  graph-break and leave cache entries that run the module eagerly, so every later call
  raises; with it they raise once and leave nothing.
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
    """A released parameter or buffer: its shape, dtype and strides on the meta device (no
    memory); any op on it raises, naming it."""

    @staticmethod
    def __new__(cls, t, name: str):
        return super().__new__(cls, t.to(device="meta"))

    def __init__(self, t, name: str):
        self.released_name = name

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        name = next(a.released_name for a in pytree.arg_tree_leaves(*args, **(kwargs or {}))
                    if isinstance(a, ReleasedTensor))
        raise RuntimeError(
            f"fxcpp: {name!r} was released by torch.compile(..., options={{'freeze': True}}) once its compiled "
            f"graph had packed it, so {func} cannot read it. A frozen model runs only through the graphs compiled "
            f"before the release: compile without freeze=True to call it eagerly, read its state_dict or compile "
            f"graphs for new input shapes, and serve a frozen model under "
            f"torch.compiler.set_stance('fail_on_recompile'), so that a new shape raises instead of compiling.")


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


def release(gm, example_inputs, compiled: list) -> list[str]:
    """Release what the inference graph aot just compiled from Dynamo's `gm` can run without once
    packed, handing it to the graph's plan; returns the attribute names released."""
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
    released = []
    for module, name, t in _owners(targets):
        stand_in = ReleasedTensor(t, f"{type(module).__name__}.{name}")
        if isinstance(t, torch.nn.Parameter):
            stand_in._is_param = True  # nn.Module's setattr takes it as a Parameter
        stand_in.requires_grad_(t.requires_grad)
        setattr(module, name, stand_in)
        released.append(f"{type(module).__name__}.{name}")
    cag.released = released
    log.info("fxcpp: Options.freeze: released %d parameter/buffer tensor(s) of inference graph %d; its first call "
             "packs each and lets go of it", len(released), cag.id)
    return released
