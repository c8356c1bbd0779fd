// onednn::matmul: Linear / addmm / mm / bmm with bias, folded BatchNorm and a post-op
// chain. Per concrete call signature, one of (named so in explain()):
//  - "onednn": oneDNN's matmul primitive, built at the signature's first call. A long-lived
//    2-d weight (a parameter) is reordered once into the layout the primitive prefers and
//    re-packed only when that tensor changes (where oneDNN runs its gemm, which packs at every
//    call, that layout is the weight's own and the pack is the weight itself: see build()).
//    Any other weight is read where it lies:
//    measured on oneDNN 3.2 (brgemm), reading a plain [K, N] or [N, K] weight is never slower
//    than reordering it at every call.
//  - "onednn:bf16-as-fp32" / "onednn:fp16-as-fp32": the same primitive in fp32 where this
//    host has no native kernels for the dtype (FusedKernel::compute_dtype).
//  - "gemv": M <= kGemvMaxM (batch-1 serving, decoding), or a narrow fp32 output at any M
//    (narrow_output): our GEMV (runtime/cpu/gemv.h) streams the weight's [N, K] rows where
//    they lie, then the post-ops run as ATen ops on the small [M, N] result.
//  - "mkl:bf16": a bf16 weight where oneDNN has no bf16 matmul and runs its gemm (below
//    AVX-512): MKL's bf16 GEMM (runtime/cpu/mkl_bf16_gemm.h) reads the bf16 weight and
//    activations where they lie and accumulates in fp32, converting the weight as it packs it
//    (no separate widening pass, no fp32 copy held: GPT-2's bf16 9% faster than widening for
//    oneDNN, the other transformers level; benchmarks/results/mkl-bf16-gemm/); the post-ops
//    then run as ATen ops in place on the fp32 result, rounded once at the end.
// An fp32 matmul with a long K runs on oneDNN's gemm:jit where oneDNN would run brgemm:
// brgemm's error grows with K, gemm's stays at eager's (common.h, take_gemm_for_long_k).
// Whichever it is, the signature's first call measures it against eager's ATen ops.
#include <ATen/ops/empty.h>

#include <atomic>
#include <cstdlib>

#include "runtime/buffer_pool.h"
#include "runtime/cpu/gemv.h"
#include "runtime/cpu/isa.h"
#include "runtime/cpu/mkl_bf16_gemm.h"
#include "runtime/host.h"
#include "runtime/onednn/call_args.h"
#include "runtime/onednn/fused_kernel.h"
#include "runtime/onednn/reference.h"

