// ATen's CPU attention (`_scaled_dot_product_flash_attention_for_cpu`) as two oneDNN matmuls
// around one softmax pass: S = Q K^T in fp32, P = exp(S * scale + mask - max) in the inputs'
// dtype with 1 / sum and logsumexp (cpu/attention_rows.h), O = (P V) / sum. At the suite's
// short sequences ATen's flash kernel runs its GEMMs at a fraction of the FMA peak (bf16: ~10%
// at BERT's shapes on the AVX-512-BF16 host); oneDNN's batched brgemm runs them near peak, and S
// for a whole call (a few MB at sequence 128) stays in the last-level cache
// (benchmarks/results/attention-matmuls/). Rounding as the flash kernel's: fp32 scores and
// softmax, unnormalized bf16 probabilities into a bf16 GEMM with fp32 accumulation, divided by
// the fp32 sum, the output rounded once.
//
// Never slower than ATen, as the oneDNN GEMM kernels: a signature's first call times both and
// keeps the flash kernel unless this path is at least 10% faster. A node measures its first
// kMaxMeasured signatures, then only one with twice the work of all measured before (a
// decoding loop's growing key length, about once per doubling); others inherit the last
// choice, and build no primitives where one call would not repay the build. What a signature
// measured goes into the choice cache (Options.cache) with both times, and a later process takes
// it instead of timing again (and builds nothing where ATen's kernel won). ATen's kernel runs
// wherever this one does not apply (dropout, grouped-query heads, scores above
// kMaxScoreBytes) and recomputes any call whose softmax met a row with no finite max or sum
// (fully masked, NaN, inf) or whose output is not finite: ATen has its own rules there (a
// fully masked row gives zeros; its causal blocks never read V right of the diagonal).
// FXCPP_ATTENTION=matmuls forces this path (tests); =native or =fp32 leave the node to ATen
// (attention_fp32.cpp).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/ExpandUtils.h>  // at::infer_dense_strides

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/attention_mode.h"
#include "runtime/buffer_pool.h"
#include "runtime/choice_cache.h"
#include "runtime/cpu/attention_rows.h"
#include "runtime/cpu/isa.h"
#include "runtime/host.h"
#include "runtime/kernel.h"
#include "runtime/onednn/call_args.h"
#include "runtime/onednn/common.h"
#include "runtime/shared_choices.h"

namespace fxcpp::onednn {
namespace {

constexpr const char* kOp = "aten::_scaled_dot_product_flash_attention_for_cpu";
// query, key, value, dropout_p, is_causal, *, attn_mask, scale
constexpr int kDropoutArg = 3, kCausalArg = 4, kMaskArg = 5, kScaleArg = 6;
// The fp32 scores of one call: above this the flash kernel's blocks (which never hold S whole) win.
constexpr int64_t kMaxScoreBytes = int64_t(32) << 20;
constexpr int kMaxMeasured = 4;
constexpr size_t kMaxEntries = 64;  // signatures whose primitives a node keeps

enum Choice : int { kUndecided = -1, kMatmuls = 0, kFlash = 1 };

struct Entry {
  dnnl::matmul::primitive_desc pd1, pd2;  // Q K^T -> S (fp32); P V -> O
  dnnl::matmul p1, p2;
  CallDescs d1, d2;                      // pd1's and pd2's, queried once (call_args.h)
  mutable ArgMemories mem1, mem2;        // their calls' memory objects, kept
  std::vector<int64_t> out_strides;
  bool acc_in_output = false;  // fp32, contiguous: P V is written into the output and scaled there
  std::atomic<int> choice{kUndecided};
  std::string key;  // the call signature
  std::string impl;
  ChoiceCache::Measured earlier;  // an earlier process's measurement (choice cache), if any
};

class AttentionAsMatmuls final : public Kernel {
 public:
  explicit AttentionAsMatmuls(const Node& n)
      : op_(*n.op), name_(n.name), choice_cache_(n.choice_cache), shared_choices_(n.shared_choices),
        forced_(attention_mode() == AttentionMode::Matmuls), rows_(cpu::select_attention_rows()), scale_(cpu::select_attention_scale()),
        long_k_(long_k_threshold()) {}

