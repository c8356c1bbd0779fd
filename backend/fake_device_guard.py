"""PyTorch's fake CUDA device guard, registered by a thread that outlives every compile.

On a CUDA build of torch running on a host without a GPU, FakeTensorMode (every Dynamo and
aot_autograd trace) calls `torch._C._ensureCUDADeviceGuardSet()` on entry. Its first call
stores a pointer to a *thread_local* guard object in the process-wide device-guard registry
(c10/core/impl/DeviceGuardImplInterface.cpp); later calls keep it. When the thread that made
that first call ends, the registry points at freed memory and the next trace, on any thread,
may segfault. A service whose first compile runs on a request thread hits it: on torch
2.11.0+cu130 without a GPU, four threads racing the first call of a compiled model crash the
process under `backend="aot_eager"` as under fxcpp, and calls of the function itself from four
threads crash it too. A CPU-only build (no CUDA guard registered) and a host with a GPU never
take that path.

fxcpp makes that first call at import: on the main thread, whose thread-locals live until the
process exits, or, imported from another thread, on a daemon thread kept waiting for the
process's life. Where another thread made the first call before fxcpp was imported, the
registry already holds its object and nothing here can replace it.
"""
from __future__ import annotations

import threading

import torch

_keeper: threading.Thread | None = None


def _needed() -> bool:
    """A CUDA build that sees no GPU: where FakeTensorMode makes the call (`avoid_device_init`).
    device_count() asks NVML first; is_available() would initialize CUDA in a process that may
    fork its workers (a GPU host with a preloading server) before any compile."""
    return (torch.cuda._is_compiled() and hasattr(torch._C, "_ensureCUDADeviceGuardSet")
            and torch.cuda.device_count() == 0)


def register_from_a_lasting_thread() -> str:
    """Make the first call from a thread that lives as long as the process; says which."""
    global _keeper
    if not _needed():
        return "not needed"
    if threading.current_thread() is threading.main_thread():
        try:
            torch._C._ensureCUDADeviceGuardSet()
        except Exception as e:  # noqa: BLE001 - a workaround must not stop the import; traces call it too
            return f"not registered ({type(e).__name__}: {e})"
        return "main thread"
    if _keeper is None:
        done = threading.Event()

        def keep():
            try:
                torch._C._ensureCUDADeviceGuardSet()
            finally:
                done.set()  # should the call raise, the import must still go on
            threading.Event().wait()  # never set: this thread's guard object must outlive every trace

        _keeper = threading.Thread(target=keep, name="fxcpp-fake-cuda-guard", daemon=True)
        _keeper.start()
        done.wait()
    return "keeper thread"
