// What both oneDNN kernels (conv, matmul) share: the node's FusedOp, run() with its ATen
// fallback, one cached primitive entry per concrete call signature, the version-checked
// packing of long-lived weights (with BatchNorm folded in), and what explain() reports.
//
// A weight is packed once and cached only when it is long-lived (a parameter, buffer or
// constant), all its sources can carry a write guard, and Options.pack_weights is on (the
// pack is a second copy of the weight; off, memory stays near eager's). Any other weight
// (computed in the graph, a user input, a backward graph's saved tensor, shared or mapped
// memory, or one that was re-packed at several calls in a row) changes between calls: the
// kernels use the same cached primitive and hand it the weight as it is (matmul) or
// reordered into a per-thread buffer (conv), never packing into a new tensor or building a
// primitive per call.
//
// Never slower than eager: at a signature's first call the kernel times its oneDNN path
// against eager's ATen ops for the same computation (two runs each, on this call's inputs,
// into scratch outputs) and keeps ATen only if it is clearly faster; the call returns the
// chosen path's result, so every call of a signature comes from one path. A node measures
// at most kMaxMeasured signatures (a decoding loop's growing shapes then inherit the last
// choice). FXCPP_KERNEL_CHOICE=onednn|aten forces one path (tests); =ours our own kernel,
// never eager's ops, with the matmul kernel's own rules for the GEMV and MKL.
//
// Options.freeze (freeze()): the kernel keeps the packs it made and never reads their sources
// again (the caller releases them): no stamps, no write guards; a signature needing another
// layout packs it from a kept pack reordered back to plain; a new signature takes oneDNN
// unmeasured (eager's path would need the released weight).
#pragma once
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/choice_cache.h"
#include "runtime/host.h"
#include "runtime/kernel.h"
#include "runtime/onednn/common.h"
#include "runtime/onednn/reference.h"
#include "runtime/release_freed_memory.h"
#include "runtime/shared_choices.h"
#include "runtime/value_bounds.h"

namespace fxcpp::onednn {

// Which path a signature runs.
enum Choice : int { kUndecided = -1, kOnednn = 0, kAten = 1 };

// Entry: a kernel's per-signature primitive, with `pd`, `std::shared_ptr<const PackedWeights>
// packed`, `std::string key, impl` and `std::atomic<int> choice` (a Choice).
// A cached weight's note in explain(); entry() puts an entry's pack_note right after it.
inline constexpr char kPackedOnce[] = "weight packed once";

template <typename Entry>
class FusedKernel : public Kernel {
 public:
  FusedKernel(const Node& n, bool long_lived_weight)
      : f_(*n.fused), name_(n.name), choice_cache_(n.choice_cache), shared_choices_(n.shared_choices),
        computes_(n.fused->str(/*with_covers=*/false)), long_lived_(long_lived_weight), out_dtype_(n.outputs[0]->meta->dtype),
        wide_io_(wide_io(n)), per_call_why_(why_per_call(n)), forced_(forced_choice()), native_bf16_(native_bf16()),
        aten_widened_(aten_widen_forced()) {}
  const char* kind() const override { return "onednn"; }

  void run(Stack& stack) const final {
    // oneDNN cannot run an empty dimension (a K = 0 matmul must still give bias + post-ops of zeros).
    if (stack[0].toTensor().numel() == 0 || stack[1].toTensor().numel() == 0) {
      note("aten: an empty dimension (oneDNN cannot run it)");
      return finish(stack, eager_result(stack));  // frozen: a released tensor raises, naming itself
    }
    try {
      run_onednn(stack);
    } catch (const dnnl::error& e) {
      // A primitive oneDNN would not build for this signature: correct but slower, so say it once.
      std::call_once(warned_, [&] {
        TORCH_WARN("fxcpp: node '", name_, "': oneDNN refused the primitive (", e.what(), "); it runs as ATen ops");
      });
      note(std::string("aten: oneDNN refused the primitive (") + e.what() + ")");
      finish(stack, eager_result(checked_not_frozen(stack)));
    }
  }

  // What ran, one line per distinct choice made so far: "onednn <impl>, weight ..." or "aten: <why>".
  std::string describe() const override { return notes_.joined(); }
  std::string ran() const override { return notes_.ran(kind()); }

  bool may_freeze_arg(int pos) const override {
    const bool source = pos == 1 || pos == 2 || (f_.bn_arg >= 0 && pos >= f_.bn_arg && pos < f_.bn_arg + 4);
    return source && long_lived_ && f_.pack_weight && !volatile_.load();
  }

