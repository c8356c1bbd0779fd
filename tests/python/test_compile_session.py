"""A compiled function called from another thread while fxcpp traces a new graph
(backend/compile_session.py). torch 2.11's Dynamo leaves torch.compiler.is_compiling() false
during a compile; aot's make_fx then holds torch.fx's tracing flag, a module global, and Dynamo
refuses every compiled call from any thread meanwhile ("Detected that you are using FX to
symbolically trace a dynamo-optimized function"): on the H200 machine with torch 2.11, 187,171
refused calls in 15 s under fxcpp, 123,935 under aot_eager (benchmarks/results/gpu-machine/
fx_flag_race.txt). torch 2.13's Dynamo marks its compile session; these tests take that mark
away to run 2.11's case on any torch."""
import contextlib
import math
import threading

import pytest
import torch
from torch._dynamo.backends.common import aot_autograd

import fxcpp  # noqa: F401  (registers the backend)


def _erf_gelu(x, approximate="none"):
    return x * 0.5 * (1.0 + torch.erf(x * (1.0 / math.sqrt(2.0))))


def _call_from_another_thread_during_the_trace(compile_with):
    """Compiles gelu(x) + 1 with a decomposition for gelu that, while aot's trace runs, calls a
    function compiled before from a second thread. What that call got, and whether the trace
    held the FX flag then. compile_with(fn, decompositions or None) -> the compiled fn."""
    x = torch.randn(64)
    served = compile_with(lambda t: (t * 2.0).relu(), None)
    with torch.no_grad():
        want = served(x)
    seen = {}

    def call():
        try:
            with torch.no_grad():
                seen["out"] = served(x)
        except Exception as e:  # noqa: BLE001 - what the caller got is the result
            seen["error"] = e

    def gelu(t, approximate="none"):
        if "flag" not in seen:
            seen["flag"] = torch.fx._symbolic_trace._is_fx_tracing_flag
            th = threading.Thread(target=call)
            th.start()
            th.join(timeout=120)
        return _erf_gelu(t, approximate)

    fn = lambda t: torch.nn.functional.gelu(t) + 1.0
    compiled = compile_with(fn, {torch.ops.aten.gelu.default: gelu})
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), _erf_gelu(x) + 1.0)
    return seen, want


@pytest.fixture
def torch_211_dynamo(monkeypatch):
    """Dynamo without its compile-session mark (torch 2.11's convert_frame)."""
    if not hasattr(torch.compiler, "_compile_session_context"):
        pytest.skip("this torch's Dynamo has no compile-session mark to take away (it runs as torch 2.11)")
    monkeypatch.setattr(torch.compiler, "_compile_session_context", contextlib.nullcontext)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_a_plain_aot_backend_refuses_the_other_threads_call(torch_211_dynamo):
    """The case itself: a backend made with aot_autograd alone (as aot_eager is), no mark."""
    def compile_with(fn, decomps):
        return torch.compile(fn, backend=aot_autograd(fw_compiler=lambda gm, _: gm.forward, decompositions=decomps or {}))

    seen, _ = _call_from_another_thread_during_the_trace(compile_with)
    assert seen["flag"] is True
    assert "symbolically trace a dynamo-optimized function" in str(seen.get("error")), seen


def _fxcpp(fn, decomps):
    return torch.compile(fn, backend="fxcpp", options={"decompositions": decomps} if decomps else None)


def test_fxcpp_marks_its_compile_and_the_other_threads_call_runs(torch_211_dynamo):
    seen, want = _call_from_another_thread_during_the_trace(_fxcpp)
    assert seen["flag"] is True
    assert "error" not in seen, seen["error"]
    torch.testing.assert_close(seen["out"], want)
    assert not torch.compiler.is_compiling()  # the mark is gone after the compile


def test_the_other_threads_call_runs_on_this_torch():
    """Unpatched: Dynamo's own mark (torch 2.13) or fxcpp's (torch 2.11)."""
    torch._dynamo.reset()
    seen, want = _call_from_another_thread_during_the_trace(_fxcpp)
    assert seen["flag"] is True
    assert "error" not in seen, seen["error"]
    torch.testing.assert_close(seen["out"], want)


def test_the_direct_apis_first_call_trace_lets_other_threads_call():
    """fxcpp.compile traces at its first call, outside Dynamo's compile session on any torch."""
    torch._dynamo.reset()

    def compile_with(fn, decomps):
        if decomps is None:
            return torch.compile(fn, backend="fxcpp")
        gm = torch.fx.symbolic_trace(fn)
        return fxcpp.compile(gm, options={"decompositions": decomps})

    seen, want = _call_from_another_thread_during_the_trace(compile_with)
    assert seen["flag"] is True
    assert "error" not in seen, seen["error"]
    torch.testing.assert_close(seen["out"], want)
