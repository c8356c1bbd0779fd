"""OpInfo operator sweep: every op of PyTorch's OpInfo database with float32, bfloat16 or
float16 CPU samples, compiled with torch.compile(backend="fxcpp"), must match eager -- or raise
where eager raises. fp32 is compared at the harness's 1e-3; bf16 and fp16 by the harness's rule
for low precision (tol 1e-2, and, where the op runs in float64, an fp64 reference: fxcpp may be
more accurate than eager, never less).

Default (`make test`): the first sample of each op in each dtype, one test per op and dtype.
FXCPP_OPINFO_FULL=1 (`make test-opinfo-full`): every sample of each op in each dtype.
FXCPP_OPINFO_DTYPES=bf16,fp16 limits the sweep to those dtypes; FXCPP_OPINFO_SHARD=i/n runs the
i-th of n interleaved shards (so the full sweep can run as n processes on a many-core machine,
each writing its own FXCPP_OPINFO_JSON, rewritten after every op so a cut-off shard keeps what
it ran; tests/python/opinfo_merge.py adds them up). FXCPP_OPINFO_RESUME=merged.json skips the
ops that file already holds.

Random ops (values depend on the RNG stream) and empty-like ops (uninitialized memory)
are compared on the structure, shapes and dtypes of their outputs only.

Ops that fail for a known reason are listed in opinfo_known_failures.py and run as
non-strict xfails. The last test, test_zz_report, prints the sweep's counts.
"""
from __future__ import annotations

import json
import os
import sys
import time
import unittest
import warnings
from collections import Counter
from unittest import mock

import pytest
import torch
from torch._dynamo.utils import clone_input
from torch.testing._internal import common_methods_invocations as _cmi
from torch.testing._internal import common_utils as _common_utils
from torch.testing._internal.opinfo import core as _opinfo_core
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils import _pytree as pytree

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # helpers, known failures (any import mode)

import fxcpp  # noqa: E402,F401
from fxcpp.explain import Report, recording  # noqa: E402
from helpers import assert_same  # noqa: E402
from opinfo_known_failures import KNOWN_FAILURES, KNOWN_FAILURES_FULL  # noqa: E402

FULL = os.environ.get("FXCPP_OPINFO_FULL", "") not in ("", "0")


def _test_fn_from_frames():
    """torch's common_utils.extract_test_fn (the unittest test method up the stack, where OpInfo
    keeps a sample's tracking and skips) without inspect.stack(), which also reads the source
    lines of every frame: under pytest each op.sample_inputs() call paid ~0.12 s for it, half of
    this sweep's time. The same walk over the same frames, so the same answer (None here: these
    tests are functions, not TestCase methods, and OpInfo then seeds every sample with SEED)."""
    try:
        frame = sys._getframe(1)
        while frame is not None:
            self_val = frame.f_locals.get("self")
            if isinstance(self_val, unittest.TestCase):
                *_, cls_name, test_name = self_val.id().rsplit(".", 2)
                if cls_name == type(self_val).__name__ and test_name.startswith("test"):
                    return getattr(self_val, test_name).__func__
            frame = frame.f_back
    except Exception:  # noqa: BLE001 - as the original: no test function found
        pass
    return None


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
OPS = [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]


def op_id(op, dtype: str = "fp32") -> str:
    """name[.variant] for fp32 (the ids known failures have always used), name[.variant]@bf16
    and @fp16 for the low-precision sweeps."""
    base = f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name
    return base if dtype == "fp32" else f"{base}@{dtype}"


# Ops whose values come from the RNG: compare structure, shapes and dtypes only. Any op whose
# ATen graph holds a node tagged nondeterministic_seeded is treated the same way at run time.
_RANDOM_NAMES = {"normal", "bernoulli", "multinomial", "uniform", "cauchy", "exponential", "geometric",
                 "log_normal", "poisson"}
_DETERMINISTIC = {"native_dropout_backward"}  # "dropout" in the name, but a pure function of its inputs


def is_random_name(name: str) -> bool:
    last = name.split(".")[-1]
    if name in _DETERMINISTIC:
        return False
    return name in _RANDOM_NAMES or last.startswith("rand") or "dropout" in last


def is_empty_like(name: str) -> bool:
    """empty, empty_like, new_empty, new_empty_strided, empty_strided, empty_permuted: uninitialized memory."""
    return "empty" in name.split(".")[-1]


