// The executor: a plan of steps built once from a Graph, each bound to one kernel.
// run() is const: every call gets its own frame of value slots, so one Executable
// can be called from many threads at once. A slot is released after its last use.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "runtime/kernel.h"

namespace fxcpp {

// How one argument is produced at run time.
struct ArgSlot {
  enum class Kind { Slot, Const, List };
  Kind kind = Kind::Const;
  int slot = -1;
  c10::IValue constant;
  std::vector<ArgSlot> elems;
  c10::TypePtr elem_type;  // List: the element type the schema expects
  bool wrap_number = false;  // a number passed where the schema expects a Tensor
};

struct Step {
  const Node* node = nullptr;
  std::unique_ptr<Kernel> kernel;
  std::vector<ArgSlot> args;
  std::vector<int> outs;
  std::vector<int> release;  // slots whose last use is this step
};

class Executable {
 public:
  // Takes the graph after the pass pipeline; binds every node to a kernel.
  explicit Executable(std::shared_ptr<const Graph> graph, const KernelRegistry& registry = kernel_registry());

  std::vector<c10::IValue> run(std::vector<c10::IValue> inputs) const;
  // Same, timing every step (ns) into `times` (resized to the step count).
  std::vector<c10::IValue> run_profiled(std::vector<c10::IValue> inputs, std::vector<int64_t>& times) const;
  // Runs keeping every value; returns value name -> value (verify mode, tests).
  std::unordered_map<std::string, c10::IValue> run_debug(std::vector<c10::IValue> inputs) const;

  const std::vector<Step>& steps() const { return steps_; }
  const Graph& graph() const { return *graph_; }
  std::string str() const;  // the plan: one line per step with its kernel and released slots

 private:
  std::vector<c10::IValue> execute(std::vector<c10::IValue> inputs, std::vector<int64_t>* times, bool keep_all,
                                   std::vector<c10::IValue>* frame_out) const;
  std::shared_ptr<const Graph> graph_;
  std::vector<Step> steps_;
  std::vector<ArgSlot> outputs_;
  size_t num_slots_ = 0;
  size_t max_args_ = 0;
};

}  // namespace fxcpp
