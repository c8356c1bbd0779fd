// Removes nodes that return their input unchanged in a functional graph:
//   dropout(x, p, train=False) and dropout(x, 0, _), alias, detach, clone (preserve format),
//   _to_copy changing nothing, and view / reshape / _unsafe_view / expand / slice that
//   keep the input's shape.
//   %y = aten::view(%x, [2, 3]) (x is [2, 3]); %z = aten::relu(%y)  →  %z = aten::relu(%x)
// Preconditions: the input is a tensor Value with a static shape equal to the output's,
// and the output is not a graph output (it would alias an input or another output
// where eager returns a fresh tensor).
#include "passes/pass.h"

namespace fxcpp {

static bool same_static_shape(const Value* a, const Value* b) {
  if (!a->meta || !b->meta) return false;
  const auto& x = *a->meta;
  const auto& y = *b->meta;
  if (x.dtype != y.dtype || x.device != y.device || x.sizes.size() != y.sizes.size()) return false;
  for (size_t i = 0; i < x.sizes.size(); ++i)
    if (!x.sizes[i].is_static() || !(x.sizes[i] == y.sizes[i])) return false;
  return true;
}

static bool is_const(const Arg& a, double v) {
  return a.kind == Arg::Kind::Const && (a.constant.isInt() || a.constant.isDouble()) && a.constant.toScalar().toDouble() == v;
}
static bool is_false(const Arg& a) { return a.kind == Arg::Kind::Const && a.constant.isBool() && !a.constant.toBool(); }
static bool preserves_format(const Arg& a) {
  return a.is_none() || (a.kind == Arg::Kind::Const && a.constant.isInt() &&
                         a.constant.toInt() == static_cast<int64_t>(c10::MemoryFormat::Preserve));
}

// Is node `n` (of a known op) a no-op on its first argument?
static bool is_noop(const Node& n) {
  const std::string& op = n.schema().name();
  if (op == "aten::dropout") return is_false(n.args[2]) || is_const(n.args[1], 0.0);
  if (op == "aten::alias" || op == "aten::detach") return true;
  if (op == "aten::clone") return preserves_format(n.arg("memory_format"));
  if (op == "aten::_to_copy")
    return n.arg("layout").is_none() && n.arg("pin_memory").is_none() && !n.arg("non_blocking").constant.toBool() &&
           preserves_format(n.arg("memory_format"));  // dtype/device equality is checked on the metas
  if (op == "aten::view" || op == "aten::reshape" || op == "aten::_unsafe_view" || op == "aten::expand") return true;
  if (op == "aten::slice") return is_const(n.arg("step"), 1);  // same shape + step 1 means the full range
  return false;
}

bool remove_noops_pass(Graph& g, const PassContext&) {
  bool changed = false;
  for (Node* n : g.nodes()) {
    if (!n->is_aten() || n->outputs.size() != 1 || n->args.empty()) continue;
    if (n->args[0].kind != Arg::Kind::Value) continue;
    Value* in = n->args[0].value;
    Value* out = n->outputs[0];
    if (in->kind != ValueKind::Tensor || g.is_graph_output(out) || !same_static_shape(in, out)) continue;
    if (!is_noop(*n)) continue;
    g.replace_all_uses(out, in);
    n->dead = true;
    changed = true;
  }
  if (changed) g.remove_dead_nodes();
  return changed;
}

}  // namespace fxcpp
