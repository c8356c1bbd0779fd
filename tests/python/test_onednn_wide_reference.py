"""Where this host has no kernels for the weight's dtype (bf16 without native bf16, fp16), the
ATen alternative a oneDNN node measures against and falls back to computes in fp32 too, and
rounds once: ATen's bf16 GEMM is emulated there at a fifth of fp32's speed, while its fp32 one
(MKL) beats oneDNN's gemm on some shapes, as the fp32 model's own first calls find (GPT-2's
Conv1D addmm on the AVX2 host took 1.26x its fp32 time in bf16, 1.14x with this).
FXCPP_BF16=fp32 makes any host such a host; FXCPP_KERNEL_CHOICE=aten takes the ATen path."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxcpp
from fxcpp import _C

pytestmark = pytest.mark.skipif(not _C.has_onednn(), reason="fxcpp built without oneDNN (FXCPP_ONEDNN=0)")


def _linear_gelu_on_aten(monkeypatch, bf16: str):
    monkeypatch.setenv("FXCPP_BF16", bf16)
    monkeypatch.setenv("FXCPP_KERNEL_CHOICE", "aten")
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(512, 256), nn.GELU()).eval().bfloat16(), torch.randn(64, 512).bfloat16()


def test_the_aten_path_of_a_widened_linear_computes_in_fp32_and_rounds_once(monkeypatch):
    m, x = _linear_gelu_on_aten(monkeypatch, "fp32")
    with torch.no_grad():
        eager = m(x)
        wide = F.gelu(F.linear(x.float(), m[0].weight.float(), m[0].bias.float())).bfloat16()
        report = fxcpp.explain(m, x)
        out = torch.compile(m, backend="fxcpp")(x)
    notes = [r.impl for r in report.rows if r.kernel == "onednn" and r.impl]
    assert notes and all("aten: FXCPP_KERNEL_CHOICE=aten" in n for n in notes), [(r.kernel, r.op, r.impl) for r in report.rows]
    assert torch.equal(out, wide)
    assert not torch.equal(eager, wide)  # the check can tell the two apart: eager rounds between ops


def test_with_native_kernels_the_aten_path_is_eagers_own(monkeypatch):
    m, x = _linear_gelu_on_aten(monkeypatch, "native")
    with torch.no_grad():
        assert torch.equal(torch.compile(m, backend="fxcpp")(x), m(x))
