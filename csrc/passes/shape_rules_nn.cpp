// Reductions, normalizations, softmax, pooling, embedding, attention.
#include "passes/shape_rules.h"

namespace fxcpp {

// Reduce `dims` (all when empty) of x, keeping them as 1 when keepdim.
static std::vector<Dim> reduce_shape(const ShapeCtx& c, const TensorMeta& x, std::vector<int64_t> dims, bool keepdim) {
  if (x.dim() == 0) {  // a 0-dim tensor reduces to itself (dim 0 and -1 are allowed, as in eager)
    for (auto d : dims) wrap_dim(c, d, 0);
    return {};
  }
  std::vector<bool> red(x.sizes.size(), dims.empty());
  for (auto d : dims) red.at(wrap_dim(c, d, x.dim())) = true;
  std::vector<Dim> s;
  for (size_t i = 0; i < red.size(); ++i) {
    if (!red[i]) s.push_back(x.sizes[i]);
    else if (keepdim) s.push_back(Dim::of(1));
  }
  return s;
}

// sum / mean / amax / amin / ...: (self, dim?, keepdim, dtype?) in that order where present.
static ShapeRule reduction(bool integral_to_long) {
  return [integral_to_long](const ShapeCtx& c) -> Metas {
    const TensorMeta& x = c.in(0);
    const auto& formals = c.node.schema().arguments();
    std::vector<int64_t> dims;
    bool keepdim = false;
    std::optional<c10::ScalarType> dtype;
    for (size_t i = 1; i < formals.size(); ++i) {
      const std::string& n = formals[i].name();
      if (n == "dim" && !c.is_none(i)) dims = c.int_list(i);
      else if (n == "keepdim") keepdim = c.bool_arg(i);
      else if (n == "dtype") dtype = c.dtype_arg(i);
    }
    auto out_dtype = dtype.value_or(integral_to_long && c10::isIntegralType(x.dtype, true) ? c10::kLong : x.dtype);
    return {meta_like(x, reduce_shape(c, x, dims, keepdim), out_dtype)};
  };
}

static Metas same_as_input(const ShapeCtx& c) { return {meta_like(c.in(0), c.in(0).sizes)}; }

// Pooling output size, as ATen's pooling_output_shape.
static Dim pool_out(const Dim& in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  if (!in.is_static()) return Dim::unknown();
  int64_t num = in.value + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = num / s + 1;
  if (ceil_mode && (out - 1) * s >= in.value + p) --out;
  return Dim::of(out);
}

// max_pool2d_with_indices(self, kernel, stride, padding, dilation, ceil_mode) and
// avg_pool2d(self, kernel, stride, padding, ceil_mode, ...).
static ShapeRule pool2d(bool is_max) {
  return [is_max](const ShapeCtx& c) -> Metas {
    const TensorMeta& x = c.in(0);
    if (x.dim() < 3) c.fail("2-d pooling expects a 3-d or 4-d input");
    auto k = c.int_list(1), s = c.int_list(2), p = c.int_list(3);
    std::vector<int64_t> d = is_max ? c.int_list(4) : std::vector<int64_t>{1};
    bool ceil_mode = c.bool_arg(is_max ? 5 : 4);
    auto at = [](const std::vector<int64_t>& v, size_t i, int64_t dflt) { return v.empty() ? dflt : v.size() == 1 ? v[0] : v.at(i); };
    auto sz = x.sizes;
    for (size_t i = 0; i < 2; ++i) {
      size_t dim = sz.size() - 2 + i;
      sz[dim] = pool_out(x.sizes[dim], at(k, i, 1), at(s, i, at(k, i, 1)), at(p, i, 0), at(d, i, 1), ceil_mode);
    }
    Metas out{meta_like(x, sz)};
    if (is_max) out.push_back(meta_like(x, sz, c10::kLong));
    return out;
  };
}

void add_nn_rules(ShapeRuleTable& t) {
  for (const char* op : {"sum", "prod"}) t[std::string("aten::") + op] = reduction(true);
  for (const char* op : {"mean", "amax", "amin"}) t[std::string("aten::") + op] = reduction(false);
  t["aten::_softmax"] = same_as_input;
  t["aten::_log_softmax"] = same_as_input;
  // Only the normalized output is determined here; saved statistics follow the traced meta.
  for (const char* op : {"native_layer_norm", "native_batch_norm", "_native_batch_norm_legit_no_training",
                         "_native_batch_norm_legit_functional", "_native_batch_norm_legit", "native_group_norm"})
    t[std::string("aten::") + op] = same_as_input;
  t["aten::embedding"] = [](const ShapeCtx& c) -> Metas {
    const TensorMeta& w = c.in(0);
    if (w.dim() != 2) c.fail("embedding weight must be 2-d");
    auto s = c.in(1).sizes;
    s.push_back(w.sizes.at(1));
    return {meta_like(w, s)};
  };
  t["aten::adaptive_avg_pool2d"] = [](const ShapeCtx& c) -> Metas {
    auto s = c.in(0).sizes;
    if (s.size() < 3) c.fail("adaptive_avg_pool2d expects a 3-d or 4-d input");
    auto o = c.int_list(1);
    s[s.size() - 2] = Dim::of(o.at(0));
    s[s.size() - 1] = Dim::of(o.size() > 1 ? o[1] : o[0]);
    return {meta_like(c.in(0), s)};
  };
  t["aten::_adaptive_avg_pool2d"] = t["aten::adaptive_avg_pool2d"];
  t["aten::max_pool2d_with_indices"] = pool2d(true);
  t["aten::avg_pool2d"] = pool2d(false);
  t["aten::_scaled_dot_product_flash_attention_for_cpu"] = [](const ShapeCtx& c) -> Metas {
    auto s = c.in(0).sizes;
    if (s.empty() || c.in(2).sizes.empty()) c.fail("attention expects at least 1-d query and value");
    s.back() = c.in(2).sizes.back();
    return {meta_like(c.in(0), s)};
  };
}

}  // namespace fxcpp
