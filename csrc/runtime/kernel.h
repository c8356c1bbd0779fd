// The kernel interface and the registry that binds each node to one kernel.
// A kernel is created once per plan step at compile time; run() is const and
// must be safe to call from many threads at once.
#pragma once
#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace fxcpp {

using Stack = std::vector<c10::IValue>;

class Kernel {
 public:
  virtual ~Kernel() = default;
  // The stack holds the node's args in schema order; run() replaces them with its outputs.
  virtual void run(Stack& stack) const = 0;
  // One of "aten", "onednn", "cpu_fused", "cuda" (the Report's kernel names), or "prim".
  virtual const char* kind() const = 0;
  // Which implementation ran and why, for explain() (e.g. "onednn brg:avx512_core, weight
  // packed once"); empty when the kind says it all. Safe to call while run() runs elsewhere.
  virtual std::string describe() const { return ""; }
  // What ran at the calls so far, for explain()'s kernel column: kind(), or "aten" where the
  // kernel kept eager's ATen ops instead (measured faster, a refused primitive), or
  // "<kind>+aten" where it ran both (another shape, a non-finite input). kind() before a call.
  virtual std::string ran() const { return kind(); }
  // Options.freeze (executor_freeze.cpp). may_freeze_arg: before any call, whether arg `pos` is
  // one the kernel could run without once it has packed it (by what the node is).
  // can_freeze_arg: whether every call so far ran from a copy of arg `pos` the kernel holds (a
  // packed weight), so it can run without reading that arg again; freeze(args) makes it do so
  // for good (args: a call's stack, for the weights it must still copy). Both run on the thread
  // making a plan's first call, which no other call runs beside.
  virtual bool may_freeze_arg(int /*pos*/) const { return false; }
  virtual bool can_freeze_arg(int /*pos*/) const { return false; }
  virtual void freeze(const Stack& /*args*/) const {}
  // Before the first call, for each kernel reading an input Options.freeze releases: it is to
  // run from copies it holds (a kernel that would otherwise read that input at each call packs
  // it instead: matmul_kernel.cpp, widens_per_call).
  virtual void will_freeze() const {}
  // Before the first call: which of the node's outputs the plan reads (a later node, or a graph
  // output such as a training forward's tensors saved for its backward). A kernel may choose
  // its path by it.
  virtual void set_outputs_read(const std::vector<bool>& /*read*/) {}
};

// Returns a kernel for the node, or nullptr when it does not take this node.
using KernelFactory = std::function<std::unique_ptr<Kernel>(const Node&)>;

class KernelRegistry {
 public:
  // Factories for one op name ("aten::convolution"), tried newest first, before the fallbacks.
  void add(const std::string& op_name, KernelFactory f) { by_op_[op_name].push_back(std::move(f)); }
  // The kernel for a node: a registered specialized kernel, else a boxed ATen call
  // (ATen nodes), else a prim kernel. Throws NodeError when nothing can run it.
  std::unique_ptr<Kernel> select(const Node& n) const;

 private:
  std::unordered_map<std::string, std::vector<KernelFactory>> by_op_;
};

KernelRegistry& kernel_registry();

// The fallbacks, one file each.
std::unique_ptr<Kernel> make_aten_kernel(const Node& n);
std::unique_ptr<Kernel> make_prim_kernel(const Node& n);  // nullptr for an unknown prim
std::unordered_map<std::string, size_t> prim_arities();  // the prims the core runs, with their arg counts

}  // namespace fxcpp
