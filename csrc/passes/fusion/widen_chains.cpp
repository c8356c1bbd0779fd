// widen_chains: where a bf16/fp16 oneDNN node computes in fp32 (no native kernels for the
// dtype on this host: bf16 below avx512_core_bf16, fp16 on every CPU we target), it widens
// its input and rounds its output back, a pass over memory each way and two ATen calls. When
// every reader of that output is another such node (as its src or a post-op operand), the
// round trip is pure cost: the output stays fp32 and the readers take it as it is.
//
//   %a = onednn::conv(%x, %w1) : bf16 ; %b = onednn::conv(%a, %w2, %a0) {sum} : bf16
//      → %a : fp32 (rounded nowhere); %b still bf16
//
// Only the value's dtype changes (its meta says fp32): the kernels read their compute
// dtype from the weight and their output dtype from the meta (runtime/onednn/fused_kernel.h).
// The result is then more accurate than eager's, never less: the chain skips roundings
// eager does, as PyTorch's harness allows (fp64 reference). A graph output, a weight, bias or
// BatchNorm operand, or a value any other node reads keeps its dtype. A second run changes
// nothing (the widened values are fp32 and match nothing).
#include "passes/fusion/fusion_util.h"
#include "passes/pass.h"
#include "runtime/host.h"

namespace fxcpp {

using namespace fusion;

namespace {

bool narrow_float(c10::ScalarType t) { return t == c10::kBFloat16 || t == c10::kHalf; }

// Whether a oneDNN node with this weight dtype computes in fp32 here (FusedKernel::compute_dtype).
bool computes_wide(const Node* n) {
  if (!n || !is_onednn_node(n)) return false;
  const Value* w = value_of(n->args[1]);
  if (!w || !w->meta) return false;
  const auto t = w->meta->dtype;
  return t == c10::kHalf || (t == c10::kBFloat16 && !native_bf16());
}

// The arg positions a oneDNN node reads activations at: src, and its Binary/Sum post-op operands.
bool activation_slot(const Node& n, size_t i) {
  if (i == 0) return true;
  for (const PostOp& p : n.fused->post_ops)
    if (p.arg == static_cast<int>(i)) return true;
  return false;
}

}  // namespace

bool widen_chains_pass(Graph& g, const PassContext&) {
  if (!onednn_available()) return false;
  const std::vector<Node*> nodes = g.nodes();
  // Every (reader, arg position) of each value; a graph output counts as a foreign reader.
  std::vector<bool> foreign(g.num_values(), false);
  std::vector<int> wide_reads(g.num_values(), 0);
  for (const Arg& a : g.outputs()) for_each_value(a, [&](Value* v) { foreign[v->id] = true; });
  for (const Node* n : nodes) {
    const bool wide = computes_wide(n);
    for (size_t i = 0; i < n->args.size(); ++i)
      for_each_value(n->args[i], [&](Value* v) {
        if (wide && n->args[i].kind == Arg::Kind::Value && activation_slot(*n, i)) ++wide_reads[v->id];
        else foreign[v->id] = true;
      });
  }
  bool changed = false;
  for (Node* n : nodes) {
    if (!computes_wide(n) || n->outputs.size() != 1) continue;
    Value* v = n->outputs[0];
    if (!v->meta || !narrow_float(v->meta->dtype) || foreign[v->id] || wide_reads[v->id] == 0) continue;
    v->meta->dtype = c10::kFloat;
    changed = true;
  }
  return changed;
}

}  // namespace fxcpp
