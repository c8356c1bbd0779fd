"""A compiled call while another Python thread runs Python (a serving process tokenizing or
parsing requests beside the model). The plan runs with the GIL released; in torch 2.13 (c10's
PyObject preservation) a tensor that has a Python object takes the GIL when its C++ count drops
from 2 to 1, so the plan freeing a parameter's slot at its last use waited for the GIL once per
parameter: a switch interval each while another thread held it (a 40-parameter model: 0.29 ms a
call alone, 332-344 ms beside a spinning thread with a 10 ms interval). The bindings now keep a
reference to every input until the GIL is back (csrc/python/bindings.cpp, run_releasing_gil).

Not a speed test: the two outcomes differ by a factor of the parameter count (here 40) times the
switch interval, and the bound sits at 5 intervals; a call alone takes well under one. The
fastest of five calls is checked: on a Zen 4 host, before the change and after it alike, calls
beside the spinner came in bursts that waited 1 to 6 intervals (30 calls: 22 under 2 ms, six
25 ms, one 83 and one 160 ms) where the spinner won the GIL at the plan's one release and
Python's forced switches followed, so a median of five crossed the bound now and then. The bug
shows in bursts there too (the build before the change: 11 of 30 calls 557-681 ms, 14 under
2 ms), yet the fastest of five took 600 ms in both runs of this test against it. On a 2-core Skylake-SP
VM (session 58) whole runs of five came in bursts of 5.3-6.1 intervals (106-122 ms; this model
makes no call of the session's new code path: cpu_fused_stats()["planned_calls"] stays 0), failing
4 of 5 runs against a bound of 5 intervals; the bound is 12 (240 ms), still well under the bug's
600 ms."""
import sys
import threading
import time

import pytest
import torch

import fxcpp  # noqa: F401  (registers the backend)


def _model():
    torch.manual_seed(0)
    # 40 parameters; [64, 256] activations keep the plan off the GIL (it is not brief()).
    return torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.LayerNorm(256))
                                 for _ in range(10)]).eval()


@pytest.fixture
def switch_interval():
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.02)
    yield 0.02
    sys.setswitchinterval(before)


def _calls_beside_a_spinning_thread(fn, x, n=5):
    stop = threading.Event()

    def spin():
        k = 0
        while not stop.is_set():
            k += 1

    th = threading.Thread(target=spin, daemon=True)
    th.start()
    try:
        times = []
        for _ in range(n):
            t = time.perf_counter()
            out = fn(x)
            times.append(time.perf_counter() - t)
    finally:
        stop.set()
        th.join()
    return min(times), out


def test_a_call_beside_a_python_thread_waits_for_the_gil_at_most_at_its_ends(switch_interval):
    """torch.compile's inference path (Dynamo calls Executable.__call__). The build before the
    change took 580 ms a call here. (A forward under autograd is not checked: torch's own
    detach and the previous step's autograd graph release the GIL about 20 times a call, whatever
    the backend.)"""
    torch._dynamo.reset()
    m, x = _model(), torch.randn(64, 256)
    fn = torch.compile(m, backend="fxcpp")
    with torch.no_grad():
        ref = m(x)
        for _ in range(3):
            fn(x)
        took, out = _calls_beside_a_spinning_thread(fn, x)
    torch.testing.assert_close(out, ref)
    assert took < 12 * switch_interval, f"the fastest of five calls took {took * 1e3:.0f} ms beside a spinning thread"
