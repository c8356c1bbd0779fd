// What a kept result (a packed weight, a cached parameter-derived value) was computed from:
// the memory, geometry and version of each source tensor, so a later call can tell whether
// any source changed since.
//
// A parameter changed in place (version bump, and a write moves it: below), replaced by one
// over other memory or of another shape, or re-pointed (data pointer) is seen. Writes that
// move no version counter (`w.data.mul_()`, writes through a NumPy view taken while this
// guard was on: taking it moved the source) are seen through `guard`, a copy-on-write clone
// of the source's storage: while it lives, any write to the source, through any alias,
// first copies the source to new memory (PyTorch's COW storage), so the data pointer no longer
// matches. The guard shares the bytes: no extra memory until a write. It also keeps those
// bytes allocated, so a tensor at the same data pointer, shape, strides and dtype holds the
// same values, whichever TensorImpl it is. Not seen: writes through a raw alias taken before
// the guard, which change the guarded bytes in place (refresh_all, below). A stamp holds no
// reference of any kind to the source's TensorImpl: torch.utils.swap_tensors (Module.to under
// swap_module_params_on_conversion) refuses a tensor with one, strong or weak. A storage that
// cannot be guarded (shared memory, mmap, numpy-owned) never matches: what was computed from
// it is recomputed at every call.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/SmallVector.h>
#include <c10/util/intrusive_ptr.h>

#include <vector>

namespace fxcpp {

struct TensorStamp {
  uint64_t epoch = 0;  // refresh_all() calls before it was made: a later call makes it stale
  uint32_t version = 0;
  const void* data = nullptr;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  c10::SmallVector<int64_t, 5> sizes, strides;
  int64_t offset = 0;  // into the storage, in elements
  c10::intrusive_ptr<c10::StorageImpl> guard;  // null: unguarded
  static TensorStamp of(const at::Tensor& t);
  bool matches(const at::Tensor& t) const;
  // t moved to new memory with the same bytes: an op that copied it only to read it (same
  // geometry, same version; compared with the guard's copy of the old bytes).
  bool moved_unchanged(const at::Tensor& t) const;
};
// Whether a tensor's writes can all be seen (its storage can carry a copy-on-write guard).
bool guardable(const at::Tensor& t);
// Whether a tensor's storage is copy-on-write now (guarded, or a lazy clone).
bool is_cow(const at::Tensor& t);
// A tensor over t's memory that does not own it (and is not copy-on-write): for an op that
// takes a writable pointer to an input it only reads, which would copy a guarded tensor.
// The caller keeps t alive while it is used.
at::Tensor non_owning_view(const at::Tensor& t);
// Undefined tensors stamp as empty and match only an undefined tensor.
bool stamps_match(const std::vector<TensorStamp>& s, const std::vector<at::Tensor>& ts);
std::vector<TensorStamp> stamps_of(const std::vector<at::Tensor>& ts);
// Stamps that still describe ts once each moved-but-unchanged source is stamped again; false
// when a source really changed (then what was computed from them must be recomputed).
bool restamp(std::vector<TensorStamp>& s, const std::vector<at::Tensor>& ts);
// Every stamp made before this call stops matching (fxcpp.refresh()): what was computed from
// any source is computed again at its next use. For writes no stamp can see: through a raw
// alias of a source's memory (a NumPy array, a DLPack capsule, a pointer held by C code) taken
// while the copy-on-write guard was on it, which writes the guarded bytes in place.
void refresh_all();
// t's version counter; 0 for an inference tensor (made under torch.inference_mode), which has
// none (reading it throws). Its in-place writes are still seen: through the COW guard.
uint32_t version_of(const at::Tensor& t);

}  // namespace fxcpp
