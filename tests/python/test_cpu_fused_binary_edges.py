"""Each binary and ternary op cpu_fusion fuses, on every pair of edge values (NaN, ±inf,
signed zeros, denormals, the largest finite values, ordinary ones), gives eager's result:
NaN where eager's is NaN and nowhere else, eager's infinities and signed zeros, finite
values close. The unary ops: test_cpu_fused_unary_edges.py. (Floor division and clamps with
tensor bounds are left to ATen by the fusion.)

Where the graph fxcpp is handed already differs from eager (aot's decomposition of addcdiv
computes t1 / t2 before the scale, which overflows at (3.4e38, -0.5) where eager's (value *
t1) / t2 gives 0; Inductor and aot_eager return the same -inf), that graph run eagerly
(aot_eager) is the reference at those positions."""
import pytest
import torch

import fxcpp
from helpers import assert_edge_values_match

EDGES = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-40, -1e-40, 3.4e38, -3.4e38, 1.0, -1.0, 2.5, -0.5, 3.0]

BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "maximum": torch.maximum, "minimum": torch.minimum, "pow": torch.pow,
    "where": lambda a, b: torch.where(a > b, a, b), "masked_fill": lambda a, b: a.masked_fill(b > 0, -float("inf")),
    "addcmul": lambda a, b: torch.addcmul(a, a, b, value=0.5), "addcdiv": lambda a, b: torch.addcdiv(a, a, b, value=0.5),
    "lerp": lambda a, b: torch.lerp(a, b, 0.3), "rsub": lambda a, b: 2.0 - a * b,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt,
    "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or,
}


GRAPH_DIFFERS = {"addcdiv"}  # the ops whose decomposed graph is known to differ from eager (above)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_op_on_edge_value_pairs_matches_eager(name, dtype):
    op = BINARY[name]
    e = torch.tensor(EDGES, dtype=torch.float32)
    a = e.repeat_interleave(len(EDGES)).to(dtype)  # every pair (a, b), 196 of them: vectors and a tail
    b = e.repeat(len(EDGES)).to(dtype)

    def fn(a, b):
        r = op(a, b)
        return r, r * 2.0 if r.is_floating_point() else r & (a > 0)  # two uses: a group of more than one op

    torch._dynamo.reset()
    report = fxcpp.explain(fn, a, b)
    assert report.kernel_counts["cpu_fused"] > 0, str(report)
    with torch.no_grad():
        ref = fn(a, b)
        res = torch.compile(fn, backend="fxcpp")(a, b)
        torch._dynamo.reset()
        graph_ref = torch.compile(fn, backend="aot_eager")(a, b)
    for r, c, g in zip(ref, res, graph_ref):
        if r.is_floating_point():  # where aot's graph itself gives another value, that value
            differs = (r.isnan() != g.isnan()) | (~r.isnan() & ~g.isnan() & (r != g) & (r.isinf() | g.isinf()))
            assert not differs.any() or name in GRAPH_DIFFERS, f"{name}: aot's graph differs from eager at {a[differs]}"
            r = torch.where(differs, g, r)
        assert_edge_values_match(name, r, c, (a, b))