  bool can_freeze_arg(int pos) const override {
    if (!may_freeze_arg(pos)) return false;
    std::lock_guard<std::mutex> lk(mu_);
    if (frozen_.load()) return true;
    bool any = false;
    for (const auto& kv : cache_) {
      const Entry& e = *kv.second;
      const int c = e.choice.load();
      if (c == kUndecided) continue;  // never chosen (a NaN-preserving twin runs its main entry's pack)
      if (c != kOnednn || !(e.packed || reads_rows_in_place(e))) return false;
      any = true;
    }
    return any;
  }

  void freeze(const Stack& args) const override {
    std::lock_guard<std::mutex> lk(mu_);
    if (frozen_.load()) return;
    // Each pack once, without its stamps: their write guards hold the sources' memory.
    std::vector<std::pair<const PackedWeights*, std::shared_ptr<const PackedWeights>>> kept;
    for (auto& kv : cache_) {
      std::shared_ptr<const PackedWeights>& p = kv.second->packed;
      if (!p) continue;
      auto it = std::find_if(kept.begin(), kept.end(), [&](const auto& k) { return k.first == p.get(); });
      if (it == kept.end()) {
        auto q = std::make_shared<PackedWeights>(*p);
        q->stamps.clear();  // (its weight and bias are aliases already: make_pack)
        it = kept.emplace(kept.end(), p.get(), q);
        if (!frozen_pack_for(q->layout)) frozen_packs_.push_back(q);
      }
      p = it->second;
    }
    if (frozen_packs_.empty()) frozen_packs_.push_back(pack_at_freeze(args));
    shared_packs_.clear();
    last_built_.clear();
    frozen_sizes_ = args[1].toTensor().sizes().vec();
    frozen_dtype_ = args[1].toTensor().scalar_type();
    frozen_.store(true);
  }

 protected:
  virtual void run_onednn(Stack& stack) const = 0;
  virtual at::Tensor reference(const Stack& stack) const = 0;  // the same result from ATen ops

  static void finish(Stack& stack, at::Tensor out) {
    stack.clear();
    stack.emplace_back(std::move(out));
  }

  // The folded BatchNorm's weight, bias, mean and var; empty without one.
  std::vector<at::Tensor> bn_tensors(const Stack& stack) const {
    std::vector<at::Tensor> bn;
    if (f_.bn_arg >= 0)
      for (int i = 0; i < 4; ++i) bn.push_back(stack[f_.bn_arg + i].toTensor());
    return bn;
  }

  // Whether this call's weight may be packed once and cached: it is long-lived, every source
  // can be guarded against writes (else a cached pack could go stale unseen), and it has not
  // been re-packed at kVolatile calls in a row (a training loop: then it is handled per call).
  bool cache_pack(const at::Tensor& w, const at::Tensor& bias, const std::vector<at::Tensor>& bn) const {
    if (frozen_.load()) {  // Dynamo no longer guards a released weight: a new one must not pass unseen
      TORCH_CHECK(w.sizes().equals(frozen_sizes_) && w.scalar_type() == frozen_dtype_, "fxcpp: node '", name_,
                  "': its weight was frozen (Options.freeze) with shape ", at::IntArrayRef(frozen_sizes_), " and dtype ",
                  frozen_dtype_, "; this call passes ", w.sizes(), " ", w.scalar_type(), ": compile the new model again");
      return true;
    }
    if (!f_.pack_weight || !long_lived_ || volatile_.load() || !guardable(w) || (bias.defined() && !guardable(bias))) return false;
    return std::all_of(bn.begin(), bn.end(), [](const at::Tensor& t) { return guardable(t); });
  }

  // The dtype the primitive computes in: the activations' own, or fp32 for bf16 where this host
  // has no native bf16 kernels (oneDNN 3.2 refuses them below avx512_core_bf16, and ATen then
  // emulates bf16 at a fifth of fp32's speed) and for fp16 (no kernels below AVX512-FP16):
  // weights are packed to fp32 once, activations widened per call, the result rounded back.
  // More accurate than a bf16 GEMM, never less.
  c10::ScalarType compute_dtype(c10::ScalarType io) const {
    if (io == c10::kHalf || (io == c10::kBFloat16 && !native_bf16_)) return c10::kFloat;
    return io;
  }
  // The bias's dtype in the primitive: its own, or the compute dtype where activations are
  // widened (a bias-free node: the compute dtype, for a folded BatchNorm's bias).
  c10::ScalarType bias_dtype(const at::Tensor& bias, c10::ScalarType io) const {
    return bias.defined() && compute_dtype(io) == io ? bias.scalar_type() : compute_dtype(io);
  }
  // How explain() names the oneDNN path: "onednn" or "onednn:bf16-as-fp32".
  std::string onednn_name(c10::ScalarType io) const {
    if (compute_dtype(io) == io) return "onednn";
    return io == c10::kHalf ? "onednn:fp16-as-fp32" : "onednn:bf16-as-fp32";
  }

