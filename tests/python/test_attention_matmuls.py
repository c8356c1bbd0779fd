"""ATen's CPU attention as two oneDNN matmuls around one softmax pass
(runtime/onednn/attention_kernel.cpp). FXCPP_ATTENTION=matmuls forces it on any host; by default
each signature's first call measures it against ATen's flash kernel. Values by the fp64 rule and
eager's strides; the output and logsumexp of a training graph feed ATen's backward."""
import copy
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import fxcpp
from fxcpp.explain import Report, recording
from attention_cases import CASES, OP, assert_later_calls_stay_right, attention_row, case_call, gpt2_attention, random_calls
from helpers import assert_same, errors_in_threads, explain_and_run, same_as_eager

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = [torch.float32, torch.bfloat16]
IDS = ["fp32", "bf16"]


def ran_matmuls(row, dtype):
    """Whether the row ran the matmuls; where this host's oneDNN has no bf16 matmul, that it said
    why ATen ran instead."""
    if dtype == torch.bfloat16 and not fxcpp._C.host_info()["native_bf16"] and not row.impl.startswith("onednn"):
        assert row.impl.startswith("aten: oneDNN"), row.impl
        return False
    assert row.kernel == "onednn" and row.impl.startswith("onednn ") and "softmax rows" in row.impl, row.impl
    return True


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_forced_matmuls_match_eager_by_the_fp64_rule(case, dtype, monkeypatch):
    monkeypatch.setenv("FXCPP_ATTENTION", "matmuls")
    report, res, ref, ref64 = explain_and_run(*case_call(case, dtype))
    ran_matmuls(attention_row(report), dtype)
    assert res.dtype == ref.dtype and res.stride() == ref.stride()
    assert_same(ref, res, fp64_ref=ref64)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_random_calls_forced_to_matmuls_match_eager(dtype, monkeypatch):
    """40 random calls per dtype (shapes, contiguous / transposed / sliced operands, masks, causal,
    scale): eager's values by the fp64 rule and eager's output strides, each run by the matmuls."""
    monkeypatch.setenv("FXCPP_ATTENTION", "matmuls")
    for fn, xs, what in random_calls(dtype, range(40)):
        report, res, ref, ref64 = explain_and_run(fn, xs)
        ran_matmuls(attention_row(report), dtype)
        assert res.stride() == ref.stride(), what
        assert same_as_eager(ref, res, fp64_ref=ref64), what


def test_fp16_widened_calls_run_the_matmuls_in_fp32(monkeypatch):
    """fp16 without AVX512-FP16 is widened (attention_fp32.cpp) and handed to this kernel's fp32
    path: 12 random calls forced to it match eager by the fp64 rule with eager's strides."""
    if fxcpp._C.host_info()["avx512_fp16"]:
        pytest.skip("fp16 attention stays native on a CPU with AVX512-FP16")
    monkeypatch.setenv("FXCPP_ATTENTION", "matmuls")
    for fn, xs, what in random_calls(torch.float16, range(100, 112)):
        report, res, ref, ref64 = explain_and_run(fn, xs)
        row = attention_row(report)
        assert row.kernel == "onednn" and row.impl.startswith("in fp32: the fp16 operands widened"), (what, row.impl)
        assert "the fp32 call: onednn " in row.impl, (what, row.impl)
        assert res.stride() == ref.stride(), what
        assert same_as_eager(ref, res, fp64_ref=ref64), what


def flash(q, k, v, mask=None, causal=False, scale=None):
    """The op itself: its logsumexp is an output too."""
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, attn_mask=mask, scale=scale)


