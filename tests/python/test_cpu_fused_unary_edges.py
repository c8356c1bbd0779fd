"""Each unary op cpu_fusion fuses, on NaN, ±inf, signed zeros, denormals and the largest
finite values, gives eager's result: NaN where eager's is NaN and nowhere else, eager's
infinities and signed zeros, finite values close. Fuzz seed 6267 of grammar 2 found
`torch.sign` keeping NaN, where eager's sign of NaN is 0 (both of its compares are false).

Where eager's two kernels for an op disagree with each other, either of them is eager's answer:
at +inf its AVX-512 vectorized GELU gives NaN, its scalar one (which a one-element tensor runs)
inf; on an AVX2-only host its vectorized fp32 GELU gives +0 for x <= -20 and for -0, its scalar
one -0."""
import pytest
import torch
import torch.nn.functional as F

import fxcpp
from helpers import assert_edge_values_match

EDGES = [float("nan"), -float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-40, -1e-40, 3.4e38, -3.4e38,
         1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 88.0, -104.0, 20.0, -20.0]

UNARY = {
    "sign": torch.sign, "abs": torch.abs, "neg": torch.neg, "exp": torch.exp, "expm1": torch.expm1,
    "log": torch.log, "log1p": torch.log1p, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "reciprocal": torch.reciprocal, "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh,
    "sigmoid": torch.sigmoid, "erf": torch.erf, "relu": torch.relu, "silu": F.silu, "floor": torch.floor,
    "ceil": torch.ceil, "trunc": torch.trunc, "round": torch.round, "square": torch.square, "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "leaky_relu": lambda x: F.leaky_relu(x, 0.1),
    "elu": F.elu, "hardtanh": F.hardtanh, "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid,
    "relu6": F.relu6, "clamp": lambda x: x.clamp(-1.0, 2.0), "clamp_min": lambda x: x.clamp(min=0.5),
    "clamp_max": lambda x: x.clamp(max=0.5), "pow2": lambda x: x.pow(2), "pow_half": lambda x: x.pow(0.5),
    "pow3": lambda x: x.pow(3), "softplus": F.softplus, "mish": F.mish, "isnan": torch.isnan,
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_op_on_edge_values_matches_eager(name, dtype):
    op = UNARY[name]
    # Every edge value at a vector lane and in a tail: 20 values x 3 (a 16-lane vector, then the rest).
    x = torch.tensor(EDGES * 3, dtype=torch.float32).to(dtype)

    def fn(x):
        return op(x), op(x) * 2.0  # two uses: a group of more than one op

    torch._dynamo.reset()
    report = fxcpp.explain(fn, x)
    assert report.kernel_counts["cpu_fused"] > 0, str(report)
    with torch.no_grad():
        ref = fn(x)
        res = torch.compile(fn, backend="fxcpp")(x)
        scalar = [torch.cat(parts) for parts in zip(*(fn(x[i:i + 1]) for i in range(x.numel())))]  # eager's scalar path
    for r, c, r1 in zip(ref, res, scalar):
        if r.is_floating_point():  # where eager's kernels disagree on NaN-ness or a zero's sign, either value
            split = (r.isnan() != r1.isnan()) | ((r == 0) & (r1 == 0) & (r.signbit() != r1.signbit()))
            either = c.isnan() | (c == r1) | (c == r)  # one of the two is NaN, the other a value
            assert either[split].all(), f"{name}: neither of eager's kernels gives {c[split & ~either]}"
            r = torch.where(split, c, r)
        assert_edge_values_match(name, r, c, (x,))
