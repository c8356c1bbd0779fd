#include "ir/fused_op.h"

#include <cstdlib>
#include <limits>

namespace fxcpp {

int64_t long_k_from_env(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  const long long k = std::atoll(v);
  return k > 0 ? static_cast<int64_t>(k) : -1;
}

// oneDNN's relu (slope 0), clip and hardsigmoid compute max/min with the bound as the
// second operand, so NaN comes out as the bound; eager keeps NaN. They are built instead
// from elu with alpha 0, `x > 0 ? x : 0 * (exp(x) - 1)`, which is x, -0 or NaN, and a
// linear step that turns -0 into +0:
//   relu(x)         = elu0(x) + 0                                    (exact)
//   clip(x, lo, hi) = hi - elu0((hi - lo) - elu0(x - lo))            (NaN kept; unclipped values
//                                                                     round by at most ulp(hi)/2)
// A bound at ±FLT_MAX (clamp with one side) is absent. Two exps per element for a clip: at a
// call proven NaN-free (plain_clamp_bound) the kernels run oneDNN's own clamps instead.
std::vector<PostOp> nan_preserving_steps(const PostOp& p) {
  std::vector<PostOp> steps;
  auto step = [&](const char* alg, float a, float b) {
    PostOp s;
    s.alg = alg;
    s.alpha = a;
    s.beta = b;
    s.from = p.from;
    steps.push_back(std::move(s));
  };
  auto elu0 = [&] { step("elu", 0.f, 0.f); };
  auto linear = [&](float a, float b) { step("linear", a, b); };
  const float big = std::numeric_limits<float>::max();
  auto clip = [&](float lo, float hi) {
    const bool has_lo = lo > -big, has_hi = hi < big;
    if (has_lo) {
      if (lo != 0.f) linear(1.f, -lo);
      elu0();
      if (!has_hi) return linear(1.f, lo);
      linear(-1.f, hi - lo);
    } else {
      linear(-1.f, hi);
    }
    elu0();
    linear(-1.f, hi);
  };
  if (p.alg == "relu" && p.alpha == 0.f) {
    clip(0.f, big);
  } else if (p.alg == "clip") {
    clip(p.alpha, p.beta);
  } else if (p.alg == "hardsigmoid") {
    linear(p.alpha, p.beta);
    clip(0.f, 1.f);
  } else {
    steps.push_back(p);
  }
  return steps;
}

}  // namespace fxcpp
