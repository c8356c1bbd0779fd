// Picks the GEMV compiled for this host's instruction set (gemv_rows.h).
#include "runtime/cpu/gemv.h"

#include "runtime/cpu/isa.h"

namespace fxcpp::cpu {

void gemv_DEFAULT(const GemvArgs& a);
void gemv_AVX2(const GemvArgs& a);
void gemv_AVX512(const GemvArgs& a);

Gemv select_gemv() { return pick<Gemv>(gemv_AVX512, gemv_AVX2, gemv_DEFAULT); }

}  // namespace fxcpp::cpu
