"""fxcpp: a torch.compile backend with a C++ core.

    compiled = torch.compile(model, backend="fxcpp")   # registered through an entry point
    report = fxcpp.explain(model, x)                    # which kernel ran each FX node
"""
import torch  # noqa: F401  (loads libtorch before our extension)

from . import _C  # noqa: F401
from .compiled import FxcppCompileError
from .compiler import backend, compile  # noqa: A004
from .explain import Report, explain
from .options import Options
from .verify import FxcppVerifyError

FxcppNodeError = _C.FxcppNodeError

__all__ = ["backend", "compile", "explain", "Options", "Report", "FxcppCompileError", "FxcppVerifyError", "FxcppNodeError"]