  // Whether a call may run the primitive built with plain clamps (build_post_ops): only with a
  // packed weight, whose bound is known, and a post-op chain where that can be proven.
  bool plain_clamps_possible(bool cached) const { return cached && last_clamp_ >= 0; }
  // A bound on |value| below which every value is finite and no inf - inf can arise: far below
  // FLT_MAX, as the bounds are exact arithmetic and fp32 rounding adds little.
  static constexpr double kSafeBound = 1e30;
  // What a call knows of the bounds on its values (value_bounds.h): its input's, recorded by the
  // kernel that wrote it or read here, its operands', and its pack's.
  struct CallBounds {
    std::optional<float> src_known;  // recorded by the input's producer
    std::optional<float> src_max;    // max |x| of the input, read this call
    std::vector<float> operand_known;  // per post-op, recorded or read this call; < 0: unknown
    double w_bound = -1, b_bound = 0;  // of the pack the call ran (< 0: none)
  };
  CallBounds call_bounds(const Stack& stack) const {
    CallBounds cb;
    cb.src_known = value_bounds::known(0, stack[0].toTensor());
    cb.operand_known.assign(f_.post_ops.size(), -1.f);
    for (size_t i = 0; i < f_.post_ops.size(); ++i) {
      const int a = f_.post_ops[i].arg;
      if (a < 0 || !stack[a].isTensor()) continue;
      if (auto k = value_bounds::known(a, stack[a].toTensor())) cb.operand_known[i] = *k;
    }
    return cb;
  }

  // Whether this call's values reaching the clamps are finite and small enough that no NaN can
  // (then oneDNN's one-instruction clamps give eager's result; otherwise the NaN-preserving
  // chain runs, at two exps per element for a clip: most of MobileNetV2's time). The input's
  // bound as its producer recorded it, else one read of the input (none where the caller read
  // it already: cb.src_max), and of any operand added before a clamp whose bound is unknown.
  bool plain_clamps_safe(const at::Tensor& src, const PackedWeights& p, const std::vector<at::Tensor>& operands,
                         CallBounds& cb) const {
    auto operand_bound = [&](int i) {  // read once a call, kept for the output's bound too
      if (cb.operand_known[i] < 0) cb.operand_known[i] = max_abs(operands.at(i));
      return double(cb.operand_known[i]);
    };
    auto reaching = [&](float x) {
      const double b = double(x) * p.w_bound + p.b_bound;  // NaN (0 * inf) compares false below
      return b < kSafeBound ? post_op_bound(f_, last_clamp_, b, operand_bound) : b;
    };
    if (cb.src_known && reaching(*cb.src_known) < kSafeBound) {
      ++stats().input_bounds_known;
      return true;
    }
    if (!cb.src_max) {  // no bound recorded, or one too loose: the values themselves
      cb.src_max = max_abs(src);
      ++stats().input_reads;
    }
    if (reaching(*cb.src_max) < kSafeBound) return true;
    note("NaN-preserving post-ops at a call whose input, operand or weight could make NaN or inf reach a clamp");
    return false;
  }

  // The entry this call runs and its packed weight (null without one): `e`, built with plain
  // clamps where plain_clamps_possible, or, at a call whose values could carry NaN or inf into a
  // clamp, the NaN-preserving primitive that make(false) builds at the first such call (key
  // + "x"), packed again only where its weight layout differs. `pack_for(entry)` packs for it.
  template <typename Make, typename PackFor>
  std::pair<std::shared_ptr<Entry>, std::shared_ptr<const PackedWeights>> entry_for_call(
      const std::shared_ptr<Entry>& e, bool cached, const std::string& key, Make&& make, PackFor&& pack_for,
      const std::string& name, const std::string& weight_note, const at::Tensor& src,
      const std::vector<at::Tensor>& operands, CallBounds& cb) const {
    std::shared_ptr<const PackedWeights> packed;
    if (cached) {
      packed = pack_for(*e);
      cb.w_bound = packed->w_bound;
      cb.b_bound = packed->b_bound;
    }
    if (!plain_clamps_possible(cached) || plain_clamps_safe(src, *packed, operands, cb)) return {e, packed};
    std::shared_ptr<Entry> r = entry(key + "x", make(false), name, weight_note);
    if (!(r->pd.weights_desc() == e->pd.weights_desc())) packed = pack_for(*r);
    return {r, packed};
  }

