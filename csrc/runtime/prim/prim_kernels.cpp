// `prim` kernels: the Python-level nodes of an ATen graph the core runs itself:
// operator.getitem on list outputs and symbolic-size arithmetic (Python semantics:
// floor division and modulo round toward negative infinity).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

#include "runtime/kernel.h"

namespace fxcpp {
namespace {

using Fn = c10::IValue (*)(const Stack&);

class PrimKernel final : public Kernel {
 public:
  PrimKernel(Fn fn, size_t arity) : fn_(fn), arity_(arity) {}
  void run(Stack& stack) const override {
    if (stack.size() != arity_) throw std::runtime_error("expected " + std::to_string(arity_) + " args, got " + std::to_string(stack.size()));
    c10::IValue out = fn_(stack);
    stack.clear();
    stack.push_back(std::move(out));
  }
  const char* kind() const override { return "prim"; }

 private:
  Fn fn_;
  size_t arity_;
};

bool is_int_like(const c10::IValue& v) { return v.isInt() || v.isBool(); }
int64_t as_int(const c10::IValue& v) { return v.isBool() ? v.toBool() : v.toInt(); }
double as_double(const c10::IValue& v) { return v.isDouble() ? v.toDouble() : static_cast<double>(as_int(v)); }
bool both_int(const Stack& s) { return is_int_like(s[0]) && is_int_like(s[1]); }

int64_t floordiv(int64_t a, int64_t b) {
  if (b == 0) throw std::runtime_error("integer division by zero");
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t py_mod(int64_t a, int64_t b) {
  if (b == 0) throw std::runtime_error("integer modulo by zero");
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

#define ARITH(NAME, EXPR)                                                         \
  c10::IValue NAME(const Stack& s) {                                              \
    if (both_int(s)) { int64_t a = as_int(s[0]), b = as_int(s[1]); return EXPR; } \
    double a = as_double(s[0]), b = as_double(s[1]);                              \
    return EXPR;                                                                  \
  }
ARITH(add, a + b)
ARITH(sub, a - b)
ARITH(mul, a * b)
#undef ARITH

#define COMPARE(NAME, OP) \
  c10::IValue NAME(const Stack& s) { return both_int(s) ? as_int(s[0]) OP as_int(s[1]) : as_double(s[0]) OP as_double(s[1]); }
COMPARE(eq, ==)
COMPARE(ne, !=)
COMPARE(lt, <)
COMPARE(le, <=)
COMPARE(gt, >)
COMPARE(ge, >=)
#undef COMPARE

// Python raises ZeroDivisionError for a float divisor of zero too; so do these, never inf or nan.
double nonzero_divisor(const c10::IValue& v) {
  double b = as_double(v);
  if (b == 0) throw std::runtime_error("division by zero");
  return b;
}
// CPython's float divmod (Objects/floatobject.c, _float_div_mod): floor quotient and a remainder
// with the divisor's sign.
std::pair<double, double> py_float_divmod(double a, double b) {
  double mod = std::fmod(a, b), div = (a - mod) / b;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) { mod += b; div -= 1.0; }
  } else {
    mod = std::copysign(0.0, b);
  }
  double floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, a / b);
  }
  return {floordiv, mod};
}
c10::IValue floordiv_(const Stack& s) {
  if (both_int(s)) return floordiv(as_int(s[0]), as_int(s[1]));
  return py_float_divmod(as_double(s[0]), nonzero_divisor(s[1])).first;
}
c10::IValue mod_(const Stack& s) {
  if (both_int(s)) return py_mod(as_int(s[0]), as_int(s[1]));
  return py_float_divmod(as_double(s[0]), nonzero_divisor(s[1])).second;
}
c10::IValue truediv(const Stack& s) { return as_double(s[0]) / nonzero_divisor(s[1]); }
c10::IValue neg(const Stack& s) { return s[0].isDouble() ? c10::IValue(-s[0].toDouble()) : c10::IValue(-as_int(s[0])); }
c10::IValue max_(const Stack& s) { return both_int(s) ? c10::IValue(std::max(as_int(s[0]), as_int(s[1]))) : c10::IValue(std::max(as_double(s[0]), as_double(s[1]))); }
c10::IValue min_(const Stack& s) { return both_int(s) ? c10::IValue(std::min(as_int(s[0]), as_int(s[1]))) : c10::IValue(std::min(as_double(s[0]), as_double(s[1]))); }
c10::IValue not_(const Stack& s) { return !s[0].toBool(); }
c10::IValue sym_float(const Stack& s) { return as_double(s[0]); }
// A float made an int (already rounded): Python raises for inf and nan and has no int64 bound; a
// cast of those would be undefined, so they raise here.
int64_t to_int64(double v) {
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
    throw std::overflow_error("cannot convert " + std::to_string(v) + " to an int64 size");
  return static_cast<int64_t>(v);
}
// sym_int and math.trunc: both truncate toward zero.
c10::IValue sym_int(const Stack& s) { return s[0].isDouble() ? to_int64(std::trunc(s[0].toDouble())) : as_int(s[0]); }
c10::IValue ceil_(const Stack& s) { return s[0].isDouble() ? to_int64(std::ceil(s[0].toDouble())) : as_int(s[0]); }
c10::IValue floor_(const Stack& s) { return s[0].isDouble() ? to_int64(std::floor(s[0].toDouble())) : as_int(s[0]); }

