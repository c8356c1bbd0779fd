"""A first call's measurement times the kernels, not a Python dispatch mode around the call.

Under a TorchDispatchMode every ATen call goes through Python, and aot's runtime runs each graph's
first call under one (torch 2.13, `_AnalyzeCustomOpInputOutputMode`). A [4, 16] or [4, 64] Linear
measured there took eager 58-99 us against 4-8 without it, ours 20-33 against 2-6: a choice that said
nothing of the kernels, and the choice cache kept it for later processes. Here a mode that sleeps
5 ms in every ATen call it sees makes any call it saw in a measurement plain in the times."""
import re
import sys
import time

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from fxcpp import _C
from helpers import assert_same

pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")


class SlowPassThrough(TorchDispatchMode):
    """Runs every ATen call it sees unchanged (as aot's aliasing check does ATen ops), 5 ms late."""

    def __init__(self):
        super().__init__()
        self.seen = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen += 1
        time.sleep(0.005)
        return func(*args, **(kwargs or {}))


def _plan(fn, *xs):
    sys.path.insert(0, __file__.rsplit("/python/", 1)[0] + "/cpp")
    from graphs import lowered

    _, g = lowered(fn, *xs)  # every input but the first static, as a module's parameters are
    _C.run_pipeline(g)
    return _C.Executable(g)


def _notes(exe, kind):
    return [note for step, note in zip(exe.steps(), exe.step_notes()) if step[2] == kind]


CASES = {
    "linear": (lambda x, w, b: F.relu(F.linear(x, w, b)), [(4, 64), (64, 64), (64,)], r"vs eager's"),
    "conv": (lambda x, w, b: F.relu(F.conv2d(x, w, b, padding=1)), [(1, 8, 12, 12), (8, 8, 3, 3), (8,)], r"vs eager's"),
    "attention": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), [(2, 4, 24, 32)] * 3,
                  r"vs ATen's flash attention"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_first_call_under_a_dispatch_mode_measures_the_kernels_alone(case, monkeypatch):
    monkeypatch.delenv("FXCPP_KERNEL_CHOICE", raising=False)
    monkeypatch.delenv("FXCPP_ATTENTION", raising=False)
    fn, shapes, theirs = CASES[case]
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(s, generator=g) / s[-1] ** 0.5 for s in shapes]
    exe = _plan(fn, *xs)
    with SlowPassThrough() as mode:
        out = exe.run(xs)[0]
    (note,) = _notes(exe, "onednn")
    times = re.search(r"measured (\d+) us " + theirs + r" (\d+) us", note)
    assert times, note
    # Each path makes ATen calls (eager's ops; our output's allocation), each 5 ms late if seen.
    assert int(times[1]) < 2500 and int(times[2]) < 2500, note
    assert mode.seen == 0, mode.seen  # this plan is the one kernel, measured: the mode saw nothing
    assert_same(fn(*xs), out)
    with SlowPassThrough() as mode:  # the measurement's exclusion ends with it: a later call is seen
        assert_same(fn(*xs), exe.run(xs)[0])
    assert mode.seen > 0
