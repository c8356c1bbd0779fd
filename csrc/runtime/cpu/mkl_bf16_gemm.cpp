#include "runtime/cpu/mkl_bf16_gemm.h"

#include <c10/util/Exception.h>
#include <dlfcn.h>

#include <cstdint>
#include <limits>

namespace fxcpp::cpu {

namespace {

// MKL's CBLAS enums and its LP64 interface (the unsuffixed symbols; the _64 ones take int64).
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
using GemmBf16 = void (*)(int layout, int transa, int transb, int m, int n, int k, float alpha, const void* a,
                          int lda, const void* b, int ldb, float beta, float* c, int ldc);

GemmBf16 lookup() {
  // torch's libtorch_cpu.so carries MKL statically and exports its symbols; it is loaded
  // already (this module links it), so RTLD_NOLOAD finds it without loading anything.
  void* lib = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD);
  void* f = lib ? dlsym(lib, "cblas_gemm_bf16bf16f32") : nullptr;
  if (!f) f = dlsym(RTLD_DEFAULT, "cblas_gemm_bf16bf16f32");
  return reinterpret_cast<GemmBf16>(f);
}

GemmBf16 gemm() {
  static const GemmBf16 f = lookup();
  return f;
}

bool fits_int(int64_t v) { return v >= 0 && v <= std::numeric_limits<int>::max(); }

// (transposed?, leading dimension) of a 2-d [rows, cols] operand as row-major CBLAS sees it.
std::pair<bool, int64_t> layout_of(const at::Tensor& t) {
  const int64_t r = t.size(0), c = t.size(1), s0 = t.stride(0), s1 = t.stride(1);
  if (s1 == 1 || c == 1) {
    const int64_t ld = r == 1 ? std::max<int64_t>(c, 1) : s0;
    if (ld >= std::max<int64_t>(c, 1)) return {false, ld};
  }
  if (s0 == 1 || r == 1) {
    const int64_t ld = c == 1 ? std::max<int64_t>(r, 1) : s1;
    if (ld >= std::max<int64_t>(r, 1)) return {true, ld};
  }
  return {false, -1};
}

}  // namespace

bool mkl_bf16_gemm_available() { return gemm() != nullptr; }

bool mkl_gemm_operand(const at::Tensor& t) {
  if (t.dim() != 2 || !fits_int(t.size(0)) || !fits_int(t.size(1))) return false;
  const int64_t ld = layout_of(t).second;
  return ld > 0 && fits_int(ld);
}

void mkl_bf16_gemm(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, float beta) {
  TORCH_INTERNAL_ASSERT(gemm() && a.scalar_type() == at::kBFloat16 && b.scalar_type() == at::kBFloat16 &&
                        c.scalar_type() == at::kFloat && c.is_contiguous() && mkl_gemm_operand(a) && mkl_gemm_operand(b));
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  TORCH_INTERNAL_ASSERT(b.size(0) == K && c.size(0) == M && c.size(1) == N);
  const auto [ta, lda] = layout_of(a);
  const auto [tb, ldb] = layout_of(b);
  gemm()(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, int(M), int(N), int(K), 1.f, a.const_data_ptr(),
         int(lda), b.const_data_ptr(), int(ldb), beta, c.mutable_data_ptr<float>(), int(std::max<int64_t>(N, 1)));
}

}  // namespace fxcpp::cpu
