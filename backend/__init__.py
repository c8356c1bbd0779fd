"""fxcpp: a torch.compile backend with a C++ core.

    compiled = torch.compile(model, backend="fxcpp")   # registered through an entry point
    report = fxcpp.explain(model, x)                    # which kernel ran each FX node
"""
import logging as _logging
import os as _os

import torch  # noqa: F401  (loads libtorch before our extension)

from . import _C  # noqa: F401
from . import fake_device_guard as _fake_device_guard
from . import passes  # noqa: F401  (fxcpp.passes.remove_dropout, ...)
from . import precompile  # noqa: F401  (fxcpp.precompile.keep_serializable_guards_unsafe)
from .compiled import FxcppCompileError
from .compiler import backend
from .direct_api import compile  # noqa: A004
from .explain import Report, explain
from .options import Options
from .saved_plan import FxcppSaveError, save
from .shape_prop import shape_prop
from .user_passes import FxcppPassError
from .verify import FxcppVerifyError

FxcppNodeError = _C.FxcppNodeError


def refresh() -> None:
    """Make every compiled model in this process compute its packed weights (and any value it
    keeps that was computed from parameters alone) again from the current bytes, at its next
    call. Needed only after a write fxcpp cannot see: through a raw alias of a parameter's
    memory (a NumPy array from `w.detach().numpy()`, a DLPack capsule, a pointer held by C
    code) that was taken before the compiled call that last read it. Every write through torch,
    `.data` included, is seen without it. Process-wide; costs one re-pack per weight."""
    _C.refresh_weights()

__all__ = ["backend", "compile", "explain", "Options", "Report", "FxcppCompileError", "FxcppVerifyError", "FxcppNodeError",
           "FxcppPassError", "passes", "shape_prop",
           "save", "FxcppSaveError", "refresh"]


def _configure_logging():
    """FXCPP_LOG=debug|info|warning turns the "fxcpp" logger up (it writes to stderr)."""
    level = _os.environ.get("FXCPP_LOG")
    if not level:
        return
    logger = _logging.getLogger("fxcpp")
    logger.setLevel(level.upper())
    if not logger.handlers:
        handler = _logging.StreamHandler()
        handler.setFormatter(_logging.Formatter("[fxcpp %(levelname)s] %(message)s"))
        logger.addHandler(handler)


_configure_logging()
# Before any compile: a CUDA build without a GPU must not tie its fake device guard to a thread
# that may end (fake_device_guard.py).
_fake_device_guard.register_from_a_lasting_thread()
if _logging.getLogger("fxcpp").isEnabledFor(_logging.DEBUG):
    _host = _C.host_info()
    _logging.getLogger("fxcpp").debug("host: %s; bf16 GEMM/conv %s", _host["summary"],
                                      "native" if _host["native_bf16"] else "computed as fp32")
