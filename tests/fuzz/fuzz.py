"""The random-program fuzzer: each program (grammar.py) is compiled with fxcpp through
torch.compile and called five times (again, after its weights changed, at two new batch
sizes: _check), each call compared with eager by PyTorch's benchmark-harness rule (an fp64
reference for bf16/fp16), and its inputs must come back untouched. A failing program is shrunk (the
shortest failing prefix, then statements dropped while it still fails) and written out as a
standalone reproducer in tests/fuzz/repros/.

    python tests/fuzz/fuzz.py --n 1000 [--seed 0] [--grammar 2] [--train] [--attention matmuls] [--large] [--out tests/fuzz/repros]

--large widens each pointwise or dense program's input to 16K-2M elements (grammar.generate's
large) and, unless it is set, pins FXCPP_LLC_BYTES to 256 KiB for the run, so that the paths taken
only by large calls run here too: cheap pointwise groups as a plan, streaming stores into the
outputs, 128-element blocks and paced rows from "DRAM", the buffer pool. Its summary counts the
calls each took (cpu_fused_stats()).

`make fuzz N=...` runs it; `make test` runs a fixed-seed slice (tests/python/test_fuzz_slice.py).
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import inspect
import json
import os
import re
import sys
import time
import traceback
import warnings

import torch

import fxcpp  # registers the backend
from fxcpp.verify import same_as_eager  # the harness rule, strict where an output holds a NaN

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grammar import DTYPES, Program, generate  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# _check's calls of one compiled model, in order (write_repro's script makes the same).
CALLS = ("first call", "second call", "call after the weights changed",
         "call with a new first-dim size", "call with another first-dim size")
FROZEN_CALLS = CALLS[:2]


def _tol(dtype: str) -> float:
    """The harness rule's tolerance: fp32 against eager, bf16/fp16 with the fp64 reference."""
    return 1e-3 if dtype == "fp32" else 1e-2


def instantiate(p: Program):
    ns: dict = {}
    exec(compile(p.source(), f"<fuzz seed {p.seed}>", "exec"), ns)  # noqa: S102 - our own generated source
    return ns["Program"], ns["make_inputs"]


def check(p: Program, notes: list | None = None, train: bool = False, freeze: bool = False,
          released: list | None = None) -> tuple[str, str]:
    """("ok" | "skip" | "fail" | "traced", detail). skip: eager itself raises on this program.
    train: two training steps (_check_train) instead of the inference calls. freeze: compiled
    with options={"freeze": True}, called twice on the same inputs (_check, FROZEN_CALLS); the
    seed goes into `released` when the model's parameters were released.
    traced: values right, but an output's strides are those Dynamo traced, not eager's (see
    _output_strides). fxcpp's warnings (a fallback to the Interpreter or to ATen:
    correct, but not the intended path) are appended to `notes`."""
    from fxcpp.explain import Report, recording

    rec: list = []
    with warnings.catch_warnings(record=True) as caught, recording(rec):
        warnings.simplefilter("always")
        out = _check_train(p) if train else _check(p, freeze, released)
    if notes is not None:
        notes += sorted({str(w.message).splitlines()[0][:300] for w in caught if "fxcpp" in str(w.message)})
        # A kernel's own fallbacks are in explain()'s notes (its C++ warnings go to stderr).
        notes += sorted({f"{r.node}: {r.impl}" for r in Report(rec).rows if r.impl and "refused" in r.impl})
    return out


