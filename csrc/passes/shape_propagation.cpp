// Shape and dtype propagation: computes each known op's output metas from its
// inputs' and checks them against the metas lowering brought from Dynamo's
// FakeTensors. A mismatch is an error naming the node; a node whose op has no rule
// keeps the given meta. Changed: whether any missing meta was filled in.
#include "passes/pass.h"
#include "passes/shape_rules.h"

#include <c10/core/DefaultDtype.h>

namespace fxcpp {

const ShapeRuleTable& shape_rules() {
  static const ShapeRuleTable table = [] {
    ShapeRuleTable t;
    add_pointwise_rules(t);
    add_linalg_rules(t);
    add_view_rules(t);
    add_nn_rules(t);
    return t;
  }();
  return table;
}

TensorMeta meta_of(const at::Tensor& t) {
  TensorMeta m;
  m.dtype = t.scalar_type();
  m.device = t.device();
  for (auto s : t.sizes()) m.sizes.push_back(Dim::of(s));
  if (t.layout() == c10::kStrided)
    for (auto s : t.strides()) m.strides.push_back(Dim::of(s));
  return m;
}

static const TensorMeta* value_meta(const Value* v) { return v->meta ? &*v->meta : nullptr; }

bool ShapeCtx::is_tensor(size_t i) const {
  const Arg& a = node.args.at(i);
  return a.kind == Arg::Kind::Value && a.value->kind == ValueKind::Tensor && a.value->meta;
}
const TensorMeta& ShapeCtx::in(size_t i) const {
  const Arg& a = node.args.at(i);
  if (a.kind != Arg::Kind::Value || !value_meta(a.value)) fail("argument " + std::to_string(i) + " has no known tensor meta");
  return *a.value->meta;
}
int64_t ShapeCtx::int_arg(size_t i) const {
  const Arg& a = node.args.at(i);
  if (a.kind != Arg::Kind::Const || !a.constant.isInt()) fail("argument " + std::to_string(i) + " is not a constant int");
  return a.constant.toInt();
}
bool ShapeCtx::bool_arg(size_t i) const {
  const Arg& a = node.args.at(i);
  if (a.kind != Arg::Kind::Const || !a.constant.isBool()) fail("argument " + std::to_string(i) + " is not a constant bool");
  return a.constant.toBool();
}
std::vector<Dim> ShapeCtx::dims_arg(size_t i) const {
  const Arg& a = node.args.at(i);
  std::vector<Dim> out;
  if (a.kind == Arg::Kind::Const && a.constant.isIntList()) {
    for (auto v : a.constant.toIntVector()) out.push_back(Dim::of(v));
  } else if (a.kind == Arg::Kind::Const && a.constant.isInt()) {
    out.push_back(Dim::of(a.constant.toInt()));
  } else if (a.kind == Arg::Kind::List) {
    for (const auto& e : a.elems) {
      if (e.kind == Arg::Kind::Const && e.constant.isInt()) out.push_back(Dim::of(e.constant.toInt()));
      else if (e.kind == Arg::Kind::Value && e.value->kind == ValueKind::Int && e.value->constant) out.push_back(Dim::of(e.value->constant->toInt()));
      else if (e.kind == Arg::Kind::Value && e.value->kind == ValueKind::Int) out.push_back(Dim::unknown());
      else fail("argument " + std::to_string(i) + " is not an int list");
    }
  } else {
    fail("argument " + std::to_string(i) + " is not an int list");
  }
  return out;
}
std::vector<int64_t> ShapeCtx::int_list(size_t i) const {
  std::vector<int64_t> out;
  for (const Dim& d : dims_arg(i)) {
    if (!d.is_static()) fail("argument " + std::to_string(i) + " is not a constant int list");
    out.push_back(d.value);
  }
  return out;
}
std::optional<c10::ScalarType> ShapeCtx::dtype_arg(size_t i) const {
  const Arg& a = node.args.at(i);
  if (a.is_none()) return std::nullopt;
  if (a.kind == Arg::Kind::Const && a.constant.isInt()) return static_cast<c10::ScalarType>(a.constant.toInt());
  fail("argument " + std::to_string(i) + " is not a dtype");
}
c10::ScalarType ShapeCtx::scalar_dtype(size_t i) const {
  const Arg& a = node.args.at(i);
  auto kind = a.kind == Arg::Kind::Value ? a.value->kind : ValueKind::Any;
  if (a.kind == Arg::Kind::Const) {
    if (a.constant.isBool()) return c10::kBool;
    if (a.constant.isInt()) return c10::kLong;
    if (a.constant.isDouble()) return c10::typeMetaToScalarType(c10::get_default_dtype());
  }
  if (kind == ValueKind::Bool) return c10::kBool;
  if (kind == ValueKind::Int) return c10::kLong;
  if (kind == ValueKind::Float) return c10::typeMetaToScalarType(c10::get_default_dtype());
  fail("argument " + std::to_string(i) + " is not a number");
}

TensorMeta meta_like(const TensorMeta& m, std::vector<Dim> sizes, std::optional<c10::ScalarType> dtype) {
  TensorMeta out;
  out.dtype = dtype.value_or(m.dtype);
  out.device = m.device;
  out.sizes = std::move(sizes);
  return out;
}

int64_t wrap_dim(const ShapeCtx& c, int64_t d, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (d < -r || d >= r) c.fail("dimension " + std::to_string(d) + " out of range for rank " + std::to_string(rank));
  return d < 0 ? d + r : d;
}

Dim dim_mul(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return Dim::of(a.value * b.value);
  if (a.is_static() && a.value == 1) return b;
  if (b.is_static() && b.value == 1) return a;
  return Dim::unknown();
}

std::vector<Dim> broadcast_shapes(const ShapeCtx& c, const std::vector<Dim>& a, const std::vector<Dim>& b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<Dim> out(n);
  for (size_t i = 0; i < n; ++i) {
    const Dim* x = i < n - a.size() ? nullptr : &a[i - (n - a.size())];
    const Dim* y = i < n - b.size() ? nullptr : &b[i - (n - b.size())];
    if (!x) { out[i] = *y; continue; }
    if (!y) { out[i] = *x; continue; }
    if (*x == *y) out[i] = *x;
    else if (x->is_static() && x->value == 1) out[i] = *y;
    else if (y->is_static() && y->value == 1) out[i] = *x;
    else if (x->is_static() && y->is_static()) c.fail("shapes do not broadcast: " + x->str() + " vs " + y->str());
    else out[i] = x->is_static() ? *x : *y;  // a symbol meeting a concrete size >1 must equal it
  }
  return out;
}

// ATen's combine_categories (TensorIterator's result_type).
static c10::ScalarType combine(c10::ScalarType higher, c10::ScalarType lower) {
  using c10::ScalarType;
  if (c10::isComplexType(higher)) return higher;
  if (c10::isComplexType(lower)) return c10::isFloatingType(higher) ? c10::toComplexType(higher) : lower;
  if (c10::isFloatingType(higher)) return higher;
  if (higher == ScalarType::Bool || c10::isFloatingType(lower))
    return higher == ScalarType::Undefined ? lower : lower == ScalarType::Undefined ? higher : c10::promoteTypes(higher, lower);
  return higher != ScalarType::Undefined ? higher : lower;
}

c10::ScalarType promote_types(const std::vector<PromoteOperand>& ops) {
  c10::ScalarType r[3] = {c10::ScalarType::Undefined, c10::ScalarType::Undefined, c10::ScalarType::Undefined};
  for (const auto& o : ops) r[o.priority] = r[o.priority] == c10::ScalarType::Undefined ? o.dtype : c10::promoteTypes(r[o.priority], o.dtype);
  return combine(r[2], combine(r[1], r[0]));
}

// Sizes agree unless both are concrete and differ (a symbol may be a specialized size).
static bool compatible(const TensorMeta& a, const TensorMeta& b) {
  if (a.dtype != b.dtype || a.sizes.size() != b.sizes.size() || a.device.type() != b.device.type()) return false;
  for (size_t i = 0; i < a.sizes.size(); ++i)
    if (a.sizes[i].is_static() && b.sizes[i].is_static() && a.sizes[i].value != b.sizes[i].value) return false;
  return true;
}

bool shape_propagation_pass(Graph& g, const PassContext&) {
  bool changed = false;
  for (const auto& v : g.values())
    if (v->constant && v->constant->isTensor() && !v->meta) {
      v->meta = meta_of(v->constant->toTensor());
      changed = true;
    }
  const auto& rules = shape_rules();
  for (Node* n : g.nodes()) {
    if (!n->is_aten()) continue;
    auto it = rules.find(n->schema().name());
    if (it == rules.end()) continue;
    // A rule needs every tensor input's meta; one from an op without a rule leaves this node open too.
    bool inputs_known = true;
    for (const auto& a : n->args)
      for_each_value(a, [&](Value* v) { inputs_known &= v->kind != ValueKind::Tensor || v->meta.has_value(); });
    if (!inputs_known) continue;
    Metas computed;
    try {
      computed = it->second(ShapeCtx{*n});
    } catch (const NodeError&) {
      throw;
    } catch (const std::exception& e) {  // e.g. an index out of range: still an error naming the node
      throw NodeError(*n, std::string("shape propagation failed: ") + e.what());
    }
    for (size_t i = 0; i < computed.size() && i < n->outputs.size(); ++i) {
      if (!computed[i]) continue;
      Value* out = n->outputs[i];
      if (!out->meta) {
        out->meta = computed[i];
        changed = true;
      } else if (!compatible(*computed[i], *out->meta)) {
        throw NodeError(*n, "shape propagation computed " + computed[i]->str() + " for output " + std::to_string(i) +
                                " but the traced (FakeTensor) meta is " + out->meta->str());
      }
    }
  }
  return changed;
}

}  // namespace fxcpp