  void run(Stack& stack) const override {
    const at::Tensor q = stack[0].toTensor(), k = stack[1].toTensor(), v = stack[2].toTensor();
    const at::Tensor mask = stack[kMaskArg].isTensor() ? stack[kMaskArg].toTensor() : at::Tensor();
    if (const char* why = lse_read_ ? kLseRead : not_applicable(q, k, v, stack[kDropoutArg].toDouble(), mask)) {
      note(std::string("aten: ") + why);
      return op_.callBoxed(&stack);
    }
    const bool causal = stack[kCausalArg].toBool();
    const double scale = stack[kScaleArg].isNone() ? 1.0 / std::sqrt(double(q.size(-1))) : stack[kScaleArg].toDouble();
    Outputs out;
    try {
      std::shared_ptr<Entry> e = entry(q, k, v, mask, causal);
      if (!e) {
        note(last_choice_.load() == kFlash ? "aten: as measured for an earlier shape"
                                           : "aten: at new shapes, where building the matmuls costs more than one call saves");
        return op_.callBoxed(&stack);
      }
      out = choose(*e, stack, [&] { return run_matmuls(*e, q, k, v, mask, causal, float(scale)); });
    } catch (const dnnl::error& err) {  // a primitive oneDNN would not build (no bf16 kernels on this host)
      note(std::string("aten: oneDNN refused the matmuls (") + err.what() + ")");
      return op_.callBoxed(&stack);
    }
    stack.clear();
    stack.emplace_back(std::move(out.o));
    stack.emplace_back(std::move(out.lse));
  }

  const char* kind() const override { return "onednn"; }
  void set_outputs_read(const std::vector<bool>& read) override { lse_read_ = read.size() > 1 && read[1]; }
  std::string describe() const override { return notes_.joined(); }
  std::string ran() const override { return notes_.ran(kind()); }

 private:
  struct Outputs {
    at::Tensor o, lse;
    bool ok = true;  // false: a row or the output was not finite; ATen's kernel must say
  };

  static double work(const at::Tensor& q, const at::Tensor& k) {
    return double(q.size(0)) * double(q.size(1)) * double(q.size(2)) * double(k.size(2)) * double(q.size(3));
  }

  // Whether a new signature is measured: the first kMaxMeasured, then one with twice the work of
  // every signature measured so far (a decoding loop's growing key length is measured at about
  // each doubling; its first tokens are too small to speak for its last). Others inherit the
  // last choice.
  bool measures(const at::Tensor& q, const at::Tensor& k) const {
    return measured_.load() < kMaxMeasured || work(q, k) >= 2 * max_measured_work_.load();
  }

  // Why this call stays with ATen's kernel, or nullptr.
  static const char* not_applicable(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout,
                                    const at::Tensor& mask) {
    if (dropout != 0.0) return "dropout";
    if (!q.device().is_cpu() || (q.scalar_type() != at::kFloat && q.scalar_type() != at::kBFloat16))
      return "not an fp32 or bf16 CPU call";
    if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return "not 4-D";
    if (k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type()) return "mixed dtypes";
    if (k.size(1) != q.size(1) || v.size(1) != q.size(1)) return "grouped-query heads";
    if (k.size(0) != q.size(0) || v.size(0) != q.size(0) || v.size(2) != k.size(2) || v.size(3) != q.size(3))
      return "shapes this path does not take";
    if (q.numel() == 0 || k.numel() == 0) return "an empty dimension";
    if (q.size(0) * q.size(1) * q.size(2) * k.size(2) * 4 > kMaxScoreBytes) return "scores above 32 MB (flash's blocks)";
    if (mask.defined() && (mask.dim() > 4 || (mask.scalar_type() != at::kFloat && mask.scalar_type() != at::kBFloat16)))
      return "a mask this path does not read";
    return nullptr;
  }

