"""A result that only a bf16 output reads is rounded straight into that output (interp.h's
put_bf16: the pointwise blocks, the long rows and the packed short rows) instead of being
written to a register in fp32 and converted by its Store. The rounding is the Store's, so the
output's bits are those of the same program run in fp32 and rounded once at the end; and the
values match eager by the fp64-reference rule. Row lengths below, at and around two vectors
(16 and 32 lanes), splat operands, outputs read by another op of the group (not written
directly), streamed outputs and a non-contiguous output are covered."""
import pytest
import torch
import torch.nn.functional as F

import fxcpp
from fxcpp import _C
from test_cpu_fused import compare


def _ln_gelu_residual(x, w, b):
    return x + F.gelu(F.layer_norm(x, (x.shape[-1],), w, b))


CASES = {
    # packed short rows: the affine tail, then GELU (paired), then the residual add writes the output
    "ln_gelu_residual": (_ln_gelu_residual, [(64, 768), (768,), (768,)]),
    "ln_gelu_residual_odd": (_ln_gelu_residual, [(33, 37), (37,), (37,)]),
    "ln_gelu_residual_short": (_ln_gelu_residual, [(9, 7), (7,), (7,)]),
    "softmax_scaled": (lambda x: torch.softmax(x * 0.125, -1), [(48, 129)]),
    "rms_norm": (lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, [(40, 1024), (1024,)]),
    # pointwise blocks: unary (paired and not), binary with a splat and a broadcast, ternary
    "gelu_times_two": (lambda x: F.gelu(x) * 2.0, [(1001,)]),
    "silu_gated": (lambda a, b: F.silu(a) * b, [(37, 129), (37, 129)]),
    "scale_and_shift": (lambda x, s: x * 3.0 + s, [(17, 31), (31,)]),
    "where_relu": (lambda x, y: torch.where(x > 0, x, y * 2.0), [(5, 1030), (5, 1030)]),
    "tanh_gelu": (lambda x: F.gelu(x, approximate="tanh") + 1.0, [(4, 3, 250)]),
    # long rows (blocks along each row): the last phase's multiply writes the output
    "softmax_long_rows": (lambda x: torch.softmax(x - 1.0, -1), [(3, 20000)]),
}


def _inputs(shapes, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(s, generator=g) * 2).to(dtype) for s in shapes]


@pytest.mark.parametrize("name", sorted(CASES))
def test_bf16_outputs_written_directly_match_eager_and_the_fp32_program(name):
    fn, shapes = CASES[name]
    xs = _inputs(shapes, torch.bfloat16)
    before = _C.cpu_fused_stats()["bf16_direct"]
    _, _, res = compare(fn, xs)
    assert _C.cpu_fused_stats()["bf16_direct"] > before, "no result was written straight into a bf16 output"
    # The same program on the same values in fp32, rounded once: the bits the Store gave.
    torch._dynamo.reset()
    with torch.no_grad():
        ref32 = torch.compile(fn, backend="fxcpp")(*[x.float() for x in xs])
    assert torch.equal(res.view(torch.int16), ref32.bfloat16().view(torch.int16))


def test_non_finite_values_round_as_eager():
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1e-40, 3.0e38, -3.0e38] * 5).bfloat16()
    before = _C.cpu_fused_stats()["bf16_direct"]
    _, ref, res = compare(lambda t: t * 2.0 + 1.0, [x])
    assert _C.cpu_fused_stats()["bf16_direct"] > before
    assert torch.equal(ref.isnan(), res.isnan())
    assert torch.equal(ref[~ref.isnan()], res[~res.isnan()])  # inf, overflow to inf, signed zeros


def test_an_output_another_op_reads_is_stored_as_before():
    """s is an output and the layer norm reads it: s stays in its register and its Store rounds
    it (the group goes on from the rounded s, as eager does: test_cpu_fused_stored_values.py);
    the layer norm's result, read by nothing else, is written directly."""
    fn = lambda x: (lambda s: (s, F.layer_norm(s, (s.shape[-1],)) * 2.0))(x * 2.0 + 1.0)
    xs = _inputs([(16, 300)], torch.bfloat16)
    before = _C.cpu_fused_stats()["bf16_direct"]
    _, ref, res = compare(fn, xs)
    assert _C.cpu_fused_stats()["bf16_direct"] > before
    torch._dynamo.reset()
    with torch.no_grad():
        s32 = torch.compile(lambda x: x * 2.0 + 1.0, backend="fxcpp")(xs[0].float())
    assert torch.equal(res[0].view(torch.int16), s32.bfloat16().view(torch.int16))


def test_streamed_bf16_outputs():
    """Large enough to stream (conftest pins the cache at 32 MiB): put16's streaming stores."""
    xs = _inputs([(4096, 4100)], torch.bfloat16)
    before = _C.cpu_fused_stats()
    compare(lambda x: torch.softmax(x * 0.5, -1), xs)
    after = _C.cpu_fused_stats()
    assert after["streamed"] > before["streamed"] and after["bf16_direct"] > before["bf16_direct"]


def test_a_transposed_output_is_correct():
    """Eager lays the result out as its transposed input: the kernel computes it contiguous and
    copies it into that layout, or writes it strided; either way the values are eager's."""
    x = _inputs([(300, 64)], torch.bfloat16)[0].t()
    _, ref, res = compare(lambda t: F.gelu(t) * 2.0, [x])
    assert res.stride() == ref.stride()
