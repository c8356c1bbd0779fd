#define AT_PER_OPERATOR_HEADERS  // only the scalar_tensor op header, not all of ATen/Functions.h
#include "runtime/wrap_number.h"

#include <ATen/ScalarOps.h>

namespace fxcpp {

c10::IValue wrap_number(const c10::IValue& v) {
  if (!(v.isInt() || v.isDouble() || v.isBool())) return v;
  at::Tensor t = at::scalar_to_tensor(v.toScalar());
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

}  // namespace fxcpp