  // After finish(): a bound on the output for the kernels that read it later in the call
  // (value_bounds.h), from the input's (recorded or read), the pack's, and the post-ops'.
  void record_output_bound(const Stack& stack, const CallBounds& cb) const {
    if (cb.w_bound < 0 || stack.size() != 1 || !stack[0].isTensor()) return;
    float x = std::numeric_limits<float>::infinity();
    if (cb.src_known) x = *cb.src_known;
    if (cb.src_max) x = std::min(x, *cb.src_max);
    const double b = double(x) * cb.w_bound + cb.b_bound;
    if (!(b < kSafeBound)) return;
    auto operand_bound = [&](int i) {
      return cb.operand_known[i] >= 0 ? double(cb.operand_known[i]) : std::numeric_limits<double>::infinity();
    };
    value_bounds::record(0, stack[0].toTensor(), post_op_bound(f_, static_cast<int>(f_.post_ops.size()), b, operand_bound));
  }

  bool frozen() const { return frozen_.load(); }
  void will_freeze() const override { freezing_.store(true); }
  // Options.freeze releases this kernel's weight after the first call (or did).
  bool freezing() const { return freezing_.load() || frozen_.load(); }

  // Why a weight is not cached, for explain().
  std::string per_call_reason() const {
    if (!long_lived_) return per_call_why_;
    if (!f_.pack_weight) return "Options.pack_weights=False";
    return volatile_.load() ? "it changed at " + std::to_string(kVolatile) + " calls in a row"
                            : "its storage cannot be write-guarded";
  }

  // This call's output, from the path chosen for the entry's signature (see the top of the
  // file). `run_once(scratch)` runs the oneDNN path and returns its output; with scratch it
  // must not write into any input (an in-place sum accumulates into a copy).
  template <typename RunOnce>
  at::Tensor choose(Entry& e, const Stack& stack, RunOnce&& run_once) const {
    int c = e.choice.load();
    ChoiceCache::Measured earlier;  // from the choice cache
    if (c == kUndecided && forced_ != kUndecided) c = forced_;
    if (c == kUndecided && frozen_.load()) {  // eager's path would read the released weight
      e.choice.store(kOnednn);
      note(e.impl_note + "; not measured (Options.freeze released the weight)");
      return run_once(false);
    }
    if (c == kUndecided && measured_.load() >= kMaxMeasured) c = last_choice_.load();
    // An earlier process measured this signature (Options.cache): take its choice.
    if (c == kUndecided && choice_cache_ && (c = (earlier = choice_cache_->lookup_measured(name_, e.key)).choice) != kUndecided) {
      last_choice_.store(c);
      ++measured_;
      if (shared_choices_) shared_choices_->add(shared_key(e), {earlier, name_, true});
    }
    // A node of this partition computing the same thing measured this signature: take its choice.
    std::optional<SharedChoices::Made> sibling;
    if (c == kUndecided && shared_choices_ && (sibling = shared_choices_->find(shared_key(e)))) {
      c = sibling->measured.choice;
      last_choice_.store(c);
      ++measured_;
      if (choice_cache_) choice_cache_->record(name_, e.key, sibling->measured);
    }
    if (c != kUndecided) {
      if (e.choice.exchange(c) == kUndecided) {  // the signature's first call: say why
        if (earlier.choice != kUndecided)
          note_taken(c, e, "an earlier process", earlier, "choice cache");
        else if (sibling)
          note_taken(c, e, "node '" + sibling->node + "'", sibling->measured,
                     sibling->from_cache ? "the same computation and signature; it took them from the choice cache"
                                         : "the same computation and signature");
        else
          note(c == kOnednn ? e.impl_note
                            : forced_ == kAten ? "aten: FXCPP_KERNEL_CHOICE=aten" : "aten: as measured for an earlier shape");
      }
      if (c == kOnednn) return run_once(false);
      drop_pack(e);
      return eager_result(checked_not_frozen(stack));
    }
    at::Tensor mine, eager;
    double t_mine = std::numeric_limits<double>::infinity(), t_eager = t_mine;
    // Interleaved, best of three after one call each not counted: a first call pays cold
    // caches, sleeping threads, packing and ATen's own primitive creation, and misled the
    // choice at small M. Where eager's call takes 20 ms or more, one timed call each: noise is
    // then small against the 10% margin, and the first call (BERT-base at batch 8) had been
    // paying eight calls of each large GEMM.
    const MeasuredWithoutPython no_python;
    mine = run_once(true);
    const double t_first_eager = elapsed_us([&] { eager = eager_result(stack); });
    const int repeats = t_first_eager >= 20e3 ? 1 : 3;
    // Each result is released before it is made again: at most one of each is alive, so
    // measuring adds no more than two outputs to the first call's peak memory.
    for (int i = 0; i < repeats; ++i) {
      mine.reset();
      t_mine = std::min(t_mine, elapsed_us([&] { mine = run_once(true); }));
      eager.reset();
      t_eager = std::min(t_eager, elapsed_us([&] { eager = eager_result(stack); }));
    }
    const bool aten = clearly_faster(t_eager, t_mine);
    e.choice.store(aten ? kAten : kOnednn);
    last_choice_.store(aten ? kAten : kOnednn);
    ++measured_;
    if (choice_cache_) choice_cache_->record(name_, e.key, {aten ? kAten : kOnednn, t_mine, t_eager});
    if (shared_choices_) shared_choices_->add(shared_key(e), {{aten ? kAten : kOnednn, t_mine, t_eager}, name_});
    char buf[96];
    std::snprintf(buf, sizeof buf, "measured %.0f us vs eager's %.0f us", t_mine, t_eager);
    note(aten ? std::string("aten: eager's ops were faster, ") + buf + " (" + e.impl + ")" : e.impl_note + "; " + buf);
    if (aten) drop_pack(e);
    at::Tensor out = aten ? std::move(eager) : std::move(mine);
    mine.reset(), eager.reset();
    // The measurement's scratch results and ATen's temporaries are freed, but stay resident in
    // glibc's heap: over a model's first call they added up to 200 MB of peak RSS (ResNet-50,
    // BERT-base at batch 8). Handed back after each measurement (first calls only, at most
    // kMaxMeasured per node), the peak stays near what is live.
    release_freed_memory();
    return out;
  }

