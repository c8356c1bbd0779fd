// Options.freeze on the plan's side (backend/freeze.py is the other): which inputs a frozen
// graph may release, and how it lets go of each one during its first call.
//
// The first call packs each weight. Had the caller kept every released tensor until that call
// returned, the process would hold each weight twice at its end: the peak that freezing is
// meant to remove. So the plan takes the released tensors over (adopt_released) and drops each
// right after its last reader, once that reader's kernel runs from its own pack.
#include <algorithm>
#include <mutex>

#include "runtime/executor.h"

namespace fxcpp {

std::vector<std::pair<size_t, int>> Executable::readers_of(int slot) const {
  std::vector<std::pair<size_t, int>> out;
  for (size_t k = 0; k < steps_.size(); ++k)
    for (size_t j = 0; j < steps_[k].args.size(); ++j) {
      const ArgSlot& a = steps_[k].args[j];
      if (a.kind == ArgSlot::Kind::Slot && a.slot == slot) out.emplace_back(k, static_cast<int>(j));
    }
  return out;
}

std::vector<int> Executable::freeze_candidates(const std::vector<c10::IValue>& inputs) const {
  const auto& ins = graph_->inputs();
  if (inputs.size() != ins.size()) throw std::invalid_argument("freeze_candidates: wrong number of inputs");
  // A slot read anywhere but as a direct arg of a step (a list element, a graph output, the
  // static part) is read as it is: never released.
  std::vector<bool> pinned(num_slots_, false);
  for (int s : static_.sources) pinned[s] = true;
  std::vector<int> slots;
  for (const auto& a : outputs_) collect_slots(a, slots);
  for (const Step& st : steps_)
    for (const auto& a : st.args)
      if (a.kind == ArgSlot::Kind::List) collect_slots(a, slots);
  for (int s : slots) pinned[s] = true;
  // A frozen kernel runs from its packs alone. Where one of its weight's sources (weight, bias,
  // BatchNorm) is computed in the graph (`w.t()` in the model's code, a weight norm), that value
  // is no graph input the plan could hand the kernel when it freezes, and the kernel would stop
  // following the kept parameter it is computed from: such a kernel is never frozen, so its
  // other sources stay (one copy each). (Before, its bias was released and the first call raised
  // "Expected Tensor but got None".)
  auto reads_a_computed_source = [&](size_t k) {
    const Step& st = steps_[k];
    for (size_t j = 0; j < st.args.size(); ++j)
      if (st.args[j].kind == ArgSlot::Kind::Slot && !graph_->values()[st.args[j].slot]->is_input &&
          st.kernel->may_freeze_arg(static_cast<int>(j)))
        return true;
    return false;
  };
  std::vector<int> out;
  for (size_t i = 0; i < ins.size(); ++i) {
    const Value* v = ins[i];
    if (!v->is_static || v->kind != ValueKind::Tensor || pinned[v->id] || !inputs[i].isTensor() ||
        !inputs[i].toTensor().defined() || inputs[i].toTensor().numel() == 0)
      continue;
    const auto readers = readers_of(v->id);
    const bool ok = std::all_of(readers.begin(), readers.end(), [&](const auto& r) {
      return steps_[r.first].kernel->may_freeze_arg(r.second) && !reads_a_computed_source(r.first);
    });
    if (!readers.empty() && ok) out.push_back(static_cast<int>(i));
  }
  return out;
}

void Executable::adopt_released(const std::vector<c10::IValue>& inputs, const std::vector<int>& positions) const {
  const auto& ins = graph_->inputs();
  if (inputs.size() != ins.size()) throw std::invalid_argument("adopt_released: wrong number of inputs");
  std::lock_guard<std::mutex> lk(adopt_mu_);
  for (int i : positions) {
    const int slot = ins.at(i)->id;
    adopted_[slot] = inputs.at(i).toTensor();
    released_slot_.resize(num_slots_, 0);
    released_slot_[slot] = 1;
    adopted_readers_[slot] = readers_of(slot);
    for (const auto& r : adopted_readers_[slot]) steps_[r.first].kernel->will_freeze();
  }
  if (!adopted_.empty()) resolving_.store(true, std::memory_order_release);
}

size_t Executable::adopted_count() const {
  std::lock_guard<std::mutex> lk(adopt_mu_);
  return adopted_.size();
}

void Executable::put_adopted(std::vector<c10::IValue>& frame) const {
  for (const auto& [slot, t] : adopted_) frame[slot] = t;
}

void Executable::drop_adopted_after(size_t i, std::vector<c10::IValue>& inputs_frame) const {
  for (auto it = adopted_.begin(); it != adopted_.end();) {
    const int slot = it->first;
    const auto& readers = adopted_readers_.at(slot);  // in step order, so the last is the last reader
    if (readers.back().first != i) {
      ++it;
      continue;
    }
    const bool ok = std::all_of(readers.begin(), readers.end(),
                                [&](const auto& r) { return steps_[r.first].kernel->can_freeze_arg(r.second); });
    if (!ok) {  // a kernel reads it as it is: kept (the module no longer holds it, so one copy)
      ++it;
      continue;
    }
    Stack stack;
    for (const auto& r : readers) {  // freeze() is idempotent: a step reading it twice freezes once
      const size_t k = r.first;
      stack.clear();
      for (const auto& a : steps_[k].args)  // what a kernel copies comes from inputs and constants only
        stack.push_back(a.kind == ArgSlot::Kind::Slot ? inputs_frame[a.slot]
                        : a.kind == ArgSlot::Kind::Const ? a.constant : c10::IValue());
      steps_[k].kernel->freeze(stack);
    }
    inputs_frame[slot] = c10::IValue();
    adopted_readers_.erase(slot);
    it = adopted_.erase(it);
  }
}

}  // namespace fxcpp
