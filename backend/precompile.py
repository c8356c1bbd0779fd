"""Precompile: torch's aot_compile (experimental in torch 2.11-2.13) saves a Dynamo-traced
function with its guards and its backend's artifact, so a new process skips Dynamo's trace.

    def f(model, x):  # the model is an argument: its weights are inputs, never saved
        return model(x)

    torch._dynamo.config.enable_aot_compile = True  # the default from torch 2.13, off in 2.11
    compiled = torch.compile(f, fullgraph=True, backend="fxcpp",
                             options={"guard_filter_fn": fxcpp.precompile.keep_serializable_guards_unsafe})
    compiled.aot_compile(((model, x), {})).save_compiled_function(path)
    ... later, in a fresh process:
    f = torch.compiler.load_compiled_function(open(path, "rb"))
    f(model, x)

or, the same in two calls, with a damaged, foreign or missing file turned into a warning and a
correct cold compile instead of an exception at a service's start-up:

    fxcpp.precompile.save(f, (model, x), path)
    f = fxcpp.precompile.load(path, f)

torch asks the backend for a SerializableCallable. Ours stores the Dynamo graph (no tensor
values: placeholders keep only their metadata) and the Options, and, where the saved function
calls an inference graph directly (no aot_autograd runtime work: direct_call.py), that ATen
graph too. A loaded one compiles the ATen graph at its first call without running aot_autograd
(half of a warm start's time otherwise: BERT-base 0.8 of 1.6 s), or, when there is none or the
call is not one it fits (grad mode with inputs requiring grad, autocast on), runs aot_autograd
and fxcpp's compile on the Dynamo graph as a cold compile does. Weights are never stored: they
are the function's inputs. fxcpp's own part of that first call is then cheap, since the choice
cache holds its measurements.
"""
from __future__ import annotations

import os
import pickle
import threading
import warnings

import torch
import torch.fx as fx

from .compiled import dynamo_static_indices

try:
    from torch._dynamo.aot_compile_types import SerializableCallable
except ImportError:  # a torch without aot_compile: nothing here is ever used
    SerializableCallable = object

FORMAT = 2  # 2: with the inference ATen graph


def precompiling() -> bool:
    """Whether the backend is being called by aot_compile (which sets this flag only there)."""
    return bool(getattr(torch._functorch.config, "bypass_autograd_cache_key", False))


def compiling_plainly():
    """aot_compile makes aot_autograd insist on its own cache's artifact types; fxcpp's graph
    is compiled as usual inside it, and saved by PrecompiledGraph instead."""
    cfg = torch._functorch.config
    flags = ("force_autograd_cache", "strict_autograd_cache", "bundled_autograd_cache", "bypass_autograd_cache_key")
    return cfg.patch({k: False for k in flags if hasattr(cfg, k)})  # a torch without one never sets it


def keep_serializable_guards_unsafe(entries) -> list[bool]:
    """A guard_filter_fn for aot_compile: drops the guards a saved function cannot carry (on
    globals, and those matching an object's identity, such as ID_MATCH on a model's config
    object, directly or as part of another guard). Unsafe as torch's skip_guard_*_unsafe
    filters are: the caller promises to pass the same kind of module, configured the same.
    Weights are safe either way, since they are inputs of the saved graph."""
    from torch._dynamo.guards import CheckFunctionManager

    bad = set(CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES)
    return [not (g.is_global or g.guard_type in bad or any(t in bad for t in (g.derived_guard_types or ())))
            for g in entries]


def _static_shapes(gm: fx.GraphModule) -> bool:
    """Every placeholder a tensor of concrete sizes or a plain number (no symbolic size to rebind)."""
    for n in gm.graph.find_nodes(op="placeholder"):
        val = n.meta.get("val")
        if isinstance(val, torch.Tensor):
            if any(not isinstance(d, int) for d in val.shape):
                return False
        elif not isinstance(val, (int, float, bool)):
            return False
    return True