def test_a_graph_reading_the_logsumexp_runs_atens_kernel(monkeypatch):
    """Whatever reads the logsumexp (a training forward saves it for ATen's backward, which
    recomputes the scores with its own GEMMs against it) gets ATen's, from ATen's kernel, even
    with the matmuls forced: one from oneDNN's scores made large scores' gradients stray (the
    fuzzer's grammar 4, seed 164 with --train)."""
    monkeypatch.setenv("FXCPP_ATTENTION", "matmuls")
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 3, 16, generator=g).transpose(1, 2) for _ in range(3))
    mask = torch.randn(5, 5, generator=g)
    report, (o, lse), (ro, rlse), _ = explain_and_run(lambda q, k, v, m: flash(q, k, v, m, causal=True, scale=0.3), [q, k, v, mask])
    assert attention_row(report).impl.startswith("aten: its logsumexp is read"), attention_row(report).impl
    assert o.stride() == ro.stride() and lse.stride() == rlse.stride(), (o.stride(), ro.stride(), lse.stride(), rlse.stride())
    assert torch.equal(o, ro) and torch.equal(lse, rlse)


@pytest.mark.parametrize("L,S", [(9, 4), (4, 9)], ids=["more_queries", "more_keys"])
def test_causal_with_unequal_lengths_is_aligned_as_atens(L, S, monkeypatch):
    """ATen aligns the causal mask top-left (query i sees keys 0..i); with more queries than keys
    the last rows see every key."""
    monkeypatch.setenv("FXCPP_ATTENTION", "matmuls")
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 3, n, 16, generator=g) for n in (L, S, S))
    report, o, ro, _ = explain_and_run(lambda q, k, v: flash(q, k, v, causal=True)[0], [q, k, v])
    assert ran_matmuls(attention_row(report), torch.float32)
    torch.testing.assert_close(o, ro)


NON_FINITE = {
    # ATen's flash kernel gives such a row zeros (and logsumexp 0), not NaN.
    "fully_masked_row": lambda q, k, v: (q, k, v, torch.zeros(2, 1, 5, 7).index_fill_(2, torch.tensor([1]), float("-inf")), False),
    "nan_query": lambda q, k, v: (q.index_fill(2, torch.tensor([0]), float("nan")), k, v, None, False),
    # Causal: ATen never reads V right of the diagonal for early rows; 0 * NaN would be NaN here.
    "nan_value_right_of_the_diagonal": lambda q, k, v: (q, k, v.index_fill(2, torch.tensor([6]), float("nan")), None, True),
    "inf_mask": lambda q, k, v: (q, k, v, torch.zeros(2, 1, 5, 7).index_fill_(3, torch.tensor([0]), float("inf")), False),
}


@pytest.mark.parametrize("case", sorted(NON_FINITE))
def test_non_finite_calls_take_atens_rules(case, monkeypatch):
    """A row with no finite max or sum, or a non-finite output, is recomputed by ATen's kernel:
    the same values, NaN where eager has NaN, and explain() says so."""
    monkeypatch.setenv("FXCPP_ATTENTION", "matmuls")
    g = torch.Generator().manual_seed(1)
    q, k, v, mask, causal = NON_FINITE[case](*(torch.randn(2, 3, n, 8, generator=g) for n in (5, 7, 7)))
    xs = [q, k, v] + ([mask] if mask is not None else [])
    fn = lambda q, k, v, m=None: flash(q, k, v, m, causal=causal)[0]  # noqa: E731 - the output alone (logsumexp unread)
    report, res, ref, _ = explain_and_run(fn, xs)
    assert "not finite" in attention_row(report).impl, attention_row(report).impl
    assert torch.equal(ref.isnan(), res.isnan())
    torch.testing.assert_close(res, ref, equal_nan=True)


def test_finite_calls_after_a_non_finite_one_run_the_matmuls_again(monkeypatch):
    monkeypatch.setenv("FXCPP_ATTENTION", "matmuls")
    torch._dynamo.reset()
    fn = torch.compile(lambda q, k, v: flash(q, k, v)[0], backend="fxcpp")
    q, k, v = (torch.randn(1, 2, 6, 8, generator=torch.Generator().manual_seed(i)) for i in range(3))
    with torch.no_grad():
        bad = q.clone()
        bad[0, 0, 0, 0] = float("nan")
        assert torch.equal(fn(bad, k, v).isnan(), flash(bad, k, v)[0].isnan())
        assert_same(flash(q * 2, k, v)[0], fn(q * 2, k, v))


