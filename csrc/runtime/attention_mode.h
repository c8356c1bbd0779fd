// FXCPP_ATTENTION, read where an attention kernel is made (one place, three readers):
//   matmuls  every call the oneDNN matmuls take runs them (onednn/attention_kernel.cpp; tests);
//   native   ATen's kernel in the call's own dtype;
//   fp32     ATen's kernel, bf16/fp16 widened to fp32 (aten/attention_fp32.cpp);
//   unset    each signature's first call measures the matmuls against ATen's kernel.
#pragma once
#include <cstdlib>
#include <string>

namespace fxcpp {

enum class AttentionMode { Measured, Matmuls, Native, Fp32 };

inline AttentionMode attention_mode() {
  const char* v = std::getenv("FXCPP_ATTENTION");
  const std::string s = v ? v : "";
  if (s == "matmuls") return AttentionMode::Matmuls;
  if (s == "native") return AttentionMode::Native;
  if (s == "fp32") return AttentionMode::Fp32;
  return AttentionMode::Measured;
}

}  // namespace fxcpp
