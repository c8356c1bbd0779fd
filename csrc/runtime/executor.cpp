#include "runtime/executor.h"

#include "runtime/release_freed_memory.h"
#include "runtime/value_bounds.h"
#include "runtime/wrap_number.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <sstream>

namespace fxcpp {
namespace {

// The list element type a schema argument expects (SymInt runs as int: sizes are concrete at run time).
c10::TypePtr list_elem_type(const c10::Argument* formal) {
  if (!formal) return c10::AnyType::get();
  c10::TypePtr t = formal->type();
  if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
  auto list = t->cast<c10::ListType>();
  if (!list) return c10::AnyType::get();
  c10::TypePtr e = list->getElementType();
  if (e->kind() == c10::TypeKind::SymIntType) return c10::IntType::get();
  if (auto opt = e->cast<c10::OptionalType>())
    if (opt->getElementType()->kind() == c10::TypeKind::SymIntType) return c10::OptionalType::create(c10::IntType::get());
  return e;
}

ArgSlot make_slot_untyped(const Arg& a, const c10::Argument* formal);

c10::IValue build_list(const std::vector<c10::IValue>& elems, const c10::TypePtr& type) {
  c10::impl::GenericList list(type);
  list.reserve(elems.size());
  for (const auto& e : elems) list.push_back(e);
  return c10::IValue(std::move(list));
}

bool expects_tensor(const c10::Argument* formal) {
  if (!formal) return false;
  c10::TypePtr t = formal->type();
  if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
  return t->kind() == c10::TypeKind::TensorType;
}

ArgSlot make_slot(const Arg& a, const c10::Argument* formal) {
  ArgSlot s = make_slot_untyped(a, formal);
  if (expects_tensor(formal)) {
    if (s.kind == ArgSlot::Kind::Const) s.constant = wrap_number(s.constant);  // once, at compile time
    else s.wrap_number = true;
  }
  return s;
}

ArgSlot make_slot_untyped(const Arg& a, const c10::Argument* formal) {
  ArgSlot s;
  switch (a.kind) {
    case Arg::Kind::Value:
      if (a.value->constant) {
        s.kind = ArgSlot::Kind::Const;
        s.constant = *a.value->constant;
      } else {
        s.kind = ArgSlot::Kind::Slot;
        s.slot = a.value->id;
      }
      return s;
    case Arg::Kind::Const:
      s.constant = a.constant;
      return s;
    case Arg::Kind::List: {
      s.kind = ArgSlot::Kind::List;
      s.elem_type = list_elem_type(formal);
      bool all_const = true;
      for (const auto& e : a.elems) {
        s.elems.push_back(make_slot(e, nullptr));
        all_const &= s.elems.back().kind == ArgSlot::Kind::Const;
      }
      if (all_const) {  // fold a constant list once, at compile time
        std::vector<c10::IValue> vals;
        for (const auto& e : s.elems) vals.push_back(e.constant);
        s.constant = build_list(vals, s.elem_type);
        s.kind = ArgSlot::Kind::Const;
        s.elems.clear();
      }
      return s;
    }
  }
  return s;
}

c10::IValue materialize(const ArgSlot& a, const std::vector<c10::IValue>& frame) {
  switch (a.kind) {
    case ArgSlot::Kind::Slot: return a.wrap_number ? wrap_number(frame[a.slot]) : frame[a.slot];
    case ArgSlot::Kind::Const: return a.constant;
    case ArgSlot::Kind::List: {
      std::vector<c10::IValue> vals;
      vals.reserve(a.elems.size());
      for (const auto& e : a.elems) vals.push_back(materialize(e, frame));
      return build_list(vals, a.elem_type);
    }
  }
  return {};
}

}  // namespace

void collect_slots(const ArgSlot& a, std::vector<int>& out) {
  if (a.kind == ArgSlot::Kind::Slot) out.push_back(a.slot);
  for (const auto& e : a.elems) collect_slots(e, out);
}

Executable::Executable(std::shared_ptr<const Graph> graph, const KernelRegistry& registry) : graph_(std::move(graph)) {
  num_slots_ = graph_->num_values();
  std::vector<int> last_use(num_slots_, -1);
  for (const Node* n : graph_->nodes()) {
    Step step;
    step.node = n;
    step.kernel = registry.select(*n);
    for (size_t i = 0; i < n->args.size(); ++i) {
      const c10::Argument* formal = n->is_aten() ? &n->schema().arguments()[i] : nullptr;
      step.args.push_back(make_slot(n->args[i], formal));
    }
    for (const Value* v : n->outputs) step.outs.push_back(v->id);
    for (const ArgSlot& a : step.args)
      step.arg_value_slots.push_back(a.kind == ArgSlot::Kind::Slot && !a.wrap_number ? a.slot : -1);
    for (size_t i = 0; i < n->args.size(); ++i)
      if (n->args[i].kind == Arg::Kind::Value && n->args[i].value->is_static && n->args[i].value->kind == ValueKind::Tensor)
        step.static_args.push_back(static_cast<int>(i));
    std::vector<int> used;
    for (const auto& a : step.args) collect_slots(a, used);
    for (int s : used) last_use[s] = static_cast<int>(steps_.size());
    max_args_ = std::max(max_args_, step.args.size());
    steps_.push_back(std::move(step));
  }
  for (const auto& a : graph_->outputs()) outputs_.push_back(make_slot(a, nullptr));
  std::vector<int> kept;
  for (const auto& a : outputs_) collect_slots(a, kept);
  for (int s : kept) last_use[s] = -1;  // graph outputs live to the end
  // Outputs nobody reads are released right after their producer.
  for (size_t i = 0; i < steps_.size(); ++i)
    for (int s : steps_[i].outs)
      if (last_use[s] == -1 && std::find(kept.begin(), kept.end(), s) == kept.end()) last_use[s] = static_cast<int>(i);
  for (size_t s = 0; s < num_slots_; ++s)
    if (last_use[s] >= 0) steps_[last_use[s]].release.push_back(static_cast<int>(s));
  const std::vector<int> uses = graph_->use_counts();
  for (Step& s : steps_) {
    std::vector<bool> read;
    for (const Value* v : s.node->outputs) read.push_back(uses[v->id] > 0);
    s.kernel->set_outputs_read(read);
  }
  plan_static_part();
  plan_peak_bytes();
  plan_brief();
  plan_bounds();
  cow_state_.reset(new std::atomic<int>[steps_.size()]);
  for (size_t i = 0; i < steps_.size(); ++i)
    cow_state_[i].store(steps_[i].static_args.empty() || std::string(steps_[i].kernel->kind()) != "aten" ? 0 : 3);
}

namespace {
void collect_tensor_consts(const ArgSlot& a, std::vector<at::Tensor>& out) {
  if (a.kind == ArgSlot::Kind::Const) {
    if (a.constant.isTensor()) out.push_back(a.constant.toTensor());
    else if (a.constant.isTensorList())
      for (const at::Tensor& t : a.constant.toTensorVector()) out.push_back(t);
  }
  for (const auto& e : a.elems) collect_tensor_consts(e, out);
}
}  // namespace

void Executable::plan_static_part() {
  StaticPart p;
  p.step.assign(steps_.size(), false);
  std::vector<bool> static_slot(num_slots_, false), source(num_slots_, false);
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    bool st = !s.node->outputs.empty();
    for (const Value* v : s.node->outputs) st &= v->is_static;
    std::vector<int> used;
    for (const auto& a : s.args) collect_slots(a, used);
    if (st) {
      p.step[i] = true;
      for (int o : s.outs) static_slot[o] = true;
      for (int u : used)
        if (graph_->values()[u]->is_input && !source[u]) {
          source[u] = true;
          p.sources.push_back(u);
        }
      for (const auto& a : s.args) collect_tensor_consts(a, p.consts);
    } else {
      for (int u : used)
        if (static_slot[u] && std::find(p.frontier.begin(), p.frontier.end(), u) == p.frontier.end()) p.frontier.push_back(u);
    }
  }
  std::vector<int> out_slots;
  for (const auto& a : outputs_) collect_slots(a, out_slots);
  for (int u : out_slots)  // the static_values pass never marks an output; stay correct if one is
    if (static_slot[u] && std::find(p.frontier.begin(), p.frontier.end(), u) == p.frontier.end()) p.frontier.push_back(u);
  p.frontier_index.assign(num_slots_, -1);
  for (size_t k = 0; k < p.frontier.size(); ++k) p.frontier_index[p.frontier[k]] = static_cast<int>(k);
  static_ = std::move(p);
}

