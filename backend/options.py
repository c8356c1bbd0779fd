"""One Options dataclass, parsed from torch.compile(..., options={...})."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

FALLBACKS = ("interpreter", "eager", "error")


@dataclass
class Options:
    # What a partition that fails to compile does: run in the Interpreter (with a
    # warning naming the node), run the whole graph eagerly, or raise.
    fallback: str = "interpreter"
    # Run eager alongside every compiled call; raise naming the first diverging node.
    verify: bool = False
    # Pass names to switch off (fxcpp._C.pass_names() lists them).
    disable_passes: tuple = ()
    # Write the FX code, the C++ graph after each pass, and the plan here.
    dump_dir: str | None = None
    # Run the C++ verifier after every pass (cheap; on by default).
    verify_each_pass: bool = True
    # Record per-node times of the last call (explain() turns it on).
    profile: bool = False
    # Plans kept per compiled graph in fxcpp.compile, one per concrete input signature.
    plan_cache_size: int = 8
    # Keep a packed copy of each parameter a oneDNN kernel reads (conv, linear), laid out for
    # it: fastest, but the process holds those weights twice. False: weights are read where
    # they lie (a linear) or reordered at every call into a per-thread buffer (a conv), so
    # memory stays near eager's; 6-17% slower on the transformers, 8-143% on convs at batch 1
    # (the per-call reorder; README, "Serving").
    pack_weights: bool = True
    # Inference graphs release the parameters and buffers they hold packed (backend/freeze.py,
    # like Inductor's freezing_discard_parameters): the process keeps one copy of each weight,
    # not two, but weight changes are no longer seen and eager code reading a released tensor
    # raises. The graph runs once while it compiles (the packing and first-call choices).
    freeze: bool = False
    # Keep each oneDNN kernel's first-call choice (its path or eager's, timed) in a file, so a
    # new process reuses it instead of timing again (backend/choice_cache.py; README, "Serving").
    cache: bool = True
    # Where (None: $FXCPP_CACHE_DIR, else "fxcpp" in torch's cache directory).
    cache_dir: str | None = None
    # User FX passes (backend/user_passes.py): each a callable GraphModule -> GraphModule | None,
    # or a (pattern, replacement) pair for torch.fx.subgraph_rewriter.replace_pattern.
    # pre_passes run on the torch-level graph Dynamo hands us, aten_passes on each ATen graph
    # before lowering; decompositions is a table {OpOverload: fn} merged into aot's.
    pre_passes: tuple = ()
    aten_passes: tuple = ()
    decompositions: dict | None = None

    def __post_init__(self):
        if self.fallback not in FALLBACKS:
            raise ValueError(f"fxcpp: Options.fallback must be one of {FALLBACKS}, got {self.fallback!r}")
        if isinstance(self.disable_passes, str):
            self.disable_passes = (self.disable_passes,)
        self.disable_passes = tuple(self.disable_passes)
        from . import _C

        unknown = [p for p in self.disable_passes if p not in _C.pass_names()]
        if unknown:
            raise ValueError(f"fxcpp: unknown pass name(s) {unknown}; passes are: {', '.join(_C.pass_names())}")
        from .user_passes import is_pass

        for field in ("pre_passes", "aten_passes"):  # a list of passes, or one callable
            passes = getattr(self, field)
            passes = (passes,) if callable(passes) else tuple(passes)
            bad = [p for p in passes if not is_pass(p)]
            if bad:
                raise ValueError(f"fxcpp: Options.{field} takes callables GraphModule -> GraphModule | None or "
                                 f"(pattern, replacement) pairs; got {bad!r}")
            setattr(self, field, passes)
        if self.decompositions is not None:
            import torch

            if not (isinstance(self.decompositions, dict) and all(callable(v) for v in self.decompositions.values())):
                raise ValueError("fxcpp: Options.decompositions must be a dict {OpOverload: callable}")
            packets = [k for k in self.decompositions if not isinstance(k, torch._ops.OpOverload)]
            if packets:  # aot looks ops up by overload: a packet key would be silently ignored
                raise ValueError(f"fxcpp: Options.decompositions keys must be OpOverloads (aten.gelu.default, "
                                 f"not aten.gelu); got {packets}")
        if self.freeze and not self.pack_weights:
            raise ValueError("fxcpp: Options.freeze releases the parameters fxcpp packs; it needs pack_weights=True")
        if self.freeze and self.verify:
            raise ValueError("fxcpp: Options.verify runs eager beside every call, which reads the parameters "
                             "Options.freeze releases; use one or the other")
        if self.plan_cache_size < 1:
            raise ValueError("fxcpp: Options.plan_cache_size must be at least 1")

    @classmethod
    def parse(cls, options) -> "Options":
        """None, an Options, or a dict whose keys are the field names."""
        if options is None:
            return cls()
        if isinstance(options, cls):
            return options
        if not isinstance(options, dict):
            raise TypeError(f"fxcpp: options must be a dict or fxcpp.Options, got {type(options).__name__}")
        valid = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(k for k in options if k not in valid)
        if unknown:
            raise ValueError(f"fxcpp: unknown option(s) {unknown}; valid options are: {', '.join(valid)}")
        return cls(**options)

    def replace(self, **changes) -> "Options":
        return dataclasses.replace(self, **changes)
