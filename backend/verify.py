"""verify mode: every compiled call also runs the ATen graph eagerly and compares.

On a mismatch beyond the harness tolerances (fp32 1e-3, bf16/fp16 1e-2, as
torch._dynamo.utils.same applies them) it re-runs both node by node and raises
naming the first node whose value differs.
"""
from __future__ import annotations

import warnings

import torch
import torch.fx as fx
from torch._dynamo.utils import same


class FxcppVerifyError(AssertionError):
    """A compiled result differs from eager; the message names the first diverging node."""


def _tolerance(vals) -> float:
    low = any(isinstance(v, torch.Tensor) and v.dtype in (torch.float16, torch.bfloat16) for v in vals)
    return 1e-2 if low else 1e-3


def _is_seeded_random(n: fx.Node) -> bool:
    """A random op whose result cannot be compared (attention and dropout with p=0 are deterministic)."""
    t = n.target
    if not (isinstance(t, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in t.tags):
        return False
    for i, a in enumerate(t._schema.arguments):
        if a.name in ("dropout_p", "p"):
            value = n.args[i] if i < len(n.args) else n.kwargs.get(a.name, a.default_value)
            return value != 0
    return True


def _matches(ref, res) -> bool:
    ref_l = list(ref) if isinstance(ref, (list, tuple)) else [ref]
    res_l = list(res) if isinstance(res, (list, tuple)) else [res]
    return same(ref_l, res_l, tol=_tolerance(ref_l), equal_nan=True)


class _Recorder(fx.Interpreter):
    def __init__(self, gm):
        super().__init__(gm)
        self.values = {}

    def run_node(self, n):
        out = super().run_node(n)
        self.values[n.name] = out
        return out


def first_divergence(compiled, args) -> str:
    """Name the first node whose C++ value differs from the eager one."""
    if compiled.single is None:
        return "the divergence is inside a graph split into several partitions; run with fewer passes to narrow it"
    got = compiled.single.exe.run_debug(list(args))
    rec = _Recorder(compiled.gm)
    rec.run(*args)
    for node in compiled.gm.graph.nodes:
        if node.op != "call_function" or node.name not in rec.values:
            continue
        ref = rec.values[node.name]
        if isinstance(ref, (list, tuple)) and f"{node.name}.0" in got:
            mine = [got.get(f"{node.name}.{i}") for i in range(len(ref))]
        elif node.name in got:
            mine = got[node.name]
        else:
            continue  # removed by a pass: nothing to compare
        if not _matches(ref, mine):
            return f"node '{node.name}': {node.format_node()}"
    return "no single node differs; the outputs differ (check output aliasing)"


def verified_call(compiled, args: list):
    args = list(args)
    if any(_is_seeded_random(n) for n in compiled.gm.graph.nodes):
        warnings.warn("fxcpp verify: graph has random ops; results cannot be compared, skipping", stacklevel=3)
        return compiled.run(args)
    with torch.no_grad():
        ref = compiled.run_reference([a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    res = compiled.run(list(args))
    if not _matches(ref, res):
        where = first_divergence(compiled, args)
        raise FxcppVerifyError(f"fxcpp verify: the compiled {compiled.kind} graph differs from eager; first diverging {where}")
    return res
