// Large CPU buffers recycled between calls. A fresh multi-megabyte allocation is a fresh
// mapping, and its first write takes a page fault per 4 KiB page: on this VM a 64 MiB output
// costs 16 ms of faults against 3.7 ms of copying. fxcpp's kernels (cpu_fused, oneDNN) take
// their outputs from this pool: a freed buffer goes back to it, already faulted in, and the
// next allocation of about its size (up to 1/4 larger) reuses it.
//
// Bounded: at most FXCPP_BUFFER_POOL_MB (default 512; 0 turns the pool off) is kept, and only
// buffers of 1 MiB and more. It keeps what was once live, so it never raises the peak; it keeps
// RSS at that peak after a call instead of returning memory to the OS. When the budget is full,
// a buffer unused for a second gives way to one that comes back (a process that moved on to
// other shapes); buffers in use at a steady rate are never evicted. The DataPtr is simple
// (context == data), so a pooled tensor can still carry a copy-on-write guard.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/MemoryFormat.h>

namespace fxcpp {

at::Tensor pooled_empty(at::IntArrayRef sizes, c10::ScalarType dtype,
                        c10::MemoryFormat format = c10::MemoryFormat::Contiguous);
at::Tensor pooled_empty_strided(at::IntArrayRef sizes, at::IntArrayRef strides, c10::ScalarType dtype);
// t's values in dtype, in a pooled buffer laid out as empty_like(t) would be: t's own strides
// where it is dense, else dense in t's dimension order (the widened operands of the oneDNN
// matmul and of attention_fp32.cpp, converted at each call).
at::Tensor pooled_converted(const at::Tensor& t, c10::ScalarType dtype);

struct BufferPoolStats {
  int64_t hits = 0, misses = 0, cached_bytes = 0;
};
BufferPoolStats buffer_pool_stats();

}  // namespace fxcpp
