// What a oneDNN fusion node carries: the anchor (convolution or matmul), its
// parameters, an optional folded BatchNorm, and a structured post-op list that
// maps one-to-one onto dnnl::post_ops. The IR knows nothing of oneDNN itself.
//
// A fused node's args are Values in a fixed order:
//   [0] src  [1] weight  [2] bias or None  [bn_arg .. bn_arg+3] BN weight, bias, mean, var
//   then one arg per Binary/Sum post-op (PostOp::arg points at it).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fxcpp {

struct PostOp {
  enum class Kind { Eltwise, Binary, Sum };
  Kind kind = Kind::Eltwise;
  // Eltwise: relu gelu_erf gelu_tanh swish logistic tanh hardswish hardsigmoid elu clip linear
  //          (oneDNN's eltwise algorithms; alpha/beta as oneDNN defines them).
  // Binary:  add sub mul div (dst = dst <op> args[arg], broadcast); Sum: dst += args[arg], in place.
  std::string alg;
  float alpha = 0.f, beta = 0.f;
  int arg = -1;
  std::string from;  // the FX node it replaces
  std::string str() const;
};

// The eltwise steps the oneDNN kernels build for an Eltwise `p` where NaN must survive: relu
// (slope 0), clip and hardsigmoid as elu/linear steps (fused_op.cpp says why), any other as
// itself. One list for the kernels (runtime/onednn/common.cpp) and for fuse_postops, which
// counts them against oneDNN's limit on post-ops.
std::vector<PostOp> nan_preserving_steps(const PostOp& p);

// A reduction-length threshold read from the environment variable `name` (FXCPP_MATMUL_LONG_K,
// FXCPP_CONV_LONG_K): unset or empty gives `fallback`, a positive K itself, 0 (or anything not
// a positive number) -1, which callers read as "never".
int64_t long_k_from_env(const char* name, int64_t fallback);

struct FusedOp {
  enum class Anchor { Conv, Matmul };
  Anchor anchor = Anchor::Matmul;
  std::string anchor_op;  // the ATen op it came from: aten::convolution, aten::addmm, ...
  // Convolution (aten::convolution's own parameters).
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
  bool channels_last = false;  // layout_propagation: write the output channels-last (NHWC/NDHWC)
  // layout_propagation: run fp32 on oneDNN's NCHW-blocked layouts (nChw16c / nChw8c), as eager
  // does for an NCHW input, where the reduction is long enough that NHWC's error grows past eager's.
  bool blocked_layout = false;
  // A zero constant_pad_nd folded in front (per spatial dim, before / after): oneDNN pads asymmetrically.
  std::vector<int64_t> pad_before, pad_after;
  // Matmul: src [..., M, K] @ weight; weight_nk: the weight Value is [N, K] (a Linear's weight,
  // or batched [B, N, K]) and is read transposed. flatten_src: src [*, K] is read as [prod(*), K]
  // and the result viewed back to [*, N] (a Linear on an N-d input).
  bool weight_nk = false;
  bool flatten_src = false;
  // Folded BatchNorm (inference): args[bn_arg..bn_arg+3] = weight, bias, running_mean, running_var.
  int bn_arg = -1;
  double bn_eps = 0.0;
  std::vector<PostOp> post_ops;
  // Whether the kernel may keep a packed copy of a long-lived weight beside it (fastest; costs
  // the weight's bytes again). Off (Options.pack_weights=False): the weight is read where it
  // lies (matmul) or reordered at every call into a per-thread buffer (conv).
  bool pack_weight = true;
  std::vector<std::string> covers;  // the FX nodes this node replaces, anchor first
  // with_covers=false: what it computes only, the same string for a transformer's identical layers.
  std::string str(bool with_covers = true) const;
};

}  // namespace fxcpp
