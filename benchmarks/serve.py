"""Serving load test: one compiled model behind a thread pool, many client threads sending
requests at once. Per configuration: throughput, p50/p99 latency (submit to result), errors,
wrong outputs (a sample checked against eager), and the process's RSS over time.

    python -m benchmarks.serve [--model mlp --batch 1 --dtype fp32] [--configs eager inductor fxcpp]
                               [--clients 8 --requests 10000 --workers 2 --rounds 2]

Each configuration runs alone in a fresh process (its RSS is its own), the configurations
interleaved over rounds. The server is a ThreadPoolExecutor of `workers` threads, each running
the compiled model with `intra-threads` intra-op threads (workers x intra-threads = the cores);
every client thread sends `requests` requests, one at a time. Requests cycle through a pool of
distinct inputs; every `check_every`-th output is compared with eager's for that input, with
the harness's tolerances. RSS growth is from the moment a tenth of the requests are done (the
warm-up: compiled, pools filled) to the end.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from .machine import command_line, machine_info, physical_cores, proc_status_mb, save_results

REPO = Path(__file__).resolve().parent.parent


def rss_mb() -> float:
    return proc_status_mb("VmRSS")


def child(a: dict) -> dict:
    """One configuration's load test, in this process."""
    from . import configs, suite
    from .harness import DTYPES, TOLERANCE

    torch.set_num_threads(a["intra_threads"])
    import fxcpp  # noqa: F401  (registers the backend; imported in every child alike)
    from fxcpp.verify import same_as_eager

    spec = next(s for s in (suite.TINY if a.get("tiny") else suite.SUITE) if s.name == a["model"])
    torch.manual_seed(0)
    model, inputs = spec.build(a["batch"])
    model, inputs = suite.to_dtype(model, inputs, DTYPES[a["dtype"]], "cpu")
    # Distinct requests: the example input, its values perturbed (integer inputs kept).
    pool = [tuple(x + 0.1 * i * torch.randn_like(x) if x.is_floating_point() else x for x in inputs)
            for i in range(a["distinct"])]
    with torch.no_grad():
        refs = [suite.call(spec, model, p) for p in pool]
    fn = configs.CONFIGS[a["config"]].compile(lambda *x: suite.call(spec, model, x))

    def handle(i: int):
        with torch.no_grad():
            return fn(*pool[i % len(pool)])

    ready_s = float("nan")
    if not a.get("cold"):
        t0 = time.perf_counter()
        handle(0)  # compiles (one thread), as a service would before taking traffic
        ready_s = time.perf_counter() - t0

    total = a["clients"] * a["requests"]
    done = [0]
    lock = threading.Lock()
    rss_trace: list[tuple[float, float]] = []
    warm_rss: list[float] = []
    stop = threading.Event()

    def sample_rss():
        while not stop.wait(0.25):
            rss_trace.append((time.perf_counter() - start, rss_mb()))

    latencies: list[list[float]] = [[] for _ in range(a["clients"])]
    errors: list[str] = []
    wrong, checked = [0], [0]

    def client(c: int, ex: ThreadPoolExecutor):
        for r in range(a["requests"]):
            i = c * a["requests"] + r
            t = time.perf_counter()
            try:
                out = ex.submit(handle, i).result()
            except Exception as e:  # noqa: BLE001 - counted, the load goes on
                with lock:
                    errors.append(f"{type(e).__name__}: {e}"[:300])
                continue
            latencies[c].append(time.perf_counter() - t)
            if i % a["check_every"] == 0:
                ok = same_as_eager(refs[i % len(pool)], out, tol=TOLERANCE[a["dtype"]])
                with lock:
                    checked[0] += 1
                    wrong[0] += not ok
            with lock:
                done[0] += 1
                if done[0] == total // 10:
                    warm_rss.append(rss_mb())

    with ThreadPoolExecutor(a["workers"]) as ex:
        start = time.perf_counter()
        sampler = threading.Thread(target=sample_rss, daemon=True)
        sampler.start()
        clients = [threading.Thread(target=client, args=(c, ex)) for c in range(a["clients"])]
        for t in clients:
            t.start()
        for t in clients:
            t.join()
        elapsed = time.perf_counter() - start
    stop.set()
    sampler.join()
    end_rss = rss_mb()
    lat = sorted(x for per in latencies for x in per)
    q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [float("nan")] * 99
    warm = warm_rss[0] if warm_rss else float("nan")
    return {
        "config": a["config"], "requests": total, "completed": len(lat), "errors": len(errors),
        "first_errors": errors[:3], "checked": checked[0], "wrong": wrong[0],
        "seconds": elapsed, "requests_per_s": len(lat) / elapsed, "ready_s": ready_s,
        "p50_ms": q[49] * 1e3, "p99_ms": q[98] * 1e3, "max_ms": lat[-1] * 1e3 if lat else float("nan"),
        "rss_warm_mb": warm, "rss_end_mb": end_rss, "rss_max_mb": max((r for _, r in rss_trace), default=end_rss),
        "rss_growth_pct": (end_rss - warm) / warm * 100, "rss_trace": [(round(t, 2), round(r, 1)) for t, r in rss_trace],
    }


