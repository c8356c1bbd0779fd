"""Pointwise programs of cheap ops with fp32 outputs, 16384 elements or more, run as a plan
resolved once per call (interp_plan.h): per step a function chosen for its op and for which
operands are splats, over blocks of 1024 elements (128 where several passes read DRAM). Each case: fused, the numbers match eager (fp64 reference where an input
is bf16/fp16), and the call took the path (cpu_fused_stats()["planned_calls"]) or, where it
must not (a transcendental, a bf16 output), did not. Sizes put block ends, row ends and thread
splits at odd places; per-row splats (a [rows, 1] operand) change value at each row."""
import pytest
import torch

from fxcpp import _C
from test_cpu_fused import at_one_and_more_threads, compare


def planned():
    return _C.cpu_fused_stats()["planned_calls"]


def check(fn, xs, expect_planned=True, check_fused=True):
    before = planned()
    report, ref, res = compare(fn, xs, check_fused=check_fused)
    took = planned() > before
    assert took == expect_planned, f"planned path taken: {took}, expected {expect_planned}\n{report}"
    return ref, res


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


CHAIN = lambda x: (torch.relu(x * 2 + 1) - 0.5) * x  # make micro's 4-op chain


@pytest.mark.parametrize("n", [16384, 16385, 16383 + 1024, 40000, 40001, 1 << 18])
def test_chain_matches_eager_at_odd_sizes(n):
    check(CHAIN, [randn(n, seed=n)])


@pytest.mark.parametrize("n", [1, 15, 257, 4097, 16383])
def test_small_calls_keep_run_pointwise(n):
    """Below 16 blocks a plan costs about what it saves: run_pointwise runs them."""
    check(CHAIN, [randn(n, seed=n)], expect_planned=False)


@pytest.mark.parametrize("cols", [5000, 8193])
def test_per_row_splat_and_row_vector(cols):
    """b [rows, 1]: inner stride 0, one value per row (read at each block, and b * 2 + 1 computed
    from it per block); w [cols]: read in place by every row."""
    x, b, w = randn(7, cols, seed=1), randn(7, 1, seed=2), randn(cols, seed=3)
    check(lambda x, b, w: torch.clamp((x - (b * 2 + 1)) * w, -1.0, 1.5) + b, [x, b, w])


def test_scalar_tensor_and_constants_fold():
    """A 0-d tensor is a splat for the whole call, read once."""
    x, s = randn(20000, seed=4), torch.tensor(0.75)
    check(lambda x, s: torch.maximum(x * s, x - s) / s + s, [x, s])
    # ops on the 0-d tensor alone: the fusion pass leaves some to ATen; the numbers still count
    check(lambda x, s: torch.maximum(x * (s * 2 + 1), s - 3) / (s + 4), [x, s], check_fused=False)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs_widen_to_fp32_output(dtype):
    x, y = randn(3, 9001, seed=5, dtype=dtype), randn(3, 9001, seed=6)
    check(lambda x, y: x.float() * y + 1.0, [x, y])


def test_bool_mask_and_where():
    x, y = randn(4, 6000, seed=7), randn(4, 6000, seed=8)
    check(lambda x, y: torch.where(x > y, x - y, y * 0.5) + (x < 0).float(), [x, y])


def test_strided_input_widens():
    x = randn(6, 20000, seed=9)[:, ::2]  # inner stride 2
    y = randn(6, 10000, seed=10)
    check(lambda x, y: (x + y) * (x - y), [x, y])


def test_several_outputs_and_a_chain_read_twice():
    x = randn(50000, seed=11)
    ref, res = check(lambda x: (x * 3 - 1, (x * 3 - 1).abs() + x), [x])


def test_non_finite_values():
    x = randn(20000, seed=12)
    x[[0, 17, 19999]] = torch.tensor([float("nan"), float("inf"), float("-inf")])
    y = randn(20000, seed=13)
    y[3] = float("nan")
    check(lambda x, y: torch.clamp(torch.maximum(x, y) * 2, -3.0, 3.0) + torch.minimum(x, y).relu(), [x, y])
    check(lambda x: torch.sign(x) * torch.floor(x * 0.5) + x.isnan().float(), [x])


def test_transcendental_and_bf16_output_keep_run_pointwise():
    x = randn(20000, seed=14)
    check(lambda x: torch.tanh(x * 2 + 1) * x, [x], expect_planned=False)
    check(lambda x: (x * 2 + 1).relu(), [x.bfloat16()], expect_planned=False)


def test_one_and_two_threads_agree():
    x, b = randn(9, 7000, seed=15), randn(9, 1, seed=16)
    outs = at_one_and_more_threads(lambda: check(lambda x, b: (x * b - 1).relu() * x, [x, b])[1])
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)


def test_input_not_mutated():
    x = randn(30000, seed=17)
    before = x.clone()
    check(CHAIN, [x])
    assert torch.equal(x, before)


def test_from_dram_short_blocks():
    """Calls moving more than the last-level cache (conftest pins it at 32 MiB) run a plan of
    several passes in 128-element blocks: a row end and the call's end fall inside blocks."""
    x = randn((1 << 22) + 1003, seed=18)
    check(CHAIN, [x])
    m, b = randn(1025, 8200, seed=19), randn(1025, 1, seed=20)
    check(lambda m, b: (m * b + 1).relu() - b, [m, b])


@pytest.mark.parametrize("shape", [(1024, 384), (37, 768), (5, 3000), (20, 4097)])
def test_wide_rows_with_a_broadcast_bias_run_as_plan(shape):
    """[tokens, hidden] with a bias [hidden] does not flatten; rows of 384 or more run as a plan
    (a row, or 1024-element pieces of it, per block) rather than as packed rows."""
    t, h = shape
    x, b, r = randn(t, h, seed=21), randn(h, seed=22), randn(t, h, seed=23)
    check(lambda x, b, r: torch.relu(x + b) * 0.5 + r, [x, b, r], expect_planned=t * h >= 16384)


def test_rows_shorter_than_384_keep_packed_rows():
    x, b = randn(4096, 383, seed=24), randn(383, seed=25)
    check(lambda x, b: torch.clamp(x * b - 1, -2.0, 2.0), [x, b], expect_planned=False)


def test_planes_of_wide_rows():
    """A head-split view beside a contiguous tensor: two outer dims, rows of 512, tasks and
    blocks starting inside planes."""
    x, y = randn(33, 3, 512, seed=26), randn(3, 33, 512, seed=27)
    before = planned()
    report, _, _ = compare(lambda x, y: (x.transpose(0, 1) * 2 + y).relu(), [x, y], check_fused=False)
    assert planned() > before
    left = [(r.op, r.kernel) for r in report.rows if r.kernel not in ("cpu_fused", "prim", "removed") and r.op != "aten::transpose.int"]
    assert report.kernel_counts["cpu_fused"] > 0 and not left, report
