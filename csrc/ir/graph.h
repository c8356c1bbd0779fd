// fxcpp's graph IR: a Graph owns Values and Nodes in topological order.
// A Value is produced by one Node (or is a graph input / constant); a Node's
// arguments are Args, which are Value references, constants, or lists of both
// (an ATen `SymInt[]` may mix constants with symbolic Values).
#pragma once
#include <ATen/core/ivalue.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/function_schema.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/fused_op.h"
#include "ir/program.h"

namespace fxcpp {

class ChoiceCache;  // runtime/choice_cache.h
class SharedChoices;  // runtime/shared_choices.h

// One dimension: a concrete size, or a symbol (e.g. "s0", "2*s0"), or unknown ("?").
struct Dim {
  int64_t value = 0;
  std::string sym;  // empty: concrete
  static Dim of(int64_t v) { return Dim{v, ""}; }
  static Dim symbol(std::string s) { return Dim{0, std::move(s)}; }
  static Dim unknown() { return Dim{0, "?"}; }
  bool is_static() const { return sym.empty(); }
  bool is_unknown() const { return sym == "?"; }
  bool operator==(const Dim& o) const { return value == o.value && sym == o.sym; }
  std::string str() const { return sym.empty() ? std::to_string(value) : sym; }
};

struct TensorMeta {
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<Dim> sizes;
  std::vector<Dim> strides;  // may be empty when unknown
  c10::Device device{c10::kCPU};
  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  int64_t static_nbytes() const;  // -1 when a size is symbolic
  std::string str() const;
};

enum class ValueKind { Tensor, Int, Float, Bool, TensorList, Any };
const char* kind_name(ValueKind k);
// The kind kind_name(k) names, or nullopt (the Python bindings and saved plans spell kinds so).
std::optional<ValueKind> value_kind_named(const std::string& name);

struct Node;

struct Value {
  int id = -1;
  std::string name;
  ValueKind kind = ValueKind::Any;
  std::optional<TensorMeta> meta;  // tensors only
  Node* producer = nullptr;        // null for graph inputs and constants
  int output_index = 0;
  bool is_input = false;
  // The same tensor at every call until a parameter changes: a static input (a parameter
  // or buffer) or, marked by the static_values pass, a value computed only from those and
  // constants. A kernel may keep a packed copy of it (kept fresh by version and write
  // guards); other inputs and values can be new each call.
  bool is_static = false;
  std::optional<c10::IValue> constant;  // set for constants (get_attr tensors, etc.)
};

struct Arg {
  enum class Kind { Value, Const, List };
  Kind kind = Kind::Const;
  Value* value = nullptr;
  c10::IValue constant;
  std::vector<Arg> elems;
  static Arg of(Value* v) { Arg a; a.kind = Kind::Value; a.value = v; return a; }
  static Arg constant_of(c10::IValue c) { Arg a; a.kind = Kind::Const; a.constant = std::move(c); return a; }
  static Arg list_of(std::vector<Arg> e) { Arg a; a.kind = Kind::List; a.elems = std::move(e); return a; }
  bool is_none() const { return kind == Kind::Const && constant.isNone(); }
  std::string str() const;
};

// Call `fn(Value*)` for every Value an Arg references (recursing into lists).
template <typename F>
void for_each_value(const Arg& a, F&& fn) {
  if (a.kind == Arg::Kind::Value) fn(a.value);
  for (const auto& e : a.elems) for_each_value(e, fn);
}

struct Node {
  std::string name;    // the FX node's name
  std::string target;  // "aten::add.Tensor" or "prim::getitem" ...
  std::string fx_repr; // FX format_node(), for error messages
  // ATen nodes: the op's schema; args are normalized to schema order, with defaults filled in.
  std::optional<c10::OperatorHandle> op;
  std::vector<Arg> args;
  std::vector<Value*> outputs;
  bool dead = false;
  // Set on oneDNN fusion nodes (target "onednn::conv" / "onednn::matmul"); null otherwise.
  std::shared_ptr<FusedOp> fused;
  // Set on cpu_fused nodes (target "cpu::fused"): the group's program; null otherwise.
  std::shared_ptr<Program> program;
  // Where a kernel that measures its first calls (oneDNN's GEMMs and convolutions, attention)
  // reads and records those choices across processes (Options.cache); null when off.
  std::shared_ptr<ChoiceCache> choice_cache;
  // The partition's choices measured in this process, shared by nodes that compute the same
  // thing (Graph::set_shared_choices); null: each node measures its own.
  std::shared_ptr<SharedChoices> shared_choices;

