// Attention's softmax rows built for AVX2 (flags and CPU_CAPABILITY set in CMakeLists.txt).
#include "runtime/cpu/attention_rows.h"

namespace fxcpp::cpu {
void attention_rows_AVX2(const AttentionRowsArgs& a) { detail::attention_rows_body<at::vec::Vectorized<float>>(a); }
void attention_scale_AVX2(const AttentionScaleArgs& a) { detail::attention_scale_body<at::vec::Vectorized<float>>(a); }
}  // namespace fxcpp::cpu
