#include "ir/graph.h"

#include <algorithm>

#include <ATen/core/dispatch/Dispatcher.h>

#include <sstream>
#include <unordered_set>

namespace fxcpp {

const char* kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::Tensor: return "Tensor";
    case ValueKind::Int: return "int";
    case ValueKind::Float: return "float";
    case ValueKind::Bool: return "bool";
    case ValueKind::TensorList: return "Tensor[]";
    case ValueKind::Any: return "any";
  }
  return "?";
}

std::optional<ValueKind> value_kind_named(const std::string& name) {
  for (ValueKind k : {ValueKind::Tensor, ValueKind::Int, ValueKind::Float, ValueKind::Bool, ValueKind::TensorList, ValueKind::Any})
    if (name == kind_name(k)) return k;
  return std::nullopt;
}

int64_t TensorMeta::static_nbytes() const {
  int64_t n = static_cast<int64_t>(c10::elementSize(dtype));
  for (const Dim& d : sizes) {
    if (!d.is_static()) return -1;
    n *= d.value;
  }
  return n;
}

std::string TensorMeta::str() const {
  std::ostringstream os;
  os << c10::toString(dtype) << "[";
  for (size_t i = 0; i < sizes.size(); ++i) os << (i ? ", " : "") << sizes[i].str();
  os << "]";
  if (device.type() != c10::kCPU) os << "@" << device.str();
  return os.str();
}

std::string Arg::str() const {
  switch (kind) {
    case Kind::Value: return "%" + value->name;
    case Kind::Const: {
      if (constant.isTensor()) {
        const auto& t = constant.toTensor();
        return "tensor(" + std::string(c10::toString(t.scalar_type())) + ", numel=" + std::to_string(t.numel()) + ")";
      }
      std::ostringstream os;
      os << constant;
      return os.str();
    }
    case Kind::List: {
      std::string s = "[";
      for (size_t i = 0; i < elems.size(); ++i) s += (i ? ", " : "") + elems[i].str();
      return s + "]";
    }
  }
  return "?";
}

const Arg& Node::arg(const std::string& arg_name) const {
  if (op) {
    const auto& a = schema().arguments();
    for (size_t i = 0; i < a.size() && i < args.size(); ++i)
      if (a[i].name() == arg_name) return args[i];
  }
  throw NodeError(*this, "has no argument '" + arg_name + "'");
}

std::string Node::describe() const {
  std::string s = "node '" + name + "' (" + target + ")";
  if (!fx_repr.empty()) s += " [" + fx_repr + "]";
  return s;
}

std::optional<c10::OperatorHandle> find_op(const std::string& target) {
  auto sep = target.find("::");
  if (sep == std::string::npos) return std::nullopt;
  auto dot = target.find('.', sep + 2);
  std::string name = dot == std::string::npos ? target : target.substr(0, dot);
  std::string overload = dot == std::string::npos ? "" : target.substr(dot + 1);
  if (overload == "default") overload = "";
  return c10::Dispatcher::singleton().findSchema({name, overload});
}

Value* Graph::new_value(const std::string& name, ValueKind kind, std::optional<TensorMeta> meta) {
  auto v = std::make_unique<Value>();
  v->id = static_cast<int>(values_.size());
  v->name = name;
  v->kind = kind;
  v->meta = std::move(meta);
  values_.push_back(std::move(v));
  return values_.back().get();
}

Value* Graph::add_input(const std::string& name, ValueKind kind, std::optional<TensorMeta> meta, bool is_static) {
  Value* v = new_value(name, kind, std::move(meta));
  v->is_input = true;
  v->is_static = is_static;
  inputs_.push_back(v);
  return v;
}

Value* Graph::add_constant(const std::string& name, c10::IValue c, std::optional<TensorMeta> meta) {
  ValueKind kind = c.isTensor() ? ValueKind::Tensor : c.isInt() ? ValueKind::Int : c.isDouble() ? ValueKind::Float
                   : c.isBool() ? ValueKind::Bool : ValueKind::Any;
  Value* v = new_value(name, kind, std::move(meta));
  v->constant = std::move(c);
  return v;
}

