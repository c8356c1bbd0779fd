"""Micro-benchmarks for the physical limits of this machine, and how close ATen, fxcpp and inductor get.

    python -m benchmarks.micro.run [--quick] [--no-inductor] [--out DIR]

Writes micro.json and micro.md into DIR (default benchmarks/results/latest/).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import types
from pathlib import Path

import torch
import torch.utils.benchmark as tb

from . import native
from ..machine import command_line, machine_info, own_choice_cache, physical_cores, save_results

REPO = Path(__file__).resolve().parents[2]

# Memory-bound kernels, as models write them (one op alone is left to ATen's own kernel):
# a 4-op pointwise chain, an attention softmax with its scale and mask, a LayerNorm with its
# residual add, and RMSNorm written out op by op (LLaMA). Every tensor is larger than the 32 MiB
# L3 of the dev machine, so they measure DRAM like the triad does.
MEMORY_KERNELS = {
    "pointwise4": ((1 << 24,), lambda x: (torch.relu(x * 2 + 1) - 0.5) * x),
    # tanh costs ~2 cycles per element (Sleef, 1 ulp): with 2 cores it is compute-bound, not memory-bound
    "pointwise4_tanh": ((1 << 24,), lambda x: torch.tanh(torch.relu(x * 2 + 1))),
    "softmax_scale_mask": ((4096, 4096), None),
    "add_layer_norm": ((16384, 768), None),
    "rmsnorm": ((16384, 1024), None),
}


def _tiny(x):
    return ((x + 1) * 2).relu().sum()


def _own_code(fn, tag: str):
    """fn with a copy of its code object (named for tag), so that Dynamo's cache for it is its own."""
    code = fn.__code__.replace(co_name=f"{fn.__name__}_{tag}")
    return types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)


def _time(fn, args, threads: int, min_run_time: float) -> float:
    """Median seconds per call of fn(*args), after two warm-up calls (compilation, first-touch)."""
    fn(*args)
    fn(*args)
    timer = tb.Timer("fn(*args)", globals={"fn": fn, "args": args}, num_threads=threads)
    return timer.blocked_autorange(min_run_time=min_run_time).median


def _compiled(fn, backend: str):
    torch._dynamo.reset()  # each measurement compiles fresh, no recompile-limit carry-over
    return fn if backend == "eager" else torch.compile(fn, backend=backend)


def measure_peak(threads: int, quick: bool) -> dict:
    return native.fma_peak(threads, 0.25 if quick else 2.0)


def measure_gemm(threads: int, quick: bool, peak: dict) -> list:
    """Large GEMMs and a large convolution: eager ATen against fxcpp's oneDNN kernels
    (prepacked weights), as GFLOP/s and % of the measured FMA peak."""
    sizes = [1024] if quick else [1024, 2048, 4096]
    # bf16 on every host: where it has no native bf16, eager's row shows the emulated speed and
    # fxcpp's the fp32 path it takes instead.
    dtypes = [torch.float32, torch.bfloat16]
    rows = []

    def add(op, shape, key, fn, args, flops):
        sec = _time(fn, args, threads, 0.2 if quick else 2.0)
        gflops = flops / sec / 1e9
        peak_gflops = (peak.get(key) or {}).get("gflops_total")
        rows.append({"op": op, "n": shape, "dtype": key, "ms": sec * 1e3, "gflops": gflops,
                     "pct_peak": 100 * gflops / peak_gflops if peak_gflops else None})

    for dtype in dtypes:
        key = "fp32" if dtype == torch.float32 else "bf16"
        for n in sizes:
            a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
            add("torch.mm (eager)", n, key, torch.mm, (a, b), 2 * n**3)
            with torch.no_grad():
                lin = _compiled(torch.nn.functional.linear, "fxcpp")  # weight b: a prepacked [n, n] parameter
                add("F.linear (fxcpp, oneDNN)", n, key, lin, (a, b), 2 * n**3)
        # A ResNet-50 stage-2 3x3 convolution at batch 8 (channels-last in and out, as inside a chain).
        x = torch.randn(8, 128, 28, 28, dtype=dtype).contiguous(memory_format=torch.channels_last)
        w = torch.randn(128, 128, 3, 3, dtype=dtype)
        flops = 2 * 8 * 128 * 28 * 28 * 128 * 9
        conv = lambda x, w: torch.nn.functional.conv2d(x, w, padding=1)  # noqa: E731
        shape = "8x128x28x28, 3x3x128"
        with torch.no_grad():
            add("conv2d (eager)", shape, key, conv, (x, w), flops)
            add("conv2d (fxcpp, oneDNN)", shape, key, _compiled(conv, "fxcpp"), (x, w), flops)
    return rows


