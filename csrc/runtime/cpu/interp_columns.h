// Row programs whose rows run across memory: a reduction over a leading or middle dim (x.sum(0)
// of a [rows, cols] tensor is, in the program's order, cols rows of length `rows`, each at
// stride cols), or over a channels-last tensor's N, H, W. Read row by row, every element would
// be a gather. Here the rows lie side by side in memory, so a block holds W neighbouring rows
// as one vector register each (lane i = row i) and walks their length j: every load reads W
// contiguous elements, every instruction is one vector op over W lanes, and a reduction
// accumulates lane by lane (TorchInductor's "outer reduction": a vector accumulator per
// column). Values that do not change along the row (the previous phases' reductions,
// constants, per-row inputs and what is computed from them only) are computed at a task's
// first step and kept: the epilogue of x.sum(0) * w runs once per block, not once per element.
//
// Threads: a block spans all lanes it can (up to kBlock), so that a task reads whole stretches
// of memory; where there are fewer blocks than threads, the row's length is split between
// them instead (a bias gradient's [8192, 768] sum: each thread reads one half of the tensor,
// front to back) and their partial reductions are combined, in a fixed order, before the next
// phase. Each phase is one parallel loop: the next one reads its reductions complete.
// Software prefetch of the rows a few steps ahead was tried and dropped: where a task reads
// whole rows its memory runs front to back and the hardware's prefetch keeps up (8 rows ahead
// took 1.6x the time on [8192, 768]), and where it reads half of each row it cost 1.7x too.
// Part of interp.h: compiled once per instruction set with it.
#pragma once
#include "runtime/cpu/interp.h"

