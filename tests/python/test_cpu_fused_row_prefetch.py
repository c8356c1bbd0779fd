"""Packed row blocks of cheap ops (no transcendental) in a call that moves more than the
last-level cache ask for the next block's rows a row at a time as they compute
(interp_rows.h, pace_row): the residual LayerNorm, RMSNorm and a bias + ReLU over rows read
from DRAM (bf16/fp16: in fp32 the bias + ReLU runs as a plan instead, test_cpu_fused_planned.py).
Prefetching changes no value: each case matches eager, the path fired (counted per
block), and calls within the cache or with a transcendental (paced per vector instead) do not
take it. conftest pins the cache size at 32 MiB."""
import pytest
import torch
import torch.nn.functional as F

from fxcpp import _C
from test_cpu_fused import compare

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
H = 768


def residual_ln(x, r, w, b):
    return F.layer_norm(x + r, (H,), w, b)


def rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def bias_relu(x, w, b):
    return (x * w + b).relu()


def _inputs(name, rows, dtype):
    g = torch.Generator().manual_seed(0)
    rand = lambda *s: torch.randn(*s, generator=g).to(dtype)  # noqa: E731
    if name == "residual_ln":
        return residual_ln, [rand(rows, H), rand(rows, H), rand(H), rand(H)]
    if name == "rmsnorm":
        return rmsnorm, [rand(rows, H), rand(H)]
    if name == "bias_relu":
        return bias_relu, [rand(rows, H), rand(H), rand(H)]
    # rows of 768 out of 1024, read in place: each row its own span of lines to ask for
    return residual_ln, [rand(rows, 1024)[:, :H], rand(rows, H), rand(H), rand(H)]


def _rows_from_dram(dtype):
    """Rows such that one [rows, 768] tensor is 16 MiB: any of the cases moves 32 MiB or more."""
    return (16 << 20) // (H * torch.tensor([], dtype=dtype).element_size())


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", ["residual_ln", "rmsnorm", "bias_relu", "residual_ln_of_rows_apart"])
def test_rows_from_dram_prefetch_the_next_block_and_match_eager(name, dtype):
    fn, xs = _inputs(name, _rows_from_dram(DTYPES[dtype]) + 3, DTYPES[dtype])  # + 3: a short last block
    before = _C.cpu_fused_stats()
    compare(fn, xs)
    after = _C.cpu_fused_stats()
    if name == "bias_relu" and dtype == "fp32":
        # cheap ops writing fp32 over rows of 384 or more run as a plan (interp_plan.h), not packed rows
        assert after["planned_calls"] > before["planned_calls"] and after["row_paced_blocks"] == before["row_paced_blocks"]
        return
    assert after["row_paced_blocks"] > before["row_paced_blocks"], "no block prefetched a row at a time"


@pytest.mark.parametrize("name", ["residual_ln", "rmsnorm", "bias_relu"])
def test_rows_within_the_cache_leave_prefetching_to_the_hardware(name):
    fn, xs = _inputs(name, 1024, torch.float32)  # 3 MiB a tensor
    before = _C.cpu_fused_stats()["row_paced_blocks"]
    compare(fn, xs)
    assert _C.cpu_fused_stats()["row_paced_blocks"] == before


def test_a_softmax_from_dram_is_paced_by_its_exponentials_instead():
    x = torch.randn(_rows_from_dram(torch.float32), H, generator=torch.Generator().manual_seed(0))
    before = _C.cpu_fused_stats()["row_paced_blocks"]
    compare(lambda x: torch.softmax(x * 0.125, -1), [x])
    assert _C.cpu_fused_stats()["row_paced_blocks"] == before


def test_the_switch_turns_the_path_off_and_the_values_stay_eager():
    """_C._set_row_prefetch(False) (benchmarks/results/row-prefetch-dram/ab.py measures with it)."""
    fn, xs = _inputs("residual_ln", _rows_from_dram(torch.float32), torch.float32)
    assert _C._set_row_prefetch(False) is True  # on by default
    try:
        before = _C.cpu_fused_stats()["row_paced_blocks"]
        compare(fn, xs)
        assert _C.cpu_fused_stats()["row_paced_blocks"] == before
    finally:
        _C._set_row_prefetch(True)
