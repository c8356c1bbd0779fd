"""Shared test helpers: compare with eager at the tolerances of PyTorch's benchmark harness."""
import copy

import torch
import fxcpp
from fxcpp.verify import same_as_eager  # noqa: F401  (the harness rule, strict where an output holds a NaN)
from fxcpp.verify import tolerance as tol_for


def aten_runs_natively(dtype) -> bool:
    """Whether ATen's oneDNN has bf16 / fp16 kernels on this host: what fxcpp asks torch
    (runtime/onednn/reference.h, aten_runs_natively); a torch without the query: emulated."""
    name = {torch.bfloat16: "_is_mkldnn_bf16_supported", torch.float16: "_is_mkldnn_fp16_supported"}.get(dtype)
    return name is not None and getattr(torch.ops.mkldnn, name, lambda: False)()


def assert_same(ref, res, tol=None, fp64_ref=None):
    """fxcpp.verify.same_as_eager (PyTorch's harness rule, strict where an output holds a NaN),
    or an assertion error showing both results."""
    assert same_as_eager(ref, res, fp64_ref=fp64_ref, tol=tol), \
        f"results differ from eager (tol {tol if tol is not None else tol_for(ref)}):\nref={ref}\nres={res}"


def explain_and_run(fn, xs):
    """fn's explain() report, then its compiled result, eager's and the fp64 reference's (low
    precision is checked against it), each from a fresh Dynamo."""
    torch._dynamo.reset()
    with torch.no_grad():
        report = fxcpp.explain(fn, *xs)
        torch._dynamo.reset()
        res = torch.compile(fn, backend="fxcpp")(*xs)
        ref = fn(*xs)
        ref64 = fn(*[x.double() if x.is_floating_point() else x for x in xs])
    return report, res, ref, ref64


def onednn_impls(fn, *xs, op=None):
    """What each oneDNN node (of `op`, e.g. "aten::convolution", where given) ran, from a fresh
    Dynamo's explain(), less the "onednn " prefix."""
    torch._dynamo.reset()
    with torch.no_grad():
        report = fxcpp.explain(fn, *xs)
    torch._dynamo.reset()
    return [r.impl.removeprefix("onednn ") for r in report.rows
            if r.kernel == "onednn" and r.impl and (op is None or r.op == op)]


def assert_frozen_runs_other_batches(m, xs, released):
    """Options.freeze with the batch dynamic: `m` compiled and called at the first batch of `xs`
    ({batch: inputs}, eager's results taken before), `released()` (the weight, read after that
    call) is a ReleasedTensor, and every other batch, then the first again, runs under
    fail_on_recompile with eager's results."""
    from fxcpp.freeze import ReleasedTensor
    with torch.no_grad():
        refs = {b: m(*x) for b, x in xs.items()}
    first = next(iter(xs))
    for x in xs[first]:
        torch._dynamo.mark_dynamic(x, 0)
    c = torch.compile(m, backend="fxcpp", options={"freeze": True})
    with torch.no_grad():
        assert_same(refs[first], c(*xs[first]))
        assert isinstance(released(), ReleasedTensor)
        with torch.compiler.set_stance("fail_on_recompile"):
            for b in [*(b for b in xs if b != first), first]:
                assert_same(refs[b], c(*xs[b]))


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


def fused_unary(op, y):
    """op(y) computed by cpu_fused's kernel, not ATen's: as op(x.neg()) on x = -y, two ops so that
    they fuse, the first exact; asserts that both fused and nothing ran on ATen."""
    fn = lambda x: op(x.neg())  # noqa: E731
    torch._dynamo.reset()
    kernels = counts(fn, y.neg())
    assert kernels["cpu_fused"] == 2 and kernels["aten"] == 0, kernels
    torch._dynamo.reset()
    return compile_fxcpp(fn)(y.neg())


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


def assert_edge_values_match(name, r, c, inputs):
    """fxcpp's c against eager's r on edge values (NaN, ±inf, signed zeros, denormals): NaN where
    eager's is NaN and nowhere else, eager's infinities and no others, eager's zeros with their
    signs (a denormal of the same sign counts: eager's bf16 erf flushes erf(1e-40) to 0, fxcpp's
    keeps 1.8e-40), finite values close. `inputs`, indexed like r, name the failing elements."""
    def at(bad):
        return f"{name} at {[x[bad] for x in inputs]}: eager {r[bad]}, fxcpp {c[bad]}"

    assert r.dtype == c.dtype, (name, r.dtype, c.dtype)
    if r.dtype == torch.bool:
        bad = r != c
        assert not bad.any(), at(bad)
        return
    bad = r.isnan() != c.isnan()
    assert not bad.any(), "NaN-ness differs: " + at(bad)
    fin = ~r.isnan()
    bad = fin & (r.isinf() | c.isinf()) & (r != c)
    assert not bad.any(), "infinities differ: " + at(bad)
    bad = fin & (r == 0) & ((c.float().abs() >= 1e-37) | (r.signbit() != c.signbit()))
    assert not bad.any(), "zeros differ: " + at(bad)
    ok = fin & ~r.isinf()
    tol = dict(rtol=1e-5, atol=1e-6) if r.dtype == torch.float32 else dict(rtol=1.6e-2, atol=1e-5)
    torch.testing.assert_close(c[ok], r[ok], **tol)


def errors_in_threads(*workers, timeout: float | None = None) -> list:
    """Runs each callable in a thread of its own, all started before any is joined; returns the
    exceptions they raised (a failed assert in a thread would otherwise only be printed), and a
    TimeoutError for threads still running after timeout seconds (a hang, not a wait forever)."""
    import threading

    errors = []

    def guarded(fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - handed to the caller
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(w,), daemon=True) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    hung = sum(t.is_alive() for t in threads)
    if hung:
        errors.append(TimeoutError(f"{hung} of {len(threads)} threads still running after {timeout} s"))
    return errors