// Python's int ** int is exact for a non-negative exponent and a float otherwise; a size never
// overflows int64, but a wrong size would be worse than an error.
c10::IValue pow_(const Stack& s) {
  if (both_int(s) && as_int(s[1]) >= 0) {
    int64_t base = as_int(s[0]), exp = as_int(s[1]), out = 1;
    for (; exp > 0; exp >>= 1) {
      if (exp & 1 && __builtin_mul_overflow(out, base, &out)) throw std::overflow_error("integer power overflows int64");
      if (exp > 1 && __builtin_mul_overflow(base, base, &base)) throw std::overflow_error("integer power overflows int64");
    }
    return out;
  }
  double a = as_double(s[0]), b = as_double(s[1]);
  if (a == 0 && b < 0 && std::isfinite(b)) throw std::runtime_error("zero to a negative power (ZeroDivisionError in Python)");
  if (a < 0 && std::isfinite(a) && std::isfinite(b) && b != std::trunc(b)) throw std::domain_error("negative base to a fractional power (complex in Python)");
  return std::pow(a, b);
}
c10::IValue abs_(const Stack& s) { return s[0].isDouble() ? c10::IValue(std::fabs(s[0].toDouble())) : c10::IValue(std::abs(as_int(s[0]))); }
c10::IValue pos(const Stack& s) { return s[0].isBool() ? c10::IValue(as_int(s[0])) : s[0]; }
// round(x) with one argument: half to even, as Python and nearbyint's default mode do.
c10::IValue round_(const Stack& s) { return s[0].isDouble() ? to_int64(std::nearbyint(s[0].toDouble())) : as_int(s[0]); }
// and/or/xor: logical on two bools (SymBool), bitwise on ints, as Python's operators.
#define BITWISE(NAME, OP)                                                                                  \
  c10::IValue NAME(const Stack& s) {                                                                     \
    if (s[0].isBool() && s[1].isBool()) return static_cast<bool>(s[0].toBool() OP s[1].toBool());       \
    return as_int(s[0]) OP as_int(s[1]);                                                                 \
  }
