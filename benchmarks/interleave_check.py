"""One suite case, eager against fxcpp, timed the harness's way (first call, then interleaved
median), with the path fxcpp's first call chose for each GEMM/convolution, under three
placements of the weights:

- `shared`: eager and the compiled model read one copy of the weights;
- `copies`: each configuration has its own copy, as the harness gives it (interleaved calls
  then evict each other's weights where they do not fit in the cache together);
- `flushed`: own copies, and a 96 MiB write before every call (nothing stays in any cache:
  the weights come from DRAM and the call's own code and data are cold).

Beside eager and fxcpp it times `torch.compile(backend="eager")`: Dynamo's guards and frame
around eager's own kernels, i.e. what any torch.compile backend pays per call before its
kernels run.

    python -m benchmarks.interleave_check --model mlp --batch 1 --dtype bf16 [--runs 3] [--out DIR]

Where a case is slower under fxcpp than eager: run it with FXCPP_KERNEL_CHOICE=aten (eager's
kernels under fxcpp's call machinery) to separate the kernels' share from the call's fixed cost.
"""
import argparse
import copy
import statistics
import time

import torch

from . import configs, suite
from .harness import DTYPES, first_call, timed
from .machine import command_line, machine_info, save_results

PLACEMENTS = ("shared", "copies", "flushed")
CONFIGS = ("eager", "dynamo_eager", "fxcpp")


def timed_flushed(fns: dict, inputs, repeats: int) -> dict:
    """Per-call times, interleaved, each call after a write that evicts every cache."""
    scratch = torch.empty(96 << 20, dtype=torch.uint8)
    samples = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            scratch.add_(1)
            t0 = time.perf_counter()
            fn(*inputs)
            samples[name].append(time.perf_counter() - t0)
    return samples


def once(model_name: str, batch: int, dtype: str, placement: str) -> tuple[dict, list[str]]:
    from fxcpp.explain import Report

    torch._dynamo.reset()
    spec = next(s for s in suite.SUITE if s.name == model_name)
    model, inputs = spec.build(batch)
    model, inputs = suite.to_dtype(model, inputs, DTYPES[dtype], "cpu")

    def own():
        return model if placement == "shared" else copy.deepcopy(model)

    rec = []
    with torch.no_grad():
        dynamo_model, fxcpp_model = own(), own()
        dynamo_eager = torch.compile(lambda *x: suite.call(spec, dynamo_model, x), backend="eager")
        dynamo_eager(*inputs)
        cfg = configs.CONFIGS["fxcpp"]
        fn = cfg.compile(lambda *x: suite.call(spec, fxcpp_model, x))
        first_call(cfg, fn, inputs, "cpu", rec)
        fns = {"eager": lambda *x: suite.call(spec, model, x), "dynamo_eager": dynamo_eager, "fxcpp": fn}
        # settle=0: each sample directly after the other configurations' calls, whose effect on
        # the caches is what the `copies` placement measures.
        samples = timed_flushed(fns, inputs, 60) if placement == "flushed" else timed(fns, inputs, "cpu", 30, 3, settle=0)
    medians = {k: statistics.median(v) * 1e3 for k, v in samples.items()}
    return medians, [f"{r.node}: {r.impl}" for r in Report(rec).rows if r.impl]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--placements", default=",".join(PLACEMENTS))
    ap.add_argument("--out", default=None, help="write interleave_check.{md,json} there")
    a = ap.parse_args(argv)
    info = machine_info(torch.get_num_threads(), command_line("benchmarks.interleave_check", argv))
    rows, paths = [], {}
    for run in range(a.runs):
        for placement in a.placements.split(","):  # alternated within each run: drift hits all alike
            ms, paths[placement] = once(a.model, a.batch, a.dtype, placement)
            rows.append({"run": run, "placement": placement, "ms": ms})
            print(f"{placement:8s} " + ", ".join(f"{k} {ms[k]:.3f} ms ({ms[k] / ms['eager']:.2f}x)" for k in CONFIGS),
                  flush=True)
    host = info.get("host") or {}
    md = [f"# {a.model} batch {a.batch} {a.dtype}: eager, torch.compile(backend=\"eager\") and fxcpp by weight placement",
          "", f"Machine: {info['cpu_model']}, {info['torch_threads']} threads, torch {info['torch_version']}, "
          f"commit {(info['git_commit'] or '?')[:10]}{' (dirty)' if info['git_dirty'] else ''}",
          f"Host ISA: {host.get('summary', info['isa_flags'])}; L3 {info['l3']}",
          f"Command: `{info['command']}`", "",
          "Median ms per call (ratio to eager). `shared`: one copy of the weights; `copies`: one per "
          "configuration (the harness's way); `flushed`: own copies and every cache evicted before each call.", "",
          "| run | placement | eager | dynamo_eager | fxcpp |", "|---|---|---|---|---|"]
    for r in rows:
        ms = r["ms"]
        md.append(f"| {r['run']} | {r['placement']} | " + " | ".join(
            f"{ms[k]:.3f} ({ms[k] / ms['eager']:.2f}x)" for k in CONFIGS) + " |")
    md += ["", "Paths fxcpp's first call chose (last run):", ""]
    for placement, ps in paths.items():
        md += [f"- {placement}: " + "; ".join(ps)]
    md = "\n".join(md) + "\n"
    if a.out:
        save_results(a.out, "interleave_check", {"machine": info, "rows": rows, "paths": paths}, md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
