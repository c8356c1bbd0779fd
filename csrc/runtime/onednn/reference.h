// ATen versions of the fused oneDNN nodes (reference.cpp says when they run).
#pragma once
#include "ir/graph.h"
#include "runtime/kernel.h"

namespace fxcpp::onednn {

at::Tensor reference_matmul(const FusedOp& f, const Stack& stack);
at::Tensor reference_conv(const FusedOp& f, const Stack& stack);

}  // namespace fxcpp::onednn
