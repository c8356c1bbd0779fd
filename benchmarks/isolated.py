"""One model × configuration alone in a fresh process: a truly cold compile (new
Inductor cache folder and fxcpp choice cache, nothing in memory) and the peak memory of compiling and running
(the peak RSS restarts once the model is built and moved, where Linux allows it).

    python -m benchmarks.isolated '{"model": "mlp", "batch": 32, "dtype": "fp32", "device": "cpu", "config": "fxcpp"}'
Prints {"compile_s_cold": ..., "peak_rss_mb": ..., "settled_rss_mb": ..., "cuda_max_alloc_mb": ...} as the last line.
"""
import atexit
import ctypes
import gc
import json
import os
import shutil
import sys
import tempfile
import time

# Before torch is imported, so Inductor sees an empty cache. fxcpp's choice cache too: the
# harness's own process has filled the one it shares (FXCPP_CACHE_DIR) before this runs, and a
# cold compile measures every first-call choice (and holds that measurement's memory).
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-cold-")
os.environ["FXCPP_CACHE_DIR"] = tempfile.mkdtemp(prefix="fxcpp-cold-")
for _d in (os.environ["TORCHINDUCTOR_CACHE_DIR"], os.environ["FXCPP_CACHE_DIR"]):
    atexit.register(shutil.rmtree, _d, True)

import torch  # noqa: E402

from . import configs, suite  # noqa: E402
from .harness import DTYPES, sync  # noqa: E402
from .machine import proc_status_mb  # noqa: E402


def reset_peak_rss() -> bool:
    """Restart VmHWM from the current RSS (Linux clear_refs 5), so the peak measured is that of
    compiling and running, not of building the model (a bf16 model is built in fp32 first).
    The heap is trimmed first: memory freed by that conversion would otherwise stay in the
    process and absorb a compiler's new allocations (packed weights) unseen."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    """VmHWM: this process's own peak RSS. (ru_maxrss would include the parent's, inherited across fork+exec.)"""
    return proc_status_mb("VmHWM")


def main() -> int:
    a = json.loads(sys.argv[1])
    import fxcpp  # noqa: F401

    spec = next(s for s in (suite.TINY if a.get("tiny") else suite.SUITE) if s.name == a["model"])
    model, inputs = spec.build(a["batch"])
    model, inputs = suite.to_dtype(model, inputs, DTYPES[a["dtype"]], a["device"])
    cfg = configs.CONFIGS[a["config"]]
    fn = cfg.compile(configs.target(cfg, spec, model))
    since = "model built" if reset_peak_rss() else "process start"
    with torch.no_grad():
        t0 = time.perf_counter()
        with cfg.compile_context():
            fn(*inputs)
        sync(a["device"])
        out = {"compile_s_cold": time.perf_counter() - t0}
        for _ in range(5):
            fn(*inputs)
    out["peak_rss_mb"], out["peak_rss_since"] = peak_rss_mb(), since
    # What a serving process holds from then on: after the calls, garbage collected and the
    # heap trimmed (freed pages glibc keeps would otherwise count).
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    out["settled_rss_mb"] = proc_status_mb("VmRSS")
    if a["device"] == "cuda":
        out["cuda_max_alloc_mb"] = torch.cuda.max_memory_allocated() / 2**20
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
