// onednn::matmul: Linear / addmm / mm / bmm with bias, folded BatchNorm and a post-op
// chain, on oneDNN's matmul primitive. One primitive per concrete call signature, built
// at its first call; a weight that is a graph input (a parameter) is reordered once into
// the layout the primitive prefers and re-packed only when that tensor changes.
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <mutex>

#include "runtime/kernel.h"
#include "runtime/onednn/common.h"
#include "runtime/onednn/reference.h"

namespace fxcpp::onednn {

namespace {

class MatmulKernel final : public Kernel {
 public:
  explicit MatmulKernel(const Node& n) : f_(*n.fused), name_(n.name) {
    const Value* w = n.args[1].value;
    // Parameters (graph inputs) and constants keep their values between calls: pack them once.
    prepack_ = w && (w->is_input || w->constant) && w->meta && w->meta->dim() == 2;
  }
  const char* kind() const override { return "onednn"; }

  void run(Stack& stack) const override {
    if (stack[0].toTensor().numel() == 0 || stack[1].toTensor().numel() == 0) return reference(stack);
    try {
      run_onednn(stack);
    } catch (const dnnl::error& e) {
      // A primitive oneDNN would not build for this signature: correct but slower, so say it once.
      std::call_once(warned_, [&] {
        TORCH_WARN("fxcpp: node '", name_, "': oneDNN refused the primitive (", e.what(), "); it runs as ATen ops");
      });
      reference(stack);
    }
  }

 private:
  void reference(Stack& stack) const {
    at::Tensor y = reference_matmul(f_, stack);
    stack.clear();
    stack.emplace_back(std::move(y));
  }

  void run_onednn(Stack& stack) const {
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
    const at::Tensor w = matmul_friendly(w_in) ? w_in : w_in.contiguous();
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

    std::vector<at::Tensor> bn;
    if (f_.bn_arg >= 0)
      for (int i = 0; i < 4; ++i) bn.push_back(stack[f_.bn_arg + i].toTensor());

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

    std::vector<at::Tensor> shape_of = {src, prepack_ ? at::Tensor() : w, bias};
    for (const auto& t : operands) shape_of.push_back(t);
    std::string key = signature(shape_of, sum_in_place) + (prepack_ ? signature({w}, true) : "");
    std::shared_ptr<Entry> e = entry(key, src, wd, ws, w.scalar_type(), bias, !bn.empty(), operands, sum_in_place, dst_dims);

    at::Tensor dst = sum_in_place ? in_place : at::empty(dst_dims, src.options());
    std::unordered_map<int, memory> args;
    args[DNNL_ARG_SRC] = as_memory(src, e->pd.src_desc());
    args[DNNL_ARG_DST] = as_memory(dst, e->pd.dst_desc());
    std::shared_ptr<const PackedWeights> packed;
    if (prepack_) {
      packed = packed_weights(*e, w, bias, bn);
      args[DNNL_ARG_WEIGHTS] = memory(e->pd.weights_desc(), cpu_engine(), packed->weight.data_ptr());
      if (packed->bias.defined()) args[DNNL_ARG_BIAS] = as_memory(packed->bias, e->pd.bias_desc());
    } else {
      // fold_batchnorm only fires on packed weights (graph inputs), so nothing to fold here.
      const at::Tensor& wt = w;
      const at::Tensor& bt = bias;
      args[DNNL_ARG_WEIGHTS] = as_memory(wt, plain_desc(wt, wd, ws));
      if (bt.defined()) args[DNNL_ARG_BIAS] = as_memory(bt, e->pd.bias_desc());
    }
    for (const auto& [i, d] : e->binary)
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1] = as_memory(operands[i], d);
    execute(e->prim, e->pd, args);
    stack.clear();
    stack.emplace_back(dst.view(out_shape));
  }

  struct Entry {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
    std::vector<std::pair<int, memory::desc>> binary;
    Dims wd, ws;
    std::shared_ptr<const PackedWeights> packed;  // swapped under mu_ when a source changes
  };

