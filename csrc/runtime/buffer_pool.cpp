#include "runtime/buffer_pool.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

namespace fxcpp {

namespace {

constexpr size_t kMinBytes = size_t{1} << 20;  // smaller buffers: malloc already reuses them well
constexpr size_t kRound = size_t{1} << 16;      // sizes rounded up, so near sizes share buffers

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
        p = it->second;
        cached_ -= it->first;
        size_[p] = it->first;
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
    if (cached_ + n > budget_) {
      std::free(p);
      return;
    }
    free_.emplace(n, p);
    cached_ += n;
  }

  std::mutex mu_;
  std::multimap<size_t, void*> free_;
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

BufferPoolStats buffer_pool_stats() { return BufferPool::instance().stats(); }

}  // namespace fxcpp
