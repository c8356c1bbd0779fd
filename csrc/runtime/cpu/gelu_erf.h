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

// x <= 0 ? if_le : otherwise, x's NaN taking otherwise.
C10_ALWAYS_INLINE at::vec::Vectorized<float> select_nonpositive(const at::vec::Vectorized<float>& x,
                                                                const at::vec::Vectorized<float>& if_le,
                                                                const at::vec::Vectorized<float>& otherwise) {
  using Vec = at::vec::Vectorized<float>;
#if defined(CPU_CAPABILITY_AVX512)
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LE_OQ), otherwise, if_le);
#else
  return Vec::blendv(otherwise, if_le, x <= Vec(0.f));
#endif
}
C10_ALWAYS_INLINE VecPair select_nonpositive(const VecPair& x, const VecPair& if_le, const VecPair& otherwise) {
  return {select_nonpositive(x.a, if_le.a, otherwise.a), select_nonpositive(x.b, if_le.b, otherwise.b)};
}

// min(x, FLT_MAX), a NaN x giving FLT_MAX (vminps returns its second operand for NaN).
C10_ALWAYS_INLINE at::vec::Vectorized<float> at_most_flt_max(const at::vec::Vectorized<float>& x) {
#if defined(CPU_CAPABILITY_AVX512)
  return _mm512_min_ps(x, _mm512_set1_ps(FLT_MAX));
#elif defined(CPU_CAPABILITY_AVX2)
  return _mm256_min_ps(x, _mm256_set1_ps(FLT_MAX));  // one instruction, as AVX-512's
#else
  return at::vec::minimum(x, at::vec::Vectorized<float>(FLT_MAX));
#endif
}
C10_ALWAYS_INLINE VecPair at_most_flt_max(const VecPair& x) { return {at_most_flt_max(x.a), at_most_flt_max(x.b)}; }

// W: one vector, or a VecPair computed in lockstep (vec_pair.h); the same bits either way.
template <typename W>
C10_ALWAYS_INLINE W gelu_erf(const W& x) {
  // A&S 7.1.26's p and coefficients; r's are halved (exact in binary) so that r(t) is r / 2.
  constexpr float p = 0.3275911f, a5 = 0.5f * 1.061405429f, a4 = 0.5f * -1.453152027f,
                  a3 = 0.5f * 1.421413741f, a2 = 0.5f * -0.284496736f, a1 = 0.5f * 0.254829592f;
  constexpr float kSqrtHalf = 0.70710678118654752440f;
  const W z = x * W(kSqrtHalf);
  const W t = W(1.f) / fmadd(W(p), z.abs(), W(1.f));
  W r = fmadd(W(a5), t, W(a4));
  r = fmadd(r, t, W(a3));
  r = fmadd(r, t, W(a2));
  r = fmadd(r, t, W(a1));
  // -(z z) rounds as z z does, so fmadd(-z, z, 0) is an fnmadd; -z^2 <= 0: exp's upper clamp dropped.
  const W e = exp_u10<true>(fmadd(z.neg(), z, W(0.f)));
  const W h = t * r * e;
  // x - x h rounded once (an fnmadd), x at most FLT_MAX in the product (NaN gives FLT_MAX: h is
  // NaN then). x <= 0, not x < 0: -0 must give x h = -0, as eager's GELU does (x - x h gives +0).
  const W finite_x = at_most_flt_max(x);
  return select_nonpositive(x, x * h, fmadd(finite_x.neg(), h, x));
}

}  // namespace CPU_CAPABILITY
}  // namespace fxcpp::cpu
