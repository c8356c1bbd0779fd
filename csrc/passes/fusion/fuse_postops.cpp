// fuse_postops: grows each oneDNN node's post-op chain while its output has exactly
// one user that oneDNN can apply on the fly (postop_table.cpp) with the same shape and
// dtype. A residual add whose other buffer dies here becomes a Sum post-op (oneDNN
// accumulates into that buffer in place; the kernel checks at run time that nothing
// else holds it and falls back to a Binary add otherwise).
//
//   %y = onednn::matmul(%x, %w, %b); %g = aten::gelu(%y); %o = aten::add(%g, %r)
//      → %o = onednn::matmul(%x, %w, %b, %r) {post_ops=[eltwise:gelu_erf, sum(arg3)]}
//
// It refuses (graph untouched) when a middle value is a graph output or has another use, or
// when eager lays the user's result out unlike the node's (the kernel writes one layout). A
// chain stops before it would pass oneDNN's limit on post-ops (the rest stays ATen ops, which
// later passes may fuse), rather than have oneDNN refuse the whole node at run time.
#include "passes/fusion/fusion_util.h"
#include "passes/fusion/postop_table.h"
#include "passes/pass.h"

namespace fxcpp {

using namespace fusion;

bool fuse_postops_pass(Graph& g, const PassContext&) {
  if (!onednn_available()) return false;
  bool changed = false;
  for (Node* n : g.nodes()) {
    if (n->dead || !is_onednn_node(n)) continue;
    Node* head = n;
    int len = 0;  // oneDNN post-ops in head's chain
    for (const PostOp& p : n->fused->post_ops) len += onednn_post_op_len(p);
    for (;;) {
      const Value* v = head->outputs[0];
      auto uses = g.use_counts();
      Node* u = sole_user(g, v, uses);
      if (!u || u->outputs.size() != 1 || !onednn_tensor(u->outputs[0])) break;
      const Value* out = u->outputs[0];
      if (out->meta->dtype != v->meta->dtype || !same_sizes(*out->meta, *v->meta)) break;
      if (!same_layout(*out->meta, *v->meta)) break;  // the kernel would return v's layout as out's
      auto m = match_post_op(*u, v);
      if (!m) break;
      int more = 0;
      for (const PostOp& p : m->ops) more += onednn_post_op_len(p);
      if (len + more > kMaxOnednnPostOps) break;
      len += more;
      auto f = std::make_shared<FusedOp>(*head->fused);
      std::vector<Arg> args = head->args;
      for (PostOp p : m->ops) {
        p.from = u->name;
        if (p.kind == PostOp::Kind::Binary) {
          const Value* o = value_of(*m->operand);
          // Sum in place: same shape, and this is the operand's only use; never a user's tensor.
          if (p.alg == "add" && m->ops.size() == 1 && same_sizes(*o->meta, *out->meta) && uses[o->id] == 1 &&
              !o->is_input && !o->constant && !g.is_graph_output(o)) {
            p.kind = PostOp::Kind::Sum;
          }
          p.arg = static_cast<int>(args.size());
          args.push_back(*m->operand);
        }
        f->post_ops.push_back(p);
      }
      f->covers.push_back(u->name);
      std::string target = head->target;
      head = g.replace_with_fused({head, u}, target, std::move(args), f);
      changed = true;
    }
  }
  if (changed) g.remove_dead_nodes();
  return changed;
}

}  // namespace fxcpp