def _check(p: Program, freeze: bool = False, released: list | None = None) -> tuple[str, str]:
    """Five calls of one compiled model, each against eager: the first (which compiles and,
    for a oneDNN node, measures its paths); a second on the same inputs (the path chosen, the
    primitive and packed weight cached); a third after every parameter changed in one of the
    ways a user changes weights (_change_weights); then two with new sizes of the inputs'
    first dim (Dynamo recompiles once with that dim symbolic, then reuses that graph). Where
    eager rejects the new sizes (a size written into the program), those two are left out.
    freeze: the first two only (a frozen model sees no weight change, and a new size would
    compile a graph reading the released weights), against eager's result from before."""
    cls, make_inputs = instantiate(p)
    dtype = TORCH_DTYPES[p.dtype]
    model = cls().eval().to(dtype)
    xs = make_inputs(dtype)
    with torch.no_grad():
        try:
            ref, ref64 = _eager(model, xs)
        except Exception as e:  # noqa: BLE001 - eager rejects the program: not ours to judge
            return "skip", f"eager raised {type(e).__name__}: {str(e)[:120]}"
        torch._dynamo.reset()
        traced: list = []  # the output strides of each graph Dynamo hands fxcpp, as it traced them

        options = {"freeze": True} if freeze else None

        def fxcpp_recording_strides(gm, example_inputs):
            traced.append(_output_strides(gm))
            return torch._dynamo.lookup_backend("fxcpp")(gm, example_inputs, options=options)

        compiled = torch.compile(model, backend=fxcpp_recording_strides)
        traced_detail = ""
        try:
            for call in FROZEN_CALLS if freeze else CALLS:
                if call == "call after the weights changed" and not _change_weights(model, p.seed):
                    continue
                if "first-dim size" in call:
                    xs = _resized_inputs(p, dtype, 2 if call == CALLS[3] else 5)
                if call != "first call" and not freeze:
                    try:
                        ref, ref64 = _eager(model, xs)
                    except Exception:  # noqa: BLE001 - a size written into the program: eager rejects it
                        break
                before = [x.clone() for x in xs]
                try:
                    res = compiled(*xs)
                except Exception as e:  # noqa: BLE001
                    return "fail", f"{call}: fxcpp raised where eager did not: {type(e).__name__}: {e}\n" \
                                   f"{traceback.format_exc()[-1500:]}"
                if any(not torch.equal(a, b) and not (a.isnan() | b.isnan()).any() for a, b in zip(before, xs)):
                    return "fail", f"{call}: an input was mutated"
                status, detail = _compare(p, ref, res, ref64, traced[-1] if traced else None)
                if detail and call != "first call":
                    detail = f"{call}: {detail}"
                if status == "fail":
                    return status, detail
                traced_detail = traced_detail or detail
        finally:
            torch._dynamo.reset()
    if released is not None and any(type(t).__name__ == "ReleasedTensor" for t in model.parameters()):
        released.append(p.seed)
    return ("traced", traced_detail) if traced_detail else ("ok", "")


def _resized(p: Program, extra: int) -> Program:
    """The program with `extra` added to its inputs' first dim (same layouts, new values); a
    lower-rank input that broadcasts against x0 (grammar 2) keeps its shape."""
    rank = len(p.inputs[0][1])
    return dataclasses.replace(p, inputs=[(n, (sh[0] + extra,) + tuple(sh[1:]) if len(sh) == rank else sh, lay)
                                          for n, sh, lay in p.inputs])


def _resized_inputs(p: Program, dtype, extra: int) -> list:
    return instantiate(_resized(p, extra))[1](dtype)


def _check_train(p: Program) -> tuple[str, str]:
    cls, make_inputs = instantiate(p)
    dtype = TORCH_DTYPES[p.dtype]
    model = cls().to(dtype)
    return train_steps(model, make_inputs(dtype), _tol(p.dtype))


def train_steps(model, xs, tol) -> tuple[str, str]:
    """Two training steps, compiled against eager: the outputs, then the gradients of a random
    weighting of them with respect to every input and parameter (fp64 gradients as the
    low-precision reference), then eager's SGD step, copied into the compiled model's
    parameters in place (its graphs see the new values at the second step). A reproducer of a
    --train failure runs it as it stands (write_repro)."""
    mine, model64 = copy.deepcopy(model), copy.deepcopy(model).double()
    torch._dynamo.reset()
    compiled = torch.compile(mine, backend="fxcpp")
    try:
        for step in range(2):
            try:
                ref, ref_grads = _forward_backward(model, xs, step)
                ref64, grads64 = _forward_backward(model64, [x.double() for x in xs], step)
            except Exception as e:  # noqa: BLE001 - eager rejects it (an in-place op autograd needs undone)
                if step == 0:
                    return "skip", f"eager raised {type(e).__name__}: {str(e)[:120]}"
                raise
            try:
                res, grads = _forward_backward(compiled, xs, step, params=list(mine.parameters()))
            except Exception as e:  # noqa: BLE001
                return "fail", f"training step {step}: fxcpp raised where eager did not: {type(e).__name__}: {e}\n" \
                               f"{traceback.format_exc()[-1500:]}"
            for i, (r, c, r64) in enumerate(zip(ref, res, ref64)):
                if r.shape != c.shape or r.dtype != c.dtype or not same_as_eager(r, c, fp64_ref=r64, tol=tol):
                    return "fail", f"training step {step}: output {i} differs from eager"
            for name, r, c, r64 in zip(ref_grads, ref_grads.values(), grads.values(), grads64.values()):
                if (r is None) != (c is None):
                    return "fail", f"training step {step}: the gradient of {name} is " + ("missing" if c is None else "extra")
                if r is not None and not same_as_eager(r, c, fp64_ref=r64, tol=tol):
                    err = (c.double() - r.double()).abs().max().item() if r.numel() else 0.0
                    return "fail", f"training step {step}: the gradient of {name} differs from eager (max abs diff {err:.3g})"
            eager_step(model, mine, model64)
    finally:
        torch._dynamo.reset()
    return "ok", ""


