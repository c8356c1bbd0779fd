// The small-M GEMM (batch-1 serving, decoding: M <= 16): y[M, N] = x[M, K] . W[N, K]^T + b,
// with W read row by row as a Linear stores it, in fp32, bf16 or fp16 (widened to fp32 in
// registers: a bf16 weight streams half the bytes of an fp32 one on every host, native bf16
// or not). Written by hand because at M this small the work is streaming W once at memory
// speed, which oneDNN's gemm:jit and brgemm (built for compute-bound tiles) do not do; ATen's
// MKL GEMV does, for fp32 only. Compiled once per instruction set (gemv_{default,avx2,avx512}.cc)
// and picked at run time like the cpu_fused interpreter.
#pragma once
#include <c10/core/ScalarType.h>

#include <cstdint>

namespace fxcpp::cpu {

struct GemvArgs {
  const float* x = nullptr;  // [M, K], row stride ldx, fp32
  int64_t M = 0, K = 0, ldx = 0;
  const void* w = nullptr;  // [N, K], row stride ldw (elements), unit stride along K
  c10::ScalarType wtype = c10::kFloat;
  int64_t N = 0, ldw = 0;
  const float* bias = nullptr;  // [N] fp32, or null
  float* y = nullptr;           // [M, N], row stride ldy, fp32
  int64_t ldy = 0;
};

using Gemv = void (*)(const GemvArgs&);
// The GEMV for the instruction set torch itself uses on this host (ATEN_CPU_CAPABILITY can lower it).
Gemv select_gemv();

}  // namespace fxcpp::cpu