def _seeded_random_graph(graphs) -> bool:
    for g in graphs:
        for n in g.gm.graph.nodes:
            t = n.target
            if isinstance(t, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in t.tags:
                return True
    return False


# --- results, shared with test_zz_report -------------------------------------------------------
# per op id: {"status": passed|failed|skipped, "xfail": bool, "error": str, "secs": s, and sample
# counts: "samples" run, "passed", "values" (compared by value), "random" (shape/dtype only),
# "eager_raised" (both raised), "cpp" / "interp" / "nograph" (where the passing samples ran)}
RESULTS: dict[str, dict] = {}


def _clone_tensor(x: torch.Tensor) -> torch.Tensor:
    """A copy with the same sizes, strides and storage offset, over a copy of the whole storage:
    some samples are views that ops such as as_strided read beyond."""
    if type(x) is not torch.Tensor or x.layout != torch.strided or x.is_quantized or x.is_nested:
        return clone_input(x)
    storage = x.untyped_storage().clone()
    return torch.empty(0, dtype=x.dtype, device=x.device).set_(storage, x.storage_offset(), x.size(), x.stride())


def _clone(tree):
    return pytree.tree_map(lambda x: _clone_tensor(x) if isinstance(x, torch.Tensor) else x, tree)


def _dense(tree):
    """Sparse tensors compared as dense (allclose takes strided tensors only)."""
    return pytree.tree_map(lambda x: x.to_dense() if isinstance(x, torch.Tensor) and x.layout != torch.strided
                           else x, tree)


def _structure(tree):
    """The outputs' structure with each tensor replaced by (shape, dtype)."""
    return pytree.tree_map(lambda x: ("Tensor", tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x,
                           tree)


def _tensor_structure(tree):
    leaves, spec = pytree.tree_flatten(tree)
    return spec, [(tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else type(x).__name__ for x in leaves]


def _short(e: BaseException, limit: int = 600) -> str:
    msg = f"{type(e).__name__}: {e}"
    msg = msg.split("\nException raised from")[0]  # drop the C++ backtrace
    return msg if len(msg) <= limit else msg[:limit] + " ..."


def _call_unseeded(f, *args, **kwargs):
    return f(*args, **kwargs)


def make_fn(f, sample):
    """fn(*tensors) calling f(sample.input, *sample.args, **sample.kwargs), the tensor leaves
    passed as arguments so that Dynamo sees them as graph inputs, not constants."""
    leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    where = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    tensors = [leaves[i] for i in where]

    def fn(*ts):
        vals = list(leaves)
        for i, t in zip(where, ts):
            vals[i] = t
        inp, args, kwargs = pytree.tree_unflatten(vals, spec)
        return f(inp, *args, **kwargs)

    return fn, tensors


def _fp64_reference(fn, tensors):
    """Eager on the inputs widened to float64, for judging a bf16/fp16 result (None where the
    op refuses float64)."""
    wide = [t.to(torch.float64) if t.is_floating_point() and t.layout == torch.strided else t for t in _clone(tensors)]
    try:
        torch.manual_seed(0)
        return fn(*wide)
    except Exception:  # noqa: BLE001 - no reference: the plain tolerance judges
        return None


def check_sample(op, sample, stats, backend="fxcpp") -> None:
    """Run one sample eagerly and compiled; raise AssertionError on a mismatch.
    (backend="aot_eager" tells a PyTorch failure from an fxcpp one when triaging.)"""
    fn, tensors = make_fn(op.op, sample)
    torch._dynamo.reset()  # a fresh cache per sample: no recompile limit, no eager fallback
    compiled = torch.compile(fn, backend=backend, fullgraph=False, dynamic=False)
    eager_in, comp_in = _clone(tensors), _clone(tensors)
    graphs: list = []
    # OpInfo wraps random ops in wrapper_set_seed (freeze_rng_state + manual_seed), which Dynamo
    # cannot trace: no graph would be compiled. Both runs call the op directly instead, after
    # seeding here.
    with torch.no_grad(), mock.patch.object(_cmi, "wrapper_set_seed", _call_unseeded):
        torch.manual_seed(0)
        try:
            ref, ref_err = fn(*eager_in), None
        except Exception as e:  # noqa: BLE001 - the compiled call must then raise too
            ref, ref_err = None, e
        torch.manual_seed(0)
        with warnings.catch_warnings(record=True) as caught, recording(graphs):
            warnings.simplefilter("always")
            try:
                res, res_err = compiled(*comp_in), None
            except Exception as e:  # noqa: BLE001
                res, res_err = None, e
    stats["samples"] += 1
    if ref_err is not None:
        assert res_err is not None, (f"eager raises ({_short(ref_err)}) but the compiled call returned "
                                     f"{_structure(res)}")
        stats["eager_raised"] += 1
        stats["passed"] += 1
        return
    if res_err is not None:
        raise AssertionError(f"compiled call raised, eager did not: {_short(res_err)}") from res_err

    assert _tensor_structure(res) == _tensor_structure(ref), (
        f"output structure differs from eager:\nref={_structure(ref)}\nres={_structure(res)}")
    assert _tensor_structure(comp_in) == _tensor_structure(eager_in), "input shapes/dtypes changed differently"
    random = is_random_name(op.name) or _seeded_random_graph(graphs)
    low = any(isinstance(t, torch.Tensor) and t.dtype in (torch.bfloat16, torch.float16) for t in tensors)
    if random or is_empty_like(op.name):
        stats["random"] += 1
    else:
        with torch.no_grad(), mock.patch.object(_cmi, "wrapper_set_seed", _call_unseeded):
            ref64 = _fp64_reference(fn, tensors) if low else None
        if ref64 is not None and _tensor_structure(ref64)[0] == _tensor_structure(ref)[0]:
            assert_same(_dense(ref), _dense(res), fp64_ref=_dense(ref64))
        else:
            assert_same(_dense(ref), _dense(res))
        assert_same(_dense(eager_in), _dense(comp_in))  # mutated inputs (inplace variants, out= arguments)
        stats["values"] += 1
    stats["passed"] += 1

    fell_back = any(str(w.message).startswith("fxcpp:") for w in caught)  # whole-graph fallbacks not recorded
    if not graphs:
        stats["nograph"] += 1
    elif fell_back or _interpreter_nodes(graphs, stats) > 0:
        stats["interp"] += 1
    else:
        stats["cpp"] += 1


def _interpreter_nodes(graphs, stats) -> int:
    """Report(graphs).kernel_counts["interpreter"]; should Report itself fail, count a graph that is
    not one whole C++ partition as having Interpreter nodes (and count the failure for the report)."""
    try:
        return Report(graphs).kernel_counts["interpreter"]
    except Exception:  # noqa: BLE001 - a bug of the report, not of the op: counted, printed at the end
        stats["report_error"] += 1
        return sum(1 for g in graphs if g.single is None)


def _selected(params):
    """The params this process runs: FXCPP_OPINFO_DTYPES and FXCPP_OPINFO_SHARD=i/n (see the docstring)."""
    dtypes = [d for d in os.environ.get("FXCPP_OPINFO_DTYPES", "").split(",") if d]
    unknown = set(dtypes) - set(DTYPES)
    assert not unknown, f"FXCPP_OPINFO_DTYPES names unknown dtypes {sorted(unknown)}; known: {list(DTYPES)}"
    if dtypes:
        params = [p for p in params if p.values[1] in dtypes]
    shard = os.environ.get("FXCPP_OPINFO_SHARD", "")
    if shard:
        i, n = (int(x) for x in shard.split("/"))
        assert 0 <= i < n, f"FXCPP_OPINFO_SHARD={shard}: want i/n with 0 <= i < n"
        params = params[i::n]
    done = os.environ.get("FXCPP_OPINFO_RESUME", "")  # a merged JSON of an earlier, cut-off run
    if done:
        with open(done) as f:
            ran = json.load(f)
        params = [p for p in params if p.id not in ran]
    return params


def _params():
    params = []
    for dtype, dt in DTYPES.items():
        for op in OPS:
            if dt not in op.supported_dtypes("cpu"):
                continue
            oid = op_id(op, dtype)
            marks = []
            reason = _known_failure(oid)
            if reason:
                marks.append(pytest.mark.xfail(strict=False, reason=reason))
            params.append(pytest.param(op, dtype, id=oid, marks=marks))
    return params


def _known_failure(oid: str) -> str | None:
    """Why oid fails, if it is listed: KNOWN_FAILURES always, KNOWN_FAILURES_FULL (failures only
    a later sample hits) in the full sweep only, so the first-sample sweep never XPASSes them."""
    return KNOWN_FAILURES.get(oid) or (KNOWN_FAILURES_FULL.get(oid) if FULL else None)


def test_known_failures_are_ops():
    """Every KNOWN_FAILURES(_FULL) key names an op and dtype of the sweep, and has a reason."""
    ids = {p.id for p in _params()}
    for table in (KNOWN_FAILURES, KNOWN_FAILURES_FULL):
        stale = sorted(k for k in table if k not in ids)
        assert not stale, f"known-failure entries that are not CPU OpInfo ops in their dtype: {stale}"
        assert all(isinstance(v, str) and len(v) > 10 for v in table.values())
    assert not KNOWN_FAILURES.keys() & KNOWN_FAILURES_FULL.keys()


@pytest.fixture(autouse=True)
def _cheap_test_fn_lookup(monkeypatch):
    for module in (_common_utils, _opinfo_core):  # core imported it by name
        if hasattr(module, "extract_test_fn"):
            monkeypatch.setattr(module, "extract_test_fn", _test_fn_from_frames)


@pytest.mark.parametrize("op,dtype", _selected(_params()))
def test_opinfo(op, dtype):
    oid = op_id(op, dtype)
    stats = Counter(samples=0, passed=0, values=0, cpp=0, interp=0, nograph=0, eager_raised=0, random=0,
                    report_error=0)
    entry = RESULTS[oid] = {"status": "failed", "dtype": dtype, **stats}
    t0 = time.perf_counter()
    try:
        samples = op.sample_inputs("cpu", DTYPES[dtype], requires_grad=False)
        failures = []
        for i, sample in enumerate(samples):
            try:
                check_sample(op, sample, stats)
            except AssertionError as e:
                failures.append(f"sample {i}: {sample.summary()}\n  {e}")
                if not FULL or len(failures) >= 3:
                    break
            if not FULL:
                break
        entry.update(stats)
        if stats["samples"] == 0:
            entry["status"] = "skipped"
            pytest.skip(f"no {dtype} CPU samples")
        if failures:
            raise AssertionError(f"{oid}: {len(failures)} failing sample(s)\n" + "\n".join(failures))
        entry["status"] = "passed"
    finally:
        entry["secs"] = time.perf_counter() - t0
        entry["xfail"] = _known_failure(oid) is not None
        entry["error"] = _short(sys.exc_info()[1], 300) if sys.exc_info()[1] is not None else ""
        _write_json()


def _write_json():
    path = os.environ.get("FXCPP_OPINFO_JSON")
    if path:  # per-op results, for triage and for merging shards; replaced whole, so a kill never truncates it
        with open(path + ".tmp", "w") as f:
            json.dump(RESULTS, f, indent=1, sort_keys=True)
        os.replace(path + ".tmp", path)


def summary(results: dict, full: bool = FULL):
    """The sweep's report lines, totals and status counts over per-op results (RESULTS, or
    several shards' JSON merged)."""
    status = Counter(r["status"] for r in results.values())
    tot = Counter()
    for r in results.values():
        for k in ("samples", "passed", "values", "cpp", "interp", "nograph", "eager_raised", "random",
                  "report_error"):
            tot[k] += r.get(k, 0)
    xfailed = sum(1 for r in results.values() if r["status"] == "failed" and r["xfail"])
    xpassed = sum(1 for r in results.values() if r["status"] == "passed" and r["xfail"])
    slow = sorted(results.items(), key=lambda kv: -kv[1].get("secs", 0))[:5]
    return [
        "",
        f"fxcpp OpInfo sweep ({'all samples' if full else 'first sample'} of each op, per dtype: "
        + ", ".join(f"{d} {n}" for d, n in Counter(r["dtype"] for r in results.values()).items()) + "):",
        f"  ops swept: {len(results)}  passed: {status['passed']}  failed: {status['failed']} "
        f"(known failures: {xfailed})  xpassed: {xpassed}  skipped (no samples): {status['skipped']}",
        f"  samples run: {tot['samples']}  passed: {tot['passed']}  "
        f"(values compared: {tot['values']}, shape/dtype only: {tot['random']}, eager raised too: {tot['eager_raised']})",
        f"  of the passing samples that ran: fully in C++: {tot['cpp']}  with Interpreter nodes: {tot['interp']}  "
        f"no graph compiled: {tot['nograph']}"
        + (f"  (fxcpp.Report raised on {tot['report_error']} of them)" if tot["report_error"] else ""),
        "  slowest ops: " + ", ".join(f"{k} {v.get('secs', 0):.1f}s" for k, v in slow),
    ], tot, status


def test_zz_report(capsys):
    """Runs last: print the sweep's counts and check they add up."""
    if not RESULTS:
        pytest.skip("no OpInfo test ran")
    lines, tot, status = summary(RESULTS)
    with capsys.disabled():
        print("\n".join(lines))
    _write_json()
    assert tot["passed"] <= tot["samples"]
    assert tot["values"] + tot["random"] + tot["eager_raised"] == tot["passed"]
    assert tot["cpp"] + tot["interp"] + tot["nograph"] + tot["eager_raised"] == tot["passed"]
    assert status["passed"] + status["failed"] + status["skipped"] == len(RESULTS)
