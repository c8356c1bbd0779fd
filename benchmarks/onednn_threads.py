"""Do our oneDNN's threads and torch's share the cores, or oversubscribe them?

For each torch thread count n, in a fresh process: a conv+linear workload run by eager
(torch's oneDNN and GEMM), by fxcpp (our oneDNN), and by both interleaved. Recorded per
call: wall time, process CPU time, CPU/wall (how many cores were busy), and the number of
OS threads. One thread pool shows as CPU/wall <= n and the same thread count as eager;
two pools would show extra threads, CPU/wall above n, and slower interleaved calls.

    python -m benchmarks.onednn_threads [--out benchmarks/results/onednn_threads.json]
"""
import argparse
import json
import os
import subprocess
import sys

from .machine import machine_info, physical_cores

_CHILD = r"""
import json, os, resource, sys, time, torch, torch.nn as nn
n = int(sys.argv[1])
torch.set_num_threads(n)
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
                      nn.Flatten(1), nn.Linear(64 * 28 * 28, 256)).eval()
x = torch.randn(4, 64, 28, 28)
ours = torch.compile(model, backend="fxcpp")
runs = {"eager": lambda: model(x), "fxcpp": lambda: ours(x), "interleaved": lambda: (model(x), ours(x))}

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

out = {}
with torch.no_grad():
    for name, fn in runs.items():
        for _ in range(3):
            fn()
        reps = 20
        c0, t0 = cpu(), time.perf_counter()
        for _ in range(reps):
            fn()
        wall, busy = time.perf_counter() - t0, cpu() - c0
        out[name] = {"ms_per_call": wall / reps * 1e3, "cpu_ms_per_call": busy / reps * 1e3,
                     "cpu_over_wall": busy / wall, "os_threads": len(os.listdir("/proc/self/task"))}
print(json.dumps(out))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    cmd = "python -m benchmarks.onednn_threads" + (f" --out {args.out}" if args.out else "")
    res = {"machine": machine_info(physical_cores(), cmd), "by_threads": {}}
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    for n in sorted({1, physical_cores()}):
        p = subprocess.run([sys.executable, "-c", _CHILD, str(n)], capture_output=True, text=True, env=env, check=True)
        res["by_threads"][n] = json.loads(p.stdout.strip().splitlines()[-1])
        for name, r in res["by_threads"][n].items():
            print(f"threads={n} {name:12s} {r['ms_per_call']:8.2f} ms/call  cpu/wall {r['cpu_over_wall']:.2f}  "
                  f"os threads {r['os_threads']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
