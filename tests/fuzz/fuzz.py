"""The random-program fuzzer: each program (grammar.py) is compiled with fxcpp through
torch.compile and compared with eager by PyTorch's benchmark-harness rule (an fp64 reference
for bf16/fp16), and its inputs must come back untouched. A failing program is shrunk (the
shortest failing prefix, then statements dropped while it still fails) and written out as a
standalone reproducer in tests/fuzz/repros/.

    python tests/fuzz/fuzz.py --n 1000 [--seed 0] [--out tests/fuzz/repros]

`make fuzz N=...` runs it; `make test` runs a fixed-seed slice (tests/python/test_fuzz_slice.py).
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import re
import sys
import time
import traceback
import warnings

import torch
from torch._dynamo.utils import same

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grammar import DTYPES, Program, generate  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def instantiate(p: Program):
    ns: dict = {}
    exec(compile(p.source(), f"<fuzz seed {p.seed}>", "exec"), ns)  # noqa: S102 - our own generated source
    return ns["Program"], ns["make_inputs"]


def check(p: Program, notes: list | None = None) -> tuple[str, str]:
    """("ok" | "skip" | "fail" | "traced", detail). skip: eager itself raises on this program.
    traced: values right, but an output's strides are those Dynamo traced, not eager's (see
    _traced_output_strides). fxcpp's warnings (a fallback to the Interpreter or to ATen:
    correct, but not the intended path) are appended to `notes`."""
    import fxcpp  # noqa: F401 - registers the backend

    from fxcpp.explain import Report, recording

    rec: list = []
    with warnings.catch_warnings(record=True) as caught, recording(rec):
        warnings.simplefilter("always")
        out = _check(p)
    if notes is not None:
        notes += sorted({str(w.message).splitlines()[0][:300] for w in caught if "fxcpp" in str(w.message)})
        # A kernel's own fallbacks are in explain()'s notes (its C++ warnings go to stderr).
        notes += sorted({f"{r.node}: {r.impl}" for r in Report(rec).rows if r.impl and "refused" in r.impl})
    return out


def _check(p: Program) -> tuple[str, str]:
    cls, make_inputs = instantiate(p)
    dtype = TORCH_DTYPES[p.dtype]
    model = cls().eval().to(dtype)
    xs = make_inputs(dtype)
    with torch.no_grad():
        try:
            ref = model(*[x.clone() for x in xs])
            model64 = copy.deepcopy(model).double()
            ref64 = model64(*[x.double() for x in xs])
        except Exception as e:  # noqa: BLE001 - eager rejects the program: not ours to judge
            return "skip", f"eager raised {type(e).__name__}: {str(e)[:120]}"
        before = [x.clone() for x in xs]
        torch._dynamo.reset()
        try:
            res = torch.compile(model, backend="fxcpp")(*xs)
        except Exception as e:  # noqa: BLE001
            return "fail", f"fxcpp raised where eager did not: {type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"
        finally:
            torch._dynamo.reset()
    if any(not torch.equal(a, b) and not (a.isnan() | b.isnan()).any() for a, b in zip(before, xs)):
        return "fail", "an input was mutated"
    tol = 1e-3 if p.dtype == "fp32" else 1e-2
    traced_detail = ""
    for i, (r, c, r64) in enumerate(zip(ref, res, ref64)):
        if r.shape != c.shape or r.dtype != c.dtype:
            return "fail", f"output {i}: {tuple(c.shape)} {c.dtype}, eager {tuple(r.shape)} {r.dtype}"
        # Eager's layout too: a view the user (or aot's alias replay) takes of it depends on it
        # (dims of size 1 and empty tensors have no layout to speak of).
        if r.numel() and any(n > 1 and a != b for n, a, b in zip(r.shape, r.stride(), c.stride())):
            detail = f"output {i}: strides {c.stride()}, eager {r.stride()} (shape {tuple(r.shape)})"
            traced = _traced_output_strides(model, xs)
            if traced is None or i >= len(traced) or traced[i] != tuple(c.stride()):
                return "fail", detail
            traced_detail = detail + " = the strides Dynamo traced (FakeTensor's, not eager's)"
        if not same(r, c, fp64_ref=r64, tol=tol, equal_nan=True):
            err = (c.double() - r.double()).abs().max().item() if r.numel() else 0.0
            return "fail", f"output {i} differs from eager (max abs diff {err:.3g}, tol {tol})"
    return ("traced", traced_detail) if traced_detail else ("ok", "")


def _traced_output_strides(model, xs) -> list | None:
    """The output strides Dynamo's trace gives every backend (its FakeTensors'), or None where
    its outputs do not map one for one onto the model's. PyTorch's FakeTensor propagation can
    pick another layout than eager for a tensor whose strides fit two layouts (one channel):
    a backend that returns the traced strides (Inductor does) then differs from eager there."""
    got = []

    def record(gm, example_inputs):
        out = next(n for n in gm.graph.nodes if n.op == "output")
        leaves = torch.utils._pytree.tree_leaves(out.args[0])
        vals = [a.meta.get("example_value") if isinstance(a, torch.fx.Node) else None for a in leaves]
        got.append([tuple(v.stride()) if isinstance(v, torch.Tensor) else None for v in vals])
        return gm.forward

    torch._dynamo.reset()
    try:
        with torch.no_grad():
            torch.compile(model, backend=record)(*[x.clone() for x in xs])
    finally:
        torch._dynamo.reset()
    return got[0] if len(got) == 1 else None


def _fails(p: Program) -> bool:
    try:
        return check(p)[0] == "fail"
    except Exception:  # noqa: BLE001 - a broken candidate (e.g. a dropped value still read) is not a failure
        return False


def _needed(stmts, outputs) -> list:
    need, keep = set(outputs), []
    for s in reversed(stmts):
        if s.name in need:
            keep.append(s)
            need.update(s.deps)
    return list(reversed(keep))


def shrink(p: Program) -> Program:
    """The shortest failing prefix (its last value the only output), then each statement
    replaced by its first operand where the shapes agree, while the program still fails."""
    for k in range(1, len(p.stmts) + 1):
        cand = dataclasses.replace(p, stmts=_needed(p.stmts[:k], [p.stmts[k - 1].name]), outputs=[p.stmts[k - 1].name])
        if _fails(cand):
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
            if _fails(cand):
                p, changed = cand, True
                break
    return p


def _rename(text: str, old: str, new: str) -> str:
    return re.sub(rf"\b{old}\b", new, text)


def write_repro(p: Program, detail: str, out_dir: str) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"repro_seed{p.seed}.py")
    body = p.source() + f'''

# {p.describe()}
# Found: {detail.splitlines()[0] if detail else ""}
if __name__ == "__main__":
    import fxcpp  # noqa: F401
    from torch._dynamo.utils import same

    dtype = {DTYPES[p.dtype]}
    model = Program().eval().to(dtype)
    xs = make_inputs(dtype)
    with torch.no_grad():
        ref = model(*[x.clone() for x in xs])
        ref64 = __import__("copy").deepcopy(model).double()(*[x.double() for x in xs])
        res = torch.compile(model, backend="fxcpp")(*xs)
    ok = all(same(r, c, fp64_ref=r64, tol={1e-3 if p.dtype == "fp32" else 1e-2}, equal_nan=True)
             for r, c, r64 in zip(ref, res, ref64))
    print("matches eager" if ok else "DIFFERS from eager")
'''
    with open(path, "w") as f:
        f.write(body)
    return path


def run(n: int, seed: int, out_dir: str | None, verbose: bool = False) -> dict:
    counts = {"ok": 0, "skip": 0, "fail": 0, "traced": 0}
    failures, fallbacks, traced = [], [], []
    t0 = time.time()
    for s in range(seed, seed + n):
        p = generate(s)
        notes: list = []
        status, detail = check(p, notes)
        counts[status] += 1
        if status == "traced":
            traced.append((s, detail))
            print(f"traced layout seed {s}: {detail}", flush=True)
        if notes:
            fallbacks.append((s, notes))
            print(f"fallback seed {s}: {notes[0]}", flush=True)
        if status == "fail":
            small = shrink(p)
            where = write_repro(small, detail, out_dir) if out_dir else ""
            failures.append((s, detail.splitlines()[0], small.describe(), where))
            print(f"FAIL seed {s}: {detail.splitlines()[0]}\n  shrunk: {small.describe()}\n  {where}", flush=True)
        elif verbose:
            print(f"{status} seed {s}: {p.describe()[:200]}", flush=True)
    counts["seconds"] = round(time.time() - t0, 1)
    counts["failures"] = failures
    counts["fallbacks"] = fallbacks
    counts["traced_layouts"] = traced
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(HERE, "repros"))
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    c = run(a.n, a.seed, a.out, a.verbose)
    print(f"programs {a.n} (seeds {a.seed}..{a.seed + a.n - 1}): ok {c['ok']}, eager raised too {c['skip']}, "
          f"failed {c['fail']} in {c['seconds']} s; fxcpp warned (a correct fallback) on {len(c['fallbacks'])}; "
          f"output strides as Dynamo traced them, not eager's, on {c['traced']}")
    return 1 if c["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