def _seeded_linear(k: int, n: int, dtype) -> torch.nn.Linear:
    """nn.Linear(k, n) with the same weights for every path of a row."""
    torch.manual_seed(0)
    return torch.nn.Linear(k, n).eval().to(dtype)


def _linear(k: int, n: int, dtype, choice: str | None, x: torch.Tensor):
    """A compiled function calling nn.Linear(k, n) (a parameter weight, so fxcpp may pack it),
    made with FXCPP_KERNEL_CHOICE=choice (None: fxcpp's own rule) and called once on x to settle
    its path. The call must happen while the variable is set: torch.compile compiles at the
    first call, and each kernel reads the variable when it is made.
    A function, not torch.compile(module): Dynamo's wrapper around a compiled module costs
    3-7 us per call under any backend (measure_module_wrapper), as much as the GEMV takes on
    an L2-sized weight; these rows time the kernels, the host-overhead rows the call.
    (Before commit 3cd847e the rows compiled the module with dynamic=False, 3.4 us more a call.)"""
    lin = _seeded_linear(k, n, dtype)
    old = os.environ.pop("FXCPP_KERNEL_CHOICE", None)
    if choice:
        os.environ["FXCPP_KERNEL_CHOICE"] = choice
    try:
        # A code object of its own per path: Dynamo keeps compiled code per code object, and a
        # call walks the guards of every entry before its own.
        call = _own_code(lambda x: lin(x), f"linear_{k}x{n}_{choice or 'default'}")
        # Not dynamic=False: Dynamo enters a config patch for it at every call, 3.4 us on this
        # host under any backend. Each path sees one shape, so the default compiles it static.
        fn = torch.compile(call, backend="fxcpp")
        with torch.no_grad():
            fn(x)
        return lin, fn
    finally:
        os.environ.pop("FXCPP_KERNEL_CHOICE", None)
        if old is not None:
            os.environ["FXCPP_KERNEL_CHOICE"] = old


