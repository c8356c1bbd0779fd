// The cpu_fused interpreter: runs a Program over blocks of kBlock elements with
// at::vec::Vectorized<float> (16 lanes under AVX-512, 8 under AVX2, scalar code otherwise).
// This header is compiled once per instruction set (interp_{default,avx2,avx512}.cpp, each
// with its own CPU_CAPABILITY, as ATen's kernels are) and the kernel picks one at run time.
//
// Per block, each register either points at kBlock fp32 values (its own buffer, or straight
// into an fp32 input read contiguously: no copy) or holds one value for the whole block
// (splat). One switch per instruction per block; each case is a vector loop over the block.
#pragma once
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
#include <sleef.h>
#endif
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/cpu/exp_u10.h"
#include "runtime/cpu/gelu_erf.h"
#include "runtime/cpu/tanh_exp.h"
#include "runtime/cpu/fused_call.h"

namespace fxcpp::cpu {
inline namespace CPU_CAPABILITY {

using Vec = at::vec::Vectorized<float>;
constexpr int64_t V = Vec::size();
constexpr int64_t kBlock = 1024;   // a register is 4 KB: a transformer row (768, 1024) is one block
constexpr int64_t kGrain = 32768;  // elements below which a loop stays on one thread (ATen's GRAIN_SIZE)
// The same for a pointwise program with a transcendental: its element costs several cheap ones, so
// an eighth of the elements is ATen's grain of work. Lone ops at 16K and 32K elements took 0.29-0.94x
// ATen's time with 8192, 0.48-1.38x with 32768 (benchmarks/results/grain-transcendental/); 4096,
// with blocks balanced across threads (balance_blocks), took 0.62-0.99x 8192's time from 4097 to
// 8193 elements, except a lone fp32 exp at 4097 (1.06x) (benchmarks/results/grain-balanced/).
// Under AVX-512 a program worth one exp takes a larger grain (pointwise_grain_long).
constexpr int64_t kGrainLong = 4096;

// Register memory, 64-byte aligned: a 64-byte vector access to it never straddles two cache
// lines (std::vector<float> gives 16).
class AlignedFloats {
 public:
  void resize(size_t n) {
    if (n <= cap_) return;
    data_.reset(static_cast<float*>(std::aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64)));
    cap_ = n;
  }
  float& operator[](size_t i) { return data_.get()[i]; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  size_t cap_ = 0;
};

// A vector store; streaming (non-temporal: no read for ownership, caches left alone) where
// asked and aligned. The task that streamed ends with a store fence (end_streams()).
inline void put(float* p, const Vec& v, bool stream) {
#if defined(CPU_CAPABILITY_AVX512)
  if (stream && (reinterpret_cast<uintptr_t>(p) & 63) == 0) return _mm512_stream_ps(p, __m512(v));
#elif defined(CPU_CAPABILITY_AVX2)
  if (stream && (reinterpret_cast<uintptr_t>(p) & 31) == 0) return _mm256_stream_ps(p, __m256(v));
#endif
  v.store(p);
}

// The same for 2V bf16/fp16 values (one vector of 16-bit lanes: 64 bytes under AVX-512).
template <typename T>
inline void put16(T* p, const at::vec::Vectorized<T>& v, bool stream) {
#if defined(CPU_CAPABILITY_AVX512)
  if (stream && (reinterpret_cast<uintptr_t>(p) & 63) == 0) return _mm512_stream_si512(reinterpret_cast<__m512i*>(p), __m512i(v));
#elif defined(CPU_CAPABILITY_AVX2)
  if (stream && (reinterpret_cast<uintptr_t>(p) & 31) == 0) return _mm256_stream_si256(reinterpret_cast<__m256i*>(p), __m256i(v));
#endif
  v.store(p);
}

// n values of a result rounded to bf16 straight into an output, two vectors per store as a
// bf16 Store's (the same rounding: round to nearest even, NaN kept), so that its fp32 values are
// not written to a register and read back. `at(i, cnt)` computes the values at i, `pair(i)`
// those at i and i + V.
template <typename One, typename Two>
inline void put_bf16(c10::BFloat16* d, int64_t n, bool stream, One at, Two pair) {
  int64_t i = 0;
  for (; i + 2 * V <= n; i += 2 * V) {
    const VecPair r = pair(i);
    put16(d + i, at::vec::convert_float_bfloat16(r.a, r.b), stream);
  }
  for (; i < n; i += V) {
    const int64_t cnt = std::min<int64_t>(V, n - i);
    const Vec r = at(i, cnt);
    at::vec::convert_float_bfloat16(r, r).store(d + i, cnt);
  }
}

inline void end_streams() {
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
  _mm_sfence();
#endif
}

inline float lane0(const Vec& v) {
  float t[V];
  v.store(t);
  return t[0];
}

inline float load_one(c10::ScalarType t, const char* p) {
  switch (t) {
    case c10::kFloat: return *reinterpret_cast<const float*>(p);
    case c10::kBFloat16: return static_cast<float>(*reinterpret_cast<const c10::BFloat16*>(p));
    case c10::kHalf: return static_cast<float>(*reinterpret_cast<const c10::Half*>(p));
    case c10::kBool: return *reinterpret_cast<const bool*>(p) ? 1.f : 0.f;
    case c10::kByte: return static_cast<float>(*reinterpret_cast<const uint8_t*>(p));
    case c10::kChar: return static_cast<float>(*reinterpret_cast<const int8_t*>(p));
    case c10::kShort: return static_cast<float>(*reinterpret_cast<const int16_t*>(p));
    case c10::kInt: return static_cast<float>(*reinterpret_cast<const int32_t*>(p));
    case c10::kLong: return static_cast<float>(*reinterpret_cast<const int64_t*>(p));
    default: return std::numeric_limits<float>::quiet_NaN();  // the pass never fuses other dtypes
  }
}

inline void store_one(c10::ScalarType t, char* p, float v) {
  switch (t) {
    case c10::kFloat: *reinterpret_cast<float*>(p) = v; break;
    case c10::kBFloat16: *reinterpret_cast<c10::BFloat16*>(p) = c10::BFloat16(v); break;
    case c10::kHalf: *reinterpret_cast<c10::Half*>(p) = c10::Half(v); break;
    case c10::kBool: *reinterpret_cast<bool*>(p) = v != 0.f; break;
    default: break;  // the pass never stores other dtypes
  }
}

// An op that spends long per element (a transcendental), marked by its type so that the row
// interpreters pace the next block's or row's prefetch in its loops (NextRows) and the cheap
// ops' loops stay as they were (a check per vector there cost a residual LayerNorm 10-30%).
// kPair: f also takes VecPair operands (vec_pair.h), and the loops hand it two vectors at a time,
// computed in lockstep.
template <typename F, bool kPair = false, bool kInline = false>
struct Paced {
  F f;
  template <typename... A>
  auto operator()(const A&... a) const { return f(a...); }
};
template <typename F>
Paced<F> paced(F f) { return {f}; }
template <typename F>
Paced<F, true> paced_pair(F f) { return {f}; }

// paced_pair with the pair's call forced inline, for lambdas marked FXCPP_INLINE_LAMBDA: GCC 12's
// AVX2 build kept the tanh and tanh-GELU lambdas out of line (a call per VecPair, the pair passed and
// returned through the stack: 1.9x the time of the inlined code), and once they were forced, Paced's
// call of them in their place. Only there: forcing every transcendental's lambda and call measured
// 3-10% slower on sigmoid, SiLU and exp, and every pair call 4-6% slower on the softmax
// (benchmarks/results/inline-pair-lambdas/). A block's last single vector stays GCC's choice.
#define FXCPP_INLINE_LAMBDA __attribute__((always_inline))
template <typename F>
struct Paced<F, true, true> {
  F f;
  template <typename... A>
  auto operator()(const A&... a) const { return f(a...); }
  C10_ALWAYS_INLINE auto operator()(const VecPair& a) const { return f(a); }
};
template <typename F>
Paced<F, true, true> paced_pair_inline(F f) { return {f}; }

template <typename F>
constexpr bool kPaced = false;
template <typename F, bool P, bool I>
constexpr bool kPaced<Paced<F, P, I>> = true;
template <typename F>
constexpr bool kPairs = false;
template <typename F, bool I>
constexpr bool kPairs<Paced<F, true, I>> = true;

// The ops eval_op marks paced, by opcode (for counting them in a program).
inline bool spends_long(POp op) {
  switch (op) {
    case POp::Exp: case POp::Expm1: case POp::Log: case POp::Log1p: case POp::Sin: case POp::Cos:
    case POp::Tanh: case POp::Sigmoid: case POp::Erf: case POp::GeluErf: case POp::GeluTanh: case POp::Silu:
    case POp::Elu: case POp::Pow: case POp::ExpSub: case POp::RSumExp: return true;
    default: return false;
  }
}

// Instructions whose long per-element cost (an exp, a log, a transcendental activation) hides
// the prefetch of what comes next (NextRows).
inline int64_t long_instructions(const std::vector<PInstr>& code) {
  return std::count_if(code.begin(), code.end(), [](const PInstr& I) { return spends_long(I.op); });
}

// Elements above which a pointwise program with a transcendental splits across threads. Under
// AVX-512 one exp-like op per element (exp, sigmoid, SiLU, sin, the erf GELU) is cheap enough that
// splitting 4097-8192 fp32 elements cost more than the second thread saved, and 4097-6144 bf16 ones
// (whose loads and stores convert): one thread took 0.79-0.93x the time there, one case 1.06x (fp32
// erf GELU at 8192) (benchmarks/results/grain-balanced-avx512/). Programs worth two or more of them
// (tanh, the tanh GELU and log count two) gain from the split from 4097 (0.64-1.00x at 4097-8192).
// Under AVX2, where each costs twice the vector steps, 4096 for all (benchmarks/results/grain-balanced/).
inline int64_t pointwise_grain_long(const FusedCall& c) {
#if defined(CPU_CAPABILITY_AVX512)
  int64_t exps = 0;
  for (const PInstr& I : c.prog->phases[0]) {
    const bool heavy = I.op == POp::Tanh || I.op == POp::GeluTanh || I.op == POp::Log || I.op == POp::Log1p;
    exps += heavy ? 2 : spends_long(I.op) ? 1 : 0;
  }
  if (exps >= 2) return kGrainLong;
  bool narrow_io = false;  // an operand not in fp32 (bf16, fp16, a mask): its loads or stores convert
  for (const auto& t : c.in) narrow_io |= t.dtype != c10::kFloat;
  for (const auto& t : c.out) narrow_io |= t.dtype != c10::kFloat;
  return narrow_io ? kGrainLong * 3 / 2 : 2 * kGrainLong;
#else
  (void)c;
  return kGrainLong;
#endif
}

// The input lines of the next block (of rows), the next long row, or the pointwise block two
// ahead, fetched into L2 a few lines per vector step of this one's transcendental instructions
// (while they compute from cache). The whole block's prefetches in one burst at its start
// overlapped little: make micro's softmax took 6.8-7.8 ms that way, 5.1-5.5 ms paced (fp32
// [4096, 4096], 2 threads, alternating runs).
struct NextRows {
  std::vector<std::pair<const char*, const char*>> spans;  // [begin, end) of each run of lines
  size_t span = 0;
  const char* at = nullptr;  // the next line; null once all are asked for
  int64_t per_step = 1;      // lines per vector step
  int64_t lines = 0;         // in all spans
  void clear() { spans.clear(), span = 0, at = nullptr, lines = 0; }
  void add(const char* begin, int64_t bytes) {
    spans.emplace_back(begin, begin + bytes);
    lines += (bytes + 63) / 64;
  }
  // Spreads the lines evenly over `steps` vector steps (asking twice as fast was 5-15% slower).
  void start(int64_t steps) {
    if (spans.empty() || steps <= 0) return;
    at = spans[0].first;
    per_step = (lines + steps - 1) / steps;
  }
  void step() {
    if (!at) return;
    for (int64_t k = 0; k < per_step; ++k) {
      __builtin_prefetch(at, 0, 2);  // into L2: the current block's registers hold L1
      at += 64;
      if (at >= spans[span].second) {
        if (++span == spans.size()) {
          at = nullptr;
          return;
        }
        at = spans[span].first;
      }
    }
  }
};

// One thread's registers for one program.
struct Regs {
  AlignedFloats buf;
  std::vector<const float*> ptr;
  std::vector<uint8_t> splat;
  std::vector<float> s, row;        // splat values; per-row reduction results
  std::vector<Vec> acc;             // reduction accumulators (vector part)
  std::vector<float> sacc;          // and their scalar part (tails, splat operands)
  int64_t cap = kBlock;             // values per register
  int64_t to_bf16 = 0;              // blocks a result was rounded straight into a bf16 output, counted per task
  void reset(int n, int64_t per_reg = kBlock) {
    cap = per_reg;
    buf.resize(static_cast<size_t>(n) * cap);
    ptr.assign(n, nullptr);
    splat.assign(n, 0);
    s.assign(n, 0.f);
    row.assign(n, 0.f);
    acc.assign(n, Vec(0.f));
    sacc.assign(n, 0.f);
  }
  float* w(int r) {  // the register's own buffer, to be written
    splat[r] = 0;
    float* p = &buf[static_cast<size_t>(r) * cap];
    ptr[r] = p;
    return p;
  }
  void set_splat(int r, float v) {
    splat[r] = 1;
    s[r] = v;
  }
};

// The calling thread's scratch T, through a call GCC cannot see into. Each use of a thread_local
// in a shared library is a __tls_get_addr call, and GCC repeated it for every Const of every
// block (a reference bound to the thread_local is the thread_local to it): make micro's 4-op
// chain over 64 MiB cut into 128-element blocks (a trial) took 31 ms with it, 23 without.
template <typename T>
__attribute__((noinline)) T& thread_scratch() {
  static thread_local T t;
  return t;
}

// Where one block's operands lie.
struct Block {
  int64_t n = 0;
  SmallVec<const char*> in;
  SmallVec<int64_t> in_stride;  // inner stride, elements
  SmallVec<char*> out;
  SmallVec<int64_t> out_stride;
  SmallVec<char*> row_out;      // row outputs: this row's element
  bool first_in_row = true;
  float cols = 1.f;
  mutable NextRows next;  // stepped in the loops of paced ops (kPaced) where run_rows or run_pointwise sets it

  // Sized for c's operands, with their inner strides; with row_outputs, a row output (one value
  // per row) gets stride 0.
  static Block for_call(const FusedCall& c, bool row_outputs) {
    Block B;
    B.in.resize(c.in.size());
    B.in_stride.resize(c.in.size());
    B.out.resize(c.out.size());
    B.out_stride.resize(c.out.size());
    B.row_out.resize(c.out.size());
    for (size_t k = 0; k < c.in.size(); ++k) B.in_stride[k] = c.in[k].strides[c.ndim - 1];
    for (size_t k = 0; k < c.out.size(); ++k)
      B.out_stride[k] = row_outputs && c.prog->outputs[k].row ? 0 : c.out[k].strides[c.ndim - 1];
    return B;
  }
};

// n values of dtype t from p (stride in elements), as fp32 into d.
inline void widen(c10::ScalarType t, const char* p, int64_t stride, int64_t n, float* d) {
  const int64_t es = static_cast<int64_t>(c10::elementSize(t));
  int64_t i = 0;
  if (stride == 1 && t == c10::kFloat) {
    std::copy(reinterpret_cast<const float*>(p), reinterpret_cast<const float*>(p) + n, d);
    return;
  }
  if (stride == 1 && t == c10::kBFloat16) {
    const auto* q = reinterpret_cast<const c10::BFloat16*>(p);
    for (; i + V <= n; i += V) {
      Vec v;
      at::vec::load_fp32_from_bf16(q + i, v);
      v.store(d + i);
    }
  } else if (stride == 1 && t == c10::kHalf) {
    const auto* q = reinterpret_cast<const c10::Half*>(p);
    for (; i + V <= n; i += V) {
      Vec v;
      at::vec::load_fp32_from_fp16(q + i, v);
      v.store(d + i);
    }
  }
  for (; i < n; ++i) d[i] = load_one(t, p + i * stride * es);
}

inline void load(Regs& R, int dst, c10::ScalarType t, const char* p, int64_t stride, int64_t n) {
  if (stride == 0) return R.set_splat(dst, load_one(t, p));
  if (stride == 1 && t == c10::kFloat) {  // read in place
    R.splat[dst] = 0;
    R.ptr[dst] = reinterpret_cast<const float*>(p);
    return;
  }
  widen(t, p, stride, n, R.w(dst));
}

inline void store(const Regs& R, int reg, c10::ScalarType t, char* p, int64_t stride, int64_t n, bool stream = false) {
  if (!R.splat[reg] && static_cast<const void*>(R.ptr[reg]) == p) return;  // already written there
  const int64_t es = static_cast<int64_t>(c10::elementSize(t));
  if (R.splat[reg]) {
    for (int64_t i = 0; i < n; ++i) store_one(t, p + i * stride * es, R.s[reg]);
    return;
  }
  const float* a = R.ptr[reg];
  int64_t i = 0;
  if (stride == 1 && t == c10::kFloat) {
    auto* d = reinterpret_cast<float*>(p);
    for (; i + V <= n; i += V) put(d + i, Vec::loadu(a + i), stream);
    if (i < n) Vec::loadu(a + i, n - i).store(d + i, n - i);
    return;
  }
  if (stride == 1 && t == c10::kBFloat16) {
    auto* d = reinterpret_cast<c10::BFloat16*>(p);
    for (; i + 2 * V <= n; i += 2 * V) put16(d + i, at::vec::convert_float_bfloat16(Vec::loadu(a + i), Vec::loadu(a + i + V)), stream);
  } else if (stride == 1 && t == c10::kHalf) {
    auto* d = reinterpret_cast<c10::Half*>(p);
    for (; i + 2 * V <= n; i += 2 * V) put16(d + i, at::vec::convert_float_half(Vec::loadu(a + i), Vec::loadu(a + i + V)), stream);
  }
  for (; i < n; ++i) store_one(t, p + i * stride * es, a[i]);
}

// Where an instruction writes: its register's buffer, or straight into its output (I.out).
inline float* dest(Regs& R, const PInstr& I, float* direct) {
  if (!direct) return R.w(I.dst);
  R.splat[I.dst] = 0;
  R.ptr[I.dst] = direct;
  return direct;
}

// An elementwise op whose result is a bf16 output, contiguous along the block, that nothing else
// reads (I.out): rounded straight into it (put_bf16); its Store then finds it written. False
// where every operand is a splat (the result is one; the Store writes it).
// put_bf16 of the elementwise op f over N operands, operand k's values at i read by get(k, i, cnt):
// two vectors in lockstep where f takes them (kPairs), a paced op stepping `next` (if any) once a
// vector as the fp32 loops do. The pointwise blocks' and the packed rows' bf16 outputs both use it.
template <int N, typename F, typename Get>
inline void put_bf16_of(c10::BFloat16* d, int64_t n, bool stream, F& f, Get get, NextRows* next) {
  auto at = [&](int64_t i, int64_t cnt) {
    std::array<Vec, N> v;
    for (int k = 0; k < N; ++k) v[k] = get(k, i, cnt);
    return std::apply(f, v);
  };
  auto pair = [&](int64_t i) {
    if constexpr (kPaced<F>) if (next) next->step(), next->step();
    if constexpr (kPairs<F>) {
      std::array<VecPair, N> w;
      for (int k = 0; k < N; ++k) w[k] = VecPair(get(k, i, V), get(k, i + V, V));
      return std::apply(f, w);
    } else {
      return VecPair(at(i, V), at(i + V, V));
    }
  };
  put_bf16(d, n, stream, at, pair);
}

template <int N, typename F>
inline bool elementwise_to_bf16(Regs& R, const PInstr& I, const std::array<int, N>& ops, int64_t n, F f,
                                c10::BFloat16* d, bool stream, NextRows* next) {
  std::array<const float*, N> p;
  std::array<Vec, N> s;
  bool all_splat = true;
  for (int k = 0; k < N; ++k) {
    p[k] = R.splat[ops[k]] ? nullptr : R.ptr[ops[k]];
    s[k] = Vec(R.s[ops[k]]);
    all_splat &= p[k] == nullptr;
  }
  if (all_splat) return false;
  put_bf16_of<N>(d, n, stream, f, [&](int k, int64_t i, int64_t cnt) { return p[k] ? Vec::loadu(p[k] + i, cnt) : s[k]; },
                 next);
  ++R.to_bf16;
  R.splat[I.dst] = 0;
  R.ptr[I.dst] = reinterpret_cast<const float*>(d);
  return true;
}

template <typename F>
inline void unary(Regs& R, const PInstr& I, int64_t n, F f, float* direct = nullptr, bool stream = false,
                  NextRows* next = nullptr) {
  if (R.splat[I.a]) return R.set_splat(I.dst, lane0(f(Vec(R.s[I.a]))));
  const float* a = R.ptr[I.a];
  float* d = dest(R, I, direct);
  int64_t i = 0;
  if constexpr (kPairs<F>) {
    for (; i + 2 * V <= n; i += 2 * V) {
      if (next) next->step(), next->step();
      const VecPair r = f(VecPair(Vec::loadu(a + i), Vec::loadu(a + i + V)));
      put(d + i, r.a, stream);
      put(d + i + V, r.b, stream);
    }
  }
  for (; i + V <= n; i += V) {
    if constexpr (kPaced<F>) if (next) next->step();
    put(d + i, f(Vec::loadu(a + i)), stream);
  }
  if (i < n) f(Vec::loadu(a + i, n - i)).store(d + i, n - i);
}

template <bool SA, bool SB, typename F>
inline void binary_loop(const float* a, Vec va, const float* b, Vec vb, float* d, int64_t n, F f, bool stream,
                        NextRows* next) {
  int64_t i = 0;
  if constexpr (kPairs<F>) {
    for (; i + 2 * V <= n; i += 2 * V) {
      if (next) next->step(), next->step();
      const VecPair x = SA ? VecPair(va, va) : VecPair(Vec::loadu(a + i), Vec::loadu(a + i + V));
      const VecPair y = SB ? VecPair(vb, vb) : VecPair(Vec::loadu(b + i), Vec::loadu(b + i + V));
      const VecPair r = f(x, y);
      put(d + i, r.a, stream);
      put(d + i + V, r.b, stream);
    }
  }
  for (; i + V <= n; i += V) {
    if constexpr (kPaced<F>) if (next) next->step();
    put(d + i, f(SA ? va : Vec::loadu(a + i), SB ? vb : Vec::loadu(b + i)), stream);
  }
  if (i < n) f(SA ? va : Vec::loadu(a + i, n - i), SB ? vb : Vec::loadu(b + i, n - i)).store(d + i, n - i);
}

template <typename F>
inline void binary(Regs& R, const PInstr& I, int64_t n, F f, float* direct = nullptr, bool stream = false,
                   NextRows* next = nullptr) {
  const bool sa = R.splat[I.a], sb = R.splat[I.b];
  if (sa && sb) return R.set_splat(I.dst, lane0(f(Vec(R.s[I.a]), Vec(R.s[I.b]))));
  const float *a = R.ptr[I.a], *b = R.ptr[I.b];
  const Vec va(R.s[I.a]), vb(R.s[I.b]);
  float* d = dest(R, I, direct);
  if (sa) binary_loop<true, false>(a, va, b, vb, d, n, f, stream, next);
  else if (sb) binary_loop<false, true>(a, va, b, vb, d, n, f, stream, next);
  else binary_loop<false, false>(a, va, b, vb, d, n, f, stream, next);
}

template <typename F>
inline void ternary(Regs& R, const PInstr& I, int64_t n, F f, float* direct = nullptr, bool stream = false) {
  const bool sa = R.splat[I.a], sb = R.splat[I.b], sc = R.splat[I.c];
  if (sa && sb && sc) return R.set_splat(I.dst, lane0(f(Vec(R.s[I.a]), Vec(R.s[I.b]), Vec(R.s[I.c]))));
  const float *a = R.ptr[I.a], *b = R.ptr[I.b], *c = R.ptr[I.c];
  const Vec va(R.s[I.a]), vb(R.s[I.b]), vc(R.s[I.c]);
  float* d = dest(R, I, direct);
  auto get = [](bool splat, const float* p, const Vec& v, int64_t i, int64_t cnt) { return splat ? v : Vec::loadu(p + i, cnt); };
  int64_t i = 0;
  for (; i + V <= n; i += V) put(d + i, f(get(sa, a, va, i, V), get(sb, b, vb, i, V), get(sc, c, vc, i, V)), stream);
  if (i < n) f(get(sa, a, va, i, n - i), get(sb, b, vb, i, n - i), get(sc, c, vc, i, n - i)).store(d + i, n - i);
}

template <typename W>
C10_ALWAYS_INLINE W sigmoid(const W& x) { return W(1.f) / (W(1.f) + exp_u10(x.neg())); }

// torch.erf: eager computes it with Sleef's erf (1.0 ulp) through vml, not with
// Vectorized::erf(), a faster polynomial (ATen's vectorized GELU kernel's; ours: gelu_erf.h).
inline Vec erf_u10(const Vec& x) {
#if defined(CPU_CAPABILITY_AVX512)
  return Vec(Sleef_erff16_u10(__m512(x)));
#elif defined(CPU_CAPABILITY_AVX2)
  return Vec(Sleef_erff8_u10(__m256(x)));
#else
  float t[V];
  x.store(t);
  for (auto& v : t) v = std::erf(v);
  return Vec::loadu(t);
#endif
}
inline Vec nonzero(const Vec& x) { return x.ne(Vec(0.f)); }  // 1 where x != 0 (NaN counts as true, as bool(nan))

// sum((a - b)^2) or sum(exp(a - b)) over the block, into the accumulator (b a vector or a splat);
// the exp's loop paces the next row's prefetch.
template <bool kSq>
inline void reduce_with_prologue(Regs& R, const PInstr& I, int64_t n, NextRows* next) {
  const int r = I.dst;
  constexpr bool sq = kSq;
  auto term = [](const auto& a, const auto& b) { return sq ? (a - b) * (a - b) : exp_u10(a - b); };  // Vec or VecPair
  if (R.splat[I.a] && R.splat[I.b]) {
    R.sacc[r] += lane0(term(Vec(R.s[I.a]), Vec(R.s[I.b]))) * static_cast<float>(n);
    return;
  }
  auto get = [&](int x, int64_t i, int64_t cnt) { return R.splat[x] ? Vec(R.s[x]) : Vec::loadu(R.ptr[x] + i, cnt); };
  Vec acc0 = R.acc[r], acc1(0.f);
  int64_t i = 0;
  for (; i + 2 * V <= n; i += 2 * V) {
    if constexpr (!sq) if (next) next->step(), next->step();
    const VecPair t = term(VecPair(get(I.a, i, V), get(I.a, i + V, V)), VecPair(get(I.b, i, V), get(I.b, i + V, V)));
    acc0 = acc0 + t.a;
    acc1 = acc1 + t.b;
  }
  for (; i + V <= n; i += V) acc0 = acc0 + term(get(I.a, i, V), get(I.b, i, V));
  R.acc[r] = acc0 + acc1;
  for (; i < n; ++i) {
    const float a = R.splat[I.a] ? R.s[I.a] : R.ptr[I.a][i], b = R.splat[I.b] ? R.s[I.b] : R.ptr[I.b][i];
    R.sacc[r] += sq ? (a - b) * (a - b) : std::exp(a - b);
  }
}

// A reduction's vector part; NaN propagates through max/min (eager's amax/amin).
inline void reduce(Regs& R, const PInstr& I, int64_t n, NextRows* next = nullptr) {
  if (I.op == POp::RSumSq) return reduce_with_prologue<true>(R, I, n, next);
  if (I.op == POp::RSumExp) return reduce_with_prologue<false>(R, I, n, next);
  const int r = I.dst;
  if (R.splat[I.a]) {
    const float v = R.s[I.a];
    if (I.op == POp::RSum) R.sacc[r] += v * static_cast<float>(n);
    else if (std::isnan(v) || std::isnan(R.sacc[r])) R.sacc[r] = std::numeric_limits<float>::quiet_NaN();
    else R.sacc[r] = I.op == POp::RMax ? std::max(R.sacc[r], v) : std::min(R.sacc[r], v);
    return;
  }
  const float* a = R.ptr[I.a];
  int64_t i = 0;
  // Four independent accumulators: one would wait on its own latency every vector.
  Vec acc0 = R.acc[r], acc1 = R.acc[r], acc2 = R.acc[r], acc3 = R.acc[r];
  if (I.op == POp::RSum) {
    acc1 = acc2 = acc3 = Vec(0.f);
    for (; i + 4 * V <= n; i += 4 * V) {
      acc0 = acc0 + Vec::loadu(a + i);
      acc1 = acc1 + Vec::loadu(a + i + V);
      acc2 = acc2 + Vec::loadu(a + i + 2 * V);
      acc3 = acc3 + Vec::loadu(a + i + 3 * V);
    }
    for (; i + V <= n; i += V) acc0 = acc0 + Vec::loadu(a + i);
    if (i < n) acc0 = acc0 + Vec::loadu(a + i, n - i);  // zero-filled lanes
    i = n;
    R.acc[r] = (acc0 + acc1) + (acc2 + acc3);
  } else {
    auto pick = [&](const Vec& x, const Vec& y) { return I.op == POp::RMax ? at::vec::maximum(x, y) : at::vec::minimum(x, y); };
    for (; i + 4 * V <= n; i += 4 * V) {
      acc0 = pick(acc0, Vec::loadu(a + i));
      acc1 = pick(acc1, Vec::loadu(a + i + V));
      acc2 = pick(acc2, Vec::loadu(a + i + 2 * V));
      acc3 = pick(acc3, Vec::loadu(a + i + 3 * V));
    }
    for (; i + V <= n; i += V) acc0 = pick(acc0, Vec::loadu(a + i));
    R.acc[r] = pick(pick(acc0, acc1), pick(acc2, acc3));
  }
  for (; i < n; ++i) {
    const float v = a[i];
    if (std::isnan(v) || std::isnan(R.sacc[r])) R.sacc[r] = std::numeric_limits<float>::quiet_NaN();
    else R.sacc[r] = I.op == POp::RMax ? std::max(R.sacc[r], v) : std::min(R.sacc[r], v);
  }
}

inline bool is_sum(POp op) { return op == POp::RSum || op == POp::RSumSq || op == POp::RSumExp; }

// A reduction's starting value: 0 for sums, -inf for max, +inf for min.
inline float reduction_init(POp op) {
  return is_sum(op) ? 0.f : op == POp::RMax ? -std::numeric_limits<float>::infinity()
                                            : std::numeric_limits<float>::infinity();
}

inline void start_reduction(Regs& R, const PInstr& I) {
  const float init = reduction_init(I.op);
  R.acc[I.dst] = Vec(init);
  R.sacc[I.dst] = init;
}

inline float finish_reduction(const Regs& R, const PInstr& I) {
  float lanes[V];
  R.acc[I.dst].store(lanes);
  float v = R.sacc[I.dst];
  for (int64_t k = 0; k < V; ++k) {
    if (is_sum(I.op)) v += lanes[k];
    else if (std::isnan(lanes[k]) || std::isnan(v)) v = std::numeric_limits<float>::quiet_NaN();
    else v = I.op == POp::RMax ? std::max(v, lanes[k]) : std::min(v, lanes[k]);
  }
  return v;
}

// The elementwise ops, written once for both interpreters: calls un(I, f), bin(I, f) or
// ter(I, f) with f over Vectorized<float> operands.
template <typename Un, typename Bin, typename Ter>
inline void eval_op(const PInstr& I, Un&& un, Bin&& bin, Ter&& ter) {
  using P = POp;
  switch (I.op) {
    case P::Neg: return un(I, [](Vec x) { return x.neg(); });
    case P::Abs: return un(I, [](Vec x) { return x.abs(); });
    case P::Exp: return un(I, paced_pair([](auto x) { return exp_u10(x); }));
    case P::Expm1: return un(I, paced([](Vec x) { return x.expm1(); }));
    case P::Log: return un(I, paced([](Vec x) { return x.log(); }));
    case P::Log1p: return un(I, paced([](Vec x) { return x.log1p(); }));
    case P::Sqrt: return un(I, [](Vec x) { return x.sqrt(); });
    case P::Rsqrt: return un(I, [](Vec x) { return x.rsqrt(); });
    case P::Recip: return un(I, [](Vec x) { return x.reciprocal(); });
    case P::Sin: return un(I, paced([](Vec x) { return x.sin(); }));
    case P::Cos: return un(I, paced([](Vec x) { return x.cos(); }));
    case P::Tanh: return un(I, paced_pair_inline([](auto x) FXCPP_INLINE_LAMBDA { return tanh_exp(x); }));
    case P::Sigmoid: return un(I, paced_pair([](auto x) { return sigmoid(x); }));
    case P::Erf: return un(I, paced([](Vec x) { return erf_u10(x); }));
    case P::Relu: return un(I, [](Vec x) { return at::vec::clamp_min(x, Vec(0.f)); });  // max(0, x): NaN kept
    case P::GeluErf: return un(I, paced_pair([](auto x) { return gelu_erf(x); }));
    case P::GeluTanh:
      return un(I, paced_pair_inline([](auto x) FXCPP_INLINE_LAMBDA {
        using W = decltype(x);
        const W inner = W(static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5)) * (x + W(0.044715f) * x * x * x);
        return W(0.5f) * x * (W(1.f) + tanh_exp(inner));
      }));
    case P::Silu:
      return un(I, paced_pair([](auto x) { return x / (decltype(x)(1.f) + exp_u10(x.neg())); }));
    case P::Hardswish:
      return un(I, [](Vec x) { return x * at::vec::minimum(at::vec::maximum(x + Vec(3.f), Vec(0.f)), Vec(6.f)) / Vec(6.f); });
    case P::Hardsigmoid:
      return un(I, [](Vec x) { return at::vec::minimum(at::vec::maximum(x + Vec(3.f), Vec(0.f)), Vec(6.f)) / Vec(6.f); });
    case P::LeakyRelu: return un(I, [s = Vec(I.imm)](Vec x) { return Vec::blendv(x * s, x, x > Vec(0.f)); });
    case P::Elu: return un(I, paced([al = Vec(I.imm)](Vec x) { return Vec::blendv(al * x.expm1(), x, x > Vec(0.f)); }));
    case P::Floor: return un(I, [](Vec x) { return x.floor(); });
    case P::Ceil: return un(I, [](Vec x) { return x.ceil(); });
    case P::Round: return un(I, [](Vec x) { return x.round(); });
    case P::Trunc: return un(I, [](Vec x) { return x.trunc(); });
    case P::Sign:  // (0 < x) - (x < 0): eager's sign for floats, 0 for NaN (both compares false) and -0
      return un(I, [](Vec x) { return x.gt(Vec(0.f)) - x.lt(Vec(0.f)); });
    case P::IsNan: return un(I, [](Vec x) { return x.isnan() & Vec(1.f); });
    case P::Not: return un(I, [](Vec x) { return x.eq(Vec(0.f)); });
    case P::Square: return un(I, [](Vec x) { return x * x; });
    case P::RoundBf16:  // round to nearest even, NaN kept: the bits a bf16 store writes
      return un(I, [](Vec x) { return std::get<0>(at::vec::convert_bfloat16_float(at::vec::convert_float_bfloat16(x, x))); });
    case P::RoundHalf:
      return un(I, [](Vec x) { return std::get<0>(at::vec::convert_half_float(at::vec::convert_float_half(x, x))); });
    case P::Add: return bin(I, [](Vec a, Vec b) { return a + b; });
    case P::Sub: return bin(I, [](Vec a, Vec b) { return a - b; });
    case P::Mul: return bin(I, [](Vec a, Vec b) { return a * b; });
    case P::Div: return bin(I, [](Vec a, Vec b) { return a / b; });
    case P::Max: return bin(I, [](Vec a, Vec b) { return at::vec::maximum(a, b); });
    case P::Min: return bin(I, [](Vec a, Vec b) { return at::vec::minimum(a, b); });
    case P::Pow: return bin(I, paced([](Vec a, Vec b) { return a.pow(b); }));
    case P::Eq: return bin(I, [](Vec a, Vec b) { return a.eq(b); });
    case P::Ne: return bin(I, [](Vec a, Vec b) { return a.ne(b); });
    case P::Lt: return bin(I, [](Vec a, Vec b) { return a.lt(b); });
    case P::Le: return bin(I, [](Vec a, Vec b) { return a.le(b); });
    case P::Gt: return bin(I, [](Vec a, Vec b) { return a.gt(b); });
    case P::Ge: return bin(I, [](Vec a, Vec b) { return a.ge(b); });
    case P::And: return bin(I, [](Vec a, Vec b) { return nonzero(a) * nonzero(b); });
    case P::Or: return bin(I, [](Vec a, Vec b) { return at::vec::maximum(nonzero(a), nonzero(b)); });
    case P::Where: return ter(I, [](Vec c, Vec a, Vec b) { return Vec::blendv(b, a, c != Vec(0.f)); });
    case P::Clamp:  // min(max(x, lo), hi), NaN in x kept (eager's clamp)
      return ter(I, [](Vec x, Vec lo, Vec hi) { return at::vec::clamp(x, lo, hi); });
    case P::MulAdd: return ter(I, [](Vec a, Vec b, Vec c) { return at::vec::fmadd(a, b, c); });
    case P::SubMul: return ter(I, [](Vec a, Vec b, Vec c) { return (a - b) * c; });
    case P::MulMul: return ter(I, [](Vec a, Vec b, Vec c) { return (a * b) * c; });
    case P::ExpSub: return bin(I, paced_pair([](auto a, auto b) { return exp_u10(a - b); }));
    default: return;  // loads, stores and reductions are each interpreter's own
  }
}

inline void run_block(const std::vector<PInstr>& code, const FusedCall& c, Regs& R, const Block& B) {
  const int64_t n = B.n;
  using P = POp;
  // An output that is one instruction's result alone (I.out), contiguous along the block and not
  // a dying input's buffer, is written by that instruction: in place where fp32, rounded as it
  // is written where bf16 (elementwise_to_bf16).
  auto writable = [&](const PInstr& I, c10::ScalarType t) {
    return I.out >= 0 && B.out_stride[I.out] == 1 && c.out[I.out].dtype == t && !c.in_place[I.out];
  };
  auto direct = [&](const PInstr& I) -> float* {
    return writable(I, c10::kFloat) ? reinterpret_cast<float*>(B.out[I.out]) : nullptr;
  };
  auto streams = [&](const PInstr& I) { return I.out >= 0 && c.stream[I.out] && direct(I); };
  auto direct16 = [&](const PInstr& I) -> c10::BFloat16* {
    return writable(I, c10::kBFloat16) ? reinterpret_cast<c10::BFloat16*>(B.out[I.out]) : nullptr;
  };
  NextRows* feed = B.next.at ? &B.next : nullptr;  // null where nothing is fetched: a register, not a load per vector
  auto to16 = [&](const PInstr& I, auto f, auto ops) {
    c10::BFloat16* d = direct16(I);
    return d && elementwise_to_bf16<static_cast<int>(std::tuple_size_v<decltype(ops)>)>(R, I, ops, n, f, d,
                                                                                         c.stream[I.out] != 0, feed);
  };
  auto un = [&](const PInstr& I, auto f) {
    if (!to16(I, f, std::array<int, 1>{I.a})) unary(R, I, n, f, direct(I), streams(I), feed);
  };
  auto bin = [&](const PInstr& I, auto f) {
    if (!to16(I, f, std::array<int, 2>{I.a, I.b})) binary(R, I, n, f, direct(I), streams(I), feed);
  };
  auto ter = [&](const PInstr& I, auto f) {
    if (!to16(I, f, std::array<int, 3>{I.a, I.b, I.c})) ternary(R, I, n, f, direct(I), streams(I));
  };
  for (const PInstr& I : code) {
    switch (I.op) {
      case P::Load: load(R, I.dst, c.in[I.a].dtype, B.in[I.a], B.in_stride[I.a], n); break;
      case P::Cols: R.set_splat(I.dst, B.cols); break;
      case P::Const: R.set_splat(I.dst, I.imm); break;
      case P::RSum:
      case P::RMax:
      case P::RMin:
      case P::RSumSq:
      case P::RSumExp: reduce(R, I, n, feed); break;
      case P::Store: store(R, I.b, c.out[I.a].dtype, B.out[I.a], B.out_stride[I.a], n, c.stream[I.a]); break;
      case P::StoreRow:
        if (B.first_in_row) store(R, I.b, c.out[I.a].dtype, B.row_out[I.a], 0, 1);
        break;
      default: eval_op(I, un, bin, ter); break;
    }
  }
}

// Element offsets of every operand along the outer dims (all but the inner one), stepped
// one outer index at a time: divisions only where a task starts.
struct OuterCursor {
  const FusedCall& c;
  std::array<int64_t, kMaxDims> idx{};
  SmallVec<int64_t> in_off, out_off;
  OuterCursor(const FusedCall& call, int64_t o) : c(call), in_off(call.in.size(), 0), out_off(call.out.size(), 0) {
    for (int d = c.ndim - 2; d >= 0; --d) {
      idx[d] = o % c.sizes[d];
      o /= c.sizes[d];
      for (size_t k = 0; k < c.in.size(); ++k) in_off[k] += idx[d] * c.in[k].strides[d];
      for (size_t k = 0; k < c.out.size(); ++k) out_off[k] += idx[d] * c.out[k].strides[d];
    }
  }
  void next() {
    for (int d = c.ndim - 2; d >= 0; --d) {
      const int64_t step = ++idx[d] < c.sizes[d] ? 1 : 1 - c.sizes[d];
      for (size_t k = 0; k < c.in.size(); ++k) in_off[k] += step * c.in[k].strides[d];
      for (size_t k = 0; k < c.out.size(); ++k) out_off[k] += step * c.out[k].strides[d];
      if (step == 1) return;
      idx[d] = 0;
    }
  }
};

// Few blocks split unevenly across threads: at::parallel_for gives each thread a run of whole
// blocks, so 8193 elements (9 blocks) ran 5120 on one thread and 3073 on the other, and took
// longer than 8192 did. Where a split runs few blocks a thread, the rows are cut into blocks,
// shorter than kBlock and a multiple of 32 elements (64-byte aligned stores stay aligned), whose
// count the threads divide.
inline void balance_blocks(int64_t outer, int64_t inner, int64_t grain, int64_t& nb, int64_t& blk) {
  const int64_t threads = at::get_num_threads();
  if (threads < 2 || outer * inner <= grain || outer * nb >= 8 * threads) return;
  int64_t want = nb;
  while ((outer * want) % threads != 0) ++want;
  const int64_t b = (inner + want - 1) / want;
  blk = std::min(kBlock, (b + 31) / 32 * 32);
  nb = (inner + blk - 1) / blk;
}

inline void run_pointwise(const FusedCall& c) {
  const Program& p = *c.prog;
  const int64_t n_long = long_instructions(p.phases[0]);
  constexpr int64_t kAhead = 2;  // blocks
  const int64_t inner = c.sizes[c.ndim - 1];
  int64_t outer = 1;
  for (int d = 0; d + 1 < c.ndim; ++d) outer *= c.sizes[d];
  int64_t nb = (inner + kBlock - 1) / kBlock;  // blocks per row
  int64_t blk = std::min(inner, kBlock);       // elements per block
  const int64_t grain = n_long > 0 ? pointwise_grain_long(c) : kGrain;
  balance_blocks(outer, inner, grain, nb, blk);
  at::parallel_for(0, outer * nb, std::max<int64_t>(1, grain / std::max<int64_t>(blk, 1)), [&](int64_t b0, int64_t b1) {
    Regs& R = thread_scratch<Regs>();
    R.reset(p.num_regs);
    Block B = Block::for_call(c, false);
    OuterCursor cur(c, b0 / nb);
    // The block's index within its row, stepped: a 64-bit division per block (it % nb) was the
    // block loop's hottest instruction in 128-element blocks.
    int64_t in_row = b0 % nb;
    for (int64_t it = b0; it < b1; ++it, ++in_row) {
      if (in_row == nb) in_row = 0;
      const int64_t i0 = in_row * blk;
      if (it != b0 && i0 == 0) cur.next();
      const auto& in_off = cur.in_off;
      const auto& out_off = cur.out_off;
      B.n = std::min(blk, inner - i0);
      for (size_t k = 0; k < c.in.size(); ++k)
        B.in[k] = static_cast<const char*>(c.in[k].data) +
                  (in_off[k] + i0 * B.in_stride[k]) * static_cast<int64_t>(c10::elementSize(c.in[k].dtype));
      for (size_t k = 0; k < c.out.size(); ++k)
        B.out[k] = static_cast<char*>(c.out[k].data) +
                   (out_off[k] + i0 * B.out_stride[k]) * static_cast<int64_t>(c10::elementSize(c.out[k].dtype));
      // While a transcendental computes this block, the inputs of the block two ahead are
      // fetched, paced by its vector steps (NextRows): the hardware's stream prefetch alone
      // left a tanh chain over 64 MiB 25-30% slower than paced (1 to 8 blocks ahead: alike).
      NextRows& nx = B.next;
      nx.clear();
      if (n_long > 0 && it + kAhead < b1 && in_row + kAhead < nb) {  // within this task and row
        const int64_t n_ahead = std::min(blk, inner - i0 - kAhead * blk);  // a row's last block may be short
        for (size_t k = 0; k < c.in.size(); ++k) {
          if (B.in_stride[k] != 1) continue;  // strided or a scalar
          const int64_t es = static_cast<int64_t>(c10::elementSize(c.in[k].dtype));
          nx.add(B.in[k] + kAhead * blk * es, n_ahead * es);
        }
        nx.start(n_long * (blk / V));
      }
      run_block(p.phases[0], c, R, B);
    }
    end_streams();
    if (R.to_bf16) count_bf16_direct(std::exchange(R.to_bf16, 0));
  });
}

// While a row's transcendental ops compute from cache (it fits L2 up to ~100k fp32 values), the
// next row's inputs are fetched (NextRows): a vocabulary's softmax otherwise waits on DRAM in
// its first pass and computes in its others.
inline void feed_next_row(const FusedCall& c, const OuterCursor& cur, int64_t cols, int64_t n_long, NextRows& nx) {
  nx.clear();
  OuterCursor nxt = cur;
  nxt.next();
  for (size_t k = 0; k < c.in.size(); ++k) {
    if (c.in[k].strides[c.ndim - 1] != 1 || nxt.in_off[k] == cur.in_off[k]) continue;  // strided, or the same row
    const int64_t es = static_cast<int64_t>(c10::elementSize(c.in[k].dtype));
    nx.add(static_cast<const char*>(c.in[k].data) + nxt.in_off[k] * es, cols * es);
  }
  nx.start(n_long * (cols / V));
}

inline void run_rows(const FusedCall& c) {
  const Program& p = *c.prog;
  const int64_t cols = c.sizes[c.ndim - 1];
  int64_t n_long = 0;
  for (const auto& code : p.phases) n_long += long_instructions(code);
  int64_t rows = 1;
  for (int d = 0; d + 1 < c.ndim; ++d) rows *= c.sizes[d];
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(cols, 1)), [&](int64_t r0, int64_t r1) {
    Regs& R = thread_scratch<Regs>();
    R.reset(p.num_regs);
    Block B = Block::for_call(c, true);
    B.cols = static_cast<float>(cols);
    SmallVec<int> ready;  // registers holding this row's reduction results
    OuterCursor cur(c, r0);
    for (int64_t r = r0; r < r1; ++r) {
      if (r != r0) cur.next();
      const auto& in_off = cur.in_off;
      const auto& out_off = cur.out_off;
      if (n_long > 0 && r + 1 < r1) feed_next_row(c, cur, cols, n_long, B.next);
      for (size_t k = 0; k < c.out.size(); ++k)
        B.row_out[k] = static_cast<char*>(c.out[k].data) + out_off[k] * static_cast<int64_t>(c10::elementSize(c.out[k].dtype));
      ready.clear();
      for (const auto& code : p.phases) {
        for (const PInstr& I : code)
          if (pop_is_reduction(I.op)) start_reduction(R, I);
        for (int64_t c0 = 0; c0 < std::max<int64_t>(cols, 1); c0 += kBlock) {
          B.n = std::min(kBlock, cols - c0);
          if (B.n <= 0) break;
          B.first_in_row = c0 == 0;
          for (size_t k = 0; k < c.in.size(); ++k)
            B.in[k] = static_cast<const char*>(c.in[k].data) +
                      (in_off[k] + c0 * B.in_stride[k]) * static_cast<int64_t>(c10::elementSize(c.in[k].dtype));
          for (size_t k = 0; k < c.out.size(); ++k)
            B.out[k] = B.row_out[k] + c0 * B.out_stride[k] * static_cast<int64_t>(c10::elementSize(c.out[k].dtype));
          for (int reg : ready) R.set_splat(reg, R.row[reg]);
          run_block(code, c, R, B);
        }
        for (const PInstr& I : code)
          if (pop_is_reduction(I.op)) {
            R.row[I.dst] = finish_reduction(R, I);
            ready.push_back(I.dst);
          }
      }
    }
    end_streams();
    if (R.to_bf16) count_bf16_direct(std::exchange(R.to_bf16, 0));
  });
}

}  // namespace CPU_CAPABILITY
}  // namespace fxcpp::cpu
