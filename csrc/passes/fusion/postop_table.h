// The one table of ATen ops a oneDNN node can absorb as a post-op.
#pragma once
#include <optional>

#include "ir/graph.h"

namespace fxcpp::fusion {

struct PostOpMatch {
  std::vector<PostOp> ops;       // usually one; `other - x` takes two (negate, then add)
  const Arg* operand = nullptr;  // the tensor a Binary/Sum post-op reads (an arg of `user`)
};

// `user` consumes the chain value `v` (dtype/shape already checked to be unchanged):
// the post-ops it amounts to, or nothing when oneDNN cannot express it.
std::optional<PostOpMatch> match_post_op(const Node& user, const Value* v);

// oneDNN takes at most 32 post-ops in one primitive (past that it refuses the primitive).
constexpr int kMaxOnednnPostOps = 32;
// The most oneDNN post-ops the kernels build for `p`: relu, clip and hardsigmoid take 2-5
// in their NaN-preserving form (ir/fused_op.h, nan_preserving_steps).
int onednn_post_op_len(const PostOp& p);

}  // namespace fxcpp::fusion
