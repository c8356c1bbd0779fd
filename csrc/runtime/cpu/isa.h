// The instruction set torch itself dispatches its CPU kernels to on this host
// (at::get_cpu_capability(): "AVX512", "AVX2" or "DEFAULT"; ATEN_CPU_CAPABILITY can lower it).
// Our per-ISA kernels (the cpu_fused interpreter, the GEMV) follow it, so a user who lowers
// torch's ISA lowers ours, and tests can run every build of them on one host.
#pragma once
#include <string>

namespace fxcpp::cpu {
const std::string& aten_capability();
}  // namespace fxcpp::cpu
