"""A/B of two fxcpp installs built side by side (the results scripts' shared loop).

After `make build` at each commit, copy the installed package (`python -c "import fxcpp, os;
print(os.path.dirname(fxcpp.__file__))"`) into DIR/fxcpp. Each round runs the calling script
once per install with `--child`, alternating, PYTHONPATH pointing at that install; the child
prints one JSON dict of medians (ms) as its last line. Reported per key: the median over rounds.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys


def alternate(script: str, before: str, after: str, rounds: int) -> dict[str, tuple[float, float]]:
    """{key: (before, after)}: each the median over rounds of the child's medians."""
    runs = {"before": [], "after": []}
    for _ in range(rounds):
        for label, d in (("before", before), ("after", after)):
            env = dict(os.environ, PYTHONPATH=d)
            out = subprocess.run([sys.executable, script, "--child"], env=env, capture_output=True, text=True, check=True)
            runs[label].append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {k: (statistics.median(r[k] for r in runs["before"]), statistics.median(r[k] for r in runs["after"]))
            for k in runs["before"][0]}


def median_ms(fn, calls: int = 300, warmup: int = 10) -> float:
    """Median ms of `calls` timed calls of fn, after `warmup` untimed ones."""
    import time

    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def best_us(fn, calls: int, loops: int = 5, warmup: int = 3) -> float:
    """Best per-call us over `loops` timed loops of `calls` calls of fn, after `warmup` untimed ones
    (the plans' A/B scripts: the minimum drops the VM's slow phases)."""
    import time

    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(loops):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return round(best * 1e6, 2)


def child_output(script: str, install: str, *args: str):
    """`script --child *args` run with PYTHONPATH=install, from /tmp (so that a working tree's
    sources cannot be imported instead): its last stdout line as JSON, a dict whose "fxcpp_from"
    (the child's os.path.dirname(fxcpp.__file__)) must lie in install."""
    out = subprocess.run([sys.executable, script, "--child", *args], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=install), cwd="/tmp").stdout
    res = json.loads(out.strip().splitlines()[-1])
    assert res["fxcpp_from"].startswith(install), (res["fxcpp_from"], install)
    return res


def print_host(command: str) -> None:
    """The host line every results file starts with (benchmarks.machine's, 2 threads)."""
    from benchmarks.machine import machine_info  # importable: the caller imported this module from there

    print(json.dumps(machine_info(2, command)))


def outputs_per_install(script: str, installs: list[str], command: str) -> dict:
    """The host line, then {install's basename: child_output(script, install, extra)}, installs in
    turn; the first child gets "eager" as its extra argument (eager's figures are the same in
    every install, so only one child computes them)."""
    print_host(command)
    return {os.path.basename(b): child_output(script, b, "eager" if i == 0 else "") for i, b in enumerate(installs)}


def print_rounds(script: str, builds: list[str], command: str, rounds: int = 3) -> None:
    """The host line, then one row per (round, build, case, dtype): the builds alternate, each
    in a process of its own whose child prints {"fxcpp_from": ..., "rows": [{"case", "dtype",
    "eager_ms", "fxcpp_ms"}, ...]}."""
    print_host(command)
    print(f"{'round':>5} {'build':<12} {'case':<11} {'dtype':<9} {'eager ms':>9} {'fxcpp ms':>9}")
    for rnd in range(rounds):
        for b in builds:
            for r in child_output(script, b)["rows"]:
                print(f"{rnd:>5} {os.path.basename(b):<12} {r['case']:<11} {r['dtype']:<9} {r['eager_ms']:9.3f} {r['fxcpp_ms']:9.3f}")
            sys.stdout.flush()


def print_case_rows(cases_for) -> None:
    """print_rounds' child: for fp32 and bf16, each case of cases_for(dtype) ({name: (fn, input
    shape)}) on a random input, compiled with fxcpp (which must fuse some of it) and timed
    beside eager, 2 threads, under no_grad."""
    import torch

    import fxcpp

    torch.set_num_threads(2)
    rows = []
    with torch.no_grad():
        for dt in (torch.float32, torch.bfloat16):
            for name, (fn, shape) in cases_for(dt).items():
                x = torch.randn(shape).to(dt)
                torch._dynamo.reset()
                compiled = torch.compile(fn, backend="fxcpp")
                assert fxcpp.explain(fn, x).kernel_counts["cpu_fused"] > 0, name
                rows.append({"case": name, "dtype": str(dt).split(".")[1], "eager_ms": median_ms(lambda: fn(x)),
                             "fxcpp_ms": median_ms(lambda: compiled(x))})
    print(json.dumps({"fxcpp_from": os.path.dirname(fxcpp.__file__), "rows": rows}))


def header(after: str, rounds: int, command: str) -> str:
    """The host (as the after install sees it), torch, the rounds and the command."""
    import torch

    sys.path.insert(0, after)
    from fxcpp import _C

    return (f"host: {_C.host_info()['summary']}; torch {torch.__version__}; {rounds} rounds; median over rounds, ms\n"
            f"command: {command}")


def time_interleaved(fns: dict, samples: int, settle: int, shuffled: bool = False) -> dict[str, float]:
    """Median ms per key of fns ({key: zero-argument callable}), timed interleaved under no_grad
    (a training step enables grad itself). shuffled: each round in a random order, and each
    sample right after one untimed call of its own, so that the key timed before it does not
    decide what its caches hold."""
    import random
    import time

    import torch

    times = {k: [] for k in fns}
    with torch.no_grad():
        for f in fns.values():
            for _ in range(settle):
                f()
        for _ in range(samples):
            order = list(fns)
            if shuffled:
                random.shuffle(order)
            for k in order:
                f = fns[k]
                if shuffled:
                    f()
                t0 = time.perf_counter()
                f()
                times[k].append((time.perf_counter() - t0) * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def table(medians: dict[str, tuple[float, float]], columns: list[str], fmt: str = ".3f") -> str:
    """A markdown table: the key split at '/' into `columns`, then before, after, after / before."""
    lines = [f"| {' | '.join(columns)} | before | after | after / before |", "|" + "---|" * (len(columns) + 3)]
    for k, (b, a) in medians.items():
        lines.append(f"| {' | '.join(k.split('/'))} | {b:{fmt}} | {a:{fmt}} | {a / b:.3f} |")
    return "\n".join(lines)


def main(script: str, command: str, columns: list[str], default_rounds: int = 5, fmt: str = ".3f") -> None:
    """BEFORE_DIR AFTER_DIR [rounds] from the command line: alternate, then print the header and table."""
    before, after = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else default_rounds
    medians = alternate(script, before, after, rounds)
    print(header(after, rounds, f"python {command} {' '.join(sys.argv[1:])}"))
    print(table(medians, columns, fmt))


def own_code(fn):
    """fn called through a function with a code object of its own. Dynamo keys its cache on the
    code object: each compiled case then checks its own entries only, not every other case's."""
    ns = {}
    exec("def call(*a):\n    return fn(*a)", {"fn": fn}, ns)
    return ns["call"]
