// Row programs over short rows (a transformer's hidden size, a softmax over a sequence):
// a block holds m whole rows, every phase runs over the block before the next, and every
// instruction runs once per block, not once per row (the per-row fixed cost of decoding and
// dispatching ~20 instructions was most of a LayerNorm's time).
//
// A register, in a block of m rows of length L, is one of
//   Rows    element (j, i) at ptr[j * stride + i]: an fp32 input read in place (stride is its
//           row stride: 0 for a weight shared by all rows), or a computed value (stride L);
//   PerRow  one value per row (a reduction's result, a [rows, 1] input);
//   Splat   one value for the block (constants).
// Part of interp.h: compiled once per instruction set with it.
#pragma once
#include "runtime/cpu/interp.h"
#include "runtime/cpu/interp_columns.h"
#include "runtime/cpu/interp_plan.h"

#include <tuple>

namespace fxcpp::cpu {
inline namespace CPU_CAPABILITY {

constexpr int64_t kPackCap = 8192;   // elements per register: rows up to 4096 (LLaMA's hidden size) fit
constexpr int64_t kPackRows = 8192;  // aim for this many elements per block when rows are short

struct PReg {
  enum Kind : uint8_t { Rows, PerRow, Splat } kind = Splat;
  const float* ptr = nullptr;
  int64_t stride = 0;
  float s = 0.f;
  const float* vals = nullptr;  // PerRow: m values
};

// Registers with one buffer each, plus a spare: an op whose destination is also an operand laid
// out differently from its result (one value per row, or a row shared by all rows) writes the
// spare, which then becomes that register's buffer (in place, it would overwrite values it has
// yet to read).
struct PRegs {
  AlignedFloats buf;
  std::vector<PReg> r;
  std::vector<int> slot;  // register -> buffer; slot.back() is the spare
  std::vector<float> red;  // a fused reduction's per-row results, until its register is free
  std::vector<float> cen_sum, cen_sq;  // a variance's centered sums, until their instructions come
  int64_t fused = 0;       // blocks whose reduction ran fused, counted once per task
  int64_t tails = 0;       // blocks whose affine tail ran as one pass (fused_affine_tail)
  int64_t row_paced = 0;   // blocks that asked for the next one's rows a row at a time (pace_row)
  int64_t to_bf16 = 0;     // blocks a result was rounded straight into a bf16 output (PDest::bf16)
  void reset(int n) {
    buf.resize(static_cast<size_t>(n + 1) * kPackCap);
    r.assign(n, PReg{});
    slot.resize(n + 1);
    for (int i = 0; i <= n; ++i) slot[i] = i;
  }
  float* own(int reg) { return &buf[static_cast<size_t>(slot[reg]) * kPackCap]; }
  float* spare_for(int reg) {  // the spare becomes reg's buffer; its old one the spare
    std::swap(slot[reg], slot.back());
    return own(reg);
  }
};

struct PBlock {
  int64_t m = 1, L = 0;
  mutable NextRows next;  // stepped in the loops of paced ops (kPaced, interp.h), or per row (pace_row)
  bool row_paced = false;          // cheap ops from DRAM: the next block's rows are asked for a row at a time
  mutable int64_t row_steps = 0;   // pace_row calls in this block: the next one spreads its lines over as many
  SmallVec<const char*> in;  // row 0 of the block, per input
  SmallVec<int64_t> in_inner, in_row;
  SmallVec<char*> out;
  SmallVec<int64_t> out_inner, out_row;
};

// In a block of cheap ops whose rows come from DRAM (FusedCall::from_dram), each row loop asks for
// its share of the next block's lines as it starts the row: a check per row, not per vector (one
// per vector cost a residual LayerNorm 10-30%). Without it the block's loops computed from cache
// while no line was on its way: a residual LayerNorm [16384, 768] read DRAM at half the triad.
// From cache (the call within the last-level cache) it cost up to 19%: the hardware keeps up there.
inline void pace_row(const PBlock& B) {
  if (C10_LIKELY(!B.row_paced)) return;
  ++B.row_steps;
  B.next.step();
}

// An operand of one row j: a pointer to L values, or a scalar.
struct RowOperand {
  const float* p = nullptr;
  Vec v{0.f};
  bool scalar = true;
};
inline RowOperand operand(const PReg& x, int64_t j) {
  RowOperand o;
  if (x.kind == PReg::Rows) {
    o.p = x.ptr + j * x.stride;
    o.scalar = false;
  } else {
    o.v = Vec(x.kind == PReg::PerRow ? x.vals[j] : x.s);
  }
  return o;
}
inline Vec get(const RowOperand& o, int64_t i, int64_t cnt) { return o.scalar ? o.v : Vec::loadu(o.p + i, cnt); }

// dst = f(operands...), elementwise. The result is Rows if any operand is, else PerRow if any
// is, else Splat.
// Where a Rows result goes: the register's buffer (row stride L), or straight into an output.
struct PDest {
  float* ptr = nullptr;
  int64_t stride = 0;
  bool stream = false;  // streaming stores (an output larger than the last-level cache)
  // A bf16 output instead (ptr null): rounded as pstore rounds it, without the fp32 rows being
  // written to the block and read back (the bf16 probe 0.94x: benchmarks/results/bf16-direct-stores/).
  c10::BFloat16* bf16 = nullptr;
};

template <int N, typename F, typename W>
inline W call_with(F& f, const std::array<W, N>& v) {
  return std::apply(f, v);
}

// Operands k of row j at i and i + V, as one VecPair each (for ops computed in lockstep: kPairs).
template <int N>
inline std::array<VecPair, N> pair_operands(const std::array<RowOperand, N>& o, int64_t i) {
  std::array<VecPair, N> w;
  for (int k = 0; k < N; ++k) w[k] = VecPair(get(o[k], i, V), get(o[k], i + V, V));
  return w;
}

// Where dst's rows go: straight into an output, else dst's buffer, or the spare where writing
// rows over an operand held differently in that buffer (one value per row, rows of another
// stride) would clobber it.
template <int N>
inline float* rows_dest(PRegs& R, int dst, const std::array<int, N>& ops, const std::array<PReg, N>& x, const PBlock& B,
                        const PDest& direct) {
  if (direct.ptr) return direct.ptr;
  bool clash = false;
  for (int k = 0; k < N; ++k)
    clash |= ops[k] == dst && (x[k].kind == PReg::PerRow || (x[k].kind == PReg::Rows && x[k].stride != B.L));
  return clash ? R.spare_for(dst) : R.own(dst);
}

template <int N, typename F>
inline void apply(PRegs& R, int dst, const std::array<int, N>& ops, const PBlock& B, F f, PDest direct = {}) {
  PReg::Kind kind = PReg::Splat;
  for (int a : ops) kind = std::min(kind, R.r[a].kind);  // Rows < PerRow < Splat
  std::array<PReg, N> x;
  for (int k = 0; k < N; ++k) x[k] = R.r[ops[k]];
  auto call = [&](const std::array<Vec, N>& v) { return call_with<N>(f, v); };
  if (kind == PReg::Splat) {
    std::array<Vec, N> v;
    for (int k = 0; k < N; ++k) v[k] = Vec(x[k].s);
    R.r[dst] = PReg{PReg::Splat, nullptr, 0, lane0(call(v)), nullptr};
    return;
  }
  if (kind == PReg::PerRow) {  // m values, as a short vector
    float* d = R.own(dst);
    for (int64_t j = 0; j < B.m; j += V) {
      const int64_t cnt = std::min<int64_t>(V, B.m - j);
      std::array<Vec, N> v;
      for (int k = 0; k < N; ++k) v[k] = x[k].kind == PReg::PerRow ? Vec::loadu(x[k].vals + j, cnt) : Vec(x[k].s);
      call(v).store(d + j, cnt);
    }
    R.r[dst] = PReg{PReg::PerRow, nullptr, 0, 0.f, d};
    return;
  }
  if (direct.bf16) {
    for (int64_t j = 0; j < B.m; ++j) {
      std::array<RowOperand, N> o;
      for (int k = 0; k < N; ++k) o[k] = operand(x[k], j);
      put_bf16_of<N>(direct.bf16 + j * direct.stride, B.L, direct.stream, f,
                     [&](int k, int64_t i, int64_t cnt) { return get(o[k], i, cnt); }, &B.next);
    }
    ++R.to_bf16;
    // Its Store finds the output already written (pstore's in-place check); nothing else reads it (I.out).
    R.r[dst] = PReg{PReg::Rows, reinterpret_cast<const float*>(direct.bf16), direct.stride, 0.f, nullptr};
    return;
  }
  float* d = rows_dest<N>(R, dst, ops, x, B, direct);
  const int64_t dstride = direct.ptr ? direct.stride : B.L;
  for (int64_t j = 0; j < B.m; ++j) {
    std::array<RowOperand, N> o;
    for (int k = 0; k < N; ++k) o[k] = operand(x[k], j);
    float* dj = d + j * dstride;
    pace_row(B);
    int64_t i = 0;
    std::array<Vec, N> v;
    if constexpr (kPairs<F>) {
      for (; i + 2 * V <= B.L; i += 2 * V) {
        B.next.step(), B.next.step();
        const VecPair r = call_with<N>(f, pair_operands<N>(o, i));
        put(dj + i, r.a, direct.stream);
        put(dj + i + V, r.b, direct.stream);
      }
    }
    for (; i + V <= B.L; i += V) {
      if constexpr (kPaced<F>) B.next.step();
      for (int k = 0; k < N; ++k) v[k] = get(o[k], i, V);
      put(dj + i, call(v), direct.stream);
    }
    if (i < B.L) {
      for (int k = 0; k < N; ++k) v[k] = get(o[k], i, B.L - i);
      call(v).store(dj + i, B.L - i);
    }
  }
  R.r[dst] = PReg{PReg::Rows, d, dstride, 0.f, nullptr};
}

// An elementwise op whose result a row reduction (sum, max, min) reads next, both in one pass:
// each value is accumulated as it is written, so the block is not read again (a softmax's
// scaled scores and their max, its exponentials and their sum). False where the result is not
// Rows (the reduction then runs on its own). Same values as the two instructions apart: max/min
// propagate NaN; a sum adds in another order (rounding only). Where the reduction overwrites the
// op's own register and the op is no output, nothing reads the op's values: they are summed and
// never stored (the mean's correction in x - x.mean(-1, keepdim=True): sub r4 r0 r1; rsum r4 r4).
template <int N, typename F>
inline bool apply_reduce(PRegs& R, const PInstr& I, const PInstr& J, const std::array<int, N>& ops, const PBlock& B,
                         F f, PDest direct) {
  std::array<PReg, N> x;
  bool rows = false;
  for (int k = 0; k < N; ++k) x[k] = R.r[ops[k]], rows |= x[k].kind == PReg::Rows;
  if (!rows) return false;
  float* d = rows_dest<N>(R, I.dst, ops, x, B, direct);
  const int64_t dstride = direct.ptr ? direct.stride : B.L;
  R.red.resize(static_cast<size_t>(B.m));  // not J.dst's buffer yet: an operand may live there
  const bool keep = !(J.dst == I.dst && I.out < 0 && !direct.ptr);
  auto call = [&](const std::array<Vec, N>& v) { return call_with<N>(f, v); };
  auto rows_with = [&](auto combine, float init) {
    for (int64_t j = 0; j < B.m; ++j) {
      std::array<RowOperand, N> o;
      for (int k = 0; k < N; ++k) o[k] = operand(x[k], j);
      float* dj = d + j * dstride;
      Vec acc0(init), acc1(init);  // two chains: one add would wait on its own latency
      std::array<Vec, N> v;
      int64_t i = 0;
      for (; i + 2 * V <= B.L; i += 2 * V) {
        if constexpr (kPaced<F>) B.next.step(), B.next.step();
        Vec r0, r1;
        if constexpr (kPairs<F>) {
          const VecPair r = call_with<N>(f, pair_operands<N>(o, i));
          r0 = r.a, r1 = r.b;
        } else {
          for (int k = 0; k < N; ++k) v[k] = get(o[k], i, V);
          r0 = call(v);
          for (int k = 0; k < N; ++k) v[k] = get(o[k], i + V, V);
          r1 = call(v);
        }
        if (keep) {
          put(dj + i, r0, direct.stream);
          put(dj + i + V, r1, direct.stream);
        }
        acc0 = combine(acc0, r0);
        acc1 = combine(acc1, r1);
      }
      for (; i + V <= B.L; i += V) {
        for (int k = 0; k < N; ++k) v[k] = get(o[k], i, V);
        const Vec r = call(v);
        if (keep) put(dj + i, r, direct.stream);
        acc0 = combine(acc0, r);
      }
      if (i < B.L) {
        for (int k = 0; k < N; ++k) v[k] = get(o[k], i, B.L - i);
        const Vec r = call(v);
        if (keep) r.store(dj + i, B.L - i);
        acc1 = combine(acc1, Vec::set(Vec(init), r, B.L - i));
      }
      float lanes[V];
      combine(acc0, acc1).store(lanes);
      float t = init;
      for (int64_t k = 0; k < V; ++k) {
        if (J.op == POp::RSum) t += lanes[k];
        else if (std::isnan(t) || std::isnan(lanes[k])) t = std::numeric_limits<float>::quiet_NaN();
        else t = J.op == POp::RMax ? std::max(t, lanes[k]) : std::min(t, lanes[k]);
      }
      R.red[static_cast<size_t>(j)] = t;
    }
  };
  const float inf = std::numeric_limits<float>::infinity();
  if (J.op == POp::RSum) rows_with([](const Vec& p, const Vec& q) { return p + q; }, 0.f);
  else if (J.op == POp::RMax) rows_with([](const Vec& p, const Vec& q) { return at::vec::maximum(p, q); }, -inf);
  else rows_with([](const Vec& p, const Vec& q) { return at::vec::minimum(p, q); }, inf);
  R.r[I.dst] = PReg{PReg::Rows, d, dstride, 0.f, nullptr};
  float* vals = R.own(J.dst);  // I's result is dead if J overwrites its register
  std::copy(R.red.begin(), R.red.end(), vals);
  R.r[J.dst] = PReg{PReg::PerRow, nullptr, 0, 0.f, vals};
  ++R.fused;
  return true;
}

// The ops a reduction is fused into (what precedes one in softmax, log_softmax, a residual
// LayerNorm and the mean of a product); others run apart.
inline bool fused_with_reduction(PRegs& R, const PInstr& I, const PInstr& J, const PBlock& B, PDest direct) {
  if (J.a != I.dst || (J.op != POp::RSum && J.op != POp::RMax && J.op != POp::RMin)) return false;
  switch (I.op) {
    case POp::Add: return apply_reduce<2>(R, I, J, {I.a, I.b}, B, [](Vec a, Vec b) { return a + b; }, direct);
    case POp::Sub: return apply_reduce<2>(R, I, J, {I.a, I.b}, B, [](Vec a, Vec b) { return a - b; }, direct);
    case POp::Mul: return apply_reduce<2>(R, I, J, {I.a, I.b}, B, [](Vec a, Vec b) { return a * b; }, direct);
    case POp::ExpSub:
      return apply_reduce<2>(R, I, J, {I.a, I.b}, B, paced_pair([](auto a, auto b) { return exp_u10(a - b); }), direct);
    case POp::MulAdd:
      return apply_reduce<3>(R, I, J, {I.a, I.b, I.c}, B,
                             [](Vec a, Vec b, Vec c) { return at::vec::fmadd(a, b, c); }, direct);
    default: return false;
  }
}

// A LayerNorm's affine tail in one pass: `submul t x mean rstd; muladd y t weight bias`, where
// nothing after the muladd reads t (the builder emits the two side by side: program_builder's
// Codegen::emit), runs as one instruction of five operands:
// the normalized rows are not written to the block and read back (a residual LayerNorm
// [16384, 768] spent a fifth of its in-cache time on that second pass). Same operations in the
// same order, so the same bits as the two instructions apart.
inline bool fused_affine_tail(PRegs& R, const std::vector<PInstr>& code, size_t k, const PBlock& B, PDest direct) {
  const PInstr& I = code[k];
  const PInstr& J = code[k + 1];
  if (I.op != POp::SubMul || J.op != POp::MulAdd || I.out >= 0) return false;
  if (J.a != I.dst || J.b == I.dst || J.c == I.dst) return false;
  if (J.dst != I.dst && read_before_written(code, k + 2, I.dst)) return false;
  apply<5>(R, J.dst, {I.a, I.b, I.c, J.b, J.c}, B,
           [](Vec x, Vec mean, Vec rstd, Vec w, Vec b) { return at::vec::fmadd((x - mean) * rstd, w, b); }, direct);
  ++R.tails;
  return true;
}

// A variance's centered sums (program_builder's correct_centered_means):
//   sub x a b; rsum c x   and   rsumsq s a b   (in either order)
// with x read by nothing else and a, b the same values at both run in one pass over a and b,
// x never written: the correction's pass was a third of a lone var's time. The pairs are
// found once per kernel (centered_sum_partners, fused_kernel.cpp).

// sum(a - b) and sum((a - b)^2) per row into R.cen_sum and R.cen_sq. False where neither operand is
// Rows (the instructions then run as written).
inline bool centered_sums(PRegs& R, int ra, int rb, const PBlock& B) {
  const PReg xa = R.r[ra], xb = R.r[rb];
  if (xa.kind != PReg::Rows && xb.kind != PReg::Rows) return false;
  R.cen_sum.resize(static_cast<size_t>(B.m));
  R.cen_sq.resize(static_cast<size_t>(B.m));
  for (int64_t j = 0; j < B.m; ++j) {
    const RowOperand a = operand(xa, j), b = operand(xb, j);
    pace_row(B);
    Vec s0(0.f), s1(0.f), q0(0.f), q1(0.f);  // two chains each: an add waits on its own latency
    int64_t i = 0;
    for (; i + 2 * V <= B.L; i += 2 * V) {
      const Vec d0 = get(a, i, V) - get(b, i, V), d1 = get(a, i + V, V) - get(b, i + V, V);
      s0 = s0 + d0, s1 = s1 + d1;
      q0 = q0 + d0 * d0, q1 = q1 + d1 * d1;
    }
    for (; i < B.L; i += V) {
      const int64_t cnt = std::min<int64_t>(V, B.L - i);
      const Vec d = Vec::set(Vec(0.f), get(a, i, cnt) - get(b, i, cnt), cnt);  // lanes past the row: 0
      s0 = s0 + d, q0 = q0 + d * d;
    }
    auto add = [](Vec p, Vec q) { return p + q; };
    R.cen_sum[static_cast<size_t>(j)] = at::vec::vec_reduce_all<float>(add, s0 + s1);
    R.cen_sq[static_cast<size_t>(j)] = at::vec::vec_reduce_all<float>(add, q0 + q1);
  }
  return true;
}

inline void put_per_row(PRegs& R, int reg, const std::vector<float>& vals, int64_t m) {
  float* d = R.own(reg);
  std::copy(vals.begin(), vals.begin() + m, d);
  R.r[reg] = PReg{PReg::PerRow, nullptr, 0, 0.f, d};
}

inline void pload(PRegs& R, int dst, c10::ScalarType t, const char* p, int64_t inner, int64_t row, const PBlock& B) {
  const int64_t es = static_cast<int64_t>(c10::elementSize(t));
  if (inner == 0 && row == 0) {
    R.r[dst] = PReg{PReg::Splat, nullptr, 0, load_one(t, p), nullptr};
    return;
  }
  float* d = R.own(dst);
  if (inner == 0) {  // one value per row
    for (int64_t j = 0; j < B.m; ++j) d[j] = load_one(t, p + j * row * es);
    R.r[dst] = PReg{PReg::PerRow, nullptr, 0, 0.f, d};
    return;
  }
  if (inner == 1 && t == c10::kFloat) {  // read in place
    R.r[dst] = PReg{PReg::Rows, reinterpret_cast<const float*>(p), row, 0.f, nullptr};
    return;
  }
  const int64_t rows = row == 0 ? 1 : B.m;  // a row shared by all rows is widened once
  for (int64_t j = 0; j < rows; ++j) {
    const char* q = p + j * row * es;
    float* dj = d + j * B.L;
    int64_t i = 0;
    if (inner == 1 && t == c10::kBFloat16) {
      for (; i + V <= B.L; i += V) {
        Vec v;
        at::vec::load_fp32_from_bf16(reinterpret_cast<const c10::BFloat16*>(q) + i, v);
        v.store(dj + i);
      }
    } else if (inner == 1 && t == c10::kHalf) {
      for (; i + V <= B.L; i += V) {
        Vec v;
        at::vec::load_fp32_from_fp16(reinterpret_cast<const c10::Half*>(q) + i, v);
        v.store(dj + i);
      }
    }
    for (; i < B.L; ++i) dj[i] = load_one(t, q + i * inner * es);
  }
  R.r[dst] = PReg{PReg::Rows, d, row == 0 ? 0 : B.L, 0.f, nullptr};
}

// sum((a - b)^2) or sum(exp(a - b)) per row (the exp's loop paces the next block's prefetch).
template <bool kSq>
inline void preduce_with_prologue(PRegs& R, const PInstr& I, const PBlock& B) {
  const PReg xa = R.r[I.a], xb = R.r[I.b];
  constexpr bool sq = kSq;
  auto term = [](const auto& a, const auto& b) { return sq ? (a - b) * (a - b) : exp_u10(a - b); };  // Vec or VecPair
  float* d = R.own(I.dst);
  for (int64_t j = 0; j < B.m; ++j) {
    const RowOperand a = operand(xa, j), b = operand(xb, j);
    if (a.scalar && b.scalar) {
      d[j] = lane0(term(a.v, b.v)) * static_cast<float>(B.L);
      continue;
    }
    Vec s0(0.f), s1(0.f);
    int64_t i = 0;
    for (; i + 2 * V <= B.L; i += 2 * V) {
      if constexpr (!sq) B.next.step(), B.next.step();
      const VecPair t = term(VecPair(get(a, i, V), get(a, i + V, V)), VecPair(get(b, i, V), get(b, i + V, V)));
      s0 = s0 + t.a;
      s1 = s1 + t.b;
    }
    for (; i + V <= B.L; i += V) s0 = s0 + term(get(a, i, V), get(b, i, V));
    float tail = 0.f;
    for (; i < B.L; ++i) {
      const float va = a.scalar ? lane0(a.v) : a.p[i], vb = b.scalar ? lane0(b.v) : b.p[i];
      tail += sq ? (va - vb) * (va - vb) : std::exp(va - vb);
    }
    d[j] = at::vec::vec_reduce_all<float>([](Vec p, Vec q) { return p + q; }, s0 + s1) + tail;
  }
  R.r[I.dst] = PReg{PReg::PerRow, nullptr, 0, 0.f, d};
}

inline void preduce(PRegs& R, const PInstr& I, const PBlock& B) {
  if (I.op == POp::RSumSq) return preduce_with_prologue<true>(R, I, B);
  if (I.op == POp::RSumExp) return preduce_with_prologue<false>(R, I, B);
  const PReg x = R.r[I.a];
  float* d = R.own(I.dst);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto combine = [&](float a, float b) {
    if (I.op == POp::RSum) return a + b;
    if (std::isnan(a) || std::isnan(b)) return nan;
    return I.op == POp::RMax ? std::max(a, b) : std::min(a, b);
  };
  for (int64_t j = 0; j < B.m; ++j) {
    if (x.kind != PReg::Rows) {
      const float v = x.kind == PReg::PerRow ? x.vals[j] : x.s;
      d[j] = I.op == POp::RSum ? v * static_cast<float>(B.L) : v;
      continue;
    }
    const float* a = x.ptr + j * x.stride;
    int64_t i = 0;
    if (I.op == POp::RSum) {
      Vec s0(0.f), s1(0.f), s2(0.f), s3(0.f);  // independent sums: one would wait on its own latency
      for (; i + 4 * V <= B.L; i += 4 * V) {
        s0 = s0 + Vec::loadu(a + i);
        s1 = s1 + Vec::loadu(a + i + V);
        s2 = s2 + Vec::loadu(a + i + 2 * V);
        s3 = s3 + Vec::loadu(a + i + 3 * V);
      }
      for (; i + V <= B.L; i += V) s0 = s0 + Vec::loadu(a + i);
      if (i < B.L) s0 = s0 + Vec::loadu(a + i, B.L - i);
      d[j] = at::vec::vec_reduce_all<float>([](Vec p, Vec q) { return p + q; }, (s0 + s1) + (s2 + s3));
    } else {
      const bool mx = I.op == POp::RMax;
      const float init = mx ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
      auto pick = [&](const Vec& p, const Vec& q) { return mx ? at::vec::maximum(p, q) : at::vec::minimum(p, q); };
      Vec s0(init), s1(init);
      for (; i + 2 * V <= B.L; i += 2 * V) {
        s0 = pick(s0, Vec::loadu(a + i));
        s1 = pick(s1, Vec::loadu(a + i + V));
      }
      for (; i + V <= B.L; i += V) s0 = pick(s0, Vec::loadu(a + i));
      float lanes[V];
      pick(s0, s1).store(lanes);
      float v = init;
      for (int64_t k = 0; k < V; ++k) v = combine(v, lanes[k]);
      for (; i < B.L; ++i) v = combine(v, a[i]);
      d[j] = v;
    }
  }
  R.r[I.dst] = PReg{PReg::PerRow, nullptr, 0, 0.f, d};
}

inline void pstore(const PReg& x, c10::ScalarType t, char* p, int64_t inner, int64_t row, const PBlock& B, bool per_row,
                   bool stream = false) {
  const int64_t es = static_cast<int64_t>(c10::elementSize(t));
  if (!per_row && x.kind == PReg::Rows && static_cast<const void*>(x.ptr) == p && x.stride == row) return;  // in place
  for (int64_t j = 0; j < B.m; ++j) {
    char* q = p + j * row * es;
    if (per_row) {  // a row output: one value per row
      store_one(t, q, x.kind == PReg::PerRow ? x.vals[j] : x.kind == PReg::Splat ? x.s : x.ptr[j * x.stride]);
      continue;
    }
    if (x.kind != PReg::Rows) {
      const float v = x.kind == PReg::PerRow ? x.vals[j] : x.s;
      for (int64_t i = 0; i < B.L; ++i) store_one(t, q + i * inner * es, v);
      continue;
    }
    const float* a = x.ptr + j * x.stride;
    int64_t i = 0;
    if (inner == 1 && t == c10::kFloat) {
      auto* d = reinterpret_cast<float*>(q);
      for (; i + V <= B.L; i += V) put(d + i, Vec::loadu(a + i), stream);
      if (i < B.L) Vec::loadu(a + i, B.L - i).store(d + i, B.L - i);
      continue;
    }
    if (inner == 1 && t == c10::kBFloat16) {
      auto* d = reinterpret_cast<c10::BFloat16*>(q);
      for (; i + 2 * V <= B.L; i += 2 * V)
        put16(d + i, at::vec::convert_float_bfloat16(Vec::loadu(a + i), Vec::loadu(a + i + V)), stream);
    } else if (inner == 1 && t == c10::kHalf) {
      auto* d = reinterpret_cast<c10::Half*>(q);
      for (; i + 2 * V <= B.L; i += 2 * V) put16(d + i, at::vec::convert_float_half(Vec::loadu(a + i), Vec::loadu(a + i + V)), stream);
    }
    for (; i < B.L; ++i) store_one(t, q + i * inner * es, a[i]);
  }
}

inline void run_packed_block(const std::vector<PInstr>& code, const int* partner, const FusedCall& c, PRegs& R,
                             const PBlock& B) {
  using P = POp;
  // An fp32 output contiguous along its rows is written in place by the instruction computing it.
  // A bf16 one likewise, rounded as it is written (PDest::bf16), by the elementwise ops.
  auto direct = [&](const PInstr& I) -> PDest {
    if (I.out < 0 || B.out_inner[I.out] != 1 || c.in_place[I.out]) return {};
    if (c.out[I.out].dtype == c10::kBFloat16) {
      PDest d{nullptr, B.out_row[I.out], c.stream[I.out] != 0};
      d.bf16 = reinterpret_cast<c10::BFloat16*>(B.out[I.out]);
      return d;
    }
    if (c.out[I.out].dtype != c10::kFloat) return {};
    return PDest{reinterpret_cast<float*>(B.out[I.out]), B.out_row[I.out], c.stream[I.out] != 0};
  };
  auto direct_fp32 = [&](const PInstr& I) {  // apply_reduce's: it writes fp32 only
    const PDest d = direct(I);
    return d.bf16 ? PDest{} : d;
  };
  auto un = [&](const PInstr& I, auto f) { apply<1>(R, I.dst, {I.a}, B, f, direct(I)); };
  auto bin = [&](const PInstr& I, auto f) { apply<2>(R, I.dst, {I.a, I.b}, B, f, direct(I)); };
  auto ter = [&](const PInstr& I, auto f) { apply<3>(R, I.dst, {I.a, I.b, I.c}, B, f, direct(I)); };
  int pending = -1;  // the paired instruction whose sum waits in R.cen_sum or R.cen_sq
  for (size_t k = 0; k < code.size(); ++k) {
    const PInstr& I = code[k];
    const int ki = static_cast<int>(k);
    if (partner && partner[k] >= 0) {
      if (ki == pending) {  // the second of a pair: its sum is ready
        if (I.op == POp::Sub) put_per_row(R, code[++k].dst, R.cen_sum, B.m);  // the rsum; x is never read
        else put_per_row(R, I.dst, R.cen_sq, B.m);
        pending = -1;
        ++R.fused;  // counted once both sums came from the one pass
        continue;
      }
      if (pending < 0 && partner[k] > ki && centered_sums(R, I.a, I.b, B)) {
        pending = partner[k];  // before ++k below moves past the sub to its rsum
        if (I.op == POp::Sub) put_per_row(R, code[++k].dst, R.cen_sum, B.m);
        else put_per_row(R, I.dst, R.cen_sq, B.m);
        continue;
      }
    }
    if (k + 1 < code.size() && fused_affine_tail(R, code, k, B, direct(code[k + 1]))) {
      ++k;
      continue;
    }
    if (k + 1 < code.size() && fused_with_reduction(R, I, code[k + 1], B, direct_fp32(I))) {
      ++k;
      continue;
    }
    switch (I.op) {
      case P::Load: pload(R, I.dst, c.in[I.a].dtype, B.in[I.a], B.in_inner[I.a], B.in_row[I.a], B); break;
      case P::Cols: R.r[I.dst] = PReg{PReg::Splat, nullptr, 0, static_cast<float>(B.L), nullptr}; break;
      case P::Const: R.r[I.dst] = PReg{PReg::Splat, nullptr, 0, I.imm, nullptr}; break;
      case P::RSum:
      case P::RMax:
      case P::RMin:
      case P::RSumSq:
      case P::RSumExp: preduce(R, I, B); break;
      case P::Store:
        pstore(R.r[I.b], c.out[I.a].dtype, B.out[I.a], B.out_inner[I.a], B.out_row[I.a], B, false, c.stream[I.a]);
        break;
      case P::StoreRow: pstore(R.r[I.b], c.out[I.a].dtype, B.out[I.a], 0, B.out_row[I.a], B, true); break;
      default: eval_op(I, un, bin, ter); break;
    }
  }
}

// Short rows: blocks of whole rows, of one plane each where more than one outer dim is left
// after coalescing (a head-split view [heads, tokens, 64] beside a contiguous tensor: in blocks
// of one 64-element row each, a pointwise op took 2.3x eager's time).
inline void run_rows_packed(const FusedCall& c) {
  const Program& p = *c.prog;
  const int nd = c.ndim;
  const int64_t L = c.sizes[nd - 1], plane = c.sizes[nd - 2];
  int64_t rows = 1;
  for (int d = 0; d + 1 < nd; ++d) rows *= c.sizes[d];
  const int64_t m_max = std::max<int64_t>(1, std::min<int64_t>(kPackCap / L, kPackRows / L));
  if (nd > 2) count_packed_plane_call();
  int64_t n_long = long_instructions(p.single);
  if (p.single.empty())
    for (const auto& code : p.phases) n_long += long_instructions(code);
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(L, 1)), [&](int64_t r0, int64_t r1) {
    PRegs& R = thread_scratch<PRegs>();
    R.reset(p.num_regs);
    PBlock B;
    B.L = L;
    const size_t ni = c.in.size(), no = c.out.size();
    B.in.resize(ni), B.in_inner.resize(ni), B.in_row.resize(ni);
    B.out.resize(no), B.out_inner.resize(no), B.out_row.resize(no);
    for (size_t k = 0; k < ni; ++k) B.in_row[k] = c.in[k].strides[nd - 2], B.in_inner[k] = c.in[k].strides[nd - 1];
    for (size_t k = 0; k < no; ++k) B.out_row[k] = c.out[k].strides[nd - 2], B.out_inner[k] = c.out[k].strides[nd - 1];
    // A block's rows stay within one plane (one index of the dims before the last two), where
    // they lie a stride apart: its first row's offsets (OuterCursor) are found once per block.
    auto rows_from = [&](int64_t r) { return std::min({m_max, r1 - r, plane - r % plane}); };
    const OuterCursor start(c, r0);
    SmallVec<int64_t> in_off = start.in_off, out_off = start.out_off;
    for (int64_t r = r0; r < r1; r += B.m) {
      B.m = rows_from(r);
      const OuterCursor next(c, r + B.m);  // the next block's first row (wrapped past the last: unused)
      // While a block spends long on transcendentals (in cache), the next one's rows are
      // fetched into L2, a few lines per vector step (NextRows): without it each block waits
      // on DRAM, then computes. Where the ops are cheap the same holds from DRAM, and their rows
      // ask for the next block a row at a time (pace_row); from cache the hardware's own stream
      // prefetch keeps up (make micro: prefetching a block's rows in one burst at its start made
      // RMSNorm 17-40% slower, a residual LayerNorm 11-14%).
      NextRows& nx = B.next;
      nx.clear();
      const int64_t last_row_steps = std::exchange(B.row_steps, 0);
      B.row_paced = n_long == 0 && c.from_dram && r + B.m < r1;
      if ((n_long > 0 || B.row_paced) && r + B.m < r1) {
        const int64_t m_next = rows_from(r + B.m);
        for (size_t k = 0; k < ni; ++k) {
          if (B.in_inner[k] != 1 || B.in_row[k] == 0) continue;  // strided or shared by all rows
          const int64_t es = static_cast<int64_t>(c10::elementSize(c.in[k].dtype));
          const char* first = static_cast<const char*>(c.in[k].data) + next.in_off[k] * es;
          if (B.in_row[k] == L) nx.add(first, m_next * L * es);  // the rows follow each other: one run
          else
            for (int64_t j = 0; j < m_next; ++j) nx.add(first + j * B.in_row[k] * es, L * es);
        }
        // Paced per vector by the transcendentals, or per row over as many row steps as the
        // block before took (the first block: one row loop's).
        nx.start(B.row_paced ? std::max(last_row_steps, B.m) : n_long * B.m * (L / V));
        R.row_paced += B.row_paced;
      }
      for (size_t k = 0; k < ni; ++k)
        B.in[k] = static_cast<const char*>(c.in[k].data) + in_off[k] * static_cast<int64_t>(c10::elementSize(c.in[k].dtype));
      for (size_t k = 0; k < no; ++k)
        B.out[k] = static_cast<char*>(c.out[k].data) + out_off[k] * static_cast<int64_t>(c10::elementSize(c.out[k].dtype));
      if (!p.single.empty()) {
        run_packed_block(p.single, c.single_partners, c, R, B);  // whole rows: nothing recomputed between phases
      } else {
        for (const auto& code : p.phases) run_packed_block(code, nullptr, c, R, B);  // pointwise: no reduction
      }
      in_off = next.in_off;
      out_off = next.out_off;
    }
    end_streams();
    if (R.fused) count_fused_reductions(std::exchange(R.fused, 0));
    if (R.tails) count_fused_tails(std::exchange(R.tails, 0));
    if (R.row_paced) count_row_paced(std::exchange(R.row_paced, 0));
    if (R.to_bf16) count_bf16_direct(std::exchange(R.to_bf16, 0));
  });
}

