// Dead-code elimination: removes nodes none of whose outputs is used, unless
// the node has side effects (mutable schema, no returns, or a seeded random op:
// eager would advance the RNG, so dropping it would change later random numbers).
//
//   %a = aten::relu(%x); %b = aten::neg(%x); return (%a)   →   %a = aten::relu(%x); return (%a)
#include "passes/pass.h"

namespace fxcpp {

static bool has_side_effects(const Node& n) {
  if (!n.is_aten()) return false;
  const auto& s = n.schema();
  return s.is_mutable() || s.returns().empty() || n.op->hasTag(at::Tag::nondeterministic_seeded);
}

bool dce_pass(Graph& g, const PassContext&) {
  bool changed = false;
  std::vector<int> uses = g.use_counts();
  auto nodes = g.nodes();
  // Reverse order: removing a user can make its producer dead in the same sweep.
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    if (has_side_effects(*n)) continue;
    bool used = false;
    for (const Value* v : n->outputs) used |= uses[v->id] > 0;
    if (used) continue;
    n->dead = true;
    changed = true;
    for (const auto& a : n->args) for_each_value(a, [&](Value* v) { uses[v->id]--; });
  }
  if (changed) g.remove_dead_nodes();
  return changed;
}

}  // namespace fxcpp
