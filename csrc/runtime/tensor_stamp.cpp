#include "runtime/tensor_stamp.h"

#include <ATen/ops/from_blob.h>
#include <c10/core/impl/COW.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace fxcpp {

namespace {

// Turning a storage copy-on-write rewrites its DataPtr: two threads must never do it at once.
std::mutex& guard_mutex() {
  static std::mutex m;
  return m;
}

std::atomic<uint64_t> g_epoch{0};  // refresh_all() calls so far

c10::intrusive_ptr<c10::StorageImpl> cow_guard(const at::Tensor& t) {
  if (!t.device().is_cpu() || !t.has_storage()) return {};
  std::lock_guard<std::mutex> lk(guard_mutex());
  return c10::impl::cow::lazy_clone_storage(*t.storage().unsafeGetStorageImpl());
}

}  // namespace

bool guardable(const at::Tensor& t) {
  if (!t.device().is_cpu() || !t.has_storage()) return false;
  const c10::StorageImpl& s = *t.storage().unsafeGetStorageImpl();
  return c10::impl::cow::has_simple_data_ptr(s) || c10::impl::cow::is_cow_data_ptr(s.data_ptr());
}

bool is_cow(const at::Tensor& t) {
  return t.defined() && t.has_storage() && c10::impl::cow::is_cow_data_ptr(t.storage().data_ptr());
}

at::Tensor non_owning_view(const at::Tensor& t) {
  return at::from_blob(const_cast<void*>(t.const_data_ptr()), t.sizes(), t.strides(), t.options());
}

uint32_t version_of(const at::Tensor& t) {
  return t.is_inference() ? 0 : t.unsafeGetTensorImpl()->version_counter().current_version();
}

void refresh_all() { g_epoch.fetch_add(1, std::memory_order_acq_rel); }

TensorStamp TensorStamp::of(const at::Tensor& t) {
  TensorStamp s;
  s.epoch = g_epoch.load(std::memory_order_acquire);
  s.guard = cow_guard(t);  // first: reading t below must not be a write
  s.version = version_of(t);
  s.data = t.const_data_ptr();
  s.dtype = t.scalar_type();
  s.sizes.assign(t.sizes().begin(), t.sizes().end());
  s.strides.assign(t.strides().begin(), t.strides().end());
  s.offset = t.storage_offset();
  return s;
}

namespace {
bool same_geometry(const TensorStamp& s, const at::Tensor& t) {
  return s.dtype == t.scalar_type() && t.sizes().equals(at::IntArrayRef(s.sizes)) &&
         t.strides().equals(at::IntArrayRef(s.strides));
}
}  // namespace

bool TensorStamp::matches(const at::Tensor& t) const {
  // The guard keeps the old bytes allocated and unwritten (a write first moves the writer to
  // new memory), so no other memory can be at `data`: the same pointer, shape, strides and
  // dtype read the same values. const_data_ptr: reading never copies.
  return guard && epoch == g_epoch.load(std::memory_order_relaxed) && data == t.const_data_ptr() &&
         version == version_of(t) && same_geometry(*this, t);
}

bool TensorStamp::moved_unchanged(const at::Tensor& t) const {
  // After a refresh the guard's bytes prove nothing: a raw alias may have written them.
  if (!guard || epoch != g_epoch.load(std::memory_order_relaxed) || version != version_of(t) || !t.has_storage() ||
      t.storage_offset() != offset ||
      !same_geometry(*this, t))
    return false;
  const c10::StorageImpl& now = *t.storage().unsafeGetStorageImpl();
  const size_t n = now.nbytes();
  return n == guard->nbytes() && (n == 0 || std::memcmp(now.data_ptr().get(), guard->data_ptr().get(), n) == 0);
}

bool restamp(std::vector<TensorStamp>& s, const std::vector<at::Tensor>& ts) {
  if (s.size() != ts.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!ts[i].defined() ? s[i].data == nullptr : s[i].matches(ts[i])) continue;
    if (!ts[i].defined() || !s[i].moved_unchanged(ts[i])) return false;
    s[i] = TensorStamp::of(ts[i]);
  }
  return true;
}

std::vector<TensorStamp> stamps_of(const std::vector<at::Tensor>& ts) {
  std::vector<TensorStamp> s;
  s.reserve(ts.size());
  for (const auto& t : ts) s.push_back(t.defined() ? TensorStamp::of(t) : TensorStamp{});
  return s;
}

bool stamps_match(const std::vector<TensorStamp>& s, const std::vector<at::Tensor>& ts) {
  if (s.size() != ts.size()) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (ts[i].defined() ? !s[i].matches(ts[i]) : s[i].data != nullptr) return false;
  return true;
}

}  // namespace fxcpp
