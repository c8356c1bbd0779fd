// What a cpu_fused node carries: a small program over fp32 registers that one kernel
// evaluates blockwise over the node's iteration domain, in the spirit of numexpr's virtual
// machine, extended with row reductions run in phases.
//
// Domain: the broadcast shape of the node's full-size outputs. `row_dims` trailing dims form
// a row (the dims a reduction runs over); 0 for a pure pointwise group.
// Registers hold, per block of consecutive elements of one row (or of the flat domain), one
// fp32 value per element ("vector"), or one value for the whole block ("scalar": constants,
// loads broadcast along the block, and per-row values such as a reduction's result).
// Phases: phase k accumulates the row reductions phase k+1 reads (a softmax: the max, then
// the sum of exponentials, then the outputs). Each phase's code stands alone: a value used
// in two phases is recomputed from its loads, which for a row of a few thousand elements
// come from cache. The last phase stores the outputs.
//
// bf16/fp16 inputs are widened to fp32 on load and rounded on store; bool and integer
// inputs load as 0/1 and exact integers. Nothing else is rounded in between: where eager
// rounds an intermediate to bf16, a fused group is more accurate, never less.
#pragma once
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fxcpp {

enum class POp : uint8_t {
  // dst = input `a` (arg index) at this block; Cols: dst = the row length (or 1); Const: dst = imm.
  Load, Cols, Const,
  // Unary: dst = f(a). LeakyRelu: imm = negative slope; Elu: imm = alpha.
  Neg, Abs, Exp, Expm1, Log, Log1p, Sqrt, Rsqrt, Recip, Sin, Cos, Tanh, Sigmoid, Erf, Relu,
  GeluErf, GeluTanh, Silu, Hardswish, Hardsigmoid, LeakyRelu, Elu, Floor, Ceil, Round, Trunc,
  Sign, IsNan, Not, Square,
  // Binary: dst = a op b. Max/Min propagate NaN (eager's maximum/minimum); comparisons give 0/1.
  Add, Sub, Mul, Div, Max, Min, Pow, Eq, Ne, Lt, Le, Gt, Ge, And, Or,
  // Ternary: Where: dst = a != 0 ? b : c. Clamp: dst = min(max(a, b), c) with NaN kept (eager's clamp).
  Where, Clamp,
  // Row reductions (row programs): dst (a per-row scalar, valid from the next phase) = sum/max/min of a.
  RSum, RMax, RMin,
  // Stores: output `a` = register `b` (full outputs: this block; row outputs: once per row).
  Store, StoreRow,
};
const char* pop_name(POp op);
int pop_arity(POp op);  // register operands read: 0 (Load, Cols, Const), 1, 2 or 3

struct PInstr {
  POp op = POp::Const;
  int16_t dst = -1, a = -1, b = -1, c = -1;
  float imm = 0.f;
};

struct ProgOutput {
  c10::ScalarType dtype = c10::kFloat;
  bool row = false;  // a per-row value (shape: the domain with its row dims 1, or dropped)
};

struct Program {
  int row_dims = 0;
  std::vector<std::vector<PInstr>> phases;  // one for a pointwise group
  int num_regs = 0;
  std::vector<c10::ScalarType> inputs;      // the dtype of each node arg (all are tensors)
  std::vector<ProgOutput> outputs;          // one per node output
  std::vector<std::string> covers;          // the FX nodes the group replaced, in graph order
  std::string str() const;
};

}  // namespace fxcpp
