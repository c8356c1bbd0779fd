// layout_propagation: convolutions write channels-last (NHWC / NDHWC) when every
// transitive consumer of their output reads any layout: other oneDNN nodes, pointwise
// ops, pooling and batch norm (which keep the layout and are checked in turn), and
// reductions or 1x1 flattens (whose results no longer depend on it). Chains of
// convolutions then run in one layout with no reorders between them; a graph output
// or an op that needs the contiguous layout (a general view) keeps it contiguous.
//
// Why channels-last and not oneDNN's blocked nChw16c: channels-last is an at::Tensor
// layout, so ATen consumers (pooling, adds, the Interpreter) read it without a reorder,
// and oneDNN's brgemm convolutions run it natively (see benchmarks/results/ for numbers).
//
// The exception is accuracy: an fp32 convolution on NHWC sums its reduction (C x k x k) with an
// error that grows with its length, 2-6.6x eager's at C x k x k = 576-9216, where eager's
// oneDNN, given NCHW tensors, runs on NCHW-blocked layouts and lands closer (bit for bit what the
// blocked kernel gives here; benchmarks/results/onednn-conv-accuracy/). Such a convolution is
// marked blocked_layout: its kernel reorders its input to the blocked layout and its output back,
// as eager does. ResNet-50's error goes from 2.09x eager's to 1.07x, in 1.04-1.05x the time.
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

#include "ir/layout.h"
#include "passes/fusion/fusion_util.h"
#include "passes/pass.h"

namespace fxcpp {

using namespace fusion;

namespace {

const std::unordered_set<std::string>& layout_following_ops() {
  static const std::unordered_set<std::string> ops = {
      "aten::relu", "aten::gelu", "aten::silu", "aten::sigmoid", "aten::tanh", "aten::hardswish", "aten::hardsigmoid",
      "aten::hardtanh", "aten::leaky_relu", "aten::elu", "aten::clamp", "aten::clamp_min", "aten::clamp_max",
      "aten::add", "aten::sub", "aten::mul", "aten::div", "aten::neg", "aten::abs", "aten::exp", "aten::clone",
      "aten::_native_batch_norm_legit_no_training", "aten::max_pool2d_with_indices", "aten::max_pool3d_with_indices",
      "aten::avg_pool2d", "aten::avg_pool3d", "aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d",
      "aten::adaptive_avg_pool3d", "aten::_adaptive_avg_pool3d", "aten::mean", "aten::sum", "aten::amax",
      "aten::constant_pad_nd", "aten::cat", "aten::_to_copy"};
  return ops;
}

bool spatial_all_ones(const Value* v) {
  if (!v->meta) return false;
  for (size_t i = 2; i < v->meta->sizes.size(); ++i)
    if (!(v->meta->sizes[i] == Dim::of(1))) return false;
  return true;
}

bool is_to_channels_last_order(const std::vector<int64_t>& perm, const Value* v) {
  const int64_t nd = v->meta ? v->meta->dim() : 0;
  if (nd < 3 || static_cast<int64_t>(perm.size()) != nd) return false;
  std::vector<int64_t> want = {0};
  for (int64_t i = 2; i < nd; ++i) want.push_back(i);
  want.push_back(1);
  for (int64_t i = 0; i < nd; ++i)
    if ((perm[i] + nd) % nd != want[i]) return false;
  return true;
}

// The traced (FakeTensor) strides say eager returns this value channels-last.
bool meta_is_channels_last(const Value* v) { return v->meta && traced_channels_last(*v->meta); }

class Checker {
 public:
  explicit Checker(const Graph& g) : g_(g) {
    for (Node* n : g.nodes())
      for (const auto& a : n->args) for_each_value(a, [&](Value* v) { users_[v].push_back(n); });
  }

  // Whether every transitive consumer of v reads any layout.
  bool any_layout_ok(const Value* v, int depth = 0) {
    if (auto it = memo_.find(v); it != memo_.end()) return it->second;
    // A graph output keeps eager's layout: fine when eager's is channels-last too.
    bool ok = depth < 64 && (!g_.is_graph_output(v) || meta_is_channels_last(v));
    for (Node* u : users_[v]) {
      if (!ok) break;
      ok = consumer_ok(u, v, depth);
    }
    memo_[v] = ok;
    return ok;
  }

