// The softmax between attention's two GEMMs (runtime/onednn/attention_kernel.cpp): for each
// query row of the fp32 scores S = Q K^T, x = S * scale + mask (causal: -inf right of the
// diagonal, top-left aligned as ATen's), P = exp(x - max) in the probabilities' dtype, 1 / sum
// (which the caller scales the output by) and logsumexp = max + log(sum). One pass per row
// while it is in L1, rows split across threads. Compiled once per instruction set
// (attention_rows_<isa>.cc) and picked as the interpreter is.
// A row whose max or sum is not finite (fully masked, NaN, inf) is only flagged: ATen's flash
// kernel has its own rules there, so the caller recomputes such a call with it.
#pragma once
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/core/ScalarType.h>
#include <c10/util/BFloat16.h>
#include <c10/util/bit_cast.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>

namespace fxcpp::cpu {

struct AttentionRowsArgs {
  float* scores = nullptr;  // [B, H, L, S] contiguous fp32; used as scratch
  void* probs = nullptr;    // [B, H, L, S] contiguous, probs_dtype (kFloat: may be `scores`)
  c10::ScalarType probs_dtype = c10::kFloat;
  float* inv_sum = nullptr;              // [B, H, L]: 1 / the row's sum of exp
  float* lse = nullptr;                  // element (b, h, l) at b*lse_strides[0] + ...
  int64_t lse_strides[3] = {0, 0, 0};
  const void* mask = nullptr;            // null: none; else element (b, h, l, j) at mask_strides
  c10::ScalarType mask_dtype = c10::kFloat;  // kFloat or kBFloat16
  int64_t mask_strides[4] = {0, 0, 0, 0};
  int64_t B = 0, H = 0, L = 0, S = 0;
  float scale = 1.f;
  bool causal = false;
  std::atomic<bool>* nonfinite = nullptr;  // set when any row's max or sum is not finite
};

using AttentionRows = void (*)(const AttentionRowsArgs&);
AttentionRows select_attention_rows();  // attention_rows.cpp

// The second GEMM's fp32 rows [B, H, L, E] (contiguous) times their row's 1 / sum, rounded once
// into the output (element (b, h, l, e) at out_strides), noting whether any output value is not
// finite. In place where the output is fp32 with the accumulator's layout.
struct AttentionScaleArgs {
  const float* acc = nullptr;
  const float* inv_sum = nullptr;  // [B, H, L]
  void* out = nullptr;
  c10::ScalarType out_dtype = c10::kFloat;
  int64_t out_strides[4] = {0, 0, 0, 0};
  int64_t B = 0, H = 0, L = 0, E = 0;
  std::atomic<bool>* nonfinite = nullptr;  // set when any output value is NaN or inf
};
using AttentionScale = void (*)(const AttentionScaleArgs&);
AttentionScale select_attention_scale();

namespace detail {

// The mask's row (b, h, l) added into x[0, n): read through its strides, fp32 or bf16.
inline void add_mask_row(const AttentionRowsArgs& a, int64_t b, int64_t h, int64_t l, float* x, int64_t n) {
  const int64_t off = b * a.mask_strides[0] + h * a.mask_strides[1] + l * a.mask_strides[2];
  const int64_t js = a.mask_strides[3];
  if (a.mask_dtype == c10::kFloat) {
    const float* m = static_cast<const float*>(a.mask) + off;
    for (int64_t j = 0; j < n; ++j) x[j] += m[j * js];
  } else {
    const c10::BFloat16* m = static_cast<const c10::BFloat16*>(a.mask) + off;
    for (int64_t j = 0; j < n; ++j) x[j] += float(m[j * js]);
  }
}

template <typename Vec>
void attention_rows_body(const AttentionRowsArgs& a) {
  constexpr int64_t V = Vec::size();
  const int64_t rows = a.B * a.H * a.L, S = a.S;
  const float ninf = -std::numeric_limits<float>::infinity();
  // About 16K elements a task: rows of 128 give 128 rows (one call's work spread over threads
  // without a task per row).
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(S, 1));
  at::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    bool bad = false;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t l = r % a.L, bh = r / a.L, h = bh % a.H, b = bh / a.H;
      float* x = a.scores + r * S;
      // Columns right of the causal diagonal are -inf: they take no part and get P = 0.
      const int64_t n = a.causal ? std::min<int64_t>(S, l + 1) : S;
      const Vec vscale(a.scale);
      int64_t j = 0;
      for (; j + V <= n; j += V) (Vec::loadu(x + j) * vscale).store(x + j);
      if (j < n) (Vec::loadu(x + j, n - j) * vscale).store(x + j, n - j);
      if (a.mask) add_mask_row(a, b, h, l, x, n);
      Vec vmax(ninf);
      for (j = 0; j + V <= n; j += V) vmax = at::vec::maximum(vmax, Vec::loadu(x + j));
      float mx = at::vec::vec_reduce_all<float>([](Vec& p, Vec& q) { return at::vec::maximum(p, q); }, vmax);
      for (; j < n; ++j) mx = std::isnan(x[j]) || x[j] > mx ? x[j] : mx;
      if (!std::isfinite(mx)) {
        bad = true;
        continue;
      }
      const Vec vmx(mx);
      Vec vsum(0.f);
      for (j = 0; j + V <= n; j += V) {
        const Vec e = (Vec::loadu(x + j) - vmx).exp_u20();  // ATen's flash kernel's exp
        e.store(x + j);
        vsum = vsum + e;
      }
      float sum = at::vec::vec_reduce_all<float>([](Vec& p, Vec& q) { return p + q; }, vsum);
      if (j < n) {
        const Vec e = (Vec::loadu(x + j, n - j) - vmx).exp_u20();
        e.store(x + j, n - j);
        float t[V];
        e.store(t, n - j);
        for (int64_t k = 0; k < n - j; ++k) sum += t[k];
      }
      if (!std::isfinite(sum) || !(sum > 0.f)) {
        bad = true;
        continue;
      }
      // P stays unnormalized (its largest entry exactly 1) and the output is scaled by 1 / sum
      // after the GEMM, as the flash kernel does: normalized first, then rounded to bf16, the
      // output's RMS error against fp64 was 1.25x eager's.
      a.inv_sum[r] = 1.f / sum;
      for (j = n; j < S; ++j) x[j] = 0.f;
      if (a.probs_dtype == c10::kBFloat16)
        at::vec::convert(x, static_cast<c10::BFloat16*>(a.probs) + r * S, S);  // rounded to nearest even
      else if (a.probs != a.scores)
        at::vec::convert(x, static_cast<float*>(a.probs) + r * S, S);
      a.lse[b * a.lse_strides[0] + h * a.lse_strides[1] + l * a.lse_strides[2]] = mx + std::log(sum);
    }
    if (bad) a.nonfinite->store(true, std::memory_order_relaxed);
  });
}

