"""The direct API: fxcpp.compile(gm, example_inputs) for any GraphModule (symbolic_trace
output, hand-edited graphs), through the same path as the Dynamo backend, with plans
specialized per concrete input signature (specialized.py)."""
from __future__ import annotations

import torch.fx as fx

from .options import Options
from .specialized import ShapeSpecialized


class CompiledModule:
    """What fxcpp.compile returns: call it like the GraphModule."""

    def __init__(self, gm: fx.GraphModule, example_inputs, opts: Options):
        self.compiled = ShapeSpecialized(gm, opts)
        if example_inputs is not None:  # compile now, so errors surface here
            self.compiled.compiled_for(list(example_inputs))

    def __call__(self, *args):
        return self.compiled(*args)


def compile(gm: fx.GraphModule, example_inputs=None, options=None) -> CompiledModule:  # noqa: A001
    """Compile any GraphModule (symbolic_trace output, hand-edited graphs) with fxcpp."""
    if not isinstance(gm, fx.GraphModule):
        raise TypeError(f"fxcpp.compile takes a torch.fx.GraphModule, got {type(gm).__name__}; "
                        "for a module or function use torch.compile(m, backend='fxcpp')")
    return CompiledModule(gm, example_inputs, Options.parse(options))
