// onednn::conv: convolution (1d/2d/3d, groups, depthwise, dilation) and transposed
// convolution, with bias, folded BatchNorm and a post-op chain. One primitive per
// concrete input signature, built at its first call, always free to choose its weight
// layout (a plain-layout weight can leave oneDNN only its reference implementation). A
// long-lived weight is reordered once into that layout and re-packed only when a source
// changes; any other weight is reordered into a per-thread buffer at every call.
//
// Activations: oneDNN's convolutions run channels-last natively, so the primitive always
// reads and writes channels-last: a channels-last input is read as it is (no copy), any
// other is reordered once into the layout the primitive picked. The result stays
// channels-last when layout_propagation asked for it (chains of convolutions then never
// reorder); otherwise it is copied to the contiguous layout eager returns.
//
// The exception (layout_propagation's blocked_layout): an fp32 convolution with a long reduction
// that eager runs on NCHW tensors runs, as eager's does, on oneDNN's NCHW-blocked layouts, whose
// error stays eager's where NHWC's grows 2-6.6x past it; its input is reordered in and its output
// back, and a full-size post-op operand is read in the blocked layout.
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>

#include <atomic>
#include <optional>

#include "runtime/buffer_pool.h"
#include "runtime/host.h"
#include "runtime/onednn/call_args.h"
#include "runtime/onednn/fused_kernel.h"
#include "runtime/onednn/reference.h"

namespace fxcpp::onednn {

namespace {

// Channels-last strides for any rank ≥ 3: [N, C, *S] stored as [N, *S, C] (conv1d included,
// which has no at::MemoryFormat of its own).
std::vector<int64_t> cl_strides(at::IntArrayRef sizes) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> st(nd);
  int64_t s = 1;
  st[1] = s;
  s *= sizes[1];
  for (int64_t i = nd - 1; i >= 2; --i) {
    st[i] = s;
    s *= sizes[i];
  }
  st[0] = s;
  return st;
}

bool channels_last(const at::Tensor& t) {
  if (t.dim() < 3 || t.is_contiguous()) return false;
  auto want = cl_strides(t.sizes());
  for (int64_t i = 0; i < t.dim(); ++i)
    if (t.size(i) != 1 && t.stride(i) != want[i]) return false;
  return true;
}

at::Tensor empty_cl(at::IntArrayRef sizes, const at::TensorOptions& o) {
  return pooled_empty_strided(sizes, cl_strides(sizes), o.dtype().toScalarType());
}

at::Tensor to_cl(const at::Tensor& t) { return channels_last(t) ? t : empty_cl(t.sizes(), t.options()).copy_(t); }

struct ConvEntry {
  dnnl::primitive_desc pd;
  dnnl::primitive prim;
  std::string key, impl, impl_note;  // key: the call signature (raw bytes)
  std::string pack_note;  // FusedKernel::entry reads it; convolutions leave it empty (matmul_kernel.cpp)
  std::string impl_suffix;  // likewise
  std::atomic<int> choice{kUndecided};  // oneDNN or ATen, decided at the signature's first call
  memory::desc src_plain, dst_plain;
  std::optional<dnnl::reorder> src_reorder;  // input layout → the primitive's, when they differ
  CallDescs src_reorder_descs;                // its descs, and its calls' memory objects, kept
  ArgMemories src_reorder_memories;           // (call_args.h), as the primitive's own
  std::optional<dnnl::reorder> dst_reorder;  // blocked dst → the output's layout (runs_blocked)
  CallDescs dst_reorder_descs;
  ArgMemories dst_reorder_memories;
  std::vector<BinaryArg> binary;
  CallDescs descs;            // pd's, queried once (call_args.h)
  ArgMemories arg_memories;   // its calls' memory objects, kept
  std::shared_ptr<const PackedWeights> packed;  // swapped under the kernel's lock when a source changes
};

class ConvKernel final : public FusedKernel<ConvEntry> {
 public:
  // Parameters, buffers and constants keep their values between calls: pack them once.
  explicit ConvKernel(const Node& n) : FusedKernel(n, long_lived(n.args[1].value)) {}

