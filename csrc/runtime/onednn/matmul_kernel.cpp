// onednn::matmul: Linear / addmm / mm / bmm with bias, folded BatchNorm and a post-op
// chain, on oneDNN's matmul primitive. One primitive per concrete call signature, built
// at its first call; a long-lived 2-d weight (a parameter) is reordered once into the
// layout the primitive prefers and re-packed only when that tensor changes. Any other
// weight is read where it lies: measured on oneDNN 3.2 (brgemm), reading a plain [K, N] or
// [N, K] weight is never slower than reordering it at every call.
#include <ATen/ops/empty.h>

#include <atomic>

#include "runtime/buffer_pool.h"
#include "runtime/onednn/fused_kernel.h"
#include "runtime/onednn/reference.h"

namespace fxcpp::onednn {

namespace {

struct MatmulEntry {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  std::string impl, impl_note;
  std::atomic<int> choice{kUndecided};  // oneDNN or ATen, decided at the signature's first call
  std::vector<std::pair<int, memory::desc>> binary;
  Dims wd, ws;                                  // the logical [.., K, N] weight as the user's tensor lies
  std::shared_ptr<const PackedWeights> packed;  // swapped under the kernel's lock when a source changes
};

class MatmulKernel final : public FusedKernel<MatmulEntry> {
 public:
  // Parameters, buffers and constants keep their values between calls: pack them once.
  explicit MatmulKernel(const Node& n) : FusedKernel(n, long_lived_2d(n.args[1].value)) {}

 private:
  static bool long_lived_2d(const Value* w) { return long_lived(w) && w->meta && w->meta->dim() == 2; }

  at::Tensor reference(const Stack& stack) const override { return reference_matmul(f_, stack); }

  void run_onednn(Stack& stack) const override {
    at::Tensor src = stack[0].toTensor();
    const at::Tensor w_in = stack[1].toTensor();
    const at::Tensor bias = stack[2].isNone() ? at::Tensor() : stack[2].toTensor();
    const int64_t K = src.size(-1);
    std::vector<int64_t> out_shape;
    if (f_.flatten_src) {
      out_shape = src.sizes().vec();
      src = src.reshape({-1, K});
    }
    // oneDNN's matmul reads row- or column-major operands; anything else is copied once here.
    if (!matmul_friendly(src)) src = src.contiguous();
    const at::Tensor w0 = matmul_friendly(w_in) ? w_in : w_in.contiguous();
    const std::vector<at::Tensor> bn = bn_tensors(stack);
    const bool cached = cache_pack(w0, bias, bn);
    // Read where it lies unless cached; a BatchNorm is then folded at this call.
    at::Tensor w = w0, b_run = bias;
    if (!cached && !bn.empty()) std::tie(w, b_run) = folded(w0, bias, bn);
    if (!cached && b_run.defined()) b_run = b_run.contiguous();
    const int64_t nd = src.dim();  // 2 or 3
    // The logical weight [.., K, N]: a Linear's [N, K] weight read transposed through its strides.
    Dims wd = dims_of(w.sizes()), ws = dims_of(w.strides());
    if (f_.weight_nk) {
      std::swap(wd[nd - 1], wd[nd - 2]);
      std::swap(ws[nd - 1], ws[nd - 2]);
    }
    const int64_t N = wd[nd - 1];
    Dims dst_dims = dims_of(src.sizes());
    dst_dims[nd - 1] = N;
    if (f_.flatten_src) out_shape.back() = N;
    else out_shape = std::vector<int64_t>(dst_dims.begin(), dst_dims.end());

    // Post-op operands, viewed into the [.., M, N] domain oneDNN sees.
    std::vector<at::Tensor> operands(f_.post_ops.size());
    at::Tensor in_place;
    for (size_t i = 0; i < f_.post_ops.size(); ++i) {
      const PostOp& p = f_.post_ops[i];
      if (p.arg < 0) continue;
      // Before any view of it exists: is the executor's stack the only holder?
      const bool owned = p.kind == PostOp::Kind::Sum && !in_place.defined() && uniquely_owned(stack[p.arg].toTensor());
      at::Tensor t = stack[p.arg].toTensor();
      if (f_.flatten_src) t = flatten_operand(t, out_shape);
      operands[i] = operand_for_dst(t, nd).contiguous();
      if (owned && t.is_contiguous() && t.sizes().equals(at::IntArrayRef(dst_dims))) in_place = t;
    }
    const bool sum_in_place = in_place.defined();

    std::vector<at::Tensor> shape_of = {src, w, bias};
    for (const auto& t : operands) shape_of.push_back(t);
    std::string key = signature(shape_of, sum_in_place) + (cached ? "c" : "p");
    std::shared_ptr<MatmulEntry> e = entry(
        key, [&] { return build(src, wd, ws, w.scalar_type(), bias, !bn.empty(), operands, sum_in_place, dst_dims, cached); },
        cached ? "weight packed once" : "weight read in place (" + per_call_reason() + ")");
    auto run_once = [&](bool scratch) {
      // A fresh output is allocated in its final shape (oneDNN writes the same bytes through its
      // [.., M, N] description): a view of it would keep its base alive, and a consumer could
      // then never take the buffer over in place.
      at::Tensor dst = !sum_in_place ? pooled_empty(out_shape, src.scalar_type()) : scratch ? in_place.clone() : in_place;
      std::unordered_map<int, memory> args;
      args[DNNL_ARG_SRC] = as_memory(src, e->pd.src_desc());
      args[DNNL_ARG_DST] = as_dst_memory(dst, e->pd.dst_desc());
      std::shared_ptr<const PackedWeights> packed;
      if (cached) {
        packed = packed_weights(*e, w, bias, bn, [&](const at::Tensor& wt, bool folded) {
          // A folded weight is a fresh contiguous [N, K] tensor: read it transposed through its strides.
          return plain_desc(wt, e->wd, folded ? swapped_strides(wt, 2) : e->ws);
        });
        args[DNNL_ARG_WEIGHTS] = memory(e->pd.weights_desc(), cpu_engine(), const_cast<void*>(packed->weight.const_data_ptr()));
        if (packed->bias.defined()) args[DNNL_ARG_BIAS] = as_memory(packed->bias, e->pd.bias_desc());
      } else {
        args[DNNL_ARG_WEIGHTS] = as_memory(w, plain_desc(w, wd, ws));
        if (b_run.defined()) args[DNNL_ARG_BIAS] = as_memory(b_run, e->pd.bias_desc());
      }
      for (const auto& [i, d] : e->binary)
        args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1] = as_memory(operands[i], d);
      execute(e->prim, e->pd, args);
      return sum_in_place ? dst.view(out_shape) : dst;
    };
    finish(stack, choose(*e, stack, run_once));
  }

