"""ATen's CPU flash attention in fp32 for fp16 queries (runtime/aten/attention_fp32.cpp): without
AVX512-FP16 the operands are widened, ATen's fp32 kernel runs and the output is rounded once.
FXCPP_ATTENTION=fp32 / =native force either path, for bf16 too, at compile time, so both are
tested on every host."""
import copy

import pytest
import torch
import torch.nn.functional as F

import fxcpp
from attention_cases import CASES, assert_later_calls_stay_right, attention_row, case_call, gpt2_attention, random_calls
from helpers import assert_same, explain_and_run, same_as_eager

WIDENED = "aten in fp32"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_attention_forced_to_fp32_matches_eager_by_the_fp64_rule(case, dtype, monkeypatch):
    monkeypatch.setenv("FXCPP_ATTENTION", "fp32")
    report, res, ref, ref64 = explain_and_run(*case_call(case, dtype))
    assert attention_row(report).impl.startswith(WIDENED), report
    assert res.dtype == ref.dtype and res.stride() == ref.stride()
    assert_same(ref, res, fp64_ref=ref64)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_sliced_queries_give_the_native_calls_output_layout(dtype, monkeypatch):
    monkeypatch.setenv("FXCPP_ATTENTION", "fp32")
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(2, 24, 64, generator=g).to(dtype), (torch.randn(192, 64, generator=g) / 8).to(dtype)]
    report, res, ref, ref64 = explain_and_run(gpt2_attention, xs)
    assert attention_row(report).impl.startswith(WIDENED), report
    for r, c, r64 in zip(ref, res, ref64):
        assert c.stride() == r.stride()
        assert_same(r, c, fp64_ref=r64)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_attention_forced_native_is_eagers_own_op(dtype, monkeypatch):
    monkeypatch.setenv("FXCPP_ATTENTION", "native")
    q, k, v = (torch.randn(2, 4, 24, 16, generator=torch.Generator().manual_seed(i)).to(dtype) for i in range(3))
    report, res, ref, _ = explain_and_run(F.scaled_dot_product_attention, [q, k, v])
    assert attention_row(report).kernel == "aten" and not attention_row(report).impl, report
    assert torch.equal(res, ref)  # the same kernel on the same operands: the same bits


def test_fp32_attention_is_never_widened(monkeypatch):
    monkeypatch.setenv("FXCPP_ATTENTION", "fp32")
    q = torch.randn(2, 4, 24, 16)
    report, res, ref, _ = explain_and_run(F.scaled_dot_product_attention, [q, q * 0.5, q + 1])
    assert not attention_row(report).impl, report
    torch.testing.assert_close(res, ref)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_the_default_follows_the_host(dtype, monkeypatch):
    """fp16 widens without AVX512-FP16 (then runs the fp32 attention kernel: oneDNN's matmuls or
    ATen's, as measured); bf16 stays native (benchmarks/results/attention-fp32/)."""
    monkeypatch.delenv("FXCPP_ATTENTION", raising=False)
    h = fxcpp._C.host_info()
    expected = dtype == torch.float16 and not h["avx512_fp16"]
    q = torch.randn(1, 2, 8, 16).to(dtype)
    report, res, ref, ref64 = explain_and_run(F.scaled_dot_product_attention, [q, q * 0.5, q + 1])
    impl = attention_row(report).impl
    assert ("operands widened" in impl) == expected, (h, report)
    if expected and h.get("onednn_isa"):
        assert impl.startswith("in fp32: the fp16 operands widened") and "the fp32 call: " in impl, impl
    assert_same(ref, res, fp64_ref=ref64)


def test_later_calls_reuse_the_pooled_buffers_and_stay_right(monkeypatch):
    """Operands of 1 MiB and more are widened into the buffer pool: each later call must read
    its own values, not an earlier call's."""
    monkeypatch.setenv("FXCPP_ATTENTION", "fp32")
    assert_later_calls_stay_right(torch.float16)


def test_a_training_step_through_the_widened_forward_gives_eagers_gradients(monkeypatch):
    """In a training graph the forward's output and logsumexp (computed in fp32) feed ATen's fp16
    backward, which recomputes the probabilities from the fp16 operands: the gradients must still
    pass the fp64-reference rule against eager's."""
    monkeypatch.setenv("FXCPP_ATTENTION", "fp32")
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 192).half()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 32, 64, generator=g).half()

    def step(linear, x):
        x = x.detach().clone().requires_grad_()
        out = gpt2_attention(x, linear.weight)[0]
        out.double().pow(2).sum().backward()
        return [out.detach(), x.grad, linear.weight.grad]

    mine, l64 = copy.deepcopy(lin), copy.deepcopy(lin).double()
    ref, ref64 = step(lin, x), step(l64, x.double())
    torch._dynamo.reset()
    compiled = torch.compile(lambda w, x: gpt2_attention(x, w)[0], backend="fxcpp")
    xc = x.detach().clone().requires_grad_()
    out = compiled(mine.weight, xc)
    out.double().pow(2).sum().backward()
    for r, c, r64 in zip(ref, [out.detach(), xc.grad, mine.weight.grad], ref64):
        assert_same(r, c, fp64_ref=r64)
    torch._dynamo.reset()
    report = fxcpp.explain(lambda w, x: gpt2_attention(x, w)[0], copy.deepcopy(lin).weight, x.detach().clone().requires_grad_())
    row = attention_row(report)
    assert row.graph.endswith("forward") and row.impl.startswith(WIDENED), report


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_random_attention_calls_forced_to_fp32_match_eager(dtype, monkeypatch):
    """40 random calls per dtype: eager's values by the fp64 rule, and eager's output strides."""
    monkeypatch.setenv("FXCPP_ATTENTION", "fp32")
    for fn, xs, what in random_calls(dtype, range(40)):
        report, res, ref, ref64 = explain_and_run(fn, xs)
        assert attention_row(report).impl.startswith(WIDENED), (what, report)
        assert res.stride() == ref.stride(), what
        assert same_as_eager(ref, res, fp64_ref=ref64), what
