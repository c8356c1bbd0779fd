// `prim` kernels: the Python-level nodes of an ATen graph the core runs itself:
// operator.getitem on list outputs and symbolic-size arithmetic (Python semantics:
// floor division and modulo round toward negative infinity).
#include <cmath>

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

c10::IValue floordiv_(const Stack& s) {
  if (both_int(s)) return floordiv(as_int(s[0]), as_int(s[1]));
  return std::floor(as_double(s[0]) / as_double(s[1]));
}
c10::IValue mod_(const Stack& s) {
  if (both_int(s)) return py_mod(as_int(s[0]), as_int(s[1]));
  double a = as_double(s[0]), b = as_double(s[1]);
  return a - b * std::floor(a / b);
}
c10::IValue truediv(const Stack& s) { return as_double(s[0]) / as_double(s[1]); }
c10::IValue neg(const Stack& s) { return s[0].isDouble() ? c10::IValue(-s[0].toDouble()) : c10::IValue(-as_int(s[0])); }
c10::IValue max_(const Stack& s) { return both_int(s) ? c10::IValue(std::max(as_int(s[0]), as_int(s[1]))) : c10::IValue(std::max(as_double(s[0]), as_double(s[1]))); }
c10::IValue min_(const Stack& s) { return both_int(s) ? c10::IValue(std::min(as_int(s[0]), as_int(s[1]))) : c10::IValue(std::min(as_double(s[0]), as_double(s[1]))); }
c10::IValue not_(const Stack& s) { return !s[0].toBool(); }
c10::IValue sym_float(const Stack& s) { return as_double(s[0]); }
c10::IValue sym_int(const Stack& s) { return s[0].isDouble() ? static_cast<int64_t>(std::trunc(s[0].toDouble())) : as_int(s[0]); }
c10::IValue ceil_(const Stack& s) { return static_cast<int64_t>(std::ceil(as_double(s[0]))); }
c10::IValue floor_(const Stack& s) { return static_cast<int64_t>(std::floor(as_double(s[0]))); }

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
  };
  return table;
}

}  // namespace

std::vector<std::string> prim_names() {
  std::vector<std::string> out;
  for (const auto& [k, v] : prims()) out.push_back(k);
  return out;
}

std::unique_ptr<Kernel> make_prim_kernel(const Node& n) {
  auto it = prims().find(n.target);
  if (it == prims().end()) return nullptr;
  if (n.args.size() != it->second.arity) throw NodeError(n, "expects " + std::to_string(it->second.arity) + " args");
  return std::make_unique<PrimKernel>(it->second.fn, it->second.arity);
}

}  // namespace fxcpp
