// What every oneDNN kernel shares: the engine, dtype/desc conversion from at::Tensor,
// post-op attributes, and the version-checked cache of prepacked weights.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor_stamp.h"

namespace fxcpp::onednn {

using dnnl::memory;
using Dims = memory::dims;

dnnl::engine& cpu_engine();
dnnl::stream& thread_stream();  // one per thread: streams are not shared between threads
memory::data_type dtype_of(c10::ScalarType t);
c10::ScalarType scalar_type_of(memory::data_type t);
// A plain (strided) desc of the tensor as it is, optionally viewed with other dims/strides.
memory::desc plain_desc(const at::Tensor& t);
memory::desc plain_desc(const at::Tensor& t, const Dims& dims, const Dims& strides);
memory::desc plain_desc(memory::data_type dt, const Dims& dims, const Dims& strides);
Dims dims_of(at::IntArrayRef v);
// A read-only operand: through const_data_ptr(), so a copy-on-write tensor is never copied to be read.
memory as_memory(const at::Tensor& t, const memory::desc& d);
// An operand oneDNN writes (dst, an in-place sum's accumulator).
memory as_dst_memory(const at::Tensor& t, const memory::desc& d);
// An uninitialized tensor big enough for `d` (any layout, blocked ones included).
at::Tensor alloc_for(const memory::desc& d);

// A binary post-op's second source: post-op `operand` of the node's list, which sits at
// `position` in oneDNN's list (an eltwise such as clamp can take several oneDNN post-ops).
struct BinaryArg {
  int operand = -1;
  int position = -1;
  memory::desc desc;
};
// The attr, and the runtime operands of Binary/Sum post-ops in post-op order.
struct PostOpArgs {
  dnnl::primitive_attr attr;
  std::vector<BinaryArg> binary;
};
// Builds the attr for the node's post-op list. `operands[i]` is the tensor of post-op i
// (undefined for eltwise), already viewed to dst's dims; `sum_in_place`: the index of the one
// Sum post-op whose operand is dst itself (it accumulates into dst), or -1. Every other Sum is
// a Binary add of its own operand (oneDNN's sum reads dst: only one post-op can be it).
// `plain_clamps`: relu (slope 0), clip and hardsigmoid as oneDNN's own, which turn NaN into a
// bound; only for a call checked to carry no NaN into them (plain_clamp_bound). Otherwise they
// are built from NaN-preserving steps, at two exps per element for a clip.
// full_size: the desc a binary operand of the dst's own dims is read in (a blocked dst's layout),
// where it is not its plain strides.
PostOpArgs build_post_ops(const FusedOp& f, const std::vector<at::Tensor>& operands, int sum_in_place, int64_t dst_ndims,
                          bool plain_clamps = false, const memory::desc* full_size = nullptr);
// The index of the last post-op that loses NaN in its plain form (relu with slope 0, clip,
// hardsigmoid), when every post-op before it keeps finite values finite and NaN-free (relu,
// clip, hardsigmoid, linear with a nonzero scale, add/sub of an operand); -1 otherwise.
int last_plain_clamp(const FusedOp& f);
// A bound on |value| after post-ops [0, end) for a call whose conv/matmul result is bounded by
// `b`: operand_bound(i) bounds post-op i's operand. +inf where a NaN or inf could come out (an
// operand's bound is +inf, a division) or a post-op has no bound here. At `end` =
// last_plain_clamp(f): whether the plain clamps are safe; at the list's size: the output's.
double post_op_bound(const FusedOp& f, int end, double b, const std::function<double(int)>& operand_bound);
// max |x| over a float tensor; +inf when any element is NaN or inf.
float max_abs(const at::Tensor& t);
// An operand viewed to `dst` dims: left-padded with 1s; broadcast (stride-0) dims made size 1.
at::Tensor operand_for_dst(const at::Tensor& t, int64_t dst_ndims);

// The key of one concrete call signature: sizes, strides and dtypes of the tensors that shape the primitive.
std::string signature(const std::vector<at::Tensor>& ts, int64_t flag);

// What a pack is laid out for; signatures whose packs have equal layouts share one.
struct PackLayout {
  std::string kind;      // "onednn": a primitive's weights desc; "gemv": [N, K] rows
  memory::desc md;       // onednn: the primitive's weights desc (its data type included)
  c10::ScalarType dtype = c10::kFloat;  // gemv: the rows' dtype
  bool operator==(const PackLayout& o) const {
    return kind == o.kind && (kind == "onednn" ? md == o.md : dtype == o.dtype);
  }
};
// A weight reordered once into the layout a primitive prefers, with the bias it goes with
// (both folded with BatchNorm when the node has one); valid while `stamps` match the sources.
struct PackedWeights {
  std::vector<TensorStamp> stamps;
  PackLayout layout;
  at::Tensor weight;  // bytes in `layout` (a primitive's weights desc, or [N, K] rows)
  at::Tensor bias;    // plain [OC], or undefined
  // |conv/matmul result| <= max|src| * w_bound + b_bound (max|w| times its element count, max|b|;
  // +inf for a non-finite weight or bias): what decides, per call, whether the plain clamps are safe.
  double w_bound = std::numeric_limits<double>::infinity(), b_bound = 0;
};
// The weight (and bias) with BatchNorm folded in along output-channel dim `oc_dim` of w:
// w * g/sqrt(v+eps), (b - m) * g/sqrt(v+eps) + beta. Computed in fp32, returned in w's dtype.
std::pair<at::Tensor, at::Tensor> fold_batchnorm(const at::Tensor& w, const at::Tensor& b, const at::Tensor& gamma,
                                                 const at::Tensor& beta, const at::Tensor& mean, const at::Tensor& var,
                                                 double eps, int64_t oc_dim);
// What to reorder into a weight of compute dtype `cdt`: a dense bf16/fp16 weight as it is, for
// oneDNN's reorder widens it exactly as it moves it. Converting it first (w.to(cdt)) made a
// plain fp32 copy per weight that the reorder then copied again: a first call's transients
// that glibc kept resident, 123 MB of freed heap on BERT-base bf16 (283 MB with Options.freeze).
// Anything else is converted first, as before.
at::Tensor weight_for_reorder(const at::Tensor& w, c10::ScalarType cdt);
// Reorders `src` (described by `user`) into a new buffer laid out as `target`.
at::Tensor reorder_to(const at::Tensor& src, const memory::desc& user, const memory::desc& target);
// The same into `dst` (described by `target`): a packed weight back to a plain tensor.
void reorder_into(const at::Tensor& src, const memory::desc& user, const at::Tensor& dst, const memory::desc& target);
// The same into this thread's weight buffer (grown as needed, reused by every later call on
// the thread): for weights that change between calls. Valid until the thread's next call.
memory reorder_to_thread_buffer(const at::Tensor& src, const memory::desc& user, const memory::desc& target);

// This thread's scratchpad for a primitive's desc, grown as needed: no allocation (and no page
// faults) per call, and no sharing between threads running the same primitive (call_args.h's
// execute()).
void* thread_scratchpad(const memory::desc& d);

// Counters for tests and explain(): weights packed, primitives built (process-wide), and the
// packs that are their weight itself (a layout oneDNN's gemm reads as it lies: no copy).
struct Stats {
  std::atomic<int64_t> packs{0}, primitives{0}, packs_in_place{0};
  std::atomic<int64_t> arg_memories{0};  // memory objects call_args.cpp made (kept for later calls)
  std::atomic<int64_t> input_reorders{0};  // convolution calls whose input oneDNN reordered first
  // Calls that checked their input for the plain clamps: by its producer's recorded bound
  // (value_bounds.h), or by reading it (max_abs).
  std::atomic<int64_t> input_bounds_known{0}, input_reads{0};
};
Stats& stats();

// A tensor we may write into: only the executor's stack holds it and its storage.
bool uniquely_owned(const at::Tensor& t);

// First-call measurements (fused_kernel.h, attention_kernel.cpp): how long f() takes, in us;
// and whether one path is clearly faster than the other, by 10% or more (best-of-three times
// still move a few percent, and a close race should not flip between calls or processes).
template <typename F>
double elapsed_us(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}
inline bool clearly_faster(double t_us, double than_us) { return t_us < 0.9 * than_us; }

// oneDNN 3.2's brgemm matmul (fp32 on AVX-512 and AMX hosts) keeps one accumulator per output over
// the whole of K: from K ~ 1280 it lands 1.6-1.9x further from fp64 than eager's MKL, which the
// harness's 2x rule catches once a product or a training step amplifies it. Its gemm:jit, next in
// oneDNN's list, sums K in blocks as MKL does: 0.92-1.01x eager's error at K = 2048-8192, 0.80-1.13x
// brgemm's time on the AMX host (benchmarks/results/onednn-long-k-accuracy/). So an fp32 matmul
// over K above long_k_threshold() (1024; FXCPP_MATMUL_LONG_K=<K> moves it, =0 keeps brgemm) takes
// gemm:jit: take_gemm_for_long_k remakes `pd` with `make` and steps it there, returning what
// explain() adds to the implementation's name ("" where nothing changed).
int64_t long_k_threshold();  // -1: never
inline bool runs_gemm(const dnnl::matmul::primitive_desc& pd) {
  return std::string(pd.impl_info_str()).rfind("gemm:", 0) == 0;
}
template <typename Make>
std::string take_gemm_for_long_k(dnnl::matmul::primitive_desc& pd, int64_t K, int64_t threshold, const Make& make) {
  if (threshold <= 0 || K <= threshold || runs_gemm(pd)) return "";
  dnnl::matmul::primitive_desc g = make();
  while (!runs_gemm(g) && g.next_impl()) {
  }
  if (!runs_gemm(g)) return "";
  std::string why = std::string(" (not ") + pd.impl_info_str() + ": K = " + std::to_string(K) + " > " + std::to_string(threshold) +
                    ", where brgemm's fp32 error grows past eager's)";
  pd = g;
  return why;
}

// Held while a first call measures: times the kernels, not Python. aot's runtime runs each
// graph's first call under a Python dispatch mode (torch 2.13: _AnalyzeCustomOpInputOutputMode, a
// custom-op aliasing check that passes ATen ops through unchanged), and every ATen call then goes
// through Python: a [4, 16] or [4, 64] Linear measured 58-99 us for eager's ops (4-8 without),
// 20-33 for ours (2-6), a choice the choice cache would keep. The measured calls skip the Python
// keys as torch's DisableTorchDispatch does: a mode does not see them (nor any oneDNN call, ever).
struct MeasuredWithoutPython {
  c10::impl::ExcludeDispatchKeyGuard no_python{
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot})};
};

// What a kernel says of its calls in explain(): each note once, in the order first said; safe
// to add to while another thread reads them.
class Notes {
 public:
  void add(const std::string& s) {
    std::lock_guard<std::mutex> lk(mu_);
    if (std::find(notes_.begin(), notes_.end(), s) == notes_.end()) notes_.push_back(s);
  }
  std::string joined() const {
    std::lock_guard<std::mutex> lk(mu_);
    std::string out;
    for (const auto& n : notes_) out += (out.empty() ? "" : " | ") + n;
    return out;
  }
  // Kernel::ran() from the notes: a line saying "aten..." is a call that ran eager's ATen ops
  // (every such note starts so), any other line a call that ran the kernel's own path.
  std::string ran(const std::string& own) const {
    std::lock_guard<std::mutex> lk(mu_);
    bool mine = false, aten = false;
    for (const auto& n : notes_) (n.rfind("aten", 0) == 0 ? aten : mine) = true;
    return aten && !mine ? "aten" : aten ? own + "+aten" : own;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> notes_;
};

}  // namespace fxcpp::onednn
