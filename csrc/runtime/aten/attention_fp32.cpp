// ATen's CPU flash attention, run in fp32 for fp16 queries on a CPU without AVX512-FP16. There
// its fp16 GEMMs have no native kernels: 1.8-2.7x its fp32 time, under AVX-512 and AVX2 dispatch
// alike. Widened into pooled buffers, run in fp32 and rounded once, the same calls take 0.39-0.58x
// the fp16 time (benchmarks/results/attention-fp32/). The result is eager's kernel on unrounded
// operands: more accurate than eager's, never less. bf16 stays native: on AVX-512-BF16 the widened
// calls took 0.88-1.12x the native ones over three runs (no steady gain); AMX hosts have ATen's AMX
// kernels, and AVX2 hosts were not measured. FXCPP_ATTENTION=fp32 or =native forces either for
// bf16 and fp16 where the kernel is created (tests take both paths on any host).
// Unless forced to ATen's kernel (=fp32), the widened call runs the fp32 attention kernel of
// onednn/attention_kernel.cpp (two oneDNN matmuls around a softmax pass, measured against
// ATen's fp32 flash kernel at each signature's first call).
#include <ATen/core/dispatch/Dispatcher.h>

#include <memory>
#include <string>

#include "runtime/attention_mode.h"
#include "runtime/buffer_pool.h"
#include "runtime/host.h"
#include "runtime/kernel.h"

namespace fxcpp {
#ifdef FXCPP_HAS_ONEDNN
namespace onednn {
std::unique_ptr<Kernel> make_fp32_attention_matmuls(const Node& n);  // attention_kernel.cpp
}
#endif
namespace {

constexpr const char* kOp = "aten::_scaled_dot_product_flash_attention_for_cpu";
constexpr int kMaskArg = 5;  // query, key, value, dropout_p, is_causal, *, attn_mask, scale

// Why dtype t's attention runs in fp32 here, or nullptr where it stays native.
const char* attention_in_fp32(c10::ScalarType t) {
  const AttentionMode mode = attention_mode();
  if (mode == AttentionMode::Native) return nullptr;
  if (t != c10::kHalf && t != c10::kBFloat16) return nullptr;
  if (mode == AttentionMode::Fp32) return "FXCPP_ATTENTION=fp32";
  if (t == c10::kHalf && !host().avx512_fp16) return "no native fp16 GEMMs in ATen's attention on this CPU";
  return nullptr;
}

// Operands and output convert through the buffer pool (a fresh allocation of a few MB would fault
// its pages in at every call), each in its own dimension order (pooled_converted): ATen's
// attention lays its output out after the query's, and the graph's views of that output were
// traced on the native call's (GPT-2's query, a slice of one qkv projection, is not dense; made
// contiguous, the output's transpose no longer viewed as [b, L, h * d]).
class AttentionInFp32 final : public Kernel {
 public:
  AttentionInFp32(c10::OperatorHandle op, c10::ScalarType dt, const char* why, std::unique_ptr<Kernel> fp32)
      : op_(std::move(op)), dt_(dt), why_(why), fp32_(std::move(fp32)) {}

  void run(Stack& stack) const override {
    const at::Tensor q = stack[0].toTensor();
    if (q.scalar_type() != dt_ || !q.device().is_cpu()) {  // not what it was compiled for: as eager
      op_.callBoxed(&stack);
      return;
    }
    for (int i = 0; i < 3; ++i) stack[i] = pooled_converted(stack[i].toTensor(), c10::kFloat);
    if (stack[kMaskArg].isTensor() && stack[kMaskArg].toTensor().scalar_type() == dt_)  // a bool mask stays
      stack[kMaskArg] = pooled_converted(stack[kMaskArg].toTensor(), c10::kFloat);
    if (fp32_)
      fp32_->run(stack);
    else
      op_.callBoxed(&stack);
    stack[0] = pooled_converted(stack[0].toTensor(), dt_);  // logsumexp (stack[1]) is fp32 either way
  }
  // The fp32 kernel's kind: it may run oneDNN's matmuls or ATen's flash kernel; explain() says which.
  const char* kind() const override { return fp32_ ? fp32_->kind() : "aten"; }
  std::string ran() const override { return fp32_ ? fp32_->ran() : "aten"; }
  void set_outputs_read(const std::vector<bool>& read) override {
    if (fp32_) fp32_->set_outputs_read(read);
  }
  std::string describe() const override {
    const std::string widened = std::string(dt_ == c10::kHalf ? "fp16" : "bf16") + " operands widened";
    if (fp32_)
      return "in fp32: the " + widened + ", the output rounded once (" + why_ + "); the fp32 call: " + fp32_->describe();
    return "aten in fp32: the " + widened + ", ATen's fp32 attention, the output rounded once (" + why_ + ")";
  }

 private:
  c10::OperatorHandle op_;
  c10::ScalarType dt_;
  const char* why_;  // a string literal
  std::unique_ptr<Kernel> fp32_;  // the fp32 attention kernel, or null: ATen's
};

}  // namespace

void register_attention_kernel(KernelRegistry& r) {
  r.add(kOp, [](const Node& n) -> std::unique_ptr<Kernel> {
    if (!n.op || n.args.empty() || n.args[0].kind != Arg::Kind::Value || !n.args[0].value->meta) return nullptr;
    const c10::ScalarType dt = n.args[0].value->meta->dtype;
    const char* why = attention_in_fp32(dt);
    if (!why) return nullptr;
    std::unique_ptr<Kernel> fp32;
#ifdef FXCPP_HAS_ONEDNN
    if (attention_mode() != AttentionMode::Fp32) fp32 = onednn::make_fp32_attention_matmuls(n);
#endif
    return std::make_unique<AttentionInFp32>(*n.op, dt, why, std::move(fp32));
  });
}

}  // namespace fxcpp
