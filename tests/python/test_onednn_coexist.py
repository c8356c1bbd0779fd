"""Our oneDNN and the one inside libtorch_cpu live in one process without clashing, and
share one OpenMP runtime (so one thread pool, following torch.get_num_threads())."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import fxcpp
from fxcpp import _C  # noqa: F401 - loads our libdnnl

# These tests are about the oneDNN kernels: a build without them (FXCPP_ONEDNN=0, e.g. on a
# GPU machine without oneDNN) has nothing here to test.
pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")


def _mapped(substr):
    with open("/proc/self/maps") as f:
        return sorted({line.split()[-1] for line in f if substr in line and "/" in line})


def test_both_onednns_loaded_and_one_openmp_runtime():
    torch.nn.functional.conv2d(torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3))  # torch's own oneDNN path
    ours = _mapped("libdnnl.so")
    assert len(ours) == 1 and not ours[0].startswith(os.path.dirname(torch.__file__)), ours  # not torch's
    assert _mapped("libtorch_cpu.so")
    # libdnnl asks for libgomp.so.1 by soname; torch has loaded its bundled copy first, so the
    # loader reuses it: one OpenMP runtime, one thread pool, one num_threads setting.
    gomp = _mapped("libgomp")
    assert len(gomp) == 1, gomp


def test_torch_conv_and_ours_interleave_with_equal_results():
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 8, 16, 16), torch.randn(16, 8, 3, 3), torch.randn(16)

    def f(x, w, b):
        return torch.relu(F.conv2d(x, w, b, padding=1))

    compiled = torch.compile(f, backend="fxcpp")
    assert fxcpp.explain(f, x, w, b).kernel_counts["onednn"] == 2
    with torch.no_grad():
        for _ in range(5):
            ref = f(x, w, b)  # torch's mkldnn convolution
            got = compiled(x, w, b)  # ours
            torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4)


def test_no_dnnl_symbols_resolve_across_the_two_libraries():
    # torch exports none of oneDNN's C API, so our calls can only bind to our libdnnl.
    torch_cpu = _mapped("libtorch_cpu.so")[0]
    out = subprocess.run(["nm", "-D", "--defined-only", torch_cpu], capture_output=True, text=True, check=True).stdout
    exported = [line.split()[-1] for line in out.splitlines() if line.split()[-1].startswith("dnnl_")]
    assert exported == [], exported[:5]


_THREADS_SCRIPT = textwrap.dedent("""
    import os, sys, torch, torch.nn.functional as F
    torch.set_num_threads(int(sys.argv[1]))
    f = lambda x, w: F.conv2d(x, w, padding=1).relu()
    if sys.argv[2] == "fxcpp":
        f = torch.compile(f, backend="fxcpp")
    x, w = torch.randn(8, 32, 56, 56), torch.randn(32, 32, 3, 3)
    with torch.no_grad():
        for _ in range(3):
            f(x, w)
    print(len(os.listdir("/proc/self/task")))
""")


def _threads(n, mode):
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", _THREADS_SCRIPT, str(n), mode], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


def test_onednn_threads_follow_torch_set_num_threads():
    # Going from 1 to 2 torch threads adds as many OS threads with our oneDNN conv as with
    # torch's own: our primitives run on torch's OpenMP pool, never on a second one.
    eager = _threads(2, "eager") - _threads(1, "eager")
    ours = _threads(2, "fxcpp") - _threads(1, "fxcpp")
    assert eager >= 1 and ours == eager, (eager, ours)
