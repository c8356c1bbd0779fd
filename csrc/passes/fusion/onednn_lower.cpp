// onednn_lower: rewrites each convolution and matmul the oneDNN kernels run into a
// fused node with an empty post-op list (fold_batchnorm and fuse_postops extend it).
//
//   %t = aten::t(%w); %y = aten::addmm(%b, %x, %t)        →  %y = onednn::matmul(%x, %w, %b) {weight_nk}
//   %v = aten::view(%x3, [M,K]); %y = aten::mm(%v, %t); %o = aten::view(%y, [B,S,N])   (or _unsafe_view)
//                                                         →  %o = onednn::matmul(%x3, %w, None) {weight_nk flatten_src}
//   %y = aten::convolution(%x, %w, %b, ...)                →  %y = onednn::conv(%x, %w, %b) {stride=.. ...}
//   %p = aten::constant_pad_nd(%x, pads, 0); %y = aten::convolution(%p, ...)
//                                                         →  %y = onednn::conv(%x, ...) {pad_before pad_after}
//   %y = aten::bmm(%a, %b)                                 →  %y = onednn::matmul(%a, %b, None)
#include <algorithm>

#include "passes/fusion/fusion_util.h"
#include "passes/pass.h"

namespace fxcpp {

using namespace fusion;

namespace {

bool is_transpose_2d(const Node* n) {
  if (!n || !n->is_aten() || n->args.empty() || !onednn_tensor(value_of(n->args[0]))) return false;
  const std::string op = n->schema().name();
  if (op == "aten::t") return n->args[0].value->meta->dim() == 2;
  std::vector<int64_t> p;
  if (op == "aten::permute" && const_int_list(n->args[1], p)) return p == std::vector<int64_t>{1, 0};
  if (op == "aten::transpose") {
    double a, b;
    if (n->args[0].value->meta->dim() != 2 || !const_number(n->args[1], a) || !const_number(n->args[2], b)) return false;
    return (a == 0 || a == -2) && (b == 1 || b == -1) || (a == 1 || a == -1) && (b == 0 || b == -2);
  }
  return false;
}

// conv: aten::convolution with constant parameters, 3-5-d, float32/bfloat16 throughout.
bool lower_conv(Graph& g, Node* n) {
  const Value* x = value_of(n->args[0]);
  const Value* w = value_of(n->args[1]);
  const Value* b = value_of(n->args[2]);
  const Value* y = n->outputs[0];
  if (!onednn_tensor(x) || !onednn_tensor(w) || !onednn_tensor(y)) return false;
  if (!n->args[2].is_none() && !onednn_tensor(b)) return false;
  const int64_t nd = x->meta->dim();
  if (nd < 3 || nd > 5 || w->meta->dim() != nd || x->meta->dtype != w->meta->dtype) return false;
  auto f = std::make_shared<FusedOp>();
  f->anchor = FusedOp::Anchor::Conv;
  f->anchor_op = "aten::convolution";
  double transposed, groups;
  if (!const_int_list(n->args[3], f->stride) || !const_int_list(n->args[4], f->padding) ||
      !const_int_list(n->args[5], f->dilation) || !const_number(n->args[6], transposed) ||
      !const_int_list(n->args[7], f->output_padding) || !const_number(n->args[8], groups))
    return false;
  const size_t sp = static_cast<size_t>(nd - 2);
  // aten accepts one value for all spatial dims; oneDNN wants one per dim.
  for (auto* v : {&f->stride, &f->padding, &f->dilation, &f->output_padding})
    if (v->size() == 1 && sp > 1) v->assign(sp, (*v)[0]);
  if (f->stride.size() != sp || f->padding.size() != sp || f->dilation.size() != sp) return false;
  f->transposed = transposed != 0;
  if (f->transposed && f->output_padding.size() != sp) return false;
  f->groups = static_cast<int64_t>(groups);
  f->covers = {n->name};
  std::vector<Node*> chain = {n};
  Arg src = n->args[0];
  // A zero constant_pad_nd of the spatial dims right before (MobileNet's "same" padding):
  // folded into oneDNN's asymmetric padding instead of materializing the padded tensor.
  Node* pad = x->producer;
  std::vector<int64_t> pads;
  double fill;
  if (!f->transposed && pad && pad->is_aten() && pad->schema().name() == "aten::constant_pad_nd" &&
      g.use_counts()[x->id] == 1 && const_int_list(pad->args[1], pads) && const_number(pad->args[2], fill) && fill == 0 &&
      pads.size() <= 2 * sp && onednn_tensor(value_of(pad->args[0])) &&
      std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p >= 0; })) {
    f->pad_before.assign(sp, 0);
    f->pad_after.assign(sp, 0);
    for (size_t k = 0; k < pads.size() / 2; ++k) {  // pairs from the last dim backwards
      f->pad_before[sp - 1 - k] = pads[2 * k];
      f->pad_after[sp - 1 - k] = pads[2 * k + 1];
    }
    src = pad->args[0];
    chain = {pad, n};
    f->covers.push_back(pad->name);
  }
  g.replace_with_fused(chain, "onednn::conv", {src, n->args[1], n->args[2]}, f);
  return true;
}

