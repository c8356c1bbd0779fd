#include "runtime/onednn/common.h"

#include "runtime/buffer_pool.h"

#include <algorithm>
#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/zeros_like.h>

#include <cstdlib>
#include <limits>
#include <cmath>
#include <ATen/Parallel.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/max.h>
#include <c10/util/bit_cast.h>
#include <c10/util/Half.h>
#include <sstream>

namespace fxcpp::onednn {

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(cpu_engine());
  return s;
}

memory::data_type dtype_of(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return memory::data_type::f32;
    case c10::kBFloat16: return memory::data_type::bf16;
    case c10::kHalf: return memory::data_type::f16;
    default: throw std::invalid_argument(std::string("oneDNN kernels take float32/bfloat16/float16, got ") + c10::toString(t));
  }
}

c10::ScalarType scalar_type_of(memory::data_type t) {
  switch (t) {
    case memory::data_type::f32: return c10::kFloat;
    case memory::data_type::bf16: return c10::kBFloat16;
    case memory::data_type::f16: return c10::kHalf;
    default: throw std::invalid_argument("oneDNN kernels take float32/bfloat16/float16");
  }
}

Dims dims_of(at::IntArrayRef v) { return Dims(v.begin(), v.end()); }

memory::desc plain_desc(const at::Tensor& t) { return plain_desc(t, dims_of(t.sizes()), dims_of(t.strides())); }

// Whether the strides lay the dims out densely in some order (the order of their strides,
// outer dims first among equals): each stride is the next inner dim's stride times its size.
static bool dense_in_stride_order(const Dims& dims, const Dims& strides) {
  std::vector<size_t> order(dims.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides[a] > strides[b]; });
  int64_t expect = 1;
  for (size_t k = order.size(); k-- > 0;) {
    if (strides[order[k]] != expect) return false;
    expect *= std::max<int64_t>(dims[order[k]], 1);
  }
  return true;
}

memory::desc plain_desc(const at::Tensor& t, const Dims& dims, const Dims& strides) {
  return plain_desc(dtype_of(t.scalar_type()), dims, strides);
}

memory::desc plain_desc(memory::data_type dt, const Dims& dims, const Dims& strides) {
  // A size-1 dim's stride addresses nothing, and torch leaves any value there (a transposed
  // [17, 32, 1] viewed as [544, 1] has strides (1, 32)); oneDNN 3.2 built a matmul for that and
  // then refused to execute it. Give such dims the stride a row-major layout would have, unless
  // the strides already describe a dense layout: rewriting a batch-1 channels-last tensor's N
  // stride (H*W*C) to C made its format unreadable to brgconv, and every batch-1 convolution
  // fed by another fell to oneDNN's reference implementation (then ATen).
  if (dense_in_stride_order(dims, strides)) return memory::desc(dims, dt, strides);
  Dims s = strides;
  for (size_t i = s.size(); i-- > 0;)
    if (dims[i] == 1) s[i] = i + 1 < s.size() ? s[i + 1] * std::max<int64_t>(dims[i + 1], 1) : 1;
  return memory::desc(dims, dt, s);
}

memory as_memory(const at::Tensor& t, const memory::desc& d) {
  return memory(d, cpu_engine(), const_cast<void*>(t.const_data_ptr()));
}

memory as_dst_memory(const at::Tensor& t, const memory::desc& d) { return memory(d, cpu_engine(), t.mutable_data_ptr()); }

at::Tensor alloc_for(const memory::desc& d) { return pooled_empty({static_cast<int64_t>(d.get_size())}, at::kByte); }

static dnnl::algorithm eltwise_alg(const std::string& a) {
  using A = dnnl::algorithm;
  static const std::unordered_map<std::string, A> table = {
      {"relu", A::eltwise_relu},           {"gelu_erf", A::eltwise_gelu_erf},
      {"gelu_tanh", A::eltwise_gelu_tanh}, {"swish", A::eltwise_swish},
      {"logistic", A::eltwise_logistic},   {"tanh", A::eltwise_tanh},
      {"hardswish", A::eltwise_hardswish}, {"hardsigmoid", A::eltwise_hardsigmoid},
      {"elu", A::eltwise_elu},             {"clip", A::eltwise_clip_v2},
      {"linear", A::eltwise_linear},
  };
  return table.at(a);
}

static dnnl::algorithm binary_alg(const std::string& a) {
  using A = dnnl::algorithm;
  if (a == "add") return A::binary_add;
  if (a == "sub") return A::binary_sub;
  if (a == "mul") return A::binary_mul;
  if (a == "div") return A::binary_div;
  throw std::invalid_argument("unknown binary post-op " + a);
}

static constexpr double kInfD = std::numeric_limits<double>::infinity();

static bool nan_losing(const PostOp& p) {
  return p.kind == PostOp::Kind::Eltwise &&
         ((p.alg == "relu" && p.alpha == 0.f) || p.alg == "clip" || p.alg == "hardsigmoid");
}