@pytest.mark.parametrize("what", ["grouped_query_heads", "scores_above_32mb", "empty"])
def test_calls_this_path_does_not_take_run_atens_kernel(what, monkeypatch):
    monkeypatch.setenv("FXCPP_ATTENTION", "matmuls")
    g = torch.Generator().manual_seed(2)
    if what == "grouped_query_heads":
        q, k, v = torch.randn(1, 4, 5, 8, generator=g), torch.randn(1, 2, 7, 8, generator=g), torch.randn(1, 2, 7, 8, generator=g)
        why = "grouped-query heads"
    elif what == "scores_above_32mb":  # 16 heads x 1024 x 1024 fp32 scores: 64 MB
        q, k, v = (torch.randn(1, 16, 1024, 16, generator=g) for _ in range(3))
        why = "scores above 32 MB"
    else:
        q, k, v = (torch.randn(0, 2, 5, 8, generator=g) for _ in range(3))
        why = "an empty dimension"
    report, res, ref, _ = explain_and_run(lambda q, k, v: flash(q, k, v)[0], [q, k, v])
    assert attention_row(report).impl.startswith("aten: " + why), attention_row(report).impl
    assert torch.equal(res, ref)  # ATen's own kernel


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_sliced_queries_give_atens_output_layout(dtype, monkeypatch):
    """GPT-2 views the output's transpose: it must be laid out as ATen's (after the query's)."""
    monkeypatch.setenv("FXCPP_ATTENTION", "matmuls")
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(2, 24, 64, generator=g).to(dtype), (torch.randn(192, 64, generator=g) / 8).to(dtype)]
    report, res, ref, ref64 = explain_and_run(gpt2_attention, xs)
    ran_matmuls(attention_row(report), dtype)
    for r, c, r64 in zip(ref, res, ref64):
        assert c.stride() == r.stride()
        assert_same(r, c, fp64_ref=r64)


def test_the_default_measures_four_signatures_and_says_what_it_kept(monkeypatch):
    """By default a signature's first call times both paths; explain() names the one kept and the
    times. After four measured signatures a new one with less than twice their work is not
    measured (a decoding loop's growing lengths are measured about once per doubling)."""
    monkeypatch.delenv("FXCPP_ATTENTION", raising=False)
    torch._dynamo.reset()
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
    compiled = torch.compile(fn, backend="fxcpp", dynamic=True)
    graphs = []
    with torch.no_grad(), recording(graphs):
        for L in (16, 24, 32, 40, 48):
            q, k, v = (torch.randn(2, 4, L, 32, generator=torch.Generator().manual_seed(L + i)) for i in range(3))
            assert_same(fn(q, k, v), compiled(q, k, v))
        q, k, v = (torch.randn(2, 4, 64, 32, generator=torch.Generator().manual_seed(i)) for i in range(3))
        assert_same(fn(q, k, v), compiled(q, k, v))
    impl = attention_row(Report(graphs)).impl
    for L in (16, 24, 32, 40, 64):  # 64 * 64 >= 2 * 40 * 40: measured again
        assert f"at {L} x {L}" in impl, (L, impl)
    assert "at 48 x 48" not in impl, impl
    assert "measured" in impl and "vs ATen's flash attention" in impl, impl
    assert impl.startswith("onednn ") or impl.startswith("aten: its flash attention was faster"), impl
    # The fifth (less than twice the work of the largest measured) is not measured: it inherits
    # the last choice, or runs ATen's where building its primitives would cost more than one
    # call saves (timing decides which).
    assert ("as measured for an earlier shape" in impl or "building the matmuls costs more" in impl), impl


def test_a_growing_key_length_past_the_kept_signatures_stays_right(monkeypatch):
    """Decoding: one query against keys one longer at each call. A node keeps 64 signatures'
    primitives and evicts one for each new signature after that; 70 lengths match eager."""
    monkeypatch.setenv("FXCPP_ATTENTION", "matmuls")
    torch._dynamo.reset()
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
    compiled = torch.compile(fn, backend="fxcpp", dynamic=True)
    g = torch.Generator().manual_seed(3)
    kv = torch.randn(2, 1, 4, 80, 16, generator=g)
    graphs = []
    with torch.no_grad(), recording(graphs):
        for S in range(2, 72):
            q = torch.randn(1, 4, 1, 16, generator=g)
            k, v = kv[0, :, :, :S], kv[1, :, :, :S]
            assert_same(fn(q, k, v), compiled(q, k, v))
    rows = [r for r in Report(graphs).rows if r.op == OP]
    assert rows and all(r.impl.startswith("onednn ") for r in rows), rows


