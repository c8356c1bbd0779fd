// A primitive's call without per-call heap work. Each call of a conv or linear used to query its
// primitive descriptor for the descs it passes (each query clones one: a heap allocation), make a
// dnnl::memory per argument (a few allocations each), gather them in an unordered_map and free it
// all after: on ResNet-20 at batch 1 (bf16, a perf profile of both threads) the convolutions' glue
// outside oneDNN's execute was 16% of the samples, about half of it that churn (then 0.82x the
// time: benchmarks/results/onednn-call-args/). Now the descs are queried once per
// primitive (CallDescs), the memory objects are made at a primitive's first calls and kept
// (ArgMemories: a call takes a set, points each at its tensor and hands it back; calls running at
// once on other threads take other sets), and the call goes through oneDNN's C API with its
// arguments on the stack.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <mutex>
#include <vector>

namespace fxcpp::onednn {

// What a primitive descriptor is asked at every call, asked once.
struct CallDescs {
  dnnl::memory::desc src, weights, bias, dst, scratchpad;
  size_t scratchpad_bytes = 0;
  CallDescs() = default;
  explicit CallDescs(const dnnl::primitive_desc_base& pd);
};

// One call's arguments: (tag, desc, pointer), at most kMax of them. The descs are the caller's
// (an entry's, or a local one), alive until execute returns: held by address, since a
// dnnl::memory::desc made or copied here would cost an allocation or an atomic count each.
class CallArgs {
 public:
  // src, weights, bias, dst, scratchpad and binary post-ops: oneDNN takes 32 post-ops at most.
  static constexpr int kMax = 40;
  struct Arg {
    int tag = 0;
    const dnnl::memory::desc* md = nullptr;
    void* ptr = nullptr;
  };
  void add(int tag, const dnnl::memory::desc& md, const void* ptr);
  int size() const { return n_; }
  const Arg& operator[](int i) const { return a_[i]; }

 private:
  std::array<Arg, kMax> a_;
  int n_ = 0;
};

// The memory objects of one primitive's calls, reused: sets of them, one per call running at once.
class ArgMemories {
 public:
  struct Set {
    std::vector<int> tags;
    std::vector<dnnl::memory::desc> mds;  // what each object was made with
    std::vector<dnnl::memory> mems;
  };
  Set take();
  void give(Set s);

 private:
  std::mutex mu_;
  std::vector<Set> free_;
};

// Runs p with args on this thread's stream and a per-thread scratchpad (primitives are shared
// across threads; oneDNN's library-owned scratchpad is not safe for concurrent runs of one).
void execute(const dnnl::primitive& p, const CallDescs& d, ArgMemories& pool, CallArgs& args);

}  // namespace fxcpp::onednn