  std::shared_ptr<Entry> entry(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                               bool causal) const {
    const std::string key = signature({q, k, v, mask}, causal);
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = cache_.find(key);
      if (it != cache_.end()) return it->second;
    }
    auto e = std::make_shared<Entry>();
    e->key = key;
    if (choice_cache_ && !forced_) e->earlier = choice_cache_->lookup_measured(name_, key);
    if (e->earlier.choice == kFlash) return keep(std::move(e));  // no primitives: ATen's kernel runs
    // A new signature past the measured ones builds nothing where it will run ATen anyway, or
    // where building its primitives takes longer than the matmuls would save in one call (the
    // last measured saving per unit of work, B * H * L * S * E, times this call's work): a
    // decoding loop meets a new key length at every token and calls it once (~60 us a build
    // against ~20 us saved at a small model's first decoding steps).
    if (!forced_ && e->earlier.choice == kUndecided && !measures(q, k) &&
        (last_choice_.load() == kFlash || build_us_.load() > saved_per_work_.load() * work(q, k)))
      return nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t B = q.size(0), H = q.size(1), L = q.size(2), E = q.size(3), S = k.size(2);
    const memory::data_type dt = dtype_of(q.scalar_type());
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // K^T is K read through swapped strides; S is contiguous fp32.
    const auto ks = k.strides();
    e->pd1 = dnnl::matmul::primitive_desc(cpu_engine(), plain_desc(q), plain_desc(k, {B, H, E, S}, {ks[0], ks[1], ks[3], ks[2]}),
                                          plain_desc(memory::data_type::f32, {B, H, L, S}, {H * L * S, L * S, S, 1}), attr);
    // The output laid out as ATen's is: after the query's (empty_like's rule).
    e->out_strides = q.is_non_overlapping_and_dense() ? q.strides().vec() : at::infer_dense_strides(q.sizes(), q.strides());
    // P V in fp32, scaled by each row's 1 / sum as it is rounded into the output (a binary
    // post-op with that broadcast is oneDNN's reference implementation only).
    auto make2 = [&] {
      return dnnl::matmul::primitive_desc(cpu_engine(), plain_desc(dt, {B, H, L, S}, {H * L * S, L * S, S, 1}), plain_desc(v),
                                          plain_desc(memory::data_type::f32, {B, H, L, E}, {H * L * E, L * E, E, 1}), attr);
    };
    e->pd2 = make2();
    // fp32 P V over a long key sequence: gemm:jit, not brgemm (common.h; 1.57x eager's error at S = 2048).
    const std::string why2 = dt == memory::data_type::f32 ? take_gemm_for_long_k(e->pd2, S, long_k_, make2) : "";
    e->acc_in_output = q.scalar_type() == at::kFloat && e->out_strides == std::vector<int64_t>{H * L * E, L * E, E, 1};
    e->p1 = dnnl::matmul(e->pd1);
    e->p2 = dnnl::matmul(e->pd2);
    e->d1 = CallDescs(e->pd1);
    e->d2 = CallDescs(e->pd2);
    build_us_.store(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    stats().primitives += 2;
    e->impl = std::string(e->pd1.impl_info_str()) + " + softmax rows " + cpu::isa_name() + " + " + e->pd2.impl_info_str() + why2;
    if (e->impl.find("ref:") != std::string::npos) {
      e->choice.store(kFlash);
      note("aten: oneDNN offers only its reference implementation (" + e->impl + ")");
    }
    return keep(std::move(e));
  }

  std::shared_ptr<Entry> keep(std::shared_ptr<Entry> e) const {
    std::lock_guard<std::mutex> lk(mu_);
    // Bounded: a decoding loop's growing key length makes a new signature at every token. An
    // evicted one is built again if it comes back (its choice is then the inherited one).
    if (cache_.size() >= kMaxEntries) cache_.erase(cache_.begin());
    const std::string key = e->key;
    return cache_.emplace(key, std::move(e)).first->second;
  }

