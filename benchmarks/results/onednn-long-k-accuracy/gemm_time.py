"""What running a long-K fp32 matmul on oneDNN's gemm:jit instead of brgemm costs: fxcpp's Linear
(oneDNN forced) over eager's, with gemm:jit above K = 1024 (the default) and with brgemm throughout
(FXCPP_MATMUL_LONG_K=0), each mode in its own process, the two alternated for ROUNDS rounds so that
both see the same drift of this VM.

    PYTHONPATH=. python benchmarks/results/onednn-long-k-accuracy/gemm_time.py   # gemm_time.txt

Each cell: the median over rounds of (fxcpp time / eager time), both medians of 30 calls in
one process after 5 warm-up calls; lower is faster than eager."""
import json
import os
import statistics
import subprocess
import sys
import time

SHAPES = [(64, 2048, 3), (64, 2048, 64), (256, 2048, 256), (1024, 3072, 768), (256, 4096, 1024), (64, 8192, 16),
          (2048, 1024, 1024)]  # the last: K = 1024, brgemm in both modes
ROUNDS = 5


def _one_process():
    import torch

    import fxcpp
    out = {}
    for M, K, N in SHAPES:
        torch._dynamo.reset()
        torch.manual_seed(0)
        lin = torch.nn.Linear(K, N).eval()
        a = torch.randn(M, K)
        c = torch.compile(lin, backend="fxcpp")

        def med(f):
            for _ in range(5):
                f(a)
            ts = []
            for _ in range(30):
                t0 = time.perf_counter()
                f(a)
                ts.append(time.perf_counter() - t0)
            return statistics.median(ts)
        with torch.no_grad():
            ratio = med(c) / med(lin)
        impl = next((r.impl for r in fxcpp.explain(lin, a).rows if r.kernel == "onednn" and r.impl), "?")
        out[f"{M}x{K}x{N}"] = (ratio, impl.split(",")[0].split(" (")[0].removeprefix("onednn "))
    print(json.dumps(out))


def main():
    sys.path.insert(0, os.getcwd())
    import torch

    import fxcpp
    from benchmarks.machine import machine_info
    m = machine_info(torch.get_num_threads(), "python benchmarks/results/onednn-long-k-accuracy/gemm_time.py")
    print(m["cpu_model"], "|", fxcpp._C.host_info()["summary"], "| torch", m["torch_version"], "| commit",
          m["git_commit"][:10], m["date"])
    runs = {"gemm": [], "brgemm": []}
    for _ in range(ROUNDS):
        for mode in runs:
            env = dict(os.environ, FXCPP_KERNEL_CHOICE="onednn", FXCPP_GEMM_TIME_CHILD="1")
            if mode == "brgemm":
                env["FXCPP_MATMUL_LONG_K"] = "0"
            p = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, check=True)
            runs[mode].append(json.loads(p.stdout.strip().splitlines()[-1]))
    print("fxcpp time / eager time, median of", ROUNDS, "processes per mode")
    print(f"{'M x K x N':>16} | {'default':>7} {'brgemm':>7} | default/brgemm | default runs")
    for key in runs["gemm"][0]:
        g = statistics.median(r[key][0] for r in runs["gemm"])
        b = statistics.median(r[key][0] for r in runs["brgemm"])
        print(f"{key:>16} | {g:>7.2f} {b:>7.2f} | {g / b:>14.2f} | {runs['gemm'][0][key][1]}")


if __name__ == "__main__":
    _one_process() if os.environ.get("FXCPP_GEMM_TIME_CHILD") else main()
