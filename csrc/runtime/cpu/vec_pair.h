// Two vectors computed in lockstep: each operation on a VecPair is the same operation on both
// halves, emitted side by side, so a transcendental over two vectors runs as two interleaved
// dependency chains. One chain of exp (about 20 dependent operations) leaves the FMA pipes idle
// while it waits on its own latency, and the out-of-order window does not reach far enough into
// the next vector's chain to fill them. On the AVX2 host, whole fused kernels in lockstep pairs
// took 0.83-0.97x the time (GELU 0.90, SiLU 0.83, the LayerNorm+GELU+residual probe 0.93, softmax
// 0.97; benchmarks/results/lockstep-pairs/); four vectors at a time ran short of registers and
// were slower than two. Each half gets exactly the operations a lone Vec would: the same bits.
// The transcendentals (exp_u10.h, gelu_erf.h, tanh_exp.h, sigmoid in interp.h) are templates
// over the vector type W, Vec or VecPair; they use only what both provide: +, -, *, /, &, |,
// comparisons, abs(), neg(), W::blendv, fmadd below, and per-ISA helpers overloaded for both.
// Part of interp.h: compiled once per instruction set.
#pragma once
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/macros/Macros.h>

namespace fxcpp::cpu {
inline namespace CPU_CAPABILITY {

struct VecPair {
  using Vec = at::vec::Vectorized<float>;
  Vec a, b;
  VecPair() = default;
  VecPair(const Vec& x, const Vec& y) : a(x), b(y) {}
  explicit VecPair(float s) : a(s), b(s) {}
  VecPair abs() const { return {a.abs(), b.abs()}; }
  VecPair neg() const { return {a.neg(), b.neg()}; }
  static VecPair blendv(const VecPair& x, const VecPair& y, const VecPair& mask) {
    return {Vec::blendv(x.a, y.a, mask.a), Vec::blendv(x.b, y.b, mask.b)};
  }
};

#define FXCPP_PAIR_OP(op)                                                                  \
  C10_ALWAYS_INLINE VecPair operator op(const VecPair& x, const VecPair& y) { return {x.a op y.a, x.b op y.b}; }
FXCPP_PAIR_OP(+)
FXCPP_PAIR_OP(-)
FXCPP_PAIR_OP(*)
FXCPP_PAIR_OP(/)
FXCPP_PAIR_OP(&)
FXCPP_PAIR_OP(|)
FXCPP_PAIR_OP(<)
FXCPP_PAIR_OP(<=)
FXCPP_PAIR_OP(>)
#undef FXCPP_PAIR_OP

// a * b + c rounded once, for either type.
C10_ALWAYS_INLINE at::vec::Vectorized<float> fmadd(const at::vec::Vectorized<float>& a, const at::vec::Vectorized<float>& b,
                                                   const at::vec::Vectorized<float>& c) {
  return at::vec::fmadd(a, b, c);
}
C10_ALWAYS_INLINE VecPair fmadd(const VecPair& a, const VecPair& b, const VecPair& c) {
  return {at::vec::fmadd(a.a, b.a, c.a), at::vec::fmadd(a.b, b.b, c.b)};
}

// min(c, x) with x's NaN kept, in one instruction where the ISA has it (vminps returns its
// second operand when either is NaN; at::vec::minimum spends three to propagate it).
C10_ALWAYS_INLINE at::vec::Vectorized<float> min_keep_nan(float c, const at::vec::Vectorized<float>& x) {
  using Vec = at::vec::Vectorized<float>;
#if defined(CPU_CAPABILITY_AVX512)
  return _mm512_min_ps(_mm512_set1_ps(c), __m512(x));
#elif defined(CPU_CAPABILITY_AVX2)
  return _mm256_min_ps(_mm256_set1_ps(c), __m256(x));
#else
  return Vec::blendv(x, Vec(c), x > Vec(c));
#endif
}
C10_ALWAYS_INLINE VecPair min_keep_nan(float c, const VecPair& x) { return {min_keep_nan(c, x.a), min_keep_nan(c, x.b)}; }

// An approximate 1 / x (12-14 bits), where the ISA has one.
C10_ALWAYS_INLINE at::vec::Vectorized<float> reciprocal_approx(const at::vec::Vectorized<float>& x) {
#if defined(CPU_CAPABILITY_AVX512)
  return _mm512_rcp14_ps(__m512(x));
#elif defined(CPU_CAPABILITY_AVX2)
  return _mm256_rcp_ps(__m256(x));
#else
  return x.reciprocal();
#endif
}
C10_ALWAYS_INLINE VecPair reciprocal_approx(const VecPair& x) { return {reciprocal_approx(x.a), reciprocal_approx(x.b)}; }

}  // namespace CPU_CAPABILITY
}  // namespace fxcpp::cpu
