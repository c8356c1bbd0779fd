"""GELU's erf taken as a normal tail (runtime/cpu/gelu_erf.h) against the build before it: the
LayerNorm+GELU+residual probe ([4096, 768]) and a GELU chain (gelu(x) * 2 on [4096, 3072]), fp32
and bf16, eager and fxcpp, each build in its own process, builds alternating, three rounds.
Medians of 300 calls, 2 threads. The builds are installed copies of the package:

    python benchmarks/results/gelu-erf/ab.py /tmp/ab/old /tmp/ab/new > benchmarks/results/gelu-erf/ab.txt
"""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def median_ms(fn, n=300):
    for _ in range(10):
        fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2] * 1e3


def child():
    import torch
    import torch.nn.functional as F

    import fxcpp

    torch.set_num_threads(2)
    ln = torch.nn.LayerNorm(768).eval()
    cases = {"probe": (lambda x: x + F.gelu(ln(x)), (4096, 768)),
             "gelu_chain": (lambda x: F.gelu(x) * 2, (4096, 3072))}
    rows = []
    with torch.no_grad():
        for dt in (torch.float32, torch.bfloat16):
            ln.to(dt)
            for name, (fn, shape) in cases.items():
                x = torch.randn(shape).to(dt)
                torch._dynamo.reset()
                compiled = torch.compile(fn, backend="fxcpp")
                assert fxcpp.explain(fn, x).kernel_counts["cpu_fused"] > 0
                rows.append({"case": name, "dtype": str(dt).split(".")[1], "eager_ms": median_ms(lambda: fn(x)),
                             "fxcpp_ms": median_ms(lambda: compiled(x)), "fxcpp_from": os.path.dirname(fxcpp.__file__)})
    print(json.dumps(rows))


def main():
    builds = sys.argv[1:]
    sys.path.insert(0, ROOT)
    from benchmarks.machine import machine_info

    print(json.dumps(machine_info(2, "benchmarks/results/gelu-erf/ab.py " + " ".join(builds))))
    print(f"{'round':>5} {'build':<12} {'case':<11} {'dtype':<9} {'eager ms':>9} {'fxcpp ms':>9}")
    for rnd in range(3):
        for b in builds:
            out = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True, check=True,
                                 env={**os.environ, "PYTHONPATH": b}, cwd="/tmp").stdout
            for r in json.loads(out.strip().splitlines()[-1]):
                assert r["fxcpp_from"].startswith(b), r["fxcpp_from"]
                print(f"{rnd:>5} {os.path.basename(b):<12} {r['case']:<11} {r['dtype']:<9} {r['eager_ms']:9.3f} {r['fxcpp_ms']:9.3f}")
            sys.stdout.flush()


if __name__ == "__main__":
    child() if sys.argv[1:] == ["--child"] else main()
