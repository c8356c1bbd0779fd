// static_values: marks every value computed only from static inputs (parameters, buffers)
// and constants by pure ops, so it is the same at every call until a parameter changes:
//
//   %w = aten::_weight_norm_interface(%v, %g, 2)   (v, g parameters)   →  %w static
//   %d = aten::_to_copy(%w, bf16) (autocast)  ;  %m = onednn::matmul(%a, %b) (LoRA: A @ B)
//
// Kernels then treat such a value like a parameter (a conv packs it once), and the executor
// runs its steps at the first call and again only when a source changes (executor.cpp).
// Not marked: a graph output (the caller must get a fresh tensor each call, as from eager),
// an op with side effects or random numbers, and empty*/new_empty* (uninitialized memory).
// Only marks, never rewrites; a second run marks nothing more.
#include "passes/pass.h"

namespace fxcpp {

static bool pure(const Node& n) {
  if (!n.is_aten()) return true;  // prims (size arithmetic) and fused nodes compute only from their args
  const auto& s = n.schema();
  if (s.is_mutable() || s.returns().empty() || n.op->hasTag(at::Tag::nondeterministic_seeded)) return false;
  const std::string& name = s.name();
  return name.find("empty") == std::string::npos;  // empty, empty_like, new_empty, empty_strided, ...
}

bool static_values_pass(Graph& g, const PassContext&) {
  bool changed = false;
  for (Node* n : g.nodes()) {
    if (n->outputs.empty() || !pure(*n)) continue;
    bool all_static = true;
    for (const auto& a : n->args) for_each_value(a, [&](Value* v) { all_static &= v->is_static || v->constant.has_value(); });
    if (!all_static) continue;
    bool output = false;
    for (const Value* v : n->outputs) output |= g.is_graph_output(v);
    if (output) continue;
    for (Value* v : n->outputs) {
      changed |= !v->is_static;
      v->is_static = true;
    }
  }
  return changed;
}

}  // namespace fxcpp
