// Graph::str(): one line per node, in the spirit of torch.fx's Graph.__str__.
#include <sstream>

#include "ir/graph.h"

namespace fxcpp {

static std::string value_decl(const Value* v) {
  std::string s = "%" + v->name + " : ";
  s += v->meta ? v->meta->str() : kind_name(v->kind);
  if (v->is_static) s += " static";
  return s;
}

std::string Graph::str() const {
  std::ostringstream os;
  os << "graph(";
  for (size_t i = 0; i < inputs_.size(); ++i) os << (i ? ", " : "") << value_decl(inputs_[i]);
  os << "):\n";
  for (const auto& v : values_)
    if (v->constant) os << "  " << value_decl(v.get()) << " = constant " << Arg::constant_of(*v->constant).str() << "\n";
  for (const Node* n : nodes()) {
    os << "  ";
    for (size_t i = 0; i < n->outputs.size(); ++i) os << (i ? ", " : "") << value_decl(n->outputs[i]);
    if (n->outputs.empty()) os << "()";
    os << " = " << n->target << "(";
    for (size_t i = 0; i < n->args.size(); ++i) os << (i ? ", " : "") << n->args[i].str();
    os << ")";
    if (n->fused) os << "  " << n->fused->str();
    if (n->program) os << "  " << n->program->str();
    os << "\n";
  }
  os << "  return (";
  for (size_t i = 0; i < outputs_.size(); ++i) os << (i ? ", " : "") << outputs_[i].str();
  os << ")\n";
  return os.str();
}

std::string PostOp::str() const {
  static const char* kinds[] = {"eltwise", "binary", "sum"};
  std::ostringstream os;
  os << kinds[static_cast<int>(kind)] << ":" << alg;
  if (kind == Kind::Eltwise && (alpha != 0.f || beta != 0.f)) os << "(" << alpha << "," << beta << ")";
  if (arg >= 0) os << "(arg" << arg << ")";
  return os.str();
}

static std::string ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string FusedOp::str(bool with_covers) const {
  std::ostringstream os;
  os << "{" << anchor_op;
  if (anchor == Anchor::Conv)
    os << " stride=" << ints(stride) << " padding=" << ints(padding) << " dilation=" << ints(dilation)
       << (transposed ? " transposed output_padding=" + ints(output_padding) : "") << " groups=" << groups
       << (channels_last ? " channels_last" : "") << (blocked_layout ? " blocked_layout" : "")
       << (pad_before.empty() ? "" : " pad_before=" + ints(pad_before) + " pad_after=" + ints(pad_after));
  if (weight_nk) os << " weight_nk";
  if (flatten_src) os << " flatten_src";
  if (!pack_weight) os << " no_pack";
  if (bn_arg >= 0) os << " bn(arg" << bn_arg << ", eps=" << bn_eps << ")";
  if (!post_ops.empty()) {
    os << " post_ops=[";
    for (size_t i = 0; i < post_ops.size(); ++i) os << (i ? ", " : "") << post_ops[i].str();
    os << "]";
  }
  if (with_covers) {
    os << " covers=[";
    for (size_t i = 0; i < covers.size(); ++i) os << (i ? "," : "") << covers[i];
    os << "]";
  }
  os << "}";
  return os.str();
}

}  // namespace fxcpp
