// What a cpu_fused node carries: a small program over fp32 registers that one kernel
// evaluates blockwise over the node's iteration domain, in the spirit of numexpr's virtual
// machine, extended with row reductions run in phases.
//
// Domain: the broadcast shape of the node's full-size outputs. `row_dims` trailing dims form
// a row (the dims a reduction runs over); 0 for a pure pointwise group. A group reducing other
// dims (x.sum(0), a softmax over dim 1) runs over its domain permuted so that they come last
// (`perm`): the kernel views its inputs and outputs that way, and returns eager's shapes.
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
#include <c10/core/MemoryFormat.h>
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
  // dst = a rounded to bf16 / fp16 (and widened back): a value the group also stores in that
  // dtype, as its other members read it (eager's next op reads the stored tensor).
  RoundBf16, RoundHalf,
  // Binary: dst = a op b. Max/Min propagate NaN (eager's maximum/minimum); comparisons give 0/1.
  // ExpSub: dst = exp(a - b) (a softmax's numerator, one pass instead of two).
  Add, Sub, Mul, Div, Max, Min, Pow, Eq, Ne, Lt, Le, Gt, Ge, And, Or, ExpSub,
  // Ternary: Where: dst = a != 0 ? b : c. Clamp: dst = min(max(a, b), c) with NaN kept (eager's clamp).
  // MulAdd: dst = a * b + c, one rounding (formed by the builder from a product used once by a sum).
  // SubMul: dst = (a - b) * c (normalizing by a row's statistics).
  // MulMul: dst = (a * b) * c, rounded as the two products were (RMSNorm's x * rstd * weight).
  Where, Clamp, MulAdd, SubMul, MulMul,
  // Row reductions (row programs): dst (a per-row scalar, valid from the next phase) = sum/max/min
  // of a; RSumSq: sum of (a - b)^2; RSumExp: sum of exp(a - b) (the builder folds these prologues
  // in, so nothing is written just to be summed).
  RSum, RMax, RMin, RSumSq, RSumExp,
  // Stores: output `a` = register `b` (full outputs: this block; row outputs: once per row).
  Store, StoreRow,
};
const char* pop_name(POp op);
int pop_arity(POp op);  // register operands read: 0 (Load, Cols, Const), 1, 2 or 3
bool pop_is_reduction(POp op);

struct PInstr {
  POp op = POp::Const;
  int16_t dst = -1, a = -1, b = -1, c = -1;
  float imm = 0.f;
  // Its result is output `out` and nothing else reads it: written straight into the output
  // where its layout allows (fp32, contiguous along the row), and the Store is skipped.
  int16_t out = -1;
};

bool reads_reg(const PInstr& I, int r);   // I reads register r
bool writes_reg(const PInstr& I, int r);  // I writes register r
// Whether code[from...] reads register r before writing it again (false when neither happens).
bool read_before_written(const std::vector<PInstr>& code, size_t from, int r);

struct ProgOutput {
  c10::ScalarType dtype = c10::kFloat;
  bool row = false;      // a per-row value: shaped as the domain with its row dims 1 (keepdim) or dropped
  bool keepdim = true;   // row outputs
  c10::MemoryFormat format = c10::MemoryFormat::Contiguous;  // full outputs: the layout eager gives them
  // Full outputs of a row group: the dim order eager gave at trace time, innermost first, when
  // it was dense, static and not contiguous (a normalization written out op by op over a
  // transposed input follows the input's order; softmax's own kernel writes contiguous). Empty: `format`.
  std::vector<int> order;
};

struct Program {
  int rank = 0;      // the domain's rank
  int row_dims = 0;
  // The domain's dims in the order the program runs them: the kept dims, then the reduced ones,
  // each in their own order (dim i of the program is dim perm[i] of eager's values). Empty: as is.
  std::vector<int> perm;
  std::vector<std::vector<PInstr>> phases;  // one for a pointwise group
  // A row program as one list, nothing recomputed: for rows that fit in a block, where every
  // phase would run back to back on the same block (empty for pointwise programs).
  std::vector<PInstr> single;
  int num_regs = 0;
  std::vector<c10::ScalarType> inputs;      // the dtype of each node arg (all are tensors)
  // Per input: trailing 1-dims to add before broadcasting to the domain (a per-row input
  // without keepdim, [B, T] in a [B, T, C] domain, is [B, T, 1]); 0 for the usual broadcast.
  // With `perm`, a padded input is already in the program's order (the kept dims, in order);
  // the others are broadcast to eager's domain first, then permuted.
  std::vector<int> input_pad;
  // Operands after the node's args: node arg row_first[i] (one with no pad) at its row's first
  // element, broadcast along the row: load index inputs.size() + i. A centered mean is shifted
  // by it in a permuted group (program_builder's correct_centered_means): a per-row value, not a pass.
  std::vector<int> row_first;
  std::vector<ProgOutput> outputs;          // one per node output
  std::vector<std::string> covers;          // the FX nodes the group replaced, in graph order
  std::string str() const;
};

}  // namespace fxcpp
