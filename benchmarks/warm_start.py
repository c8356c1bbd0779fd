"""Warm start: time to first result in a fresh process, with fxcpp's choice cache empty (cold)
and filled by an earlier process (warm), and with it corrupted; for torch.compile, and for
precompile (torch's aot_compile, backend/precompile.py), where the warm process also skips
Dynamo's trace.

Each start is its own process: import, build the model (not timed), then time from
torch.compile to the first output. The cold and warm processes alternate; medians are
reported. Under torch.compile, Dynamo's own trace and aot_autograd's run again in every
process (README, "Serving"); their share is recorded from Dynamo's compile-time metrics.

    python -m benchmarks.warm_start --models bert_base resnet50 --batches 1 8
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from .machine import REPO, command_line, machine_info, save_results


def child(a: dict) -> dict:
    import torch

    from . import suite

    spec = next(s for s in suite.SUITE + suite.TINY if s.name == a["model"])
    model, inputs = spec.build(a["batch"])
    import warnings

    import fxcpp  # noqa: F401 - imported before the clock starts, as a service would
    from torch._dynamo.utils import compilation_time_metrics  # {name: [seconds, ...]} (dynamo_timed)

    from fxcpp.compiled import CompiledAtenGraph
    from fxcpp.explain import recording

    graphs: list = []
    kw = dict(spec.call_kwargs)

    def f(model, *inputs):  # precompile: the model is an argument, so its weights are inputs
        return model(*inputs, **kw)

    with warnings.catch_warnings(record=True) as caught, recording(graphs):
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        with torch.no_grad():
            if a["mode"] == "torch.compile":
                compiled = torch.compile(model, backend="fxcpp")
                run = lambda: suite.call(spec, compiled, inputs)  # noqa: E731
            elif a["phase"] == "cold":  # trace, compile, save: what a build step does once
                opts = {"guard_filter_fn": fxcpp.precompile.keep_serializable_guards_unsafe}
                with torch._dynamo.config.patch(enable_aot_compile=True):  # off by default in torch 2.11
                    saved = torch.compile(f, fullgraph=True, backend="fxcpp", options=opts).aot_compile(((model, *inputs), {}))
                run = lambda: saved(model, *inputs)  # noqa: E731
            else:  # a fresh process loads it: no Dynamo trace
                loaded = torch.compiler.load_compiled_function(open(a["artifact"], "rb"))
                run = lambda: loaded(model, *inputs)  # noqa: E731
            out = run()
            if a["mode"] == "precompile" and a["phase"] == "cold":
                saved.save_compiled_function(a["artifact"])
        first_s = time.perf_counter() - t0
    # What the choice caches of this process's partitions did: choices taken, choices written.
    caches = [p.choices for g in graphs if isinstance(g, CompiledAtenGraph) for p in g.cpp_partitions() if p.choices]
    with torch.no_grad():
        t1 = time.perf_counter()
        run()
        second_s = time.perf_counter() - t1
        ref = suite.call(spec, model, inputs)
    times = {k: sum(v) for k, v in compilation_time_metrics.items()}
    out0 = out[0] if isinstance(out, (tuple, list)) else out
    ref0 = ref[0] if isinstance(ref, (tuple, list)) else ref
    torch.save(out0, a["out"])
    return {"first_s": first_s, "second_s": second_s,
            "dynamo_s": times.get("_compile.compile_inner", 0.0) + times.get("fullgraph_capture", 0.0),
            "aot_s": times.get("create_aot_dispatcher_function", 0.0),
            "cache_hits": sum(c.hits for c in caches), "cache_recorded": sum(c.recorded for c in caches),
            "matches_eager": bool(torch.allclose(out0, ref0, rtol=1e-3, atol=1e-3)),
            "warnings": [str(w.message)[:200] for w in caught if "choice cache" in str(w.message)]}


def run_child(a: dict, cache_dir: str) -> dict:
    env = {**os.environ, "FXCPP_CACHE_DIR": cache_dir}
    env.pop("FXCPP_CACHE", None)
    p = subprocess.run([sys.executable, "-m", "benchmarks.warm_start", "--child", json.dumps(a)], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(f"child failed: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def measure(model: str, batch: int, mode: str, rounds: int, scratch: str) -> dict:
    import torch

    rec = {"model": model, "batch": batch, "mode": mode, "cold": [], "warm": []}
    warm_dir = os.path.join(scratch, f"{model}-b{batch}-{mode}-warm")
    base = {"model": model, "batch": batch, "mode": mode, "artifact": os.path.join(scratch, f"{model}-b{batch}.pt2")}
    outs = []
    for r in range(rounds):
        cold_dir = tempfile.mkdtemp(dir=scratch)
        a = {**base, "phase": "cold", "out": os.path.join(scratch, f"cold{r}.pt")}
        if r > 0:  # the warm processes load the first cold process's artifact
            a["artifact"] += ".discarded"
        rec["cold"].append(run_child(a, cold_dir))
        if r == 0:
            shutil.copytree(cold_dir, warm_dir)  # the first cold process fills the warm cache
        outs.append(torch.load(a["out"]))
        a = {**base, "phase": "warm", "out": os.path.join(scratch, f"warm{r}.pt")}
        rec["warm"].append(run_child(a, warm_dir))
        outs.append(torch.load(a["out"]))
    rec["outputs_identical"] = all(torch.equal(outs[0], o) for o in outs[1:])
    # Every cache file damaged: the process must warn, measure again and still be right.
    for f in os.listdir(os.path.join(warm_dir, "choices")):
        with open(os.path.join(warm_dir, "choices", f), "r+b") as fh:
            fh.truncate(max(1, os.path.getsize(fh.name) // 2))
    a = {**base, "phase": "warm", "out": os.path.join(scratch, "corrupt.pt")}
    rec["corrupt"] = run_child(a, warm_dir)
    rec["corrupt_identical"] = torch.equal(outs[0], torch.load(a["out"]))
    for k in ("first_s", "dynamo_s", "aot_s"):
        rec[f"cold_{k}"] = statistics.median(c[k] for c in rec["cold"])
        rec[f"warm_{k}"] = statistics.median(w[k] for w in rec["warm"])
    rec["warm_over_cold"] = rec["warm_first_s"] / rec["cold_first_s"]
    return rec


def to_markdown(res: dict) -> str:
    m = res["machine"]
    lines = [f"# Warm start (fxcpp choice cache), {m['date']}", "",
             f"`{m['command']}`", "",
             f"Host: {m['cpu_model']}, {m['torch_threads']} threads, {(m['host'] or {}).get('summary')}; "
             f"torch {m['torch_version']}; commit {m['git_commit']}{' (dirty)' if m['git_dirty'] else ''}.", "",
             "Time from torch.compile to the first output in a fresh process (median of "
             f"{res['args']['rounds']} alternating cold/warm processes). Dynamo and aot: their share of it, "
             "run again in every process.", "",
             "torch.compile: each process traces with Dynamo; the warm one takes the choice cache. "
             "precompile (backend/precompile.py): the cold process traces, compiles and saves with aot_compile; "
             "the warm one loads that and the choice cache, and Dynamo does not trace. "
             "warm / cold: against the same mode's cold, and against torch.compile's cold.", "",
             "| model | batch | mode | cold s | warm s | warm / cold | warm / torch.compile cold | "
             "Dynamo s (cold, warm) | of which aot s | outputs identical | corrupt cache: warned, matches |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    plain = {(r["model"], r["batch"]): r["cold_first_s"] for r in res["records"] if r["mode"] == "torch.compile"}
    for r in res["records"]:
        c = r["corrupt"]
        vs = plain.get((r["model"], r["batch"]))
        lines.append(f"| {r['model']} | {r['batch']} | {r['mode']} | {r['cold_first_s']:.2f} | {r['warm_first_s']:.2f} | "
                     f"{r['warm_over_cold']:.2f} | {(r['warm_first_s'] / vs) if vs else float('nan'):.2f} | "
                     f"{r['cold_dynamo_s']:.2f}, {r['warm_dynamo_s']:.2f} | "
                     f"{r['cold_aot_s']:.2f}, {r['warm_aot_s']:.2f} | {r['outputs_identical']} | "
                     f"{bool(c['warnings'])}, {c['matches_eager'] and r['corrupt_identical']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--models", nargs="+", default=["bert_base", "resnet50"])
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", nargs="+", default=["torch.compile", "precompile"], choices=["torch.compile", "precompile"])
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "warm_start"))
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return {}
    import torch

    res = {"machine": machine_info(torch.get_num_threads(), command_line("benchmarks.warm_start", argv)),
           "args": {"rounds": args.rounds}, "records": []}
    scratch = tempfile.mkdtemp(prefix="fxcpp-warm-start-")
    try:
        for model in args.models:
            for batch in args.batches:
                for mode in args.modes:
                    rec = measure(model, batch, mode, args.rounds, scratch)
                    print(json.dumps({k: v for k, v in rec.items() if k not in ("cold", "warm")}), flush=True)
                    res["records"].append(rec)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    save_results(args.out, "warm_start", res, to_markdown(res))
    return res


if __name__ == "__main__":
    main()
