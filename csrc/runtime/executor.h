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

// Appends the slots an argument reads (a list's elements included).
void collect_slots(const ArgSlot& a, std::vector<int>& out);

struct Step {
  const Node* node = nullptr;
  std::unique_ptr<Kernel> kernel;
  std::vector<ArgSlot> args;
  std::vector<int> outs;
  std::vector<int> release;  // slots whose last use is this step
  std::vector<int> static_args;  // positions of args that are static tensors (maybe write-guarded)
  std::vector<int> arg_value_slots;  // per arg: the slot it reads as it is, else -1 (value_bounds.h)
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

  // Options.freeze (executor_freeze.cpp, backend/freeze.py), before the plan's first call: the
  // positions of the static inputs whose every use is an arg its kernel could run without once
  // packed (Kernel::may_freeze_arg). The caller may release them, after handing them to
  // adopt_released: the plan then reads those tensors in place of what calls pass. During the
  // first call each is dropped right after its last reader, once every kernel reading it runs
  // from its own pack (those kernels are frozen): a weight's memory goes as soon as its pack is
  // made, so the first call holds one pack more, not a second copy of every weight. One that a
  // kernel still reads as it is (eager's path measured faster) stays adopted: still one copy.
  std::vector<int> freeze_candidates(const std::vector<c10::IValue>& inputs) const;
  void adopt_released(const std::vector<c10::IValue>& inputs, const std::vector<int>& positions) const;
  // How many adopted inputs are still held (kept for good once the first call has returned).
  size_t adopted_count() const;
  // Whether the first call after adopt_released has yet to return.
  bool resolving() const { return resolving_.load(std::memory_order_acquire); }

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
  void plan_bounds();
  std::vector<at::Tensor> static_sources(const std::vector<c10::IValue>& frame) const;
  // Throws, naming the input, where a tensor has no memory but the plan reads it (not a released slot).
  void check_input_memory(const std::vector<c10::IValue>& frame) const;
  // Options.freeze: the adopted inputs' tensors into a call's frame; after step `i` of the first
  // call, freezes the readers of each adopted slot read last there and drops it if they all can.
  void put_adopted(std::vector<c10::IValue>& frame) const;
  void drop_adopted_after(size_t i, std::vector<c10::IValue>& inputs_frame) const;
  // (step, arg position) of every step reading `slot` as a direct arg, in step order.
  std::vector<std::pair<size_t, int>> readers_of(int slot) const;
  std::shared_ptr<const Graph> graph_;
  std::vector<Step> steps_;
  std::vector<ArgSlot> outputs_;
  size_t num_slots_ = 0;
  size_t max_args_ = 0;
  StaticPart static_;
  int64_t planned_peak_bytes_ = 0;
  bool brief_ = false;
  // Whether calls keep a value_bounds table: a oneDNN kernel could use one, and no node writes
  // into a value other than a graph input (whose bound a kernel could have recorded before).
  bool keeps_bounds_ = false;
  // Per step: >0 runs left in which to check that the kernel leaves copy-on-write args so;
  // 0 it does; -1 it copies them (an op reading through a writable pointer): give it views.
  std::unique_ptr<std::atomic<int>[]> cow_state_;
  mutable std::mutex static_mu_;
  // Options.freeze: released inputs the plan holds (slot -> tensor). Changed only by the first
  // call, which holds adopt_mu_ while `resolving_`; other calls wait for it, then read only.
  mutable std::mutex adopt_mu_;
  mutable std::atomic<bool> resolving_{false};
  mutable std::unordered_map<int, at::Tensor> adopted_;
  // By slot: inputs handed to adopt_released (before any call); calls pass stand-ins without memory there.
  mutable std::vector<char> released_slot_;
  mutable std::unordered_map<int, std::vector<std::pair<size_t, int>>> adopted_readers_;  // readers_of each
  mutable std::shared_ptr<const StaticValues> static_values_;  // under static_mu_
  mutable std::atomic<bool> first_call_trimmed_{false};  // release_freed_memory after the first call
};

}  // namespace fxcpp
