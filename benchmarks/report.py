"""Results: summary figures, JSON, a markdown table and PNG charts."""
from __future__ import annotations

import json
import math
import os

INDUCTOR_PREFIX = "inductor"
# What a serving team would run instead of a torch.compile backend (benchmarks/peers.py).
SERVING_PEERS = ("onnxruntime", "openvino", "openvino_compile")


def progress(items, desc):
    try:
        from tqdm import tqdm

        return tqdm(items, desc=desc, unit="case")
    except ImportError:
        return items


def _geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _case(r):
    return (r["model"], r["batch"], r["dtype"])


def summarize(records: list[dict], config_names: list[str]) -> dict:
    """Geometric-mean speedup per configuration over the cases it ran correctly (an
    accuracy failure never counts as a speedup), and fxcpp's time / the best Inductor's."""
    geo = {c: _geomean([r.get("speedup") for r in records if r["config"] == c and r["status"] == "ok"])
           for c in config_names}
    ratios, peer_ratios = {}, {}
    for case in sorted({_case(r) for r in records}):
        rs = [r for r in records if _case(r) == case and r["status"] == "ok" and r.get("latency_ms_median")]
        fx = next((r for r in rs if r["config"] == "fxcpp"), None)
        ind = [r for r in rs if r["config"].startswith(INDUCTOR_PREFIX)]
        if fx and ind:
            best = min(ind, key=lambda r: r["latency_ms_median"])
            ratios["/".join(map(str, case))] = {"fxcpp_over_best_inductor": fx["latency_ms_median"] / best["latency_ms_median"],
                                                "best_inductor": best["config"]}
        # The best peer that ran the case correctly: any configuration but eager and fxcpp's own.
        peers = [r for r in rs if r["config"] != "eager" and not r["config"].startswith("fxcpp")]
        if fx and peers and any(r["config"] in SERVING_PEERS for r in rs):
            best = min(peers, key=lambda r: r["latency_ms_median"])
            peer_ratios["/".join(map(str, case))] = {"fxcpp_over_best_peer": fx["latency_ms_median"] / best["latency_ms_median"],
                                                     "best_peer": best["config"]}
    return {"geomean_speedup": geo, "fxcpp_vs_best_inductor": ratios, "fxcpp_vs_best_peer": peer_ratios,
            "failures": [{k: r.get(k) for k in ("model", "batch", "dtype", "config", "status", "error")}
                         for r in records if r["status"] != "ok"]}


def _fmt(x, spec=".2f"):
    return "" if x is None else format(x, spec)