namespace fxcpp::onednn {

namespace {

// The largest M the GEMV takes by default, measured with `make micro` (its gemv rows time it
// against oneDNN's primitive forced and eager; README, "Small-M GEMM"). The GEMV computes in
// fp32 and reads the weight where it lies, so what it meets depends on oneDNN's ISA and on
// whether oneDNN would get a packed weight:
//  - oneDNN on AVX2: its kernels lose to the GEMV up to M = 16, packed or not (0.3-0.9x the
//    GEMV's time; fp32 and bf16/fp16 computed as fp32).
//  - oneDNN on AVX-512, weight packed: its brgemm streams the packed panels faster from M = 2
//    (1.4x at M = 4, 1.5x at M = 16 on a 64 MB fp32 weight), except on weights of a few MB
//    at M <= 4, where the GEMV stays 0-35% faster (L2/L3-resident: 1-4 MB weights). M = 1
//    stays with the GEMV (ties on large weights, 10-15% faster on small ones). With native
//    bf16 (vdpbf16ps) oneDNN ties the GEMV at M = 1 on small weights and is 1.6x faster on
//    large ones, and faster at every larger M: never the GEMV. A bf16/fp16 weight computed in
//    fp32 is another matter: the GEMV reads its 2-byte rows, oneDNN the fp32 pack, twice the
//    bytes. There the GEMV stays faster up to M = 4 at every size (Intel AVX512-BF16 host
//    without AMX, bf16: 1.1-1.5x at M = 4 on 8-34 MB weights in `make micro`; 1.1-1.6x on
//    16-32 MB and 2.7-3.2x on LLaMA-7B's 90 MB MLP weight, where oneDNN took longer than
//    eager: benchmarks/results/aten-native-alternative/gemv_m4.txt); at M = 8 oneDNN ties or
//    wins.
//  - oneDNN on AVX-512, weight read in place (pack_weights=False, a non-parameter weight): the
//    GEMV wins up to M = 16 in fp32 and up to M = 4 against native bf16.
// Whichever runs, its first call is measured against eager as always.
constexpr int64_t kGemvMaxM = 16;
constexpr int64_t kGemvMaxMNativeBf16 = 4;
constexpr int64_t kGemvMaxMAvx512Packed = 1;
constexpr int64_t kGemvMaxMAvx512PackedSmall = 4;  // weights up to kSmallWeightBytes
constexpr int64_t kGemvMaxMAvx512PackedWidened = 4;  // a bf16/fp16 weight computed in fp32
constexpr int64_t kSmallWeightBytes = 4 << 20;
constexpr int64_t kGemvMaxMNativeBf16Packed = 0;

// oneDNN 3.2 has brgemm matmul kernels from AVX-512 up (AMX ISAs included); below, every
// matmul is its gemm, which copies B into its own panels at every call.
bool onednn_has_brgemm_matmul() {
  static const bool avx512 = host().onednn_isa.rfind("avx512", 0) == 0;
  return avx512;
}

// A bf16/fp16 weight the primitive reads widened: where oneDNN runs its gemm, widened at each
// call into a pooled buffer rather than held as an fp32 copy beside the parameter (three times
// a bf16 weight's bytes in all). The gemm re-packs B at every call anyway; the widening adds
// 2-5% to a bf16 BERT-base or T5-small (AVX2 host, batch 1) and takes peak RSS from 1.62x and
// 1.41x eager to 1.12-1.15x (benchmarks/results/bf16-widened-per-call/). A folded BatchNorm
// (folding costs more than widening) and a weight Options.freeze releases (only the pack remains)
// keep their copy.
bool widens_per_call(bool widen, bool folds_bn, bool freezing) {
  return widen && !folds_bn && !freezing && !onednn_has_brgemm_matmul();
}

// A narrow fp32 output (a classifier or regression head, token classification over a few
// labels: N < 12) runs on the GEMV at any M where oneDNN would run brgemm. brgemm sums each
// output along K in one accumulator; eager's GEMM below 12 columns (MKL's narrow path, as
// measured on the AMD hosts; from 12 the two agree at short K) lands closer to fp64: brgemm gave
// 1.3-3.6x eager's error from K = 64 on, past the harness rule's 2x in 23 shapes of 90.
// The GEMV sums over vector lanes: 0.35-1.04x eager's error, in 0.97-1.06x oneDNN's time (one
// shape of 32, 4096 x 768 x 2, 1.26; benchmarks/results/narrow-n-gemv/).
constexpr int64_t kNarrowN = 11;
bool narrow_output(c10::ScalarType io, int64_t N) {
  return io == at::kFloat && N <= kNarrowN && onednn_has_brgemm_matmul();
}

int64_t gemv_max_m(bool native_half, bool widened, bool onednn_packs, int64_t weight_bytes) {
  if (onednn_packs && onednn_has_brgemm_matmul()) {
    if (native_half) return kGemvMaxMNativeBf16Packed;
    if (widened) return kGemvMaxMAvx512PackedWidened;
    return weight_bytes <= kSmallWeightBytes ? kGemvMaxMAvx512PackedSmall : kGemvMaxMAvx512Packed;
  }
  return native_half ? kGemvMaxMNativeBf16 : kGemvMaxM;
}

// FXCPP_KERNEL_CHOICE=gemv forces the GEMV wherever its layout allows (any M), =mkl MKL's
// bf16 GEMM wherever it applies (any M, any host: a bf16 weight, not frozen, no BatchNorm);
// each keeps the other off, =onednn or =aten keep both off, and =ours (our kernel, never
// eager's ops) leaves both to their rules.
enum class Policy { Auto, Force, Never };
Policy policy_for(const char* path) {
  const char* v = std::getenv("FXCPP_KERNEL_CHOICE");
  const std::string s = v ? v : "";
  if (s == path) return Policy::Force;
  return s == "onednn" || s == "aten" || s == "gemv" || s == "mkl" ? Policy::Never : Policy::Auto;
}

struct MatmulEntry {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  std::string key, impl, impl_note;  // key: the call signature (raw bytes)
  std::string pack_note;  // set where the pack keeps the weight's own layout (build)
  std::string impl_suffix;  // why this implementation, where oneDNN's first choice was set aside
  std::atomic<int> choice{kUndecided};  // ours (oneDNN or the GEMV) or ATen, decided at the first call
  std::vector<BinaryArg> binary;
  std::shared_ptr<const PackedWeights> packed;  // swapped under the kernel's lock when a source changes
  CallDescs descs;            // pd's, queried once (call_args.h)
  ArgMemories arg_memories;   // its calls' memory objects, kept
};

class MatmulKernel final : public FusedKernel<MatmulEntry> {
 public:
  // Parameters, buffers and constants keep their values between calls: pack them once.
  explicit MatmulKernel(const Node& n)
      : FusedKernel(n, long_lived_2d(n.args[1].value)), gemv_policy_(policy_for("gemv")), mkl_policy_(policy_for("mkl")), gemv_(cpu::select_gemv()),
        long_k_(long_k_threshold()) {}

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
    if (run_gemv(stack, src, w_in, bias, out_shape)) return;
    if (run_mkl_bf16(stack, src, w_in, bias, out_shape)) return;
    CallBounds cb = call_bounds(stack);
    // Without native kernels for the dtype, the primitive runs in fp32 (activations widened
    // here, unless they arrive widened: widen_chains). The model's dtype is the weight's.
    const c10::ScalarType io = w_in.scalar_type(), cdt = compute_dtype(io);
    const bool widen = cdt != io;
    src = src.to(cdt);
    // oneDNN's matmul reads row- or column-major operands; anything else is copied once here.
    if (!matmul_friendly(src)) src = src.contiguous();
    // (A frozen weight is never read: its strides only shape the signature.)
    const at::Tensor w0 = frozen() || matmul_friendly(w_in) ? w_in : w_in.contiguous();
    const std::vector<at::Tensor> bn = bn_tensors(stack);
    const bool packable = cache_pack(w0, bias, bn);
    const bool per_call_widening = packable && widens_per_call(widen, !bn.empty(), freezing());
    const bool cached = packable && !per_call_widening;
    // Read where it lies unless cached; a BatchNorm is then folded at this call.
    at::Tensor w = w0, b_run = bias;
    if (!cached && !bn.empty()) std::tie(w, b_run) = folded(w0, bias, bn);
    // Widened for this call from the buffer pool (the same few MB at every call, already faulted in).
    if (!cached && widen) w = pooled_converted(w, cdt);
    if (!cached && b_run.defined()) b_run = b_run.to(widen ? cdt : b_run.scalar_type()).contiguous();
    const int64_t nd = src.dim();  // 2 or 3
    // The logical weight [.., K, N]: a Linear's [N, K] weight read transposed through its strides.
    Dims wd, ws;  // (not a structured binding: the lambdas below capture them)
    std::tie(wd, ws) = logical_weight(w);
    const int64_t N = wd[nd - 1];
    Dims dst_dims = dims_of(src.sizes());
    dst_dims[nd - 1] = N;
    if (f_.flatten_src) out_shape.back() = N;
    else out_shape = std::vector<int64_t>(dst_dims.begin(), dst_dims.end());

