"""What machine a result came from: shared by the suite harness and the micro-benchmarks."""
from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent


def physical_cores() -> int:
    """Distinct (physical id, core id) pairs: hyper-threads share FMA units and bandwidth."""
    cores, phys = set(), "0"
    try:
        for line in open("/proc/cpuinfo"):
            key, _, val = line.partition(":")
            key, val = key.strip(), val.strip()
            if key == "physical id":
                phys = val
            elif key == "core id":
                cores.add((phys, val))
    except OSError:
        pass
    return len(cores) or len(os.sched_getaffinity(0))


def _fxcpp_host() -> dict | None:
    """fxcpp's own view of the host (runtime/host.h): the ISA its kernels and oneDNN use."""
    try:
        import fxcpp

        return dict(fxcpp._C.host_info())
    except Exception:  # noqa: BLE001 - the record still says what /proc/cpuinfo says
        return None


def machine_info(threads: int, command: str) -> dict:
    model, flags = platform.processor(), set()
    try:
        for line in open("/proc/cpuinfo"):
            key, _, val = line.partition(":")
            if key.strip() == "model name":
                model = val.strip()
            elif key.strip() == "flags":
                flags = set(val.split())
    except OSError:
        pass

    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None

    l3 = Path("/sys/devices/system/cpu/cpu0/cache/index3/size")
    return {
        "cpu_model": model,
        "logical_cpus": os.cpu_count(),
        "physical_cores": physical_cores(),
        "isa_flags": sorted(flags & {"avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile"}),
        "l3": l3.read_text().strip() if l3.exists() else None,
        "host": _fxcpp_host(),
        "threads": threads,
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "git_commit": git("rev-parse", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "command": command,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def command_line(module: str, argv: list[str] | None = None) -> str:
    """This run's command: the process's own, or rebuilt from argv when main() was called
    in-process (tests), where the process command line is not this run's."""
    cmd = getattr(sys, "orig_argv", [sys.executable, *sys.argv]) if argv is None else [
        sys.executable, "-m", module, *argv]
    return shlex.join(cmd)


def save_results(out_dir: str, stem: str, res: dict, markdown: str) -> Path:
    """Writes <stem>.json and <stem>.md into out_dir (made if needed) and prints the markdown."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / f"{stem}.md").write_text(markdown)
    print(markdown)
    return out


def proc_status_mb(field: str) -> float:
    """A memory field of /proc/self/status ("VmRSS", "VmHWM"), in MiB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


@contextlib.contextmanager
def own_choice_cache(tag: str):
    """fxcpp's first-call choices measured in this run, in an empty choice cache removed at the
    end: a choice cached by an earlier process was measured under whatever load it saw.
    FXCPP_CACHE_DIR, when set, is kept."""
    if "FXCPP_CACHE_DIR" in os.environ:
        yield
        return
    d = tempfile.mkdtemp(prefix=f"fxcpp-{tag}-choices-")
    os.environ["FXCPP_CACHE_DIR"] = d
    try:
        yield
    finally:
        os.environ.pop("FXCPP_CACHE_DIR", None)
        shutil.rmtree(d, ignore_errors=True)
