// What both oneDNN kernels (conv, matmul) share: the node's FusedOp, run() with its ATen
// fallback, one cached primitive entry per concrete call signature, and the
// version-checked packing of parameter weights (with BatchNorm folded in).
#pragma once
#include <c10/util/Exception.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/onednn/common.h"

namespace fxcpp::onednn {

// Entry: a kernel's per-signature primitive, with `pd` and `std::shared_ptr<const PackedWeights> packed`.
template <typename Entry>
class FusedKernel : public Kernel {
 public:
  FusedKernel(const Node& n, bool prepack) : f_(*n.fused), name_(n.name), prepack_(prepack) {}
  const char* kind() const override { return "onednn"; }

  void run(Stack& stack) const final {
    // oneDNN cannot run an empty dimension (a K = 0 matmul must still give bias + post-ops of zeros).
    if (stack[0].toTensor().numel() == 0 || stack[1].toTensor().numel() == 0) return finish(stack, reference(stack));
    try {
      run_onednn(stack);
    } catch (const dnnl::error& e) {
      // A primitive oneDNN would not build for this signature: correct but slower, so say it once.
      std::call_once(warned_, [&] {
        TORCH_WARN("fxcpp: node '", name_, "': oneDNN refused the primitive (", e.what(), "); it runs as ATen ops");
      });
      finish(stack, reference(stack));
    }
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

  // The entry for `key`, made by `build()` at the signature's first call (outside the lock:
  // concurrent first calls may both build, one wins).
  template <typename Build>
  std::shared_ptr<Entry> entry(const std::string& key, Build&& build) const {
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = cache_.find(key);
      if (it != cache_.end()) return it->second;
    }
    std::shared_ptr<Entry> e = build();
    ++stats().primitives;
    std::lock_guard<std::mutex> lk(mu_);
    return cache_.emplace(key, std::move(e)).first->second;
  }

  // The entry's packed weight and bias, rebuilt when any source (weight, bias, BN tensors)
  // changed identity, version or data. `user_desc(wt, folded)` describes the (maybe folded)
  // weight as it lies; it is reordered into the layout the primitive chose.
  template <typename UserDesc>
  std::shared_ptr<const PackedWeights> packed_weights(Entry& e, const at::Tensor& w, const at::Tensor& bias,
                                                      const std::vector<at::Tensor>& bn, UserDesc&& user_desc) const {
    std::vector<at::Tensor> sources = {w, bias};
    sources.insert(sources.end(), bn.begin(), bn.end());
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (e.packed && stamps_match(e.packed->stamps, sources)) return e.packed;
    }
    // Built outside the lock; concurrent re-packs may both build, the last one wins.
    auto p = std::make_shared<PackedWeights>();
    p->stamps = stamps_of(sources);
    at::Tensor wt = w, bt = bias;
    // Output channels are dim 0 for both: conv [OC, IC/G, k..] and a Linear's [N, K].
    if (!bn.empty()) std::tie(wt, bt) = fold_batchnorm(w, bias, bn[0], bn[1], bn[2], bn[3], f_.bn_eps, 0);
    p->weight = reorder_to(wt, user_desc(wt, !bn.empty()), e.pd.weights_desc());
    if (bt.defined()) p->bias = bt.contiguous();
    ++stats().packs;
    std::shared_ptr<const PackedWeights> cp = p;
    std::lock_guard<std::mutex> lk(mu_);
    e.packed = cp;
    return cp;
  }

  const FusedOp f_;
  const std::string name_;
  const bool prepack_;  // the weight is a parameter (graph input) or constant: pack it once

 private:
  mutable std::once_flag warned_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<Entry>> cache_;
};

}  // namespace fxcpp::onednn