    // Post-op operands, viewed into the [.., M, N] domain oneDNN sees.
    std::vector<at::Tensor> operands(f_.post_ops.size());
    at::Tensor in_place;
    int sum_in_place = -1;  // which post-op accumulates into its operand's buffer (one at most)
    for (size_t i = 0; i < f_.post_ops.size(); ++i) {
      const PostOp& p = f_.post_ops[i];
      if (p.arg < 0) continue;
      // Before any view of it exists: is the executor's stack the only holder? (Not when
      // widened: the accumulator would be in another dtype.)
      const bool owned = p.kind == PostOp::Kind::Sum && !widen && !in_place.defined() &&
                         uniquely_owned(stack[p.arg].toTensor());
      at::Tensor t = stack[p.arg].toTensor();
      if (f_.flatten_src) t = flatten_operand(t, out_shape);
      operands[i] = operand_for_dst(t, nd).to(widen ? cdt : t.scalar_type()).contiguous();
      if (owned && t.is_contiguous() && t.sizes().equals(at::IntArrayRef(dst_dims)))
        in_place = t, sum_in_place = static_cast<int>(i);
    }

    std::vector<at::Tensor> shape_of = {src, w, b_run};
    for (const auto& t : operands) shape_of.push_back(t);
    std::string key = signature(shape_of, sum_in_place) + (cached ? "c" : "p");
    const c10::ScalarType bias_dt = bias_dtype(bias, io);
    // With a packed weight, relu/clip run as oneDNN's own clamps at calls proven NaN-free (see
    // the conv kernel); a second primitive with the NaN-preserving chain runs the others.
    const bool plain = plain_clamps_possible(cached);
    const std::string weight_note =
        cached              ? std::string(kPackedOnce)
        : per_call_widening ? "weight widened to fp32 at each call, no fp32 copy held (oneDNN's gemm packs it at each call)"
                            : "weight read in place (" + per_call_reason() + ")";
    auto make = [&](bool plain_clamps) {
      return [&, plain_clamps] {
        return build(src, wd, ws, cdt, w.scalar_type(), bias.defined(), bias_dt, !bn.empty(), operands, sum_in_place, dst_dims, cached,
                     plain_clamps);
      };
    };
    std::shared_ptr<MatmulEntry> e =
        entry(key, make(plain), onednn_name(io), weight_note + (plain ? ", clamps plain where the input is checked finite" : ""));
    auto run_once = [&](bool scratch) {
      auto pack_for = [&](MatmulEntry& r) {
        return packed_weights(r, w, bias, bn, PackLayout{"onednn", r.descs.weights},
                              [&](const at::Tensor& wt, const at::Tensor& bt) {
                                const at::Tensor wc = weight_for_reorder(wt, cdt);
                                auto [d, st] = logical_weight(wc);
                                const memory::desc as_it_lies = plain_desc(wc, d, st);
                                // The primitive reads the weight's own layout (build: oneDNN's
                                // gemm): the pack is the weight itself, an alias of the parameter
                                // (kept fresh by the same stamps; cache_pack packs only guardable
                                // storages, which own their memory) or the widened/folded copy.
                                const bool own_layout = plain_desc(dtype_of(cdt), d, st) == r.pd.weights_desc();
                                if (own_layout && wc.scalar_type() == cdt && wc.is_same(w)) ++stats().packs_in_place;
                                const at::Tensor packed_w =
                                    own_layout ? wc.to(cdt).detach() : reorder_to(wc, as_it_lies, r.pd.weights_desc());
                                return std::make_pair(packed_w, bt.defined() ? bt.to(bias_dt).contiguous() : at::Tensor());
                              });
      };
      // r: the primitive this call runs.
      auto [r, packed] = entry_for_call(e, cached, key, make, pack_for, onednn_name(io), weight_note, src, operands, cb);
      // A fresh output is allocated in its final shape (oneDNN writes the same bytes through its
      // [.., M, N] description): a view of it would keep its base alive, and a consumer could
      // then never take the buffer over in place.
      at::Tensor dst = sum_in_place < 0 ? pooled_empty(out_shape, cdt) : scratch ? in_place.clone() : in_place;
      CallArgs args;
      std::optional<memory::desc> w_per_call;  // a weight read as it lies: its desc, made per call (compared by value)
      args.add(DNNL_ARG_SRC, r->descs.src, src.const_data_ptr());
      args.add(DNNL_ARG_DST, r->descs.dst, dst.mutable_data_ptr());
      if (cached) {
        args.add(DNNL_ARG_WEIGHTS, r->descs.weights, packed->weight.const_data_ptr());
        if (packed->bias.defined()) args.add(DNNL_ARG_BIAS, r->descs.bias, packed->bias.const_data_ptr());
      } else {
        w_per_call = plain_desc(w, wd, ws);
        args.add(DNNL_ARG_WEIGHTS, *w_per_call, w.const_data_ptr());
        if (b_run.defined()) args.add(DNNL_ARG_BIAS, r->descs.bias, b_run.const_data_ptr());
      }
      for (const BinaryArg& b : r->binary)
        args.add(DNNL_ARG_ATTR_MULTIPLE_POST_OP(b.position) | DNNL_ARG_SRC_1, b.desc, operands[b.operand].const_data_ptr());
      execute(r->prim, r->descs, r->arg_memories, args);
      if (widen) return to_out_dtype(dst);  // rounded once, at the end (or kept fp32: widen_chains)
      return sum_in_place >= 0 ? dst.view(out_shape) : dst;
    };
    finish(stack, choose(*e, stack, run_once));
    record_output_bound(stack, cb);
  }

