"""The choice cache: first-call kernel choices kept across processes (runtime/choice_cache.h).

A oneDNN kernel's first call per input signature times its path against eager's ATen ops
(an attention node: its matmuls against ATen's flash kernel); on BERT-base and ResNet-50 that
is a second or more of a fresh process's first call. Each compiled partition keeps what it
measured in one file, named by the hash of everything a choice depends on, so a restarted
service measures nothing again. The file holds node names, call signatures, choices and the
two times behind each: no weights, no code.

Where: Options.cache_dir, else $FXCPP_CACHE_DIR, else "fxcpp" inside torch's own cache
directory ($TORCHINDUCTOR_CACHE_DIR, default /tmp/torchinductor_$USER), so shipping that
directory with a service ships both. Off: Options(cache=False), FXCPP_CACHE=0, or torch's
own switch torch.compiler.config.force_disable_caches.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import os
import warnings

import torch
import torch.fx as fx

from . import _C, lowering
from .options import Options

log = logging.getLogger("fxcpp")


def enabled(opts: Options) -> bool:
    if not opts.cache or os.environ.get("FXCPP_CACHE", "1") == "0":
        return False
    return not getattr(getattr(torch.compiler, "config", None), "force_disable_caches", False)


def directory(opts: Options) -> str:
    if opts.cache_dir:
        return opts.cache_dir
    if os.environ.get("FXCPP_CACHE_DIR"):
        return os.environ["FXCPP_CACHE_DIR"]
    from torch._inductor.runtime.cache_dir_utils import cache_dir  # a light module: no Inductor import

    return os.path.join(cache_dir(), "fxcpp")


@functools.lru_cache(maxsize=1)
def _build_and_host() -> str:
    """What every key shares: our build (a rebuild changes the extension's size or time), torch's,
    and the host as the kernels see it (ISA, caches, oneDNN's ISA)."""
    st = os.stat(_C.__file__)
    host = _C.host_info()
    return "|".join([_C.__name__, str(st.st_size), str(st.st_mtime_ns), torch.__version__, host["summary"], host["aten_isa"],
                     str(host["native_bf16"])])


def _input_metas(gm: fx.GraphModule) -> list[str]:
    """Each input's (dtype, sizes, strides, device) as the lowering reads it; repr of a non-tensor."""
    return [repr(lowering._meta_of(v) if isinstance(v, torch.Tensor) else v)
            for v in (n.meta.get("val") for n in gm.graph.find_nodes(op="placeholder"))]


def key(gm: fx.GraphModule, opts: Options, label: str, static) -> str:
    """Everything a choice depends on: the graph and its input metas, which inputs are static,
    the options that change the plan, the build, the host, and the thread count the choice was
    timed with. FXCPP_BF16 changes bf16's path, so it is part of it too."""
    parts = [_build_and_host(), str(torch.get_num_threads()), os.environ.get("FXCPP_BF16", ""), label,
             repr(sorted(static)), repr(opts.pack_weights), repr(sorted(opts.disable_passes)), gm.code,
             *_input_metas(gm)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def open_for(gm: fx.GraphModule, opts: Options, label: str, static):
    """The partition's _C.ChoiceCache, or None when the cache is off or cannot be made."""
    if not enabled(opts):
        return None
    try:
        k = key(gm, opts, label, static)
        d = os.path.join(directory(opts), "choices")
        os.makedirs(d, exist_ok=True)
        cache = _C.ChoiceCache(os.path.join(d, k + ".txt"), k)
    except Exception as e:  # noqa: BLE001 - a cache that cannot be made is only slower
        warnings.warn(f"fxcpp: the choice cache is off for this graph ({type(e).__name__}: {e})", stacklevel=3)
        return None
    if cache.warning:
        warnings.warn(f"fxcpp: {cache.warning}", stacklevel=3)
    log.debug("fxcpp: %s: choice cache %s (%d choices)", label, cache.path, cache.loaded)
    return cache