 private:
  at::Tensor reference(const Stack& stack) const override {
    at::Tensor y = reference_conv(f_, stack);
    return f_.channels_last ? to_cl(y) : y;
  }

  void run_onednn(Stack& stack) const override {
    // Without native kernels for the dtype, the primitive runs in fp32 (activations widened
    // here, channels-last strides kept; the result rounded back once, or kept fp32 for the
    // next widened kernel: widen_chains). The model's dtype is the weight's: the src may
    // already arrive widened.
    const c10::ScalarType io = stack[1].toTensor().scalar_type(), cdt = compute_dtype(io);
    const bool widen = cdt != io;
    const at::Tensor x = stack[0].toTensor().to(cdt);
    const at::Tensor w = stack[1].toTensor();
    const at::Tensor bias = stack[2].isNone() ? at::Tensor() : stack[2].toTensor();
    const int64_t nd = x.dim(), sp = nd - 2;
    const int64_t g = f_.groups;
    CallBounds cb = call_bounds(stack);  // max |x|: recorded by its producer, or read once where a check needs it
    if (!cb.src_known && spreads_non_finite(x, w, cdt)) {
      cb.src_max = max_abs(x);
      ++stats().input_reads;
    }
    if (cb.src_max == std::numeric_limits<float>::infinity()) {
      note(std::string("aten: at a call whose input is not all finite (oneDNN's ") + c10::toString(cdt) +
           " kernels read an odd number of channels per group in pairs, and would spread a NaN or inf to a neighbour)");
      return finish(stack, frozen() ? frozen_reference(stack) : eager_result(stack));
    }
    // Output sizes and oneDNN's right padding (what makes its size formula give the same sizes).
    Dims out = {x.size(0), f_.transposed ? w.size(1) * g : w.size(0)};
    Dims pad_l(f_.padding.begin(), f_.padding.end()), pad_r(sp), dil(sp), strides(f_.stride.begin(), f_.stride.end());
    for (int64_t i = 0; i < sp; ++i) {
      const int64_t extra_l = f_.pad_before.empty() ? 0 : f_.pad_before[i];
      const int64_t extra_r = f_.pad_after.empty() ? 0 : f_.pad_after[i];
      // A folded constant_pad_nd: the conv sees an input extra_l + extra_r larger.
      const int64_t in = x.size(2 + i) + extra_l + extra_r, k = w.size(2 + i), s = f_.stride[i], d = f_.dilation[i],
                    p = f_.padding[i];
      const int64_t ext = (k - 1) * d + 1;
      int64_t o;
      if (f_.transposed) {
        o = (in - 1) * s - 2 * p + ext + f_.output_padding[i];
        pad_r[i] = p - f_.output_padding[i];
      } else {
        o = (in + 2 * p - ext) / s + 1;
        pad_r[i] = (o - 1) * s + ext - in - p + extra_r;
        pad_l[i] += extra_l;
      }
      out.push_back(o);
      dil[i] = d - 1;
    }
    // oneDNN's convolutions run channels-last natively (brgconv); the primitive always writes
    // channels-last, and a contiguous result (for a graph output, a view) is copied out of it.
    const bool out_cl = f_.channels_last;
    const std::vector<at::Tensor> bn = bn_tensors(stack);

    std::vector<at::Tensor> operands(f_.post_ops.size());
    at::Tensor in_place;
    int sum_in_place = -1;  // which post-op accumulates into its operand's buffer (one at most)
    for (size_t i = 0; i < f_.post_ops.size(); ++i) {
      const PostOp& p = f_.post_ops[i];
      if (p.arg < 0) continue;
      const bool owned =
          p.kind == PostOp::Kind::Sum && !widen && !in_place.defined() && uniquely_owned(stack[p.arg].toTensor());
      at::Tensor t = stack[p.arg].toTensor();
      if (widen) t = t.to(cdt);
      // A full-size operand in the output's layout can be read (or accumulated into) as it is.
      const bool full = t.sizes().equals(at::IntArrayRef(out));
      if (owned && full && out_cl && channels_last(t)) in_place = t, sum_in_place = static_cast<int>(i);
      operands[i] = full ? to_cl(t) : operand_for_dst(t, nd).contiguous();
    }

    const bool blocked = runs_blocked(io, cdt);
    if (blocked) sum_in_place = -1, in_place = at::Tensor();
    const bool cached = cache_pack(w, bias, bn);
    std::vector<at::Tensor> shape_of = {x, w, bias};
    for (const auto& t : operands) shape_of.push_back(t);
    std::string key = signature(shape_of, sum_in_place) + (cached ? "c" : "p") + (blocked ? "b" : "");
    const c10::ScalarType bias_dt = bias_dtype(bias, io);
    // With a packed weight, relu/clip run as oneDNN's own clamps at calls proven NaN-free, and
    // a second primitive with the NaN-preserving chain (built at the first call that needs it)
    // runs the others.
    const bool plain = plain_clamps_possible(cached);
    const std::string weight_note = cached ? std::string(kPackedOnce) : "weight reordered every call (" + per_call_reason() + ")";
    auto make = [&](bool plain_clamps) {
      return [&, plain_clamps] {
        return build(x, w, cdt, bias.defined(), bias_dt, !bn.empty(), out, pad_l, pad_r, dil, strides, operands,
                     sum_in_place, plain_clamps, blocked);
      };
    };
    auto e = entry(key, make(plain), onednn_name(io), weight_note + (plain ? ", clamps plain where the input is checked finite" : ""));
    auto run_once = [&](bool scratch) {
      auto pack_for = [&](ConvEntry& r) {
        return packed_weights(r, w, bias, bn, PackLayout{"onednn", r.descs.weights},
                              [&](const at::Tensor& wt, const at::Tensor& bt) {
                                const at::Tensor wc = weight_for_reorder(wt, cdt);
                                return std::make_pair(reorder_to(wc, weight_plain(wc), r.pd.weights_desc()),
                                                      bt.defined() ? bt.to(bias_dt).contiguous() : at::Tensor());
                              });
      };
      // r: the primitive this call runs.
      auto [r, packed] = entry_for_call(e, cached, key, make, pack_for, onednn_name(io), weight_note, x, operands, cb);
      // Input: as it is when the primitive reads that layout, else reordered into the one it picked.
      CallArgs args;
      at::Tensor src_buf;
      if (r->src_reorder) {  // built once per signature, like the primitive
        src_buf = alloc_for(r->descs.src);
        CallArgs reorder_args;
        reorder_args.add(DNNL_ARG_FROM, r->src_plain, x.const_data_ptr());
        reorder_args.add(DNNL_ARG_TO, r->descs.src, src_buf.mutable_data_ptr());
        execute(*r->src_reorder, r->src_reorder_descs, r->src_reorder_memories, reorder_args);
        ++stats().input_reorders;
        args.add(DNNL_ARG_SRC, r->descs.src, src_buf.const_data_ptr());
      } else {
        args.add(DNNL_ARG_SRC, r->src_plain, x.const_data_ptr());
      }
      at::Tensor dst = r->dst_reorder           ? alloc_for(r->descs.dst)
                       : sum_in_place < 0 ? empty_cl(out, x.options())
                       : scratch          ? in_place.clone()
                                          : in_place;
      args.add(DNNL_ARG_DST, r->descs.dst, dst.mutable_data_ptr());
      at::Tensor b_hold;  // keeps a per-call bias alive until execute() returns
      if (cached) {
        args.add(DNNL_ARG_WEIGHTS, r->descs.weights, packed->weight.const_data_ptr());
        if (packed->bias.defined()) args.add(DNNL_ARG_BIAS, r->descs.bias, packed->bias.const_data_ptr());
      } else {
        auto [wt, bt] = folded(w, bias, bn);
        const at::Tensor wc = weight_for_reorder(wt, cdt);
        args.add(DNNL_ARG_WEIGHTS, r->descs.weights,
                 reorder_to_thread_buffer(wc, weight_plain(wc), r->descs.weights).get_data_handle());
        if (bt.defined()) args.add(DNNL_ARG_BIAS, r->descs.bias, (b_hold = bt.to(bias_dt).contiguous()).const_data_ptr());
      }
      std::vector<at::Tensor> blocked_operands;  // a full-size operand, in a blocked dst's layout
      blocked_operands.reserve(r->binary.size());
      for (const BinaryArg& b : r->binary) {
        const at::Tensor& t = operands[b.operand];
        const void* p = t.const_data_ptr();
        if (r->dst_reorder && b.desc == r->descs.dst)
          p = blocked_operands.emplace_back(reorder_to(t, plain_desc(t), b.desc)).const_data_ptr();
        args.add(DNNL_ARG_ATTR_MULTIPLE_POST_OP(b.position) | DNNL_ARG_SRC_1, b.desc, p);
      }
      execute(r->prim, r->descs, r->arg_memories, args);
      if (r->dst_reorder) {  // blocked → the output's layout, in one pass
        at::Tensor res = out_cl ? empty_cl(out, x.options()) : pooled_empty(out, cdt);
        CallArgs reorder_args;
        reorder_args.add(DNNL_ARG_FROM, r->descs.dst, dst.const_data_ptr());
        reorder_args.add(DNNL_ARG_TO, r->dst_plain, res.mutable_data_ptr());
        execute(*r->dst_reorder, r->dst_reorder_descs, r->dst_reorder_memories, reorder_args);
        return res.scalar_type() == out_dtype_ ? res : res.to(out_dtype_);
      }
      if (out_cl && dst.scalar_type() == out_dtype_) return dst;
      // Contiguous, as eager returns it (or channels-last as asked), in the output's dtype.
      at::Tensor res = out_cl ? empty_cl(dst.sizes(), dst.options().dtype(out_dtype_)) : pooled_empty(dst.sizes(), out_dtype_);
      res.copy_(dst);
      return res;
    };
    finish(stack, choose(*e, stack, run_once));
    record_output_bound(stack, cb);
  }

