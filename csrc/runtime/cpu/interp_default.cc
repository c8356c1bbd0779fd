// The cpu_fused interpreter built for DEFAULT (flags and CPU_CAPABILITY set in CMakeLists.txt).
#include "runtime/cpu/interp.h"
#include "runtime/cpu/interp_rows.h"

namespace fxcpp::cpu {
void run_DEFAULT(const FusedCall& c) { run(c); }
}  // namespace fxcpp::cpu
