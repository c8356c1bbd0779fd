// How fast this core runs bf16 dot products (AVX512-BF16's vdpbf16ps) against fp32 FMAs, in
// FLOP per second, measured once: what decides whether bf16 GEMMs and convolutions run natively
// or computed in fp32 (host.h, native_bf16). Where the instruction delivers twice fp32's rate
// (AMD Zen 4 and Zen 5, by the instruction tables), oneDNN's bf16 kernels took half fp32's
// time; where it issues at a fraction of the FMA's rate (an Intel Xeon VM with AVX512-BF16 but
// AMX hidden: 0.47-0.50), they took 1.4-1.5x fp32's time, and computing in fp32 is the faster
// path (benchmarks/results/bf16-dot-rate/). A probe of the instruction, not of oneDNN: a
// register-only loop takes about 1 ms, needs no primitive, and reads the same every time.
#pragma once

namespace fxcpp::cpu {

// bf16 dot-product FLOP rate over fp32 FMA FLOP rate, best of five interleaved timings of a
// register-only loop (about 1 ms in all); 0 where the CPU has no AVX512-BF16.
double bf16_dot_rate_over_fp32();

}  // namespace fxcpp::cpu