  Outputs run_matmuls(const Entry& e, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const at::Tensor& mask, bool causal, float scale) const {
    const int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2);
    const c10::ScalarType dt = q.scalar_type();
    // Scores and probabilities from the buffer pool: a few MB each, faulted in once per process.
    at::Tensor scores = pooled_empty({B, H, L, S}, at::kFloat);
    at::Tensor probs = dt == at::kFloat ? scores : pooled_empty({B, H, L, S}, dt);
    CallArgs a1;
    a1.add(DNNL_ARG_SRC, e.d1.src, q.const_data_ptr());
    a1.add(DNNL_ARG_WEIGHTS, e.d1.weights, k.const_data_ptr());
    a1.add(DNNL_ARG_DST, e.d1.dst, scores.mutable_data_ptr());
    execute(e.p1, e.d1, e.mem1, a1);

    // logsumexp as ATen lays it out: [B, L, H] transposed to [B, H, L].
    at::Tensor lse = at::empty({B, L, H}, q.options().dtype(at::kFloat)).transpose(1, 2);
    at::Tensor inv_sum = at::empty({B, H, L}, q.options().dtype(at::kFloat));
    std::atomic<bool> nonfinite{false};
    cpu::AttentionRowsArgs r;
    r.scores = scores.mutable_data_ptr<float>();
    r.probs = probs.mutable_data_ptr();
    r.probs_dtype = dt;
    r.lse = lse.mutable_data_ptr<float>();
    r.inv_sum = inv_sum.mutable_data_ptr<float>();
    for (int i = 0; i < 3; ++i) r.lse_strides[i] = lse.stride(i);
    at::Tensor m;
    if (mask.defined()) {
      m = mask.expand({B, H, L, S});  // broadcast dims read with stride 0
      r.mask = m.const_data_ptr();
      r.mask_dtype = m.scalar_type();
      for (int i = 0; i < 4; ++i) r.mask_strides[i] = m.stride(i);
    }
    r.B = B, r.H = H, r.L = L, r.S = S;
    r.scale = scale;
    r.causal = causal;
    r.nonfinite = &nonfinite;
    rows_(r);
    if (nonfinite.load()) return {at::Tensor(), at::Tensor(), false};

    at::Tensor o = pooled_empty_strided(q.sizes(), e.out_strides, dt);
    at::Tensor acc = e.acc_in_output ? o : pooled_empty(q.sizes(), at::kFloat);
    CallArgs a2;
    a2.add(DNNL_ARG_SRC, e.d2.src, probs.const_data_ptr());
    a2.add(DNNL_ARG_WEIGHTS, e.d2.weights, v.const_data_ptr());
    a2.add(DNNL_ARG_DST, e.d2.dst, acc.mutable_data_ptr());
    execute(e.p2, e.d2, e.mem2, a2);
    cpu::AttentionScaleArgs sa;
    sa.acc = acc.const_data_ptr<float>();
    sa.inv_sum = inv_sum.const_data_ptr<float>();
    sa.out = o.mutable_data_ptr();
    sa.out_dtype = dt;
    for (int i = 0; i < 4; ++i) sa.out_strides[i] = e.out_strides[i];
    sa.B = B, sa.H = H, sa.L = L, sa.E = q.size(3);
    sa.nonfinite = &nonfinite;  // still false here: the rows were all finite
    scale_(sa);
    if (nonfinite.load()) return {at::Tensor(), at::Tensor(), false};
    return {std::move(o), std::move(lse), true};
  }

  Outputs flash(const Stack& stack) const {
    Stack s(stack.begin(), stack.end());
    op_.callBoxed(&s);
    return {s[0].toTensor(), s[1].toTensor(), true};
  }

