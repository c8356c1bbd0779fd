// Graph::str(): one line per node, in the spirit of torch.fx's Graph.__str__.
#include <sstream>

#include "ir/graph.h"

namespace fxcpp {

static std::string value_decl(const Value* v) {
  std::string s = "%" + v->name + " : ";
  s += v->meta ? v->meta->str() : kind_name(v->kind);
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
    os << ")\n";
  }
  os << "  return (";
  for (size_t i = 0; i < outputs_.size(); ++i) os << (i ? ", " : "") << outputs_[i].str();
  os << ")\n";
  return os.str();
}

}  // namespace fxcpp