def eager_step(model, *copies):
    """Eager's SGD step on model, copied into each copy's parameters in place (their compiled
    graphs see the new values): each step starts equal. Every gradient is cleared."""
    with torch.no_grad():
        for w, *ws in zip(model.parameters(), *(c.parameters() for c in copies)):
            if w.grad is not None:
                w.sub_(0.1 * w.grad)
            for o in ws:
                o.copy_(w)
            for o in (w, *ws):
                o.grad = None


def _forward_backward(fn, xs, step, params=None):
    """fn's outputs and, by name, the gradients of sum(output * r) (r: fixed random weights per
    step) with respect to each input and parameter."""
    params = list(fn.parameters()) if params is None else params
    xs = [x.detach().clone().requires_grad_() for x in xs]
    outs = fn(*xs)
    gen = torch.Generator().manual_seed(step)  # the same weights for eager, fp64 and compiled
    loss = sum((o.double() * torch.randn(o.shape, generator=gen, dtype=torch.float64)).sum() for o in outs)
    loss.backward()
    grads = {f"input {i}": x.grad for i, x in enumerate(xs)}
    grads.update({f"parameter {i}": w.grad for i, w in enumerate(params)})
    return [o.detach() for o in outs], grads


def _eager(model, xs):
    """Eager's outputs and the fp64 reference the harness rule checks low precision against."""
    ref = model(*[x.clone() for x in xs])
    ref64 = copy.deepcopy(model).double()(*[x.double() for x in xs])
    return ref, ref64


def _change_weights(model, seed: int) -> bool:
    """Every parameter scaled elementwise by a factor in [0.5, 1.5) (positive: a BatchNorm's
    variance stays a variance), each in one of four ways a user or a training step changes
    weights between calls: through `.data` (the version counter does not move), in place
    (it does), `copy_`, and a new tensor assigned to `.data` (a new storage). False when the
    program has no parameter."""
    params = list(model.parameters())
    g = torch.Generator().manual_seed(seed + 2)
    for i, w in enumerate(params):
        f = (torch.rand(w.shape, generator=g) + 0.5).to(w.dtype)
        way = i % 4
        if way == 0:
            w.data.mul_(f)
        elif way == 1:
            w.mul_(f)
        elif way == 2:
            w.copy_(w * f)
        else:
            w.data = w.data * f
    return bool(params)


def _compare(p: Program, ref, res, ref64, traced_strides=None) -> tuple[str, str]:
    """("ok" | "fail" | "traced", detail) for one call's outputs against eager's. traced_strides:
    the output strides of the graph this call ran (the last one compiled), as Dynamo traced
    them."""
    tol = _tol(p.dtype)
    traced_detail = ""
    for i, (r, c, r64) in enumerate(zip(ref, res, ref64)):
        if r.shape != c.shape or r.dtype != c.dtype:
            return "fail", f"output {i}: {tuple(c.shape)} {c.dtype}, eager {tuple(r.shape)} {r.dtype}"
        # Eager's layout too: a view the user (or aot's alias replay) takes of it depends on it.
        if _layout_differs(r, c):
            detail = f"output {i}: strides {c.stride()}, eager {r.stride()} (shape {tuple(r.shape)})"
            if traced_strides is None or i >= len(traced_strides) or not _same_strides(traced_strides[i], c):
                return "fail", detail
            traced_detail = detail + " = the strides Dynamo traced (FakeTensor's, not eager's)"
        if not same_as_eager(r, c, fp64_ref=r64, tol=tol):
            err = (c.double() - r.double()).abs().max().item() if r.numel() else 0.0
            return "fail", f"output {i} differs from eager (max abs diff {err:.3g}, tol {tol})"
    return ("traced", traced_detail) if traced_detail else ("ok", "")


