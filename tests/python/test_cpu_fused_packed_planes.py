"""Short rows that keep more than one outer dim after coalescing (a head-split view beside a
contiguous tensor: [heads, tokens, 64] whose planes lie apart) run as packed rows, a block of
whole rows within one plane (interp_rows.h, run_rows_packed), not one 64-element block per row.
Each case: fused, the numbers match eager (fp64 reference for bf16/fp16), and the call took the
path (cpu_fused_stats()["packed_plane_calls"]). Odd sizes put plane ends and thread splits
inside blocks' reach: a block never crosses a plane."""
import pytest
import torch
import torch.nn.functional as F

from fxcpp import _C
from test_cpu_fused import at_one_and_more_threads, compare

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
VIEWS = ("aten::transpose.int", "aten::permute")


def compare_fused(fn, xs):
    """compare(), fused but for the view that splits the heads (an ATen view: no data moves)."""
    report, ref, res = compare(fn, xs, check_fused=False)
    left = [(r.op, r.kernel) for r in report.rows if r.kernel not in ("cpu_fused", "prim", "removed") and r.op not in VIEWS]
    assert report.kernel_counts["cpu_fused"] > 0 and not left, f"not fused: {left}\n{report}"
    return report, ref, res


def _pair(tokens, heads, d, dtype):
    """x [tokens, heads, d] (read transposed) and y [heads, tokens, d]: no two dims merge."""
    g = torch.Generator().manual_seed(tokens * 131 + heads * 7 + d)
    return [torch.randn(tokens, heads, d, generator=g).to(dtype), torch.randn(heads, tokens, d, generator=g).to(dtype)]


CASES = {
    "pointwise": lambda x, y: (x.transpose(0, 1) * 2 + y).relu(),
    "softmax": lambda x, y: torch.softmax(x.transpose(0, 1) * 0.125 + y, -1),
    "layer_norm": lambda x, y: F.layer_norm(x.transpose(0, 1) + y, (x.shape[-1],)),
    "rmsnorm": lambda x, y: (lambda h: h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6))(x.transpose(0, 1) + y),
    "row_sum": lambda x, y: (x.transpose(0, 1) * y).sum(-1),  # one value per row, two outer dims
    "row_amax": lambda x, y: (x.transpose(0, 1) - y).amax(-1),
}
# (tokens, heads, d): planes of many rows (more than a block holds), planes of few rows, odd sizes.
SHAPES = [(2048, 4, 64), (5, 37, 64), (301, 3, 32), (17, 6, 100)]


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", sorted(CASES))
def test_planes_of_short_rows_pack_and_match_eager(name, shape, dtype):
    before = _C.cpu_fused_stats()["packed_plane_calls"]
    compare_fused(CASES[name], _pair(*shape, DTYPES[dtype]))
    assert _C.cpu_fused_stats()["packed_plane_calls"] > before, "the call did not run as packed rows of planes"


def test_four_dims_rotary_shaped():
    """[batch, heads, tokens, 64] from a [batch, tokens, heads, 64] projection, as rotary
    embeddings read q: three outer dims, planes of tokens."""
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 33, 4, 64, generator=g)
    cos, sin = torch.randn(33, 64, generator=g), torch.randn(33, 64, generator=g)
    other = torch.randn(2, 4, 33, 64, generator=g)

    def fn(q, cos, sin, other):
        qt = q.transpose(1, 2)
        return qt * cos + other * sin

    before = _C.cpu_fused_stats()["packed_plane_calls"]
    compare_fused(fn, [q, cos, sin, other])
    assert _C.cpu_fused_stats()["packed_plane_calls"] > before


def test_non_finite_values_stay_eager():
    x, y = _pair(64, 3, 64, torch.float32)
    x[0, 1, 5], x[3, 2, 0], y[1, 7, 63] = float("nan"), float("inf"), float("-inf")
    for name in ("pointwise", "softmax", "row_amax", "layer_norm"):
        compare_fused(CASES[name], [x, y])


def test_one_row_per_plane_and_empty():
    compare_fused(CASES["softmax"], _pair(1, 9, 64, torch.float32))
    x, y = _pair(0, 3, 64, torch.float32)
    compare(CASES["pointwise"], [x, y], check_fused=False)  # nothing to run: the values are what count


def test_single_thread_and_more_threads_agree():
    """Tasks split the rows differently with the thread count; a task starting inside a plane
    finds its offsets from the row index."""
    x, y = _pair(257, 5, 64, torch.float32)
    outs = at_one_and_more_threads(lambda: compare_fused(CASES["layer_norm"], [x, y])[2])
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=1e-6)
