// The fused computation in plain ATen ops. Used for what oneDNN cannot run — an empty
// dimension (a K = 0 matmul must still give bias + post-ops of zeros), or a primitive it
// refuses to build — so a fused node never fails where the unfused graph would not.
#include <ATen/ExpandUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/add.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/div.h>
#include <ATen/ops/elu.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/hardsigmoid.h>
#include <ATen/ops/hardswish.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/tanh.h>

#include <limits>
#include <optional>

#include "runtime/onednn/reference.h"

namespace fxcpp::onednn {

namespace {

// A torch capability check with no arguments (an op of the mkldnn namespace), false where this
// torch has no such op or it fails.
bool torch_says(const char* op) {
  try {
    auto h = c10::Dispatcher::singleton().findSchema({op, ""});
    return h && h->typed<bool()>().call();
  } catch (const std::exception&) {
    return false;
  }
}

at::Tensor eltwise(const PostOp& p, const at::Tensor& y) {
  const std::string& a = p.alg;
  if (a == "relu") return p.alpha == 0.f ? at::relu(y) : at::leaky_relu(y, p.alpha);
  if (a == "gelu_erf") return at::gelu(y, "none");
  if (a == "gelu_tanh") return at::gelu(y, "tanh");
  if (a == "swish") return at::silu(y);
  if (a == "logistic") return at::sigmoid(y);
  if (a == "tanh") return at::tanh(y);
  if (a == "hardswish") return at::hardswish(y);
  if (a == "hardsigmoid") return at::hardsigmoid(y);
  if (a == "elu") return at::elu(y, p.alpha);
  if (a == "clip") {  // a bound at ±FLT_MAX is absent (clamp with one side): ±inf stay as they are
    const float big = std::numeric_limits<float>::max();
    return at::clamp(y, p.alpha > -big ? std::optional<at::Scalar>(p.alpha) : std::nullopt,
                     p.beta < big ? std::optional<at::Scalar>(p.beta) : std::nullopt);
  }
  if (a == "linear") return at::add(at::mul(y, p.alpha), p.beta);
  throw std::invalid_argument("unknown eltwise post-op " + a);
}

// eltwise() in place on y, which the caller owns: the same kernels, no allocation.
void eltwise_(const PostOp& p, at::Tensor& y) {
  const std::string& a = p.alg;
  if (a == "relu") p.alpha == 0.f ? at::relu_(y) : at::leaky_relu_(y, p.alpha);
  else if (a == "gelu_erf") at::gelu_(y, "none");
  else if (a == "gelu_tanh") at::gelu_(y, "tanh");
  else if (a == "swish") at::silu_(y);
  else if (a == "logistic") at::sigmoid_(y);
  else if (a == "tanh") at::tanh_(y);
  else if (a == "hardswish") at::hardswish_(y);
  else if (a == "hardsigmoid") at::hardsigmoid_(y);
  else if (a == "elu") at::elu_(y, p.alpha);
  else if (a == "linear") y.mul_(p.alpha).add_(p.beta);
  else y.copy_(eltwise(p, y));  // clip: its optional bounds as eltwise() builds them
}

at::Tensor binary(const std::string& a, const at::Tensor& y, const at::Tensor& o) {
  if (a == "add") return at::add(y, o);
  if (a == "sub") return at::sub(y, o);
  if (a == "mul") return at::mul(y, o);
  if (a == "div") return at::div(y, o);
  throw std::invalid_argument("unknown binary post-op " + a);
}

// Inference BatchNorm over dim 1 (conv channels; a Linear's output features).
at::Tensor batch_norm(const FusedOp& f, const at::Tensor& y, const Stack& s) {
  std::vector<int64_t> shape(y.dim(), 1);
  shape[1] = -1;
  auto r = [&](int i) { return s[f.bn_arg + i].toTensor().reshape(shape); };
  at::Tensor scale = at::mul(r(0), at::rsqrt(at::add(r(3), f.bn_eps)));
  return at::add(at::mul(at::sub(y, r(2)), scale), r(1));
}

at::Tensor finish(const FusedOp& f, at::Tensor y, const Stack& s) {
  if (f.bn_arg >= 0) y = batch_norm(f, y, s);
  return apply_post_ops(f, y, s);
}

}  // namespace

at::Tensor apply_post_ops(const FusedOp& f, at::Tensor y, const Stack& s) {
  for (const PostOp& p : f.post_ops)
    y = p.kind == PostOp::Kind::Eltwise ? eltwise(p, y)
                                        : binary(p.kind == PostOp::Kind::Sum ? "add" : p.alg, y, s[p.arg].toTensor());
  return y;
}

at::Tensor apply_post_ops_in_place(const FusedOp& f, at::Tensor y, const Stack& s) {
  for (const PostOp& p : f.post_ops) {
    if (p.kind == PostOp::Kind::Eltwise) {
      eltwise_(p, y);
      continue;
    }
    const std::string a = p.kind == PostOp::Kind::Sum ? "add" : p.alg;
    const at::Tensor& o = s[p.arg].toTensor();
    // In place only where eager's result has y's shape and dtype; otherwise as eager computes it.
    if (!y.sizes().equals(at::infer_size_dimvector(y.sizes(), o.sizes())) || at::result_type(y, o) != y.scalar_type()) {
      y = binary(a, y, o);
      continue;
    }
    if (a == "add") y.add_(o);
    else if (a == "sub") y.sub_(o);
    else if (a == "mul") y.mul_(o);
    else if (a == "div") y.div_(o);
    else throw std::invalid_argument("unknown binary post-op " + a);
  }
  return y;
}

at::Tensor reference_matmul(const FusedOp& f, const Stack& s) {
  const at::Tensor& w = s[1].toTensor();
  // A Linear: at::linear is eager's own call (addmm: the bias added before the one rounding,
  // in one kernel); anything else: matmul, then the bias.
  if (f.weight_nk && w.dim() == 2 && (s[2].isNone() || s[2].toTensor().dim() <= 1)) {
    const c10::optional<at::Tensor> bias = s[2].isNone() ? c10::nullopt : c10::optional<at::Tensor>(s[2].toTensor());
    return finish(f, at::linear(s[0].toTensor(), w, bias), s).contiguous();
  }
  at::Tensor y = at::matmul(s[0].toTensor(), f.weight_nk ? w.transpose(-1, -2) : w);
  if (!s[2].isNone()) y = at::add(y, s[2].toTensor());
  return finish(f, y, s).contiguous();
}

at::Tensor reference_conv(const FusedOp& f, const Stack& s) {
  c10::optional<at::Tensor> bias;
  if (!s[2].isNone()) bias = s[2].toTensor();
  at::Tensor x = s[0].toTensor();
  // Eager's NCHW input (layout_propagation may have made it channels-last): torch's oneDNN then
  // runs the blocked layouts, not NHWC, and lands as close to the exact result as eager.
  if (f.blocked_layout) x = x.contiguous();
  if (!f.pad_before.empty()) {
    std::vector<int64_t> pads;
    for (size_t i = f.pad_before.size(); i-- > 0;) {
      pads.push_back(f.pad_before[i]);
      pads.push_back(f.pad_after[i]);
    }
    x = at::constant_pad_nd(x, pads, 0);
  }
  at::Tensor y = at::convolution(x, s[1].toTensor(), bias, f.stride, f.padding, f.dilation, f.transposed,
                                 f.output_padding, f.groups);
  return finish(f, y, s).contiguous();
}

bool aten_runs_natively(c10::ScalarType t) {
  static const bool bf16 = torch_says("mkldnn::_is_mkldnn_bf16_supported");
  static const bool fp16 = torch_says("mkldnn::_is_mkldnn_fp16_supported");
  return t == c10::kBFloat16 ? bf16 : t == c10::kHalf ? fp16 : false;
}

}  // namespace fxcpp::onednn
