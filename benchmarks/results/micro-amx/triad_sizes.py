"""The STREAM triad (benchmarks/micro/stream_triad.cpp) at several array sizes on this host:
whether make micro's 3 x 64 MiB arrays measure DRAM here, where the VM reports a 480 MiB L3.

    python benchmarks/results/micro-amx/triad_sizes.py > benchmarks/results/micro-amx/triad_sizes.txt
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)
from benchmarks.machine import machine_info  # noqa: E402
from benchmarks.micro import native  # noqa: E402

print(json.dumps(machine_info(2, "benchmarks/results/micro-amx/triad_sizes.py")))
print("MiB per array  GB/s median  GB/s best  (2 threads, 10 repetitions)")
for mib in (16, 32, 64, 256, 1024):
    r = native.stream_triad(2, mib, 10)
    print(f"{mib:13d}  {r['gbps_median']:11.1f}  {r['gbps_best']:9.1f}")
