// The `aten` kernel: a boxed call through the c10 dispatcher. The operator handle
// is resolved at compile time; run() only pushes IValues and calls.
#include <ATen/core/dispatch/Dispatcher.h>

#include <exception>

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

// aten::view, computed as aten::reshape (a copy) where the input it gets cannot be viewed with
// the sizes asked for. The graph chose view from fake-tensor strides, and where PyTorch's fake
// kernel of an op disagrees with the real one the real input may not be viewable: aten.elu_backward
// keeps a permuted gradient's strides, its fake kernel says contiguous (tests/fuzz/README.md, run
// 37, seed 291113; aot_eager raises there, Inductor computes it). The graph is functional, so the
// copy holds the same values; where reshape fails too, view's own error is raised.
class ViewKernel final : public Kernel {
 public:
  explicit ViewKernel(c10::OperatorHandle view)
      : view_(std::move(view)), reshape_(c10::Dispatcher::singleton().findSchemaOrThrow("aten::reshape", "")) {}
  void run(Stack& stack) const override {
    const size_t base = stack.size() - 2;  // view(Tensor self, SymInt[] size)
    c10::IValue self = stack[base], size = stack[base + 1];  // kept for the fallback (two refcounts)
    try {
      view_.callBoxed(&stack);
    } catch (const c10::Error&) {
      const std::exception_ptr view_error = std::current_exception();
      stack.resize(base);
      stack.push_back(std::move(self));
      stack.push_back(std::move(size));
      try {
        reshape_.callBoxed(&stack);
      } catch (const c10::Error&) {
        std::rethrow_exception(view_error);
      }
    }
  }
  const char* kind() const override { return "aten"; }

 private:
  c10::OperatorHandle view_, reshape_;
};

}  // namespace

std::unique_ptr<Kernel> make_aten_kernel(const Node& n) {
  const c10::FunctionSchema& s = n.op->schema();
  if (s.name() == "aten::view" && s.overload_name().empty()) return std::make_unique<ViewKernel>(*n.op);
  return std::make_unique<AtenKernel>(*n.op);
}

}  // namespace fxcpp