// Runs a cpu_fused call: pointwise blocks, rows side by side, packed short rows, or long rows one at a time.
inline void run(const FusedCall& c) {
  // Rows that run across memory side by side (a reduction over a leading dim): by columns.
  if (runs_by_columns(c)) return run_columns(c);
  // Short rows that do not flatten (a broadcast bias keeps [tokens, hidden] apart, a head-split
  // view its planes): blocks of whole rows, so each instruction runs once per several rows.
  const int64_t inner = c.ndim >= 2 ? c.sizes[c.ndim - 1] : 0;
  // Cheap pointwise ops, fp32 outputs: steps resolved once per call, a row (or a 1024-element
  // piece of one) per block. From rows of 384 on that beats packed rows, whose 8192-element
  // registers outgrow L1: 0.68-0.85x the time over 12 MiB and more a tensor, 0.95-1.02x at
  // 1.5 MiB; rows of 64-256 no better, some worse (benchmarks/results/planned-pointwise/).
  if (!c.rows && (c.ndim < 2 || inner >= kPlanMinRow) && run_planned(c)) return;
  if (c.ndim >= 2 && inner <= kPackCap / 2) return run_rows_packed(c);
  if (!c.rows) return run_pointwise(c);
  if (c.ndim >= 2 && inner <= kPackCap) return run_rows_packed(c);
  run_rows(c);  // a vocabulary's softmax: blocks along each row
}

}  // namespace CPU_CAPABILITY
}  // namespace fxcpp::cpu