def _drop_unpicklable_meta(gm: fx.GraphModule) -> None:
    for node in gm.graph.nodes:  # what torch's own GraphModuleSerializableCallable drops
        for k in ("nn_module_stack", "source_fn_stack", "example_value"):
            node.meta.pop(k, None)


class PrecompiledGraph(SerializableCallable):
    """graph_module: Dynamo's graph. aten, aten_static: the inference ATen graph aot made from it
    and its parameter positions, when the compiled function called it directly."""

    def __init__(self, graph_module: fx.GraphModule, options, static: set, fn=None, aten=None, aten_static=()):
        self.graph_module, self.options, self.static, self.fn = graph_module, options, set(static), fn
        self.aten, self.aten_static = aten, set(aten_static)
        self.warm_path = None  # how a loaded one compiled: "saved ATen graph" or "aot_autograd"
        self._lock = threading.Lock()

    @classmethod
    def of(cls, gm: fx.GraphModule, options, fn, direct=None) -> "PrecompiledGraph":
        aten = direct.gm if direct is not None and _static_shapes(direct.gm) else None
        return cls(gm, options, dynamo_static_indices(gm), fn, aten, direct.static if aten is not None else ())

    @classmethod
    def serialize_compile_artifacts(cls, fn: "PrecompiledGraph") -> bytes:
        from torch.fx._graph_pickler import GraphPickler
        from torch.fx._graph_pickler import Options as PicklerOptions

        gm = fn.graph_module
        _drop_unpicklable_meta(gm)
        aten = None
        if fn.aten is not None:
            _drop_unpicklable_meta(fn.aten)
            aten = GraphPickler.dumps(fn.aten, PicklerOptions(ops_filter=None))
        return pickle.dumps({"format": FORMAT, "graph_module": GraphPickler.dumps(gm, PicklerOptions(ops_filter=None)),
                             "options": fn.options, "static": sorted(fn.static),
                             "aten": aten, "aten_static": sorted(fn.aten_static)})

    @classmethod
    def deserialize_compile_artifacts(cls, data: bytes) -> "PrecompiledGraph":
        from torch._subclasses import FakeTensorMode
        from torch.fx._graph_pickler import GraphPickler
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        state = pickle.loads(data)
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise RuntimeError("fxcpp: this precompiled artifact was written by another fxcpp version")
        fake_mode = FakeTensorMode(shape_env=ShapeEnv())
        gm = GraphPickler.loads(state["graph_module"], fake_mode)
        gm.recompile()
        # Dynamo's placeholder sources do not survive pickling; without this mark aot takes the
        # graph as not Dynamo's, and the static inputs come from `static` instead.
        gm.meta.pop("dynamo_compile_id", None)
        aten = None
        if state["aten"] is not None:
            aten = GraphPickler.loads(state["aten"], fake_mode)
            aten.recompile()
        return cls(gm, state["options"], set(state["static"]), aten=aten, aten_static=state["aten_static"])

    def __call__(self, *args):
        fn = self.fn
        if fn is None:
            with self._lock:
                if self.fn is None:
                    self.fn = self._from_saved_aten(args)
                    self.warm_path = "saved ATen graph" if self.fn is not None else "aot_autograd"
                    if self.fn is None:
                        from .compiler import compile_torch_graph

                        gm = self.graph_module
                        self.fn = compile_torch_graph(gm, list(args), self.options, gm.forward, self.static)
                fn = self.fn
        return fn(*args)

    def _from_saved_aten(self, args):
        """The saved inference ATen graph compiled and called directly, or None where this call
        needs what aot_autograd would do (autograd: grad mode with inputs requiring grad;
        autocast) or does not fit the graph's inputs (the saved guards should have said so)."""
        if self.aten is None or torch._C._is_any_autocast_enabled():
            return None
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return None
        placeholders = list(self.aten.graph.find_nodes(op="placeholder"))
        if len(placeholders) != len(args):
            return None
        for a, p in zip(args, placeholders):
            val = p.meta.get("val")
            if isinstance(a, torch.Tensor) != isinstance(val, torch.Tensor):
                return None
            if isinstance(a, torch.Tensor) and (a.shape != val.shape or a.dtype != val.dtype or a.device != val.device):
                return None
        from .compiled import CompiledAtenGraph
        from .direct_call import call_of

        try:
            cag = CompiledAtenGraph(self.aten, self.options, "inference", "precompiled", self.aten_static)
        except Exception as e:  # noqa: BLE001 - the aot path compiles it as a cold start would
            warnings.warn(f"fxcpp: the precompiled ATen graph did not compile ({type(e).__name__}: {str(e)[:200]}); "
                          "tracing it again with aot_autograd")
            return None
        return call_of(cag, self.options)