  // The small-M path (see the top of the file), where it applies: a 2-d problem whose weight
  // rows [N, K] read with unit stride along K (a Linear's weight as it lies, or x @ W.t()),
  // or a long-lived weight packed once into such rows (a folded BatchNorm, another layout).
  // Returns false (nothing run) where it does not apply.
  bool run_gemv(Stack& stack, const at::Tensor& src, const at::Tensor& w, const at::Tensor& bias,
                std::vector<int64_t> out_shape) const {
    if (gemv_policy_ == Policy::Never || src.dim() != 2 || w.dim() != 2) return false;
    const c10::ScalarType io = w.scalar_type();  // the model's dtype; src may arrive widened
    const bool native_half = compute_dtype(io) != at::kFloat;
    if (src.scalar_type() != io && src.scalar_type() != at::kFloat) return false;
    const std::vector<at::Tensor> bn = bn_tensors(stack);
    const int64_t M = src.size(0), K = src.size(1), N = f_.weight_nk ? w.size(0) : w.size(1);
    const bool small_m = M <= gemv_max_m(native_half, !native_half && io != at::kFloat, cache_pack(w, bias, bn),
                                         static_cast<int64_t>(w.nbytes()));
    const bool narrow = !small_m && narrow_output(io, N);
    if (gemv_policy_ == Policy::Auto && !small_m && !narrow) return false;
    const at::Tensor rows = f_.weight_nk || frozen() ? w : w.t();  // frozen: never read (no op on it)
    const bool direct = !frozen() && bn.empty() && (rows.stride(1) == 1 || rows.size(1) == 1);
    const bool cached = !direct && cache_pack(w, bias, bn);
    if (!direct && !cached) return false;
    if (f_.flatten_src) out_shape.back() = N;
    else out_shape = {M, N};

    const std::string key = "gemv" + signature({src, w, bias}, false) + (cached ? "c" : "d");
    auto e = entry(
        key,
        [&] {
          auto e = std::make_shared<MatmulEntry>();
          e->impl = std::string(cpu::isa_name()) + " " + c10::toString(io) + " rows";
          if (narrow)
            e->impl += " (a narrow output, N = " + std::to_string(N) + " <= " + std::to_string(kNarrowN) +
                       ": brgemm's fp32 error there grows past eager's)";
          return e;
        },
        "gemv", direct ? "weight rows read where they lie" : "weight packed once into [N, K] rows");
    auto run_once = [&](bool) {
      at::Tensor x = src.to(at::kFloat);
      if (x.stride(1) != 1 && K != 1) x = x.contiguous();
      at::Tensor wrows = rows, b = bias;
      std::shared_ptr<const PackedWeights> packed;
      if (cached) {
        packed = packed_weights(*e, w, bias, bn, PackLayout{"gemv", {}, io}, [&](const at::Tensor& wt, const at::Tensor& bt) {
          return std::make_pair((f_.weight_nk ? wt : wt.t()).contiguous(),
                                bt.defined() ? bt.to(at::kFloat).contiguous() : at::Tensor());
        });
        wrows = packed->weight;
        b = packed->bias;
      } else if (b.defined()) {
        b = b.to(at::kFloat).contiguous();
      }
      at::Tensor y = pooled_empty(out_shape, at::kFloat);  // [*, N] contiguous: [M, N] rows
      cpu::GemvArgs a;
      a.x = x.const_data_ptr<float>();
      a.M = M, a.K = K, a.ldx = x.stride(0);
      a.w = wrows.const_data_ptr();
      a.wtype = io;
      a.N = N, a.ldw = wrows.stride(0);
      a.bias = b.defined() ? b.const_data_ptr<float>() : nullptr;
      a.y = y.mutable_data_ptr<float>();
      a.ldy = N;
      gemv_(a);
      if (!f_.post_ops.empty()) y = apply_post_ops(f_, y, stack).contiguous();  // fp32 throughout
      return to_out_dtype(y);
    };
    finish(stack, choose(*e, stack, run_once));
    return true;
  }