  // ATen's result for a frozen kernel (Options.freeze released the weight, and any BatchNorm's
  // tensors): from the weight and bias its kept pack holds, BatchNorm folded in (exact), so none
  // is applied again. Computed in fp32 and rounded once, as the widened path computes.
  at::Tensor frozen_reference(const Stack& stack) const {
    const std::shared_ptr<const PackedWeights> pack = a_frozen_pack();
    const at::Tensor w = stack[1].toTensor();  // released: its shape and dtype only
    auto wide = [](const at::Tensor& t) { return t.is_floating_point() ? t.to(at::kFloat) : t; };
    Stack s = stack;
    s[0] = wide(stack[0].toTensor());
    s[1] = unpack_weight(*pack, w).to(at::kFloat);
    s[2] = pack->bias.defined() ? c10::IValue(pack->bias.to(at::kFloat)) : c10::IValue();
    for (const PostOp& p : f_.post_ops)
      if (p.arg >= 0) s[p.arg] = wide(stack[p.arg].toTensor());
    FusedOp unfolded = f_;
    unfolded.bn_arg = -1;
    at::Tensor y = reference_conv(unfolded, s).to(out_dtype_);
    return f_.channels_last ? to_cl(y) : y;
  }

  // layout_propagation's blocked_layout, for the fp32 calls it was decided for (a call in another
  // dtype runs NHWC).
  bool runs_blocked(c10::ScalarType io, c10::ScalarType cdt) const {
    return f_.blocked_layout && io == at::kFloat && cdt == at::kFloat;
  }