def run_child(a: dict) -> dict:
    p = subprocess.run([sys.executable, "-m", "benchmarks.serve", "--child", json.dumps(a)], cwd=REPO,
                       capture_output=True, text=True)
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        return {"config": a["config"], "failed": (p.stderr or p.stdout)[-1500:]}
    return json.loads(lines[-1])


def to_markdown(res: dict) -> str:
    m, a = res["machine"], res["args"]
    host = (m.get("host") or {}).get("summary", "?")
    lines = ["# Serving load test", "",
             f"Host ISA: {host}. {m['cpu_model']}, torch {m['torch_version']}, commit {(m['git_commit'] or '?')[:10]}"
             f"{' (dirty)' if m['git_dirty'] else ''}. `{m['command']}`", "",
             f"{a['model']} (batch {a['batch']}, {a['dtype']}): {a['clients']} client threads x {a['requests']} requests "
             f"against a pool of {a['workers']} worker threads ({a['intra_threads']} intra-op thread(s) each); every "
             f"{a['check_every']}th output checked against eager. Each configuration in its own process, interleaved "
             f"over {a['rounds']} round(s). RSS growth: from a tenth of the requests done to the end."
             + (" Cold: no warm-up call, the workers' first calls compile at once under load." if a.get("cold") else
                " One warm-up call (compiling) before the load."), "",
             "| round | config | req/s | vs eager | p50 ms | p99 ms | max ms | errors | wrong / checked | "
             "RSS warm MB | RSS end MB | growth |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rnd, runs in enumerate(res["rounds"]):
        eager = next((r.get("requests_per_s") for r in runs if r["config"] == "eager"), None)
        for r in runs:
            if "failed" in r:
                lines.append(f"| {rnd} | {r['config']} | failed: {r['failed'][-120:]!r} |" + " |" * 9)
                continue
            vs = f"{r['requests_per_s'] / eager:.2f}x" if eager else ""
            lines.append(f"| {rnd} | {r['config']} | {r['requests_per_s']:.0f} | {vs} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f} | "
                         f"{r['max_ms']:.1f} | {r['errors']} | {r['wrong']} / {r['checked']} | {r['rss_warm_mb']:.0f} | "
                         f"{r['rss_end_mb']:.0f} | {r['rss_growth_pct']:+.2f}% |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--tiny", action="store_true", help="the harness's tiny models (tests)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--configs", nargs="+", default=["eager", "inductor", "fxcpp"])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=10_000, help="per client")
    ap.add_argument("--workers", type=int, default=None, help="default: the physical cores")
    ap.add_argument("--intra-threads", type=int, default=1)
    ap.add_argument("--distinct", type=int, default=16, help="distinct request inputs")
    ap.add_argument("--cold", action="store_true",
                    help="no warm-up call: traffic starts at once, and the workers' first calls compile together")
    ap.add_argument("--check-every", type=int, default=97)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "serving"))
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return {}
    workers = args.workers or physical_cores()
    a = {"model": args.model, "tiny": args.tiny, "batch": args.batch, "dtype": args.dtype, "clients": args.clients,
         "requests": args.requests, "workers": workers, "intra_threads": args.intra_threads,
         "distinct": args.distinct, "check_every": args.check_every, "rounds": args.rounds, "cold": args.cold}
    cmd = command_line("benchmarks.serve", argv)
    res = {"machine": machine_info(workers * args.intra_threads, cmd), "args": a, "rounds": []}
    configs = ["eager"] + [c for c in args.configs if c != "eager"]
    for _ in range(args.rounds):
        runs = []
        for c in configs:
            r = run_child({**a, "config": c})
            print(json.dumps({k: v for k, v in r.items() if k != "rss_trace"}), flush=True)
            runs.append(r)
        res["rounds"].append(runs)
    save_results(args.out, "serve", res, to_markdown(res))
    return res


if __name__ == "__main__":
    main()