  // MKL's bf16 GEMM (see the top of the file), where it applies: a 2-d problem with a bf16
  // weight, no BatchNorm to fold, a weight that stays readable (not Options.freeze), on a host
  // where oneDNN would run its gemm on a widened weight. Returns false (nothing run) elsewhere.
  bool run_mkl_bf16(Stack& stack, at::Tensor src, const at::Tensor& w, const at::Tensor& bias,
                    std::vector<int64_t> out_shape) const {
    const c10::ScalarType io = w.scalar_type();
    if (mkl_policy_ == Policy::Never || io != at::kBFloat16 || src.dim() != 2 || w.dim() != 2 || f_.bn_arg >= 0 ||
        freezing() || !cpu::mkl_bf16_gemm_available())
      return false;
    // Unforced, exactly where oneDNN's path would widen the weight at each call.
    if (mkl_policy_ == Policy::Auto && !widens_per_call(compute_dtype(io) != io, f_.bn_arg >= 0, freezing())) return false;
    if (src.scalar_type() != io && src.scalar_type() != at::kFloat) return false;
    if (bias.defined() && (bias.dim() > 1 || !bias.is_floating_point())) return false;
    const at::Tensor b = f_.weight_nk ? w.t() : w;  // the logical [K, N]
    if (!cpu::mkl_gemm_operand(b)) return false;
    const int64_t M = src.size(0), N = b.size(1);
    if (f_.flatten_src) out_shape.back() = N;
    else out_shape = {M, N};

    std::vector<at::Tensor> shape_of = {src, w, bias};
    for (const PostOp& p : f_.post_ops)
      if (p.arg >= 0) shape_of.push_back(stack[p.arg].toTensor());
    const std::string key = "mkl" + signature(shape_of, false);
    auto e = entry(
        key,
        [&] {
          auto e = std::make_shared<MatmulEntry>();
          e->impl = "cblas_gemm_bf16bf16f32";
          return e;
        },
        "mkl:bf16", "bf16 weight read where it lies, fp32 accumulation, no fp32 copy");
    auto run_once = [&](bool) {
      // Activations kept fp32 by widen_chains are rounded as eager stores them.
      at::Tensor a = src.scalar_type() == io ? src : src.to(io);
      if (!cpu::mkl_gemm_operand(a)) a = a.contiguous();
      at::Tensor y = pooled_empty(out_shape, at::kFloat);
      at::Tensor y2 = y.view({M, N});
      if (bias.defined()) y2.copy_(bias.expand({M, N}));  // accumulated onto (beta = 1), as addmm adds it
      cpu::mkl_bf16_gemm(a, b, y2, bias.defined() ? 1.f : 0.f);
      if (!f_.post_ops.empty()) y = apply_post_ops_in_place(f_, y, stack).contiguous();  // fp32 throughout
      return to_out_dtype(y);
    };
    finish(stack, choose(*e, stack, run_once));
    return true;
  }

