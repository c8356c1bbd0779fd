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
