"""Resident memory each import adds, in one fresh process, in the order given (MB of VmRSS).

    python benchmarks/results/rss-imports/rss_imports.py "import torch._dynamo" \
        "import torch._functorch.aot_autograd" "import torch._inductor.compile_fx" "import fxcpp"
"""
import sys


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


start = rss_mb()
import torch  # noqa: E402

prev = rss_mb()
print(f"python {start:.1f} MB; import torch +{prev - start:.1f} MB (total {prev:.1f})")
for stmt in sys.argv[1:]:
    exec(stmt)
    now = rss_mb()
    print(f"{stmt}: +{now - prev:.1f} MB (total {now:.1f})")
    prev = now