int last_plain_clamp(const FusedOp& f) {
  int last = -1;
  for (int i = 0; i < static_cast<int>(f.post_ops.size()); ++i)
    if (nan_losing(f.post_ops[i])) last = i;
  for (int i = 0; i < last; ++i) {
    const PostOp& p = f.post_ops[i];
    const bool keeps = p.kind == PostOp::Kind::Eltwise
                           ? p.alg == "relu" || p.alg == "clip" || p.alg == "hardsigmoid" || (p.alg == "linear" && p.alpha != 0.f)
                           : p.kind == PostOp::Kind::Sum || p.alg == "add" || p.alg == "sub";
    if (!keeps) return -1;
  }
  return last;
}

double post_op_bound(const FusedOp& f, int end, double b, const std::function<double(int)>& operand_bound) {
  auto clamp = [](double v, double lo, double hi) { return std::min(std::max(v, lo), hi); };
  for (int i = 0; i < end && b < kInfD; ++i) {
    const PostOp& p = f.post_ops[i];
    if (p.kind == PostOp::Kind::Sum || p.alg == "add" || p.alg == "sub") b += operand_bound(i);
    else if (p.kind != PostOp::Kind::Eltwise && p.alg == "mul") b *= operand_bound(i);
    else if (p.kind != PostOp::Kind::Eltwise) b = kInfD;  // div: no bound
    else if (p.alg == "relu") b *= std::max(1.0, std::abs(double(p.alpha)));
    else if (p.alg == "clip") b = std::max(std::abs(clamp(-b, p.alpha, p.beta)), std::abs(clamp(b, p.alpha, p.beta)));
    else if (p.alg == "hardsigmoid" || p.alg == "tanh" || p.alg == "logistic") b = 1;
    else if (p.alg == "linear") b = std::abs(double(p.alpha)) * b + std::abs(double(p.beta));
    else b = kInfD;  // gelu, swish, elu, hardswish: not needed so far
  }
  return b;
}

// The max of the sign-cleared bit patterns of n floats (fp32; bf16/fp16 as 16 bits): the bits
// of their max |x|, as the patterns of non-negative floats order like their values, with NaN
// and inf above every finite one. An integer max, vectorized per ISA at run time (GCC's
// function multiversioning): x86-64's baseline SSE2 has no unsigned max, and a scalar loop made
// this check cost more than the exp it saves on ResNet-50.
__attribute__((target_clones("avx512f", "avx2", "default")))
static uint32_t max_masked32(const uint32_t* p, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max<uint32_t>(m, p[i] & 0x7fffffffu);
  return m;
}

__attribute__((target_clones("avx512f", "avx2", "default")))
static uint32_t max_masked16(const uint16_t* p, int64_t n) {
  uint16_t m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max<uint16_t>(m, p[i] & 0x7fffu);
  return m;
}

float max_abs(const at::Tensor& t) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  if (t.numel() == 0) return 0.f;
  const auto st = t.scalar_type();
  if (!t.is_non_overlapping_and_dense() || (st != at::kFloat && st != at::kBFloat16 && st != at::kHalf)) {
    const float m = at::abs(t).max().item<float>();  // NaN propagates
    return std::isfinite(m) ? m : inf;
  }
  // Dense: the elements fill numel() slots from the data pointer, in some order.
  auto scan = [&](auto max_masked, const auto* p) {
    return at::parallel_reduce(
        0, t.numel(), 1 << 16, uint32_t{0},
        [&](int64_t b, int64_t e, uint32_t m) { return std::max(m, max_masked(p + b, e - b)); },
        [](uint32_t a, uint32_t b) { return std::max(a, b); });
  };
  if (st == at::kFloat) {
    const uint32_t m = scan(max_masked32, static_cast<const uint32_t*>(t.const_data_ptr()));
    return m >= 0x7f800000u ? inf : c10::bit_cast<float>(m);
  }
  const uint32_t m = scan(max_masked16, static_cast<const uint16_t*>(t.const_data_ptr()));
  if (st == at::kBFloat16) return m >= 0x7f80u ? inf : c10::bit_cast<float>(m << 16);
  return m >= 0x7c00u ? inf : static_cast<float>(c10::Half(static_cast<uint16_t>(m), c10::Half::from_bits()));
}

// NaN-preserving forms of relu, clip and hardsigmoid (ir/fused_op.cpp); any other eltwise as itself.
static void append_nan_preserving(dnnl::post_ops& po, const PostOp& p) {
  for (const PostOp& s : nan_preserving_steps(p)) po.append_eltwise(eltwise_alg(s.alg), s.alpha, s.beta);
}

