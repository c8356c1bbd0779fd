// ATen versions of the fused oneDNN nodes (reference.cpp says when they run).
#pragma once
#include "ir/graph.h"
#include "runtime/kernel.h"

namespace fxcpp::onednn {

at::Tensor reference_matmul(const FusedOp& f, const Stack& stack);
at::Tensor reference_conv(const FusedOp& f, const Stack& stack);
// The node's post-op chain (not its BatchNorm) applied to y with ATen ops, operands from the stack.
at::Tensor apply_post_ops(const FusedOp& f, at::Tensor y, const Stack& stack);

}  // namespace fxcpp::onednn
