// Picks the GEMV compiled for this host's instruction set (gemv_rows.h).
#include "runtime/cpu/gemv.h"

#include <ATen/Version.h>  // at::get_cpu_capability

#include "runtime/cpu/isa.h"

namespace fxcpp::cpu {

void gemv_DEFAULT(const GemvArgs& a);
void gemv_AVX2(const GemvArgs& a);
void gemv_AVX512(const GemvArgs& a);

const std::string& aten_capability() {
  static const std::string c = at::get_cpu_capability();
  return c;
}

Gemv select_gemv() {
  if (aten_capability() == "AVX512") return gemv_AVX512;
  if (aten_capability() == "AVX2") return gemv_AVX2;
  return gemv_DEFAULT;
}

const char* gemv_isa() {
  if (aten_capability() == "AVX512") return "avx512";
  if (aten_capability() == "AVX2") return "avx2";
  return "default";
}

}  // namespace fxcpp::cpu
