"""fxcpp.verify.same_as_eager: PyTorch's harness rule, strict where an output holds a NaN.
torch._dynamo.utils.same, given an fp64 reference, passes any result once an output holds a NaN
(its RMSE fallback is NaN on both sides, which it counts as a pass); the tests, the fuzzer, the
harness and verify mode judge results with same_as_eager instead."""
import torch
from torch._dynamo.utils import same

from fxcpp.verify import same_as_eager

NAN = float("nan")


def _case(dtype=torch.float32):
    ref = torch.tensor([NAN, 1.0, 2.0, 3.0] * 300, dtype=dtype)
    return ref, ref.double()


def test_a_wrong_number_beside_a_nan_fails_where_torch_same_passes():
    ref, ref64 = _case()
    res = ref.clone()
    res[1] = 5.0
    assert same(ref, res, fp64_ref=ref64, tol=1e-3, equal_nan=True)  # the hole, as torch 2.13 has it
    assert not same_as_eager(ref, res, fp64_ref=ref64, tol=1e-3)
    assert not same_as_eager(ref, res, tol=1e-3)  # without an fp64 reference too


def test_nans_in_the_same_places_and_equal_numbers_pass():
    ref, ref64 = _case()
    assert same_as_eager(ref, ref.clone(), fp64_ref=ref64)
    assert same_as_eager((ref, ref * 2), (ref.clone(), ref * 2), fp64_ref=(ref64, ref64 * 2))


def test_a_nan_where_eager_has_a_number_fails():
    ref, ref64 = _case()
    res = ref.clone()
    res[2] = NAN
    assert not same_as_eager(ref, res, fp64_ref=ref64)


def test_a_number_where_only_eagers_low_precision_result_is_nan_passes():
    """More accurate than eager: eager's bf16 gave NaN, fp64 gives a number, and so do we."""
    ref64 = torch.tensor([1.0, 2.0, 3.0] * 400, dtype=torch.float64)
    ref = ref64.to(torch.bfloat16)
    ref[0] = NAN
    assert same_as_eager(ref, ref64.to(torch.bfloat16), fp64_ref=ref64)
    assert not same_as_eager(ref, ref64.to(torch.bfloat16))  # no fp64 reference: eager's NaN must be kept


def test_low_precision_numbers_are_judged_by_the_fp64_rule_beside_nans():
    ref64 = torch.linspace(-3, 3, 1200, dtype=torch.float64)
    ref = ref64.to(torch.bfloat16)
    ref[::7] = NAN
    ref64 = ref64.clone()
    ref64[::7] = NAN
    closer = ref64.to(torch.bfloat16)  # fp64 rounded once: at least as accurate as eager
    assert same_as_eager(ref, closer, fp64_ref=ref64)
    worse = closer.clone()
    worse[1::7] += 0.5
    assert not same_as_eager(ref, worse, fp64_ref=ref64)