def _layout_differs(r, c) -> bool:
    """Whether c is laid out otherwise than eager's r (dims of size 1 and empty tensors have
    no layout to speak of)."""
    return bool(r.numel()) and any(n > 1 and a != b for n, a, b in zip(r.shape, r.stride(), c.stride()))


def _output_strides(gm) -> list | None:
    """The output strides of a graph Dynamo traced (its FakeTensors'), or None where its outputs
    do not map one for one onto the model's. PyTorch's FakeTensor propagation can pick another
    layout than eager for a tensor whose strides fit two layouts (one channel), and its
    dynamic-shape graph can pick another again: a backend that returns the traced strides
    (Inductor does) then differs from eager there. A symbolic stride stays a SymInt."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    leaves = torch.utils._pytree.tree_leaves(out.args[0])
    vals = [a.meta.get("example_value") if isinstance(a, torch.fx.Node) else None for a in leaves]
    return [tuple(v.stride()) if isinstance(v, torch.Tensor) else None for v in vals]


def _same_strides(traced, c) -> bool:
    """Whether c is laid out as Dynamo traced it, dims of size 1 left out as in _compare: the
    same strides, or where a traced stride is symbolic (a product with a dynamic size, whose
    value at this call the trace does not know), the same order of dims."""
    if traced is None or len(traced) != c.dim():
        return False
    dims = [d for d in range(c.dim()) if c.shape[d] > 1]
    if all(not isinstance(t, torch.SymInt) for t in traced):
        return all(int(traced[d]) == c.stride(d) for d in dims)
    hints = [t.node.hint if isinstance(t, torch.SymInt) else int(t) for t in traced]
    if any(hints[d] is None for d in dims):
        return False
    return sorted(dims, key=lambda d: (-hints[d], d)) == sorted(dims, key=lambda d: (-c.stride(d), d))


def _fails(p: Program, train: bool = False, freeze: bool = False) -> bool:
    try:
        return check(p, train=train, freeze=freeze)[0] == "fail"
    except Exception:  # noqa: BLE001 - a broken candidate (e.g. a dropped value still read) is not a failure
        return False


def _needed(stmts, outputs) -> list:
    need, keep = set(outputs), []
    for s in reversed(stmts):
        if s.name in need:
            keep.append(s)
            need.update(s.deps)
    return list(reversed(keep))


def shrink(p: Program, train: bool = False, freeze: bool = False) -> Program:
    """The shortest failing prefix (its last value the only output), then each statement
    replaced by its first operand where the shapes agree, while the program still fails."""
    for k in range(1, len(p.stmts) + 1):
        cand = dataclasses.replace(p, stmts=_needed(p.stmts[:k], [p.stmts[k - 1].name]), outputs=[p.stmts[k - 1].name])
        if _fails(cand, train, freeze):
            p = cand
            break
    changed = True
    while changed:
        changed = False
        for s in list(p.stmts):
            if s.name in p.outputs or not s.deps or p.stmts and s is p.stmts[-1]:
                continue
            dep = s.deps[0]
            dep_shape = next((t.shape for t in p.stmts if t.name == dep), None) or next(
                (sh for n, sh, _ in p.inputs if n == dep), None)
            if dep_shape != s.shape:
                continue
            rest = []
            for t in p.stmts:
                if t is s:
                    continue
                rest.append(dataclasses.replace(t, expr=_rename(t.expr, s.name, dep), after=_rename(t.after, s.name, dep),
                                                deps=[dep if d == s.name else d for d in t.deps]))
            cand = dataclasses.replace(p, stmts=_needed(rest, p.outputs))
            if _fails(cand, train, freeze):
                p, changed = cand, True
                break
    return p


def _rename(text: str, old: str, new: str) -> str:
    return re.sub(rf"\b{old}\b", new, text)


# The main of a --train reproducer (write_repro): the program's two training steps against eager.
_TRAIN_REPRO = '''
import copy  # noqa: E402
import traceback  # noqa: E402


{helpers}

if __name__ == "__main__":{env}
    import fxcpp  # noqa: F401
    from fxcpp.verify import same_as_eager

    dtype = {dtype}
    model = Program().to(dtype)
    status, detail = train_steps(model, make_inputs(dtype), {tol})
    print(detail or "training steps: outputs and gradients match eager")
    print("matches eager" if status == "ok" else "DIFFERS from eager" if status == "fail" else status)
'''


def write_repro(p: Program, detail: str, out_dir: str, train: bool = False, freeze: bool = False) -> str:
    """A standalone script of the program and the five calls of _check (the fuzzer's own
    _eager and _change_weights, copied in by their source); for a --train failure, the two
    training steps of _check_train (train_steps and its helpers, copied in the same way)."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"repro_seed{p.seed}.py")
    resized = "".join(_resized(p, k).source().split("def make_inputs(dtype):")[1].join(
        [f"\n\ndef make_inputs_{k}(dtype):  # the first dim {k} larger", ""]) for k in (2, 5))
    body = p.source() + resized + f'''

# {p.describe()}
# Found: {detail.splitlines()[0] if detail else ""}''' + (f"""
# Found by --train: this script runs its two training steps (as fuzz.py --train --n 1 --seed {p.seed} --grammar {p.grammar}).""" if train else "") + (f"""
# Found by --freeze: python tests/fuzz/fuzz.py --freeze --n 1 --seed {p.seed} --grammar {p.grammar} reruns it
# frozen; this script compiles without freeze=True.""" if freeze else "") + f'''
import copy  # noqa: E402


{inspect.getsource(_eager)}

{inspect.getsource(_change_weights)}

{inspect.getsource(_layout_differs)}


if __name__ == "__main__":{{env}}
    import fxcpp  # noqa: F401
    from fxcpp.verify import same_as_eager

    dtype = {DTYPES[p.dtype]}
    model = Program().eval().to(dtype)
    xs = make_inputs(dtype)
    compiled = torch.compile(model, backend="fxcpp")
    ok = True
    with torch.no_grad():
        for call in {CALLS!r}:
            if call == "call after the weights changed":
                _change_weights(model, {p.seed})
            if "first-dim size" in call:
                xs = (make_inputs_2 if "new" in call else make_inputs_5)(dtype)
            try:
                ref, ref64 = _eager(model, xs)
            except Exception:  # eager rejects the new size: so did the fuzzer
                break
            res = compiled(*xs)
            good = all(same_as_eager(r, c, fp64_ref=r64, tol={_tol(p.dtype)}) and not _layout_differs(r, c)
                       for r, c, r64 in zip(ref, res, ref64))  # eager's values and eager's layout
            print(call, "matches eager" if good else "DIFFERS from eager")
            ok = ok and good
    print("matches eager" if ok else "DIFFERS from eager")
'''
    # The environment it failed under (fuzz.py --attention).
    env = "".join(f"\n    os.environ[{k!r}] = {os.environ[k]!r}  # as the fuzzer ran it" for k in ("FXCPP_ATTENTION",)
                  if k in os.environ)
    body = body.replace("{env}", "\n    import os" + env if env else "")
    if train:
        body = body.split("\nimport copy  # noqa: E402")[0] + _TRAIN_REPRO.format(
            helpers="\n\n".join(inspect.getsource(f) for f in (train_steps, eager_step, _forward_backward)),
            env="\n    import os" + env if env else "", dtype=DTYPES[p.dtype], tol=_tol(p.dtype))
    with open(path, "w") as f:
        f.write(body)
    return path


