"""verify mode: every compiled call also runs the ATen graph eagerly and compares.

On a mismatch beyond the harness tolerances (fp32 1e-3, bf16/fp16 1e-2, as
torch._dynamo.utils.same applies them; same_as_eager, stricter where a value holds a NaN) it
re-runs both node by node and raises naming the first node whose value differs.
"""
from __future__ import annotations

import warnings

import torch
import torch.fx as fx
from torch._dynamo.utils import same


class FxcppVerifyError(AssertionError):
    """A compiled result differs from eager; the message names the first diverging node."""


def tolerance(*vals) -> float:
    """The harness's tolerance for these values (any pytree): 1e-2 where one is bf16/fp16, else 1e-3."""
    flat = torch.utils._pytree.tree_leaves(vals)
    low = any(isinstance(v, torch.Tensor) and v.dtype in (torch.float16, torch.bfloat16) for v in flat)
    return 1e-2 if low else 1e-3


def same_as_eager(ref, res, fp64_ref=None, tol=None) -> bool:
    """PyTorch's harness rule (torch._dynamo.utils.same): allclose at tol, or, given an fp64
    reference, an RMSE no worse than a small multiple of eager's own (how bf16 results are judged).
    Stricter where an output holds a NaN: the rule alone then passes any result (its RMSE fallback
    is NaN on both sides, which it counts as a pass), so such an output must have its NaNs where
    eager's are (or, given an fp64 reference, a number where only eager's low-precision result is
    NaN: more accurate) and pass the rule over the elements that are numbers."""
    tol = tol if tol is not None else tolerance(ref)
    if not same(ref, res, fp64_ref=fp64_ref, tol=tol, equal_nan=True):
        return False
    refs, ress = torch.utils._pytree.tree_leaves(ref), torch.utils._pytree.tree_leaves(res)
    f64s = torch.utils._pytree.tree_leaves(fp64_ref) if fp64_ref is not None else [None] * len(refs)
    for a, b, c in zip(refs, ress, f64s):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.is_floating_point()
                and b.is_floating_point() and a.shape == b.shape):
            continue
        a_nan, b_nan = a.isnan(), b.isnan()
        if not (a_nan.any() or b_nan.any()):
            continue
        has64 = isinstance(c, torch.Tensor) and c.shape == a.shape
        c_nan = c.isnan() if has64 else torch.zeros_like(a_nan)
        better = a_nan & ~b_nan & ~c_nan if has64 else torch.zeros_like(a_nan)
        if ((a_nan != b_nan) & ~better).any():
            return False
        keep = ~a_nan & ~b_nan & ~c_nan
        if keep.any() and not same(a[keep], b[keep], fp64_ref=c[keep] if has64 else None, tol=tol, equal_nan=False):
            return False
    return True


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
    return same_as_eager(ref_l, res_l)


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
    if any(_is_seeded_random(n) for n in compiled.reference_gm.graph.nodes):  # the graph as traced, unsplit
        warnings.warn("fxcpp verify: graph has random ops; results cannot be compared, skipping", stacklevel=3)
        return compiled.run(args)
    with torch.no_grad():
        ref = compiled.run_reference([a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    res = compiled.run(list(args))
    if not _matches(ref, res):
        where = first_divergence(compiled, args)
        raise FxcppVerifyError(f"fxcpp verify: the compiled {compiled.kind} graph differs from eager; first diverging {where}")
    return res
