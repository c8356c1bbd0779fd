"""Compiler configurations the harness compares. Add one by adding a Config."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass
class Config:
    name: str
    compile: Callable[[Callable], Callable]   # fn -> compiled fn
    inductor_patches: dict = field(default_factory=dict)  # torch._inductor.config while compiling
    uses_inductor: bool = False
    takes_module: bool = False  # compile() gets a suite.CallModule, not a function (exporters need one)
    releases_params: bool = False  # compiling takes the model's parameters away (fxcpp's freeze)

    def compile_context(self):
        if not self.inductor_patches:
            return contextlib.nullcontext()
        import torch._inductor.config as ic

        return ic.patch(**self.inductor_patches)


def _eager(fn):
    return fn


def _compile(**kw):
    return lambda fn: torch.compile(fn, **kw)


def _peers():
    from . import peers  # imports onnxruntime / openvino only when a peer is asked for

    return peers


def target(cfg: Config, spec, model):
    """What cfg.compile takes for this case: the model behind a CallModule, or a function."""
    from . import suite

    if cfg.takes_module:
        return suite.CallModule(spec, model)
    return lambda *a: suite.call(spec, model, a)


CONFIGS: dict[str, Config] = {c.name: c for c in [
    Config("eager", _eager),
    Config("inductor", _compile(), uses_inductor=True),
    # Inductor's best CPU setting: constant-folds weights and enables its oneDNN fusions.
    Config("inductor_freezing", _compile(), {"freezing": True}, uses_inductor=True),
    Config("inductor_cpp_wrapper", _compile(), {"cpp_wrapper": True}, uses_inductor=True),
    Config("inductor_max_autotune", _compile(mode="max-autotune-no-cudagraphs"), uses_inductor=True),
    Config("inductor_reduce_overhead", _compile(mode="reduce-overhead"), uses_inductor=True),
    Config("fxcpp", _compile(backend="fxcpp")),
    Config("fxcpp_verify", _compile(backend="fxcpp", options={"verify": True})),
    # No packed weight copies: memory near eager's, weights read where they lie.
    Config("fxcpp_unpacked", _compile(backend="fxcpp", options={"pack_weights": False})),
    # Options.freeze: the parameters a graph holds packed are released (one copy of each weight).
    Config("fxcpp_frozen", _compile(backend="fxcpp", options={"freeze": True}), releases_params=True),
    # Dynamo + aot_autograd running eager's ops: the memory and compile time any backend starts from.
    Config("aot_eager", _compile(backend="aot_eager")),
    # Dynamo alone (its frame, guards and graph; eager's ops): the part of that floor Dynamo owns.
    Config("dynamo_eager", _compile(backend="eager")),
    # What a serving team would pick instead (benchmarks/peers.py).
    Config("onnxruntime", lambda m: _peers().OnnxRuntime(m), takes_module=True),
    Config("openvino", lambda m: _peers().OpenVino(m), takes_module=True),
    Config("openvino_compile", lambda m: _peers().openvino_torch_compile(m), takes_module=True),
]}

DEFAULTS = {
    "cpu": ["eager", "inductor", "inductor_freezing", "fxcpp"],
    "cuda": ["eager", "inductor", "inductor_reduce_overhead", "fxcpp"],
}


def get(names: list[str]) -> list[Config]:
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown configuration(s) {unknown}; known: {sorted(CONFIGS)}")
    if names[0] != "eager":
        names = ["eager"] + [n for n in names if n != "eager"]  # every speedup is against eager
    return [CONFIGS[n] for n in names]