  // What a sibling node must share with this one for its measurement to stand for this one's
  // (shared_choices.h): the computation, the call signature, the primitive and weight handling.
  std::string shared_key(const Entry& e) const {
    return computes_ + '\n' + e.key + '\n' + e.impl_note + (wide_io_ ? "\nwide" : "");
  }

  // The first call's note for a choice `who` measured elsewhere (`source`: how it reached us).
  void note_taken(int c, const Entry& e, const std::string& who, const ChoiceCache::Measured& m,
                  const char* source) const {
    note(c == kOnednn ? e.impl_note + "; as " + who + " measured (" + cached_times(m) + source + ")"
                      : "aten: eager's ops were faster when " + who + " measured (" + cached_times(m) + source + "; " +
                            e.impl + ")");
  }

  // "X us against eager's Y us; " from a choice cache entry, empty where it holds no times.
  static std::string cached_times(const ChoiceCache::Measured& m) {
    if (!std::isfinite(m.ours_us) || !std::isfinite(m.theirs_us)) return "";
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.0f us against eager's %.0f us; ", m.ours_us, m.theirs_us);
    return buf;
  }

  // The entry for `key`, made by `build()` at the signature's first call (outside the lock:
  // concurrent first calls may both build, one wins). `name` is the path ("onednn",
  // "onednn:bf16-as-fp32", "gemv"); build() may set the entry's impl, else it is the
  // primitive's. A primitive whose implementation is oneDNN's reference one (`ref:*`, orders
  // of magnitude slower) is not used: that signature runs the ATen path.
  template <typename Build>
  std::shared_ptr<Entry> entry(const std::string& key, Build&& build, const std::string& name,
                               const std::string& weight_note) const {
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = cache_.find(key);
      if (it != cache_.end()) return it->second;
    }
    std::shared_ptr<Entry> e = build();
    e->key = key;
    const bool primitive = e->impl.empty();
    if (primitive) {
      ++stats().primitives;
      e->impl = std::string(e->pd.impl_info_str()) + e->impl_suffix;
    }
    std::string wn = weight_note;
    const std::string packed = kPackedOnce;
    if (!e->pack_note.empty() && wn.compare(0, packed.size(), packed) == 0) wn.insert(packed.size(), e->pack_note);
    e->impl_note = name + " " + e->impl + ", " + wn +
                   (wide_io_ && out_dtype_ == at::kFloat ? ", output kept in fp32 for the next oneDNN node" : "");
    if (primitive && e->impl.find("ref:") != std::string::npos) {  // "ref:any", or a deconv on "conv:any+ref:any"
      e->choice.store(kAten);
      note("aten: oneDNN offers only its reference implementation (" + e->impl + ")");
    }
    std::lock_guard<std::mutex> lk(mu_);
    return cache_.emplace(key, std::move(e)).first->second;
  }