  // oneDNN's bf16 and fp16 convolutions read input channels in pairs (VNNI). Where a group has an
  // odd number, the last pair's second value is the next pixel's (or the next group's) first
  // channel, times a zero weight: 0 for a finite value, but NaN for a NaN or inf, at an output
  // eager gives finite (brgconv, brgconv_1x1 and jit_bf16 on AVX-512-BF16, transposed too;
  // tests/python/test_conv_non_finite.py). Such a call is then computed as eager computes it,
  // when its input holds a NaN or inf. A depthwise convolution (one channel in and one out per
  // group) runs on oneDNN's depthwise kernels, which read no pairs: not checked.
  bool spreads_non_finite(const at::Tensor& x, const at::Tensor& w, c10::ScalarType compute) const {
    if (c10::elementSize(compute) != 2) return false;
    const int64_t in_per_group = x.size(1) / f_.groups;
    const int64_t out_per_group = f_.transposed ? w.size(1) : w.size(0) / f_.groups;
    return in_per_group % 2 == 1 && !(in_per_group == 1 && out_per_group == 1);
  }

  at::Tensor unpack_weight(const PackedWeights& p, const at::Tensor& w) const override {
    at::Tensor plain = at::empty(w.sizes(), w.options().device(at::kCPU).dtype(scalar_type_of(p.layout.md.get_data_type())));
    reorder_into(p.weight, p.layout.md, plain, weight_plain(plain));
    return plain;
  }