 private:
  bool consumer_ok(Node* u, const Value* v, int depth) {
    if (u->fused) return true;  // oneDNN nodes read strided tensors
    if (u->program) {           // cpu::fused reads any strides; pointwise groups pass the layout on
      if (u->program->row_dims > 0) return true;
      for (const Value* o : u->outputs)
        if (!any_layout_ok(o, depth + 1)) return false;
      return true;
    }
    if (!u->is_aten()) return false;
    const std::string op = u->schema().name();
    if ((op == "aten::view" || op == "aten::reshape" || op == "aten::_unsafe_view" || op == "aten::flatten") &&
        spatial_all_ones(v))
      return true;  // [N, C, 1, 1] → [N, C]: the same bytes in either layout
    // permute(0, 2, 3, 1) of a channels-last tensor is contiguous (ConvNeXt's conv → LayerNorm):
    // every later view of it is valid, so the layout stops mattering here -- unless the permuted
    // strides reach a graph output, where the user would see them differ from eager's.
    std::vector<int64_t> perm;
    if (op == "aten::permute" && const_int_list(u->args[1], perm) && is_to_channels_last_order(perm, v))
      return !strides_reach_output(u->outputs[0], depth + 1);
    if (!layout_following_ops().count(op)) return false;
    // A reduction to fewer than 3 dims (global pooling as mean over H, W) has no layout left to carry.
    const bool reduction = op == "aten::mean" || op == "aten::sum" || op == "aten::amax";
    if (reduction && u->outputs.size() == 1 && u->outputs[0]->meta && u->outputs[0]->meta->dim() < 3) return true;
    for (const Value* o : u->outputs)
      if (o->kind == ValueKind::Tensor && !any_layout_ok(o, depth + 1)) return false;
    return true;
  }

  // Whether v's strides can show in a graph output: v is one, or a view, a layout-following op or
  // a pointwise group carries them to one. oneDNN nodes, row groups and LayerNorm write their
  // own layout; any other op is assumed to carry them.
  bool strides_reach_output(const Value* v, int depth) {
    if (depth >= 64 || g_.is_graph_output(v)) return true;
    if (auto it = reach_memo_.find(v); it != reach_memo_.end()) return it->second;  // diamonds: each value once
    bool reach = false;
    for (Node* u : users_[v]) {
      if (reach) break;
      if (u->fused || (u->program && u->program->row_dims > 0)) continue;
      if (u->is_aten() && u->schema().name() == "aten::native_layer_norm") continue;
      for (const Value* o : u->outputs)
        if (o->kind == ValueKind::Tensor && strides_reach_output(o, depth + 1)) reach = true;
    }
    reach_memo_[v] = reach;
    return reach;
  }

  const Graph& g_;
  std::unordered_map<const Value*, std::vector<Node*>> users_;
  std::unordered_map<const Value*, bool> memo_;
  std::unordered_map<const Value*, bool> reach_memo_;
};

// The reduction length from which an fp32 convolution runs on the blocked layouts.
// FXCPP_CONV_LONG_K=<K> moves it; =0 keeps every convolution on NHWC.
int64_t conv_long_k_threshold() {
  // 576 (1.97x eager's error alone) stays NHWC: ResNet-50's 56 x 56 layers, where the reorders
  // cost most. A threshold of 512 took ResNet-50 to 1.01x eager's error in 1.06-1.10x the time.
  return long_k_from_env("FXCPP_CONV_LONG_K", 1024);
}

// Whether eager would run this convolution on oneDNN's blocked layouts and fxcpp's NHWC would
// land measurably further from the exact result: fp32, ungrouped (a weight-normalized Conv1d of 16
// groups measured no worse on NHWC and 2.5x slower blocked), not transposed, the input and weight NCHW in
// eager (a channels-last one makes eager run NHWC too), and a reduction C x k x k past the threshold.
bool runs_blocked_in_eager(const Node& n, int64_t threshold) {
  const FusedOp& f = *n.fused;
  if (threshold < 0 || f.transposed || f.groups != 1 || n.args.size() < 2) return false;
  const Value *x = value_of(n.args[0]), *w = value_of(n.args[1]);
  if (!x || !w || !x->meta || !w->meta || x->meta->dtype != at::kFloat || w->meta->dtype != at::kFloat) return false;
  if (meta_is_channels_last(x) || meta_is_channels_last(w)) return false;
  int64_t k = 1;
  for (int64_t i = 1; i < w->meta->dim(); ++i) {
    if (!w->meta->sizes[i].is_static()) return false;
    k *= w->meta->sizes[i].value;
  }
  return k >= threshold;
}

}  // namespace

bool layout_propagation_pass(Graph& g, const PassContext&) {
  if (!onednn_available()) return false;
  Checker check(g);
  bool changed = false;
  const int64_t long_k = conv_long_k_threshold();
  for (Node* n : g.nodes()) {
    if (!n->fused || n->fused->anchor != FusedOp::Anchor::Conv || n->fused->blocked_layout) continue;
    if (!runs_blocked_in_eager(*n, long_k)) continue;
    auto f = std::make_shared<FusedOp>(*n->fused);
    f->blocked_layout = true;
    n->fused = f;
    changed = true;
  }
  for (Node* n : g.nodes()) {
    if (!n->fused || n->fused->anchor != FusedOp::Anchor::Conv || n->fused->channels_last) continue;
    const Value* out = n->outputs[0];
    if (!out->meta || out->meta->dim() < 3) continue;
    // Where eager writes channels-last (a channels-last input), so does the kernel: then every
    // consumer, views included, sees eager's strides. Otherwise only where none can tell.
    if (!meta_is_channels_last(out) && !check.any_layout_ok(out)) continue;
    auto f = std::make_shared<FusedOp>(*n->fused);
    f->channels_last = true;
    n->fused = f;
    changed = true;
  }
  return changed;
}

}  // namespace fxcpp