// matmul family: addmm (bias broadcast over rows, beta = alpha = 1), mm, bmm.
bool lower_matmul(Graph& g, Node* n, const std::vector<int>& uses) {
  const std::string op = n->schema().name();
  const bool addmm = op == "aten::addmm";
  const Arg& a = n->args[addmm ? 1 : 0];
  const Arg& bw = n->args[addmm ? 2 : 1];
  const Value* x = value_of(a);
  const Value* w = value_of(bw);
  const Value* y = n->outputs[0];
  if (!onednn_tensor(x) || !onednn_tensor(w) || !onednn_tensor(y) || x->meta->dtype != w->meta->dtype) return false;
  Arg bias = Arg::constant_of(c10::IValue());
  if (addmm) {
    double beta, alpha;
    const Value* b = value_of(n->args[0]);
    if (!const_number(n->args[3], beta) || !const_number(n->args[4], alpha) || beta != 1 || alpha != 1) return false;
    // Only a bias over output columns: [N] (or [1, N]), the Linear case.
    if (!onednn_tensor(b) || b->meta->dtype != x->meta->dtype) return false;
    const auto& bs = b->meta->sizes;
    const Dim& ncols = y->meta->sizes[1];
    if (!(bs.size() == 1 && bs[0] == ncols) && !(bs.size() == 2 && bs[0] == Dim::of(1) && bs[1] == ncols)) return false;
    bias = n->args[0];
  }
  auto f = std::make_shared<FusedOp>();
  f->anchor = FusedOp::Anchor::Matmul;
  f->anchor_op = op;
  std::vector<Node*> chain = {n};
  Arg weight = bw;
  // A Linear's weight arrives as t(w): read w as [N, K] (and leave t to DCE if unused).
  if (w->producer && w->meta->dim() == 2 && is_transpose_2d(w->producer)) {
    weight = w->producer->args[0];
    f->weight_nk = true;
  }
  Arg src = a;
  // A Linear on an N-d input: view(x, [M, K]) → mm → view(y, [*, N]). Read x directly.
  // aot writes the output view as _unsafe_view when the Linear has no bias (matmul's decomposition).
  auto is_view = [](const Node* v) {
    return v && v->is_aten() && (v->schema().name() == "aten::view" || v->schema().name() == "aten::_unsafe_view");
  };
  Node* vin = x->producer;
  if (x->meta->dim() == 2 && is_view(vin) && uses[x->id] == 1 &&
      onednn_tensor(value_of(vin->args[0]))) {
    const Value* x0 = vin->args[0].value;
    Node* vout = sole_user(g, y, uses);
    const Value* y0 = vout ? vout->outputs[0] : nullptr;
    if (is_view(vout) && onednn_tensor(y0) && x0->meta->dim() >= 2 &&
        y0->meta->dim() == x0->meta->dim() && x0->meta->sizes.back() == x->meta->sizes[1] &&
        y0->meta->sizes.back() == y->meta->sizes[1]) {
      bool same_lead = true;
      for (int64_t i = 0; i + 1 < x0->meta->dim(); ++i) same_lead &= x0->meta->sizes[i] == y0->meta->sizes[i];
      if (same_lead) {
        src = vin->args[0];
        f->flatten_src = true;
        chain = {vin, n, vout};
        f->covers = {n->name, vin->name, vout->name};
      }
    }
  }
  if (f->covers.empty()) f->covers = {n->name};
  if (f->weight_nk && uses[w->id] == 1) f->covers.push_back(w->producer->name);  // t(w): DCE drops it
  g.replace_with_fused(chain, "onednn::matmul", {src, weight, bias}, f);
  return true;
}

}  // namespace

bool onednn_lower_pass(Graph& g, const PassContext&) {
  if (!onednn_available()) return false;
  bool changed = false;
  for (Node* n : g.nodes()) {
    if (n->dead || !n->is_aten()) continue;
    const std::string op = n->schema().name();
    const std::string overload = n->schema().overload_name();
    if (op == "aten::convolution") {
      changed |= lower_conv(g, n);
    } else if ((op == "aten::addmm" || op == "aten::mm" || op == "aten::bmm") && overload.empty()) {
      changed |= lower_matmul(g, n, g.use_counts());
    }
  }
  if (changed) g.remove_dead_nodes();
  return changed;
}

}  // namespace fxcpp
