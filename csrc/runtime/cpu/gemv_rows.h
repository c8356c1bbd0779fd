// The GEMV body (gemv.h), compiled once per instruction set with its CPU_CAPABILITY, as the
// cpu_fused interpreter is. Dot-product form: a block of NR weight rows is streamed once
// (NR sequential streams the hardware prefetcher follows) against MR activation rows held in
// L1; each (m, n) pair keeps a vector accumulator, summed across lanes once at the end.
// Row tails repeat the last row (its result is discarded), so one kernel shape covers all.
// Outputs narrower than a block (N < 4: a classifier or regression head, at any M) take a
// block of exactly N rows and more activation rows per pass instead: a 4-row block there
// would compute repeated rows and spend 2-4x the FMAs and loads per useful output.
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
constexpr int kNR = 4;  // weight rows per block where N >= 4
#if defined(CPU_CAPABILITY_AVX2)
constexpr int kRegs = 16;  // ymm
#else
constexpr int kRegs = 32;  // zmm
#endif
// The most activation rows per pass for a block of NR weight rows: MR * NR accumulators,
// NR weight vectors and one activation vector (loaded per row) fit the registers with one
// to spare: NR = 4: 4 rows (AVX2: 2), NR = 3: 8 (2), NR = 2: 8 (4), NR = 1: 8 (8).
template <int NR>
constexpr int max_mr() {
  int mr = 1;
  while (mr < 8 && 2 * mr * NR + NR + 1 < kRegs) mr *= 2;
  return mr;
}

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
template <typename WT, int MR, int NR>
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

template <typename WT, int MR, int NR>
void gemv_typed(const GemvArgs& a) {
  if (a.M <= 0 || a.N <= 0) return;  // nothing to write (and no tile size to divide by)
  const int64_t blocks = (a.N + NR - 1) / NR;
  // Many rows (a narrow output at any M, matmul_kernel's narrow_output rule): tiles of activation
  // rows of at most ~256 KB (L2-resident while every weight block passes over them, so the
  // activations are read from memory once) are split across threads as well. At M <= 64
  // (every small-M call) one tile, the weight blocks alone split, unless there is one block
  // (N < 4), whose rows are all there is to split.
  const int64_t row_bytes = a.K * static_cast<int64_t>(sizeof(float));
  const int64_t tile = a.M <= 64 && blocks > 1 ? a.M : std::clamp<int64_t>((256 << 10) / std::max<int64_t>(1, row_bytes) / MR * MR, MR, 64);
  const int64_t tiles = (a.M + tile - 1) / tile;
  // Threads only when each gets at least ~256 KB of weights (and rows): below that, waking
  // them costs more than streaming the rest.
  const int64_t bytes_per_task = NR * a.K * static_cast<int64_t>(sizeof(WT)) + (tiles > 1 ? tile * row_bytes : 0);
  const int64_t grain = std::max<int64_t>(1, (256 << 10) / std::max<int64_t>(1, bytes_per_task));
  at::parallel_for(0, tiles * blocks, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {  // tile-major: a thread's blocks share its rows
      const int64_t m_begin = t / blocks * tile, m_end = std::min(a.M, m_begin + tile), b = t % blocks;
      for (int64_t m0 = m_begin; m0 < m_end; m0 += MR) block<WT, MR, NR>(a, m0, b * NR);
    }
  });
}

template <typename WT, int NR>
void gemv_rows(const GemvArgs& a) {
  // The fewest rows per pass that still cover M in one pass over the weight (1, 2, 4, 8:
  // repeated rows cost FMAs, another pass costs a second stream of the weight), at most
  // what fits the registers.
  constexpr int kMax = max_mr<NR>();
  if (a.M == 1) return gemv_typed<WT, 1, NR>(a);
  if (a.M == 2 || kMax == 2) return gemv_typed<WT, 2, NR>(a);
  if constexpr (kMax == 4) {
    return gemv_typed<WT, 4, NR>(a);
  } else {
    if (a.M <= 4) return gemv_typed<WT, 4, NR>(a);
    return gemv_typed<WT, 8, NR>(a);
  }
}

template <typename WT>
void gemv_dtype(const GemvArgs& a) {
  switch (a.N) {
    case 1: return gemv_rows<WT, 1>(a);
    case 2: return gemv_rows<WT, 2>(a);
    case 3: return gemv_rows<WT, 3>(a);
    default: return gemv_rows<WT, kNR>(a);
  }
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
