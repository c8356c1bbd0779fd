// A Python number passed where a schema expects a Tensor becomes a 0-dim
// "wrapped number" tensor, exactly as torch's Python argument parser does, so
// type promotion treats it as a scalar (int→Long, float→Double, bool→Bool).
#pragma once
#include <ATen/core/ivalue.h>

namespace fxcpp {
c10::IValue wrap_number(const c10::IValue& v);  // tensors and None pass through
}