PostOpArgs build_post_ops(const FusedOp& f, const std::vector<at::Tensor>& operands, int sum_in_place, int64_t dst_ndims,
                          bool plain_clamps, const memory::desc* full_size) {
  PostOpArgs r;
  dnnl::post_ops po;
  for (size_t i = 0; i < f.post_ops.size(); ++i) {
    const PostOp& p = f.post_ops[i];
    if (p.kind == PostOp::Kind::Eltwise) {
      if (plain_clamps && nan_losing(p))
        po.append_eltwise(eltwise_alg(p.alg), p.alpha, p.beta);
      else
        append_nan_preserving(po, p);
    } else if (static_cast<int>(i) == sum_in_place) {
      po.append_sum(1.f);
    } else {
      const at::Tensor& t = operands.at(i);
      memory::desc d = full_size && t.sizes().equals(at::IntArrayRef(full_size->get_dims())) ? *full_size : plain_desc(t);
      const int position = po.len();  // not i: an eltwise before it may have taken several
      po.append_binary(p.kind == PostOp::Kind::Sum ? dnnl::algorithm::binary_add : binary_alg(p.alg), d);
      r.binary.push_back(BinaryArg{static_cast<int>(i), position, d});
    }
  }
  r.attr.set_post_ops(po);
  r.attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return r;
}

at::Tensor operand_for_dst(const at::Tensor& t, int64_t dst_ndims) {
  std::vector<int64_t> sizes(dst_ndims, 1), strides(dst_ndims, 0);
  const int64_t off = dst_ndims - t.dim();
  for (int64_t i = 0; i < t.dim(); ++i) {
    sizes[off + i] = t.stride(i) == 0 ? 1 : t.size(i);
    strides[off + i] = t.stride(i);
  }
  // (A size-1 dim's stride is left as it is: plain_desc gives it a dense one.)
  return t.as_strided(sizes, strides);
}

std::string signature(const std::vector<at::Tensor>& ts, int64_t flag) {
  // Raw bytes, not text: this runs on every call.
  std::string key;
  key.reserve(ts.size() * 80);
  auto put = [&](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  for (const auto& t : ts) {
    if (!t.defined()) {
      put(-1);
      continue;
    }
    put(static_cast<int64_t>(t.scalar_type()) << 8 | t.dim());
    for (int64_t d : t.sizes()) put(d);
    for (int64_t d : t.strides()) put(d);
  }
  put(flag);
  return key;
}

void* thread_scratchpad(const memory::desc& d) {
  thread_local at::Tensor scratch;
  const size_t need = d.get_size();
  if (!scratch.defined() || static_cast<size_t>(scratch.numel()) < need) scratch = alloc_for(d);
  return scratch.mutable_data_ptr();
}

std::pair<at::Tensor, at::Tensor> fold_batchnorm(const at::Tensor& w, const at::Tensor& b, const at::Tensor& gamma,
                                                 const at::Tensor& beta, const at::Tensor& mean, const at::Tensor& var,
                                                 double eps, int64_t oc_dim) {
  at::Tensor scale = at::mul(gamma.to(at::kFloat), at::rsqrt(at::add(var.to(at::kFloat), eps)));
  std::vector<int64_t> shape(w.dim(), 1);
  shape[oc_dim] = -1;
  at::Tensor w2 = at::mul(w.to(at::kFloat), scale.reshape(shape)).to(w.scalar_type());
  at::Tensor b0 = b.defined() ? b.to(at::kFloat) : at::zeros_like(scale);
  at::Tensor b2 = at::add(at::mul(at::sub(b0, mean.to(at::kFloat)), scale), beta.to(at::kFloat))
                      .to(b.defined() ? b.scalar_type() : w.scalar_type());
  return {w2.contiguous(), b2.contiguous()};
}

at::Tensor weight_for_reorder(const at::Tensor& w, c10::ScalarType cdt) {
  const bool widening = cdt == at::kFloat && (w.scalar_type() == at::kBFloat16 || w.scalar_type() == at::kHalf);
  return widening && w.is_non_overlapping_and_dense() ? w : w.to(cdt);
}

at::Tensor reorder_to(const at::Tensor& src, const memory::desc& user, const memory::desc& target) {
  at::Tensor out = alloc_for(target);
  memory from = as_memory(src, user), to = as_dst_memory(out, target);
  dnnl::stream& s = thread_stream();
  dnnl::reorder(from, to).execute(s, from, to);
  s.wait();
  return out;
}

void reorder_into(const at::Tensor& src, const memory::desc& user, const at::Tensor& dst, const memory::desc& target) {
  memory from = as_memory(src, user), to = as_dst_memory(dst, target);
  dnnl::stream& s = thread_stream();
  dnnl::reorder(from, to).execute(s, from, to);
  s.wait();
}

Stats& stats() {
  static Stats s;
  return s;
}

memory reorder_to_thread_buffer(const at::Tensor& src, const memory::desc& user, const memory::desc& target) {
  thread_local at::Tensor buf;
  if (!buf.defined() || static_cast<size_t>(buf.numel()) < target.get_size()) buf = alloc_for(target);
  memory from = as_memory(src, user), to(target, cpu_engine(), buf.mutable_data_ptr());
  dnnl::stream& s = thread_stream();
  dnnl::reorder(from, to).execute(s, from, to);  // oneDNN's primitive cache: built once per layout pair
  s.wait();
  return to;
}

bool uniquely_owned(const at::Tensor& t) {
  return t.use_count() == 1 && t.storage().use_count() == 1 && t.storage_offset() == 0;
}

int64_t long_k_threshold() { return long_k_from_env("FXCPP_MATMUL_LONG_K", 1024); }

}  // namespace fxcpp::onednn
