#include "runtime/buffer_pool.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <unordered_map>

namespace fxcpp {

namespace {

constexpr size_t kMinBytes = size_t{1} << 20;  // smaller buffers: malloc already reuses them well
constexpr size_t kRound = size_t{1} << 16;      // sizes rounded up, so near sizes share buffers
// A cached buffer unused this long gives way to one coming back when the budget is full. Without
// it, a process that moved on to other shapes kept the old sizes forever and faulted in every
// output of the new ones at every call (bf16 x - x.mean(0) on [65536, 768]: 61 ms, 19 ms with
// room; results/outer-reductions/README.md). A size reused sooner, as every size of a model
// called at a steady rate is, is never evicted, so a working set larger than the budget keeps
// its hits instead of thrashing.
constexpr std::chrono::seconds kStale{1};

class BufferPool final : public c10::Allocator {
 public:
  BufferPool() {
    const char* mb = std::getenv("FXCPP_BUFFER_POOL_MB");
    budget_ = (mb ? static_cast<size_t>(std::atoll(mb)) : size_t{512}) << 20;
  }

  c10::DataPtr allocate(size_t n) override {
    if (n < kMinBytes || budget_ == 0) return c10::GetCPUAllocator()->allocate(n);
    const size_t want = (n + kRound - 1) / kRound * kRound;
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = free_.lower_bound(want);
      if (it != free_.end() && it->first <= want + want / 4) {
        p = it->second->p;
        cached_ -= it->first;
        size_[p] = it->first;
        lru_.erase(it->second);
        free_.erase(it);
        ++hits_;
      } else {
        ++misses_;
      }
    }
    if (!p) {
      p = std::aligned_alloc(64, want);
      if (!p) throw std::bad_alloc();
      std::lock_guard<std::mutex> lk(mu_);
      size_[p] = want;
    }
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};  // context == data: a simple DataPtr
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }

  static void release(void* p) { instance().give_back(p); }

  static BufferPool& instance() {
    static BufferPool* pool = new BufferPool();  // never destroyed: tensors may outlive statics
    return *pool;
  }

  BufferPoolStats stats() {
    std::lock_guard<std::mutex> lk(mu_);
    return {hits_, misses_, static_cast<int64_t>(cached_)};
  }

 private:
  void give_back(void* p) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = size_.find(p);
    const size_t n = it->second;
    size_.erase(it);
    const auto now = std::chrono::steady_clock::now();
    while (cached_ + n > budget_ && n <= budget_ && !lru_.empty() && now - lru_.front().at >= kStale) evict_oldest();
    if (cached_ + n > budget_) {
      std::free(p);
      return;
    }
    lru_.push_back({p, n, now});
    free_.emplace(n, std::prev(lru_.end()));
    cached_ += n;
  }

  void evict_oldest() {
    const auto oldest = lru_.begin();
    auto [lo, hi] = free_.equal_range(oldest->n);
    for (auto it = lo; it != hi; ++it)
      if (it->second == oldest) {
        free_.erase(it);
        break;
      }
    cached_ -= oldest->n;
    std::free(oldest->p);
    lru_.erase(oldest);
  }

  struct Cached {
    void* p;
    size_t n;
    std::chrono::steady_clock::time_point at;  // when it came back
  };
  std::mutex mu_;
  std::list<Cached> lru_;  // cached buffers, oldest first
  std::multimap<size_t, std::list<Cached>::iterator> free_;  // the same, by size
  std::unordered_map<void*, size_t> size_;  // live and cached pooled buffers
  size_t cached_ = 0, budget_ = 0;
  int64_t hits_ = 0, misses_ = 0;
};

}  // namespace

at::Tensor pooled_empty(at::IntArrayRef sizes, c10::ScalarType dtype, c10::MemoryFormat format) {
  return at::Tensor(
      at::detail::empty_generic(sizes, &BufferPool::instance(), c10::DispatchKeySet(c10::DispatchKey::CPU), dtype, format));
}

at::Tensor pooled_empty_strided(at::IntArrayRef sizes, at::IntArrayRef strides, c10::ScalarType dtype) {
  return at::Tensor(at::detail::empty_strided_generic(sizes, strides, &BufferPool::instance(),
                                                     c10::DispatchKeySet(c10::DispatchKey::CPU), dtype));
}

at::Tensor pooled_converted(const at::Tensor& t, c10::ScalarType dtype) {
  at::Tensor out = t.is_non_overlapping_and_dense()
                       ? pooled_empty_strided(t.sizes(), t.strides(), dtype)
                       : pooled_empty_strided(t.sizes(), at::infer_dense_strides(t.sizes(), t.strides()), dtype);
  out.copy_(t);
  return out;
}

BufferPoolStats buffer_pool_stats() { return BufferPool::instance().stats(); }

}  // namespace fxcpp
