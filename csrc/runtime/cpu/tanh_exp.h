// tanh over fp32 lanes from exp_u10, in place of at::vec's Vectorized::tanh() (Sleef's tanhf_u10,
// which works in double-float pairs: 1.5 ns an element on one AVX-512 core against 0.35 for our
// GELU; GPT-2's tanh GELU, written out op by op, spent most of its fused kernel there).
//   |x| < 0.75:  x + x^3 P(x^2), P of degree 5 fitted (least squares on Chebyshev nodes, relative
//                error, fp32 coefficients) to (tanh(x) - x) / x^3: under 1.8e-9 relative;
//   |x| >= 0.75: (e - 1) / (e + 1), e = exp(2|x|), 2|x| clamped at 20 (tanh rounds to 1 from 9.01);
// sign put back last, so -0 stays -0 and NaN stays NaN.
// Not Sleef's bits, nor eager's (MKL's VML here): over every float within 0.82 ulp of tanh, where
// eager's is within 0.57 and Sleef's within 1.0; its mean error in each band within 6% of eager's.
// tests/python/test_tanh_exp.py samples it; benchmarks/results/tanh-exp/ has every float and the
// speed (0.47-0.67x the time of the kernels that call it).
// Part of interp.h: compiled once per instruction set.
#pragma once
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include "runtime/cpu/exp_u10.h"

namespace fxcpp::cpu {
inline namespace CPU_CAPABILITY {

// W: one vector, or a VecPair computed in lockstep (vec_pair.h); the same bits either way.
template <typename W>
C10_ALWAYS_INLINE W tanh_exp(const W& xv) {
  constexpr float c5 = 0.0017425441183149815f, c4 = -0.007667100988328457f, c3 = 0.02145855315029621f,
                  c2 = -0.05389472097158432f, c1 = 0.13332721590995789f, c0 = -0.33333316445350647f;
  constexpr float kPolyBelow = 0.75f, kMaxTwoA = 20.f;
  const W a = xv.abs(), a2 = a * a;
  W p = fmadd(W(c5), a2, W(c4));
  p = fmadd(p, a2, W(c3));
  p = fmadd(p, a2, W(c2));
  p = fmadd(p, a2, W(c1));
  p = fmadd(p, a2, W(c0));
  const W small = fmadd(a * a2, p, a);
  // 2|x| second in vminps: a NaN stays NaN (vec_pair.h's min_keep_nan).
  const W two_a = min_keep_nan(kMaxTwoA, a + a);
  // (e - 1) / (e + 1), with the rounding errors of e - 1, e + 1 and the division taken back before the one
  // rounding of the quotient: e >= 4.4 here, so e - 1 = num - num_err and e + 1 = d + d_err
  // exactly (Fast2Sum), and num - t0 d is exact in an fma; the correction's 2^-12..2^-14 relative error
  // (an approximate 1/d) is far below an ulp. What is left is exp's own error (x 0.3 here) and the
  // final rounding. 1 - 2 / (e + 1) without it reached 1.05 ulp above the switch.
  const W e = exp_u10(two_a), num = e - W(1.f), d = e + W(1.f);
  const W num_err = (e - num) - W(1.f), d_err = (e - d) + W(1.f);
  const W t0 = num / d;
  const W residual = fmadd(t0.neg(), d_err, fmadd(t0.neg(), d, num)) + num_err;
  const W inv_d = reciprocal_approx(d);
  const W big = fmadd(residual, inv_d, t0);
  const W t = W::blendv(big, small, a < W(kPolyBelow));  // NaN: big, which is NaN
  return t | (xv & W(-0.f));                               // x's sign bit
}

}  // namespace CPU_CAPABILITY
}  // namespace fxcpp::cpu
