// MKL's bf16 GEMM (cblas_gemm_bf16bf16f32: bf16 A and B, fp32 C), found at run time in the
// MKL that torch's own library carries. Where oneDNN 3.2 has no bf16 matmul (below AVX-512)
// it runs bf16 weights as they lie, converting them while it packs them: no fp32 copy of the
// weight held or written per call (benchmarks/results/mkl-bf16-gemm/). Absent (a torch built
// without MKL: aarch64, some source builds), the matmul kernel keeps its oneDNN path.
#pragma once
#include <ATen/core/Tensor.h>

namespace fxcpp::cpu {

// Whether this process's torch exports MKL's bf16 GEMM.
bool mkl_bf16_gemm_available();

// Whether `t`, a 2-d operand, is one MKL reads as it lies (unit stride along one dimension,
// a leading dimension it accepts, sizes within MKL's 32-bit integers).
bool mkl_gemm_operand(const at::Tensor& t);

// c[M, N] (fp32, contiguous) = a[M, K] . b[K, N] + beta * c; a and b bf16, each read through
// its strides (mkl_gemm_operand must hold for both). Threads: MKL's own (torch sets them).
void mkl_bf16_gemm(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, float beta);

}  // namespace fxcpp::cpu
