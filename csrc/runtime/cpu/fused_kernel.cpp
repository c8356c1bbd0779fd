// cpu_fused: runs a cpu::fused node's Program (ir/program.h). Per call: the domain is the
// broadcast of the inputs' shapes; full-size outputs take eager's layout (a pointwise group
// follows a channels-last input, as TensorIterator does; a row group keeps the layout eager
// gave at trace time); every operand is viewed over the domain with adjacent dims merged
// wherever all operands allow it; the interpreter compiled for this host's instruction set
// (interp.h) runs it. No tensor is copied except an input whose row does not merge into one
// stretch of memory (a row group over several dims of a strided tensor), made contiguous.
// A program with a `perm` (reduced dims other than the trailing ones) sees every operand as a
// view permuted so that the reduced dims come last; its outputs are allocated as eager lays
// them out and returned in eager's shapes.
#include <ATen/ops/empty.h>

#include <atomic>
#include <cstdlib>
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "runtime/buffer_pool.h"
#include "runtime/cpu/fused_call.h"
#include "runtime/cpu/isa.h"
#include "runtime/cpu/vectorized_exp.h"
#include "runtime/host.h"
#include "runtime/kernel.h"

namespace fxcpp {
namespace cpu {

void run_DEFAULT(const FusedCall& c);
void run_AVX2(const FusedCall& c);
void run_AVX512(const FusedCall& c);

Interpreter select_interpreter() { return pick<Interpreter>(run_AVX512, run_AVX2, run_DEFAULT); }

void vectorized_exp_DEFAULT(const float* x, float* y, int64_t n);
void vectorized_exp_AVX2(const float* x, float* y, int64_t n);
void vectorized_exp_AVX512(const float* x, float* y, int64_t n);

void vectorized_exp(const float* x, float* y, int64_t n) {
  using Fn = void (*)(const float*, float*, int64_t);
  static const Fn fn = pick<Fn>(vectorized_exp_AVX512, vectorized_exp_AVX2, vectorized_exp_DEFAULT);
  fn(x, y, n);
}

static std::atomic<int64_t> g_in_place{0};
int64_t in_place_outputs() { return g_in_place.load(); }
static std::atomic<int64_t> g_streamed{0};
int64_t streamed_outputs() { return g_streamed.load(); }
static std::atomic<int64_t> g_fused_reductions{0};
void count_fused_reductions(int64_t n) { g_fused_reductions.fetch_add(n, std::memory_order_relaxed); }
int64_t fused_reductions() { return g_fused_reductions.load(); }
static std::atomic<int64_t> g_fused_tails{0};
void count_fused_tails(int64_t n) { g_fused_tails.fetch_add(n, std::memory_order_relaxed); }
int64_t fused_tails() { return g_fused_tails.load(); }
static std::atomic<int64_t> g_row_paced{0};
void count_row_paced(int64_t n) { g_row_paced.fetch_add(n, std::memory_order_relaxed); }
int64_t row_paced_blocks() { return g_row_paced.load(); }
static std::atomic<int64_t> g_packed_planes{0};
void count_packed_plane_call() { g_packed_planes.fetch_add(1, std::memory_order_relaxed); }
int64_t packed_plane_calls() { return g_packed_planes.load(); }
static std::atomic<int64_t> g_planned{0};
void count_planned_call() { g_planned.fetch_add(1, std::memory_order_relaxed); }
int64_t planned_calls() { return g_planned.load(); }
static std::atomic<bool> g_row_prefetch{true};
bool set_row_prefetch(bool on) { return g_row_prefetch.exchange(on); }
bool row_prefetch() { return g_row_prefetch.load(std::memory_order_relaxed); }
static std::atomic<bool> g_planned_on{true};
bool set_planned(bool on) { return g_planned_on.exchange(on); }
bool planned() { return g_planned_on.load(std::memory_order_relaxed); }
static std::atomic<int64_t> g_bf16_direct{0};
void count_bf16_direct(int64_t n) { g_bf16_direct.fetch_add(n, std::memory_order_relaxed); }
int64_t bf16_direct() { return g_bf16_direct.load(); }
static std::atomic<int64_t> g_column_calls{0};
void count_column_call() { g_column_calls.fetch_add(1, std::memory_order_relaxed); }
int64_t column_calls() { return g_column_calls.load(); }

// Either order is allowed; x must be dead after the rsum; a and b unchanged in between.
std::vector<int> centered_sum_partners(const std::vector<PInstr>& code) {
  const int n = static_cast<int>(code.size());
  std::vector<int> partner(code.size(), -1);
  auto unchanged = [&](int from, int to, int r) {  // no instruction in (from, to) writes r
    for (int q = from + 1; q < to; ++q)
      if (writes_reg(code[q], r)) return false;
    return true;
  };
  for (int k = 0; k + 1 < n; ++k) {
    const PInstr &I = code[k], &J = code[k + 1];
    if (I.op != POp::Sub || J.op != POp::RSum || J.a != I.dst || partner[k] >= 0) continue;
    // x dead after the rsum: overwritten by it (a row's sum replaces the values), or not read again.
    if (J.dst != I.dst && read_before_written(code, k + 2, I.dst)) continue;
    for (int q = 0; q < n; ++q) {
      const PInstr& K = code[q];
      if (K.op != POp::RSumSq || K.a != I.a || K.b != I.b || partner[q] >= 0 || q == k || q == k + 1) continue;
      const bool ok = q < k ? K.dst != I.a && K.dst != I.b && unchanged(q, k, I.a) && unchanged(q, k, I.b)
                            : I.dst != I.a && I.dst != I.b && J.dst != I.a && J.dst != I.b &&
                                  unchanged(k + 1, q, I.a) && unchanged(k + 1, q, I.b);
      if (!ok) continue;
      partner[k] = q, partner[q] = k;
      break;
    }
  }
  return partner;
}

}  // namespace cpu

namespace {

using cpu::FusedCall;
using cpu::kMaxDims;
using cpu::Operand;
using cpu::SmallVec;

// The input's strides over the domain: its own dims padded with `pad` trailing 1s, then
// aligned right; a dim it broadcasts along gets stride 0.
std::array<int64_t, kMaxDims> domain_strides(const at::Tensor& t, int pad, at::IntArrayRef D) {
  std::array<int64_t, kMaxDims> st{};
  const int64_t r = static_cast<int64_t>(D.size()), pr = t.dim() + pad;
  for (int64_t i = 0; i < r; ++i) {
    const int64_t j = i - (r - pr);
    if (j < 0 || j >= t.dim() || t.size(j) == 1) continue;
    st[i] = t.stride(j);
  }
  return st;
}

// Where a value of the group lies over the domain, as eager's ops lay it out: its strides
// (0 on a dim it broadcasts along or is 1 in) and the dims it spans (size > 1).
struct EagerLayout {
  std::array<int64_t, kMaxDims> st{};
  std::array<bool, kMaxDims> spans{};
};

// One eager op's result layout (TensorIterator::reorder_dimensions, ATen/TensorIterator.cpp):
// dims sorted innermost-first by the first operand whose strides order them strictly (a
// stride of 0 abstains; equal strides put the shorter dim inner), by insertion sort from the
// contiguous order; the result is dense in that order.
EagerLayout iterator_result(const SmallVec<const EagerLayout*>& ops, const SmallVec<int64_t>& D) {
  const int n = static_cast<int>(D.size());
  EagerLayout r;
  for (const EagerLayout* o : ops)
    for (int d = 0; d < n; ++d) r.spans[d] |= o->spans[d];
  auto extent = [&](int d) { return r.spans[d] ? D[d] : int64_t{1}; };
  auto should_swap = [&](int d0, int d1) {
    for (const EagerLayout* o : ops) {
      const int64_t s0 = o->st[d0], s1 = o->st[d1];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (extent(d0) > extent(d1)) return 1;
    }
    return 0;
  };
  SmallVec<int> perm(n);  // innermost first
  for (int i = 0; i < n; ++i) perm[i] = n - 1 - i;
  for (int i = 1; i < n; ++i) {
    int d1 = i;
    for (int d0 = i - 1; d0 >= 0; --d0) {
      const int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  int64_t next = 1;
  for (int i = 0; i < n; ++i) {
    r.st[perm[i]] = r.spans[perm[i]] ? next : 0;
    next *= extent(perm[i]);
  }
  return r;
}

// The strides eager gives each full output (empty: contiguous, or a row group's `format`).
// A row group's: the dense order eager traced (ProgOutput::order). A pointwise group's: replaying
// its ops' layouts in program order: eager lays out each op's result from that op's own
// operands, so `x_expanded * 3 - y_transposed` is contiguous (x * 3 is) though y alone is not.
// Following eager keeps every view its graph takes of a result valid (a transposed attention
// output stays transposed, a channels-last activation channels-last). Inputs whose strides
// all run in dim order (the common case) give contiguous outputs without the replay.
SmallVec<SmallVec<int64_t>> eager_output_strides(const Program& p, const SmallVec<at::Tensor>& in,
                                                 const SmallVec<int64_t>& D) {
  const int n = static_cast<int>(D.size());
  SmallVec<SmallVec<int64_t>> out(p.outputs.size());
  if (p.row_dims > 0) {
    for (size_t k = 0; k < out.size(); ++k) {
      const std::vector<int>& order = p.outputs[k].order;  // innermost first
      if (order.empty() || order.size() != D.size()) continue;
      out[k].assign(D.size(), 0);
      int64_t next = 1;
      for (int d : order) {
        out[k][d] = next;
        next *= std::max<int64_t>(D[d], 1);
      }
    }
    return out;
  }
  if (n < 2) return out;
  SmallVec<EagerLayout> loads(in.size());
  bool in_order = true;
  for (size_t k = 0; k < in.size(); ++k) {
    loads[k].st = domain_strides(in[k], p.input_pad[k], D);
    const int64_t off = n - (in[k].dim() + p.input_pad[k]);
    for (int64_t j = 0; j < in[k].dim(); ++j)
      if (j + off >= 0) loads[k].spans[j + off] = in[k].size(j) > 1;
    int64_t prev = std::numeric_limits<int64_t>::max();
    for (int d = 0; d < n; ++d) {
      if (loads[k].st[d] == 0) continue;
      in_order &= loads[k].st[d] < prev;
      prev = loads[k].st[d];
    }
  }
  if (in_order) return out;
  std::vector<EagerLayout> reg(static_cast<size_t>(p.num_regs));
  for (const PInstr& I : p.phases[0]) {
    const int arity = pop_arity(I.op);
    if (I.op == POp::Load) {
      reg[I.dst] = loads[I.a];
    } else if (I.op == POp::Store) {
      const EagerLayout& L = reg[I.b];
      SmallVec<int64_t> st(n);
      bool contiguous = true;
      int64_t expect = 1;
      for (int d = n - 1; d >= 0; --d) {  // dims it does not span: dense in place, as eager's are
        st[d] = L.spans[d] ? L.st[d] : expect;
        contiguous &= D[d] <= 1 || st[d] == expect;
        expect *= std::max<int64_t>(D[d], 1);
      }
      if (!contiguous) out[I.a] = std::move(st);
    } else if (arity == 0) {
      reg[I.dst] = EagerLayout{};  // constants abstain
    } else if (I.op == POp::MulAdd || I.op == POp::SubMul || I.op == POp::MulMul) {
      // Two eager ops: inner(a, b), then outer with c, in eager's operand order (imm: c first).
      const EagerLayout inner = iterator_result({&reg[I.a], &reg[I.b]}, D);
      reg[I.dst] = I.imm != 0.f ? iterator_result({&reg[I.c], &inner}, D) : iterator_result({&inner, &reg[I.c]}, D);
    } else {
      SmallVec<const EagerLayout*> ops;
      for (int16_t r : {I.a, I.b, I.c})
        if (static_cast<int>(ops.size()) < arity) ops.push_back(&reg[r]);
      reg[I.dst] = iterator_result(ops, D);
    }
  }
  return out;
}

// t broadcast to rank dims (leading 1s), then permuted as the program runs its domain: a view.
at::Tensor to_program_order(const at::Tensor& t, int64_t rank, const std::vector<int>& perm) {
  if (t.dim() > rank) throw std::invalid_argument("cpu_fused: an input has more dims than the compiled domain");
  std::vector<int64_t> sizes(rank, 1), strides(rank, 0), ps(rank), pst(rank);
  const int64_t off = rank - t.dim();
  for (int64_t j = 0; j < t.dim(); ++j) sizes[j + off] = t.size(j), strides[j + off] = t.stride(j);
  for (int64_t i = 0; i < rank; ++i) ps[i] = sizes[perm[i]], pst[i] = strides[perm[i]];
  return t.as_strided(ps, pst, t.storage_offset());
}

// t (sized as the domain) has these strides on every dim longer than 1 (empty: contiguous).
bool same_strides(const at::Tensor& t, const SmallVec<int64_t>& D, const SmallVec<int64_t>& strides) {
  if (strides.empty()) return t.is_contiguous();
  for (size_t i = 0; i < D.size(); ++i)
    if (D[i] > 1 && t.stride(static_cast<int64_t>(i)) != strides[i]) return false;
  return true;
}

struct Layout {
  SmallVec<int64_t> sizes;
  SmallVec<std::array<int64_t, kMaxDims>> strides;  // per operand (inputs, then outputs)
};

// Drops size-1 dims and merges [lo, hi) dims where every operand's memory runs on.
void coalesce(Layout& L, size_t lo, size_t hi, Layout& out) {
  SmallVec<size_t> keep;
  for (size_t d = lo; d < hi; ++d)
    if (L.sizes[d] != 1) keep.push_back(d);
  if (keep.empty()) keep.push_back(hi - 1);
  SmallVec<int64_t> sizes;
  SmallVec<SmallVec<int64_t>> st(L.strides.size());
  for (size_t d : keep) {
    bool merge = !sizes.empty();
    for (size_t k = 0; merge && k < L.strides.size(); ++k)
      merge = st[k].back() == L.strides[k][d] * L.sizes[d];
    if (merge) {
      sizes.back() *= L.sizes[d];
      for (size_t k = 0; k < L.strides.size(); ++k) st[k].back() = L.strides[k][d];
    } else {
      sizes.push_back(L.sizes[d]);
      for (size_t k = 0; k < L.strides.size(); ++k) st[k].push_back(L.strides[k][d]);
    }
  }
  const size_t base = out.sizes.size();
  out.sizes.insert(out.sizes.end(), sizes.begin(), sizes.end());
  for (size_t k = 0; k < L.strides.size(); ++k)
    for (size_t i = 0; i < st[k].size(); ++i) out.strides[k][base + i] = st[k][i];
}

class CpuFusedKernel final : public Kernel {
 public:
  explicit CpuFusedKernel(const Node& n)
      : prog_(n.program), run_(cpu::select_interpreter()), single_partners_(cpu::centered_sum_partners(prog_->single)),
        no_in_place_(read_after_a_store(*prog_)) {
    for (const auto& ph : prog_->phases)
      for (const PInstr& i : ph) has_minmax_ |= i.op == POp::RMax || i.op == POp::RMin;
  }
  const char* kind() const override { return "cpu_fused"; }
  std::string describe() const override {
    std::string perm;
    for (size_t i = 0; i < prog_->perm.size(); ++i) perm += (i ? "," : "") + std::to_string(prog_->perm[i]);
    return std::string("cpu_fused ") + cpu::isa_name() + ", " + std::to_string(prog_->phases.size()) +
           (prog_->phases.size() == 1 ? " pass" : " passes per row") + ", " + std::to_string(prog_->num_regs) + " registers" +
           (perm.empty() ? "" : ", reduced dims moved last (dims " + perm + ")");
  }

  void run(Stack& stack) const override {
    const Program& p = *prog_;
    const size_t nin = p.inputs.size();
    if (stack.size() != nin) throw std::invalid_argument("cpu_fused: expected " + std::to_string(nin) + " inputs");
    // Inputs only the executor's stack holds die here: a pointwise output may take one's buffer.
    SmallVec<uint8_t> dying(nin, 0);
    for (size_t k = 0; k < nin; ++k) {
      const at::Tensor& t = stack[k].toTensor();
      dying[k] = p.row_dims == 0 && t.use_count() == 1 && t.storage().use_count() == 1 && t.storage_offset() == 0;
    }
    SmallVec<at::Tensor> in(nin);
    for (size_t k = 0; k < nin; ++k) {
      in[k] = stack[k].toTensor();
      if (in[k].scalar_type() != p.inputs[k])
        throw std::invalid_argument(std::string("cpu_fused: input ") + std::to_string(k) + " is " +
                                    c10::toString(in[k].scalar_type()) + ", compiled for " + c10::toString(p.inputs[k]));
      if (!in[k].device().is_cpu()) throw std::invalid_argument("cpu_fused: inputs must be CPU tensors");
      if (!p.perm.empty() && p.input_pad[k] == 0) in[k] = to_program_order(in[k], p.rank, p.perm);
    }
    // The domain: the inputs' shapes (with their pads) broadcast together.
    SmallVec<int64_t> D(p.rank, 1);
    for (size_t k = 0; k < nin; ++k) {
      const int64_t pr = in[k].dim() + p.input_pad[k];
      if (pr > p.rank) throw std::invalid_argument("cpu_fused: an input has more dims than the compiled domain");
      for (int64_t j = 0; j < in[k].dim(); ++j) {
        const int64_t i = j + (p.rank - pr), s = in[k].size(j);
        if (s == 1) continue;
        if (D[i] != 1 && D[i] != s) throw std::invalid_argument("cpu_fused: inputs do not broadcast together");
        D[i] = s;
      }
    }
    const int rd = p.row_dims;
    // The domain in eager's dim order (the same but for a permuted program).
    SmallVec<int64_t> eager_D = D;
    for (size_t i = 0; i < p.perm.size(); ++i) eager_D[p.perm[i]] = D[i];
    // Outputs, in eager's layouts: `out` as the interpreter sees them, `ret` as eager returns them.
    SmallVec<at::Tensor> out(p.outputs.size()), ret(p.outputs.size());
    SmallVec<uint8_t> in_place(p.outputs.size(), 0);
    const SmallVec<SmallVec<int64_t>> eager_strides = eager_output_strides(p, in, eager_D);
    for (size_t k = 0; k < out.size(); ++k) {
      const ProgOutput& o = p.outputs[k];
      if (o.row) {
        SmallVec<int64_t> s(D.begin(), D.end() - rd);
        if (o.keepdim) s.insert(s.end(), rd, 1);
        out[k] = pooled_empty(s, o.dtype);
        ret[k] = out[k];
        if (!p.perm.empty() && o.keepdim) {  // the kept dims lie in eager's order: a view puts the 1s back
          SmallVec<int64_t> e = eager_D;
          for (int i = p.rank - rd; i < p.rank; ++i) e[p.perm[i]] = 1;
          ret[k] = out[k].view(e);
        }
        continue;
      }
      c10::MemoryFormat f = o.format;
      if ((f == c10::MemoryFormat::ChannelsLast && p.rank != 4) || (f == c10::MemoryFormat::ChannelsLast3d && p.rank != 5))
        f = c10::MemoryFormat::Contiguous;
      // In place (pointwise programs only: `dying` is never set for a row program): elementwise,
      // each block's stores follow all its loads (no direct write: below), and no input whose
      // load is read after a store hosts an output (no_in_place_).
      for (size_t j = 0; j < nin && !out[k].defined(); ++j)
        if (dying[j] && !no_in_place_[j] && in[j].scalar_type() == o.dtype && in[j].sizes().equals(D) &&
            same_strides(in[j], D, eager_strides[k]) && !in[j].is_neg() && !in[j].is_conj()) {
          out[k] = in[j];
          dying[j] = 0;
          in_place[k] = 1;
          ++cpu::g_in_place;
        }
      if (out[k].defined()) {
        ret[k] = out[k];
        continue;
      }
      // Eager's layout in eager's dims (a permuted program sees it permuted).
      ret[k] = !eager_strides[k].empty() ? pooled_empty_strided(eager_D, eager_strides[k], o.dtype)
               : rd > 0                  ? pooled_empty(eager_D, o.dtype, f)  // the layout eager gave at trace time
                                         : pooled_empty(eager_D, o.dtype);
      out[k] = p.perm.empty() ? ret[k] : to_program_order(ret[k], p.rank, p.perm);
    }
    bool empty = false;
    for (int64_t d : D) empty |= d == 0;
    if (empty) {  // every elementwise output is empty; a reduced one is not when only its row is
      bool reduced_nonempty = false;
      for (size_t k = 0; k < out.size(); ++k) reduced_nonempty |= p.outputs[k].row && out[k].numel() > 0;
      if (reduced_nonempty)  // the fusion pass keeps zero-length rows out (ATen defines them); a guard
        throw std::invalid_argument(has_minmax_ ? "cpu_fused: a max/min reduction over an empty dimension (eager raises too)"
                                                : "cpu_fused: a reduction over an empty dimension, compiled for non-empty rows");
      return finish(stack, ret);
    }
    // Program::row_first: a node arg (in program order) at its row's first element, as a view
    // broadcast along the row. After the empty check: no row is empty here.
    for (int a : p.row_first) {
      at::Tensor t = in[a];
      const int64_t off = p.rank - t.dim();
      for (int64_t j = std::max<int64_t>(0, p.rank - rd - off); j < t.dim(); ++j)
        if (t.size(j) > 1) t = t.narrow(j, 0, 1);
      in.push_back(std::move(t));
    }
    SmallVec<std::pair<at::Tensor, at::Tensor>> laid_out;  // (output in eager's layout, its contiguous stand-in)
    FusedCall call = layout(p, in, out, D);
    memory_rules(call, in, out, in_place);
    if (call.ndim < 0) {  // a row that does not run on in some input's memory: make those contiguous
      for (size_t k = 0; k < nin; ++k) {  // broadcast to the whole domain, then laid out densely
        std::vector<int64_t> padded = in[k].sizes().vec();
        padded.insert(padded.end(), p.input_pad[k], 1);
        in[k] = in[k].reshape(padded).expand(D).contiguous();
      }
      for (auto& o : out)
        if (!o.is_contiguous()) {  // computed contiguous, then copied into eager's layout
          laid_out.emplace_back(o, o.contiguous());
          o = laid_out.back().second;
        }
      call = layout(p, in, out, D);
      memory_rules(call, in, out, in_place);
      if (call.ndim < 0) throw std::logic_error("cpu_fused: rows still do not merge after making inputs contiguous");
    }
    for (uint8_t st : call.stream)  // counted once per call, whichever layout ran
      if (st) ++cpu::g_streamed;
    run_(call);
    for (auto& [eager_layout, computed] : laid_out) eager_layout.copy_(computed);  // ret holds eager_layout's memory
    finish(stack, ret);
  }

 private:
  // A call moving more than half the last-level cache (its inputs and outputs together) writes
  // its fresh outputs with streaming stores: they would not stay cached for the next op, which
  // brings as many bytes of its own, and a store that misses reads the line first. 12.6 MB fp32
  // outputs (LayerNorm+GELU, softmax, RMSNorm, a pointwise chain on [4096, 768]): 0.67-0.85x the
  // time; BERT-base, GPT-2, ViT-B/16 batch 8 fp32 unchanged within noise
  // (benchmarks/results/streaming-stores/).
  // (Before: only outputs larger than the whole cache, fp32 only.)
  // More than the last-level cache moving means the inputs come from DRAM (FusedCall::from_dram):
  // within it the hardware's prefetch keeps up and pacing cost packed rows up to 19%
  // (row-prefetch-dram/). Both rules read the call's bytes, summed once per layout.
  static void memory_rules(FusedCall& call, const SmallVec<at::Tensor>& in, const SmallVec<at::Tensor>& out,
                           const SmallVec<uint8_t>& in_place) {
    size_t moved = 0;
    for (const auto& t : in) moved += t.nbytes();
    for (const auto& t : out) moved += t.nbytes();
    const size_t llc = static_cast<size_t>(last_level_cache_bytes());
    call.in_place = in_place;
    call.stream.assign(out.size(), 0);
    if (2 * moved >= llc)
      for (size_t k = 0; k < out.size(); ++k)
        call.stream[k] = !in_place[k] && out[k].element_size() >= 2;  // fp32, bf16, fp16 (not bool)
    call.from_dram = cpu::row_prefetch() && moved > llc;
  }

  static void finish(Stack& stack, SmallVec<at::Tensor>& out) {
    stack.clear();
    for (auto& t : out) stack.emplace_back(std::move(t));
  }

  // The call's operands over the domain, coalesced; ndim = -1 when a row does not merge.
  FusedCall layout(const Program& p, const SmallVec<at::Tensor>& in, const SmallVec<at::Tensor>& out,
                   const SmallVec<int64_t>& D) const {
    FusedCall c;
    c.prog = &p;
    c.rows = p.row_dims > 0;
    c.single_partners = single_partners_.empty() ? nullptr : single_partners_.data();
    Layout L;
    L.sizes = D;
    if (L.sizes.empty()) L.sizes = {1};  // a 0-d domain: one element
    const size_t r = L.sizes.size();
    for (size_t k = 0; k < in.size(); ++k) {
      const int pad = k < p.input_pad.size() ? p.input_pad[k] : 0;  // row_first operands have none
      L.strides.push_back(D.empty() ? std::array<int64_t, kMaxDims>{} : domain_strides(in[k], pad, D));
    }
    for (size_t k = 0; k < out.size(); ++k) {
      std::array<int64_t, kMaxDims> st{};
      if (p.outputs[k].row) {
        for (size_t i = 0; i + p.row_dims < r; ++i) st[i] = out[k].stride(i);
      } else {
        for (size_t i = 0; i < static_cast<size_t>(out[k].dim()); ++i) st[i] = out[k].stride(i);
      }
      L.strides.push_back(st);
    }
    Layout M;
    M.strides.resize(L.strides.size());
    const size_t split = c.rows ? r - p.row_dims : r;
    if (split > 0) coalesce(L, 0, split, M);
    if (c.rows) {  // the row must become the last dim alone: everything before it indexes rows
      const size_t before = M.sizes.size();
      coalesce(L, split, r, M);
      if (M.sizes.size() - before != 1) {
        c.ndim = -1;
        return c;
      }
    }
    if (M.sizes.size() > static_cast<size_t>(kMaxDims)) throw std::invalid_argument("cpu_fused: more than 8 dims");
    c.ndim = static_cast<int>(M.sizes.size());
    for (size_t i = 0; i < M.sizes.size(); ++i) c.sizes[i] = M.sizes[i];
    // Inputs through const_data_ptr(): reading a write-guarded parameter must not copy it.
    for (size_t k = 0; k < in.size(); ++k)
      c.in.push_back(Operand{const_cast<void*>(in[k].const_data_ptr()), in[k].scalar_type(), M.strides[k]});
    for (size_t k = 0; k < out.size(); ++k)
      c.out.push_back(Operand{out[k].mutable_data_ptr(), out[k].scalar_type(), M.strides[in.size() + k]});
    return c;
  }

  // Per input: whether an instruction after the block's first store reads a register still
  // holding that input's load. An fp32 input read along the row is loaded in place (the
  // register points at its memory: interp.h, load), so an output written into that input's
  // buffer by an earlier store would change what the register reads. A program whose fp32-to-
  // fp16-and-back round trip widen_chains removed stores the load itself: `load r0 in0; ...;
  // store out0 r1; store out1 r0` gave out1 = out0 where out0 took in0's buffer (fuzz seed 90739:
  // an SDPA's value an interpolated input, 0.56 off). Such an input hosts no output.
  static std::vector<uint8_t> read_after_a_store(const Program& p) {
    std::vector<uint8_t> unsafe(p.inputs.size(), 0);
    for (const auto& code : p.phases) {
      std::vector<int> loaded(p.num_regs, -1);  // the input a register holds as loaded, or -1
      bool stored = false;
      for (const PInstr& I : code) {
        if (stored)
          for (int r = 0; r < p.num_regs; ++r)
            if (loaded[r] >= 0 && loaded[r] < static_cast<int>(unsafe.size()) && reads_reg(I, r)) unsafe[loaded[r]] = 1;
        stored |= I.op == POp::Store || I.op == POp::StoreRow;  // (a direct write, I.out, never goes to an input's buffer)
        if (I.op != POp::Store && I.op != POp::StoreRow && I.dst >= 0 && I.dst < p.num_regs)
          loaded[I.dst] = I.op == POp::Load ? I.a : -1;
      }
    }
    return unsafe;
  }

  std::shared_ptr<const Program> prog_;
  cpu::Interpreter run_;
  std::vector<int> single_partners_;  // after prog_: built from it
  std::vector<uint8_t> no_in_place_;  // after prog_: built from it (read_after_a_store)
  bool has_minmax_ = false;
};

}  // namespace

std::unique_ptr<Kernel> make_cpu_fused_kernel(const Node& n) {
  if (!n.program) return nullptr;
  return std::make_unique<CpuFusedKernel>(n);
}

}  // namespace fxcpp
