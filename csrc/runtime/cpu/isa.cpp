#include "runtime/cpu/isa.h"

#include <ATen/Version.h>  // at::get_cpu_capability

#include <string>

namespace fxcpp::cpu {

Isa isa() {
  static const Isa i = [] {
    const std::string c = at::get_cpu_capability();
    return c == "AVX512" ? Isa::kAvx512 : c == "AVX2" ? Isa::kAvx2 : Isa::kDefault;
  }();
  return i;
}

const char* isa_name() {
  switch (isa()) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    default: return "default";
  }
}

}  // namespace fxcpp::cpu
