// Hands the freed pages of glibc's heap back to the system. glibc keeps the freed pages of a
// fragmented heap resident (only the top of the heap is returned by free): after a plan's first
// call (packing, path measurements, temporaries) that was 100-200 MB of RSS on BERT-base and
// ResNet-50. A no-op without glibc.
#pragma once
#include <cstdlib>  // defines __GLIBC__ (through <features.h>) before it is tested below
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace fxcpp {

inline void release_freed_memory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace fxcpp
