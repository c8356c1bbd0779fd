// The cpu_fused interpreter built for AVX512 (flags and CPU_CAPABILITY set in CMakeLists.txt).
#include "runtime/cpu/interp.h"
#include "runtime/cpu/interp_rows.h"

namespace fxcpp::cpu {
void run_AVX512(const FusedCall& c) { run(c); }
}  // namespace fxcpp::cpu
