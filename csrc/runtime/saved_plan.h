// A compiled plan saved by fxcpp.save (backend/saved_plan.py) and run without Python: the
// lowered ATen graph as the builder calls that made it, the options that shape the plan, and
// the values of its static inputs (the weights). Loading replays the calls, runs the same pass
// pipeline and builds the Executable, so the plan is the one Python would build on this host.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

namespace fxcpp {

class Executable;

struct SavedPlan {
  std::shared_ptr<const Executable> exe;
  // Per graph input: the caller's argument it is (an index), or -1 and its saved value (a
  // weight, a buffer, a tensor the model holds).
  std::vector<int64_t> user_index;
  std::vector<c10::IValue> saved;
  size_t num_user_inputs = 0;
  // The caller's inputs in order, weights filled in from the file.
  std::vector<c10::IValue> run(const std::vector<at::Tensor>& inputs) const;
};

// Throws std::invalid_argument naming what is wrong with the file.
SavedPlan load_saved_plan(const std::string& path);

// A whole file's bytes; throws std::invalid_argument if it cannot be opened.
std::vector<char> read_binary_file(const std::string& path);

}  // namespace fxcpp