def save(fn, args: tuple, path, kwargs: dict | None = None, options: dict | None = None) -> None:
    """aot_compile `fn` with fxcpp on example (args, kwargs) and write it to `path`: the recipe in
    this module's docstring in one call (guards kept to what a saved function can carry)."""
    with torch._dynamo.config.patch(enable_aot_compile=True):  # off by default in torch 2.11
        compiled = _cold(fn, options)
        compiled.aot_compile((tuple(args), dict(kwargs or {}))).save_compiled_function(os.fspath(path))


def load(path, fn=None, options: dict | None = None):
    """The function saved at `path`. If the file is missing, truncated, corrupt, written by another
    torch, fxcpp or host, or not fxcpp's, or saved from another function than `fn`: with `fn`
    given, a warning and torch.compile(fn, backend="fxcpp") (a cold compile, correct); without
    it, the error."""
    try:
        with open(path, "rb") as f:
            loaded = torch.compiler.load_compiled_function(f)
        art = loaded._artifacts
        if not isinstance(art.compiled_fn, PrecompiledGraph):
            raise RuntimeError(f"not compiled by fxcpp (backend {art.backend_name!r})")
        code = getattr(fn, "__code__", None)
        if code is not None and _code_key(art.original_code) != _code_key(code):
            raise RuntimeError(f"saved from another version of {art.original_code.co_name!r} (its code differs)")
        return loaded if fn is None else _FallsBackOnGuardFailure(loaded, fn, options, path)
    except Exception as e:  # noqa: BLE001 - any damage: never trusted, compiled afresh
        if fn is None:
            raise
        warnings.warn(f"fxcpp: precompiled function {os.fspath(path)!r} not used ({type(e).__name__}: "
                      f"{str(e)[:200]}); compiling {getattr(fn, '__qualname__', fn)!r} from scratch")
        return _cold(fn, options)


def _cold(fn, options):
    """torch.compile(fn) with fxcpp as save() compiles it: full graph, guards a saved function can carry."""
    opts = {"guard_filter_fn": keep_serializable_guards_unsafe, **(options or {})}
    return torch.compile(fn, fullgraph=True, backend="fxcpp", options=opts)


def _code_key(code) -> tuple:
    """What makes two functions the same program: bytecode, names, and constants (nested code
    objects compared the same way; file names and line numbers left out, so a service may ship
    the file to another path)."""
    consts = tuple(_code_key(c) if hasattr(c, "co_code") else (type(c).__name__, repr(c)) for c in code.co_consts)
    return code.co_code, code.co_names, code.co_varnames, code.co_freevars, consts


class _FallsBackOnGuardFailure:
    """A loaded function whose guards reject a call (another kind of model, other shapes than it
    was saved for) warns once and compiles `fn` afresh instead of raising."""

    def __init__(self, loaded, fn, options, path):
        self.loaded, self.fn, self.options, self.path = loaded, fn, options, path
        self._cold = None

    def __call__(self, *args, **kwargs):
        if self._cold is None:
            try:
                return self.loaded(*args, **kwargs)
            except RuntimeError as e:
                if "GuardManager check failed" not in str(e):
                    raise
                warnings.warn(f"fxcpp: precompiled function {os.fspath(self.path)!r} does not fit this call "
                              f"({str(e)[:200]}); compiling {getattr(self.fn, '__qualname__', self.fn)!r} from scratch")
                self._cold = _cold(self.fn, self.options)
        return self._cold(*args, **kwargs)
