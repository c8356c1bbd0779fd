// at::vec's own Vectorized<float>::exp() (Sleef's expf_u10 under AVX2 and AVX-512), built per
// instruction set as the interpreter is and picked the same way (isa.h): the reference the
// tests hold exp_u10 (exp_u10.h) to, bit for bit. No kernel calls it.
#pragma once
#include <cstdint>

namespace fxcpp::cpu {

void vectorized_exp(const float* x, float* y, int64_t n);

// One build's body (interp_<isa>.cc instantiates it under its CPU_CAPABILITY).
namespace detail {
template <typename Vec>
void vectorized_exp_body(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) Vec::loadu(x + i).exp().store(y + i);
  if (i < n) Vec::loadu(x + i, n - i).exp().store(y + i, n - i);
}
}  // namespace detail

}  // namespace fxcpp::cpu