Node* Graph::add_node(const std::string& name, const std::string& target, std::vector<Arg> args,
                      const std::vector<std::pair<std::string, Arg>>& kwargs, const std::string& fx_repr,
                      const std::vector<std::pair<ValueKind, std::optional<TensorMeta>>>& outputs) {
  auto node = std::make_unique<Node>();
  node->name = name;
  node->target = target;
  node->fx_repr = fx_repr;
  if (target.rfind("prim::", 0) != 0) {
    node->op = find_op(target);
    if (!node->op) throw NodeError(*node, "no operator with this name is registered with the dispatcher");
    // Normalize to the schema's positional order, filling in defaults.
    const auto& formals = node->schema().arguments();
    if (args.size() > formals.size())
      throw NodeError(*node, "got " + std::to_string(args.size()) + " positional args, schema takes " +
                                 std::to_string(formals.size()));
    std::vector<std::optional<Arg>> slots(formals.size());
    for (size_t i = 0; i < args.size(); ++i) slots[i] = std::move(args[i]);
    for (const auto& [kw, a] : kwargs) {
      size_t i = 0;
      while (i < formals.size() && formals[i].name() != kw) ++i;
      if (i == formals.size()) throw NodeError(*node, "unknown keyword argument '" + kw + "'");
      slots[i] = a;
    }
    args.clear();
    for (size_t i = 0; i < formals.size(); ++i) {
      if (slots[i]) {
        args.push_back(std::move(*slots[i]));
      } else if (formals[i].default_value()) {
        args.push_back(Arg::constant_of(*formals[i].default_value()));
      } else {
        throw NodeError(*node, "missing required argument '" + formals[i].name() + "'");
      }
    }
  } else if (!kwargs.empty()) {
    throw NodeError(*node, "prim nodes take no keyword arguments");
  }
  node->args = std::move(args);
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string vname = outputs.size() == 1 ? name : name + "." + std::to_string(i);
    Value* v = new_value(vname, outputs[i].first, outputs[i].second);
    v->producer = node.get();
    v->output_index = static_cast<int>(i);
    node->outputs.push_back(v);
  }
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

Node* Graph::replace_with_fused(const std::vector<Node*>& chain, const std::string& target, std::vector<Arg> args,
                               std::shared_ptr<FusedOp> fused) {
  check_mutable("fuse nodes");
  Node* last = chain.back();
  auto node = std::make_unique<Node>();
  // Named after its anchor (the first FX node it covers), e.g. "addmm" rather than a view before it.
  Node* anchor = chain.front();
  if (fused && !fused->covers.empty())
    for (Node* n : chain)
      if (n->name == fused->covers.front()) anchor = n;
  node->name = anchor->name;
  node->target = target;
  node->fx_repr = anchor->fx_repr;
  node->args = std::move(args);
  node->fused = std::move(fused);
  Value* out = last->outputs.at(0);
  out->producer = node.get();
  out->output_index = 0;
  node->outputs = {out};
  for (Node* n : chain) n->dead = true;
  last->outputs.clear();
  auto pos = std::find_if(nodes_.begin(), nodes_.end(), [&](const auto& p) { return p.get() == last; });
  return nodes_.insert(pos, std::move(node))->get();
}

Node* Graph::replace_with_group(const std::vector<Node*>& members, const std::string& name, const std::string& target,
                               std::vector<Arg> args, std::vector<Value*> outputs, std::shared_ptr<Program> program) {
  check_mutable("fuse nodes");
  auto node = std::make_unique<Node>();
  node->name = name;
  node->target = target;
  node->fx_repr = "cpu_fused group of " + std::to_string(members.size()) + " nodes";
  node->args = std::move(args);
  node->program = std::move(program);
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i]->producer = node.get();
    outputs[i]->output_index = static_cast<int>(i);
  }
  node->outputs = std::move(outputs);
  for (Node* n : members) {
    n->dead = true;
    n->outputs.clear();  // the group's outputs now belong to the new node; the rest are gone
  }
  auto pos = std::find_if(nodes_.begin(), nodes_.end(), [&](const auto& p) { return p.get() == members.back(); });
  return nodes_.insert(pos, std::move(node))->get();
}

