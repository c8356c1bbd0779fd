#include "runtime/host.h"

#include <cpuid.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "runtime/cpu/bf16_dot_rate.h"

#ifdef FXCPP_HAS_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace fxcpp {

namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

int64_t cache_bytes(int index) {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
  std::string s;
  if (!(f >> s) || s.empty()) return 0;
  int64_t n = std::atoll(s.c_str());
  if (s.back() == 'K') n <<= 10;
  if (s.back() == 'M') n <<= 20;
  return n;
}

HostInfo detect() {
  HostInfo h;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return h;
  const bool osxsave = c & (1u << 27);
  h.fma = c & (1u << 12);
  h.f16c = c & (1u << 29);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool ymm = (xcr0 & 0x6) == 0x6;            // the OS saves XMM and YMM state
  const bool zmm = ymm && (xcr0 & 0xe0) == 0xe0;   // ... and the AVX-512 opmask/ZMM state
  const bool tiles = (xcr0 & 0x60000) == 0x60000;  // ... and the AMX tile state
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    h.avx2 = ymm && (b & (1u << 5));
    const bool f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30), vl = b & (1u << 31);
    h.avx512 = zmm && f && dq && bw && vl;
    h.avx512_fp16 = h.avx512 && (d & (1u << 23));
    h.amx = tiles && (d & (1u << 22)) && (d & (1u << 24));  // AMX-BF16 and AMX-TILE
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) h.avx512_bf16 = h.avx512 && (a & (1u << 5));
  h.f16c = h.f16c && ymm;
  h.fma = h.fma && ymm;
  h.l1d = cache_bytes(0), h.l2 = cache_bytes(2), h.l3 = cache_bytes(3);
#ifdef FXCPP_HAS_ONEDNN
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: h.onednn_isa = "sse41"; break;
    case dnnl::cpu_isa::avx: h.onednn_isa = "avx"; break;
    case dnnl::cpu_isa::avx2: h.onednn_isa = "avx2"; break;
    case dnnl::cpu_isa::avx2_vnni: h.onednn_isa = "avx2_vnni"; break;
    case dnnl::cpu_isa::avx2_vnni_2: h.onednn_isa = "avx2_vnni_2"; break;
    case dnnl::cpu_isa::avx512_core: h.onednn_isa = "avx512_core"; break;
    case dnnl::cpu_isa::avx512_core_vnni: h.onednn_isa = "avx512_core_vnni"; break;
    case dnnl::cpu_isa::avx512_core_bf16: h.onednn_isa = "avx512_core_bf16"; break;
    case dnnl::cpu_isa::avx512_core_fp16: h.onednn_isa = "avx512_core_fp16"; break;
    case dnnl::cpu_isa::avx512_core_amx: h.onednn_isa = "avx512_core_amx"; break;
    case dnnl::cpu_isa::avx512_core_amx_fp16: h.onednn_isa = "avx512_core_amx_fp16"; break;
    default: h.onednn_isa = "other";
  }
#else
  h.onednn_isa = "none";
#endif
  return h;
}

}  // namespace

std::string HostInfo::str() const {
  std::ostringstream os;
  os << (amx ? "AMX" : avx512_bf16 ? "AVX-512-BF16" : avx512 ? "AVX-512" : avx2 ? "AVX2" : "baseline")
     << " (avx2=" << avx2 << " fma=" << fma << " avx512=" << avx512 << " avx512_bf16=" << avx512_bf16
     << " avx512_fp16=" << avx512_fp16 << " amx=" << amx << "; L1d " << (l1d >> 10) << " KiB, L2 " << (l2 >> 10)
     << " KiB, L3 " << (l3 >> 20) << " MiB; oneDNN " << onednn_isa << ")";
  return os.str();
}

const HostInfo& host() {
  static const HostInfo h = detect();
  return h;
}

bool onednn_bf16() {
  // oneDNN 3.2 builds bf16 GEMM/conv kernels from avx512_core_bf16 up (it refuses them on AVX2);
  // ONEDNN_MAX_CPU_ISA lowers what it uses, and so what counts as native here.
  const std::string& isa = host().onednn_isa;
  return isa == "avx512_core_bf16" || isa == "avx512_core_fp16" || isa == "avx512_core_amx" ||
         isa == "avx512_core_amx_fp16";
}

double bf16_dot_rate() {
  static const double rate = cpu::bf16_dot_rate_over_fp32();
  return rate;
}

bool native_bf16() {
  const char* force = std::getenv("FXCPP_BF16");  // read at each kernel's creation: tests switch it
  if (force && std::string(force) == "fp32") return false;
  if (force && std::string(force) == "native") return true;
  if (!onednn_bf16()) return false;
  // AMX's tiles are many times fp32's rate; without them oneDNN's bf16 kernels run on vdpbf16ps,
  // which pays only where it outruns fp32 FMAs (host.h, kMinBf16DotRate).
  return host().amx || bf16_dot_rate() >= kMinBf16DotRate;
}

int64_t last_level_cache_bytes() {
  static const int64_t bytes = [] {
    const char* env = std::getenv("FXCPP_LLC_BYTES");
    const long long forced = env ? std::atoll(env) : 0;
    if (forced > 0) return static_cast<int64_t>(forced);
    const int64_t reported = host().l3 > 0 ? host().l3 : host().l2 > 0 ? host().l2 : int64_t{32} << 20;
    return std::min(reported, kMaxUsableLlcBytes);
  }();
  return bytes;
}

}  // namespace fxcpp
