// The `aten` kernel: a boxed call through the c10 dispatcher. The operator handle
// is resolved at compile time; run() only pushes IValues and calls.
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

}  // namespace

std::unique_ptr<Kernel> make_aten_kernel(const Node& n) { return std::make_unique<AtenKernel>(*n.op); }

}  // namespace fxcpp
