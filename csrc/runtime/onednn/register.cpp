// Binds the fused node targets to the oneDNN kernels.
#include "runtime/kernel.h"

namespace fxcpp {
namespace onednn {
std::unique_ptr<Kernel> make_matmul_kernel(const Node& n);
std::unique_ptr<Kernel> make_conv_kernel(const Node& n);
std::unique_ptr<Kernel> make_attention_kernel(const Node& n);  // attention_kernel.cpp
}  // namespace onednn

void register_onednn_kernels(KernelRegistry& r) {
  r.add("onednn::matmul", onednn::make_matmul_kernel);
  r.add("onednn::conv", onednn::make_conv_kernel);
  // Tried before attention_fp32.cpp's (registered earlier), which takes the fp16 queries this one leaves.
  r.add("aten::_scaled_dot_product_flash_attention_for_cpu", onednn::make_attention_kernel);
}

}  // namespace fxcpp