  at::Tensor unpack_weight(const PackedWeights& p, const at::Tensor& w) const override {
    if (p.layout.kind == "gemv") return f_.weight_nk ? p.weight : p.weight.t();  // [N, K] rows
    at::Tensor plain = at::empty(w.sizes(), w.options().device(at::kCPU).dtype(scalar_type_of(p.layout.md.get_data_type())));
    auto [d, st] = logical_weight(plain);
    reorder_into(p.weight, p.layout.md, plain, plain_desc(plain, d, st));
    return plain;
  }

  bool reads_rows_in_place(const MatmulEntry& e) const override {
    return e.key.compare(0, 4, "gemv") == 0 && e.key.back() == 'd';
  }

  // Every entry read the rows where they lie (the GEMV): keep them, as they are (no copy: the
  // caller releases the parameter, leaving this the only holder of its memory).
  std::shared_ptr<const PackedWeights> pack_at_freeze(const Stack& args) const override {
    const at::Tensor w = args[1].toTensor(), bias = args[2].isNone() ? at::Tensor() : args[2].toTensor();
    auto p = std::make_shared<PackedWeights>();
    p->layout = PackLayout{"gemv", {}, w.scalar_type()};
    p->weight = (f_.weight_nk ? w : w.t()).detach();
    p->bias = bias.defined() ? bias.detach().to(at::kFloat).contiguous() : at::Tensor();
    return p;
  }

