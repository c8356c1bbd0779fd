#include "runtime/value_bounds.h"

#include <atomic>

namespace fxcpp::value_bounds {
namespace {

// The running step on this thread (a call runs its steps on the thread that made it).
thread_local Step current;
std::atomic<bool> on{true};

Entry* slot_entry(const std::vector<int>* slots, int pos) {
  if (!current.table || !slots || pos < 0 || pos >= static_cast<int>(slots->size())) return nullptr;
  const int s = (*slots)[pos];
  return s < 0 ? nullptr : &(*current.table)[s];
}

}  // namespace

StepScope::StepScope(const Step& step) : saved_(current) { current = step; }

StepScope::~StepScope() { current = saved_; }

std::optional<float> known(int pos, const at::Tensor& t) {
  const Entry* e = slot_entry(current.args, pos);
  if (!e || e->bound < 0 || !t.defined() || t.const_data_ptr() != e->data || t.scalar_type() != e->dtype)
    return std::nullopt;
  return e->bound;
}

void record(int pos, const at::Tensor& t, double bound) {
  Entry* e = slot_entry(current.outs, pos);
  if (!e || !t.defined()) return;
  // Rounding the result to its dtype moves a value by at most a relative 2^-8 (bf16); the 5%
  // margin also covers eager's path rounding after each op. fp16 overflows to inf past 65504.
  const double b = bound * 1.05;
  const double limit = t.scalar_type() == at::kHalf ? 65504.0 : 1e30;
  if (!(b >= 0 && b < limit)) return;
  *e = {static_cast<float>(b), t.const_data_ptr(), t.scalar_type()};
}

void set_enabled(bool v) { on.store(v); }
bool enabled() { return on.load(std::memory_order_relaxed); }

}  // namespace fxcpp::value_bounds
