// The GEMV body (gemv.h), compiled once per instruction set with its CPU_CAPABILITY, as the
// cpu_fused interpreter is. Dot-product form: a block of NR weight rows is streamed once
// (NR sequential streams the hardware prefetcher follows) against MR activation rows held in
// L1; each (m, n) pair keeps a vector accumulator, summed across lanes once at the end.
// Row tails repeat the last row (its result is discarded), so one kernel shape covers all.
#pragma once
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <type_traits>

#include "runtime/cpu/gemv.h"

namespace fxcpp::cpu {
inline namespace CPU_CAPABILITY {
namespace gemv_detail {

using Vec = at::vec::Vectorized<float>;
constexpr int64_t V = Vec::size();
constexpr int NR = 4;  // weight rows per block
#if defined(CPU_CAPABILITY_AVX2)
constexpr int kMaxMR = 2;  // 16 ymm registers: 8 accumulators, 4 weight and 2 activation vectors
#else
constexpr int kMaxMR = 4;  // 32 zmm registers: 16 accumulators, 4 weight and 4 activation vectors
#endif

template <typename WT>
inline Vec load_w(const WT* p) {
  if constexpr (std::is_same_v<WT, float>) {
    return Vec::loadu(p);
  } else {
    Vec v;
    at::vec::load_to_float<WT>(p, v);
    return v;
  }
}

// y[m0 .. m0+MR, n0 .. n0+NR) (rows past M or N repeat the last one and are not stored).
template <typename WT, int MR>
inline void block(const GemvArgs& a, int64_t m0, int64_t n0) {
  const float* x[MR];
  const WT* w[NR];
  for (int i = 0; i < MR; ++i) x[i] = a.x + std::min(m0 + i, a.M - 1) * a.ldx;
  for (int j = 0; j < NR; ++j) w[j] = static_cast<const WT*>(a.w) + std::min(n0 + j, a.N - 1) * a.ldw;
  Vec acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = Vec(0.f);
  const int64_t kv = a.K - a.K % V;
  for (int64_t k = 0; k < kv; k += V) {
    Vec wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = load_w(w[j] + k);
    for (int i = 0; i < MR; ++i) {
      const Vec xv = Vec::loadu(x[i] + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = at::vec::fmadd(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR && m0 + i < a.M; ++i) {
    for (int j = 0; j < NR && n0 + j < a.N; ++j) {
      float s = at::vec::vec_reduce_all<float>([](Vec& p, Vec& q) { return p + q; }, acc[i][j]);
      for (int64_t k = kv; k < a.K; ++k) s += x[i][k] * static_cast<float>(w[j][k]);
      if (a.bias) s += a.bias[n0 + j];
      a.y[(m0 + i) * a.ldy + n0 + j] = s;
    }
  }
}

template <typename WT, int MR>
void gemv_typed(const GemvArgs& a) {
  if (a.M <= 0 || a.N <= 0) return;  // nothing to write (and no tile size to divide by)
  const int64_t blocks = (a.N + NR - 1) / NR;
  // Many rows (a narrow output at any M, matmul_kernel's narrow_output rule): tiles of activation
  // rows of at most ~256 KB (L2-resident while every weight block passes over them, so the
  // activations are read from memory once) are split across threads as well. At M <= 64
  // (every small-M call) one tile: the weight blocks alone are split, as before.
  const int64_t row_bytes = a.K * static_cast<int64_t>(sizeof(float));
  const int64_t tile = a.M <= 64 ? a.M : std::clamp<int64_t>((256 << 10) / std::max<int64_t>(1, row_bytes) / MR * MR, MR, 64);
  const int64_t tiles = (a.M + tile - 1) / tile;
  // Threads only when each gets at least ~256 KB of weights (and rows): below that, waking
  // them costs more than streaming the rest.
  const int64_t bytes_per_task = NR * a.K * static_cast<int64_t>(sizeof(WT)) + (tiles > 1 ? tile * row_bytes : 0);
  const int64_t grain = std::max<int64_t>(1, (256 << 10) / std::max<int64_t>(1, bytes_per_task));
  at::parallel_for(0, tiles * blocks, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {  // tile-major: a thread's blocks share its rows
      const int64_t m_begin = t / blocks * tile, m_end = std::min(a.M, m_begin + tile), b = t % blocks;
      for (int64_t m0 = m_begin; m0 < m_end; m0 += MR) block<WT, MR>(a, m0, b * NR);
    }
  });
}

template <typename WT>
void gemv_dtype(const GemvArgs& a) {
  // One activation row per pass at M = 1 (no repeated rows); the widest that fits otherwise.
  if (a.M == 1) return gemv_typed<WT, 1>(a);
  if (a.M == 2 || kMaxMR == 2) return gemv_typed<WT, 2>(a);
  if constexpr (kMaxMR >= 4) return gemv_typed<WT, 4>(a);
}

}  // namespace gemv_detail

inline void gemv(const GemvArgs& a) {
  switch (a.wtype) {
    case c10::kFloat: return gemv_detail::gemv_dtype<float>(a);
    case c10::kBFloat16: return gemv_detail::gemv_dtype<c10::BFloat16>(a);
    case c10::kHalf: return gemv_detail::gemv_dtype<c10::Half>(a);
    default: break;
  }
}

}  // namespace CPU_CAPABILITY
}  // namespace fxcpp::cpu
