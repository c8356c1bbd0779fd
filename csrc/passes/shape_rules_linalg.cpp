// Matrix products and convolution.
#include "passes/shape_rules.h"

namespace fxcpp {

static void check_inner(const ShapeCtx& c, const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static() && a.value != b.value)
    c.fail("inner dimensions do not match: " + a.str() + " vs " + b.str());
}

static Metas mm(const ShapeCtx& c, size_t a, size_t b) {
  const TensorMeta& x = c.in(a);
  const TensorMeta& w = c.in(b);
  if (x.dim() != 2 || w.dim() != 2) c.fail("expects 2-D operands");
  check_inner(c, x.sizes[1], w.sizes[0]);
  return {meta_like(x, {x.sizes[0], w.sizes[1]})};
}

static Metas bmm(const ShapeCtx& c, size_t a, size_t b) {
  const TensorMeta& x = c.in(a);
  const TensorMeta& w = c.in(b);
  if (x.dim() != 3 || w.dim() != 3) c.fail("expects 3-D operands");
  check_inner(c, x.sizes[2], w.sizes[1]);
  return {meta_like(x, {x.sizes[0], x.sizes[1], w.sizes[2]})};
}

// One spatial output size of a (transposed) convolution.
static Dim conv_out(const Dim& in, int64_t k, int64_t s, int64_t p, int64_t d, bool transposed, int64_t op) {
  if (!in.is_static()) return Dim::unknown();
  if (transposed) return Dim::of((in.value - 1) * s - 2 * p + d * (k - 1) + op + 1);
  return Dim::of((in.value + 2 * p - d * (k - 1) - 1) / s + 1);
}

static int64_t pick(const std::vector<int64_t>& v, size_t i, int64_t dflt) {
  if (v.empty()) return dflt;
  return v.size() == 1 ? v[0] : v.at(i);
}

// convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
static Metas convolution(const ShapeCtx& c) {
  const TensorMeta& x = c.in(0);
  const TensorMeta& w = c.in(1);
  auto stride = c.int_list(3), padding = c.int_list(4), dilation = c.int_list(5), out_pad = c.int_list(7);
  bool transposed = c.bool_arg(6);
  int64_t groups = c.int_arg(8);
  if (x.dim() != w.dim() || x.dim() < 3)
    c.fail("input rank " + std::to_string(x.dim()) + " does not match weight rank " + std::to_string(w.dim()));
  std::vector<Dim> out{x.sizes[0]};
  // Eager's quirk, kept: an input with no channels gives an output with none (ATen returns
  // early, shaped from the input), whatever the weight's output channels.
  const bool no_channels = !transposed && x.sizes[1].is_static() && x.sizes[1].value == 0;
  out.push_back(no_channels ? Dim::of(0) : transposed ? dim_mul(w.sizes[1], Dim::of(groups)) : w.sizes[0]);
  for (int64_t i = 2; i < x.dim(); ++i) {
    size_t s = static_cast<size_t>(i - 2);
    if (!w.sizes[i].is_static()) { out.push_back(Dim::unknown()); continue; }
    out.push_back(conv_out(x.sizes[i], w.sizes[i].value, pick(stride, s, 1), pick(padding, s, 0), pick(dilation, s, 1),
                           transposed, pick(out_pad, s, 0)));
  }
  return {meta_like(x, out)};
}

void add_linalg_rules(ShapeRuleTable& t) {
  t["aten::mm"] = [](const ShapeCtx& c) { return mm(c, 0, 1); };
  t["aten::addmm"] = [](const ShapeCtx& c) { return mm(c, 1, 2); };
  t["aten::bmm"] = [](const ShapeCtx& c) { return bmm(c, 0, 1); };
  t["aten::baddbmm"] = [](const ShapeCtx& c) { return bmm(c, 1, 2); };
  t["aten::t"] = [](const ShapeCtx& c) -> Metas {
    const TensorMeta& x = c.in(0);
    if (x.dim() > 2) c.fail("t() expects a tensor with <= 2 dimensions");
    std::vector<Dim> s(x.sizes.rbegin(), x.sizes.rend());
    return {meta_like(x, s)};
  };
  t["aten::linear"] = [](const ShapeCtx& c) -> Metas {
    const TensorMeta& x = c.in(0);
    const TensorMeta& w = c.in(1);
    if (x.dim() < 1 || w.dim() != 2) c.fail("linear expects an input of rank >= 1 and a 2-d weight");
    check_inner(c, x.sizes.back(), w.sizes.back());
    auto s = x.sizes;
    s.back() = w.sizes[0];
    return {meta_like(x, s)};
  };
  t["aten::convolution"] = convolution;
}

}  // namespace fxcpp
