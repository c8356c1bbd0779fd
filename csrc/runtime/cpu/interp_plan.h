// Pointwise programs of cheap ops, resolved once per call into a list of steps: each step is a
// function pointer chosen for its op and for which operands are splats, with its operands as
// slots of a pointer table (an input's or output's place in this block, a register's buffer, a
// splat's value). Per block only the inputs' and outputs' slots move; every decision run_block
// makes per instruction per block (splat or not, written straight into an output or not, bf16 or
// not) is made here once. That makes blocks of kPlanBlock elements cheap, and in short blocks one
// block's loads overlap the previous block's stores: make micro's 4-op chain over 64 MiB spent
// ~3 ms of its ~15 in 1024-element blocks' structure and 2-3 ms in per-block dispatch
// (benchmarks/results/pointwise-prefetch-dram/).
//
// Taken by pointwise programs without a transcendental (those are compute-bound; run_pointwise
// paces their prefetch) whose outputs are fp32 (bf16 outputs keep run_block's rounding into the
// output as the op computes). Part of interp.h: compiled once per instruction set with it.
#pragma once
#include "runtime/cpu/interp.h"

#include <new>
#include <type_traits>

namespace fxcpp::cpu {
inline namespace CPU_CAPABILITY {

// Elements per block where a plan makes more than one pass over operands from DRAM: short, so
// that the next block's loads follow this one's stores closely (the hardware's stream prefetch
// runs ahead over a few blocks). Elsewhere kBlock: one pass (x * y + z) gains nothing from short
// blocks, and from cache their per-block cost shows (a 65536-element chain took 1.3x the time in
// 128-element blocks, 0.95x in 1024). Measured: benchmarks/results/planned-pointwise/.
constexpr int64_t kPlanBlock = 128;

struct PlanStep;
using StepFn = void (*)(const PlanStep&, float* const* slots, int64_t n);

struct PlanStep {
  alignas(64) unsigned char f[64];  // the op's function object (a captureless lambda, or one holding a splat Vec)
  StepFn fn = nullptr;
  std::array<int16_t, 3> op{{-1, -1, -1}};  // operand slots
  int16_t dst = -1;                         // result slot
  bool stream = false;                      // streaming stores into an output
};

// A call's plan: the steps, and the slot table [inputs | outputs | register buffers | splat
// values]. Built once per call on the calling thread; the steps are shared by every task, and
// each task copies the table and points its register and splat slots at its own (PlanTask).
struct Plan {
  std::vector<PlanStep> steps;
  std::vector<float*> slot;
  std::vector<float> splat;  // the values fixed for the call (constants), and room for the others
  int reg0 = 0, nr = 0, spl0 = 0;
  std::vector<int16_t> cur;                 // while building: the slot holding each register's value
  std::vector<uint8_t> is_splat, is_static;  // while building: per slot
};

struct PlanTask {
  std::vector<float*> slot;
  std::vector<float> splat;
  AlignedFloats buf;
  // A copy of P's table for blocks of blk elements, its registers and splats this task's own.
  float** start(const Plan& P, int64_t blk) {
    slot = P.slot;
    splat = P.splat;
    buf.resize(static_cast<size_t>(std::max(P.nr, 1)) * blk);
    for (int r = 0; r < P.nr; ++r) slot[P.reg0 + r] = &buf[static_cast<size_t>(r) * blk];
    for (size_t j = 0; j < splat.size(); ++j) slot[P.spl0 + j] = &splat[j];
    return slot.data();
  }
};

// f over N operands, operand k a splat where bit k of M is set; all splats: one value.
template <typename F, unsigned M, size_t... K>
inline void elementwise_step(const PlanStep& s, float* const* slot, int64_t n, std::index_sequence<K...>) {
  const F& f = *std::launder(reinterpret_cast<const F*>(s.f));
  float* d = slot[s.dst];
  constexpr unsigned kAll = (1u << sizeof...(K)) - 1;
  if constexpr (M == kAll) {
    *d = lane0(f(Vec(*slot[s.op[K]])...));
  } else {
    const float* o[] = {slot[s.op[K]]...};
    const Vec sv[] = {Vec((M >> K & 1) ? *o[K] : 0.f)...};
    int64_t i = 0;
    for (; i + V <= n; i += V) put(d + i, f(((M >> K & 1) ? sv[K] : Vec::loadu(o[K] + i))...), s.stream);
    if (i < n) f(((M >> K & 1) ? sv[K] : Vec::loadu(o[K] + i, n - i))...).store(d + i, n - i);
  }
}

template <typename F, int N, unsigned M>
void elementwise_fn(const PlanStep& s, float* const* slot, int64_t n) {
  elementwise_step<F, M>(s, slot, n, std::make_index_sequence<N>{});
}

template <typename F, int N, unsigned M = 0>
StepFn pick_elementwise(unsigned mask) {
  if constexpr (M == (1u << N)) {
    return nullptr;
  } else {
    return mask == M ? &elementwise_fn<F, N, M> : pick_elementwise<F, N, M + 1>(mask);
  }
}

// An fp32 output from a vector slot (stride 1: streamed where asked) or a splat.
template <bool kSplat>
void store_fn(const PlanStep& s, float* const* slot, int64_t n) {
  const float* a = slot[s.op[0]];
  float* d = slot[s.dst];
  const int64_t stride = s.op[1];  // the output's inner stride, elements
  if (kSplat) {
    for (int64_t i = 0; i < n; ++i) d[i * stride] = *a;
  } else if (stride == 1) {
    int64_t i = 0;
    for (; i + V <= n; i += V) put(d + i, Vec::loadu(a + i), s.stream);
    if (i < n) Vec::loadu(a + i, n - i).store(d + i, n - i);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i * stride] = a[i];
  }
}

// The Load of a broadcast input (inner stride 0): its value at this block (op[0]: the input's
// slot, its place in any dtype; op[1]: the dtype).
inline void load_splat_fn(const PlanStep& s, float* const* slot, int64_t) {
  *slot[s.dst] = load_one(static_cast<c10::ScalarType>(s.op[1]), reinterpret_cast<const char*>(slot[s.op[0]]));
}

// The Load of an input not read in place (another dtype, or strided): widened into a register.
inline void widen_fn(const PlanStep& s, float* const* slot, int64_t n) {
  widen(static_cast<c10::ScalarType>(s.op[1]), reinterpret_cast<const char*>(slot[s.op[0]]), s.op[2], n, slot[s.dst]);
}

// Builds c's plan into P. False where some instruction is not a cheap elementwise op, a Load,
// a Const or a Store of an fp32 output (the caller runs run_pointwise then).
inline bool build_plan(const FusedCall& c, Plan& P) {
  const Program& p = *c.prog;
  const auto& code = p.phases[0];
  const int ni = static_cast<int>(c.in.size()), no = static_cast<int>(c.out.size()), nr = p.num_regs;
  // Slots: inputs [0, ni) (their place in this block, any dtype: read as fp32 where they are),
  // outputs [ni, ni + no), registers, then one splat per instruction at most.
  const int out0 = ni, reg0 = out0 + no, spl0 = reg0 + nr;
  const int n_slots = spl0 + static_cast<int>(code.size()) + 1;
  if (n_slots > std::numeric_limits<int16_t>::max()) return false;
  P.reg0 = reg0, P.nr = nr, P.spl0 = spl0;
  P.steps.clear();
  P.slot.assign(n_slots, nullptr);
  P.splat.assign(code.size() + 1, 0.f);
  for (size_t j = 0; j < P.splat.size(); ++j) P.slot[spl0 + j] = &P.splat[j];  // for splats computed now
  int next_splat = spl0;
  auto& cur = P.cur;
  auto& is_splat = P.is_splat;
  auto& is_static = P.is_static;
  cur.assign(nr, -1);
  is_splat.assign(n_slots, 0);
  is_static.assign(n_slots, 0);
  auto new_splat = [&](bool fixed) {
    const int s = next_splat++;
    is_splat[s] = 1;
    is_static[s] = fixed;
    return static_cast<int16_t>(s);
  };
  auto direct = [&](const PInstr& I) {  // the output this instruction writes straight into, or -1
    return I.out >= 0 && c.out[I.out].strides[c.ndim - 1] == 1 && !c.in_place[I.out] ? I.out : -1;
  };
  bool ok = true;
  bool handled = false;  // eval_op called add: the op is elementwise
  // An elementwise op: one step, its function chosen by which operands are splats; all splats
  // that are fixed for the call are computed now.
  auto add = [&](const PInstr& I, auto f, auto ops) {
    using F = decltype(f);
    constexpr int N = static_cast<int>(std::tuple_size_v<decltype(ops)>);
    if constexpr (kPaced<F> || sizeof(F) > 64 || !std::is_trivially_copyable_v<F>) {
      ok = false;  // transcendental programs keep run_pointwise's paced prefetch
    } else {
      handled = true;
      PlanStep s;
      new (s.f) F(f);
      unsigned mask = 0;
      bool fixed = true;
      for (int k = 0; k < N; ++k) {
        const int16_t from = cur[ops[k]];
        if (from < 0) return void(ok = false);  // read before written: not a program the builder makes
        s.op[k] = from;
        if (is_splat[from]) mask |= 1u << k;
        fixed &= is_static[from] != 0;
      }
      s.fn = pick_elementwise<F, N>(mask);
      if (mask == (1u << N) - 1) {
        s.dst = new_splat(fixed);
        if (fixed) s.fn(s, P.slot.data(), 1);  // once, now (its operands are fixed splats too)
      } else {
        const int o = direct(I);
        s.dst = static_cast<int16_t>(o >= 0 ? out0 + o : reg0 + I.dst);
        s.stream = o >= 0 && c.stream[o];
      }
      cur[I.dst] = s.dst;
      if (!(mask == (1u << N) - 1 && fixed)) P.steps.push_back(s);
    }
  };
  auto un = [&](const PInstr& I, auto f) { add(I, f, std::array<int, 1>{I.a}); };
  auto bin = [&](const PInstr& I, auto f) { add(I, f, std::array<int, 2>{I.a, I.b}); };
  auto ter = [&](const PInstr& I, auto f) { add(I, f, std::array<int, 3>{I.a, I.b, I.c}); };
  for (const PInstr& I : code) {
    if (!ok) return false;
    switch (I.op) {
      case POp::Load: {
        const Operand& in = c.in[I.a];
        const int64_t stride = in.strides[c.ndim - 1];
        if (stride == 1 && in.dtype == c10::kFloat) {
          cur[I.dst] = static_cast<int16_t>(I.a);  // read in place
          break;
        }
        PlanStep s;
        s.op = {static_cast<int16_t>(I.a), static_cast<int16_t>(in.dtype), 0};
        if (stride == 0) {
          bool fixed = true;  // the same value everywhere: read once, now
          for (int d = 0; d < c.ndim; ++d) fixed &= in.strides[d] == 0;
          s.fn = &load_splat_fn;
          s.dst = new_splat(fixed);
          if (fixed) *P.slot[s.dst] = load_one(in.dtype, static_cast<const char*>(in.data));
          else P.steps.push_back(s);
        } else {
          if (stride > std::numeric_limits<int16_t>::max() || stride < 0) return false;
          s.op[2] = static_cast<int16_t>(stride);
          s.fn = &widen_fn;
          s.dst = static_cast<int16_t>(reg0 + I.dst);
          P.steps.push_back(s);
        }
        cur[I.dst] = s.dst;
        break;
      }
      case POp::Cols:  // a pointwise program's row length is 1 (run_pointwise's Block)
      case POp::Const: {
        const int16_t s = new_splat(true);
        *P.slot[s] = I.op == POp::Const ? I.imm : 1.f;
        cur[I.dst] = s;
        break;
      }
      case POp::Store: {
        const Operand& out = c.out[I.a];
        const int64_t stride = out.strides[c.ndim - 1];
        if (out.dtype != c10::kFloat || stride < 0 || stride > std::numeric_limits<int16_t>::max()) return false;
        const int16_t from = cur[I.b];
        if (from < 0) return false;
        if (from == out0 + I.a) break;  // written there by the instruction that computed it
        PlanStep s;
        s.fn = is_splat[from] ? &store_fn<true> : &store_fn<false>;
        s.op = {from, static_cast<int16_t>(stride), -1};
        s.dst = static_cast<int16_t>(out0 + I.a);
        s.stream = c.stream[I.a] != 0;
        P.steps.push_back(s);
        break;
      }
      case POp::RSum: case POp::RMax: case POp::RMin: case POp::RSumSq: case POp::RSumExp: case POp::StoreRow:
        return false;
      default:
        handled = false;
        eval_op(I, un, bin, ter);
        if (!handled) return false;  // an op eval_op does not know
        break;
    }
  }
  return ok;
}

// Elements below which a call runs run_pointwise: building a plan costs about what interpreting
// a few blocks does (a 4096-element chain took 0.4-1.4 us longer planned, ~40 us per call with
// Dynamo's; from 64 blocks on the plan saved ~50 ns a block).
constexpr int64_t kPlanMinElements = 16 * kBlock;
// Row length from which a call of several rows runs as a plan rather than as packed rows (run()).
constexpr int64_t kPlanMinRow = 384;

// Whether c runs as a plan: a pointwise program without transcendental ops, fp32 outputs only.
inline bool plannable(const FusedCall& c) {
  if (c.rows || c.prog->phases.size() != 1 || long_instructions(c.prog->phases[0]) > 0) return false;
  int64_t numel = 1;
  for (int d = 0; d < c.ndim; ++d) numel *= c.sizes[d];
  if (numel < kPlanMinElements) return false;
  for (const auto& o : c.out)
    if (o.dtype != c10::kFloat) return false;
  return true;
}

// Runs c as a plan; false (nothing run) where its plan could not be built.
inline bool run_planned(const FusedCall& c) {
  if (!planned() || !plannable(c)) return false;
  // On the calling thread, which only reads it once the tasks start (it runs one of them).
  Plan& P = thread_scratch<Plan>();
  if (!build_plan(c, P)) return false;
  count_planned_call();
  const int64_t inner = c.sizes[c.ndim - 1];
  int64_t outer = 1;
  for (int d = 0; d + 1 < c.ndim; ++d) outer *= c.sizes[d];
  int64_t passes = 0;  // steps over vectors (a splat's step is one value)
  for (const PlanStep& s : P.steps) passes += !P.is_splat[s.dst];
  const int64_t per_block = passes > 1 && c.from_dram ? kPlanBlock : kBlock;
  int64_t nb = (inner + per_block - 1) / per_block;
  int64_t blk = std::min(inner, per_block);
  balance_blocks(outer, inner, kGrain, nb, blk);
  const int ni = static_cast<int>(c.in.size()), no = static_cast<int>(c.out.size());
  at::parallel_for(0, outer * nb, std::max<int64_t>(1, kGrain / std::max<int64_t>(blk, 1)), [&](int64_t b0, int64_t b1) {
    float** slot = thread_scratch<PlanTask>().start(P, blk);
    // Bytes per element, and per block along a row: within a row a block's places are the last
    // block's plus one step (a multiply per operand per block was the block loop's hottest code).
    SmallVec<int64_t> in_es(ni), in_adv(ni), out_es(no), out_adv(no);
    for (int k = 0; k < ni; ++k) {
      in_es[k] = static_cast<int64_t>(c10::elementSize(c.in[k].dtype));
      in_adv[k] = blk * c.in[k].strides[c.ndim - 1] * in_es[k];
    }
    for (int k = 0; k < no; ++k) {
      out_es[k] = static_cast<int64_t>(c10::elementSize(c.out[k].dtype));
      out_adv[k] = blk * c.out[k].strides[c.ndim - 1] * out_es[k];
    }
    const PlanStep* steps = P.steps.data();
    const size_t n_steps = P.steps.size();
    OuterCursor cur(c, b0 / nb);
    int64_t in_row = b0 % nb;
    for (int64_t it = b0; it < b1; ++it, ++in_row) {
      if (in_row == nb) in_row = 0;
      if (it == b0 || in_row == 0) {  // a task's or a row's first block: from the cursor
        if (it != b0) cur.next();
        for (int k = 0; k < ni; ++k) {
          const char* at = static_cast<const char*>(c.in[k].data) + cur.in_off[k] * in_es[k] + in_row * in_adv[k];
          slot[k] = reinterpret_cast<float*>(const_cast<char*>(at));  // only read
        }
        for (int k = 0; k < no; ++k)
          slot[ni + k] = reinterpret_cast<float*>(static_cast<char*>(c.out[k].data) + cur.out_off[k] * out_es[k] + in_row * out_adv[k]);
      } else {
        for (int k = 0; k < ni; ++k) slot[k] = reinterpret_cast<float*>(reinterpret_cast<char*>(slot[k]) + in_adv[k]);
        for (int k = 0; k < no; ++k) slot[ni + k] = reinterpret_cast<float*>(reinterpret_cast<char*>(slot[ni + k]) + out_adv[k]);
      }
      const int64_t n = std::min(blk, inner - in_row * blk);
      for (size_t j = 0; j < n_steps; ++j) steps[j].fn(steps[j], slot, n);
    }
    end_streams();
  });
  return true;
}

}  // namespace CPU_CAPABILITY
}  // namespace fxcpp::cpu
