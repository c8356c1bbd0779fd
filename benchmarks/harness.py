"""The suite harness: eager, Inductor and fxcpp side by side in one process.

    python -m benchmarks.harness [--quick] [--models a,b] [--configs eager,fxcpp] [--dtypes fp32,bf16]
                                 [--device cpu|cuda] [--repeats 30] [--no-isolated] [--out DIR]

Per model × batch × dtype and configuration: a cold compile and the peak memory,
each configuration alone in a fresh process (benchmarks/isolated.py); in this
process a warm compile (Dynamo reset, on-disk caches kept), accuracy against an
fp64 reference (torch._dynamo.utils.same, as PyTorch's own harness, through
fxcpp.verify.same_as_eager: stricter where an output holds a NaN), interleaved
latency (median and quartiles of ≥30 repeats) and fxcpp's kernel counts.
Compile times are the wall time of the first call (compiling plus one run).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time

import torch
from fxcpp.verify import same_as_eager  # the harness rule, strict where an output holds a NaN

from . import configs as cfgs
from . import machine, report, suite

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
TOLERANCE = {"fp32": 1e-3, "bf16": 1e-2}


def machine_info(device: str, argv: list[str]) -> dict:
    info = machine.machine_info(torch.get_num_threads(), " ".join(["python", "-m", "benchmarks.harness"] + argv))
    info["device"] = device
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
    return info


def bf16_supported(device: str) -> bool:
    if device == "cuda":
        return torch.cuda.is_bf16_supported()
    # Every CPU runs bf16: natively with AVX512_BF16/AMX, otherwise fxcpp computes it as fp32
    # (issue 10), and eager's emulated time is the baseline the user would see.
    return True


def sync(device: str):
    if device == "cuda":
        torch.cuda.synchronize()


def first_call(cfg, fn, inputs, device, record_into=None):
    """Compile (at the first call) and run once; returns (output, seconds)."""
    from fxcpp.explain import recording

    torch.cuda.reset_peak_memory_stats() if device == "cuda" else None
    t0 = time.perf_counter()
    with cfg.compile_context(), recording(record_into if record_into is not None else []):
        out = fn(*inputs)
    sync(device)
    return out, time.perf_counter() - t0


def timed(fns: dict, inputs, device, repeats: int, warmup: int, settle: int = 1) -> dict:
    """Interleave the configurations, as torch's dynamo harness does: noise hits them alike.
    Each sample follows `settle` untimed calls of its own configuration, so it times that
    configuration and not the cache its neighbour left: an emulated-bf16 eager call (38 ms)
    made the next fxcpp ResNet-20 call 1.9x slower than one following fxcpp itself
    (benchmarks/results/dense-avx2-emulated/HOW.md)."""
    inner = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn(*inputs)
        sync(device)
        t0 = time.perf_counter()
        fn(*inputs)
        sync(device)
        inner[name] = max(1, int(2e-3 / max(time.perf_counter() - t0, 1e-9)))  # samples of >= ~2 ms
    samples = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            for _ in range(settle):
                fn(*inputs)
            sync(device)
            t0 = time.perf_counter()
            for _ in range(inner[name]):
                fn(*inputs)
            sync(device)
            samples[name].append((time.perf_counter() - t0) / inner[name])
    return samples


def isolated_run(spec_name, batch, dtype, device, config, tiny) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.isolated", json.dumps(
        {"model": spec_name, "batch": batch, "dtype": dtype, "device": device, "config": config, "tiny": tiny})]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=root, timeout=1800)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_case(spec, batch, dtype_name, device, configs, args) -> list[dict]:
    records, fns, inputs = prepare_case(spec, batch, dtype_name, device, configs, args)
    samples = time_case(records, fns, inputs, device, args)
    return finish_case(records, samples, spec, batch, dtype_name, device, args)


def run_cases_interleaved(spec, batch, dtype_names, device, configs, args) -> list[dict]:
    """One model in several dtypes, every (dtype, configuration) timed in one interleaved loop:
    a dtype against another is then compared under the same machine state, as configurations
    are (a case at a time, host load drifting between cases moved a bf16 / fp32 ratio by 0.15)."""
    prepared = {d: prepare_case(spec, batch, d, device, configs, args) for d in dtype_names}
    joint, records = {}, []
    for d, (recs, fns, inputs) in prepared.items():
        records += recs
        for name, fn in fns.items():
            joint[(d, name)] = lambda fn=fn, inputs=inputs: fn(*inputs)
    samples = time_case(records, joint, (), device, args)
    out = []
    for d, (recs, fns, _) in prepared.items():
        out += finish_case(recs, {name: samples[(d, name)] for name in fns if (d, name) in samples},
                           spec, batch, d, device, args)
    return out


def time_case(records, fns, inputs, device, args) -> dict:
    """The samples of each callable in fns; on an error, every record being timed says so."""
    try:
        with torch.no_grad():
            return timed(fns, inputs, device, args.repeats, args.warmup, args.settle)
    except Exception as e:  # noqa: BLE001
        for rec in records:
            if rec["status"] == "ok" or rec["status"] == "accuracy_fail":
                rec.update(status="run_error", error=f"{type(e).__name__}: {e}"[:300])
        return {}


def prepare_case(spec, batch, dtype_name, device, configs, args):
    """Build the model in the dtype, compile each configuration (cold and warm) and check its
    output: the records, the callables to time, and their inputs."""
    dtype = DTYPES[dtype_name]
    model, inputs = spec.build(batch)
    model64, inputs64 = suite.to_dtype(copy.deepcopy(model), inputs, torch.float64, device)
    model, inputs = suite.to_dtype(model, inputs, dtype, device)
    base = {"model": spec.name, "kind": spec.kind, "batch": batch, "dtype": dtype_name, "device": device}
    records, fns = [], {}
    with torch.no_grad():
        ref64 = suite.call(spec, model64, inputs64)
        del model64
        eager_out = suite.call(spec, model, inputs)
        for cfg in configs:
            rec = dict(base, config=cfg.name, status="ok", error=None, accuracy_ok=None, kernel_counts=None)
            records.append(rec)
            # Each configuration runs its own copy: interleaved calls then share no parameter
            # (an eager op that copies a parameter fxcpp write-guards would slow both).
            own = copy.deepcopy(model)
            warm_own = copy.deepcopy(model) if cfg.releases_params else own  # the cold compile empties `own`
            try:
                torch._dynamo.reset()
                graphs = []
                fn = cfg.compile(cfgs.target(cfg, spec, own))
                # Cold only when this process has not compiled the model before; see isolated.py.
                out, rec["compile_s_cold"] = first_call(cfg, fn, inputs, device, graphs)
                if cfg.name.startswith("fxcpp"):
                    from fxcpp.explain import Report

                    report = Report(graphs)
                    rec["kernel_counts"], rec["ran_counts"] = report.kernel_counts, report.ran_counts
                torch._dynamo.reset()  # warm: Dynamo starts over, on-disk caches stay
                fn = cfg.compile(cfgs.target(cfg, spec, warm_own))
                out, rec["compile_s_warm"] = first_call(cfg, fn, inputs, device)
            except Exception as e:  # noqa: BLE001 - a configuration that fails is reported, not fatal
                rec.update(status="compile_error", error=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
                continue
            rec["accuracy_ok"] = bool(same_as_eager(eager_out, out, fp64_ref=ref64, tol=TOLERANCE[dtype_name]))
            if not rec["accuracy_ok"]:
                rec["status"] = "accuracy_fail"
            fns[cfg.name] = fn
    return records, fns, inputs


def finish_case(records, samples, spec, batch, dtype_name, device, args) -> list[dict]:
    """Latencies from the samples; peak memory and cold compile from isolated processes."""
    eager_median = statistics.median(samples["eager"]) if "eager" in samples else None
    for rec in records:
        s = samples.get(rec["config"])
        if not s:
            continue
        q = statistics.quantiles(s, n=4)
        rec.update(latency_ms_median=statistics.median(s) * 1e3, latency_ms_p25=q[0] * 1e3,
                   latency_ms_p75=q[2] * 1e3, repeats=len(s))
        if eager_median:
            rec["speedup"] = eager_median / statistics.median(s)
    if args.isolated:
        for rec in records:
            if rec["status"] in ("ok", "accuracy_fail"):
                rec.update(isolated_run(spec.name, batch, dtype_name, device, rec["config"], args.tiny))
        for key in ("peak_rss_mb", "settled_rss_mb", "cuda_max_alloc_mb"):  # each as a ratio to eager's
            eager_peak = next((r.get(key) for r in records if r["config"] == "eager"), None)
            for rec in records:
                if eager_peak and rec.get(key):
                    rec[key.replace("_mb", "_ratio")] = rec[key] / eager_peak
        # Against Dynamo + aot_autograd running eager's ops, where measured: what the backend adds.
        floor = next((r.get("peak_rss_mb") for r in records if r["config"] == "aot_eager"), None)
        for rec in records:
            if floor and rec.get("peak_rss_mb"):
                rec["peak_rss_over_aot_eager"] = rec["peak_rss_mb"] / floor
    return records


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="the small subset of `make bench-quick`")
    p.add_argument("--tiny", action="store_true", help="the harness's own tiny test models")
    p.add_argument("--models", default="", help="comma-separated model names (default: the whole suite)")
    p.add_argument("--configs", default="", help=f"comma-separated, from {sorted(cfgs.CONFIGS)}")
    p.add_argument("--dtypes", default="fp32,bf16")
    p.add_argument("--small", action="store_true", help="only each model's small batch")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--settle", type=int, default=1,
                   help="untimed calls of a configuration before each of its samples (0: each sample "
                        "directly follows the previous configuration's call, as before this option)")
    p.add_argument("--interleave-dtypes", action="store_true",
                   help="time a model's dtypes in one interleaved loop (for a bf16 / fp32 ratio) "
                        "instead of one case after another")
    p.add_argument("--threads", type=int, default=machine.physical_cores(), help="default: the physical cores")
    p.add_argument("--no-isolated", dest="isolated", action="store_false",
                   help="skip the fresh process per configuration (cold compile, peak memory): "
                        "compile_s_cold is then the first compile in this process")
    p.add_argument("--out", default="benchmarks/results/latest")
    args = p.parse_args(argv)
    if args.repeats < 30 and not args.tiny:
        p.error("--repeats must be at least 30")
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    with machine.own_choice_cache("harness"):
        return _main(args, argv)


def _main(args, argv) -> int:
    torch.set_num_threads(args.threads)
    import fxcpp  # noqa: F401  (registers the backend even without the entry point)

    configs = cfgs.get([c for c in args.configs.split(",") if c] or cfgs.DEFAULTS[args.device])
    dtypes = [d for d in args.dtypes.split(",") if d]
    if "bf16" in dtypes and not bf16_supported(args.device):
        print("bf16 is not supported on this device: fp32 only")
        dtypes = [d for d in dtypes if d != "bf16"]
    cases = [(s, b, d) for s, b in suite.find([m for m in args.models.split(",") if m], args.quick, args.tiny)
             for d in dtypes if not (args.small and b != s.batches[0])]
    records, meta = [], dict(machine_info(args.device, argv), settle=args.settle,
                             interleave_dtypes=args.interleave_dtypes)
    if args.interleave_dtypes:  # one case per model and batch, all its dtypes in it
        grouped = {}
        for spec, batch, dtype in cases:
            grouped.setdefault((spec.name, batch), (spec, batch, []))[2].append(dtype)
        cases = list(grouped.values())
    for spec, batch, dtype in report.progress(cases, desc="models"):
        if args.interleave_dtypes:
            records += run_cases_interleaved(spec, batch, dtype, args.device, configs, args)
        else:
            records += run_case(spec, batch, dtype, args.device, configs, args)
        results = {"meta": meta, "records": records, "summary": report.summarize(records, [c.name for c in configs])}
        report.write(results, args.out)  # after every case: a long run that is stopped keeps what it measured
    print(report.markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
