// First-call choices shared by the nodes of one compiled partition. A oneDNN kernel times its
// path against eager's ATen ops at a signature's first call (fused_kernel.h); a transformer's
// twelve identical layers made twelve identical measurements of each GEMM, most of a fresh
// process's first call (ViT-B/16 at batch 8: 86 measured nodes, ~6 s). The first node to
// measure a computation on a call signature records it here, and every node computing the same
// thing on the same signature takes that choice instead of timing again. A choice a node took
// from the choice cache is shared the same way: the siblings an earlier process did not record
// (a cache file written before they existed, or cut short) take it rather than time again.
//
// A key names everything the two timed paths depend on (what the node computes without node
// names, the signature's sizes, strides and dtypes, the primitive's implementation and weight
// handling). A collision could only cost speed: each node still runs its own computation,
// whichever path is taken. One table per partition (Graph::set_shared_choices, made with its
// Executable), so a later compile in the same process measures afresh, as before; the choice
// cache carries choices across processes (choice_cache.h).
#pragma once
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "runtime/choice_cache.h"

namespace fxcpp {

class SharedChoices {
 public:
  struct Made {
    ChoiceCache::Measured measured;
    std::string node;  // the node that timed it, or took it from the choice cache
    bool from_cache = false;  // an earlier process timed it (the choice cache): said in the notes
  };

  std::optional<Made> find(const std::string& key) const {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = made_.find(key);
    if (it == made_.end()) return std::nullopt;
    return it->second;
  }
  // The first record of a key stays (concurrent first calls may both measure).
  void add(const std::string& key, Made m) {
    std::lock_guard<std::mutex> lk(mu_);
    made_.emplace(key, std::move(m));
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, Made> made_;
};

}  // namespace fxcpp