  // This call's outputs from its signature's chosen path (timed as fused_kernel.h times: interleaved,
  // best of three after one untimed call each). The flash kernel is kept unless the matmuls are
  // clearly faster (fused_kernel.h gives its own path that benefit of the doubt instead: there
  // eager's ops are the fallback; here ATen's kernel is the one a user would otherwise run).
  template <typename Mine>
  Outputs choose(Entry& e, const Stack& stack, Mine&& mine) const {
    const at::Tensor q = stack[0].toTensor(), k = stack[1].toTensor();
    int c = e.choice.load();
    if (c == kUndecided && forced_) c = kMatmuls;
    if (c == kUndecided && e.earlier.choice != kUndecided) {  // an earlier process measured it
      c = e.earlier.choice;
      if (e.choice.exchange(c) == kUndecided) {
        learn(c, e.earlier.ours_us, e.earlier.theirs_us, work(q, k));
        // Shared with the siblings the file does not name (shared_choices.h). Not an ATen choice:
        // its entry builds no primitives, so its key (which names them) matches no sibling's.
        if (shared_choices_ && !e.impl.empty()) shared_choices_->add(shared_key(e), {e.earlier, name_, true});
        const std::string how = "when an earlier process measured (" + measured_text(e.earlier, q, k) + "; choice cache)";
        note(c == kMatmuls ? "onednn " + e.impl + "; faster " + how : "aten: its flash attention was faster " + how);
      }
      return c == kMatmuls ? or_flash(mine(), stack) : flash(stack);
    }
    // Another attention node of this partition measured this signature (a transformer's layers):
    // take its choice (shared_choices.h).
    std::optional<SharedChoices::Made> sibling;
    if (c == kUndecided && shared_choices_ && (sibling = shared_choices_->find(shared_key(e)))) {
      c = sibling->measured.choice;
      if (e.choice.exchange(c) == kUndecided) {
        learn(c, sibling->measured.ours_us, sibling->measured.theirs_us, work(q, k));
        if (choice_cache_) choice_cache_->record(name_, e.key, sibling->measured);
        const std::string how = "when node '" + sibling->node + "' measured (" + measured_text(sibling->measured, q, k) +
                                (sibling->from_cache ? "; the same signature; it took them from the choice cache)"
                                                     : "; the same signature)");
        note(c == kMatmuls ? "onednn " + e.impl + "; faster " + how : "aten: its flash attention was faster " + how);
      }
      return c == kMatmuls ? or_flash(mine(), stack) : flash(stack);
    }
    if (c == kUndecided && !measures(q, k)) c = last_choice_.load();
    if (c != kUndecided) {
      if (e.choice.exchange(c) == kUndecided)
        note(c == kMatmuls ? "onednn " + e.impl + (forced_ ? "; FXCPP_ATTENTION=matmuls" : "; as measured for an earlier shape")
                           : "aten: as measured for an earlier shape");
      return c == kMatmuls ? or_flash(mine(), stack) : flash(stack);
    }
    const MeasuredWithoutPython no_python;
    Outputs a = mine(), b = flash(stack);
    if (!a.ok) return b;  // not finite: ATen's answer, and nothing learned about speed
    double ta = std::numeric_limits<double>::infinity(), tb = ta;
    for (int i = 0; i < 3; ++i) {
      a = Outputs(), ta = std::min(ta, elapsed_us([&] { a = mine(); }));
      b = Outputs(), tb = std::min(tb, elapsed_us([&] { b = flash(stack); }));
    }
    const ChoiceCache::Measured m{clearly_faster(ta, tb) ? kMatmuls : kFlash, ta, tb};
    const bool aten = m.choice == kFlash;
    e.choice.store(m.choice);
    learn(m.choice, ta, tb, work(q, k));
    if (choice_cache_) choice_cache_->record(name_, e.key, m);
    if (shared_choices_) shared_choices_->add(shared_key(e), {m, name_});
    const std::string buf = "measured " + measured_text(m, q, k);
    note(aten ? "aten: its flash attention was faster, " + buf + " (" + e.impl + ")" : "onednn " + e.impl + "; " + buf);
    return aten || !a.ok ? b : a;
  }

