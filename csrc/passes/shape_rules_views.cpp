// Views, reshapes, concatenation and copies.
#include "passes/shape_rules.h"

namespace fxcpp {

static Dim numel(const std::vector<Dim>& s) {
  Dim n = Dim::of(1);
  for (const Dim& d : s) n = dim_mul(n, d);
  return n;
}

// view / reshape: one -1 is inferred from the element count when it is static.
static Metas reshape(const ShapeCtx& c) {
  const TensorMeta& x = c.in(0);
  std::vector<Dim> s = c.dims_arg(1);
  int infer = -1;
  Dim known = Dim::of(1);
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].is_static() && s[i].value == -1) {
      if (infer >= 0) c.fail("only one dimension can be inferred");
      infer = static_cast<int>(i);
    } else {
      known = dim_mul(known, s[i]);
    }
  }
  Dim total = numel(x.sizes);
  if (infer >= 0) {
    if (total.is_static() && known.is_static()) {
      if (known.value == 0 || total.value % known.value) c.fail("shape is invalid for input of size " + total.str());
      s[infer] = Dim::of(total.value / known.value);
    } else {
      s[infer] = Dim::unknown();
    }
  } else if (total.is_static() && known.is_static() && total.value != known.value) {
    c.fail("shape is invalid for input of size " + total.str());
  }
  return {meta_like(x, s)};
}

static Metas permute(const ShapeCtx& c) {
  const TensorMeta& x = c.in(0);
  auto perm = c.int_list(1);
  if (static_cast<int64_t>(perm.size()) != x.dim()) c.fail("permutation rank does not match the input");
  std::vector<Dim> s;
  for (auto p : perm) s.push_back(x.sizes[wrap_dim(c, p, x.dim())]);
  return {meta_like(x, s)};
}

static Metas transpose(const ShapeCtx& c) {
  const TensorMeta& x = c.in(0);
  auto s = x.sizes;
  if (x.dim() == 0) return {meta_like(x, s)};
  std::swap(s[wrap_dim(c, c.int_arg(1), x.dim())], s[wrap_dim(c, c.int_arg(2), x.dim())]);
  return {meta_like(x, s)};
}

static Metas unsqueeze(const ShapeCtx& c) {
  const TensorMeta& x = c.in(0);
  auto s = x.sizes;
  int64_t d = wrap_dim(c, c.int_arg(1), x.dim() + 1);
  s.insert(s.begin() + d, Dim::of(1));
  return {meta_like(x, s)};
}

static Metas squeeze(const ShapeCtx& c) {
  const TensorMeta& x = c.in(0);
  std::vector<bool> drop(x.sizes.size(), false);
  if (c.node.args.size() == 1) {
    for (size_t i = 0; i < drop.size(); ++i) drop[i] = x.sizes[i].is_static() && x.sizes[i].value == 1;
  } else {
    for (auto d : c.int_list(1)) {
      if (x.dim() == 0) continue;
      int64_t w = wrap_dim(c, d, x.dim());
      drop[w] = x.sizes[w].is_static() && x.sizes[w].value == 1;
    }
  }
  std::vector<Dim> s;
  for (size_t i = 0; i < drop.size(); ++i)
    if (!drop[i]) s.push_back(x.sizes[i]);
  return {meta_like(x, s)};
}

static Metas expand(const ShapeCtx& c) {
  const TensorMeta& x = c.in(0);
  auto s = c.dims_arg(1);
  if (s.size() < x.sizes.size()) c.fail("expand to fewer dimensions than the input has");
  size_t off = s.size() - x.sizes.size();
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i].is_static() && s[i].value == -1) s[i] = i < off ? Dim::unknown() : x.sizes[i - off];
  return {meta_like(x, s)};
}

