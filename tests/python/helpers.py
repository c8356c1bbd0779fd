"""Shared test helpers: compare with eager at the tolerances of PyTorch's benchmark harness."""
import copy

import torch
from torch._dynamo.utils import same

import fxcpp


def tol_for(*vals) -> float:
    flat = torch.utils._pytree.tree_leaves(vals)
    low = any(isinstance(v, torch.Tensor) and v.dtype in (torch.float16, torch.bfloat16) for v in flat)
    return 1e-2 if low else 1e-3


def assert_same(ref, res, tol=None, fp64_ref=None):
    """PyTorch's harness rule: allclose at tol, or, given an fp64 reference, an RMSE no worse
    than a small multiple of eager's own (how bf16 results are judged)."""
    tol = tol if tol is not None else tol_for(ref)
    assert same(ref, res, fp64_ref=fp64_ref, tol=tol, equal_nan=True), \
        f"results differ from eager (tol {tol}):\nref={ref}\nres={res}"


def clone_inputs(inputs):
    return [x.clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x) for x in inputs]


def compile_fxcpp(fn, options=None, **kw):
    return torch.compile(fn, backend="fxcpp", options=options, **kw)


def check_model(model, *inputs, options=None, no_grad=True, **compile_kw):
    """Compile `model` with fxcpp, run it beside eager on cloned inputs, assert equal; return the report counts."""
    compiled = compile_fxcpp(model, options=options, **compile_kw)
    ctx = torch.no_grad() if no_grad else torch.enable_grad()
    with ctx:
        ref = model(*clone_inputs(inputs))
        res = compiled(*clone_inputs(inputs))
    assert_same(ref, res)
    return res


def counts(model, *inputs, options=None):
    return fxcpp.explain(model, *inputs, options=options).kernel_counts


def onednn_notes(model, *inputs):
    """The impl notes of the model's GEMM/convolution nodes (what ran and why), from explain()
    under no_grad, with Dynamo reset before and after."""
    torch._dynamo.reset()
    with torch.no_grad():
        report = fxcpp.explain(model, *inputs)
    notes = [r.impl for r in report.rows if r.kernel == "onednn" and r.impl]
    assert notes, report
    torch._dynamo.reset()
    return notes
