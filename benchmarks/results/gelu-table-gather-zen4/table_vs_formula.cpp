#include <immintrin.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>
#include "runtime/cpu/vec_pair.h"
#include "runtime/cpu/gelu_erf.h"
using namespace fxcpp::cpu;
using Vec = at::vec::Vectorized<float>;
static float table[65536];
int main() {
  const int n = 768 * 16;
  std::vector<float> x(n), y(n);
  std::mt19937 g(0); std::normal_distribution<float> d;
  for (auto& v : x) v = d(g);
  for (uint32_t b = 0; b < 65536; ++b) { uint32_t u = b << 16; float f; memcpy(&f, &u, 4);
    double r = 0.5 * f * (1 + std::erf(f / std::sqrt(2.0))); float rf = (float)r; uint32_t ru; memcpy(&ru,&rf,4);
    ru = (ru + 0x7fff + ((ru >> 16) & 1)) & 0xffff0000u; memcpy(&table[b], &ru, 4); }
  auto bench = [&](const char* name, auto body) {
    double best = 1e9;
    for (int rep = 0; rep < 7; ++rep) {
      auto t = std::chrono::steady_clock::now();
      for (int it = 0; it < 2000; ++it) body();
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
      best = std::min(best, s / 2000 / n * 1e9);
    }
    printf("%-28s %.3f ns/elem  (y[7]=%g)\n", name, best, y[7]);
  };
  bench("formula pair", [&] { for (int i = 0; i < n; i += 32) { VecPair v{Vec::loadu(&x[i]), Vec::loadu(&x[i + 16])};
      VecPair r = gelu_erf(v); r.a.store(&y[i]); r.b.store(&y[i + 16]); } });
  bench("formula single", [&] { for (int i = 0; i < n; i += 16) { Vec r = gelu_erf(Vec::loadu(&x[i])); r.store(&y[i]); } });
  bench("table native-cvt gather", [&] { for (int i = 0; i < n; i += 16) {
      __m512 v = _mm512_loadu_ps(&x[i]);
      __m256i b = (__m256i)_mm512_cvtneps_pbh(v);
      __m512i idx = _mm512_cvtepu16_epi32(b);
      _mm512_storeu_ps(&y[i], _mm512_i32gather_ps(idx, table, 4)); } });
  bench("table emul-cvt gather", [&] { for (int i = 0; i < n; i += 32) {
      __m512i b = at::vec::cvtfp32_bf16(_mm512_loadu_ps(&x[i]), _mm512_loadu_ps(&x[i+16]));
      __m512i lo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(b));
      __m512i hi = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(b, 1));
      _mm512_storeu_ps(&y[i], _mm512_i32gather_ps(lo, table, 4));
      _mm512_storeu_ps(&y[i+16], _mm512_i32gather_ps(hi, table, 4)); } });
  bench("copy", [&] { for (int i = 0; i < n; i += 16) _mm512_storeu_ps(&y[i], _mm512_add_ps(_mm512_loadu_ps(&x[i]), _mm512_set1_ps(1.f))); });
}