  static std::string shared_key(const Entry& e) { return "attention\n" + e.key + '\n' + e.impl; }

  // What a measurement (this process's or an earlier one's) tells the choices that follow: the last
  // choice, how many signatures were measured and the largest work, and the saving per unit of work.
  void learn(int choice, double ours_us, double flash_us, double w) const {
    const double saved = choice == kMatmuls && std::isfinite(flash_us - ours_us) ? (flash_us - ours_us) / w : 0.0;
    saved_per_work_.store(saved);
    last_choice_.store(choice);
    ++measured_;
    for (double m = max_measured_work_.load(); w > m && !max_measured_work_.compare_exchange_weak(m, w);) {
    }
  }

  // "X us vs ATen's flash attention Y us at L x S"
  static std::string measured_text(const ChoiceCache::Measured& m, const at::Tensor& q, const at::Tensor& k) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%.0f us vs ATen's flash attention %.0f us at %lld x %lld", m.ours_us, m.theirs_us,
                  static_cast<long long>(q.size(2)), static_cast<long long>(k.size(2)));
    return buf;
  }

  Outputs or_flash(Outputs a, const Stack& stack) const {
    if (a.ok) return a;
    note("aten: at a call whose softmax or output was not finite (ATen's rules for masked rows, NaN and inf)");
    return flash(stack);
  }

  void note(const std::string& s) const { notes_.add(s); }

  // A training forward saves the logsumexp for ATen's backward, which recomputes the scores with
  // its own GEMMs and exponentiates them against it: a logsumexp from oneDNN's scores, a few
  // units in the last place apart, scaled P by e^(difference), and where the scores are large
  // (|S| in the hundreds) the gradients strayed far from eager's (the fuzzer's grammar 4, seed
  // 164 with --train). Such a node runs ATen's kernel, forward and backward alike.
  static constexpr const char* kLseRead = "its logsumexp is read (a training forward: ATen's backward must meet its own scores)";
  bool lse_read_ = false;

  c10::OperatorHandle op_;
  const std::string name_;
  const std::shared_ptr<ChoiceCache> choice_cache_;  // Options.cache, or null
  const std::shared_ptr<SharedChoices> shared_choices_;  // this partition's, or null
  const bool forced_;
  const cpu::AttentionRows rows_;
  const cpu::AttentionScale scale_;
  const int64_t long_k_;  // long_k_threshold(): P V over more keys runs gemm:jit in fp32
  mutable std::atomic<int> measured_{0}, last_choice_{kUndecided};
  // The last build of a signature's primitives (us), and what the matmuls saved at the last
  // measurement, per unit of work().
  mutable std::atomic<double> build_us_{0.0}, saved_per_work_{0.0}, max_measured_work_{0.0};
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<Entry>> cache_;
  mutable Notes notes_;
};

}  // namespace

// The fp32 kernel that attention_fp32.cpp hands its widened operands to.
std::unique_ptr<Kernel> make_fp32_attention_matmuls(const Node& n) {
  return std::make_unique<AttentionAsMatmuls>(n);
}

std::unique_ptr<Kernel> make_attention_kernel(const Node& n) {
  if (!n.op || n.args.empty() || n.args[0].kind != Arg::Kind::Value || !n.args[0].value->meta) return nullptr;
  const AttentionMode mode = attention_mode();
  if (mode == AttentionMode::Native || mode == AttentionMode::Fp32) return nullptr;
  const c10::ScalarType dt = n.args[0].value->meta->dtype;
  // fp16: no native fp16 GEMMs on most hosts (attention_fp32.cpp widens it and hands it to this
  // kernel's fp32 path); bf16 where oneDNN
  // has bf16 kernels, or forced (then a refusal is reported and ATen runs).
  if (dt != c10::kFloat && !(dt == c10::kBFloat16 && (native_bf16() || mode == AttentionMode::Matmuls))) return nullptr;
  return std::make_unique<AttentionAsMatmuls>(n);
}

}  // namespace fxcpp::onednn