void Graph::sort_topologically() {
  remove_dead_nodes();
  std::vector<std::unique_ptr<Node>> sorted;
  std::vector<bool> done(values_.size(), false);
  for (const Value* v : inputs_) done[v->id] = true;
  for (const auto& v : values_)
    if (v->constant || !v->producer) done[v->id] = true;
  // In the current order; a node whose inputs are not out yet waits, and goes right after
  // the node that completes them, so nothing moves further than it must.
  std::vector<std::unique_ptr<Node>> waiting;
  auto ready = [&](const Node& n) {
    bool ok = true;
    for (const auto& a : n.args) for_each_value(a, [&](Value* v) { ok &= done[v->id]; });
    return ok;
  };
  auto emit = [&](std::unique_ptr<Node> n) {
    for (const Value* v : n->outputs) done[v->id] = true;
    sorted.push_back(std::move(n));
  };
  for (auto& n : nodes_) {
    if (!ready(*n)) {
      waiting.push_back(std::move(n));
      continue;
    }
    emit(std::move(n));
    for (bool more = true; more;) {  // what the node just emitted unblocked, in order
      more = false;
      for (auto it = waiting.begin(); it != waiting.end(); ++it)
        if (ready(**it)) {
          emit(std::move(*it));
          waiting.erase(it);
          more = true;
          break;
        }
    }
  }
  if (!waiting.empty()) throw std::logic_error("fxcpp: the graph has a cycle (node '" + waiting.front()->name + "')");
  nodes_ = std::move(sorted);
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_)
    if (!n->dead) out.push_back(n.get());
  return out;
}

static void replace_in(Arg& a, Value* from, Value* to) {
  if (a.kind == Arg::Kind::Value && a.value == from) a.value = to;
  for (auto& e : a.elems) replace_in(e, from, to);
}

void Graph::replace_all_uses(Value* from, Value* to) {
  for (auto& n : nodes_)
    for (auto& a : n->args) replace_in(a, from, to);
  for (auto& a : outputs_) replace_in(a, from, to);
}

std::vector<int> Graph::use_counts() const {
  std::vector<int> counts(values_.size(), 0);
  auto count = [&](Value* v) { counts[v->id]++; };
  for (const auto& n : nodes_)
    if (!n->dead)
      for (const auto& a : n->args) for_each_value(a, count);
  for (const auto& a : outputs_) for_each_value(a, count);
  return counts;
}

bool Graph::is_graph_output(const Value* v) const {
  bool found = false;
  for (const auto& a : outputs_) for_each_value(a, [&](Value* o) { found |= (o == v); });
  return found;
}

void Graph::remove_dead_nodes() {
  std::vector<std::unique_ptr<Node>> live;
  for (auto& n : nodes_)
    if (!n->dead) live.push_back(std::move(n));
  // Dead nodes' Values stay owned by values_ (ids stay stable); nothing references them.
  nodes_ = std::move(live);
}

void Graph::disable_weight_packing() {
  check_mutable("disable weight packing");
  for (Node* n : nodes()) {
    if (!n->fused || !n->fused->pack_weight) continue;
    auto f = std::make_shared<FusedOp>(*n->fused);  // FusedOps may be shared between nodes
    f->pack_weight = false;
    n->fused = std::move(f);
  }
}

void Graph::set_choice_cache(std::shared_ptr<ChoiceCache> cache) {
  check_mutable("set the choice cache");
  for (Node* n : nodes()) n->choice_cache = cache;
}

void Graph::set_shared_choices(std::shared_ptr<SharedChoices> shared) {
  check_mutable("share the first-call choices");
  for (Node* n : nodes()) n->shared_choices = shared;
}

}  // namespace fxcpp
