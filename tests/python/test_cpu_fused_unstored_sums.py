"""A difference that only a sum reads is summed as it is computed and never stored (interp_rows.h's
apply_reduce where the sum overwrites the difference's register; interp_columns.h's
column_sum_of_difference). The sum of the centered values in a mean's correction is one: x -
x.mean(-1, keepdim=True) by rows, x - x.mean(0) by columns. Where another instruction reads the
difference after the sum (a max of the same values), it must still be stored: those cases would
read a register never written."""
import pytest
import torch

from test_cpu_fused import DTYPES
from test_cpu_fused_outer_reductions import fuses_and_matches_eager

# name: (fn, input shapes, runs by columns)
CASES = {
    "center_rows": (lambda x: x - x.mean(-1, keepdim=True), [(64, 768)], False),
    "center_rows_short_tail": (lambda x: x - x.mean(-1, keepdim=True), [(5, 1000)], False),
    "center_columns": (lambda x: x - x.mean(0), [(263, 768)], True),
    "center_columns_narrow": (lambda x: x - x.mean(0), [(300, 40)], True),
    # The difference is read again after its sum: stored.
    "difference_summed_and_maxed_rows": (lambda x, w: (x - w).sum(-1) * (x - w).amax(-1), [(64, 768), (768,)], False),
    "difference_summed_and_maxed_columns": (lambda x, w: (x - w).sum(0) + (x - w).amax(0), [(300, 96), (96,)], True),
    "difference_summed_and_output": (lambda x, w: ((x - w).sum(-1, keepdim=True), (x - w) * 2.0), [(64, 768), (768,)], False),
}


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_sums_of_differences_match_eager(name, dtype):
    fuses_and_matches_eager(*CASES[name], dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_equal_values_still_center_to_exactly_zero(dtype):
    # The correction comes from the unstored sum: without it, 1000.1's mean rounds away from it.
    v = torch.tensor([1000.1, -3.3, 12345.678, 0.1]).repeat(192).to(dtype)  # 768 values
    rows = v[:, None].expand(768, 768).contiguous()  # each row one value
    columns = v[None, :].expand(263, 768).contiguous()  # each column one value
    for fn, x in ((lambda x: x - x.mean(-1, keepdim=True), rows), (lambda x: x - x.mean(0), columns)):
        torch._dynamo.reset()
        with torch.no_grad():
            out = torch.compile(fn, backend="fxcpp")(x)
        assert torch.count_nonzero(out) == 0