  bool is_aten() const { return op.has_value(); }
  const c10::FunctionSchema& schema() const { return op->schema(); }
  // Positional arg by schema name; throws naming the node if absent.
  const Arg& arg(const std::string& name) const;
  std::string describe() const;  // "node 'add_1' (aten::add.Tensor): <fx repr>"
};

// An error about one node: every message names the FX node.
struct NodeError : std::runtime_error {
  NodeError(const Node& n, const std::string& what, std::exception_ptr cause = nullptr)
      : std::runtime_error(n.describe() + ": " + what), node_name(n.name), cause(std::move(cause)) {}
  std::string node_name;
  std::exception_ptr cause;  // the kernel's own exception (e.g. one raised in Python), if any
};

class Graph {
 public:
  Value* add_input(const std::string& name, ValueKind kind, std::optional<TensorMeta> meta, bool is_static = false);
  Value* add_constant(const std::string& name, c10::IValue v, std::optional<TensorMeta> meta);
  // Adds a node at the end. For ATen targets ("aten::add.Tensor", any namespace),
  // the schema is looked up in the dispatcher and args/kwargs normalized.
  Node* add_node(const std::string& name, const std::string& target, std::vector<Arg> args,
                 const std::vector<std::pair<std::string, Arg>>& kwargs, const std::string& fx_repr,
                 const std::vector<std::pair<ValueKind, std::optional<TensorMeta>>>& outputs);
  void set_outputs(std::vector<Arg> outs) { outputs_ = std::move(outs); }
  // Replaces `chain` (anchor first, in graph order) by one fused node placed where the last
  // chain node was, producing that node's output Value; the chain nodes are marked dead.
  Node* replace_with_fused(const std::vector<Node*>& chain, const std::string& target, std::vector<Arg> args,
                           std::shared_ptr<FusedOp> fused);
  // Replaces a group of nodes by one node producing `outputs` (Values the group's members
  // produced and others still read), named `name`. Members are marked dead; the new node goes
  // where the last member was, so call sort_topologically() if a reader of an output lies
  // between members.
  Node* replace_with_group(const std::vector<Node*>& members, const std::string& name, const std::string& target,
                           std::vector<Arg> args, std::vector<Value*> outputs, std::shared_ptr<Program> program);
  // Reorders live nodes so every node follows its producers, keeping the current order
  // wherever it already does. Throws on a cycle.
  void sort_topologically();

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Arg>& outputs() const { return outputs_; }
  std::vector<Arg>& mutable_outputs() { return outputs_; }
  // Live nodes in topological order.
  std::vector<Node*> nodes() const;
  const std::vector<std::unique_ptr<Value>>& values() const { return values_; }
  size_t num_values() const { return values_.size(); }

  // Rewrites every use of `from` (in node args and graph outputs) to `to`.
  void replace_all_uses(Value* from, Value* to);
  // Number of uses of each value id (graph outputs count as uses).
  std::vector<int> use_counts() const;
  bool is_graph_output(const Value* v) const;
  void remove_dead_nodes();  // drops nodes marked dead
  std::string str() const;
  // An Executable's plan points into the graph: once one is built the graph is read-only.
  void freeze() { frozen_ = true; }
  bool frozen() const { return frozen_; }
  // Options.pack_weights=False: no oneDNN node keeps a packed copy of its weight.
  void disable_weight_packing();
  // Every fused node reads and records its first-call kernel choices in `cache` (Options.cache).
  void set_choice_cache(std::shared_ptr<ChoiceCache> cache);
  // Every node reads and records its first-call choices in `shared`, one table for this graph.
  void set_shared_choices(std::shared_ptr<SharedChoices> shared);
  void check_mutable(const char* what) const {
    if (frozen_) throw std::logic_error(std::string("fxcpp: cannot ") + what + ": an Executable was built from this graph");
  }

 private:
  Value* new_value(const std::string& name, ValueKind kind, std::optional<TensorMeta> meta);
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_;
  std::vector<Arg> outputs_;
  bool frozen_ = false;
};

std::optional<c10::OperatorHandle> find_op(const std::string& target);

// A value that holds the same tensor call after call: static (see Value) or a constant.
inline bool long_lived(const Value* v) { return v && (v->is_static || v->constant); }

}  // namespace fxcpp
