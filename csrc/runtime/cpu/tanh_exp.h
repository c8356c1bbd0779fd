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

C10_ALWAYS_INLINE at::vec::Vectorized<float> tanh_exp(const at::vec::Vectorized<float>& xv) {
  using Vec = at::vec::Vectorized<float>;
  constexpr float c5 = 0.0017425441183149815f, c4 = -0.007667100988328457f, c3 = 0.02145855315029621f,
                  c2 = -0.05389472097158432f, c1 = 0.13332721590995789f, c0 = -0.33333316445350647f;
  constexpr float kPolyBelow = 0.75f, kMaxTwoA = 20.f;
  const Vec a = xv.abs(), a2 = a * a;
  Vec p = at::vec::fmadd(Vec(c5), a2, Vec(c4));
  p = at::vec::fmadd(p, a2, Vec(c3));
  p = at::vec::fmadd(p, a2, Vec(c2));
  p = at::vec::fmadd(p, a2, Vec(c1));
  p = at::vec::fmadd(p, a2, Vec(c0));
  const Vec small = at::vec::fmadd(a * a2, p, a);
  // vminps returns its second operand when either is NaN: with 2|x| second a NaN stays NaN, in one
  // instruction where at::vec::minimum spends three to propagate it.
#if defined(CPU_CAPABILITY_AVX512)
  const Vec two_a = _mm512_min_ps(_mm512_set1_ps(kMaxTwoA), __m512(a + a));
#elif defined(CPU_CAPABILITY_AVX2)
  const Vec two_a = _mm256_min_ps(_mm256_set1_ps(kMaxTwoA), __m256(a + a));
#else
  const Vec two_a = Vec::blendv(a + a, Vec(kMaxTwoA), (a + a) > Vec(kMaxTwoA));
#endif
  // (e - 1) / (e + 1), with the rounding errors of e - 1, e + 1 and the division taken back before the one
  // rounding of the quotient: e >= 4.4 here, so e - 1 = num - num_err and e + 1 = d + d_err
  // exactly (Fast2Sum), and num - t0 d is exact in an fma; the correction's 2^-12..2^-14 relative error
  // (an approximate 1/d) is far below an ulp. What is left is exp's own error (x 0.3 here) and the
  // final rounding. 1 - 2 / (e + 1) without it reached 1.05 ulp above the switch.
  const Vec e = exp_u10(two_a), num = e - Vec(1.f), d = e + Vec(1.f);
  const Vec num_err = (e - num) - Vec(1.f), d_err = (e - d) + Vec(1.f);
  const Vec t0 = num / d;
  const Vec residual = at::vec::fmadd(t0.neg(), d_err, at::vec::fmadd(t0.neg(), d, num)) + num_err;
#if defined(CPU_CAPABILITY_AVX512)
  const Vec inv_d = _mm512_rcp14_ps(__m512(d));
#elif defined(CPU_CAPABILITY_AVX2)
  const Vec inv_d = _mm256_rcp_ps(__m256(d));
#else
  const Vec inv_d = d.reciprocal();
#endif
  const Vec big = at::vec::fmadd(residual, inv_d, t0);
  const Vec t = Vec::blendv(big, small, a < Vec(kPolyBelow));  // NaN: big, which is NaN
  return t | (xv & Vec(-0.f));                                   // x's sign bit
}

}  // namespace CPU_CAPABILITY
}  // namespace fxcpp::cpu