  static bool matmul_friendly(const at::Tensor& t) { return t.is_contiguous() || t.transpose(-1, -2).is_contiguous(); }

  // t's strides with the last two swapped: a [.., N, K] tensor read as [.., K, N].
  static Dims swapped_strides(const at::Tensor& t, int64_t nd) {
    Dims s = dims_of(t.strides());
    std::swap(s[nd - 1], s[nd - 2]);
    return s;
  }

  // An operand of the N-d output [*, N] as a 2-d [M, N]-broadcastable tensor.
  static at::Tensor flatten_operand(const at::Tensor& t, const std::vector<int64_t>& out_shape) {
    const int64_t last = t.dim() ? t.size(-1) : 1;
    bool lead_broadcast = true;
    for (int64_t i = 0; i + 1 < t.dim(); ++i) lead_broadcast &= t.size(i) == 1;
    if (lead_broadcast) return t.reshape({1, last});
    std::vector<int64_t> full(out_shape.begin(), out_shape.end() - 1);
    full.push_back(last);
    return t.expand(full).reshape({-1, last});
  }

  std::shared_ptr<MatmulEntry> build(const at::Tensor& src, const Dims& wd, const Dims& ws, c10::ScalarType wtype,
                                     const at::Tensor& bias, bool folded, const std::vector<at::Tensor>& operands,
                                     bool sum_in_place, const Dims& dst_dims, bool cached) const {
    const int64_t nd = src.dim();
    auto dt = dtype_of(src.scalar_type());
    memory::desc src_md = plain_desc(src);
    memory::desc w_md = cached ? memory::desc(wd, dtype_of(wtype), memory::format_tag::any) : memory::desc(wd, dtype_of(wtype), ws);
    memory::desc dst_md = memory::desc(dst_dims, dt, nd == 2 ? memory::format_tag::ab : memory::format_tag::abc);
    memory::desc bias_md;
    if (bias.defined() || folded) {
      Dims bd(nd, 1);
      bd[nd - 1] = wd[nd - 1];
      auto bdt = bias.defined() ? dtype_of(bias.scalar_type()) : dt;
      bias_md = memory::desc(bd, bdt, nd == 2 ? memory::format_tag::ab : memory::format_tag::abc);
    }
    PostOpArgs po = build_post_ops(f_, operands, sum_in_place, nd);
    auto e = std::make_shared<MatmulEntry>();
    e->pd = dnnl::matmul::primitive_desc(cpu_engine(), src_md, w_md, bias_md, dst_md, po.attr);
    e->prim = dnnl::matmul(e->pd);
    e->binary = po.binary;
    e->wd = wd;
    e->ws = ws;
    return e;
  }
};

}  // namespace

std::unique_ptr<Kernel> make_matmul_kernel(const Node& n) {
  if (!n.fused || n.fused->anchor != FusedOp::Anchor::Matmul) return nullptr;
  return std::make_unique<MatmulKernel>(n);
}

}  // namespace fxcpp::onednn
