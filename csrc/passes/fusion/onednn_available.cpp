#include "passes/fusion/fusion_util.h"

namespace fxcpp::fusion {

bool onednn_available() {
#ifdef FXCPP_HAS_ONEDNN
  return true;
#else
  return false;
#endif
}

}  // namespace fxcpp::fusion
