"""Where fxcpp computes a bf16 or fp16 node in fp32 (no native bf16 here, or it is slower than
fp32; fp16 always), the ATen alternative a oneDNN node measures against and falls back to is
eager's own ops where ATen runs the dtype on native kernels, and otherwise computes in fp32 too
and rounds once: ATen's bf16 GEMM is emulated on the AVX2 host at a fifth of fp32's speed, while
its fp32 one (MKL) beats oneDNN's gemm on some shapes, as the fp32 model's own first calls find
(GPT-2's Conv1D addmm on the AVX2 host took 1.26x its fp32 time in bf16, 1.14x with this). Where
ATen is native (the Intel AVX512-BF16 host without AMX, where fxcpp computes bf16 in fp32), the
widened ops took 2.3x eager's time at M = 1 and 14x at M = 4
(benchmarks/results/aten-native-alternative/), so choosing them made fxcpp slower than eager.
FXCPP_BF16=fp32 makes any host compute bf16 in fp32, FXCPP_ATEN_WIDEN=1 gives it the emulating
host's ATen alternative, and FXCPP_KERNEL_CHOICE=aten takes the ATen path."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxcpp
from fxcpp import _C
from helpers import aten_runs_natively

pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")


def _linear_gelu_on_aten(monkeypatch, bf16: str, dtype=torch.bfloat16):
    monkeypatch.setenv("FXCPP_BF16", bf16)
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "aten")
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(512, 256), nn.GELU()).eval().to(dtype), torch.randn(64, 512).to(dtype)


def _on_aten(m, x):
    """fxcpp's output, after checking that every oneDNN node ran its ATen alternative."""
    with torch.no_grad():
        report = fxcpp.explain(m, x)
        out = torch.compile(m, backend="fxcpp")(x)
    notes = [r.impl for r in report.rows if r.kernel == "onednn" and r.impl]
    assert notes and all("aten: FXCPP_KERNEL_CHOICE=aten" in n for n in notes), [(r.kernel, r.op, r.impl) for r in report.rows]
    return out


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_the_aten_path_of_a_widened_linear_computes_in_fp32_and_rounds_once(monkeypatch, dtype):
    m, x = _linear_gelu_on_aten(monkeypatch, "fp32", dtype)
    monkeypatch.setenv("FXCPP_ATEN_WIDEN", "1")
    with torch.no_grad():
        eager = m(x)
        wide = F.gelu(F.linear(x.float(), m[0].weight.float(), m[0].bias.float())).to(dtype)
    assert torch.equal(_on_aten(m, x), wide)
    assert not torch.equal(eager, wide)  # the check can tell the two apart: eager rounds between ops


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_computed_in_fp32_the_aten_path_is_eagers_own_where_aten_is_native(monkeypatch, dtype):
    m, x = _linear_gelu_on_aten(monkeypatch, "fp32", dtype)
    with torch.no_grad():
        eager = m(x)
        wide = F.gelu(F.linear(x.float(), m[0].weight.float(), m[0].bias.float())).to(dtype)
    assert not torch.equal(eager, wide)
    assert torch.equal(_on_aten(m, x), eager if aten_runs_natively(dtype) else wide)


def test_with_native_kernels_the_aten_path_is_eagers_own(monkeypatch):
    m, x = _linear_gelu_on_aten(monkeypatch, "native")
    with torch.no_grad():
        assert torch.equal(torch.compile(m, backend="fxcpp")(x), m(x))
