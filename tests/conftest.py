import atexit
import os
import shutil
import sys
import tempfile

import pytest

# The choice cache (backend/choice_cache.py) starts empty for each test session: a run never
# takes first-call choices measured by an earlier one. Before fxcpp is imported.
# Removed at exit: every test session (and each pytest a test starts in a subprocess) made one,
# and they piled up in /tmp (120 after a day's runs).
os.environ["FXCPP_CACHE_DIR"] = tempfile.mkdtemp(prefix="fxcpp-test-cache-")
atexit.register(shutil.rmtree, os.environ["FXCPP_CACHE_DIR"], ignore_errors=True)

# The streaming-store rule (cpu_fused) sees a 32 MiB last-level cache on every host, so that
# the tests that size their calls to stream do so wherever they run (some hosts of this
# machine kind report a 480 MiB L3, and nothing the tests can afford would pass half of it).
os.environ.setdefault("FXCPP_LLC_BYTES", str(32 << 20))

import torch  # noqa: E402
import torch._dynamo.guards  # noqa: E402

# Dynamo times every new frame's guards once for its compile metrics (guards_log.debug and the
# "guard_latency_us" counter), after flushing the CPU caches: 22-25 ms a compiled frame on the
# 260 MiB-L3 Intel host (a `x * 2 + 1` frame compiled in 36-40 ms with it, 13-14 without), paid
# by every backend and thousands of times in this suite. The tests never read that figure, and
# nothing else changes: the guards are still built and checked (the `check` just before it).
if hasattr(torch._dynamo.guards, "profile_guard_manager"):
    torch._dynamo.guards.profile_guard_manager = lambda *args: 0.0

# Tests import the installed package `fxcpp`, never the source folder.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]


if os.environ.get("FXCPP_EXPECT_SANITIZED") == "1":  # make test-asan: the ASan build, not the installed one
    import fxcpp  # noqa: E402

    assert fxcpp._C.sanitized(), f"make test-asan imported an uninstrumented fxcpp from {fxcpp.__file__}"


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Each test starts with empty Dynamo caches, so recompile limits never leak between tests."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def onednn_forced(monkeypatch):
    """oneDNN's path at every kernel (FXCPP_KERNEL_CHOICE=onednn): never eager's ops where a first
    call measured them faster (which wins a small GEMM is the host's mood), never the GEMV (its own
    accumulation). A module takes it with `pytest.mark.usefixtures("onednn_forced")`."""
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "onednn")
