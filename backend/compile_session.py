"""The process-wide "compiling" mark that torch 2.13's Dynamo sets for a compile session
(torch.compiler._compile_session_context, entered in convert_frame.py) and torch 2.11's does not.

aot_autograd traces with make_fx, which sets torch.fx's tracing flag, a module global. Dynamo's
wrapper of every compiled function raises "Detected that you are using FX to symbolically trace a
dynamo-optimized function" when it finds that flag set and torch.compiler.is_compiling() false,
from whichever thread. On torch 2.11 a service thread calling a compiled model while another
thread compiles therefore fails (aot_eager and fxcpp alike: benchmarks/results/gpu-machine/
fx_flag_race.txt), and on any torch while fxcpp.compile's plans (the direct API, a torch.fx.wrap
split's pieces) trace at their first call, outside Dynamo. Where no one has set the mark, fxcpp
sets it for its own compile, as torch 2.13's Dynamo does for its session; where Dynamo has, this
does nothing.
"""
from __future__ import annotations

import contextlib
import threading

import torch

_lock = threading.Lock()
_depth = 0  # compiles in flight that set the mark, across threads
_before = False


@contextlib.contextmanager
def marked():
    global _depth, _before
    tc = torch.compiler
    with _lock:
        own = _depth > 0 or (hasattr(tc, "_is_compiling_flag") and not tc.is_compiling())
        if own:
            if _depth == 0:
                _before, tc._is_compiling_flag = tc._is_compiling_flag, True
            _depth += 1
    try:
        yield
    finally:
        if own:
            with _lock:
                _depth -= 1
                if _depth == 0:
                    tc._is_compiling_flag = _before