void Executable::plan_peak_bytes() {
  auto bytes = [&](int slot) -> int64_t {
    const Value* v = graph_->values()[slot].get();
    return v->kind != ValueKind::Tensor || !v->meta ? 0 : v->meta->static_nbytes();
  };
  int64_t live = 0, peak = 0;
  for (const Step& s : steps_) {
    for (int o : s.outs) {
      const int64_t b = bytes(o);
      if (b < 0) {
        planned_peak_bytes_ = -1;
        return;
      }
      live += b;
    }
    peak = std::max(peak, live);
    for (int r : s.release)
      if (graph_->values()[r]->producer) live -= std::max<int64_t>(bytes(r), 0);
  }
  planned_peak_bytes_ = peak;
}

void Executable::plan_brief() {
  int64_t total = 0;
  for (const auto& v : graph_->values()) {
    if (v->kind != ValueKind::Tensor) continue;
    const int64_t n = v->meta ? v->meta->static_nbytes() : -1;
    if (n < 0) return;
    total += n;
    if (total > kBriefBytes) return;
  }
  brief_ = true;
}

void Executable::plan_bounds() {
  bool reader = false;
  for (const Step& s : steps_) reader |= std::string(s.kernel->kind()) == "onednn";
  if (!reader) return;
  // A node writing into an argument (an ATen op whose schema says so) other than a graph
  // input could change a value after its producer recorded a bound (aot's graphs write only
  // into inputs, and kernels only into buffers whose values are dead).
  for (const Node* n : graph_->nodes()) {
    if (!n->is_aten()) continue;
    const auto& formals = n->schema().arguments();
    for (size_t i = 0; i < n->args.size() && i < formals.size(); ++i) {
      if (!formals[i].alias_info() || !formals[i].alias_info()->isWrite()) continue;
      bool into_input = true;
      for_each_value(n->args[i], [&](const Value* v) { into_input &= v->is_input; });
      if (!into_input) return;
    }
  }
  keeps_bounds_ = true;
}