def run(n: int, seed: int, out_dir: str | None, verbose: bool = False, train: bool = False,
        dtypes: tuple = tuple(DTYPES), grammar: int = 1, freeze: bool = False, attention: str | None = None,
        large: bool = False) -> dict:
    """Programs of seeds seed..seed+n-1 of that grammar whose dtype is in `dtypes` (the others
    are counted as left out). attention: FXCPP_ATTENTION while they run (read as each
    attention kernel is made)."""
    saved = os.environ.get("FXCPP_ATTENTION")
    if large:
        os.environ.setdefault("FXCPP_LLC_BYTES", str(LARGE_LLC_BYTES))  # read once, at the process's first call
    if attention:
        os.environ["FXCPP_ATTENTION"] = attention
    try:
        return _run(n, seed, out_dir, verbose, train, dtypes, grammar, freeze, large)
    finally:
        if saved is None:
            os.environ.pop("FXCPP_ATTENTION", None)
        else:
            os.environ["FXCPP_ATTENTION"] = saved


# The paths of large calls a --large run reports (cpu_fused_stats()).
LARGE_PATHS = ("planned_calls", "streamed", "row_paced_blocks", "pool_hits")
# The "last-level cache" of a large run, unless FXCPP_LLC_BYTES is set: small enough that the
# fuzzed sizes take the paths of calls larger than the cache.
LARGE_LLC_BYTES = 256 << 10


