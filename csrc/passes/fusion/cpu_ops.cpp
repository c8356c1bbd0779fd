// The CPU fusion's op table. Each entry follows eager's own formula where results could
// differ: clamp is max-then-min with NaN kept, pow by 2 is x*x, division by a rounding mode
// only "trunc" (eager's floor division corrects a/b's rounding; refused), softmax subtracts
// the row max. Variance (eager's Welford) is two-pass, mean first, the mean corrected by the
// centered values' sum (program_builder.cpp): a row of equal values gives Welford's exact 0.
#include "passes/fusion/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>

#include "passes/fusion/fusion_util.h"
#include "runtime/cpu/isa.h"

namespace fxcpp::fusion {

namespace {

using Kind = CpuOp::Kind;
const float kInf = std::numeric_limits<float>::infinity();

bool float_dtype(c10::ScalarType t) { return t == c10::kFloat || t == c10::kBFloat16 || t == c10::kHalf; }
bool int_dtype(c10::ScalarType t) {
  return t == c10::kByte || t == c10::kChar || t == c10::kShort || t == c10::kInt || t == c10::kLong;
}

// A CPU tensor whose meta we know.
const TensorMeta* cpu_meta(const Value* v) {
  if (!v || v->kind != ValueKind::Tensor || !v->meta || !v->meta->device.is_cpu()) return nullptr;
  return &*v->meta;
}

// The dims `dims` name, normalized, ascending and distinct; every dim of a rank-r tensor when
// empty (sum.default, dim=[] of a reduction); nothing when one is out of range or repeated.
std::optional<std::vector<int>> reduced_dims(std::vector<int64_t> dims, int64_t r) {
  std::vector<int> out;
  if (dims.empty())
    for (int d = 0; d < r; ++d) out.push_back(d);
  for (int64_t d : dims) {
    d = d < 0 ? d + r : d;
    if (d < 0 || d >= r) return std::nullopt;
    out.push_back(static_cast<int>(d));
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) return std::nullopt;
  return out;
}

struct Entry {
  Kind kind;
  bool bool_out = false;  // its output is bool (comparisons, logical ops)
  bool int_in = false;    // integer inputs allowed (a cast to float: eager converts the same way)
};

const std::unordered_map<std::string, Entry>& table() {
  static const std::unordered_map<std::string, Entry> t = [] {
    std::unordered_map<std::string, Entry> m;
    for (const char* s : {"aten::add.Tensor", "aten::add.Scalar", "aten::sub.Tensor", "aten::sub.Scalar",
                          "aten::rsub.Tensor", "aten::rsub.Scalar", "aten::mul.Tensor", "aten::mul.Scalar",
                          "aten::div.Tensor", "aten::div.Scalar", "aten::div.Tensor_mode", "aten::div.Scalar_mode",
                          "aten::neg", "aten::abs", "aten::exp", "aten::expm1", "aten::log", "aten::log1p", "aten::sqrt",
                          "aten::rsqrt", "aten::reciprocal", "aten::sin", "aten::cos", "aten::tanh", "aten::sigmoid",
                          "aten::erf", "aten::relu", "aten::silu", "aten::floor", "aten::ceil", "aten::trunc",
                          "aten::round", "aten::sign", "aten::square", "aten::gelu", "aten::leaky_relu", "aten::elu",
                          "aten::hardtanh", "aten::hardswish", "aten::hardsigmoid", "aten::clamp", "aten::clamp_min",
                          "aten::clamp_max", "aten::pow.Tensor_Scalar", "aten::pow.Tensor_Tensor", "aten::maximum",
                          "aten::minimum", "aten::where.self", "aten::masked_fill.Scalar", "aten::clone",
                          "aten::addcmul", "aten::addcdiv", "aten::softplus", "aten::mish", "aten::lerp.Scalar",
                          // Activations' backward (training graphs): a bias gradient's sum over the
                          // batch then fuses with the pointwise op before it.
                          "aten::threshold_backward", "aten::tanh_backward", "aten::sigmoid_backward",
                          "aten::gelu_backward", "aten::silu_backward"})
      m[s] = {Kind::Pointwise};
    for (const char* s : {"aten::eq.Tensor", "aten::eq.Scalar", "aten::ne.Tensor", "aten::ne.Scalar", "aten::lt.Tensor",
                          "aten::lt.Scalar", "aten::le.Tensor", "aten::le.Scalar", "aten::gt.Tensor", "aten::gt.Scalar",
                          "aten::ge.Tensor", "aten::ge.Scalar", "aten::isnan", "aten::logical_not", "aten::logical_and",
                          "aten::logical_or", "aten::bitwise_not", "aten::bitwise_and.Tensor", "aten::bitwise_or.Tensor"})
      m[s] = {Kind::Pointwise, true};
    for (const char* s : {"aten::_to_copy", "prims::convert_element_type"}) m[s] = {Kind::Pointwise, false, true};
    for (const char* s : {"aten::sum.dim_IntList", "aten::sum", "aten::mean.dim", "aten::mean", "aten::amax", "aten::amin",
                          "aten::var.correction", "aten::std.correction", "aten::var_mean.correction"})
      m[s] = {Kind::Reduction};
    for (const char* s : {"aten::_softmax", "aten::_log_softmax", "aten::native_layer_norm"}) m[s] = {Kind::Norm};
    for (const char* s : {"aten::view", "aten::_unsafe_view", "aten::reshape", "aten::unsqueeze", "aten::squeeze.dim",
                          "aten::squeeze.dims", "aten::expand"})
      m[s] = {Kind::View};
    return m;
  }();
  return t;
}

std::string key_of(const Node& n) {
  const auto& s = n.schema();
  return s.overload_name().empty() ? s.name() : s.name() + "." + s.overload_name();
}

bool is_variance_key(const std::string& k) {
  return k == "aten::var.correction" || k == "aten::std.correction" || k == "aten::var_mean.correction";
}

bool const_string(const Arg& a, std::string& out) {
  if (a.kind != Arg::Kind::Const || !a.constant.isString()) return false;
  out = a.constant.toStringRef();
  return true;
}

}  // namespace

bool is_variance(const Node& n) { return is_variance_key(key_of(n)); }

// Measured one op at a time, plan against plan, on each host class: the fused kernel against
// ATen's op alone, 4K to 4M elements, fp32, bf16 and fp16. The rule follows the ISA torch
// dispatches to (isa.h), which both ATen's kernels and ours are built for.
//
// AVX2 (benchmarks/results/lone-ops/, AMD Zen 3; the fused side computed op(x) * 2): 0.55-0.93x
// ATen's time at every size for exp, sigmoid, SiLU, Mish, softplus and tanh-GELU (ours inline the
// exp and run two vectors in lockstep; ATen's call Sleef out of line, or widen bf16/fp16 around
// it), erf-GELU in bf16/fp16, and sin, cos and sqrt in fp32 only (in bf16/fp16 those three took
// 0.95-1.98x). tanh too since its pairs run inline (inline-pair-lambdas/): 0.42-0.95x. Left on
// ATen: log, log1p, expm1, erf, rsqrt, reciprocal, hardswish, elu, relu, abs (0.89-3.5x, most
// above 1) and fp32 erf-GELU (1.12-1.17x above 1M elements: ATen's own polynomial).
//
// AVX-512 (benchmarks/results/lone-ops-avx512/, AMD Zen 5 with AVX-512-BF16): the same ops win
// (0.19-0.93x), except erf-GELU in bf16: 1.63x ATen's time from 1.6M elements, whose bf16 GELU
// there takes 0.6x its own fp32 GELU's time; it stays on ATen (fp16's wins, 0.71-0.81x). Won there
// besides, at every size: fp32 log (0.46-0.59x), sin and cos in bf16/fp16 (0.53-0.77x), rsqrt in
// bf16/fp16 (0.74-0.90x).
bool faster_fused_alone(const Node& n) {
  if (!n.is_aten() || n.outputs.empty() || !n.outputs[0]->meta) return false;
  const std::string k = key_of(n);
  const bool fp32 = n.outputs[0]->meta->dtype == c10::kFloat;
  const bool bf16 = n.outputs[0]->meta->dtype == c10::kBFloat16;
  const bool avx512 = cpu::isa() == cpu::Isa::kAvx512;
  if (k == "aten::exp" || k == "aten::sigmoid" || k == "aten::silu" || k == "aten::mish" || k == "aten::softplus" ||
      k == "aten::tanh")
    return true;
  if (k == "aten::sin" || k == "aten::cos") return fp32 || avx512;
  if (k == "aten::sqrt") return fp32;
  if (k == "aten::log") return fp32 && avx512;
  if (k == "aten::rsqrt") return !fp32 && avx512;
  // A mean in bf16/fp16, on every ISA: ATen's sums in fp32 through a full fp32 copy of its input
  // (the profiler shows aten::sum -> _to_copy of all of it), 1.0-25x the fused kernel's time at
  // every shape and layout measured, most 1.6-4.5x (benchmarks/results/lone-mean/); fp32 means
  // stay (ATen's wins on channels-last pools and short outer rows).
  if (k == "aten::mean.dim" || k == "aten::mean") return bf16 || n.outputs[0]->meta->dtype == c10::kHalf;
  std::string approximate;
  if (k != "aten::gelu" || !const_string(n.args[1], approximate)) return false;
  return approximate == "tanh" || (!fp32 && !(bf16 && avx512));
}

bool steps_on_its_inputs(const Node& n) {
  if (!n.is_aten() || n.outputs.empty()) return false;
  const std::string k = key_of(n);
  auto it = table().find(k);
  if (it == table().end()) return false;
  if (it->second.bool_out) return true;
  if (k == "aten::_to_copy" || k == "prims::convert_element_type") {
    const Value* v = n.outputs[0];
    return v->meta && (int_dtype(v->meta->dtype) || v->meta->dtype == c10::kBool);
  }
  return k == "aten::floor" || k == "aten::ceil" || k == "aten::trunc" || k == "aten::round" || k == "aten::sign" ||
         k == "aten::div.Tensor_mode" || k == "aten::div.Scalar_mode" || k == "aten::threshold_backward";
}

std::optional<CpuOp> classify_cpu_op(const Node& n) {
  if (!n.is_aten() || n.outputs.empty()) return std::nullopt;
  auto it = table().find(key_of(n));
  if (it == table().end()) return std::nullopt;
  const Entry& e = it->second;
  // Tensor args: CPU, known metas, dtypes the interpreter loads exactly.
  bool has_int = false;
  for (const Arg& a : n.args) {
    if (a.kind == Arg::Kind::List) {
      bool tensor = false;
      for_each_value(a, [&](Value* v) { tensor |= v->kind == ValueKind::Tensor; });
      if (tensor) return std::nullopt;
      continue;
    }
    if (a.kind != Arg::Kind::Value) {
      if (a.constant.isTensor()) return std::nullopt;  // a tensor constant: leave it to ATen
      continue;
    }
    if (a.value->kind != ValueKind::Tensor) return std::nullopt;  // a symbolic scalar
    const TensorMeta* m = cpu_meta(a.value);
    if (!m) return std::nullopt;
    if (int_dtype(m->dtype)) has_int = true;
    else if (!float_dtype(m->dtype) && m->dtype != c10::kBool) return std::nullopt;
  }
  if (has_int && !e.int_in) return std::nullopt;
  // Outputs: floats, or bool for boolean ops (the rest of a multi-output op may be unused).
  for (const Value* v : n.outputs) {
    const TensorMeta* m = cpu_meta(v);
    if (!m) return std::nullopt;
    if (!(float_dtype(m->dtype) || (m->dtype == c10::kBool && (e.bool_out || e.int_in)))) return std::nullopt;
  }
  const std::string k = key_of(n);
  CpuOp op{e.kind};
  double a = 0;
  std::string s;
  if (k == "aten::div.Tensor_mode" || k == "aten::div.Scalar_mode") {
    if (!const_string(n.args[2], s) || s != "trunc") return std::nullopt;  // None is div.Tensor; floor differs
  }
  if (k == "aten::gelu" && (!const_string(n.args[1], s) || (s != "none" && s != "tanh"))) return std::nullopt;
  if (k == "aten::gelu_backward" && (!const_string(n.args[2], s) || (s != "none" && s != "tanh"))) return std::nullopt;
  if (k == "aten::threshold_backward" && !const_number(n.args[2], a)) return std::nullopt;
  if (k == "aten::elu") {
    double scale, in_scale;
    if (!const_number(n.args[1], a) || !const_number(n.args[2], scale) || !const_number(n.args[3], in_scale) ||
        scale != 1 || in_scale != 1)
      return std::nullopt;
  }
  if (k == "aten::round" && n.args.size() > 1) return std::nullopt;  // round(decimals=)
  // A copy into a stated layout (aot's clone(memory_format=contiguous_format) before a view
  // of a strided value) must give that layout, which a pointwise group's output, laid out as
  // its operands are, would not: it stays an ATen copy. Preserving copies fuse.
  auto preserves_format = [&](size_t i) {
    if (n.args.size() <= i || n.args[i].is_none()) return true;
    const Arg& m = n.args[i];
    return m.kind == Arg::Kind::Const && m.constant.isInt() &&
           m.constant.toInt() == static_cast<int64_t>(c10::MemoryFormat::Preserve);
  };
  if (k == "aten::clone" && !preserves_format(1)) return std::nullopt;
  if (k == "aten::_to_copy" && !preserves_format(6)) return std::nullopt;
  if (k == "aten::_to_copy") {
    // dtype, layout, device, pin_memory, non_blocking, memory_format: only a dtype change on the CPU.
    if (n.args[2].kind == Arg::Kind::Const && !n.args[2].is_none() && !n.args[2].constant.isInt()) return std::nullopt;
    if (!n.args[3].is_none() && !(n.args[3].kind == Arg::Kind::Const && n.args[3].constant.isDevice() &&
                                  n.args[3].constant.toDevice().is_cpu()))
      return std::nullopt;
  }
  if ((k == "aten::_to_copy" || k == "prims::convert_element_type") && !float_dtype(n.outputs[0]->meta->dtype) &&
      n.outputs[0]->meta->dtype != c10::kBool)
    return std::nullopt;
  if (k == "aten::bitwise_not" || k == "aten::bitwise_and.Tensor" || k == "aten::bitwise_or.Tensor") {
    for (const Arg& x : n.args)
      if (x.kind == Arg::Kind::Value && x.value->meta->dtype != c10::kBool) return std::nullopt;
  }
  if (k == "aten::softplus" || k == "aten::lerp.Scalar" || k == "aten::addcmul" || k == "aten::addcdiv") {
    for (size_t i = 1; i < n.args.size(); ++i)
      if (n.args[i].kind == Arg::Kind::Const && !n.args[i].is_none() && !const_number(n.args[i], a)) return std::nullopt;
  }
  if (op.kind == Kind::Reduction || op.kind == Kind::Norm) {
    op.reduced = n.args[0].kind == Arg::Kind::Value ? n.args[0].value : nullptr;
    const TensorMeta* m = cpu_meta(op.reduced);
    if (!m || m->dim() == 0) return std::nullopt;
    const int64_t r = m->dim();
    std::vector<int64_t> dims;
    if (k == "aten::_softmax" || k == "aten::_log_softmax") {
      if (!const_number(n.args[1], a)) return std::nullopt;
      dims = {static_cast<int64_t>(a)};
    } else if (k == "aten::native_layer_norm") {
      std::vector<int64_t> shape;
      if (!const_int_list(n.args[1], shape) || shape.empty()) return std::nullopt;
      for (size_t i = 0; i < shape.size(); ++i) dims.push_back(r - static_cast<int64_t>(shape.size() - i));
    } else if (k == "aten::sum" || k == "aten::mean") {
      dims = {};  // every dim
    } else if (!n.args[1].is_none() && !const_int_list(n.args[1], dims)) {
      return std::nullopt;
    }
    // Any dims: cpu_fusion runs the group over a domain permuted so that they come last.
    auto reduced = reduced_dims(dims, r);
    if (!reduced || reduced->empty()) return std::nullopt;
    op.dims = *reduced;
    op.row_dims = static_cast<int>(op.dims.size());
    if (is_variance_key(k) && !n.args[2].is_none() && !const_number(n.args[2], a)) return std::nullopt;
  }
  return op;
}

std::vector<int> emit_cpu_op(const Node& n, ProgramBuilder& b, const ArgExpr& arg) {
  const std::string k = key_of(n);
  auto x = [&](size_t i) {  // a tensor arg's expression, or a number arg as a constant
    const Arg& a = n.args.at(i);
    if (a.kind == Arg::Kind::Value) return arg(a.value);
    double v = 0;
    if (!const_number(a, v)) throw std::logic_error("fxcpp: " + k + ": argument " + std::to_string(i) + " is not a number");
    return b.konst(static_cast<float>(v));
  };
  auto num = [&](size_t i, double dflt) {
    double v = dflt;
    if (i < n.args.size() && !n.args[i].is_none()) const_number(n.args[i], v);
    return v;
  };
  auto k1 = [&](double v) { return b.konst(static_cast<float>(v)); };
  using P = POp;
  auto un = [&](P op) { return std::vector<int>{b.op(op, x(0))}; };
  auto bin = [&](P op) { return std::vector<int>{b.op(op, x(0), x(1))}; };
  auto scaled = [&](int e, double alpha) { return alpha == 1 ? e : b.op(P::Mul, e, k1(alpha)); };

  static const std::unordered_map<std::string, P> unary = {
      {"aten::neg", P::Neg},         {"aten::abs", P::Abs},         {"aten::exp", P::Exp},
      {"aten::expm1", P::Expm1},     {"aten::log", P::Log},         {"aten::log1p", P::Log1p},
      {"aten::sqrt", P::Sqrt},       {"aten::rsqrt", P::Rsqrt},     {"aten::reciprocal", P::Recip},
      {"aten::sin", P::Sin},         {"aten::cos", P::Cos},         {"aten::tanh", P::Tanh},
      {"aten::sigmoid", P::Sigmoid}, {"aten::erf", P::Erf},         {"aten::relu", P::Relu},
      {"aten::silu", P::Silu},       {"aten::floor", P::Floor},     {"aten::ceil", P::Ceil},
      {"aten::trunc", P::Trunc},     {"aten::round", P::Round},     {"aten::sign", P::Sign},
      {"aten::square", P::Square},   {"aten::hardswish", P::Hardswish}, {"aten::hardsigmoid", P::Hardsigmoid},
      {"aten::isnan", P::IsNan},     {"aten::logical_not", P::Not}, {"aten::bitwise_not", P::Not}};
  if (auto it = unary.find(k); it != unary.end()) return un(it->second);
  static const std::unordered_map<std::string, P> binary = {
      {"aten::mul.Tensor", P::Mul},   {"aten::mul.Scalar", P::Mul}, {"aten::div.Tensor", P::Div},
      {"aten::div.Scalar", P::Div},   {"aten::maximum", P::Max},    {"aten::minimum", P::Min},
      {"aten::pow.Tensor_Tensor", P::Pow}, {"aten::eq.Tensor", P::Eq}, {"aten::eq.Scalar", P::Eq},
      {"aten::ne.Tensor", P::Ne},     {"aten::ne.Scalar", P::Ne},   {"aten::lt.Tensor", P::Lt},
      {"aten::lt.Scalar", P::Lt},     {"aten::le.Tensor", P::Le},   {"aten::le.Scalar", P::Le},
      {"aten::gt.Tensor", P::Gt},     {"aten::gt.Scalar", P::Gt},   {"aten::ge.Tensor", P::Ge},
      {"aten::ge.Scalar", P::Ge},     {"aten::logical_and", P::And}, {"aten::logical_or", P::Or},
      {"aten::bitwise_and.Tensor", P::And}, {"aten::bitwise_or.Tensor", P::Or}};
  if (auto it = binary.find(k); it != binary.end()) return bin(it->second);

  if (k == "aten::add.Tensor" || k == "aten::add.Scalar") return {b.op(P::Add, x(0), scaled(x(1), num(2, 1)))};
  if (k == "aten::sub.Tensor" || k == "aten::sub.Scalar") return {b.op(P::Sub, x(0), scaled(x(1), num(2, 1)))};
  if (k == "aten::rsub.Tensor" || k == "aten::rsub.Scalar") return {b.op(P::Sub, x(1), scaled(x(0), num(2, 1)))};
  if (k == "aten::div.Tensor_mode" || k == "aten::div.Scalar_mode") return {b.op(P::Trunc, b.op(P::Div, x(0), x(1)))};
  if (k == "aten::gelu") {
    return {b.op(n.args[1].constant.toStringRef() == "tanh" ? P::GeluTanh : P::GeluErf, x(0))};
  }
  if (k == "aten::leaky_relu") return {b.op(P::LeakyRelu, x(0), -1, -1, static_cast<float>(num(1, 0.01)))};
  if (k == "aten::elu") return {b.op(P::Elu, x(0), -1, -1, static_cast<float>(num(1, 1)))};
  if (k == "aten::hardtanh") return {b.op(P::Clamp, x(0), k1(num(1, -1)), k1(num(2, 1)))};
  if (k == "aten::clamp") return {b.op(P::Clamp, x(0), k1(num(1, -kInf)), k1(num(2, kInf)))};
  if (k == "aten::clamp_min") return {b.op(P::Clamp, x(0), k1(num(1, -kInf)), k1(kInf))};
  if (k == "aten::clamp_max") return {b.op(P::Clamp, x(0), k1(-kInf), k1(num(1, kInf)))};
  if (k == "aten::pow.Tensor_Scalar") {
    const double e = num(1, 1);
    const int v = x(0);
    if (e == 1) return {v};
    if (e == 2) return {b.op(P::Mul, v, v)};
    if (e == 3) return {b.op(P::Mul, b.op(P::Mul, v, v), v)};
    if (e == 0.5) return {b.op(P::Sqrt, v)};
    if (e == -0.5) return {b.op(P::Rsqrt, v)};
    if (e == -1) return {b.op(P::Recip, v)};
    return {b.op(P::Pow, v, k1(e))};
  }
  if (k == "aten::where.self") return {b.op(P::Where, x(0), x(1), x(2))};
  if (k == "aten::masked_fill.Scalar") return {b.op(P::Where, x(1), k1(num(2, 0)), x(0))};
  if (k == "aten::clone") return {x(0)};
  if (k == "aten::_to_copy" || k == "prims::convert_element_type") {
    // Values stay fp32 in registers; the store rounds. A cast to bool is `!= 0`.
    if (n.outputs[0]->meta->dtype == c10::kBool && n.args[0].value->meta->dtype != c10::kBool)
      return {b.op(P::Ne, x(0), k1(0))};
    return {x(0)};
  }
  // Activations' backward, as ATen's kernels (and torch/_decomp/decompositions.py) write them.
  if (k == "aten::threshold_backward") return {b.op(P::Where, b.op(P::Le, x(1), x(2)), k1(0), x(0))};
  if (k == "aten::tanh_backward") return {b.op(P::Mul, x(0), b.op(P::Sub, k1(1), b.op(P::Mul, x(1), x(1))))};
  if (k == "aten::sigmoid_backward") return {b.op(P::Mul, x(0), b.op(P::Mul, x(1), b.op(P::Sub, k1(1), x(1))))};
  if (k == "aten::silu_backward") {  // g * s * (1 + x * (1 - s)), s = sigmoid(x)
    const int v = x(1), sg = b.op(P::Sigmoid, v);
    return {b.op(P::Mul, b.op(P::Mul, x(0), sg), b.op(P::Add, k1(1), b.op(P::Mul, v, b.op(P::Sub, k1(1), sg))))};
  }
  if (k == "aten::gelu_backward") {
    const int g = x(0), v = x(1);
    if (n.args[2].constant.toStringRef() == "tanh") {
      const double beta = M_SQRT2 * M_2_SQRTPI * 0.5, kappa = 0.044715;
      const int sq = b.op(P::Mul, v, v);
      const int inner = b.op(P::Mul, k1(beta), b.op(P::Add, v, b.op(P::Mul, k1(kappa), b.op(P::Mul, sq, v))));
      const int t = b.op(P::Tanh, inner);
      const int left = b.op(P::Mul, k1(0.5), v), right = b.op(P::Add, k1(1), t);
      const int dleft = b.op(P::Mul, k1(0.5), right);
      const int dtanh = b.op(P::Sub, k1(1), b.op(P::Mul, t, t));
      const int dinner = b.op(P::Mul, k1(beta), b.op(P::Add, k1(1), b.op(P::Mul, k1(3 * kappa), sq)));
      const int dright = b.op(P::Mul, b.op(P::Mul, left, dtanh), dinner);
      return {b.op(P::Mul, g, b.op(P::Add, dleft, dright))};
    }
    const int cdf = b.op(P::Mul, k1(0.5), b.op(P::Add, k1(1), b.op(P::Erf, b.op(P::Mul, v, k1(M_SQRT1_2)))));
    const int pdf = b.op(P::Mul, k1(M_2_SQRTPI * M_SQRT1_2 * 0.5), b.op(P::Exp, b.op(P::Mul, b.op(P::Mul, v, v), k1(-0.5))));
    return {b.op(P::Mul, g, b.op(P::Add, cdf, b.op(P::Mul, v, pdf)))};
  }
  if (k == "aten::addcmul") return {b.op(P::Add, x(0), scaled(b.op(P::Mul, x(1), x(2)), num(3, 1)))};
  if (k == "aten::addcdiv") return {b.op(P::Add, x(0), scaled(b.op(P::Div, x(1), x(2)), num(3, 1)))};
  if (k == "aten::softplus") {  // x * beta > threshold ? x : log1p(exp(x * beta)) / beta
    const double beta = num(1, 1), threshold = num(2, 20);
    const int v = x(0), bx = scaled(v, beta);
    return {b.op(P::Where, b.op(P::Gt, bx, k1(threshold)), v, b.op(P::Div, b.op(P::Log1p, b.op(P::Exp, bx)), k1(beta)))};
  }
  if (k == "aten::mish") {  // x * tanh(softplus(x)), softplus with beta 1, threshold 20
    const int v = x(0);
    const int sp = b.op(P::Where, b.op(P::Gt, v, k1(20)), v, b.op(P::Log1p, b.op(P::Exp, v)));
    return {b.op(P::Mul, v, b.op(P::Tanh, sp))};
  }
  if (k == "aten::lerp.Scalar") {  // eager: w < 0.5 ? a + w * (b - a) : b - (b - a) * (1 - w)
    const double w = num(2, 0);
    const int a = x(0), e = x(1), d = b.op(P::Sub, e, a);
    return {w < 0.5 ? b.op(P::Add, a, b.op(P::Mul, d, k1(w))) : b.op(P::Sub, e, b.op(P::Mul, d, k1(1 - w)))};
  }
  // Reductions and norms: one row of the group's domain at a time.
  if (k == "aten::sum.dim_IntList" || k == "aten::sum") return {b.reduce(P::RSum, x(0))};
  if (k == "aten::mean.dim" || k == "aten::mean") return {b.op(P::Div, b.reduce(P::RSum, x(0)), b.cols())};
  if (k == "aten::amax") return {b.reduce(P::RMax, x(0))};
  if (k == "aten::amin") return {b.reduce(P::RMin, x(0))};
  if (is_variance_key(k)) {
    const int v = x(0);
    const int mean = b.op(P::Div, b.reduce(P::RSum, v), b.cols());
    const int d = b.op(P::Sub, v, mean);
    // Eager divides by max(n - correction, 0): a correction above the row's length gives inf
    // (or NaN for a sum of squares of 0), not a negative variance.
    const int divisor = b.op(P::Max, b.op(P::Sub, b.cols(), k1(num(2, 1))), k1(0));
    const int var = b.op(P::Div, b.reduce(P::RSum, b.op(P::Mul, d, d)), divisor);
    if (k == "aten::var_mean.correction") return {var, mean};
    return {k == "aten::var.correction" ? var : b.op(P::Sqrt, var)};
  }
  if (k == "aten::_softmax" || k == "aten::_log_softmax") {
    const int v = x(0);
    const int shifted = b.op(P::Sub, v, b.reduce(P::RMax, v));
    const int e = b.op(P::Exp, shifted);
    const int sum = b.reduce(P::RSum, e);
    // Eager scales by the sum's reciprocal (one division per row, not per element): so do we.
    return {k == "aten::_softmax" ? b.op(P::Mul, e, b.op(P::Recip, sum)) : b.op(P::Sub, shifted, b.op(P::Log, sum))};
  }
  if (k == "aten::native_layer_norm") {
    const int v = x(0);
    const int mean = b.op(P::Div, b.reduce(P::RSum, v), b.cols());
    const int d = b.op(P::Sub, v, mean);
    const int var = b.op(P::Div, b.reduce(P::RSum, b.op(P::Mul, d, d)), b.cols());
    const int rstd = b.op(P::Rsqrt, b.op(P::Add, var, k1(num(4, 1e-5))));
    int out = b.op(P::Mul, d, rstd);
    if (!n.args[2].is_none()) out = b.op(P::Mul, out, x(2));
    if (!n.args[3].is_none()) out = b.op(P::Add, out, x(3));
    return {out, mean, rstd};
  }
  if (k == "aten::view" || k == "aten::_unsafe_view" || k == "aten::reshape" || k == "aten::unsqueeze" ||
      k == "aten::squeeze.dim" || k == "aten::squeeze.dims" || k == "aten::expand")
    return {x(0)};
  throw std::logic_error("fxcpp: cpu fusion has no emitter for " + k);
}

}  // namespace fxcpp::fusion