def measure_gemv(threads: int, quick: bool) -> list:
    """Small-M GEMMs (batch-1 serving, decoding): GB/s of weight traffic (each weight byte read
    once per call) and % of a triad timed just before, for eager (MKL / oneDNN in ATen),
    fxcpp's default choice, fxcpp's GEMV forced and oneDNN's primitive on a packed weight
    forced: the last two are what the default rule (kGemvMaxM) was chosen from."""
    sizes = [(1024, 1024), (4096, 4096)] if quick else [(k, n) for k in (512, 1024, 2048, 4096)
                                                        for n in (512, 1024, 2048, 4096)]
    ms = [1, 16] if quick else [1, 4, 16]
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        key = "fp32" if dtype == torch.float32 else "bf16"
        for k, n in sizes:
            triad = native.stream_triad(threads, 64, 10)["gbps_median"]
            wbytes = k * n * dtype.itemsize
            for m in ms:
                x = torch.randn(m, k, dtype=dtype)
                row = {"m": m, "k": k, "n": n, "dtype": key, "weight_mb": wbytes / 1e6, "triad_gbps": triad}
                fns = {}
                # One reset per shape, none between its paths: a reset would drop the compiled
                # paths made before it, and their next call would recompile without the forced
                # choice. (Across shapes, Dynamo's recompile limit needs it.)
                torch._dynamo.reset()
                with torch.no_grad():
                    for name, choice in (("eager", None), ("fxcpp", None), ("gemv", "gemv"), ("onednn", "onednn")):
                        try:
                            if name == "eager":
                                fns[name] = _seeded_linear(k, n, dtype)
                                continue
                            lin, fn = _linear(k, n, dtype, choice, x)
                            if name == "fxcpp":
                                row["fxcpp_path"] = _path(lin, x)
                            fns[name] = fn
                        except Exception as e:  # noqa: BLE001 - one failing path must not lose the rest
                            row[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
                    # Interleaved rounds, median per path: a burst of this VM's noise hits one
                    # round of every path, not all of one path's time.
                    samples = {name: [] for name in fns}
                    for _ in range(3):
                        for name, fn in fns.items():
                            try:
                                samples[name].append(_time(fn, (x,), threads, 0.02 if quick else 0.07))
                            except Exception as e:  # noqa: BLE001
                                row[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
                    for name, s in samples.items():
                        if name in row:
                            continue
                        sec = statistics.median(s)
                        row[name] = {"us": sec * 1e6, "gbps": wbytes / sec / 1e9,
                                     "pct_triad": 100 * wbytes / sec / 1e9 / triad}
                rows.append(row)
    torch._dynamo.reset()
    return rows


def _path(lin, x) -> str:
    """Which implementation fxcpp's default rule ran (explain's impl column, its first word)."""
    import fxcpp

    impl = [r.impl for r in fxcpp.explain(lin, x).rows if r.kernel == "onednn" and r.impl]
    return impl[0].split(",")[0] if impl else "?"


def _memory_fn(name):
    shape, fn = MEMORY_KERNELS[name]
    x = torch.randn(shape)
    n = shape[-1]
    if name == "softmax_scale_mask":
        mask = torch.randn(1, n)
        return (lambda x, m: torch.softmax(x * 0.125 + m, dim=-1)), (x, mask)
    if name == "add_layer_norm":
        r, w, b = torch.randn(shape), torch.randn(n), torch.randn(n)
        return (lambda x, r, w, b: torch.nn.functional.layer_norm(x + r, (n,), w, b)), (x, r, w, b)
    if name == "rmsnorm":
        w = torch.randn(n)
        return (lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w), (x, w)
    return fn, (x,)


def measure_memory(threads: int, quick: bool, backends: list) -> list:
    """GB/s of minimal traffic per kernel, against a triad timed right before it (this VM's
    bandwidth drifts by tens of percent from minute to minute): medians for both."""
    rows = []
    for name, (shape, _) in MEMORY_KERNELS.items():
        fn, args = _memory_fn(name)
        # Minimal traffic: read every input once, write the output once.
        nbytes = sum(a.nbytes for a in args) + args[0].nbytes
        row = {"kernel": name, "shape": list(shape), "mbytes": nbytes / 1e6}
        expected = fn(*args)
        for backend in backends:
            try:
                compiled = _compiled(fn, backend)
                compiled(*args)
                triad = native.stream_triad(threads, 64, 10)["gbps_median"]
                sec = _time(compiled, args, threads, 0.2 if quick else 1.0)
                gbps = nbytes / sec / 1e9
                row[backend] = {"ms": sec * 1e3, "gbps": gbps, "triad_gbps": triad, "pct_triad": 100 * gbps / triad,
                                "matches_eager": bool(torch.allclose(compiled(*args), expected, atol=1e-4, rtol=1e-4))}
            except Exception as e:  # one failing backend must not lose the rest of the run
                row[backend] = {"error": f"{type(e).__name__}: {e}"[:300]}
        rows.append(row)
        torch._dynamo.reset()
    return rows


def measure_overhead(threads: int, quick: bool, backends: list) -> dict:
    x = torch.randn(16)
    out = {"graph": "((x + 1) * 2).relu().sum(), x: 16 x fp32, under torch.no_grad()"}
    # Interleaved rounds, median per backend: the gap to eager is what the target names.
    fns = {}
    torch._dynamo.reset()
    for backend in backends:
        try:
            with torch.no_grad():
                # A code object of its own per backend, as a service compiling one function has:
                # Dynamo keeps compiled code per code object, and a call may walk the entries
                # before its own. (Measured with one shared code object against one each, five
                # interleaved rounds: no difference, 19.0 against 19.0 us for fxcpp.)
                fns[backend] = _tiny if backend == "eager" else torch.compile(_own_code(_tiny, backend), backend=backend)
                fns[backend](x)
        except Exception as e:
            out[backend] = {"error": f"{type(e).__name__}: {e}"[:300]}
    samples = {b: [] for b in fns}
    with torch.no_grad():
        for _ in range(3):
            for backend, fn in fns.items():
                samples[backend].append(_time(fn, (x,), threads, 0.1 if quick else 0.7))
    for backend, s in samples.items():
        out[backend] = {"us_per_call": statistics.median(s) * 1e6}
    torch._dynamo.reset()
    return out


def measure_module_wrapper(threads: int, quick: bool) -> dict:
    """What torch.compile(module) costs per call beside torch.compile of a function calling the
    module, under Dynamo alone (backend="eager") and fxcpp: nn.Linear(512, 512) at M = 1.
    The module form's two backends share one code object (Linear.forward), so a call may also
    walk the other backend's cache entry (its guards pass, its backend does not match); the
    function form has a code object per backend."""
    torch.manual_seed(0)
    lin, x = torch.nn.Linear(512, 512).eval(), torch.randn(1, 512)
    out = {"graph": "nn.Linear(512, 512) on a 1 x 512 fp32 input, under torch.no_grad()"}
    fns = {"eager": lin}
    torch._dynamo.reset()
    with torch.no_grad():
        for backend in ("eager", "fxcpp"):
            fns[f"{backend}: torch.compile(module)"] = torch.compile(lin, backend=backend)
            fns[f"{backend}: torch.compile(lambda x: module(x))"] = torch.compile(_own_code(lambda x: lin(x), backend),
                                                                                 backend=backend)
        for fn in fns.values():
            fn(x)
        samples = {name: [] for name in fns}
        for _ in range(3):
            for name, fn in fns.items():
                samples[name].append(_time(fn, (x,), threads, 0.1 if quick else 0.5))
    torch._dynamo.reset()
    out["us_per_call"] = {name: statistics.median(s) * 1e6 for name, s in samples.items()}
    return out


def _fmt(cell, key, pct_key=None):
    if not isinstance(cell, dict):
        return "-"
    if "error" in cell:
        return "error"
    s = f"{cell[key]:.1f}"
    return s + (f" ({cell[pct_key]:.0f}%)" if pct_key and cell.get(pct_key) is not None else "")


def to_markdown(r: dict) -> str:
    m, pk, tr = r["machine"], r["peak"], r["triad"]
    backends = r["backends"]
    host = (m.get("host") or {}).get("summary", "?")
    lines = [
        "# Micro-benchmarks: physical limits",
        "",
        f"Host ISA: {host}.",
        "",
        f"{m['cpu_model']}, {m['physical_cores']} cores, {m['threads']} threads, L3 {m['l3']}, "
        f"torch {m['torch_version']}, commit {(m['git_commit'] or '?')[:10]}{' (dirty)' if m['git_dirty'] else ''}"
        f"{', quick' if r['quick'] else ''}. `{m['command']}`",
        "",
        "## Peak FLOP/s (FMA microbenchmark, %s)" % pk["isa"],
        "",
        "| dtype | GFLOP/s 1 core | GFLOP/s all cores | per core |",
        "|---|---|---|---|",
    ]
    for key in ("fp32", "bf16"):
        if pk.get(key):
            p = pk[key]
            lines.append(f"| {key} | {p['gflops_1core']:.1f} | {p['gflops_total']:.1f} | {p['gflops_per_core']:.1f} |")
    if r.get("sections") and len(r["sections"]) < len(SECTIONS):
        lines += ["", f"Sections run: {', '.join(r['sections'])} (`--sections`)."]
    if "gemm" in r:
        lines += ["", "## GEMM and convolution (square n x n x n; a ResNet-50 3x3 conv)", "",
                  "| op | size | dtype | ms | GFLOP/s | % of peak |", "|---|---|---|---|---|---|"]
    for g in r.get("gemm", []):
        pct = f"{g['pct_peak']:.0f}%" if g["pct_peak"] is not None else "-"
        lines.append(f"| {g.get('op', 'torch.mm')} | {g['n']} | {g['dtype']} | {g['ms']:.2f} | {g['gflops']:.1f} | {pct} |")
    lines += [
        "",
        f"## Bandwidth (triad: {tr['gbps_best']:.1f} GB/s best, {tr['gbps_median']:.1f} median; "
        f"{tr['threads']} threads, 3 x {tr['array_mib']} MiB)",
    ]
    if "memory" in r:
        lines += [
            "",
            "GB/s of minimal traffic (inputs read once + output written once); in parentheses % of a triad",
            "timed just before (medians for both: this VM's bandwidth drifts from minute to minute).",
            "",
            "| kernel | shape | MB | " + " | ".join(backends) + " |",
            "|---|---|---|" + "---|" * len(backends),
        ]
    for k in r.get("memory", []):
        cells = " | ".join(_fmt(k.get(b), "gbps", "pct_triad") for b in backends)
        lines.append(f"| {k['kernel']} | {'x'.join(map(str, k['shape']))} | {k['mbytes']:.0f} | {cells} |")
    if r.get("gemv"):
        lines += ["", "## Small-M GEMM (nn.Linear(K, N) on an [M, K] input)", "",
                  "GB/s of weight traffic (K x N weights read once per call); in parentheses % of a triad timed",
                  "before each (K, N). `fxcpp` is the default rule (its path in the last column); `gemv` and",
                  "`onednn` are each path forced (FXCPP_KERNEL_CHOICE), what the rule was chosen from.", "",
                  "| dtype | M | K x N | weight MB | eager | fxcpp | gemv | onednn | fxcpp / eager time | fxcpp path |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for g in r["gemv"]:
            cells = " | ".join(_fmt(g.get(b), "gbps", "pct_triad") for b in ("eager", "fxcpp", "gemv", "onednn"))
            ratio = (f"{g['fxcpp']['us'] / g['eager']['us']:.2f}" if "us" in g.get("fxcpp", {}) and "us" in g.get("eager", {})
                     else "-")
            lines.append(f"| {g['dtype']} | {g['m']} | {g['k']}x{g['n']} | {g['weight_mb']:.1f} | {cells} | {ratio} | "
                         f"{g.get('fxcpp_path', '-')} |")
    o = r.get("overhead")
    if o:
        lines += ["", f"## Host overhead: {o['graph']}", "", "| " + " | ".join(backends) + " |", "|" + "---|" * len(backends),
                  "| " + " | ".join(_fmt(o.get(b), "us_per_call") + " us" for b in backends) + " |", ""]
    gaps = [f"{b} {o[b]['us_per_call'] - o['eager']['us_per_call']:+.1f} us" for b in backends[1:]
            if o and "us_per_call" in o.get(b, {}) and "us_per_call" in o.get("eager", {})]
    if gaps:
        lines += ["Per call over eager (median of 3 interleaved rounds): " + ", ".join(gaps) + ".", ""]
    w = r.get("module_wrapper")
    if w:
        lines += [f"## torch.compile(module) against a compiled function: {w['graph']}", "",
                  "| how it is called | us per call |", "|---|---|"]
        lines += [f"| {name} | {us:.1f} |" for name, us in w["us_per_call"].items()]
        lines += ["", "The Small-M GEMM rows compile a function calling the module (`_linear`).", ""]
    return "\n".join(lines)


SECTIONS = ("gemm", "memory", "gemv", "overhead", "module_wrapper")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short timings, GEMM n=1024 only")
    ap.add_argument("--no-inductor", action="store_true", help="skip torch.compile's default backend (slow to compile)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "latest"))
    ap.add_argument("--threads", type=int, default=physical_cores(), help="default: physical cores")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help="comma-separated, from %(default)s (the FMA peak and the triad always run). Under an "
                         "emulated AVX2 host (ATEN_CPU_CAPABILITY=avx2), eager's bf16 GEMMs run torch's scalar "
                         "fallback: the gemm and gemv sections then take hours")
    args = ap.parse_args(argv)
    unknown = set(args.sections.split(",")) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections {sorted(unknown)}; choose from {SECTIONS}")

    torch.set_num_threads(args.threads)
    backends = ["eager", "fxcpp"] + ([] if args.no_inductor else ["inductor"])
    with own_choice_cache("micro"):
        return _run(args, argv, backends)


def _run(args, argv, backends) -> dict:
    t0 = time.time()
    r = {"machine": machine_info(args.threads, command_line("benchmarks.micro.run", argv)), "quick": args.quick, "backends": backends}
    r["peak"] = measure_peak(args.threads, args.quick)
    r["triad"] = native.stream_triad(args.threads, 64, 10 if args.quick else 50)
    sections = args.sections.split(",")
    r["sections"] = sections
    if "gemm" in sections:
        r["gemm"] = measure_gemm(args.threads, args.quick, r["peak"])
    if "memory" in sections:
        r["memory"] = measure_memory(args.threads, args.quick, backends)
    if "gemv" in sections:
        r["gemv"] = measure_gemv(args.threads, args.quick)
    if "overhead" in sections:
        r["overhead"] = measure_overhead(args.threads, args.quick, backends)
    if "module_wrapper" in sections:
        r["module_wrapper"] = measure_module_wrapper(args.threads, args.quick)
    r["seconds"] = time.time() - t0

    out = save_results(args.out, "micro", r, to_markdown(r))
    print(f"wrote {out / 'micro.json'} and {out / 'micro.md'} in {r['seconds']:.0f} s")
    return r


if __name__ == "__main__":
    main()
