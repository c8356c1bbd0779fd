// exp over fp32 lanes, bit for bit at::vec's Vectorized<float>::exp() under AVX2/AVX-512
// (Sleef's expf_u10, what ATen's vectorized softmax, sigmoid and SiLU kernels call), inline.
// (Eager's torch.exp itself goes through MKL's VML, and the portable build through std::exp:
// other bits, all within 1 ulp.)
//
// Sleef's algorithm: q = rint(x / ln2), s = x - q ln2 (ln2 in two parts, Cody-Waite), a
// degree-6 polynomial for exp(s) on |s| <= ln2 / 2, then u * 2^q, 0 below -104 and inf above
// 100. Sleef builds 2^q from integer shifts and two multiplies (its ldexp2: the first is
// exact, the second rounds once); AVX-512's vscalefps computes the same u * 2^q, rounded once,
// in one instruction: about a third fewer instructions. Under AVX2 the same steps as Sleef's,
// inlined: at::vec's exp() is a call into Sleef, and the loops calling it spill their registers
// around it (make micro's softmax under AVX2 dispatch: 56% -> 71% of the triad). Same
// operations in the same order, so the same bits (tests/python/test_exp_u10.py sweeps float32
// bit patterns under each build against at::vec's own exp). Softmax, SiLU and GELU are
// exp-bound on two cores.
// Part of interp.h: compiled once per instruction set; the portable build keeps Vectorized::exp().
#pragma once
#include <ATen/cpu/vec/vec.h>
#include <c10/macros/Macros.h>

#include "runtime/cpu/vec_pair.h"

namespace fxcpp::cpu {
inline namespace CPU_CAPABILITY {

constexpr float kLog2e = 1.442695040888963407359924681001892137f;

// N vectors in lockstep (vec_pair.h): every step below runs over all N before the next, so N
// chains interleave; each vector gets the same operations as alone (N = 1), so the same bits.
// kNonPositive: the caller's x is never above 0 (or NaN), so the upper clamp is dropped (same bits).
// Always inlined, as are the functions built on it (gelu_erf.h, tanh_exp.h, sigmoid in
// interp.h): GCC had kept exp_u10<false>, gelu_erf and tanh_exp out of line, and every call
// from the interpreter's loops spilled and reloaded the ymm registers around it.
template <bool kNonPositive, int N>
C10_ALWAYS_INLINE void exp_u10_lanes(at::vec::Vectorized<float>* x) {
  using V = at::vec::Vectorized<float>;
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
#if defined(CPU_CAPABILITY_AVX512)
  using F = __m512;
#else
  using F = __m256;
#endif
  // Sleef's bounds as a clamp first: exp(-104) rounds to 0 and exp(100) overflows to inf in the
  // same steps, so clamping gives Sleef's 0 below -104 and inf above 100 (infinities included,
  // which would make s NaN) in two instructions instead of two compares and two blends.
  // vmaxps/vminps return their second operand for NaN: a NaN x stays NaN.
  V d[N], q[N], s[N], u[N];
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k) {
#if defined(CPU_CAPABILITY_AVX512)
    d[k] = _mm512_max_ps(_mm512_set1_ps(-104.f), F(x[k]));
    if constexpr (!kNonPositive) d[k] = _mm512_min_ps(_mm512_set1_ps(100.f), F(d[k]));
#else
    d[k] = _mm256_max_ps(_mm256_set1_ps(-104.f), F(x[k]));
    if constexpr (!kNonPositive) d[k] = _mm256_min_ps(_mm256_set1_ps(100.f), F(d[k]));
#endif
  }
  // q = rint(d / ln2): AVX-512 keeps it as a float (vscalefps takes it so); AVX2 rounds through
  // the integers, which its ldexp below needs, and converts back.
#if defined(CPU_CAPABILITY_AVX512)
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k)
    q[k] = _mm512_roundscale_ps(_mm512_mul_ps(F(d[k]), _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
  __m256i qi[N];
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k) qi[k] = _mm256_cvtps_epi32(_mm256_mul_ps(F(d[k]), _mm256_set1_ps(kLog2e)));
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k) q[k] = _mm256_cvtepi32_ps(qi[k]);
#endif
  // Sleef's steps between its rounding of x / ln2 and its final u * 2^q, the same in both builds:
  // s = d - q ln2 (ln2 in two parts, Cody-Waite), then 1 + s + s^2 p(s) with p of degree 5.
  // at::vec's fmadd is the one fused instruction under either ISA.
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k) s[k] = at::vec::fmadd(q[k], V(-0.693145751953125f), d[k]);
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k) s[k] = at::vec::fmadd(q[k], V(-1.428606765330187045e-06f), s[k]);
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k) u[k] = at::vec::fmadd(V(0.000198527617612853646278381f), s[k], V(0.00139304355252534151077271f));
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k) u[k] = at::vec::fmadd(u[k], s[k], V(0.00833336077630519866943359f));
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k) u[k] = at::vec::fmadd(u[k], s[k], V(0.0416664853692054748535156f));
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k) u[k] = at::vec::fmadd(u[k], s[k], V(0.166666671633720397949219f));
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k) u[k] = at::vec::fmadd(u[k], s[k], V(0.5f));
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k) u[k] = V(1.f) + at::vec::fmadd(s[k] * s[k], u[k], s[k]);
#if defined(CPU_CAPABILITY_AVX512)
  // u * 2^q rounded once, in one instruction.
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k) x[k] = _mm512_scalef_ps(F(u[k]), F(q[k]));
#else
  // Sleef's ldexp2: u * 2^(q >> 1) * 2^(q - (q >> 1)), each power of two built in the exponent
  // bits; the first product is exact, the second rounds once (what vscalefps does in one step).
  // Inlined, this product could in principle be fused into a caller's add (-ffp-contract=fast;
  // tanh_exp's Fast2Sum needs e rounded). GCC 12 fuses none: the inlined build gives the
  // out-of-line one's bits for exp, tanh, GELU, sigmoid, SiLU and softmax over 6.3M values
  // (benchmarks/results/inline-exp/), and test_exp_u10/test_tanh_exp check bits and ulps. An
  // empty asm pinning the product would guarantee it, at 9% on the tanh GELU: not taken.
  const __m256i bias = _mm256_set1_epi32(0x7f);
#pragma GCC unroll 4
  for (int k = 0; k < N; ++k) {
    const __m256i h = _mm256_srai_epi32(qi[k], 1);
    const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, bias), 23));
    const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(qi[k], h), bias), 23));
    x[k] = _mm256_mul_ps(_mm256_mul_ps(F(u[k]), p1), p2);
  }
#endif
#else
  for (int k = 0; k < N; ++k) x[k] = x[k].exp();
#endif
}

template <bool kNonPositive = false>
C10_ALWAYS_INLINE at::vec::Vectorized<float> exp_u10(at::vec::Vectorized<float> x) {
  exp_u10_lanes<kNonPositive, 1>(&x);
  return x;
}
template <bool kNonPositive = false>
C10_ALWAYS_INLINE VecPair exp_u10(VecPair x) {
  at::vec::Vectorized<float> v[2] = {x.a, x.b};
  exp_u10_lanes<kNonPositive, 2>(v);
  return {v[0], v[1]};
}

}  // namespace CPU_CAPABILITY
}  // namespace fxcpp::cpu