std::vector<at::Tensor> Executable::static_sources(const std::vector<c10::IValue>& frame) const {
  std::vector<at::Tensor> ts;
  ts.reserve(static_.sources.size() + static_.consts.size());
  for (int s : static_.sources) ts.push_back(frame[s].isTensor() ? frame[s].toTensor() : at::Tensor());
  ts.insert(ts.end(), static_.consts.begin(), static_.consts.end());
  return ts;
}

// A tensor with no memory where the graph was traced with one (a meta tensor, a storage-less
// subclass such as a frozen model's released weight) would send a kernel to a null pointer.
void Executable::check_input_memory(const std::vector<c10::IValue>& frame) const {
  for (const Value* v : graph_->inputs()) {
    const c10::IValue& x = frame[v->id];
    if (!x.isTensor() || !v->meta) continue;
    if (!released_slot_.empty() && released_slot_[v->id]) continue;  // Options.freeze: the plan holds it or its packs
    const at::Tensor& t = x.toTensor();
    if (!t.defined() || t.layout() != c10::kStrided) continue;
    if (v->meta->device.is_meta()) continue;
    // A wrapper subclass has a storage whose data is null (unsafe_storage: no throwing check).
    const bool no_data = !t.has_storage() || (t.numel() > 0 && t.unsafeGetTensorImpl()->unsafe_storage().data() == nullptr);
    if (t.is_meta() || no_data)
      throw std::invalid_argument("input '" + v->name + "' of the compiled graph is a tensor without memory (" +
                                  (t.is_meta() ? std::string("on the meta device") : std::string("no data: a tensor subclass")) +
                                  "); the graph was compiled for " + v->meta->device.str() + " tensors");
  }
}

