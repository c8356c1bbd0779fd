// Bounds on max |x| that a kernel proved for a value it wrote, handed to the kernels that read
// that value later in the same call.
//
// Why: a oneDNN conv or matmul runs relu/clip as oneDNN's own clamps only at a call proven to
// carry no NaN or inf into them, which costs a read of its input (max_abs). Where the input is
// the previous conv's clamped output, that conv already knows a bound (ReLU6: 6), so the read is
// skipped: MobileNetV2's checks read every expanded activation once more per call.
//
// The executor keeps one table per call (by value slot) and points the running thread at it
// for each step; outside a step, or in a plan where some node writes into a tensor other than
// a graph input (the bound of a value could then go stale), nothing is known. A bound is only
// given back for the very tensor it was recorded for (data pointer and dtype).
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

namespace fxcpp::value_bounds {

struct Entry {
  float bound = -1.f;  // < 0: unknown
  const void* data = nullptr;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
};

// One call's bounds, by value slot.
using Table = std::vector<Entry>;

// Set by the executor around one step: the table, and the value slot behind each stack
// position of the step's args (-1 for a constant, a list or a number wrapped as a tensor)
// and each output.
struct Step {
  Table* table = nullptr;
  const std::vector<int>* args = nullptr;
  const std::vector<int>* outs = nullptr;
};
class StepScope {
 public:
  explicit StepScope(const Step& step);
  ~StepScope();
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  Step saved_;  // a nested call's step restores its caller's
};

// A bound on max |x| of the tensor at stack position `pos` of the running step's args (read
// before the kernel replaces its stack with outputs), if a kernel recorded one for it this call.
std::optional<float> known(int pos, const at::Tensor& t);

// Records `bound` for output `pos` of the running step, the tensor `t`. The bound must hold for
// every element of `t` as stored (after rounding to its dtype); a non-finite or negative bound
// records nothing.
void record(int pos, const at::Tensor& t, double bound);

// On by default; off only to measure what the bounds save, in one process (_C._set_value_bounds).
void set_enabled(bool on);
bool enabled();

}  // namespace fxcpp::value_bounds