  static bool matmul_friendly(const at::Tensor& t) { return t.is_contiguous() || t.transpose(-1, -2).is_contiguous(); }

  // A folded weight is a fresh contiguous [.., N, K] tensor: its strides, read transposed.
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

  std::shared_ptr<Entry> entry(const std::string& key, const at::Tensor& src, const Dims& wd, const Dims& ws,
                               c10::ScalarType wtype, const at::Tensor& bias, bool folded,
                               const std::vector<at::Tensor>& operands, bool sum_in_place, const Dims& dst_dims) const {
    {
      std::lock_guard<std::mutex> g(mu_);
      auto it = cache_.find(key);
      if (it != cache_.end()) return it->second;
    }
    const int64_t nd = src.dim();
    auto dt = dtype_of(src.scalar_type());
    memory::desc src_md = plain_desc(src);
    memory::desc w_md = prepack_ ? memory::desc(wd, dtype_of(wtype), memory::format_tag::any) : memory::desc(wd, dtype_of(wtype), ws);
    memory::desc dst_md = memory::desc(dst_dims, dt, nd == 2 ? memory::format_tag::ab : memory::format_tag::abc);
    memory::desc bias_md;
    if (bias.defined() || folded) {
      Dims bd(nd, 1);
      bd[nd - 1] = wd[nd - 1];
      auto bdt = bias.defined() ? dtype_of(bias.scalar_type()) : dt;
      bias_md = memory::desc(bd, bdt, nd == 2 ? memory::format_tag::ab : memory::format_tag::abc);
    }
    PostOpArgs po = build_post_ops(f_, operands, sum_in_place, nd);
    auto e = std::make_shared<Entry>();
    e->pd = dnnl::matmul::primitive_desc(cpu_engine(), src_md, w_md, bias_md, dst_md, po.attr);
    e->prim = dnnl::matmul(e->pd);
    e->binary = po.binary;
    e->wd = wd;
    e->ws = ws;
    std::lock_guard<std::mutex> g(mu_);
    return cache_.emplace(key, e).first->second;
  }

  std::shared_ptr<const PackedWeights> packed_weights(Entry& e, const at::Tensor& w, const at::Tensor& bias,
                                                      const std::vector<at::Tensor>& bn) const {
    std::vector<at::Tensor> sources = {w, bias};
    sources.insert(sources.end(), bn.begin(), bn.end());
    {
      std::lock_guard<std::mutex> g(mu_);
      if (e.packed && stamps_match(e.packed->stamps, sources)) return e.packed;
    }
    // Build outside the lock; concurrent first calls may both build, the last one wins.
    auto p = std::make_shared<PackedWeights>();
    p->stamps = stamps_of(sources);
    at::Tensor wt = w, bt = bias;
    Dims ws = e.ws;
    if (!bn.empty()) {
      // The weight is [N, K] (weight_nk): output channels are dim 0.
      std::tie(wt, bt) = fold_batchnorm(w, bias, bn[0], bn[1], bn[2], bn[3], f_.bn_eps, 0);
      ws = swapped_strides(wt, 2);
    }
    p->weight = reorder_to(wt, plain_desc(wt, e.wd, ws), e.pd.weights_desc());
    if (bt.defined()) p->bias = bt.contiguous();
    std::shared_ptr<const PackedWeights> cp = p;
    std::lock_guard<std::mutex> g(mu_);
    e.packed = cp;
    return cp;
  }

  FusedOp f_;
  std::string name_;
  bool prepack_ = false;
  mutable std::once_flag warned_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<Entry>> cache_;
};

}  // namespace

std::unique_ptr<Kernel> make_matmul_kernel(const Node& n) {
  if (!n.fused || n.fused->anchor != FusedOp::Anchor::Matmul) return nullptr;
  return std::make_unique<MatmulKernel>(n);
}

}  // namespace fxcpp::onednn