def markdown(results: dict) -> str:
    recs, meta, summ = results["records"], results["meta"], results["summary"]
    configs = list(summ["geomean_speedup"])
    lines = [f"Machine: {meta['cpu_model']}{', ' + meta['gpu'] if meta.get('gpu') else ''}, {meta['threads']} threads, "
             f"torch {meta['torch_version']}, "
             f"commit {(meta['git_commit'] or '')[:10]}",
             f"Host ISA: {(meta.get('host') or {}).get('summary', ', '.join(meta.get('isa_flags', [])))}",
             f"Command: `{meta['command']}`", "",
             "Latency: median ms (speedup over eager); ✗ accuracy failure, ! compile/run error."
             + (f" Each sample follows {meta['settle']} untimed call(s) of its own configuration."
                if meta.get("settle") else " Each sample follows the previous configuration's call.")
             + (" A model's dtypes were timed in one interleaved loop." if meta.get("interleave_dtypes") else ""), ""]
    peers = bool(summ.get("fxcpp_vs_best_peer"))
    head = ["model", "batch", "dtype"] + configs + ["fxcpp / best inductor"] + (["fxcpp / best peer"] if peers else [])
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in sorted({_case(r) for r in recs}, key=lambda c: (c[0], c[1], c[2])):
        cells = list(map(str, case))
        for c in configs:
            r = next((r for r in recs if _case(r) == case and r["config"] == c), None)
            if r is None:
                cells.append("")
            elif r["status"] in ("compile_error", "run_error"):
                cells.append("!")
            else:
                mark = " ✗" if r["status"] == "accuracy_fail" else ""
                cells.append(f"{_fmt(r.get('latency_ms_median'), '.3f')} ({_fmt(r.get('speedup'))}x){mark}")
        ratio = summ["fxcpp_vs_best_inductor"].get("/".join(map(str, case)))
        cells.append(_fmt(ratio and ratio["fxcpp_over_best_inductor"]))
        if peers:
            pr = summ["fxcpp_vs_best_peer"].get("/".join(map(str, case)))
            cells.append(f"{_fmt(pr['fxcpp_over_best_peer'])} ({pr['best_peer']})" if pr else "")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Geometric-mean speedup over eager (correct cases only): " +
              ", ".join(f"{c} {_fmt(g)}x" for c, g in summ["geomean_speedup"].items()), ""]
    gpu = any(r.get("cuda_max_alloc_mb") for r in recs)
    floor = any(r.get("peak_rss_over_aot_eager") for r in recs)
    rss_head = "peak RSS MB (×eager, ×aot_eager)" if floor else "peak RSS MB (×eager)"
    lines += ["| model | batch | dtype | config | compile cold s | compile warm s | " + rss_head + " | "
              + "settled RSS MB (×eager) | " + ("peak CUDA MB (×eager) | " if gpu else "") + "fxcpp kernels |",
              "|---|---|---|---|---|---|---|---|" + ("---|" if gpu else "") + "---|"]
    for r in sorted(recs, key=lambda r: (_case(r), configs.index(r["config"]) if r["config"] in configs else 0)):
        kc, ran = r.get("kernel_counts"), r.get("ran_counts")
        kc = ", ".join(f"{k}={v}" for k, v in kc.items() if v) if kc else ""
        if ran and ran != r.get("kernel_counts"):  # nodes that kept eager's ATen ops (explain's ran_counts)
            kc += " (ran: " + ", ".join(f"{k}={v}" for k, v in ran.items() if v) + ")"
        mem = f"{_fmt(r.get('peak_rss_mb'), '.0f')} ({_fmt(r.get('peak_rss_ratio'))}" if r.get("peak_rss_mb") else ""
        if mem:
            mem += f", {_fmt(r.get('peak_rss_over_aot_eager'))})" if floor else ")"
        settled = f"{_fmt(r.get('settled_rss_mb'), '.0f')} ({_fmt(r.get('settled_rss_ratio'))})" if r.get("settled_rss_mb") else ""
        if gpu:
            mem += f" | {_fmt(r.get('cuda_max_alloc_mb'), '.0f')} ({_fmt(r.get('cuda_max_alloc_ratio'))})"
        lines.append(f"| {r['model']} | {r['batch']} | {r['dtype']} | {r['config']} | {_fmt(r.get('compile_s_cold'))} | "
                     f"{_fmt(r.get('compile_s_warm'))} | {mem} | {settled} | {kc} |")
    if summ["failures"]:
        lines += ["", "Failures:"] + [f"- {f['model']}/{f['batch']}/{f['dtype']} {f['config']}: {f['status']} {f['error'] or ''}"
                                      for f in summ["failures"]]
    return "\n".join(lines) + "\n"


def charts(results: dict, out_dir: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = results["records"]
    configs = [c for c in results["summary"]["geomean_speedup"] if c != "eager"]
    cases = sorted({_case(r) for r in recs})
    labels = [f"{m} b{b} {d}" for m, b, d in cases]
    paths = []
    for metric, fname, title, log in (("speedup", "speedup.png", "Speedup over eager (✗: accuracy failure, not counted)", False),
                                      ("compile_s_cold", "compile_time.png", "Cold compile time (s, log scale)", True)):
        # Horizontal bars, one row per case: a whole suite (40+ cases) stays readable.
        fig, ax = plt.subplots(figsize=(8, max(3, 0.22 * len(cases) * max(1, len(configs)) / 2 + 1)))
        height = 0.8 / max(1, len(configs))
        for i, c in enumerate(configs):
            vals = []
            for case in cases:
                r = next((r for r in recs if _case(r) == case and r["config"] == c), None)
                ok = r is not None and r["status"] == "ok"
                vals.append(r.get(metric) if ok and r.get(metric) else 0)
            ax.barh([y + i * height for y in range(len(cases))], vals, height, label=c)
        ax.set_yticks([y + height * (len(configs) - 1) / 2 for y in range(len(cases))])
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()  # the first case on top, as in the table
        if metric == "speedup":
            ax.axvline(1.0, color="gray", linewidth=0.8)
        if log:
            ax.set_xscale("log")
        ax.set_title(title)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = os.path.join(out_dir, fname)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def write(results: dict, out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(markdown(results))
    charts(results, out_dir)
