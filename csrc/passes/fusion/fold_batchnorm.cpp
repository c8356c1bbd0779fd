// fold_batchnorm: an inference BatchNorm right after a convolution (or a Linear on a
// 2-d input) is folded into that node's weights and bias:
//   W' = W * gamma / sqrt(var + eps)   (per output channel)
//   b' = (b - mean) * gamma / sqrt(var + eps) + beta
// The BN tensors are static graph inputs at run time (parameters and buffers), so the fold
// itself happens in the kernel when it prepacks the weight, and is redone whenever
// any of the five tensors changes (identity or version counter). Here we only
// record which args they are.
//
//   %c = onednn::conv(%x, %w, %b); %bn = aten::_native_batch_norm_legit_no_training(%c, %g, %be, %m, %v, mom, eps)
//   (or native_batch_norm(.., training=False, ..), as make_fx traces it)
//      → %bn.0 = onednn::conv(%x, %w, %b, %g, %be, %m, %v) {bn(arg3, eps)}
#include "passes/fusion/fusion_util.h"
#include "passes/pass.h"

namespace fxcpp {

using namespace fusion;

bool fold_batchnorm_pass(Graph& g, const PassContext&) {
  if (!onednn_available()) return false;
  bool changed = false;
  for (Node* n : g.nodes()) {
    if (n->dead || !is_onednn_node(n)) continue;
    FusedOp& f = *n->fused;
    if (f.bn_arg >= 0 || !f.post_ops.empty()) continue;
    const bool conv = f.anchor == FusedOp::Anchor::Conv && !f.transposed;
    const bool linear = f.anchor == FusedOp::Anchor::Matmul && f.weight_nk && !f.flatten_src &&
                        n->outputs[0]->meta && n->outputs[0]->meta->dim() == 2;
    // Folding happens when the kernel packs the weight: the weight (and, below, the BN
    // tensors) must be long-lived, or the fold would be redone at every call.
    const Value* w = value_of(n->args[1]);
    if ((!conv && !linear) || !long_lived(w)) continue;
    auto uses = g.use_counts();
    Node* bn = sole_user(g, n->outputs[0], uses);
    if (!bn || !bn->is_aten()) continue;
    // Inference BN: _native_batch_norm_legit_no_training(.., momentum, eps), or
    // native_batch_norm / _native_batch_norm_legit(.., training=False, momentum, eps).
    const std::string op = bn->schema().name();
    int eps_arg = -1;
    double training = 1;
    if (op == "aten::_native_batch_norm_legit_no_training") eps_arg = 6;
    else if ((op == "aten::native_batch_norm" || op == "aten::_native_batch_norm_legit") && bn->args.size() == 8 &&
             const_number(bn->args[5], training) && training == 0)
      eps_arg = 7;
    if (eps_arg < 0) continue;
    if (value_of(bn->args[0]) != n->outputs[0]) continue;
    // Only the normalized output may be used (the saved mean/invstd are empty in inference anyway).
    if (uses[bn->outputs[1]->id] || uses[bn->outputs[2]->id]) continue;
    const Value* out = bn->outputs[0];
    double eps;
    bool ok = onednn_tensor(out) && out->meta->dtype == n->outputs[0]->meta->dtype && const_number(bn->args[eps_arg], eps);
    for (int i = 1; i <= 4; ++i)
      ok = ok && onednn_tensor(value_of(bn->args[i])) && value_of(bn->args[i])->meta->dim() == 1 && long_lived(value_of(bn->args[i]));
    if (!ok) continue;
    auto folded = std::make_shared<FusedOp>(f);
    folded->bn_arg = static_cast<int>(n->args.size());
    folded->bn_eps = eps;
    folded->covers.push_back(bn->name);
    std::vector<Arg> args = n->args;
    for (int i = 1; i <= 4; ++i) args.push_back(bn->args[i]);
    std::string target = n->target;
    g.replace_with_fused({n, bn}, target, std::move(args), folded);
    changed = true;
  }
  if (changed) g.remove_dead_nodes();
  return changed;
}

}  // namespace fxcpp
