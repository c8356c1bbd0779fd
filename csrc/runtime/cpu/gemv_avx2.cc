// The GEMV built for AVX2 (flags and CPU_CAPABILITY set in CMakeLists.txt).
#include "runtime/cpu/gemv_rows.h"

namespace fxcpp::cpu {
void gemv_AVX2(const GemvArgs& a) { gemv(a); }
}  // namespace fxcpp::cpu