def test_later_calls_reuse_the_pooled_buffers_and_stay_right(monkeypatch):
    """Scores of 1 MiB and more come from the buffer pool: each later call must read its own."""
    monkeypatch.setenv("FXCPP_ATTENTION", "matmuls")
    assert_later_calls_stay_right(torch.float32)


def test_concurrent_calls_each_get_their_own_result(monkeypatch):
    monkeypatch.setenv("FXCPP_ATTENTION", "matmuls")
    torch._dynamo.reset()
    fn = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), backend="fxcpp")
    qs = [torch.randn(2, 4, 64, 32, generator=torch.Generator().manual_seed(i)) for i in range(4)]
    with torch.no_grad():
        fn(qs[0], qs[0], qs[0])  # compiled before the threads start

    def worker(q):
        def run():
            with torch.no_grad():
                for _ in range(20):
                    assert_same(F.scaled_dot_product_attention(q, q + 1, q * 2, is_causal=True), fn(q, q + 1, q * 2))
        return run

    assert errors_in_threads(*[worker(q) for q in qs], timeout=300) == []


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_a_training_forward_runs_atens_kernel_and_gives_eagers_gradients(dtype, monkeypatch):
    """The forward's output and logsumexp feed ATen's flash backward, which recomputes the
    probabilities from them with its own GEMMs: the forward runs ATen's kernel too, the matmuls
    forced or not, and the gradients pass the fp64-reference rule against eager's."""
    monkeypatch.setenv("FXCPP_ATTENTION", "matmuls")
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 192).to(dtype)
    x = torch.randn(2, 32, 64, generator=torch.Generator().manual_seed(1)).to(dtype)

    def step(linear, x, fn):
        x = x.detach().clone().requires_grad_()
        out = fn(linear.weight, x)
        out.double().pow(2).sum().backward()
        return [out.detach(), x.grad, linear.weight.grad]

    eager = lambda w, x: gpt2_attention(x, w)[0]  # noqa: E731
    ref, ref64 = step(lin, x, eager), step(copy.deepcopy(lin).double(), x.double(), eager)
    torch._dynamo.reset()
    res = step(copy.deepcopy(lin), x, torch.compile(eager, backend="fxcpp"))
    for r, c, r64 in zip(ref, res, ref64):
        assert_same(r, c, fp64_ref=r64)
    torch._dynamo.reset()
    report = fxcpp.explain(eager, copy.deepcopy(lin).weight, x.detach().clone().requires_grad_())
    row = attention_row(report)
    assert row.graph.endswith("forward"), report
    assert row.impl.startswith("aten: its logsumexp is read"), row.impl


def _lower_capabilities():
    have = torch.backends.cpu.get_cpu_capability()
    return [c for c in ("default", "avx2") if (c, have) != ("avx2", "DEFAULT")] if have != "DEFAULT" else []


@pytest.mark.parametrize("cap", _lower_capabilities())
def test_softmax_rows_of_each_instruction_set(cap):
    """The softmax rows are built per instruction set: the lower builds pass the random calls too."""
    env = dict(os.environ, ATEN_CPU_CAPABILITY=cap)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k",
                        "random or causal or non_finite", os.path.join(HERE, "test_attention_matmuls.py")],
                       env=env, capture_output=True, text=True, cwd=os.path.dirname(HERE))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    code = ("import os, torch, fxcpp\nos.environ['FXCPP_ATTENTION'] = 'matmuls'\n"
            "q = torch.randn(1, 2, 8, 16)\n"
            "r = fxcpp.explain(lambda q: torch.nn.functional.scaled_dot_product_attention(q, q, q), q)\n"
            "print([x.impl for x in r.rows if 'attention' in x.op][0])\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert f"softmax rows {cap}" in out, out
