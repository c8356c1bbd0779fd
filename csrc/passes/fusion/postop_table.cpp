// ATen op → oneDNN post-op. Eltwise algorithms keep oneDNN's own alpha/beta meaning:
//   relu(alpha = negative slope), elu(alpha), clip(alpha = lo, beta = hi),
//   linear(alpha * x + beta), swish(x * sigmoid(alpha * x)), hard*(alpha * x + beta).
#include "passes/fusion/postop_table.h"

#include <limits>

#include "passes/fusion/fusion_util.h"

namespace fxcpp::fusion {

namespace {

PostOp eltwise(const std::string& alg, double alpha = 0, double beta = 0) {
  PostOp p;
  p.kind = PostOp::Kind::Eltwise;
  p.alg = alg;
  p.alpha = static_cast<float>(alpha);
  p.beta = static_cast<float>(beta);
  return p;
}

PostOpMatch one(PostOp p) { return PostOpMatch{{std::move(p)}, nullptr}; }

// A tensor operand that broadcasts into v's shape without growing it, same dtype.
bool broadcasts_into(const Value* o, const Value* v) {
  if (!onednn_tensor(o) || o == v || o->meta->dtype != v->meta->dtype || o->meta->dim() > v->meta->dim()) return false;
  const auto& os = o->meta->sizes;
  const auto& vs = v->meta->sizes;
  for (size_t i = 0; i < os.size(); ++i) {
    const Dim& d = os[os.size() - 1 - i];
    if (!(d == Dim::of(1)) && !(d == vs[vs.size() - 1 - i])) return false;
  }
  return true;
}

const double kInf = std::numeric_limits<float>::max();

}  // namespace

std::optional<PostOpMatch> match_post_op(const Node& u, const Value* v) {
  if (!u.is_aten() || u.args.empty()) return std::nullopt;
  const std::string op = u.schema().name();
  const std::string ov = u.schema().overload_name();
  const bool first = value_of(u.args[0]) == v;
  double a = 0, b = 0;
  // Unary: v must be the first argument.
  if (first) {
    if (op == "aten::relu") return one(eltwise("relu"));
    if (op == "aten::leaky_relu" && const_number(u.args[1], a)) return one(eltwise("relu", a));
    if (op == "aten::gelu" && u.args[1].kind == Arg::Kind::Const && u.args[1].constant.isString()) {
      const auto approx = u.args[1].constant.toStringRef();
      if (approx == "none") return one(eltwise("gelu_erf"));
      if (approx == "tanh") return one(eltwise("gelu_tanh"));
      return std::nullopt;
    }
    if (op == "aten::silu") return one(eltwise("swish", 1.0));
    if (op == "aten::sigmoid") return one(eltwise("logistic"));
    if (op == "aten::tanh") return one(eltwise("tanh"));
    if (op == "aten::hardswish") return one(eltwise("hardswish", 1.0 / 6, 0.5));
    if (op == "aten::hardsigmoid") return one(eltwise("hardsigmoid", 1.0 / 6, 0.5));
    if (op == "aten::elu") {
      double scale, in_scale;
      if (const_number(u.args[1], a) && const_number(u.args[2], scale) && const_number(u.args[3], in_scale) &&
          scale == 1 && in_scale == 1)
        return one(eltwise("elu", a));
      return std::nullopt;
    }
    if (op == "aten::hardtanh" && const_number(u.args[1], a) && const_number(u.args[2], b)) return one(eltwise("clip", a, b));
    if (op == "aten::clamp" && ov.empty()) {
      bool lo = const_number(u.args[1], a), hi = const_number(u.args[2], b);
      if ((!lo && !u.args[1].is_none()) || (!hi && !u.args[2].is_none()) || (!lo && !hi)) return std::nullopt;
      return one(eltwise("clip", lo ? a : -kInf, hi ? b : kInf));
    }
    if (op == "aten::clamp_min" && ov.empty() && const_number(u.args[1], a)) return one(eltwise("clip", a, kInf));
    if (op == "aten::clamp_max" && ov.empty() && const_number(u.args[1], a)) return one(eltwise("clip", -kInf, a));
  }
  // rsub(v, other, alpha) = other - alpha * v.
  if (op == "aten::rsub" && first) {
    double alpha = 1, s;
    if (!const_number(u.args[2], alpha)) return std::nullopt;
    if (const_number(u.args[1], s)) return one(eltwise("linear", -alpha, s));
    if (!broadcasts_into(value_of(u.args[1]), v)) return std::nullopt;
    PostOp p;
    p.kind = PostOp::Kind::Binary;
    p.alg = "add";
    return PostOpMatch{{eltwise("linear", -alpha, 0), p}, &u.args[1]};
  }
  // Binary: add/sub/mul/div with a scalar (an eltwise linear) or a broadcast tensor.
  const bool add = op == "aten::add", sub = op == "aten::sub", mul = op == "aten::mul", div = op == "aten::div";
  if (!(add || sub || mul || div) || !(ov == "Tensor" || ov == "Scalar")) return std::nullopt;
  const bool second = value_of(u.args[1]) == v;
  if (first == second) return std::nullopt;  // v op v, or v not an operand
  const Arg& other = u.args[first ? 1 : 0];
  double alpha = 1;
  if ((add || sub) && !const_number(u.args[2], alpha)) return std::nullopt;
  double s;
  if (const_number(other, s)) {
    if (add) return one(eltwise("linear", 1, alpha * s));
    if (sub) return first ? one(eltwise("linear", 1, -alpha * s)) : one(eltwise("linear", -alpha, s));
    if (mul) return one(eltwise("linear", s, 0));
    if (div && first && s != 0) return one(eltwise("linear", 1.0 / s, 0));
    return std::nullopt;  // s / v
  }
  const Value* o = value_of(other);
  if (!broadcasts_into(o, v) || alpha != 1) return std::nullopt;
  PostOp p;
  p.kind = PostOp::Kind::Binary;
  if (add) p.alg = "add";
  if (mul) p.alg = "mul";
  if (sub && first) p.alg = "sub";
  if (div && first) p.alg = "div";
  if (sub && !first) {  // other - v = (-v) + other
    PostOpMatch m{{eltwise("linear", -1, 0)}, &other};
    p.alg = "add";
    m.ops.push_back(p);
    return m;
  }
  if (p.alg.empty()) return std::nullopt;  // other / v
  return PostOpMatch{{p}, &other};
}

int onednn_post_op_len(const PostOp& p) {
  return p.kind == PostOp::Kind::Eltwise ? static_cast<int>(nan_preserving_steps(p).size()) : 1;
}

}  // namespace fxcpp::fusion
