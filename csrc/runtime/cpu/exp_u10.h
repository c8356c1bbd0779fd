// exp over fp32 lanes, bit for bit at::vec's Vectorized<float>::exp() under AVX2/AVX-512
// (Sleef's expf_u10, what ATen's vectorized softmax, sigmoid and SiLU kernels and our AVX2
// build call), faster under AVX-512. (Eager's torch.exp itself goes through MKL's VML, and
// the portable build through std::exp: other bits, all within 1 ulp.)
//
// Sleef's algorithm: q = rint(x / ln2), s = x - q ln2 (ln2 in two parts, Cody-Waite), a
// degree-6 polynomial for exp(s) on |s| <= ln2 / 2, then u * 2^q, 0 below -104 and inf above
// 100. Sleef builds 2^q from integer shifts and two multiplies (its ldexp2: the first is
// exact, the second rounds once); AVX-512's vscalefps computes the same u * 2^q, rounded once,
// in one instruction. Same operations in the same order otherwise, so the same bits
// (tests/python/test_exp_u10.py sweeps float32 bit patterns against the AVX2 build). About a
// third fewer instructions: softmax, SiLU and GELU are exp-bound on two cores.
// Part of interp.h: compiled once per instruction set; the others keep Vectorized::exp().
#pragma once
#include <ATen/cpu/vec/vec.h>

#include <limits>

namespace fxcpp::cpu {
inline namespace CPU_CAPABILITY {

// kNonPositive: the caller's x is never above 0 (or NaN), so the upper clamp is dropped (same bits).
template <bool kNonPositive = false>
inline at::vec::Vectorized<float> exp_u10(const at::vec::Vectorized<float>& x) {
#if defined(CPU_CAPABILITY_AVX512)
  // Sleef's bounds as a clamp first: exp(-104) rounds to 0 and exp(100) overflows to inf in the
  // same steps, so clamping gives Sleef's 0 below -104 and inf above 100 (infinities included,
  // which would make s NaN) in two instructions instead of two compares and two blends.
  // vmaxps/vminps return their second operand for NaN: a NaN x stays NaN.
  __m512 d = _mm512_max_ps(_mm512_set1_ps(-104.f), x);
  if constexpr (!kNonPositive) d = _mm512_min_ps(_mm512_set1_ps(100.f), d);
  const __m512 q = _mm512_roundscale_ps(_mm512_mul_ps(d, _mm512_set1_ps(1.442695040888963407359924681001892137f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 s = _mm512_fmadd_ps(q, _mm512_set1_ps(-0.693145751953125f), d);
  s = _mm512_fmadd_ps(q, _mm512_set1_ps(-1.428606765330187045e-06f), s);
  __m512 u = _mm512_set1_ps(0.000198527617612853646278381f);
  u = _mm512_fmadd_ps(u, s, _mm512_set1_ps(0.00139304355252534151077271f));
  u = _mm512_fmadd_ps(u, s, _mm512_set1_ps(0.00833336077630519866943359f));
  u = _mm512_fmadd_ps(u, s, _mm512_set1_ps(0.0416664853692054748535156f));
  u = _mm512_fmadd_ps(u, s, _mm512_set1_ps(0.166666671633720397949219f));
  u = _mm512_fmadd_ps(u, s, _mm512_set1_ps(0.5f));
  u = _mm512_add_ps(_mm512_set1_ps(1.f), _mm512_fmadd_ps(_mm512_mul_ps(s, s), u, s));
  u = _mm512_scalef_ps(u, q);
  return u;
#else
  return x.exp();
#endif
}

}  // namespace CPU_CAPABILITY
}  // namespace fxcpp::cpu
