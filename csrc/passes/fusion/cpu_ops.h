// The ATen ops the CPU fusion (cpu_fusion.cpp) takes, what role each plays in a group, and
// how each becomes program expressions (program_builder.h). One table: adding an op touches
// this file, its interpreter case (if new) and its test.
#pragma once
#include <functional>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "passes/fusion/program_builder.h"

namespace fxcpp::fusion {

struct CpuOp {
  enum class Kind {
    Pointwise,  // output = f(inputs elementwise), broadcasting
    Reduction,  // sum/mean/amax/amin/var/std over any dims: a per-row output
    Norm,       // softmax, log_softmax (any dim), layer_norm (trailing dims): full output (+ per-row ones)
    View,       // a reshape, unsqueeze, squeeze or expand: the same values, another shape
  } kind;
  int row_dims = 0;               // Reduction, Norm: how many dims are reduced
  std::vector<int> dims;          // Reduction, Norm: which ones, ascending (the group's row dims)
  const Value* reduced = nullptr; // Reduction, Norm: the input the rows come from
};

// var, std or var_mean (the overloads the fusion takes): ATen's are slow enough that one alone
// is worth a fused kernel (cpu_fusion.cpp).
bool is_variance(const Node& n);

// An op whose fused kernel alone beats ATen's, as measured on each ISA (exp, sigmoid, SiLU, Mish,
// softplus, tanh, tanh-GELU; erf-GELU in low precision; sin, cos, sqrt in fp32; on AVX-512 also
// log in fp32 and sin, cos, rsqrt in bf16/fp16, not erf-GELU in bf16; a mean in bf16/fp16 on every
// ISA): worth a fused node by itself.
bool faster_fused_alone(const Node& n);

// Whether a tiny change of an input can flip n's output (comparisons, logical ops on floats,
// floor/ceil/trunc/round/sign, division with a rounding mode, threshold_backward, a cast to an
// integer): what feeds it must carry eager's rounding, not fp32's extra bits (cpu_fusion.cpp).
bool steps_on_its_inputs(const Node& n);

// What the fusion can do with n, or nothing (dtypes, devices and arguments included).
std::optional<CpuOp> classify_cpu_op(const Node& n);

// Adds n's computation to b. `arg(v)`: the expression of tensor Value v (a group member's
// result, or a load of an input). Returns one expression per node output (-1 for an output
// the group cannot produce; the pass then refuses to let anything read it).
using ArgExpr = std::function<int(const Value*)>;
std::vector<int> emit_cpu_op(const Node& n, ProgramBuilder& b, const ArgExpr& arg);

}  // namespace fxcpp::fusion
