// The executor: a plan of steps built once from a Graph, each bound to one kernel.
// run() is const: every call gets its own frame of value slots, so one Executable
// can be called from many threads at once. A slot is released after its last use.
//
// Steps whose outputs are static (computed only from parameters, buffers and constants;
// the static_values pass marks them) run at the first call and again only when one of
// their source tensors changes (identity, version or a write, as for packed weights);
// in between, the values the rest of the plan reads from them come from a cache.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "runtime/kernel.h"
#include "runtime/tensor_stamp.h"

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
  std::vector<int> static_args;  // positions of args that are static tensors (maybe write-guarded)
};

// The parameter-derived part of a plan, and the values it last produced.
struct StaticPart {
  std::vector<bool> step;          // per step: computed only from static sources
  std::vector<int> sources;        // static input slots those steps read
  std::vector<at::Tensor> consts;  // tensor constants they read (a user may still write one)
  std::vector<int> frontier;       // their output slots read by the rest of the plan
  std::vector<int> frontier_index; // per slot: its position in `frontier`, or -1
  bool empty() const { return frontier.empty(); }
};
struct StaticValues {
  std::vector<TensorStamp> stamps;  // of sources, then consts
  std::vector<c10::IValue> values;  // per frontier slot
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

  // Options.freeze, after a call with `inputs`: each static input whose every use is an arg a
  // kernel can run without (can_freeze_arg) is frozen: those kernels run from their packs for
  // good and never read it again. Returns the input positions frozen, which the caller may
  // release (backend/freeze.py). Call it between calls, never during one.
  std::vector<int> freeze_packed_weights(const std::vector<c10::IValue>& inputs) const;

  const std::vector<Step>& steps() const { return steps_; }
  const StaticPart& static_part() const { return static_; }
  // The most intermediate bytes (outputs included, inputs and parameters not) alive at once
  // over the plan, from static metas; -1 when a size is symbolic. Every slot is freed at its
  // last use, so this is what one call holds at its peak.
  int64_t planned_peak_bytes() const { return planned_peak_bytes_; }
  // Every tensor the plan touches is static and all of them together fit in kBriefBytes: a call
  // takes about a microsecond, less than handing the GIL over and back costs (the bindings keep it).
  bool brief() const { return brief_; }
  static constexpr int64_t kBriefBytes = 64 << 10;
  const Graph& graph() const { return *graph_; }
  std::string str() const;  // the plan: one line per step with its kernel and released slots

 private:
  std::vector<c10::IValue> execute(std::vector<c10::IValue> inputs, std::vector<int64_t>* times, bool keep_all,
                                   std::vector<c10::IValue>* frame_out) const;
  void plan_static_part();
  void plan_peak_bytes();
  void plan_brief();
  std::vector<at::Tensor> static_sources(const std::vector<c10::IValue>& frame) const;
  std::shared_ptr<const Graph> graph_;
  std::vector<Step> steps_;
  std::vector<ArgSlot> outputs_;
  size_t num_slots_ = 0;
  size_t max_args_ = 0;
  StaticPart static_;
  int64_t planned_peak_bytes_ = 0;
  bool brief_ = false;
  // Per step: >0 runs left in which to check that the kernel leaves copy-on-write args so;
  // 0 it does; -1 it copies them (an op reading through a writable pointer): give it views.
  std::unique_ptr<std::atomic<int>[]> cow_state_;
  mutable std::mutex static_mu_;
  mutable std::shared_ptr<const StaticValues> static_values_;  // under static_mu_
};

}  // namespace fxcpp