  // oneDNN's weight dims/strides for torch's weight: grouped weights gain a leading G dim;
  // a transposed conv's [IC, OC/G, k..] is read as [OC, IC, k..] through its strides.
  memory::desc weight_plain(const at::Tensor& w) const {
    const int64_t g = f_.groups;
    Dims d = dims_of(w.sizes()), s = dims_of(w.strides());
    if (f_.transposed) {
      std::swap(d[0], d[1]);
      std::swap(s[0], s[1]);
      if (g > 1) {  // torch [G*ICg, OCg, k..]: after the swap d = [OCg, G*ICg, ..]
        const int64_t icg = d[1] / g;
        d[1] = icg;
        d.insert(d.begin(), g);
        s.insert(s.begin(), icg * s[1]);
      }
    } else if (g > 1) {
      d[0] /= g;
      d.insert(d.begin(), g);
      s.insert(s.begin(), d[1] * s[0]);
    }
    return memory::desc(d, dtype_of(w.scalar_type()), s);
  }

  std::shared_ptr<ConvEntry> build(const at::Tensor& x, const at::Tensor& w, c10::ScalarType cdt, bool has_bias,
                                   c10::ScalarType bias_dt, bool folded,
                                   const Dims& out, const Dims& pad_l, const Dims& pad_r, const Dims& dil,
                                   const Dims& strides, const std::vector<at::Tensor>& operands, int sum_in_place,
                                   bool plain_clamps, bool blocked) const {
    const int64_t nd = x.dim();
    auto dt = dtype_of(cdt);
    auto e = std::make_shared<ConvEntry>();
    e->src_plain = plain_desc(x);
    const memory::desc w_plain = weight_plain(w);
    using tag = memory::format_tag;
    // Channels-last input: read it as it is. Otherwise let oneDNN choose (and reorder into it).
    // Blocked (runs_blocked): the src free, the dst NCHW-blocked as eager's oneDNN runs it for NCHW
    // tensors (left free, oneDNN 3.2 takes NHWC's brgconv, with NHWC's error).
    memory::desc src_md =
        channels_last(x) && !blocked ? e->src_plain : memory::desc(dims_of(x.sizes()), dt, tag::any);
    const tag cl_tag = nd == 3 ? tag::nwc : nd == 4 ? tag::nhwc : tag::ndhwc;
    const memory::desc blocked_dst(out, dt, blocked_tag(nd));
    const memory::desc dst_md = blocked ? blocked_dst : memory::desc(out, dt, cl_tag);
    memory::desc w_md(w_plain.get_dims(), dt, tag::any);
    memory::desc bias_md;
    if (has_bias || folded) bias_md = memory::desc({out[1]}, has_bias ? dtype_of(bias_dt) : dt, tag::a);
    PostOpArgs po = build_post_ops(f_, operands, sum_in_place, nd, plain_clamps, blocked ? &blocked_dst : nullptr);
    if (f_.transposed) {
      auto pd = dnnl::deconvolution_forward::primitive_desc(cpu_engine(), dnnl::prop_kind::forward_inference,
                                                            dnnl::algorithm::deconvolution_direct, src_md, w_md, bias_md,
                                                            dst_md, strides, dil, pad_l, pad_r, po.attr);
      e->prim = dnnl::deconvolution_forward(pd);
      e->pd = pd;
    } else {
      auto pd = dnnl::convolution_forward::primitive_desc(cpu_engine(), dnnl::prop_kind::forward_inference,
                                                          dnnl::algorithm::convolution_direct, src_md, w_md, bias_md,
                                                          dst_md, strides, dil, pad_l, pad_r, po.attr);
      e->prim = dnnl::convolution_forward(pd);
      e->pd = pd;
    }
    // A shape the blocked kernels do not take would leave oneDNN its reference implementation:
    // NHWC's fast one instead.
    if (blocked && std::string(e->pd.impl_info_str()).rfind("ref", 0) == 0)
      return build(x, w, cdt, has_bias, bias_dt, folded, out, pad_l, pad_r, dil, strides, operands, sum_in_place,
                   plain_clamps, false);
    e->binary = po.binary;
    e->descs = CallDescs(e->pd);
    if (!(e->src_plain == e->descs.src)) {
      dnnl::primitive_attr attr;  // a scratchpad per thread (call_args.h), as every primitive here
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::reorder::primitive_desc rpd(cpu_engine(), e->src_plain, cpu_engine(), e->descs.src, attr);
      e->src_reorder = dnnl::reorder(rpd);
      e->src_reorder_descs = CallDescs(rpd);
    }
    if (blocked) {
      int64_t k = w.size(1);
      for (int64_t i = 2; i < w.dim(); ++i) k *= w.size(i);
      e->impl_suffix = " on NCHW blocked by " + std::to_string(channel_block()) +
                       " channels (eager's layout for an NCHW input: reduction C x k x k = " + std::to_string(k) +
                       ", where NHWC's fp32 error grows past eager's)";
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      e->dst_plain = f_.channels_last ? memory::desc(out, dt, cl_tag) : memory::desc(out, dt, tag_plain(nd));
      dnnl::reorder::primitive_desc rpd(cpu_engine(), e->descs.dst, cpu_engine(), e->dst_plain, attr);
      e->dst_reorder = dnnl::reorder(rpd);
      e->dst_reorder_descs = CallDescs(rpd);
    }
    return e;
  }

  // The NCHW-blocked layout eager's oneDNN runs fp32 convolutions on: 16 channels per block where
  // oneDNN runs AVX-512 kernels, 8 on AVX2.
  static int64_t channel_block() {
    static const int64_t b = host().onednn_isa.rfind("avx512", 0) == 0 ? 16 : 8;
    return b;
  }
  static memory::format_tag blocked_tag(int64_t nd) {
    using tag = memory::format_tag;
    if (channel_block() == 16) return nd == 3 ? tag::nCw16c : nd == 4 ? tag::nChw16c : tag::nCdhw16c;
    return nd == 3 ? tag::nCw8c : nd == 4 ? tag::nChw8c : tag::nCdhw8c;
  }

  static memory::format_tag tag_plain(int64_t nd) {
    return nd == 3 ? memory::format_tag::ncw : nd == 4 ? memory::format_tag::nchw : memory::format_tag::ncdhw;
  }
};

}  // namespace

std::unique_ptr<Kernel> make_conv_kernel(const Node& n) {
  if (!n.fused || n.fused->anchor != FusedOp::Anchor::Conv) return nullptr;
  return std::make_unique<ConvKernel>(n);
}

}  // namespace fxcpp::onednn
