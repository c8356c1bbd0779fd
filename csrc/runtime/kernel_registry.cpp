#include "runtime/kernel.h"

namespace fxcpp {

#ifdef FXCPP_HAS_ONEDNN
void register_onednn_kernels(KernelRegistry& r);  // runtime/onednn/register.cpp
#endif
std::unique_ptr<Kernel> make_cpu_fused_kernel(const Node& n);  // runtime/cpu/fused_kernel.cpp
void register_attention_kernel(KernelRegistry& r);             // runtime/aten/attention_fp32.cpp

KernelRegistry& kernel_registry() {
  // Specialized kernels (oneDNN, fused CPU, CUDA) register here, once.
  static KernelRegistry registry = [] {
    KernelRegistry r;
    r.add("cpu::fused", make_cpu_fused_kernel);
    register_attention_kernel(r);
#ifdef FXCPP_HAS_ONEDNN
    register_onednn_kernels(r);
#endif
    return r;
  }();
  return registry;
}

std::unique_ptr<Kernel> KernelRegistry::select(const Node& n) const {
  std::string op = n.is_aten() ? n.schema().name() : n.target;
  auto it = by_op_.find(op);
  if (it != by_op_.end())
    for (auto f = it->second.rbegin(); f != it->second.rend(); ++f)
      if (auto k = (*f)(n)) return k;
  if (n.is_aten()) return make_aten_kernel(n);
  if (auto k = make_prim_kernel(n)) return k;
  throw NodeError(n, "no kernel can run this node");
}

}  // namespace fxcpp