def _run(n, seed, out_dir, verbose, train, dtypes, grammar, freeze, large=False) -> dict:
    counts = {"ok": 0, "skip": 0, "fail": 0, "traced": 0, "left out": 0}
    failures, fallbacks, traced, released = [], [], [], []
    stats0 = fxcpp._C.cpu_fused_stats()
    t0 = time.time()
    for s in range(seed, seed + n):
        p = generate(s, grammar, large)
        if p.dtype not in dtypes:
            counts["left out"] += 1
            continue
        notes: list = []
        status, detail = check(p, notes, train, freeze, released)
        counts[status] += 1
        if status == "traced":
            traced.append((s, detail))
            print(f"traced layout seed {s}: {detail}", flush=True)
        if notes:
            fallbacks.append((s, notes))
            print(f"fallback seed {s}: {notes[0]}", flush=True)
        if status == "fail":
            small = shrink(p, train, freeze)
            where = write_repro(small, detail, out_dir, train, freeze) if out_dir else ""
            failures.append((s, detail.splitlines()[0], small.describe(), where))
            print(f"FAIL seed {s}: {detail.splitlines()[0]}\n  shrunk: {small.describe()}\n  {where}", flush=True)
        elif verbose:
            print(f"{status} seed {s}: {p.describe()[:200]}", flush=True)
    counts["seconds"] = round(time.time() - t0, 1)
    counts["failures"] = failures
    counts["fallbacks"] = fallbacks
    counts["traced_layouts"] = traced
    counts["released"] = len(released)  # freeze: programs whose model had parameters released
    stats = fxcpp._C.cpu_fused_stats()
    counts["paths"] = {k: stats[k] - stats0[k] for k in LARGE_PATHS}
    # The cache size the streaming rules used: a process that read it before a large run keeps
    # its own, which the caller can see here.
    counts["llc_bytes"] = fxcpp._C.host_info()["llc_bytes"]
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(HERE, "repros"))
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--train", action="store_true", help="two training steps per program instead of inference calls")
    ap.add_argument("--dtypes", default=",".join(DTYPES), help="the programs of these dtypes only (default: all)")
    ap.add_argument("--grammar", type=int, default=1, choices=(1, 2, 3, 4), help="grammar.py's generation (default: 1)")
    ap.add_argument("--attention", choices=("matmuls",),
                    help="FXCPP_ATTENTION for the run: 'matmuls' runs every attention call the oneDNN matmuls take on them "
                         "(by default small calls measure ATen's flash kernel faster and keep it)")
    ap.add_argument("--freeze", action="store_true", help="compile with options={'freeze': True}; two calls per program")
    ap.add_argument("--large", action="store_true",
                    help="inputs of 16K-2M elements, FXCPP_LLC_BYTES 256 KiB unless set (the paths of large calls)")
    ap.add_argument("--json", help="also write the counts to this file (JSON)")
    a = ap.parse_args(argv)
    if a.freeze and a.train:
        ap.error("--freeze compiles inference graphs only")
    c = run(a.n, a.seed, a.out, a.verbose, a.train, tuple(a.dtypes.split(",")), a.grammar, a.freeze, a.attention, a.large)
    print(f"programs {a.n} (grammar {a.grammar}, seeds {a.seed}..{a.seed + a.n - 1}): "
          + (f"{c['left out']} of other dtypes left out, " if c["left out"] else "")
          + f"ok {c['ok']}, eager raised too {c['skip']}, "
          f"failed {c['fail']} in {c['seconds']} s; fxcpp warned (a correct fallback) on {len(c['fallbacks'])}; "
          f"output strides as Dynamo traced them, not eager's, on {c['traced']}"
          + (f"; parameters released on {c['released']}" if a.freeze else "")
          + (f"; large calls (LLC {c['llc_bytes']} B): {', '.join(f'{k} {v}' for k, v in c['paths'].items())}"
             if a.large else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({k: c[k] for k in ("ok", "skip", "fail", "traced", "left out", "seconds", "released", "paths",
                                         "llc_bytes")} | {"failed_seeds": [f[0] for f in c["failures"]]}, f, indent=1)
    return 1 if c["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
