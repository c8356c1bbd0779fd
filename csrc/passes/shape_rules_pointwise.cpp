// Pointwise ops: unary (same shape), binary and ternary (broadcast + ATen type promotion).
#include <c10/core/DefaultDtype.h>

#include "passes/shape_rules.h"

namespace fxcpp {

static c10::ScalarType default_float() { return c10::typeMetaToScalarType(c10::get_default_dtype()); }

// Unary ops keeping the dtype; "float" ops turn integral inputs into the default float dtype.
static Metas unary(const ShapeCtx& c, bool to_float) {
  const TensorMeta& x = c.in(0);
  bool integral = c10::isIntegralType(x.dtype, /*includeBool=*/true);
  return {meta_like(x, x.sizes, to_float && integral ? default_float() : x.dtype)};
}

static PromoteOperand operand(const ShapeCtx& c, size_t i) {
  if (c.is_tensor(i)) return {c.in(i).dtype, c.in(i).dim() > 0 ? 2 : 1};
  return {c.scalar_dtype(i), 0};
}

// Broadcast the tensor args among `idx`, promote all of them.
static TensorMeta broadcast_promote(const ShapeCtx& c, std::initializer_list<size_t> idx) {
  std::vector<Dim> shape;
  std::vector<PromoteOperand> ops;
  const TensorMeta* first = nullptr;
  for (size_t i : idx) {
    ops.push_back(operand(c, i));
    if (!c.is_tensor(i)) continue;
    if (!first) first = &c.in(i);
    shape = broadcast_shapes(c, shape, c.in(i).sizes);
  }
  if (!first) c.fail("no tensor operand");
  return meta_like(*first, shape, promote_types(ops));
}

enum class Result { Promoted, Bool, Float, First };

static ShapeRule binary(Result r) {
  return [r](const ShapeCtx& c) -> Metas {
    TensorMeta m = broadcast_promote(c, {0, 1});
    if (r == Result::Bool) m.dtype = c10::kBool;
    if (r == Result::Float && c10::isIntegralType(m.dtype, true)) m.dtype = default_float();
    if (r == Result::First) m.dtype = c.in(0).dtype;
    return {m};
  };
}

void add_pointwise_rules(ShapeRuleTable& t) {
  for (const char* op : {"relu", "gelu", "silu", "hardswish", "hardsigmoid", "leaky_relu", "elu", "hardtanh", "neg",
                         "clone", "alias", "detach", "floor", "ceil", "round", "sign", "bitwise_not", "dropout",
                         "relu6", "mish", "softplus", "lift_fresh_copy", "fill"})
    t[std::string("aten::") + op] = [](const ShapeCtx& c) { return unary(c, false); };
  for (const char* op : {"exp", "log", "sqrt", "rsqrt", "sin", "cos", "sigmoid", "tanh", "erf", "reciprocal", "log1p",
                         "expm1", "log2", "exp2", "tan", "asin", "acos", "atan", "erfinv"})
    t[std::string("aten::") + op] = [](const ShapeCtx& c) { return unary(c, true); };
  t["aten::abs"] = [](const ShapeCtx& c) -> Metas {  // of a complex tensor: its magnitude, real
    const TensorMeta& x = c.in(0);
    return {meta_like(x, x.sizes, c10::isComplexType(x.dtype) ? c10::toRealValueType(x.dtype) : x.dtype)};
  };
  for (const char* op : {"logical_not", "isnan", "isinf"})
    t[std::string("aten::") + op] = [](const ShapeCtx& c) -> Metas { return {meta_like(c.in(0), c.in(0).sizes, c10::kBool)}; };
  t["aten::clamp"] = [](const ShapeCtx& c) -> Metas {
    if (c.is_tensor(1) || c.is_tensor(2)) return {std::nullopt};  // clamp.Tensor: rare, left to the traced meta
    return unary(c, false);
  };
  t["aten::native_dropout"] = [](const ShapeCtx& c) -> Metas {
    return {meta_like(c.in(0), c.in(0).sizes), meta_like(c.in(0), c.in(0).sizes, c10::kBool)};
  };

  for (const char* op : {"add", "sub", "mul", "maximum", "minimum", "pow", "remainder", "fmod", "bitwise_and",
                         "bitwise_or", "bitwise_xor", "rsub"})
    t[std::string("aten::") + op] = binary(Result::Promoted);
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"})
    t[std::string("aten::") + op] = binary(Result::Bool);
  t["aten::atan2"] = binary(Result::Float);
  t["aten::div"] = [](const ShapeCtx& c) -> Metas {
    bool has_mode = c.node.args.size() > 2 && !c.is_none(2);  // div.Tensor_mode: rounding keeps integers
    return binary(has_mode ? Result::Promoted : Result::Float)(c);
  };
  for (const char* op : {"threshold_backward", "tanh_backward", "sigmoid_backward", "gelu_backward", "silu_backward",
                         "hardswish_backward", "leaky_relu_backward", "hardsigmoid_backward", "elu_backward"})
    t[std::string("aten::") + op] = binary(Result::First);
  t["aten::where"] = [](const ShapeCtx& c) -> Metas {
    TensorMeta m = broadcast_promote(c, {1, 2});
    if (c.is_tensor(0)) m.sizes = broadcast_shapes(c, c.in(0).sizes, m.sizes);
    return {m};
  };
  t["aten::masked_fill"] = [](const ShapeCtx& c) -> Metas {
    return {meta_like(c.in(0), broadcast_shapes(c, c.in(0).sizes, c.in(1).sizes))};
  };
}

}  // namespace fxcpp
