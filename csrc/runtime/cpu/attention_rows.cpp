// Picks attention's softmax rows compiled for this host's instruction set (attention_rows.h).
#include "runtime/cpu/attention_rows.h"

#include "runtime/cpu/isa.h"

namespace fxcpp::cpu {

void attention_rows_DEFAULT(const AttentionRowsArgs& a);
void attention_rows_AVX2(const AttentionRowsArgs& a);
void attention_rows_AVX512(const AttentionRowsArgs& a);
void attention_scale_DEFAULT(const AttentionScaleArgs& a);
void attention_scale_AVX2(const AttentionScaleArgs& a);
void attention_scale_AVX512(const AttentionScaleArgs& a);

AttentionRows select_attention_rows() {
  return pick<AttentionRows>(attention_rows_AVX512, attention_rows_AVX2, attention_rows_DEFAULT);
}

AttentionScale select_attention_scale() {
  return pick<AttentionScale>(attention_scale_AVX512, attention_scale_AVX2, attention_scale_DEFAULT);
}

}  // namespace fxcpp::cpu
