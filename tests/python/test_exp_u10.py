"""cpu_fused's exp (runtime/cpu/exp_u10.h): under AVX-512 and AVX2 the same bits as at::vec's
Vectorized<float>::exp() (Sleef's expf_u10), which exp_u10 writes out inline, and the same bits
from both builds through every kernel that uses it; and within 1 ulp of the exact exp. Swept
over float32 bit patterns (every 257th of all 2^32: normals, denormals, both infinities, NaNs)
and densely around exp's bounds."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import fxcpp
from helpers import compile_fxcpp, fused_unary

HERE = os.path.dirname(os.path.abspath(__file__))


def _sweep() -> torch.Tensor:
    bits = torch.arange(-(2**31), 2**31, 257, dtype=torch.int64).to(torch.int32)
    # Densely around Sleef's bounds (0 below -104, inf above 100; exp_u10 clamps to them) and
    # where exp leaves the normal range (-87.3) and overflows (88.7), both signs (CASES negate).
    bands = torch.cat([torch.linspace(-106, -85, 40001), torch.linspace(85, 102, 40001)])
    return torch.cat([bits.view(torch.float32), bands, -bands]).contiguous()


# Each runs through fused_unary (op of a negation: two ops, so fxcpp fuses them; one op alone is
# left to ATen's kernel), on the negated sweep, so that every swept value reaches the exp negated.
# (A softmax sums in a different order per instruction set, so it is compared with eager below.)
CASES = {"exp": torch.exp, "sigmoid": torch.sigmoid, "silu": F.silu, "gelu": F.gelu}


def _fused_outputs() -> dict:
    x = _sweep()
    return {name: fused_unary(op, x.neg()) for name, op in CASES.items()}


def _same_bits(a, b) -> int:
    return int((~((a == b) | (a.isnan() & b.isnan()))).sum())


def _exp_bits_against_sleef() -> int:
    """How many of the swept values the fused exp gives other bits for than at::vec's own
    Vectorized<float>::exp() (Sleef), both built for the ISA this process runs."""
    y = _sweep().neg().contiguous()
    return _same_bits(fused_unary(torch.exp, y), fxcpp._C._vectorized_exp(y))


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_exp_gives_sleefs_bits(isa, tmp_path):
    if not fxcpp._C.host_info()[isa]:
        pytest.skip(f"this host has no {isa}")
    if fxcpp._C.host_info()["aten_isa"] == isa:
        assert _exp_bits_against_sleef() == 0
        return
    # That ISA's build of the interpreter, in a child process on this host.
    path = tmp_path / "differing.txt"
    code = (f"import sys; sys.path.insert(0, {HERE!r}); import test_exp_u10 as t; "
            f"import fxcpp; assert fxcpp._C.host_info()['aten_isa'] == {isa!r}; "
            f"open({str(path)!r}, 'w').write(str(t._exp_bits_against_sleef()))")
    subprocess.run([sys.executable, "-c", code], env={**os.environ, "ATEN_CPU_CAPABILITY": isa}, check=True, timeout=600)
    assert int(path.read_text()) == 0


@pytest.mark.skipif(not fxcpp._C.host_info()["avx512"], reason="no AVX-512: one build only")
def test_avx512_and_avx2_builds_give_the_same_bits(tmp_path):
    ours = _fused_outputs()
    # The AVX2 build of the same interpreter in a child process on this host.
    path = tmp_path / "avx2.pt"
    code = f"import sys, torch; sys.path.insert(0, {HERE!r}); import test_exp_u10 as t; torch.save(t._fused_outputs(), {str(path)!r})"
    subprocess.run([sys.executable, "-c", code], env={**os.environ, "ATEN_CPU_CAPABILITY": "avx2"}, check=True, timeout=600)
    avx2 = torch.load(path)
    assert {name: _same_bits(ours[name], avx2[name]) for name in CASES} == {name: 0 for name in CASES}


def test_exp_is_within_one_ulp_and_non_finite_values_match_eager():
    x = _sweep()
    torch._dynamo.reset()
    got = fused_unary(torch.exp, x.neg())
    exact = torch.exp(x.neg().double())
    ref = exact.float()
    normal = torch.isfinite(ref) & (ref.abs() >= torch.finfo(torch.float32).tiny)
    ulp = (torch.nextafter(ref, torch.tensor(float("inf"))) - ref).double()
    assert ((got.double() - exact).abs() / ulp)[normal].max() <= 1.0
    special = ~torch.isfinite(x) | ~torch.isfinite(ref) | (ref == 0)
    assert _same_bits(got[special], torch.exp(x.neg())[special]) == 0


def test_softmax_rows_with_extreme_values_match_eager():
    x = torch.randn(64, 1000) * 40
    x[0, 3], x[1, :] = float("inf"), float("-inf")
    x[2, 7], x[3, 5] = float("nan"), 1e30
    fn = lambda x: torch.softmax(x * 2.0, -1)
    torch._dynamo.reset()
    got = compile_fxcpp(fn)(x)
    torch.testing.assert_close(got, fn(x), rtol=1e-6, atol=1e-7, equal_nan=True)