namespace fxcpp::cpu {
inline namespace CPU_CAPABILITY {

// Whether c runs by columns: of the inputs that vary both along the row and across rows, none
// walks its rows contiguously and one has neighbouring rows next to each other; and there is at
// least a vector of rows. (An input constant along the row or shared by all rows reads as well
// either way: (x + b[rows, 1]).sum(0) still runs by columns.)
inline bool runs_by_columns(const FusedCall& c) {
  if (!c.rows || c.ndim < 2 || c.sizes[c.ndim - 1] < 2 || c.sizes[c.ndim - 2] < V) return false;
  bool side_by_side = false;
  for (const Operand& o : c.in) {
    const int64_t along = o.strides[c.ndim - 1], across = o.strides[c.ndim - 2];
    if (along == 0 || across == 0) continue;
    if (along == 1) return false;
    side_by_side |= across == 1;
  }
  return side_by_side;
}

// One thread's column state beside its Regs: per register, a reduction's accumulator over the
// task's stretch of the row and its partial sum over a chunk; per kept (j-invariant)
// instruction, its saved value.
struct ColState {
  AlignedFloats acc, part, kept;
  std::vector<const float*> kept_ptr;
  std::vector<uint8_t> kept_splat;
  std::vector<float> kept_s;
  void reset(int regs, int kept_slots) {
    acc.resize(static_cast<size_t>(regs) * kBlock);
    part.resize(static_cast<size_t>(regs) * kBlock);
    kept.resize(static_cast<size_t>(std::max(kept_slots, 1)) * kBlock);
    kept_ptr.assign(kept_slots, nullptr);
    kept_splat.assign(kept_slots, 0);
    kept_s.assign(kept_slots, 0.f);
  }
  float* acc_of(int reg) { return &acc[static_cast<size_t>(reg) * kBlock]; }
  float* part_of(int reg) { return &part[static_cast<size_t>(reg) * kBlock]; }
  // Saves reg's value: copied where it lies in a register buffer (later instructions reuse those),
  // else (an input read in place, an output, an accumulator) the pointer alone.
  void save(Regs& R, int reg, int slot, int64_t n, int num_regs) {
    kept_splat[slot] = R.splat[reg];
    kept_s[slot] = R.s[reg];
    const float* p = R.ptr[reg];
    const float* lo = &R.buf[0];
    if (!R.splat[reg] && p >= lo && p < lo + static_cast<size_t>(num_regs) * kBlock) {
      float* d = &kept[static_cast<size_t>(slot) * kBlock];
      std::copy(p, p + n, d);
      p = d;
    }
    kept_ptr[slot] = p;
  }
  void restore(Regs& R, int reg, int slot) const {
    R.splat[reg] = kept_splat[slot];
    R.s[reg] = kept_s[slot];
    R.ptr[reg] = kept_ptr[slot];
  }
};

// Which instructions of a phase compute the same value at every j (their slot), else -1: loads of
// an input that does not vary along the row, constants, the previous phases' reductions, and
// elementwise ops of those only. A full output's instruction is never kept (it writes row j).
inline std::vector<int> kept_slots(const std::vector<PInstr>& code, const FusedCall& c, const std::vector<uint8_t>& ready,
                                   int& count) {
  std::vector<uint8_t> inv = ready;
  std::vector<int> slot(code.size(), -1);
  for (size_t k = 0; k < code.size(); ++k) {
    const PInstr& I = code[k];
    if (I.op == POp::Store || I.op == POp::StoreRow || pop_is_reduction(I.op)) continue;  // write no register now
    bool same = true;
    if (I.op == POp::Load) same = c.in[I.a].strides[c.ndim - 1] == 0;
    else if (I.op != POp::Cols && I.op != POp::Const) {
      const int16_t ops[3] = {I.a, I.b, I.c};
      for (int q = 0; q < pop_arity(I.op); ++q) same &= inv[ops[q]] != 0;
    }
    inv[I.dst] = same;
    if (same && !(I.out >= 0 && !c.prog->outputs[I.out].row)) slot[k] = count++;
  }
  return slot;
}

// The lane-wise accumulation of one reduction over the block's W lanes, into `part`: one loop
// per kind of reduction and operand (a switch per vector kept the loop from vectorizing well).
template <typename Term, typename Combine>
inline void column_reduce_loop(float* part, int64_t n, Term term, Combine combine) {
  int64_t i = 0;
  for (; i + V <= n; i += V) combine(Vec::loadu(part + i), term(i, V)).store(part + i);
  if (i < n) combine(Vec::loadu(part + i, n - i), term(i, n - i)).store(part + i, n - i);
}

template <typename Combine>
inline void column_reduce_with(const Regs& R, const PInstr& I, float* part, int64_t n, Combine combine) {
  const bool sa = R.splat[I.a];
  const float* a = R.ptr[I.a];
  const Vec va(R.s[I.a]);
  if (I.op == POp::RSum || I.op == POp::RMax || I.op == POp::RMin) {
    if (sa) return column_reduce_loop(part, n, [&](int64_t, int64_t) { return va; }, combine);
    return column_reduce_loop(part, n, [&](int64_t i, int64_t cnt) { return Vec::loadu(a + i, cnt); }, combine);
  }
  const bool sb = R.splat[I.b];
  const float* b = R.ptr[I.b];
  const Vec vb(R.s[I.b]);
  auto get = [](bool splat, const Vec& v, const float* p, int64_t i, int64_t cnt) { return splat ? v : Vec::loadu(p + i, cnt); };
  if (I.op == POp::RSumSq)
    return column_reduce_loop(part, n, [&](int64_t i, int64_t cnt) {
      const Vec d = get(sa, va, a, i, cnt) - get(sb, vb, b, i, cnt);
      return d * d;
    }, combine);
  column_reduce_loop(part, n, [&](int64_t i, int64_t cnt) { return exp_u10(get(sa, va, a, i, cnt) - get(sb, vb, b, i, cnt)); },
                     combine);  // RSumExp
}

inline void column_reduce(const Regs& R, const PInstr& I, float* part, int64_t n) {
  if (I.op == POp::RMax) return column_reduce_with(R, I, part, n, [](Vec x, Vec y) { return at::vec::maximum(x, y); });
  if (I.op == POp::RMin) return column_reduce_with(R, I, part, n, [](Vec x, Vec y) { return at::vec::minimum(x, y); });
  column_reduce_with(R, I, part, n, [](Vec x, Vec y) { return x + y; });  // NaN propagates through max/min, as eager's
}

inline float reduction_init(POp op) {
  return op == POp::RMax ? -std::numeric_limits<float>::infinity()
         : op == POp::RMin ? std::numeric_limits<float>::infinity() : 0.f;
}

// acc = combine(acc, part), lane by lane.
inline void fold_chunk(POp op, float* acc, const float* part, int64_t n) {
  auto loop = [&](auto combine) {
    int64_t i = 0;
    for (; i + V <= n; i += V) combine(Vec::loadu(acc + i), Vec::loadu(part + i)).store(acc + i);
    if (i < n) combine(Vec::loadu(acc + i, n - i), Vec::loadu(part + i, n - i)).store(acc + i, n - i);
  };
  if (op == POp::RMax) return loop([](Vec x, Vec y) { return at::vec::maximum(x, y); });
  if (op == POp::RMin) return loop([](Vec x, Vec y) { return at::vec::minimum(x, y); });
  loop([](Vec x, Vec y) { return x + y; });
}

// first: the task's first step (kept values are computed); row_outputs: the row's first step
// (row outputs are stored, once).
inline void run_column_step(const std::vector<PInstr>& code, const std::vector<int>& slot, const FusedCall& c, Regs& R,
                            ColState& S, const Block& B, bool first, bool row_outputs) {
  const int64_t n = B.n;
  using P = POp;
  auto direct = [&](const PInstr& I) -> float* {
    if (I.out < 0 || B.out_stride[I.out] != 1 || c.out[I.out].dtype != c10::kFloat || c.in_place[I.out]) return nullptr;
    return reinterpret_cast<float*>(B.out[I.out]);
  };
  auto streams = [&](const PInstr& I) { return I.out >= 0 && c.stream[I.out] && direct(I); };
  auto un = [&](const PInstr& I, auto f) { unary(R, I, n, f, direct(I), streams(I)); };
  auto bin = [&](const PInstr& I, auto f) { binary(R, I, n, f, direct(I), streams(I)); };
  auto ter = [&](const PInstr& I, auto f) { ternary(R, I, n, f, direct(I), streams(I)); };
  for (size_t k = 0; k < code.size(); ++k) {
    const PInstr& I = code[k];
    if (slot[k] >= 0 && !first) {
      S.restore(R, I.dst, slot[k]);
      continue;
    }
    switch (I.op) {
      case P::Load: load(R, I.dst, c.in[I.a].dtype, B.in[I.a], B.in_stride[I.a], n); break;
      case P::Cols: R.set_splat(I.dst, B.cols); break;
      case P::Const: R.set_splat(I.dst, I.imm); break;
      case P::RSum:
      case P::RMax:
      case P::RMin:
      case P::RSumSq:
      case P::RSumExp: column_reduce(R, I, S.part_of(I.dst), n); break;
      case P::Store: store(R, I.b, c.out[I.a].dtype, B.out[I.a], B.out_stride[I.a], n, c.stream[I.a]); break;
      case P::StoreRow:
        if (row_outputs) store(R, I.b, c.out[I.a].dtype, B.out[I.a], B.out_stride[I.a], n);
        break;
      default: eval_op(I, un, bin, ter); break;
    }
    if (slot[k] >= 0) S.save(R, I.dst, slot[k], n, c.prog->num_regs);
  }
}

constexpr int64_t kColumnChunk = 128;  // row steps summed apart, then added: error grows with L/128 + 128, not L

inline void run_columns(const FusedCall& c) {
  const Program& p = *c.prog;
  const int nd = c.ndim;
  const int64_t L = c.sizes[nd - 1], lanes = c.sizes[nd - 2];
  int64_t outer = 1;
  for (int d = 0; d + 2 < nd; ++d) outer *= c.sizes[d];
  const int64_t W = std::min(kBlock, lanes), nW = (lanes + W - 1) / W;
  const int64_t threads = at::get_num_threads();
  // Splits of the row's length: enough tasks for every thread, each at least 64 steps long.
  const int64_t nS = std::max<int64_t>(1, std::min((threads + outer * nW - 1) / (outer * nW), L / 64));
  count_column_call();
  // Per reduction register: its result per row ([outer, lanes]), and the splits' partial results.
  std::vector<int> red_index(p.num_regs, -1);
  int nred = 0;
  for (const auto& code : p.phases)
    for (const PInstr& I : code)
      if (pop_is_reduction(I.op)) red_index[I.dst] = nred++;
  const int64_t rows = outer * lanes;
  std::vector<float> result(static_cast<size_t>(nred) * rows), partial(static_cast<size_t>(nred) * nS * rows);
  std::vector<std::vector<int>> slots;
  int kept = 0;
  {
    std::vector<uint8_t> ready(p.num_regs, 0);
    for (const auto& code : p.phases) {
      slots.push_back(kept_slots(code, c, ready, kept));
      for (const PInstr& I : code)
        if (pop_is_reduction(I.op)) ready[I.dst] = 1;
    }
  }
  std::vector<int> ready;  // reduction registers complete before this phase
  for (size_t ph = 0; ph < p.phases.size(); ++ph) {
    const auto& code = p.phases[ph];
    std::vector<const PInstr*> reds;
    for (const PInstr& I : code)
      if (pop_is_reduction(I.op)) reds.push_back(&I);
    at::parallel_for(0, outer * nW * nS, 1, [&](int64_t t0, int64_t t1) {
      thread_local Regs regs;
      thread_local ColState state;
      Regs& R = regs;  // one TLS lookup per task, not one per use
      ColState& S = state;
      R.reset(p.num_regs);
      S.reset(p.num_regs, kept);
      Block B;
      const size_t ni = c.in.size(), no = c.out.size();
      B.in.resize(ni), B.in_stride.resize(ni), B.out.resize(no), B.out_stride.resize(no), B.row_out.resize(no);
      for (size_t k = 0; k < ni; ++k) B.in_stride[k] = c.in[k].strides[nd - 2];
      for (size_t k = 0; k < no; ++k) B.out_stride[k] = c.out[k].strides[nd - 2];
      B.cols = static_cast<float>(L);
      SmallVec<int64_t> in_off(ni), out_off(no);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t split = t % nS, w0 = (t / nS % nW) * W, o = t / nS / nW;
        const int64_t j_begin = L * split / nS, j_end = L * (split + 1) / nS;
        B.n = std::min(W, lanes - w0);
        for (size_t k = 0; k < ni; ++k) in_off[k] = w0 * c.in[k].strides[nd - 2];
        for (size_t k = 0; k < no; ++k) out_off[k] = w0 * c.out[k].strides[nd - 2];
        for (int64_t d = nd - 3, rest = o; d >= 0; --d) {
          const int64_t i = rest % c.sizes[d];
          rest /= c.sizes[d];
          for (size_t k = 0; k < ni; ++k) in_off[k] += i * c.in[k].strides[d];
          for (size_t k = 0; k < no; ++k) out_off[k] += i * c.out[k].strides[d];
        }
        const int64_t row0 = o * lanes + w0;  // this block's first row in `result`
        for (const PInstr* I : reds) std::fill(S.acc_of(I->dst), S.acc_of(I->dst) + B.n, reduction_init(I->op));
        for (int64_t j0 = j_begin; j0 < j_end; j0 += kColumnChunk) {
          for (const PInstr* I : reds) std::fill(S.part_of(I->dst), S.part_of(I->dst) + B.n, reduction_init(I->op));
          for (int64_t j = j0; j < std::min(j_end, j0 + kColumnChunk); ++j) {
            for (size_t k = 0; k < ni; ++k)
              B.in[k] = static_cast<const char*>(c.in[k].data) +
                        (in_off[k] + j * c.in[k].strides[nd - 1]) * static_cast<int64_t>(c10::elementSize(c.in[k].dtype));
            for (size_t k = 0; k < no; ++k)  // a row output's stride along the row is 0
              B.out[k] = static_cast<char*>(c.out[k].data) +
                         (out_off[k] + j * c.out[k].strides[nd - 1]) * static_cast<int64_t>(c10::elementSize(c.out[k].dtype));
            for (int reg : ready) {
              R.splat[reg] = 0;
              R.ptr[reg] = &result[static_cast<size_t>(red_index[reg]) * rows + row0];
            }
            run_column_step(code, slots[ph], c, R, S, B, j == j_begin, j == 0);
          }
          for (const PInstr* I : reds) fold_chunk(I->op, S.acc_of(I->dst), S.part_of(I->dst), B.n);
        }
        for (const PInstr* I : reds)
          std::copy(S.acc_of(I->dst), S.acc_of(I->dst) + B.n,
                    &partial[(static_cast<size_t>(red_index[I->dst]) * nS + split) * rows + row0]);
      }
      end_streams();
    });
    // The splits' partial results, combined in split order (the same bits at every call).
    for (const PInstr* I : reds) {
      float* r = &result[static_cast<size_t>(red_index[I->dst]) * rows];
      const float* q = &partial[static_cast<size_t>(red_index[I->dst]) * nS * rows];
      std::copy(q, q + rows, r);
      for (int64_t sp = 1; sp < nS; ++sp) fold_chunk(I->op, r, q + sp * rows, rows);
      ready.push_back(I->dst);
    }
  }
}

}  // namespace CPU_CAPABILITY
}  // namespace fxcpp::cpu
