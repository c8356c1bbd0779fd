// One call of a cpu_fused node, as the ISA-specific interpreter sees it: the program, the
// iteration domain after coalescing, and every operand as a base pointer with one element
// stride per domain dim (0 where it broadcasts). Built by fused_kernel.cpp; run by
// interp.h, compiled once per instruction set and chosen at run time (select_interpreter).
#pragma once
#include <c10/core/ScalarType.h>
#include <c10/util/SmallVector.h>

#include <array>
#include <cstdint>
#include <vector>

#include "ir/program.h"

namespace fxcpp::cpu {

constexpr int kMaxDims = 8;

// Per-call operand lists live on the stack up to 8 entries: a small graph's call is then
// free of heap allocations here (each malloc/free pair costs ~50 ns of a ~2 us call).
template <class T>
using SmallVec = c10::SmallVector<T, 8>;

struct Operand {
  void* data = nullptr;  // inputs are only read
  c10::ScalarType dtype = c10::kFloat;
  std::array<int64_t, kMaxDims> strides{};  // elements, per domain dim
};

struct FusedCall {
  const Program* prog = nullptr;
  int ndim = 1;  // domain dims; the last one is the inner dim (a row when rows)
  std::array<int64_t, kMaxDims> sizes{};
  bool rows = false;  // a row program: the inner dim is the row its reductions run over
  SmallVec<Operand> in, out;  // out[k] of a row output: strides over the outer dims only
  // Per output: it shares an input's buffer, so it is stored only after the block's last read
  // (never written directly by the instruction computing it).
  SmallVec<uint8_t> in_place;
  // Per output: written with streaming stores (no read for ownership, nothing evicted for data
  // no one reads soon): the call moves more than half the last-level cache (fused_kernel.cpp).
  SmallVec<uint8_t> stream;
  // The call moves more than the last-level cache: its inputs come from DRAM, and packed row
  // blocks whose ops are cheap prefetch the next block's rows as they go (interp_rows.h, pace_row).
  bool from_dram = false;
  // prog->single's centered-sum pairs (interp_rows.h's centered_sums), or null: none.
  const int* single_partners = nullptr;
};

// For each instruction of a row program, the index of the instruction it pairs with in a
// variance's centered sums (`sub x a b; rsum c x` and `rsumsq s a b`, either order), else -1.
// A property of the program alone: found once per kernel.
std::vector<int> centered_sum_partners(const std::vector<PInstr>& code);

using Interpreter = void (*)(const FusedCall&);
// Outputs written into a dying input's buffer, process-wide (tests).
int64_t in_place_outputs();
int64_t streamed_outputs();  // outputs written with streaming stores, counted per call
// Row reductions computed in the pass of the op before them (interp_rows.h), for tests.
void count_fused_reductions(int64_t n);
int64_t fused_reductions();
// LayerNorm affine tails run as one pass (interp_rows.h, fused_affine_tail), for tests.
void count_fused_tails(int64_t n);
int64_t fused_tails();
// Packed row blocks that prefetched the next block a row at a time (interp_rows.h, pace_row), for tests.
void count_row_paced(int64_t n);
int64_t row_paced_blocks();
// Calls run as packed rows with more than one outer dim (interp_rows.h, run_rows_packed), for tests.
void count_packed_plane_call();
int64_t packed_plane_calls();
// Pointwise calls run as a plan resolved once per call (interp_plan.h), for tests.
void count_planned_call();
int64_t planned_calls();
// Whether calls from DRAM pace the next block per row (default on); off only to measure the
// change in one process (benchmarks/results/row-prefetch-dram/). Returns the previous setting.
bool set_row_prefetch(bool on);
bool row_prefetch();
// Whether cheap pointwise calls run as a plan (interp_plan.h; default on); off only to measure
// the change in one process (benchmarks/results/planned-pointwise/). Returns the previous setting.
bool set_planned(bool on);
bool planned();
// Blocks whose result was rounded straight into a bf16 output (interp.h's put_bf16), for tests.
void count_bf16_direct(int64_t n);
int64_t bf16_direct();
// Calls run by columns (interp_columns.h: rows side by side in memory), for tests.
void count_column_call();
int64_t column_calls();
// The interpreter for the instruction set torch itself uses on this host
// (at::get_cpu_capability(): AVX512, AVX2 or DEFAULT; ATEN_CPU_CAPABILITY can lower it).
Interpreter select_interpreter();

}  // namespace fxcpp::cpu
