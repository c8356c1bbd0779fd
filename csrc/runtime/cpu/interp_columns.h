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

// Values per register here (W lanes x m steps): four times a pointwise register, so that a block
// of lanes as wide as a transformer's row (768) still holds several steps. At kBlock it held
// one, and every instruction ran once per 768 values. With 4096, x - x.mean(0) takes 0.83-0.86x
// the time on [8192, 768] fp32, 0.74-0.82x in bf16, 0.70-0.75x on [65536, 768] fp32
// (benchmarks/results/outer-reductions/col_block.txt, README there).
constexpr int64_t kColBlock = 4096;

// One thread's column state beside its Regs: per register, a reduction's accumulator over the
// task's stretch of the row, its partial sum over a chunk, and (once complete, for the later
// phases) its result repeated for every step of a block; per kept (j-invariant) instruction,
// its saved value.
struct ColState {
  AlignedFloats acc, part, kept, tile;
  std::vector<const float*> kept_ptr;
  std::vector<uint8_t> kept_splat;
  std::vector<float> kept_s;
  void reset(int regs, int kept_slots) {
    acc.resize(static_cast<size_t>(regs) * kBlock);
    part.resize(static_cast<size_t>(regs) * kBlock);
    tile.resize(static_cast<size_t>(regs) * kColBlock);
    kept.resize(static_cast<size_t>(std::max(kept_slots, 1)) * kColBlock);
    kept_ptr.assign(kept_slots, nullptr);
    kept_splat.assign(kept_slots, 0);
    kept_s.assign(kept_slots, 0.f);
  }
  float* acc_of(int reg) { return &acc[static_cast<size_t>(reg) * kBlock]; }
  float* part_of(int reg) { return &part[static_cast<size_t>(reg) * kBlock]; }
  float* tile_of(int reg) { return &tile[static_cast<size_t>(reg) * kColBlock]; }  // a reduction's result, m times
  // Saves reg's value: copied where it lies in a register buffer (later instructions reuse those),
  // else (an input read in place, an output, an accumulator) the pointer alone.
  void save(Regs& R, int reg, int slot, int64_t n, int num_regs) {
    kept_splat[slot] = R.splat[reg];
    kept_s[slot] = R.s[reg];
    const float* p = R.ptr[reg];
    const float* lo = &R.buf[0];
    if (!R.splat[reg] && p >= lo && p < lo + static_cast<size_t>(num_regs) * R.cap) {
      float* d = &kept[static_cast<size_t>(slot) * kColBlock];
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

// The lane-wise accumulation of one reduction over a block's m steps of W lanes, into `part`:
// one loop per kind of reduction and operand (a switch per vector kept the loop from
// vectorizing well).
template <typename Term, typename Combine>
inline void column_reduce_loop(float* part, int64_t W, int64_t m, Term term, Combine combine) {
  for (int64_t k = 0; k < m; ++k) {
    const int64_t o = k * W;
    int64_t i = 0;
    for (; i + V <= W; i += V) combine(Vec::loadu(part + i), term(o + i, V)).store(part + i);
    if (i < W) combine(Vec::loadu(part + i, W - i), term(o + i, W - i)).store(part + i, W - i);
  }
}

// term(a - b), with a and b registers, accumulated lane by lane into part.
template <typename Term, typename Combine>
inline void column_reduce_difference(const Regs& R, int ra, int rb, float* part, int64_t W, int64_t m, Term term,
                                     Combine combine) {
  const bool sa = R.splat[ra], sb = R.splat[rb];
  const float *a = R.ptr[ra], *b = R.ptr[rb];
  const Vec va(R.s[ra]), vb(R.s[rb]);
  auto get = [](bool splat, const Vec& v, const float* q, int64_t i, int64_t cnt) { return splat ? v : Vec::loadu(q + i, cnt); };
  column_reduce_loop(part, W, m, [&](int64_t i, int64_t cnt) { return term(get(sa, va, a, i, cnt) - get(sb, vb, b, i, cnt)); },
                     combine);
}

template <typename Combine>
inline void column_reduce_with(const Regs& R, const PInstr& I, float* part, int64_t W, int64_t m, Combine combine) {
  if (I.op == POp::RSum || I.op == POp::RMax || I.op == POp::RMin) {
    const float* a = R.ptr[I.a];
    const Vec va(R.s[I.a]);
    if (R.splat[I.a]) return column_reduce_loop(part, W, m, [&](int64_t, int64_t) { return va; }, combine);
    return column_reduce_loop(part, W, m, [&](int64_t i, int64_t cnt) { return Vec::loadu(a + i, cnt); }, combine);
  }
  if (I.op == POp::RSumSq) return column_reduce_difference(R, I.a, I.b, part, W, m, [](Vec d) { return d * d; }, combine);
  column_reduce_difference(R, I.a, I.b, part, W, m, [](Vec d) { return exp_u10(d); }, combine);  // RSumExp
}

inline void column_reduce(const Regs& R, const PInstr& I, float* part, int64_t W, int64_t m) {
  if (I.op == POp::RMax) return column_reduce_with(R, I, part, W, m, [](Vec x, Vec y) { return at::vec::maximum(x, y); });
  if (I.op == POp::RMin) return column_reduce_with(R, I, part, W, m, [](Vec x, Vec y) { return at::vec::minimum(x, y); });
  column_reduce_with(R, I, part, W, m, [](Vec x, Vec y) { return x + y; });  // NaN propagates through max/min, as eager's
}

// sum(a - b) lane by lane into part, for a Sub whose values only the RSum after it reads: the
// difference is summed as it is computed, never written to a register and read back (the
// shifted mean's sum(v - s) in x - x.mean(0)).
inline void column_sum_of_difference(const Regs& R, const PInstr& I, float* part, int64_t W, int64_t m) {
  column_reduce_difference(R, I.a, I.b, part, W, m, [](Vec d) { return d; }, [](Vec x, Vec y) { return x + y; });
}

// Per instruction of a phase: 1 for a Sub that column_sum_of_difference runs with the RSum after
// it (the Sub is no output, not kept, and nothing else reads its values).
inline std::vector<uint8_t> sums_of_differences(const std::vector<PInstr>& code, const std::vector<int>& slot) {
  std::vector<uint8_t> f(code.size(), 0);
  for (size_t k = 0; k + 1 < code.size(); ++k) {
    const PInstr &I = code[k], &J = code[k + 1];
    // A reduction leaves its register as it was within the phase, so a later read of I.dst would
    // read the difference even where J.dst == I.dst: read_before_written decides in every case.
    // (A phase's registers start over in the next; only reductions go on, through `ready`.)
    f[k] = I.op == POp::Sub && J.op == POp::RSum && J.a == I.dst && I.out < 0 && slot[k] < 0 &&
           !read_before_written(code, k + 2, I.dst);
  }
  return f;
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

// A block: m steps (along the row) of W lanes (rows side by side). A register holds its W*m
// values step by step (element (k, i) at k * W + i); one op runs over all of them at once, so a
// block of narrow columns (64 channels of an NHWC tensor) still gives each instruction about
// kColBlock elements.
struct ColBlock {
  int64_t W = 0, m = 1;
  float cols = 1.f;
  SmallVec<const char*> in;
  SmallVec<int64_t> in_across, in_along;  // element strides: to the next lane, to the next step
  SmallVec<char*> out;
  SmallVec<int64_t> out_across, out_along;
  int64_t n() const { return W * m; }
  // An operand's m steps of W lanes lie back to back in memory: one stretch of n elements.
  bool dense(int64_t across, int64_t along) const { return across == 1 && (m == 1 || along == W); }
};

inline void column_load(Regs& R, int dst, c10::ScalarType t, const char* p, int64_t across, int64_t along,
                        const ColBlock& B) {
  const int64_t W = B.W, m = B.m;
  if (B.dense(across, along) || along == 0) {
    load(R, dst, t, p, across, along == 0 ? W : B.n());
    if (along != 0 || m == 1 || R.splat[dst]) return;
    // The same W values at every step: repeated m times.
    const float* src = R.ptr[dst];
    float* d = R.w(dst);
    if (src != d) std::copy(src, src + W, d);
    for (int64_t k = 1; k < m; ++k) std::copy(d, d + W, d + k * W);
    return;
  }
  float* d = R.w(dst);
  const int64_t es = static_cast<int64_t>(c10::elementSize(t));
  for (int64_t k = 0; k < m; ++k) widen(t, p + k * along * es, across, W, d + k * W);
}

inline void column_store(Regs& R, int reg, c10::ScalarType t, char* p, int64_t across, int64_t along, const ColBlock& B,
                         bool stream) {
  if (B.dense(across, along)) return store(R, reg, t, p, across, B.n(), stream);
  if (R.splat[reg]) {
    for (int64_t k = 0; k < B.m; ++k) store(R, reg, t, p + k * along * static_cast<int64_t>(c10::elementSize(t)), across, B.W);
    return;
  }
  const float* base = R.ptr[reg];
  for (int64_t k = 0; k < B.m; ++k) {  // step k's W values, stored from the register read at k * W
    R.ptr[reg] = base + k * B.W;
    store(R, reg, t, p + k * along * static_cast<int64_t>(c10::elementSize(t)), across, B.W, stream);
  }
  R.ptr[reg] = base;
}

// One block of a phase. first: the task's first block (kept values are computed); row_outputs:
// the block holding the row's first step (row outputs are stored, once).
inline void run_column_block(const std::vector<PInstr>& code, const std::vector<int>& slot,
                             const std::vector<uint8_t>& sum_of_sub, const FusedCall& c, Regs& R, ColState& S,
                             const ColBlock& B, bool first, bool row_outputs) {
  const int64_t n = B.n();
  using P = POp;
  auto direct = [&](const PInstr& I) -> float* {
    if (I.out < 0 || !B.dense(B.out_across[I.out], B.out_along[I.out]) || c.out[I.out].dtype != c10::kFloat ||
        c.in_place[I.out])
      return nullptr;
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
    if (sum_of_sub[k]) {
      column_sum_of_difference(R, I, S.part_of(code[k + 1].dst), B.W, B.m);
      ++k;  // the RSum
      continue;
    }
    switch (I.op) {
      case P::Load: column_load(R, I.dst, c.in[I.a].dtype, B.in[I.a], B.in_across[I.a], B.in_along[I.a], B); break;
      case P::Cols: R.set_splat(I.dst, B.cols); break;
      case P::Const: R.set_splat(I.dst, I.imm); break;
      case P::RSum:
      case P::RMax:
      case P::RMin:
      case P::RSumSq:
      case P::RSumExp: column_reduce(R, I, S.part_of(I.dst), B.W, B.m); break;
      case P::Store:
        column_store(R, I.b, c.out[I.a].dtype, B.out[I.a], B.out_across[I.a], B.out_along[I.a], B, c.stream[I.a]);
        break;
      case P::StoreRow:  // the first step's W values (every step holds the same)
        if (row_outputs) store(R, I.b, c.out[I.a].dtype, B.out[I.a], B.out_across[I.a], B.W);
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
  const int64_t threads = at::get_num_threads();
  // Lanes per block: up to a register's kBlock, so that a task reads whole stretches of memory.
  // (Narrower blocks whose whole length stays in L2 across a program's phases were tried: a
  // strip of 32 lanes read at a 3 KB stride from DRAM took 2.4x the time of reading the phases'
  // full rows again, x - x.mean(0) on [8192, 768].)
  const int64_t W = std::min(kBlock, lanes);
  const int64_t nW = (lanes + W - 1) / W;
  // Splits of the row's length: enough tasks for every thread, each at least 64 steps long.
  const int64_t nS = std::max<int64_t>(1, std::min((threads + outer * nW - 1) / (outer * nW), L / 64));
  const int64_t m_max = std::max<int64_t>(1, std::min(kColBlock / W, kColumnChunk));  // steps per block
  count_column_call();
  // Per reduction register: its result per row ([outer, lanes]), and the splits' partial results.
  std::vector<int> red_index(p.num_regs, -1);
  int nred = 0;
  for (const auto& code : p.phases)
    for (const PInstr& I : code)
      if (pop_is_reduction(I.op)) red_index[I.dst] = nred++;
  const int64_t rows = outer * lanes;
  std::vector<float> result(static_cast<size_t>(nred) * rows), partial;
  if (nS > 1) partial.resize(static_cast<size_t>(nred) * nS * rows);
  std::vector<std::vector<int>> slots;
  std::vector<std::vector<uint8_t>> sub_sums;
  std::vector<std::vector<const PInstr*>> reds(p.phases.size());
  int kept = 0;
  {
    std::vector<uint8_t> ready(p.num_regs, 0);
    for (size_t ph = 0; ph < p.phases.size(); ++ph) {
      slots.push_back(kept_slots(p.phases[ph], c, ready, kept));
      sub_sums.push_back(sums_of_differences(p.phases[ph], slots.back()));
      for (const PInstr& I : p.phases[ph])
        if (pop_is_reduction(I.op)) ready[I.dst] = 1, reds[ph].push_back(&I);
    }
  }
  // Phase ph of tasks [t0, t1) (a task: one block of lanes, one split of the row); `ready`: the
  // reductions of the phases before it.
  std::vector<int> ready;
  auto run_tasks = [&](int64_t t0, int64_t t1, size_t ph) {
    Regs& R = thread_scratch<Regs>();  // one TLS lookup per task, not one per use
    ColState& S = thread_scratch<ColState>();
    R.reset(p.num_regs, kColBlock);
    S.reset(p.num_regs, kept);
    ColBlock B;
    const size_t ni = c.in.size(), no = c.out.size();
    B.in.resize(ni), B.in_across.resize(ni), B.in_along.resize(ni);
    B.out.resize(no), B.out_across.resize(no), B.out_along.resize(no);
    for (size_t k = 0; k < ni; ++k) B.in_across[k] = c.in[k].strides[nd - 2], B.in_along[k] = c.in[k].strides[nd - 1];
    for (size_t k = 0; k < no; ++k) B.out_across[k] = c.out[k].strides[nd - 2], B.out_along[k] = c.out[k].strides[nd - 1];
    B.cols = static_cast<float>(L);
    SmallVec<int64_t> in_off(ni), out_off(no);
    const auto& code = p.phases[ph];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t split = t % nS, w0 = (t / nS % nW) * W, o = t / nS / nW;
      const int64_t j_begin = L * split / nS, j_end = L * (split + 1) / nS;
      B.W = std::min(W, lanes - w0);
      for (size_t k = 0; k < ni; ++k) in_off[k] = w0 * c.in[k].strides[nd - 2];
      for (size_t k = 0; k < no; ++k) out_off[k] = w0 * c.out[k].strides[nd - 2];
      for (int64_t d = nd - 3, rest = o; d >= 0; --d) {
        const int64_t i = rest % c.sizes[d];
        rest /= c.sizes[d];
        for (size_t k = 0; k < ni; ++k) in_off[k] += i * c.in[k].strides[d];
        for (size_t k = 0; k < no; ++k) out_off[k] += i * c.out[k].strides[d];
      }
      const int64_t row0 = o * lanes + w0;  // this block's first row in `result`
      const int64_t m_first = std::min(m_max, j_end - j_begin);
      for (int reg : ready) {  // the complete reductions, repeated for each step of a block
        const float* r = &result[static_cast<size_t>(red_index[reg]) * rows + row0];
        float* d = S.tile_of(reg);
        for (int64_t k = 0; k < m_first; ++k) std::copy(r, r + B.W, d + k * B.W);
      }
      for (const PInstr* I : reds[ph]) std::fill(S.acc_of(I->dst), S.acc_of(I->dst) + B.W, reduction_init(I->op));
      for (int64_t j0 = j_begin; j0 < j_end; j0 += kColumnChunk) {
        const int64_t chunk_end = std::min(j_end, j0 + kColumnChunk);
        for (const PInstr* I : reds[ph]) std::fill(S.part_of(I->dst), S.part_of(I->dst) + B.W, reduction_init(I->op));
        for (int64_t j = j0; j < chunk_end; j += B.m) {
          B.m = std::min(m_max, chunk_end - j);
          for (size_t k = 0; k < ni; ++k)
            B.in[k] = static_cast<const char*>(c.in[k].data) +
                      (in_off[k] + j * B.in_along[k]) * static_cast<int64_t>(c10::elementSize(c.in[k].dtype));
          for (size_t k = 0; k < no; ++k)  // a row output's stride along the row is 0
            B.out[k] = static_cast<char*>(c.out[k].data) +
                       (out_off[k] + j * B.out_along[k]) * static_cast<int64_t>(c10::elementSize(c.out[k].dtype));
          for (int reg : ready) {
            R.splat[reg] = 0;
            R.ptr[reg] = S.tile_of(reg);
          }
          run_column_block(code, slots[ph], sub_sums[ph], c, R, S, B, j == j_begin, j == 0);
        }
        for (const PInstr* I : reds[ph]) fold_chunk(I->op, S.acc_of(I->dst), S.part_of(I->dst), B.W);
      }
      for (const PInstr* I : reds[ph]) {  // one split: the result itself; several: combined below
        float* to = nS == 1 ? &result[static_cast<size_t>(red_index[I->dst]) * rows + row0]
                            : &partial[(static_cast<size_t>(red_index[I->dst]) * nS + split) * rows + row0];
        std::copy(S.acc_of(I->dst), S.acc_of(I->dst) + B.W, to);
      }
    }
    end_streams();
  };
  for (size_t ph = 0; ph < p.phases.size(); ++ph) {  // one loop per phase: the splits' results combine between
    at::parallel_for(0, outer * nW * nS, 1, [&](int64_t t0, int64_t t1) { run_tasks(t0, t1, ph); });
    for (const PInstr* I : reds[ph]) {
      ready.push_back(I->dst);
      if (nS == 1) continue;
      float* r = &result[static_cast<size_t>(red_index[I->dst]) * rows];  // in split order: the same bits every call
      const float* q = &partial[static_cast<size_t>(red_index[I->dst]) * nS * rows];
      std::copy(q, q + rows, r);
      for (int64_t sp = 1; sp < nS; ++sp) fold_chunk(I->op, r, q + sp * rows, rows);
    }
  }
}

}  // namespace CPU_CAPABILITY
}  // namespace fxcpp::cpu