  // The entry's packed weight and bias, rebuilt when any source (weight, bias, BN tensors)
  // changed identity, version or data. `pack(wt, bt)` makes the pack from the (maybe folded)
  // weight and bias. Entries whose packs have the same `layout` share one: a model called at
  // several batch sizes keeps one copy of each weight per layout, not one per signature.
  template <typename Pack>
  std::shared_ptr<const PackedWeights> packed_weights(Entry& e, const at::Tensor& w, const at::Tensor& bias,
                                                      const std::vector<at::Tensor>& bn, const PackLayout& layout,
                                                      Pack&& pack) const {
    if (frozen_.load()) return frozen_packed(e, w, layout, pack);
    std::vector<at::Tensor> sources = {w, bias};
    sources.insert(sources.end(), bn.begin(), bn.end());
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (e.packed && stamps_match(e.packed->stamps, sources)) {
        repacks_in_a_row_ = 0;
        return e.packed;
      }
      // A source copied by an op that only read it: same bytes, so the pack still holds.
      if (e.packed) {
        std::vector<TensorStamp> st = e.packed->stamps;
        if (restamp(st, sources)) {
          auto p = std::make_shared<PackedWeights>(*e.packed);
          p->stamps = std::move(st);
          e.packed = p;
          return e.packed;
        }
      }
      // Another signature's fresh pack in the same layout.
      for (auto it = shared_packs_.begin(); it != shared_packs_.end();) {
        std::shared_ptr<const PackedWeights> p = it->second.lock();
        if (!p) {
          it = shared_packs_.erase(it);
          continue;
        }
        if (it->first == layout && stamps_match(p->stamps, sources)) return e.packed = p;
        ++it;
      }
    }
    // Built outside the lock; concurrent re-packs may both build, the last one wins.
    auto [wt, bt] = folded(w, bias, bn);
    std::shared_ptr<PackedWeights> p = make_pack(layout, wt, bt, pack);
    p->stamps = stamps_of(sources);
    std::shared_ptr<const PackedWeights> cp = p;
    std::lock_guard<std::mutex> lk(mu_);
    // A weight that changes at every call (a training loop) is better handled per call: no
    // new allocation, no write guard to copy it at the optimizer's step. One change of the
    // sources counts once, however many layouts it re-packs.
    std::vector<Fingerprint> now = fingerprints(sources);
    if (e.packed && now != last_built_ && ++repacks_in_a_row_ >= kVolatile) volatile_.store(true);
    last_built_ = std::move(now);
    e.packed = cp;
    shared_packs_.emplace_back(layout, cp);
    return cp;
  }

  template <typename Pack>
  std::shared_ptr<PackedWeights> make_pack(const PackLayout& layout, const at::Tensor& wt, const at::Tensor& bt,
                                           Pack&& pack) const {
    auto p = std::make_shared<PackedWeights>();
    p->layout = layout;
    std::tie(p->weight, p->bias) = pack(wt, bt);
    // Aliases, never the sources' own TensorImpls: a pack that is the weight or bias as it lies
    // (its dtype and layout already) would hold the user's tensor, and torch.utils.swap_tensors
    // (Module.to under swap_module_params_on_conversion, tensor-subclass parameters) refuses a
    // tensor held elsewhere. The stamps hold no reference either (tensor_stamp.h).
    if (p->weight.defined()) p->weight = p->weight.detach();
    if (p->bias.defined()) p->bias = p->bias.detach();
    // For the plain clamps, and for a convolution whose output bound a later one can use
    // (value_bounds.h; one more read of the weight at packing). The GEMV path applies post-ops
    // as ATen ops.
    if ((last_clamp_ >= 0 || (f_.anchor == FusedOp::Anchor::Conv && boundable_)) && layout.kind == "onednn") {
      p->w_bound = double(max_abs(wt)) * double(wt.numel());
      p->b_bound = bt.defined() ? double(max_abs(bt)) : 0.0;
    }
    ++stats().packs;
    return p;
  }

  // A frozen kernel's pack for `layout`: one it kept, or a new one packed from a kept pack
  // turned back into the (folded) weight and bias, in `w`'s shape and dtype (exact: a pack
  // holds the folded weight in its own dtype or widened to fp32).
  template <typename Pack>
  std::shared_ptr<const PackedWeights> frozen_packed(Entry& e, const at::Tensor& w, const PackLayout& layout,
                                                     Pack&& pack) const {
    std::shared_ptr<const PackedWeights> from;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (e.packed) return e.packed;
      if (auto p = frozen_pack_for(layout)) return e.packed = p;
      from = frozen_packs_.front();
    }
    at::Tensor wt = unpack_weight(*from, w).to(w.scalar_type());
    at::Tensor bt = from->bias;
    std::shared_ptr<const PackedWeights> p = make_pack(layout, wt, bt, pack);
    std::lock_guard<std::mutex> lk(mu_);
    if (auto q = frozen_pack_for(layout)) return e.packed = q;  // a concurrent call packed it first
    frozen_packs_.push_back(p);
    return e.packed = p;
  }

  // A frozen kernel's first kept pack (it keeps one at least).
  std::shared_ptr<const PackedWeights> a_frozen_pack() const {
    std::lock_guard<std::mutex> lk(mu_);
    TORCH_CHECK(!frozen_packs_.empty(), "fxcpp: node '", name_, "': no pack kept");
    return frozen_packs_.front();
  }

  // Under mu_: the frozen pack laid out as `layout`, or null.
  std::shared_ptr<const PackedWeights> frozen_pack_for(const PackLayout& layout) const {
    for (const auto& p : frozen_packs_)
      if (p->layout == layout) return p;
    return nullptr;
  }

  // The (folded) weight a pack holds, as a plain tensor shaped like `w`, in the pack's dtype.
  virtual at::Tensor unpack_weight(const PackedWeights& p, const at::Tensor& w) const = 0;
  // Whether an entry runs on the weight as it lies, packing nothing (the GEMV on a Linear's
  // rows): frozen, it runs on the rows pack_at_freeze keeps.
  virtual bool reads_rows_in_place(const Entry&) const { return false; }
  // The pack a frozen kernel keeps when it made none (every entry read the weight in place).
  virtual std::shared_ptr<const PackedWeights> pack_at_freeze(const Stack& args) const {
    TORCH_CHECK(false, "fxcpp: node '", name_, "': nothing packed to freeze");
  }

  // A frozen kernel cannot run eager's path (it reads the released weight): a clear error.
  const Stack& checked_not_frozen(const Stack& stack) const {
    TORCH_CHECK(!frozen_.load(), "fxcpp: node '", name_, "': this call needs eager's ATen path, which reads the weight ",
                "that Options.freeze released (compile without freeze=True to run it)");
    return stack;
  }

  // The weight and bias with the node's BatchNorm folded in (as they are without one).
  std::pair<at::Tensor, at::Tensor> folded(const at::Tensor& w, const at::Tensor& bias,
                                           const std::vector<at::Tensor>& bn) const {
    // Output channels are dim 0 for both: conv [OC, IC/G, k..] and a Linear's [N, K].
    if (bn.empty()) return {w, bias};
    return fold_batchnorm(w, bias, bn[0], bn[1], bn[2], bn[3], f_.bn_eps, 0);
  }

  // The output's dtype: the weight's, or fp32 where widen_chains kept a widened node's output
  // wide for the oneDNN nodes reading it (its src, or a post-op operand, may then be fp32 too).
  at::Tensor to_out_dtype(at::Tensor t) const { return t.scalar_type() == out_dtype_ ? t : t.to(out_dtype_); }

  // ATen's result for this call (the fallback, and what the first call measures against).
  // With widened operands or output, ATen would refuse the mixed dtypes: every floating
  // operand is widened to fp32 and the result rounded to the output's dtype. So too where we
  // compute the weight's dtype in fp32 (compute_dtype) and ATen emulates it
  // (aten_runs_natively): ATen's bf16 GEMM is emulated on the AVX2 host at a fifth of its fp32
  // speed, and in fp32 ATen (MKL) beats oneDNN's gemm on some shapes, as the fp32 model's
  // first calls find (GPT-2's Conv1D addmm). Where ATen has native kernels, eager's own ops:
  // on the Intel host where bf16 dot products are slow (native_bf16), the widened ops took
  // 2.3x eager's bf16 time for a 1 x 1024 -> 4096 Linear and 14x at M = 4 for 4096 -> 4096
  // (each call widened the weight: benchmarks/results/aten-native-alternative/), so a first
  // call that chose them ran slower than eager itself.
  at::Tensor eager_result(const Stack& stack) const {
    const c10::ScalarType wt = stack[1].isTensor() ? stack[1].toTensor().scalar_type() : out_dtype_;
    if (!wide_io_ && (compute_dtype(wt) == wt || (!aten_widened_ && aten_runs_natively(wt)))) return reference(stack);
    Stack wide = stack;
    for (auto& iv : wide)
      if (iv.isTensor() && iv.toTensor().is_floating_point() && iv.toTensor().scalar_type() != at::kFloat)
        iv = iv.toTensor().to(at::kFloat);
    return to_out_dtype(reference(wide));
  }

  // One line of describe() (explain()'s impl column), said once however often it happens.
  void note(const std::string& s) const { notes_.add(s); }

  const FusedOp f_;
  const std::string name_;
  const std::shared_ptr<ChoiceCache> choice_cache_;  // Options.cache, or null
  const std::shared_ptr<SharedChoices> shared_choices_;  // this partition's, or null
  const std::string computes_;  // f_ without node names: equal for identical layers
  const bool long_lived_;  // the weight is a static input (parameter, buffer) or a constant
  const c10::ScalarType out_dtype_;
  const bool wide_io_;  // an activation or the output is fp32 around a bf16/fp16 weight (widen_chains)

 private:
  static constexpr int kMaxMeasured = 4;
  static constexpr int kVolatile = 3;

  // FXCPP_PLAIN_CLAMPS=0 (read when the kernel is made): the NaN-preserving chain at every call
  // (an A/B of the per-call check: benchmarks/results/plain-clamps/).
  static bool plain_clamps_allowed() {
    const char* v = std::getenv("FXCPP_PLAIN_CLAMPS");
    return !v || std::string(v) != "0";
  }

  // FXCPP_ATEN_WIDEN=1 (read when the kernel is made): the ATen alternative of a node computed
  // in fp32 widens its operands even where ATen is native, as on a host where it emulates the
  // dtype (tests, and the A/B in benchmarks/results/aten-native-alternative/).
  static bool aten_widen_forced() {
    const char* v = std::getenv("FXCPP_ATEN_WIDEN");
    return v && std::string(v) == "1";
  }

  static int forced_choice() {
    const char* v = std::getenv("FXCPP_KERNEL_CHOICE");
    if (!v) return kUndecided;
    const std::string s = v;
    // "gemv" and "mkl" force our own kernel too: the matmul kernel's small-M path or MKL's
    // bf16 GEMM, where it applies; "ours" our own kernel, whichever of them its rules pick.
    return s == "onednn" || s == "gemv" || s == "mkl" || s == "ours" ? kOnednn : s == "aten" ? kAten : kUndecided;
  }

  // An entry that runs ATen keeps no packed copy of the weight.
  void drop_pack(Entry& e) const {
    std::lock_guard<std::mutex> lk(mu_);
    e.packed.reset();
  }

  static bool wide_io(const Node& n) {
    const Value* w = n.args.size() > 1 ? n.args[1].value : nullptr;
    if (!w || !w->meta || (w->meta->dtype != at::kBFloat16 && w->meta->dtype != at::kHalf)) return false;
    bool wide = n.outputs[0]->meta->dtype == at::kFloat;
    for (const Arg& a : n.args)
      if (a.kind == Arg::Kind::Value && a.value->meta && a.value->meta->dtype == at::kFloat) wide = true;
    return wide;
  }

  static std::string why_per_call(const Node& n) {
    const Value* w = n.args.size() > 1 ? n.args[1].value : nullptr;
    if (w && w->producer) return "computed in the graph";
    if (w && w->is_input) return "an input that can change between calls";
    return "not a parameter";
  }

  const std::string per_call_why_;
  const int last_clamp_ = plain_clamps_allowed() ? last_plain_clamp(f_) : -1;
  // Whether every post-op keeps a bound on its input a bound on its output (post_op_bound).
  const bool boundable_ = post_op_bound(f_, static_cast<int>(f_.post_ops.size()), 1.0, [](int) { return 1.0; }) <
                          std::numeric_limits<double>::infinity();
  const int forced_;
  const bool native_bf16_;  // read when the kernel is made (FXCPP_BF16 can force either path)
  const bool aten_widened_;  // FXCPP_ATEN_WIDEN=1
  mutable std::atomic<int> measured_{0}, last_choice_{kUndecided};
  mutable std::atomic<bool> volatile_{false};
  mutable std::atomic<bool> freezing_{false};  // will_freeze(): packs rather than reading per call
  mutable std::atomic<bool> frozen_{false};  // Options.freeze: runs from frozen_packs_ only
  mutable std::vector<std::shared_ptr<const PackedWeights>> frozen_packs_;  // under mu_: one per layout
  mutable std::vector<int64_t> frozen_sizes_;  // the weight's, set before frozen_
  mutable c10::ScalarType frozen_dtype_ = c10::kFloat;
  mutable int repacks_in_a_row_ = 0;  // under mu_
  // The sources' identity, version and memory at the last pack (no reference held to them).
  using Fingerprint = std::tuple<const void*, uint32_t, const void*>;
  static std::vector<Fingerprint> fingerprints(const std::vector<at::Tensor>& ts) {
    std::vector<Fingerprint> f;
    for (const auto& t : ts)
      f.emplace_back(t.defined() ? t.unsafeGetTensorImpl() : nullptr,
                     t.defined() ? version_of(t) : 0,
                     t.defined() ? t.const_data_ptr() : nullptr);
    return f;
  }
  mutable std::vector<Fingerprint> last_built_;  // under mu_
  mutable std::vector<std::pair<PackLayout, std::weak_ptr<const PackedWeights>>> shared_packs_;  // under mu_
  mutable std::once_flag warned_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<Entry>> cache_;
  mutable Notes notes_;
};

}  // namespace fxcpp::onednn