std::vector<c10::IValue> Executable::execute(std::vector<c10::IValue> inputs, std::vector<int64_t>* times, bool keep_all,
                                             std::vector<c10::IValue>* frame_out) const {
  const auto& ins = graph_->inputs();
  if (inputs.size() != ins.size())
    throw std::invalid_argument("compiled graph takes " + std::to_string(ins.size()) + " inputs, got " + std::to_string(inputs.size()));
  // aot_autograd compiles graphs that are called without autograd recording.
  c10::AutoGradMode no_grad(false);
  std::vector<c10::IValue> frame(num_slots_);
  for (size_t i = 0; i < ins.size(); ++i) frame[ins[i]->id] = std::move(inputs[i]);
  // Options.freeze: the first call runs alone and lets go of the released inputs as it goes
  // (executor_freeze.cpp); every call reads those still adopted in place of what it was passed.
  std::unique_lock<std::mutex> adopt_lk;
  if (resolving_.load(std::memory_order_acquire)) adopt_lk = std::unique_lock<std::mutex>(adopt_mu_);
  const bool resolving = adopt_lk.owns_lock() && resolving_.load(std::memory_order_relaxed);
  put_adopted(frame);
  check_input_memory(frame);
  std::vector<c10::IValue> inputs_frame;  // resolving: the inputs, for the stacks kernels freeze with
  if (resolving) {
    inputs_frame.resize(num_slots_);
    for (const Value* v : ins) inputs_frame[v->id] = frame[v->id];
  }
  // The static part: reuse its values while its sources are unchanged, else run it and keep them.
  std::shared_ptr<const StaticValues> cached;
  std::shared_ptr<StaticValues> fresh;
  if (!static_.empty() && !keep_all) {
    std::vector<at::Tensor> sources = static_sources(frame);
    {
      std::lock_guard<std::mutex> lk(static_mu_);
      cached = static_values_;
    }
    if (cached && !stamps_match(cached->stamps, sources)) {
      // Sources copied by an op that only read them keep their values: stamp them again.
      auto again = std::make_shared<StaticValues>(*cached);
      if (restamp(again->stamps, sources)) {
        std::lock_guard<std::mutex> lk(static_mu_);
        static_values_ = again;
        cached = again;
      } else {
        cached = nullptr;
      }
    }
    if (cached) {
      for (size_t k = 0; k < static_.frontier.size(); ++k) frame[static_.frontier[k]] = cached->values[k];
    } else {
      fresh = std::make_shared<StaticValues>();
      fresh->stamps = stamps_of(sources);
      fresh->values.resize(static_.frontier.size());
    }
  }
  Stack stack;
  stack.reserve(max_args_);
  const bool keep_bounds = keeps_bounds_ && value_bounds::enabled();
  value_bounds::Table bounds(keep_bounds ? num_slots_ : 0);
  if (times) times->assign(steps_.size(), 0);
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    if (cached && static_.step[i]) {  // its frontier outputs are already in the frame
      for (int r : s.release) frame[r] = c10::IValue();
      continue;
    }
    stack.clear();
    for (const auto& a : s.args) stack.push_back(materialize(a, frame));
    value_bounds::StepScope bounds_scope({keep_bounds ? &bounds : nullptr, &s.arg_value_slots, &s.outs});
    // Drop the frame's reference to values that die here, so a kernel may reuse their
    // buffers in place (oneDNN's sum post-op) when the stack holds the only one.
    if (!keep_all)
      for (int r : s.release) frame[r] = c10::IValue();
    // Guarded parameters stay guarded: an op that copies a copy-on-write arg just to read it
    // (seen once, checked in its first runs) is given non-owning views of its static args.
    const int cow = cow_state_[i].load(std::memory_order_relaxed);
    std::vector<at::Tensor> keep;  // the viewed tensors, alive until the kernel returns
    for (int k : s.static_args) {
      if (!stack[k].isTensor() || !is_cow(stack[k].toTensor())) continue;
      if (cow < 0) {
        keep.push_back(stack[k].toTensor());
        stack[k] = non_owning_view(keep.back());
      } else if (cow > 0) {
        keep.push_back(stack[k].toTensor());
      }
    }
    const auto t0 = times ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    try {
      s.kernel->run(stack);
    } catch (const NodeError&) {
      throw;
    } catch (const c10::Error& e) {
      std::string msg = e.what_without_backtrace();
      throw NodeError(*s.node, "failed at run time: " + msg, std::current_exception());
    } catch (const std::exception& e) {
      // A Python kernel's exception has no text until Python formats it: the bindings add it from `cause`.
      throw NodeError(*s.node, std::string("failed at run time: ") + e.what(), std::current_exception());
    }
    if (times) (*times)[i] = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    if (cow > 0 && !keep.empty()) {  // only a run with a copy-on-write arg tells
      bool copied = false;
      for (const at::Tensor& t : keep) copied |= !is_cow(t);
      cow_state_[i].store(copied ? -1 : cow - 1, std::memory_order_relaxed);
    }
    if (stack.size() != s.outs.size())
      throw NodeError(*s.node, "kernel returned " + std::to_string(stack.size()) + " values, expected " + std::to_string(s.outs.size()));
    for (size_t k = 0; k < s.outs.size(); ++k) frame[s.outs[k]] = std::move(stack[k]);
    // Kept detached: a view keeps its base (a parameter) in its autograd metadata, and a kept
    // reference to a user's tensor makes torch.utils.swap_tensors refuse it. The alias still
    // shares the storage, so no kernel takes that buffer over in place (storage use counts).
    if (fresh && static_.step[i])
      for (int o : s.outs)
        if (static_.frontier_index[o] >= 0)
          fresh->values[static_.frontier_index[o]] =
              frame[o].isTensor() && frame[o].toTensor().defined() ? c10::IValue(frame[o].toTensor().detach()) : frame[o];
    if (!keep_all)
      for (int r : s.release) frame[r] = c10::IValue();
    if (resolving) drop_adopted_after(i, inputs_frame);
  }
  if (resolving) resolving_.store(false, std::memory_order_release);
  if (fresh) {
    std::lock_guard<std::mutex> lk(static_mu_);
    static_values_ = std::move(fresh);
  }
  std::vector<c10::IValue> outs;
  outs.reserve(outputs_.size());
  for (const auto& a : outputs_) outs.push_back(materialize(a, frame));
  if (frame_out) *frame_out = std::move(frame);
  // The first call's packing, its path measurements' temporaries and (Options.freeze) the
  // released originals are freed pages glibc keeps resident. Once per plan: BERT-base bf16
  // with its paths forced (no measurement, which trims on its own) settled at 1174 MB, 1007
  // with this trim; 1124 and 844 with Options.freeze (benchmarks/results/bf16-memory-intel-noamx/).
  // It took 11 ms there, 0.1 ms with nothing to give back. A load first: later calls write nothing.
  if (!first_call_trimmed_.load(std::memory_order_relaxed) && !first_call_trimmed_.exchange(true, std::memory_order_relaxed))
    release_freed_memory();
  return outs;
}

std::vector<c10::IValue> Executable::run(std::vector<c10::IValue> inputs) const {
  return execute(std::move(inputs), nullptr, false, nullptr);
}

std::vector<c10::IValue> Executable::run_profiled(std::vector<c10::IValue> inputs, std::vector<int64_t>& times) const {
  return execute(std::move(inputs), &times, false, nullptr);
}

std::unordered_map<std::string, c10::IValue> Executable::run_debug(std::vector<c10::IValue> inputs) const {
  std::vector<c10::IValue> frame;
  execute(std::move(inputs), nullptr, true, &frame);
  std::unordered_map<std::string, c10::IValue> out;
  for (const auto& v : graph_->values())
    if (!frame[v->id].isNone()) out[v->name] = frame[v->id];
  return out;
}

std::string Executable::str() const {
  std::ostringstream os;
  os << "plan: " << steps_.size() << " steps, " << num_slots_ << " slots\n";
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    os << "  [" << i << "] " << s.kernel->kind() << "  " << s.node->name << " = " << s.node->target;
    if (static_.step[i]) os << "  (static: runs when a parameter changes)";
    if (!s.release.empty()) {
      os << "  release:";
      for (int r : s.release) os << " %" << graph_->values()[r]->name;
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace fxcpp
