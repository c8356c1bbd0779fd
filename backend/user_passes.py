"""User FX passes: the one place every graph goes through before fxcpp lowers it.

    torch.compile(model, backend="fxcpp", options={
        "pre_passes": [fxcpp.passes.remove_dropout],          # the torch-level graph Dynamo hands us
        "aten_passes": [(pattern, replacement)],              # each ATen graph, before lowering
        "decompositions": {torch.ops.aten.gelu.default: my_gelu},  # merged into aot's table
    })

A pass is a callable GraphModule -> GraphModule | None (None: it edited the graph in place), or
a (pattern, replacement) pair applied with torch.fx.subgraph_rewriter.replace_pattern. After
each pass the graph must lint; a pass that raises or leaves a broken graph is reported by name
(FxcppPassError). What each pass did (nodes before and after, ops added and removed) is kept as
a PassRecord: explain() prints them, dump_dir gets the code after each.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch.fx as fx
from torch.fx.subgraph_rewriter import replace_pattern

from .compiled import dump


class FxcppPassError(RuntimeError):
    """A user pass raised, returned something that is not a GraphModule, or broke the graph."""


@dataclass
class PassRecord:
    stage: str            # "pre" (torch-level graph) or "aten" (an ATen graph)
    name: str
    nodes_before: int
    nodes_after: int
    added: dict           # op -> how many more nodes call it
    removed: dict         # op -> how many fewer

    def __str__(self) -> str:
        change = ", ".join([f"+{n} {op}" for op, n in self.added.items()] + [f"-{n} {op}" for op, n in self.removed.items()])
        return f"{self.stage} pass {self.name}: {self.nodes_before} -> {self.nodes_after} nodes" + (f" ({change})" if change else "")


def is_pass(p) -> bool:
    return callable(p) or (isinstance(p, tuple) and len(p) == 2 and all(callable(x) for x in p))


def pass_name(p) -> str:
    if isinstance(p, tuple):
        return f"replace_pattern({getattr(p[0], '__name__', 'pattern')} -> {getattr(p[1], '__name__', 'replacement')})"
    return getattr(p, "__qualname__", None) or getattr(p, "__name__", None) or type(p).__name__


def _op(n: fx.Node) -> str:
    from .explain import op_name  # (explain imports compiled too: imported here, when used)

    if n.op == "call_function":
        return op_name(n.target)
    return f"{n.op}:{n.target}"


def _ops(gm: fx.GraphModule) -> Counter:
    return Counter(_op(n) for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


def apply(gm: fx.GraphModule, passes, stage: str, opts, dump_subdir: str, records: list) -> fx.GraphModule:
    """Run `passes` on gm in order; append one PassRecord each to `records`."""
    for i, p in enumerate(passes):
        name = pass_name(p)
        before, n_before = _ops(gm), len(gm.graph.nodes)
        try:
            if isinstance(p, tuple):
                replace_pattern(gm, p[0], p[1])
                out = gm
            else:
                out = p(gm)
                out = gm if out is None else out
        except Exception as e:  # noqa: BLE001 - the user's code: named, with its error
            raise FxcppPassError(f"fxcpp: {stage} pass {name} raised {type(e).__name__}: {e}") from e
        if not isinstance(out, fx.GraphModule):
            raise FxcppPassError(f"fxcpp: {stage} pass {name} returned a {type(out).__name__}, "
                                 "not a GraphModule (or None after editing the graph in place)")
        try:
            out.graph.lint()
            out.recompile()
        except Exception as e:  # noqa: BLE001
            raise FxcppPassError(f"fxcpp: {stage} pass {name} left a broken graph: {type(e).__name__}: {e}") from e
        after = _ops(out)
        records.append(PassRecord(stage, name, n_before, len(out.graph.nodes),
                                  dict(sorted((after - before).items())), dict(sorted((before - after).items()))))
        dump(opts, dump_subdir, f"{stage}_user_pass{i}.py", f"# after {name}\n{out.code}")
        gm = out
    return gm
