// The instruction set torch itself dispatches its CPU kernels to on this host
// (at::get_cpu_capability(): "AVX512", "AVX2" or "DEFAULT"; ATEN_CPU_CAPABILITY can lower it).
// Our per-ISA kernels (the cpu_fused interpreter, the GEMV) follow it, so a user who lowers
// torch's ISA lowers ours, and tests can run every build of them on one host.
#pragma once

namespace fxcpp::cpu {

enum class Isa { kDefault, kAvx2, kAvx512 };
Isa isa();               // read once per process
const char* isa_name();  // "avx512", "avx2" or "default"

// The build of a per-ISA kernel for this host.
template <typename F>
F pick(F avx512, F avx2, F portable) {
  switch (isa()) {
    case Isa::kAvx512: return avx512;
    case Isa::kAvx2: return avx2;
    default: return portable;
  }
}

}  // namespace fxcpp::cpu
