#include "ir/program.h"

#include <sstream>

namespace fxcpp {

const char* pop_name(POp op) {
  static const char* names[] = {
      "load", "cols", "const", "neg", "abs", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "recip", "sin", "cos",
      "tanh", "sigmoid", "erf", "relu", "gelu_erf", "gelu_tanh", "silu", "hardswish", "hardsigmoid", "leaky_relu",
      "elu", "floor", "ceil", "round", "trunc", "sign", "isnan", "not", "square", "round_bf16",
      "round_half", "add", "sub", "mul", "div", "max",
      "min", "pow", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "expsub", "where", "clamp", "muladd", "submul", "mulmul", "rsum", "rmax", "rmin", "rsumsq", "rsumexp",
      "store", "store_row"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(POp::StoreRow) + 1, "one name per POp");
  return names[static_cast<int>(op)];
}

int pop_arity(POp op) {
  if (op <= POp::Const) return 0;
  if (op <= POp::RoundHalf) return 1;
  if (op <= POp::ExpSub) return 2;
  if (op <= POp::MulMul) return 3;
  if (op <= POp::RMin) return 1;
  if (op <= POp::RSumExp) return 2;
  return 1;  // stores read register b
}

bool pop_is_reduction(POp op) { return op >= POp::RSum && op <= POp::RSumExp; }

bool reads_reg(const PInstr& I, int r) {
  if (I.op == POp::Store || I.op == POp::StoreRow) return I.b == r;
  const int16_t ops[3] = {I.a, I.b, I.c};
  for (int k = 0; k < pop_arity(I.op); ++k)
    if (ops[k] == r) return true;
  return false;
}

bool writes_reg(const PInstr& I, int r) { return I.op != POp::Store && I.op != POp::StoreRow && I.dst == r; }

bool read_before_written(const std::vector<PInstr>& code, size_t from, int r) {
  for (size_t q = from; q < code.size(); ++q) {
    if (reads_reg(code[q], r)) return true;
    if (writes_reg(code[q], r)) return false;
  }
  return false;
}

std::string Program::str() const {
  std::ostringstream os;
  os << "program(regs=" << num_regs << ", row_dims=" << row_dims << ", inputs=" << inputs.size()
     << ", outputs=" << outputs.size();
  if (!perm.empty()) {
    os << ", perm=[";
    for (size_t i = 0; i < perm.size(); ++i) os << (i ? "," : "") << perm[i];
    os << "]";
  }
  if (!row_first.empty()) {
    os << ", row_first=[";
    for (size_t i = 0; i < row_first.size(); ++i) os << (i ? "," : "") << row_first[i];
    os << "]";
  }
  os << ")";
  auto list = [&](const std::vector<PInstr>& code) {
    for (const PInstr& i : code) {
      os << " " << pop_name(i.op);
      if (i.op == POp::Store || i.op == POp::StoreRow) {
        os << " out" << i.a << " r" << i.b << ";";
        continue;
      }
      os << " r" << i.dst;
      if (i.out >= 0) os << "=out" << i.out;
      if (i.op == POp::Load) os << " in" << i.a;
      else if (i.op == POp::Const || i.op == POp::LeakyRelu || i.op == POp::Elu) os << " " << i.imm;
      const int n = pop_arity(i.op);
      if (i.op != POp::Load && n >= 1) os << " r" << i.a;
      if (n >= 2) os << " r" << i.b;
      if (n >= 3) os << " r" << i.c;
      os << ";";
    }
  };
  for (size_t p = 0; p < phases.size(); ++p) {
    os << "\n    phase " << p << ":";
    list(phases[p]);
  }
  if (!single.empty()) {
    os << "\n    single:";
    list(single);
  }
  return os.str();
}

}  // namespace fxcpp
