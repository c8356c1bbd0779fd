"""Streaming stores in cpu_fused: a call moving more than half the last-level cache writes its
fresh fp32/bf16/fp16 outputs around the cache (fused_kernel.cpp, `streaming`). The values are
those of ordinary stores: every path (pointwise blocks, packed short rows, long rows), rows
whose starts are not aligned (those stores fall back to ordinary ones), and an output that also
feeds the group's other members."""
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import fxcpp
from fxcpp import _C
from test_cpu_fused import compare

# Sized so that inputs and outputs together pass half of any last-level cache up to 128 MiB.
CASES = {
    "pointwise": (lambda x: (x * 2.0 + 1.0).relu() - x, (4096, 4096)),
    "packed_rows": (lambda x: torch.softmax(x * 0.5, -1), (8192, 2048)),
    "packed_rows_unaligned": (lambda x: F.layer_norm(x + 1.0, (x.shape[-1],)) * 2.0, (8191, 2047)),
    "long_rows": (lambda x: torch.softmax(x - 1.0, -1), (1024, 16384)),
    "two_outputs": (lambda x: (lambda s: (s, F.gelu(F.layer_norm(s, (s.shape[-1],)))))(x * 2.0 + 1.0), (4096, 4100)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_streamed_outputs_match_eager(name, dtype):
    fn, shape = CASES[name]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    before = _C.cpu_fused_stats()["streamed"]
    compare(fn, [x])
    assert _C.cpu_fused_stats()["streamed"] > before, "no output was streamed: the case tests nothing"


def test_small_calls_do_not_stream():
    before = _C.cpu_fused_stats()["streamed"]
    compare(lambda x: torch.softmax(x * 0.5, -1), [torch.randn(64, 768)])
    assert _C.cpu_fused_stats()["streamed"] == before


def test_the_streaming_rule_reads_the_pinned_cache_size():
    """conftest pins FXCPP_LLC_BYTES; host_info reports the size the rule reads."""
    assert _C.host_info()["llc_bytes"] == int(os.environ["FXCPP_LLC_BYTES"]) == 32 << 20


@pytest.mark.parametrize("env, want", [(None, "host"), ("0", "host"), ("junk", "host"), ("1048576", 1 << 20),
                                       ("1073741824", 1 << 30)])
def test_the_cache_size_defaults_to_the_hosts_and_the_variable_overrides_it(env, want):
    """In a process of its own (the size is read once): unset, 0 or not a number, the host's
    L3 (its L2, or 32 MiB, where the system reports none), at most 128 MiB (a VM's share of a
    multi-die L3); a positive number of bytes wins, larger than that too."""
    e = {k: v for k, v in os.environ.items() if k != "FXCPP_LLC_BYTES"}
    if env is not None:
        e["FXCPP_LLC_BYTES"] = env
    out = subprocess.run([sys.executable, "-c", "import json, fxcpp; print(json.dumps(fxcpp._C.host_info()))"],
                         env=e, capture_output=True, text=True, check=True).stdout
    h = json.loads(out.strip().splitlines()[-1])
    if want == "host":
        want = min(h["l3"] or h["l2"] or 32 << 20, h["llc_max_bytes"])
        assert h["llc_max_bytes"] == 128 << 20
    assert h["llc_bytes"] == want, h
