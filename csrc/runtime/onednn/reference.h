// ATen versions of the fused oneDNN nodes (reference.cpp says when they run).
#pragma once
#include "ir/graph.h"
#include "runtime/kernel.h"

namespace fxcpp::onednn {

at::Tensor reference_matmul(const FusedOp& f, const Stack& stack);
at::Tensor reference_conv(const FusedOp& f, const Stack& stack);
// The node's post-op chain (not its BatchNorm) applied to y with ATen ops, operands from the stack.
at::Tensor apply_post_ops(const FusedOp& f, at::Tensor y, const Stack& stack);
// The same, in place on y where eager's result keeps y's shape and dtype (y: a fresh result the
// caller owns, not yet visible to anything else).
at::Tensor apply_post_ops_in_place(const FusedOp& f, at::Tensor y, const Stack& stack);

// Whether eager's own ATen ops run bf16 (or fp16) GEMMs and convolutions on native kernels here
// (torch's mkldnn::_is_mkldnn_bf16_supported / _fp16_supported: its oneDNN has kernels for the
// dtype), rather than emulating them in a loop at a fifth of fp32's speed (the AVX2 host).
// False for other dtypes. Asked once per process.
bool aten_runs_natively(c10::ScalarType t);

}  // namespace fxcpp::onednn
