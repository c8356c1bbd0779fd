#include "ir/verifier.h"

#include <unordered_set>

namespace fxcpp {

void verify_graph(const Graph& g, bool require_meta) {
  std::unordered_set<const Value*> defined;
  std::unordered_set<std::string> names;
  for (const Value* v : g.inputs()) defined.insert(v);
  for (const auto& v : g.values())
    if (v->constant) defined.insert(v.get());
  for (const Node* n : g.nodes()) {
    if (!names.insert(n->name).second) throw NodeError(*n, "duplicate node name");
    for (const auto& a : n->args)
      for_each_value(a, [&](Value* v) {
        if (!defined.count(v)) throw NodeError(*n, "uses %" + v->name + " before it is defined (or after it was removed)");
      });
    if (n->is_aten() && n->args.size() != n->schema().arguments().size())
      throw NodeError(*n, "has " + std::to_string(n->args.size()) + " args, schema has " +
                              std::to_string(n->schema().arguments().size()));
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      const Value* v = n->outputs[i];
      if (v->producer != n || v->output_index != static_cast<int>(i))
        throw NodeError(*n, "output %" + v->name + " does not point back at its producer");
      if (require_meta && v->kind == ValueKind::Tensor && !v->meta)
        throw NodeError(*n, "output %" + v->name + " has no tensor meta");
      defined.insert(v);
    }
  }
  for (const auto& a : g.outputs())
    for_each_value(a, [&](Value* v) {
      if (!defined.count(v)) throw std::runtime_error("graph output %" + v->name + " is not defined");
    });
}

}  // namespace fxcpp
