"""A/B of two fxcpp builds on make micro's row kernels, each build in its own processes,
alternating, five rounds: the DRAM-sized shapes at 2 threads (ms per call, the triad timed
beside), and 128-row shapes at 1 thread (ns per element: the kernel's compute, data in cache).

    python benchmarks/results/cpu-rows-fusion/ab.py BUILD_A BUILD_B > ab.txt

BUILD_*: a folder holding an installed `fxcpp` package (a copy of site-packages/fxcpp)."""
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
KERNELS = ["softmax_scale_mask", "rmsnorm", "add_layer_norm"]

CHILD = r"""
import sys, time, torch
sys.path.insert(0, REPO)
from benchmarks.micro import run as R
from benchmarks.micro import native
torch.set_grad_enabled(False)
out = {}
torch.set_num_threads(2)
for name in KERNELS:
    fn, args = R._memory_fn(name)
    c = R._compiled(fn, "fxcpp")
    c(*args)
    out["triad " + name] = native.stream_triad(2, 64, 10)["gbps_median"]
    out[name + " ms"] = R._time(c, args, 2, 0.5) * 1e3
    torch._dynamo.reset()
torch.set_num_threads(1)
small = {
    "softmax_scale_mask": (lambda x, m: torch.softmax(x * 0.125 + m, dim=-1), (torch.randn(128, 4096), torch.randn(1, 4096))),
    "rmsnorm": (lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, (torch.randn(512, 1024), torch.randn(1024))),
    "ln_gelu_residual": (lambda x, w, b: x + torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (768,), w, b)),
                         (torch.randn(640, 768), torch.randn(768), torch.randn(768))),
}
for name, (fn, args) in small.items():
    c = torch.compile(fn, backend="fxcpp", dynamic=False)
    for _ in range(3): c(*args)
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n): c(*args)
    out[name + " 1-thread ns/elem"] = (time.perf_counter() - t0) / n * 1e9 / args[0].numel()
    torch._dynamo.reset()
print(repr(out))
"""


def run(build: str) -> dict:
    code = CHILD.replace("REPO", repr(REPO)).replace("KERNELS", repr(KERNELS))
    env = {**os.environ, "PYTHONPATH": build}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=900)
    return eval(res.stdout.strip().splitlines()[-1])


def main():
    a, b = sys.argv[1], sys.argv[2]
    samples = {a: [], b: []}
    for rnd in range(5):
        for build in (a, b):
            samples[build].append(run(build))
            print(f"round {rnd} {build}: {samples[build][-1]}", flush=True)
    print("\nmedians of five rounds")
    print(f"| measure | A ({a}) | B ({b}) | B / A |\n|---|---|---|---|")
    for key in samples[a][0]:
        ma = statistics.median(s[key] for s in samples[a])
        mb = statistics.median(s[key] for s in samples[b])
        print(f"| {key} | {ma:.3f} | {mb:.3f} | {mb / ma:.2f} |")


if __name__ == "__main__":
    main()
