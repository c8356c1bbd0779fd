// The GEMV built for DEFAULT (flags and CPU_CAPABILITY set in CMakeLists.txt).
#include "runtime/cpu/gemv_rows.h"

namespace fxcpp::cpu {
void gemv_DEFAULT(const GemvArgs& a) { gemv(a); }
}  // namespace fxcpp::cpu
