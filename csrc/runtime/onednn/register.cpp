// Binds the fused node targets to the oneDNN kernels.
#include "runtime/kernel.h"

namespace fxcpp {
namespace onednn {
std::unique_ptr<Kernel> make_matmul_kernel(const Node& n);
std::unique_ptr<Kernel> make_conv_kernel(const Node& n);
}  // namespace onednn

void register_onednn_kernels(KernelRegistry& r) {
  r.add("onednn::matmul", onednn::make_matmul_kernel);
  r.add("onednn::conv", onednn::make_conv_kernel);
}

}  // namespace fxcpp
