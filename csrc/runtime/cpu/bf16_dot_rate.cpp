#include "runtime/cpu/bf16_dot_rate.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>

#include "runtime/host.h"

namespace fxcpp::cpu {

namespace {

// Twelve independent accumulators: enough to cover either instruction's latency at two issues
// per cycle, so each loop measures throughput. The asm barrier keeps the operand opaque, so
// the compiler cannot fold the loop.
constexpr int kChains = 12;
constexpr long kIters = 20000;

__attribute__((target("avx512f,avx512bf16"), noinline)) float bf16_dots(long n) {
  __m512 acc[kChains];
  for (auto& a : acc) a = _mm512_setzero_ps();
  __m512i x = _mm512_set1_epi16(0x3f80);  // bf16 1.0
  for (long k = 0; k < n; ++k) {
    __asm__ volatile("" : "+v"(x));
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)x, (__m512bh)x);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f,fma"), noinline)) float fp32_fmas(long n) {
  __m512 acc[kChains];
  for (auto& a : acc) a = _mm512_setzero_ps();
  __m512 x = _mm512_set1_ps(1.f);
  for (long k = 0; k < n; ++k) {
    __asm__ volatile("" : "+v"(x));
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(x, x, acc[i]);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

template <class F>
double seconds(F f) {
  const auto t0 = std::chrono::steady_clock::now();
  volatile float sink = f(kIters);
  (void)sink;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

double bf16_dot_rate_over_fp32() {
  if (!host().avx512_bf16) return 0.0;
  double bf16 = 1e9, fp32 = 1e9;
  for (int r = 0; r < 5; ++r) {  // interleaved, best of each: a preempted timing only loses
    bf16 = std::min(bf16, seconds(bf16_dots));
    fp32 = std::min(fp32, seconds(fp32_fmas));
  }
  // vdpbf16ps does 32 multiply-adds per 512-bit instruction, vfmadd231ps 16.
  return (32.0 / bf16) / (16.0 / fp32);
}

}  // namespace fxcpp::cpu