BITWISE(and_, &)
BITWISE(or_, |)
BITWISE(xor_, ^)
#undef BITWISE
c10::IValue lshift(const Stack& s) {
  int64_t a = as_int(s[0]), b = as_int(s[1]);
  if (b < 0) throw std::domain_error("negative shift count");
  uint64_t magnitude = a < 0 ? 0 - static_cast<uint64_t>(a) : static_cast<uint64_t>(a);
  if (a != 0 && (b >= 63 || (magnitude >> (63 - b)) != 0)) throw std::overflow_error("left shift overflows int64");
  return static_cast<int64_t>(static_cast<uint64_t>(a) << std::min<int64_t>(b, 63));
}
c10::IValue rshift(const Stack& s) {
  int64_t a = as_int(s[0]), b = as_int(s[1]);
  if (b < 0) throw std::domain_error("negative shift count");
  return a >> std::min<int64_t>(b, 63);  // arithmetic: floors, as Python's >> does
}
c10::IValue sym_ite(const Stack& s) { return (s[0].isBool() ? s[0].toBool() : as_double(s[0]) != 0) ? s[1] : s[2]; }
// torch.sym_sum(list): one node for a sum of many sizes (ints, or floats if any is a float).
c10::IValue sym_sum(const Stack& s) {
  const auto list = s[0].toListRef();
  bool all_int = std::all_of(list.begin(), list.end(), is_int_like);
  if (all_int) {
    int64_t out = 0;
    for (const auto& v : list) out += as_int(v);
    return out;
  }
  double out = 0;
  for (const auto& v : list) out += as_double(v);
  return out;
}

c10::IValue getitem(const Stack& s) {
  int64_t i = s[1].toInt();
  if (s[0].isList()) {
    auto list = s[0].toListRef();
    int64_t n = static_cast<int64_t>(list.size());
    if (i < -n || i >= n) throw std::out_of_range("getitem index " + std::to_string(i) + " out of range");
    return list[i < 0 ? i + n : i];
  }
  if (s[0].isTuple()) return s[0].toTupleRef().elements().at(i);
  throw std::runtime_error("getitem on a value that is not a list or tuple");
}

struct PrimInfo {
  Fn fn;
  size_t arity;
};

const std::unordered_map<std::string, PrimInfo>& prims() {
  static const std::unordered_map<std::string, PrimInfo> table = {
      {"prim::getitem", {getitem, 2}},   {"prim::add", {add, 2}},       {"prim::sub", {sub, 2}},
      {"prim::mul", {mul, 2}},           {"prim::floordiv", {floordiv_, 2}}, {"prim::mod", {mod_, 2}},
      {"prim::truediv", {truediv, 2}},   {"prim::neg", {neg, 1}},       {"prim::eq", {eq, 2}},
      {"prim::ne", {ne, 2}},             {"prim::lt", {lt, 2}},         {"prim::le", {le, 2}},
      {"prim::gt", {gt, 2}},             {"prim::ge", {ge, 2}},         {"prim::sym_max", {max_, 2}},
      {"prim::sym_min", {min_, 2}},      {"prim::sym_not", {not_, 1}},  {"prim::sym_float", {sym_float, 1}},
      {"prim::sym_int", {sym_int, 1}},   {"prim::ceil", {ceil_, 1}},    {"prim::floor", {floor_, 1}},
      {"prim::pow", {pow_, 2}},          {"prim::abs", {abs_, 1}},      {"prim::pos", {pos, 1}},
      {"prim::trunc", {sym_int, 1}},     {"prim::round", {round_, 1}},  {"prim::and", {and_, 2}},
      {"prim::or", {or_, 2}},            {"prim::xor", {xor_, 2}},      {"prim::lshift", {lshift, 2}},
      {"prim::rshift", {rshift, 2}},     {"prim::sym_ite", {sym_ite, 3}}, {"prim::sym_sum", {sym_sum, 1}},
  };
  return table;
}

}  // namespace

std::unordered_map<std::string, size_t> prim_arities() {
  std::unordered_map<std::string, size_t> out;
  for (const auto& [k, v] : prims()) out.emplace(k, v.arity);
  return out;
}

std::unique_ptr<Kernel> make_prim_kernel(const Node& n) {
  auto it = prims().find(n.target);
  if (it == prims().end()) return nullptr;
  if (n.args.size() != it->second.arity) throw NodeError(n, "expects " + std::to_string(it->second.arity) + " args");
  return std::make_unique<PrimKernel>(it->second.fn, it->second.arity);
}

}  // namespace fxcpp