// slice(self, dim, start?, end?, step): symbolic bounds leave the size unknown.
static Metas slice(const ShapeCtx& c) {
  const TensorMeta& x = c.in(0);
  if (x.dim() == 0) c.fail("slice() cannot be applied to a 0-dim tensor");
  auto s = x.sizes;
  int64_t d = wrap_dim(c, c.int_arg(1), x.dim());
  const Arg& start = c.node.args[2];
  const Arg& end = c.node.args[3];
  bool static_bounds = (start.is_none() || (start.kind == Arg::Kind::Const && start.constant.isInt())) &&
                       (end.is_none() || (end.kind == Arg::Kind::Const && end.constant.isInt()));
  if (!s[d].is_static() || !static_bounds) {
    s[d] = Dim::unknown();
    return {meta_like(x, s)};
  }
  int64_t n = s[d].value, step = c.int_arg(4);
  auto clampi = [n](int64_t v) { return v < 0 ? std::max<int64_t>(v + n, 0) : std::min(v, n); };
  int64_t b = start.is_none() ? 0 : clampi(start.constant.toInt());
  int64_t e = end.is_none() ? n : clampi(end.constant.toInt());
  s[d] = Dim::of(e > b ? (e - b + step - 1) / step : 0);
  return {meta_like(x, s)};
}

static Metas select(const ShapeCtx& c) {
  const TensorMeta& x = c.in(0);
  if (x.dim() == 0) c.fail("select() cannot be applied to a 0-dim tensor");
  auto s = x.sizes;
  s.erase(s.begin() + wrap_dim(c, c.int_arg(1), x.dim()));
  return {meta_like(x, s)};
}

// cat(tensors, dim): 1-D empty tensors are skipped, as in eager.
static Metas cat(const ShapeCtx& c) {
  const Arg& list = c.node.args[0];
  std::vector<const TensorMeta*> ins;
  for (const auto& e : list.elems) {
    if (e.kind != Arg::Kind::Value || !e.value->meta) return {std::nullopt};
    const TensorMeta& m = *e.value->meta;
    if (m.dim() == 1 && m.sizes[0].is_static() && m.sizes[0].value == 0) continue;
    ins.push_back(&m);
  }
  if (ins.empty()) return {std::nullopt};
  std::vector<PromoteOperand> ops;
  for (auto* m : ins) ops.push_back({m->dtype, 2});
  if (ins[0]->dim() == 0) c.fail("zero-dimensional tensor cannot be concatenated");
  auto s = ins[0]->sizes;
  int64_t d = wrap_dim(c, c.int_arg(1), ins[0]->dim());
  for (size_t i = 1; i < ins.size(); ++i) {
    if (ins[i]->dim() != ins[0]->dim()) c.fail("cat inputs have different ranks");
    const Dim& a = s[d];
    const Dim& b = ins[i]->sizes[d];
    s[d] = a.is_static() && b.is_static() ? Dim::of(a.value + b.value) : Dim::unknown();
  }
  return {meta_like(*ins[0], s, promote_types(ops))};
}

// _to_copy(self, dtype?, layout?, device?, pin_memory?, non_blocking, memory_format?)
static Metas to_copy(const ShapeCtx& c) {
  TensorMeta m = meta_like(c.in(0), c.in(0).sizes, c.dtype_arg(1));
  const Arg& dev = c.node.args[3];
  if (dev.kind == Arg::Kind::Const && dev.constant.isDevice()) m.device = dev.constant.toDevice();
  return {m};
}

void add_view_rules(ShapeRuleTable& t) {
  t["aten::view"] = reshape;
  t["aten::_unsafe_view"] = reshape;
  t["aten::reshape"] = reshape;
  t["aten::permute"] = permute;
  t["aten::transpose"] = transpose;
  t["aten::unsqueeze"] = unsqueeze;
  t["aten::squeeze"] = squeeze;
  t["aten::expand"] = expand;
  t["aten::slice"] = slice;
  t["aten::select"] = select;
  t["aten::cat"] = cat;
  t["aten::_to_copy"] = to_copy;
}

}  // namespace fxcpp
