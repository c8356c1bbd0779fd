"""A CUDA build of torch on a host without a GPU: PyTorch's fake CUDA device guard must be
registered by a thread that outlives every compile (backend/fake_device_guard.py), or a service
whose first compile ran on a request thread may segfault at a later one."""
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

from fxcpp import fake_device_guard

CUDA_BUILD_WITHOUT_GPU = torch.cuda._is_compiled() and not torch.cuda.is_available()


@pytest.fixture
def gpu_less_cuda_build(monkeypatch):
    """A host taken for a CUDA build without a GPU, no keeper thread started yet; returns a
    function putting its argument in place of torch._C._ensureCUDADeviceGuardSet."""
    monkeypatch.setattr(fake_device_guard, "_needed", lambda: True)
    monkeypatch.setattr(fake_device_guard, "_keeper", None)
    return lambda fn: monkeypatch.setattr(torch._C, "_ensureCUDADeviceGuardSet", fn, raising=False)


@pytest.fixture
def recorded_calls(gpu_less_cuda_build):
    """The calling thread of each call of torch._C._ensureCUDADeviceGuardSet."""
    calls = []
    gpu_less_cuda_build(lambda: calls.append(threading.current_thread()))
    return calls


def _refuse():
    raise RuntimeError("refused")


def _register_from_a_worker(timeout=None) -> tuple[threading.Thread, list]:
    said = []
    worker = threading.Thread(target=lambda: said.append(fake_device_guard.register_from_a_lasting_thread()),
                              daemon=True)
    worker.start()
    worker.join(timeout)
    return worker, said


def test_from_the_main_thread_the_main_thread_registers(recorded_calls):
    assert fake_device_guard.register_from_a_lasting_thread() == "main thread"
    assert recorded_calls == [threading.main_thread()]


def test_from_another_thread_a_kept_daemon_thread_registers(recorded_calls):
    worker, said = _register_from_a_worker()
    assert said == ["keeper thread"]
    assert len(recorded_calls) == 1
    keeper = recorded_calls[0]
    assert keeper is not worker and keeper.name == "fxcpp-fake-cuda-guard" and keeper.daemon
    assert keeper.is_alive()  # its thread-locals (the registered guard) outlive the worker
    _register_from_a_worker()
    assert recorded_calls.count(keeper) == 1  # one keeper, started once


def test_a_main_thread_call_that_raises_does_not_stop_the_import(gpu_less_cuda_build):
    gpu_less_cuda_build(_refuse)
    assert fake_device_guard.register_from_a_lasting_thread() == "not registered (RuntimeError: refused)"


def test_a_keeper_whose_call_raises_does_not_hang_the_import(gpu_less_cuda_build, monkeypatch):
    gpu_less_cuda_build(_refuse)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the keeper's traceback, expected
    worker, said = _register_from_a_worker(timeout=60)
    assert not worker.is_alive() and said == ["keeper thread"]


@pytest.mark.skipif(not CUDA_BUILD_WITHOUT_GPU,
                    reason="the crash needs a CUDA build of torch on a host without a GPU (a CPU build registers "
                           "no CUDA guard; a GPU host never calls the function)")
def test_threads_racing_first_compiles_do_not_crash_after_import():
    # This script without its `import fxcpp` segfaulted in 3 runs of 3 on torch 2.11.0+cu130 on
    # a host without a GPU; with it, it passes there.
    script = textwrap.dedent("""
        import threading, torch
        import fxcpp
        m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64))
        c = torch.compile(m, backend="aot_eager", fullgraph=True)
        start = threading.Barrier(4)
        def first_call():
            start.wait()
            with torch.no_grad():
                c(torch.randn(8, 64))
        def direct_calls():
            start.wait()
            for _ in range(200):
                torch._C._ensureCUDADeviceGuardSet()
        for work in (first_call, direct_calls):
            threads = [threading.Thread(target=work) for _ in range(4)]
            [t.start() for t in threads]
            [t.join() for t in threads]
        later = threading.Thread(target=lambda: c(torch.randn(3, 64)))  # a new shape: a compile after they ended
        later.start(); later.join()
        print("survived")
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and "survived" in p.stdout, (p.returncode, p.stderr[-2000:])
