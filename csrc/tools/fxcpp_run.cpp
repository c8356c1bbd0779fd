// fxcpp_run PLAN INPUTS OUTPUTS: runs a plan saved by fxcpp.save without Python.
// INPUTS: torch.save([tensor, ...]) (zip format); OUTPUTS: the outputs as a tuple, written with
// torch::pickle_save (torch.load reads it). Links LibTorch and fxcpp_core only.
#include <fstream>
#include <iostream>

#include <torch/csrc/jit/serialization/pickle.h>

#include "runtime/saved_plan.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: fxcpp_run PLAN INPUTS OUTPUTS\n";
    return 2;
  }
  try {
    const fxcpp::SavedPlan plan = fxcpp::load_saved_plan(argv[1]);
    const c10::IValue loaded = torch::jit::pickle_load(fxcpp::read_binary_file(argv[2]));
    std::vector<at::Tensor> inputs;
    for (const auto& v : loaded.toListRef()) inputs.push_back(v.toTensor());
    const std::vector<c10::IValue> outs = plan.run(inputs);
    // A tuple: torch.load's weights-only unpickler takes it (a list carries a type tag it refuses).
    const std::vector<char> data = torch::jit::pickle_save(c10::ivalue::Tuple::create(outs));
    std::ofstream out(argv[3], std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) throw std::invalid_argument(std::string("cannot write ") + argv[3]);
    std::cout << "fxcpp_run: " << inputs.size() << " inputs, " << outs.size() << " outputs\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "fxcpp_run: " << e.what() << "\n";
    return 1;
  }
}
