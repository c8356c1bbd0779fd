// GELU with erf over fp32 lanes: x * Phi(x), Phi the normal CDF.
//
// Inductor (through at::vec) and this kernel before computed 0.5 x (1 + erf(x / sqrt2)) with
// Vectorized::erf(), which is 1 - t r(t) exp(-z^2) (Abramowitz & Stegun 7.1.26: t = 1 / (1 + p|z|),
// r a degree-5 polynomial) with the sign put back. We take the same A&S tail directly:
//   h = erfc(|z|) / 2 = t (r(t) / 2) exp(-z^2),   GELU = x h for x <= 0,   x - x h otherwise.
// Two reasons, both measured on one AVX-512 core over an L1-resident block:
//   - fewer operations (no sign masks, no 1 + erf, the 1/2 folded into r's coefficients, exp's
//     upper clamp dropped since -z^2 <= 0): 0.35 ns an element against 0.46;
//   - more accurate: for x < 0, 1 + erf cancels (erf near -1 keeps 6e-8 of 1.0, against a Phi far
//     smaller), h does not; for x > 0, x - x h rounds once. Swept over every float in [-10, 10]
//     against fp64, the largest absolute and relative error in each band ([-10,-5), [-5,-3),
//     [-3,-2), ..., [5,10)) is at most the old formula's (benchmarks/results/gelu-erf/sweep.txt).
// Eager's fp32 GELU is oneDNN's kernel, another approximation: more accurate than either formula
// within |x| < 1, 3-4x less beyond; over the whole range our largest error is a quarter of its.
// Neither formula gives eager's bits. NaN comes out as eager's, -0 and the negative tail's zeros
// as -0 (the sign of x Phi(x); eager's scalar kernel agrees, its AVX2 fp32 one gives +0); -inf
// gives NaN and +inf gives inf. Eager's kernels disagree at +inf: its scalar one and, on an AVX2-only host, its
// vectorized one give inf, its AVX-512 one NaN; inf is also GELU's limit. x - x h is inf - inf * 0
// there, so the product takes min(x, FLT_MAX) (the same value for every finite x).
// Part of interp.h: compiled once per instruction set; AVX2 and AVX-512 give the same bits
// (exp_u10 is Sleef's expf_u10 bit for bit, and each step is the same IEEE operation).
#pragma once
#include <cfloat>

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include "runtime/cpu/exp_u10.h"

namespace fxcpp::cpu {
inline namespace CPU_CAPABILITY {

C10_ALWAYS_INLINE at::vec::Vectorized<float> gelu_erf(const at::vec::Vectorized<float>& xv) {
  using Vec = at::vec::Vectorized<float>;
  // A&S 7.1.26's p and coefficients; r's are halved (exact in binary) so that r(t) is r / 2.
  constexpr float p = 0.3275911f, a5 = 0.5f * 1.061405429f, a4 = 0.5f * -1.453152027f,
                  a3 = 0.5f * 1.421413741f, a2 = 0.5f * -0.284496736f, a1 = 0.5f * 0.254829592f;
  constexpr float kSqrtHalf = 0.70710678118654752440f;
#if defined(CPU_CAPABILITY_AVX512)
  const __m512 x = xv, z = _mm512_mul_ps(x, _mm512_set1_ps(kSqrtHalf));
  const __m512 t = _mm512_div_ps(_mm512_set1_ps(1.f), _mm512_fmadd_ps(_mm512_set1_ps(p), _mm512_abs_ps(z), _mm512_set1_ps(1.f)));
  __m512 r = _mm512_fmadd_ps(_mm512_set1_ps(a5), t, _mm512_set1_ps(a4));
  r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(a3));
  r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(a2));
  r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(a1));
  const __m512 e = exp_u10<true>(Vec(_mm512_fnmadd_ps(z, z, _mm512_setzero_ps())));
  const __m512 h = _mm512_mul_ps(_mm512_mul_ps(t, r), e);
  // x <= 0, not x < 0: -0 must give x h = -0, as eager's GELU does (x - x h gives +0).
  const __mmask16 nonpositive = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LE_OQ);
  const __m512 finite_x = _mm512_min_ps(x, _mm512_set1_ps(FLT_MAX));  // NaN gives FLT_MAX: h is NaN then
  return _mm512_mask_blend_ps(nonpositive, _mm512_fnmadd_ps(finite_x, h, x), _mm512_mul_ps(x, h));
#else
  const Vec z = xv * Vec(kSqrtHalf);
  const Vec t = Vec(1.f) / at::vec::fmadd(Vec(p), z.abs(), Vec(1.f));
  Vec r = at::vec::fmadd(Vec(a5), t, Vec(a4));
  r = at::vec::fmadd(r, t, Vec(a3));
  r = at::vec::fmadd(r, t, Vec(a2));
  r = at::vec::fmadd(r, t, Vec(a1));
  // -(z z) rounds as z z does, so fmadd(-z, z, 0) is the AVX-512 branch's fnmadd.
  const Vec e = exp_u10(at::vec::fmadd(z.neg(), z, Vec(0.f)));
  const Vec h = t * r * e;
  // x - x h rounded once, as AVX-512's fnmadd: fmadd(-x, h, x), x at most FLT_MAX in the product.
#if defined(CPU_CAPABILITY_AVX2)
  const Vec finite_x = _mm256_min_ps(xv, _mm256_set1_ps(FLT_MAX));  // one instruction, as AVX-512's
#else
  const Vec finite_x = at::vec::minimum(xv, Vec(FLT_MAX));
#endif
  return Vec::blendv(at::vec::fmadd(finite_x.neg(), h, xv), xv * h, xv <= Vec(0.f));
#endif
}

}  // namespace CPU_CAPABILITY
}  // namespace fxcpp::cpu
