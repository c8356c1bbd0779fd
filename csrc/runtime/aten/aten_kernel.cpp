// The `aten` kernel: a boxed call through the c10 dispatcher. The operator handle
// is resolved at compile time; run() only pushes IValues and calls.
#include <ATen/InferSize.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "runtime/kernel.h"

namespace fxcpp {
namespace {

class AtenKernel final : public Kernel {
 public:
  explicit AtenKernel(c10::OperatorHandle op) : op_(std::move(op)) {}
  void run(Stack& stack) const override { op_.callBoxed(&stack); }
  const char* kind() const override { return "aten"; }

 private:
  c10::OperatorHandle op_;
};

// aten::view and aten::_unsafe_view, computed as aten::reshape (a copy) where the input they get
// cannot be viewed with the sizes asked for. The graph chose view from fake-tensor strides, and
// where PyTorch's fake kernel of an op disagrees with the real one the real input may not be
// viewable: aten.elu_backward keeps a permuted gradient's strides, its fake kernel says
// contiguous (tests/fuzz/README.md, run 37, seed 291113; aot_eager raises there, Inductor
// computes it). aot writes _unsafe_view where a decomposition reshapes a fresh result (matmul's),
// the same check in eager. The graph is functional, so the copy holds the same values.
// Checked before the call, with view's own stride rule, rather than caught after it: under a
// Python dispatch mode (aot runs each grad-mode graph's first call under one) view's error comes
// back from Python, a C++ exception carrying a Python error; catching that and calling reshape
// ended in pybind11's "error_already_set called while Python error indicator not set": that
// error state is not this kernel's to drop.
class ViewKernel final : public Kernel {
 public:
  explicit ViewKernel(c10::OperatorHandle view)
      : view_(std::move(view)), reshape_(c10::Dispatcher::singleton().findSchemaOrThrow("aten::reshape", "")) {}
  void run(Stack& stack) const override {
    const size_t base = stack.size() - 2;  // view / _unsafe_view(Tensor self, SymInt[] size)
    (viewable(stack[base], stack[base + 1]) ? view_ : reshape_).callBoxed(&stack);
  }
  const char* kind() const override { return "aten"; }

 private:
  // False only where view would raise for the strides (bad sizes: view raises its own error).
  static bool viewable(const c10::IValue& self, const c10::IValue& size) {
    if (!self.isTensor() || !size.isIntList()) return true;
    const at::Tensor& t = self.toTensor();
    if (t.layout() != c10::kStrided) return true;
    at::DimVector shape;
    try {
      shape = at::infer_size_dv(size.toDimVector(), t.numel());
    } catch (const c10::Error&) {
      return true;
    }
    return at::detail::computeStride(t.sizes(), t.strides(), shape).has_value();
  }

  c10::OperatorHandle view_, reshape_;
};

}  // namespace

std::unique_ptr<Kernel> make_aten_kernel(const Node& n) {
  const c10::FunctionSchema& s = n.op->schema();
  if ((s.name() == "aten::view" || s.name() == "aten::_unsafe_view") && s.overload_name().empty())
    return std::make_unique<ViewKernel>(*n.op);
  return std::make_unique<AtenKernel>(*n.op);
}

}  // namespace fxcpp
