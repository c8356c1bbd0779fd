"""Builds the C++ microbenchmarks once (cached by source hash) and runs them for their JSON."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD_DIR = HERE.parents[1] / "build" / "micro"
CXX = os.environ.get("CXX", "g++")
FLAGS = ["-O3", "-march=native", "-pthread", "-std=c++17"]


def build(name: str) -> Path:
    """Compiles benchmarks/micro/<name>.cpp; the binary name carries a hash of source, compiler and flags."""
    src = HERE / f"{name}.cpp"
    key = hashlib.sha256(src.read_bytes() + (HERE / "pin.h").read_bytes() + " ".join([CXX, *FLAGS]).encode()).hexdigest()[:12]
    exe = BUILD_DIR / f"{name}-{key}"
    if exe.exists():
        return exe
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    tmp = exe.with_name(f"{exe.name}.tmp{os.getpid()}")  # rename at the end: concurrent builds never see half a file
    subprocess.run([CXX, *FLAGS, str(src), "-o", str(tmp)], check=True, capture_output=True, text=True)
    os.replace(tmp, exe)
    return exe


def run(name: str, *args) -> dict:
    out = subprocess.run([str(build(name)), *map(str, args)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def fma_peak(threads: int, seconds: float) -> dict:
    return run("fma_peak", threads, seconds)


def stream_triad(threads: int, mib_per_array: int = 64, reps: int = 20) -> dict:
    return run("stream_triad", threads, mib_per_array, reps)


if __name__ == "__main__":
    n = os.cpu_count() or 1
    print(json.dumps({"fma_peak": fma_peak(n, 0.5), "stream_triad": stream_triad(n)}, indent=1))
