"""tanh from exp (runtime/cpu/tanh_exp.h) against the build before it (at::vec's Sleef tanh):
GPT-2's GELU written out op by op on one layer's MLP activation at batch 8 ([1024, 3072]), the
tanh GELU (F.gelu(approximate="tanh") * 2) on the same, make micro's pointwise4_tanh
(tanh(relu(x * 2 + 1)) on 16M values) and a tanh chain on an L2-sized block ([256, 1024]), fp32
and bf16, eager and fxcpp, each build in its own process, builds alternating, three rounds.
Medians of 300 calls, 2 threads. The builds are installed copies of the package:

    python benchmarks/results/tanh-exp/ab.py /tmp/ab/before /tmp/ab/after > benchmarks/results/tanh-exp/ab.txt
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
    import math

    def gelu_new(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    cases = {"gpt2_gelu": (gelu_new, (1024, 3072)),
             "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh") * 2, (1024, 3072)),
             "pw4_tanh": (lambda x: torch.tanh(torch.relu(x * 2 + 1)), (1 << 24,)),
             "tanh_l2": (lambda x: torch.tanh(x * 2 + 1), (256, 1024))}
    rows = []
    with torch.no_grad():
        for dt in (torch.float32, torch.bfloat16):
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

    print(json.dumps(machine_info(2, "benchmarks/results/tanh-exp/ab.py " + " ".join(builds))))
    print(f"{'round':>5} {'build':<12} {'case':<10} {'dtype':<9} {'eager ms':>9} {'fxcpp ms':>9}")
    for rnd in range(3):
        for b in builds:
            out = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True, check=True,
                                 env={**os.environ, "PYTHONPATH": b}, cwd="/tmp").stdout
            for r in json.loads(out.strip().splitlines()[-1]):
                assert r["fxcpp_from"].startswith(b), r["fxcpp_from"]
                print(f"{rnd:>5} {os.path.basename(b):<12} {r['case']:<10} {r['dtype']:<9} {r['eager_ms']:9.3f} {r['fxcpp_ms']:9.3f}")
            sys.stdout.flush()


if __name__ == "__main__":
    child() if sys.argv[1:] == ["--child"] else main()
