// The cpu_fused interpreter built for AVX2 (flags and CPU_CAPABILITY set in CMakeLists.txt).
#include "runtime/cpu/interp.h"
#include "runtime/cpu/interp_rows.h"
#include "runtime/cpu/vectorized_exp.h"

namespace fxcpp::cpu {
void run_AVX2(const FusedCall& c) { run(c); }
void vectorized_exp_AVX2(const float* x, float* y, int64_t n) { detail::vectorized_exp_body<Vec>(x, y, n); }
}  // namespace fxcpp::cpu