  // The logical weight [.., K, N] as dims and strides: a Linear's [N, K] weight (weight_nk) is
  // read transposed through its strides.
  std::pair<Dims, Dims> logical_weight(const at::Tensor& w) const {
    const int64_t nd = w.dim();
    Dims d = dims_of(w.sizes()), s = dims_of(w.strides());
    if (f_.weight_nk) {
      std::swap(d[nd - 1], d[nd - 2]);
      std::swap(s[nd - 1], s[nd - 2]);
    }
    return {d, s};
  }

  static bool matmul_friendly(const at::Tensor& t) { return t.is_contiguous() || t.transpose(-1, -2).is_contiguous(); }

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

  std::shared_ptr<MatmulEntry> build(const at::Tensor& src, const Dims& wd, const Dims& ws, c10::ScalarType cdt,
                                     c10::ScalarType weight_dtype, bool has_bias, c10::ScalarType bias_dt, bool folded,
                                     const std::vector<at::Tensor>& operands, int sum_in_place, const Dims& dst_dims,
                                     bool cached, bool plain_clamps) const {
    const int64_t nd = src.dim();
    auto dt = dtype_of(cdt);
    memory::desc src_md = plain_desc(src);
    // (plain_desc: the desc each call's weight memory gets, size-1 dims' strides made dense.)
    memory::desc w_md = cached ? memory::desc(wd, dt, memory::format_tag::any) : plain_desc(dt, wd, ws);
    memory::desc dst_md = memory::desc(dst_dims, dt, nd == 2 ? memory::format_tag::ab : memory::format_tag::abc);
    memory::desc bias_md;
    if (has_bias || folded) {
      Dims bd(nd, 1);
      bd[nd - 1] = wd[nd - 1];
      bias_md = memory::desc(bd, has_bias ? dtype_of(bias_dt) : dt, nd == 2 ? memory::format_tag::ab : memory::format_tag::abc);
    }
    PostOpArgs po = build_post_ops(f_, operands, sum_in_place, nd, plain_clamps);
    auto e = std::make_shared<MatmulEntry>();
    e->pd = dnnl::matmul::primitive_desc(cpu_engine(), src_md, w_md, bias_md, dst_md, po.attr);
    // fp32 over a long K: gemm:jit, not brgemm (common.h).
    if (cdt == at::kFloat && weight_dtype == at::kFloat)
      e->impl_suffix = take_gemm_for_long_k(e->pd, src.size(-1), long_k_, [&] {
        return dnnl::matmul::primitive_desc(cpu_engine(), src_md, w_md, bias_md, dst_md, po.attr);
      });
    const bool chose_gemm = !e->impl_suffix.empty();
    // oneDNN's gemm-based matmul (what oneDNN 3.2 runs for fp32 on AVX2-only hosts, which have
    // no brgemm matmul) copies B into its own panels at every call, whatever layout B comes in:
    // a pack in the layout it asks for buys nothing (on the AVX2 host reading the weight as it
    // lies took 0.66-1.05x the packed time, Linear layers at M = 32-1024). So it reads the
    // weight's own layout, and the pack (packed_weights) is the weight itself: no second copy.
    // (Not where gemm was chosen over brgemm: there the layout `any` gives it ran 1.1-1.3x faster
    // than the weight's own, Linears of K = 2048-4096 on the AMX host.)
    if (cached && !chose_gemm && runs_gemm(e->pd)) {
      e->pd = dnnl::matmul::primitive_desc(cpu_engine(), src_md, plain_desc(dt, wd, ws), bias_md, dst_md, po.attr);
      e->pack_note = cdt != weight_dtype || folded
                         ? " in the weight's own layout (oneDNN's gemm packs it at each call)"
                         : " in the weight's own layout (oneDNN's gemm packs it at each call): the weight itself, no copy";
    }
    e->prim = dnnl::matmul(e->pd);
    e->binary = po.binary;
    e->descs = CallDescs(e->pd);
    return e;
  }

  const Policy gemv_policy_, mkl_policy_;
  const cpu::Gemv gemv_;
  const int64_t long_k_;  // long_k_threshold()
};

}  // namespace

std::unique_ptr<Kernel> make_matmul_kernel(const Node& n) {
  if (!n.fused || n.fused->anchor != FusedOp::Anchor::Matmul) return nullptr;
  return std::make_unique<MatmulKernel>(n);
}

}  // namespace fxcpp::onednn