template <typename Vec>
void attention_scale_body(const AttentionScaleArgs& a) {
  constexpr int64_t V = Vec::size();
  const int64_t rows = a.B * a.H * a.L, E = a.E;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(E, 1));
  // The largest |value| that stays finite in the output's dtype: bf16 rounds from 0x7f7f8000 up
  // to inf (to nearest even). NaN fails the comparison too.
  const float limit = a.out_dtype == c10::kBFloat16 ? c10::bit_cast<float>(uint32_t{0x7f7f8000})
                                                    : std::numeric_limits<float>::infinity();
  at::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    float t[256];  // one row scaled before conversion (E <= 256 here; longer rows go by parts)
    Vec vmax(0.f);  // max |value| written (NaN propagates)
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t l = r % a.L, bh = r / a.L, h = bh % a.H, b = bh / a.H;
      const int64_t base = b * a.out_strides[0] + h * a.out_strides[1] + l * a.out_strides[2], es = a.out_strides[3];
      const float* x = a.acc + r * E;
      const Vec inv(a.inv_sum[r]);
      for (int64_t e0 = 0; e0 < E; e0 += 256) {
        const int64_t n = std::min<int64_t>(256, E - e0);
        int64_t j = 0;
        for (; j + V <= n; j += V) {
          const Vec y = Vec::loadu(x + e0 + j) * inv;
          vmax = at::vec::maximum(vmax, y.abs());
          y.store(t + j);
        }
        if (j < n) {
          const Vec y = Vec::loadu(x + e0 + j, n - j) * inv;  // zeros past n
          vmax = at::vec::maximum(vmax, y.abs());
          y.store(t + j, n - j);
        }
        if (a.out_dtype == c10::kBFloat16) {
          c10::BFloat16* o = static_cast<c10::BFloat16*>(a.out) + base + e0 * es;
          if (es == 1)
            at::vec::convert(t, o, n);  // rounded to nearest even
          else
            for (j = 0; j < n; ++j) o[j * es] = c10::BFloat16(t[j]);
        } else {
          float* o = static_cast<float*>(a.out) + base + e0 * es;
          for (j = 0; j < n; ++j) o[j * es] = t[j];
        }
      }
    }
    const float m = at::vec::vec_reduce_all<float>([](Vec& p, Vec& q) { return at::vec::maximum(p, q); }, vmax);
    if (!(m < limit)) a.nonfinite->store(true, std::memory_order_relaxed);
  });
}

}  // namespace detail
}  // namespace fxcpp::cpu
