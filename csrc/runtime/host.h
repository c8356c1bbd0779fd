// What this host's CPU can do, detected once per process, in one place: the instruction sets
// the kernels choose between (the CPU says so and the OS saves their registers), the cache
// sizes blocking decisions use, and what oneDNN itself decided to run. The harness and
// make micro record it beside every result; FXCPP_LOG=debug logs it at import.
#pragma once
#include <cstdint>
#include <string>

namespace fxcpp {

struct HostInfo {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512 = false;       // F + BW + VL + DQ (what ATen's AVX512 kernels need)
  bool avx512_bf16 = false;  // native bf16 dot products (Cooper Lake, Zen 4 and later)
  bool avx512_fp16 = false;
  bool amx = false;          // AMX tiles with bf16 (Sapphire Rapids and later), enabled by the OS
  int64_t l1d = 0, l2 = 0, l3 = 0;  // bytes, per core (L1, L2) and shared (L3); 0 when unknown
  std::string onednn_isa;    // oneDNN's effective ISA ("avx512_core_bf16", "avx2", ...), or "none"
  std::string str() const;
};

const HostInfo& host();

// Whether bf16 GEMMs and convolutions run natively here: oneDNN has bf16 kernels for this ISA
// (onednn_bf16) and they are the faster path, which takes AMX or bf16 dot products at least
// kMinBf16DotRate times fp32's FLOP rate (bf16_dot_rate). Measured 0.47-0.50 on an Intel Xeon
// VM with AVX512-BF16 and AMX hidden, where native bf16 BERT-base and ResNet-50 took 1.4-1.5x
// the time of computing them in fp32 (benchmarks/results/bf16-dot-rate/); 2 by the instruction
// tables on AMD Zen 4 and Zen 5 (one 512-bit vdpbf16ps per 512-bit FMA slot), where native bf16
// models took half their fp32 time (suite-avx512-zen4/, dense-native-bf16-zen5/). The limit
// sits between, with room for timing noise either way. Else they run as fp32 (weights widened
// once, activations on the fly). FXCPP_BF16=fp32 or =native forces either (tests cover both
// paths on any host); read at each call.
bool native_bf16();
bool onednn_bf16();
// bf16 dot-product FLOP rate over fp32 FMA's (runtime/cpu/bf16_dot_rate.h), measured at the
// first call (about 1 ms); 0 without AVX512-BF16.
double bf16_dot_rate();
constexpr double kMinBf16DotRate = 1.2;

// The last-level cache's size in bytes, for blocking and streaming decisions: the L3 (the L2
// where there is none; 32 MiB when the system says neither), at most kMaxUsableLlcBytes.
// FXCPP_LLC_BYTES overrides it, read once; the tests pin it so that the same calls stream on
// every host.
int64_t last_level_cache_bytes();

// An L3 reported larger than this is a multi-die part's total, of which a VM's few cores reach
// a slice: some of this project's hosts report 480 MiB to a 2-core VM, where a triad over
// 3 x 64 MiB already runs at DRAM speed (benchmarks/results/micro-amx/triad_sizes.txt) and
// streaming stores pay from 64 MiB moved per call, not from the 240 MiB that half of 480
// would give (benchmarks/results/streaming-stores/llc_cap/).
constexpr int64_t kMaxUsableLlcBytes = int64_t{128} << 20;

}  // namespace fxcpp
