#include "passes/fusion/program_builder.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <stdexcept>
#include <unordered_map>

namespace fxcpp::fusion {

static bool is_reduction(POp op) { return pop_is_reduction(op); }

int ProgramBuilder::add(Expr e) {
  auto key = std::make_tuple(static_cast<int>(e.op), e.a, e.b, e.c, e.imm);
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  exprs_.push_back(e);
  const int id = static_cast<int>(exprs_.size()) - 1;
  memo_.emplace(key, id);
  return id;
}

int ProgramBuilder::load(int input) {
  Expr e{POp::Load};
  e.a = input;
  return add(e);
}

int ProgramBuilder::konst(float v) {
  Expr e{POp::Const};
  e.imm = v;
  e.row = true;
  return add(e);
}

int ProgramBuilder::cols() {
  Expr e{POp::Cols};
  e.row = true;
  return add(e);
}

int ProgramBuilder::op(POp op, int a, int b, int c, float imm) {
  if (pop_arity(op) < 1 || op >= POp::RSum) throw std::invalid_argument(std::string("not an op: ") + pop_name(op));
  Expr e{op, a, b, c, imm};
  e.row = true;
  for (int x : {a, b, c})
    if (x >= 0) {
      e.level = std::max(e.level, exprs_.at(x).level);
      e.row = e.row && exprs_.at(x).row;
    }
  return add(e);
}

int ProgramBuilder::reduce(POp op, int a) {
  if (!is_reduction(op)) throw std::invalid_argument(std::string("not a reduction: ") + pop_name(op));
  Expr e{op, a};
  e.level = exprs_.at(a).level + 1;
  e.row = true;
  return add(e);
}

void ProgramBuilder::output(int index, int e, c10::ScalarType dtype, bool row) { outputs_.push_back({index, e, dtype, row}); }

namespace {

using Expr = ProgramBuilder::Expr;
using Out = ProgramBuilder::Out;

// Readers of each expression among those the outputs still reach.
std::vector<int> count_uses(const std::vector<Expr>& ex, const std::vector<Out>& outputs) {
  std::vector<int> uses(ex.size(), 0);
  std::vector<bool> live(ex.size(), false);
  std::vector<int> stack;
  for (const Out& o : outputs) stack.push_back(o.expr);
  while (!stack.empty()) {
    const int e = stack.back();
    stack.pop_back();
    if (live[e]) continue;
    live[e] = true;
    if (ex[e].op == POp::Load) continue;
    for (int o : {ex[e].a, ex[e].b, ex[e].c})
      if (o >= 0) stack.push_back(o);
  }
  for (size_t e = 0; e < ex.size(); ++e)
    if (live[e] && ex[e].op != POp::Load)
      for (int o : {ex[e].a, ex[e].b, ex[e].c})
        if (o >= 0) ++uses[o];
  for (const Out& o : outputs) ++uses[o.expr];
  return uses;
}

// outer(inner(a, b), c), either operand order, with the inner value read only there:
// fused(a, b, c). Every fold is of a commutative outer op, so the value is the same either
// way; imm = 1 records that c came first, for the layout eager gives the result
// (eager_output_strides replays outer(c, inner) from its operands in that order).
void fold_inner(std::vector<Expr>& ex, const std::vector<Out>& outputs, POp outer, POp inner, POp fused) {
  const std::vector<int> uses = count_uses(ex, outputs);
  for (Expr& x : ex) {
    if (x.op != outer) continue;
    for (auto [p, q] : {std::pair<int, int>{x.a, x.b}, std::pair<int, int>{x.b, x.a}}) {
      if (ex[p].op != inner || uses[p] != 1) continue;
      x = Expr{fused, ex[p].a, ex[p].b, q, p == x.b ? 1.f : 0.f, x.level, x.row};
      break;
    }
  }
}

// Each expression's level again (reductions on its deepest path), after edits in place left
// operands at higher indices than their readers.
void recompute_levels(std::vector<Expr>& ex) {
  std::vector<int> done(ex.size(), -1);
  std::function<int(int)> level = [&](int e) {
    if (done[e] >= 0) return done[e];
    Expr& x = ex[e];
    int l = 0;
    if (x.op != POp::Load)
      for (int o : {x.a, x.b, x.c})
        if (o >= 0) l = std::max(l, level(o));
    x.level = l + (is_reduction(x.op) ? 1 : 0);
    return done[e] = x.level;
  };
  for (size_t e = 0; e < ex.size(); ++e) level(static_cast<int>(e));
}

// The loads of a row's first element (Program::row_first), for a phased program run by columns.
struct RowFirst {
  const std::vector<int>& input_pad;  // Program::input_pad: one per node arg
  std::vector<int> args;              // Program::row_first
  // The load index of node arg a at its row's first element (after the node args); -1 for an
  // arg with a pad (per-row already).
  int of(int a) {
    if (input_pad.at(a) > 0) return -1;
    auto it = std::find(args.begin(), args.end(), a);
    if (it == args.end()) it = args.insert(args.end(), a);
    return static_cast<int>(input_pad.size() + (it - args.begin()));
  }
};

// A row mean m = sum(v) / n that is subtracted from its own v (a variance, a layer_norm, a
// standardization written out) is made accurate to the spread of v rather than to its size:
// a row of equal values then has exactly its value as mean and a variance of exactly 0, as
// eager's Welford kernels give; uncorrected, the mean's rounding (a few ulps) came out as a
// nonzero std, and (v - mean) / (std + 1e-5) as values up to 0.1 where eager gives 0 (fuzzer
// seed 7110 of grammar 2). Two ways, by what the group does with the centered values:
//  - it sums their squares (a variance): the mean is corrected by the centered values' sum
//    c = sum(v - m), accumulated in the squares' pass: every reader of the mean reads m + c / n,
//    and each sum of squares of v - m becomes sum((v - m)^2) - c * c / n (not below 0). The
//    corrected two-pass algorithm (Chan, Golub & LeVeque, 1983), in no more passes.
//  - it does not (x - x.mean(0)), and the group runs by columns (`first` given: the phased
//    program of a permuted group, each phase a pass over the tensor): c would cost a pass of
//    its own, three where eager makes two. The mean is shifted instead: s = v at the row's
//    first element (a per-row load, `RowFirst`, computed once per block of columns), then
//    m = s + sum(v - s) / n, summed in the mean's own pass. Where that is not finite (s is inf,
//    v - s overflows where v does not, or the row holds inf) the plain sum(v) / n from the same
//    pass is the mean, as eager's. x - x.mean(0) on [65536, 768] (200 MB, from DRAM): 0.76-0.81x
//    the time in fp32, 0.99-1.01x in bf16 (compute-bound there); on [8192, 768], which the
//    Intel host's cache holds, 1.03-1.10x and 1.01-1.05x: the same instructions, in one pass
//    fewer (benchmarks/results/outer-reductions/ab_shifted.txt). Rows keep the
//    corrected mean: packed rows' extra pass is over L1 (shifted: 1.12x the time on
//    [65536, 768] fp32), and long rows' over L2, where the shift's per-block scalar work cost
//    more than the pass it saved ([1024, 65536] fp32: 1.04-1.15x).
void correct_centered_means(std::vector<Expr>& ex, RowFirst* first) {
  const size_t n0 = ex.size();
  auto push = [&](Expr e) {
    ex.push_back(e);
    return static_cast<int>(ex.size()) - 1;
  };
  auto row_op = [](POp op, int a, int b, int c = -1) { return Expr{op, a, b, c, 0.f, 0, true}; };
  auto is_mean_of = [&](int m, int v) {
    return ex[m].op == POp::Div && ex[ex[m].a].op == POp::RSum && ex[ex[m].a].a == v && ex[ex[m].b].op == POp::Cols;
  };
  // A mean the group also stores in bf16/fp16 is read rounded by its other members (cpu_fusion's
  // stored values), except by its own values minus it. Those values are fp32 inside the group:
  // minus the rounded mean, a row of equal values centers to the mean's rounding error instead
  // of 0 (in eager, values and mean are there the same bf16 numbers), and standardized it came
  // out -132 where eager gives 0. Values already as stored (a load, or rounded on a path into a
  // comparison: cpu_fusion's feeds_step) are eager's own, and so is their rounded mean.
  auto as_stored = [&](int v) { return ex[v].op == POp::Load || ex[v].op == POp::RoundBf16 || ex[v].op == POp::RoundHalf; };
  for (size_t d = 0; d < n0; ++d) {
    Expr& x = ex[d];
    if (x.op == POp::Sub && (ex[x.b].op == POp::RoundBf16 || ex[x.b].op == POp::RoundHalf) && is_mean_of(ex[x.b].a, x.a) &&
        !as_stored(x.a))
      x.b = ex[x.b].a;
  }
  int zero = -1, inf = -1;  // shared constants
  auto constant = [&](int& id, float v) {
    if (id < 0) {
      Expr k{POp::Const};
      k.imm = v;
      k.row = true;
      id = push(k);
    }
    return id;
  };
  // |a| < inf: 1 where a is finite (NaN is not).
  auto finite = [&](int a) {
    return push(row_op(POp::Lt, push(Expr{POp::Abs, a, -1, -1, 0.f, 0, true}), constant(inf, std::numeric_limits<float>::infinity())));
  };
  // v at its row's first element: v's per-element expressions again, over first-element loads.
  std::unordered_map<int, int> at_first;
  std::function<int(int)> first_of = [&](int e) -> int {
    if (ex[e].row) return e;  // constants, reductions and what is built from them
    if (auto it = at_first.find(e); it != at_first.end()) return it->second;
    Expr y = ex[e];
    if (y.op == POp::Load) {
      const int k = first->of(y.a);
      if (k < 0) return e;  // a per-row input already
      y.a = k;
    } else {
      for (int* o : {&y.a, &y.b, &y.c})
        if (*o >= 0) *o = first_of(*o);
    }
    y.row = true;
    const int id = push(y);
    at_first.emplace(e, id);
    return id;
  };
  bool changed = false;
  for (size_t mi = 0; mi < n0; ++mi) {
    const int m = static_cast<int>(mi);
    const Expr mean = ex[m];
    if (mean.op != POp::Div || !is_mean_of(m, ex[mean.a].a)) continue;
    const int v = ex[mean.a].a;
    auto centered = [&](int d) { return d >= 0 && ex[d].op == POp::Sub && ex[d].a == v && ex[d].b == m; };
    auto squares_centered = [&](size_t x) {
      if (ex[x].op != POp::RSum || ex[ex[x].a].op != POp::Mul) return false;
      const Expr sq = ex[ex[x].a];
      return sq.a == sq.b && centered(sq.a);
    };
    bool any = false, squares = false;
    for (size_t d = 0; d < n0; ++d) {
      any = any || centered(static_cast<int>(d));
      squares = squares || squares_centered(d);
    }
    if (!any) continue;
    changed = true;
    const int m_old = push(mean);
    if (!squares && first) {  // shifted by the row's first value
      const int s0 = first_of(v);
      const int s = push(row_op(POp::Where, finite(s0), s0, constant(zero, 0.f)));
      const int t = push(Expr{POp::RSum, push(Expr{POp::Sub, v, s, -1, 0.f, 0, ex[v].row}), -1, -1, 0.f, 0, true});
      const int shifted = push(row_op(POp::Add, s, push(row_op(POp::Div, t, mean.b))));
      ex[m] = row_op(POp::Where, finite(shifted), shifted, m_old);
      continue;
    }
    const int d_old = push(Expr{POp::Sub, v, m_old, -1, 0.f, 0, ex[v].row});
    const int c = push(Expr{POp::RSum, d_old, -1, -1, 0.f, 0, true});
    const int cn = push(row_op(POp::Div, c, mean.b));
    // Sums of squares of the centered values, from the uncorrected ones (the same pass as c).
    for (size_t x = 0; x < n0; ++x) {
      if (!squares_centered(x)) continue;
      const int s = push(Expr{POp::RSum, push(Expr{POp::Mul, d_old, d_old, -1, 0.f, 0, ex[v].row}), -1, -1, 0.f, 0, true});
      ex[x] = row_op(POp::Max, push(row_op(POp::Sub, s, push(row_op(POp::Mul, c, cn)))), constant(zero, 0.f));  // NaN stays NaN
    }
    // The centered values v - m now read the corrected mean, where the mean is finite. A row
    // holding inf has an infinite (or NaN) mean and c = sum(v - m) is NaN: eager's mean stays
    // inf there, so that v - m is -inf beside a finite v (was NaN).
    ex[m] = row_op(POp::Add, m_old, push(row_op(POp::Where, finite(m_old), cn, constant(zero, 0.f))));
  }
  if (changed) recompute_levels(ex);
}

// Superinstructions: each does in one pass over the block what took two or three, with the
// same arithmetic (MulAdd: one rounding instead of two, never less accurate).
//   sum((a - b)^2), sum(a^2): no square is written just to be summed;
//   sum(exp(a - b)): likewise, unless `keep_exp` and the exponentials are read again (a
//     single-list program keeps them: exp is worth computing once);
//   exp(a - b), (a - b) * c, a * b + c, (a * b) * c: where the inner value has no other reader.
std::vector<Expr> rewrite(std::vector<Expr> ex, const std::vector<Out>& outputs, bool keep_exp, RowFirst* first) {
  correct_centered_means(ex, first);
  std::vector<int> uses = count_uses(ex, outputs);
  Expr zero{POp::Const};  // appended first: nothing below may grow `ex` while it is walked
  zero.row = true;
  ex.push_back(zero);
  const int zero_id = static_cast<int>(ex.size()) - 1;
  uses.push_back(0);
  for (size_t i = 0; i < ex.size(); ++i) {
    Expr& x = ex[i];
    if (x.op != POp::RSum) continue;
    const Expr y = ex[x.a];
    if (y.op == POp::Mul && y.a == y.b) {
      const Expr z = ex[y.a];
      x = z.op == POp::Sub ? Expr{POp::RSumSq, z.a, z.b, -1, 0.f, x.level, true}
                           : Expr{POp::RSumSq, y.a, zero_id, -1, 0.f, x.level, true};
    } else if (y.op == POp::Exp && ex[y.a].op == POp::Sub && !(keep_exp && uses[x.a] > 1)) {
      x = Expr{POp::RSumExp, ex[y.a].a, ex[y.a].b, -1, 0.f, x.level, true};
    }
  }
  uses = count_uses(ex, outputs);
  for (Expr& x : ex)
    if (x.op == POp::Exp && ex[x.a].op == POp::Sub && uses[x.a] == 1)
      x = Expr{POp::ExpSub, ex[x.a].a, ex[x.a].b, -1, 0.f, x.level, x.row};
  fold_inner(ex, outputs, POp::Mul, POp::Sub, POp::SubMul);
  fold_inner(ex, outputs, POp::Add, POp::Mul, POp::MulAdd);
  // Last, so that a product summed keeps its MulAdd.
  fold_inner(ex, outputs, POp::Mul, POp::Mul, POp::MulMul);
  return ex;
}

// Instruction lists with virtual registers, then physical ones.
class Codegen {
 public:
  Codegen(const std::vector<Expr>& ex, const std::vector<Out>& outputs, int reserved)
      : ex_(ex), outputs_(outputs), next_(reserved), reserved_(reserved) {}

  // Phase `phase` of a phased program (reductions accumulate in the phase before they are
  // read; `row_reg` maps each to its reserved register), or, with phase = -1, the whole
  // program as one list (reductions complete where they stand).
  std::vector<PInstr> emit_phase(int phase, const std::map<int, int>& row_reg, int last) {
    code_.clear();
    vreg_.clear();
    std::vector<PInstr> stores;
    if (phase >= 0) {
      for (const auto& [e, reg] : row_reg) {
        if (ex_[e].level - 1 != phase) continue;
        PInstr ins;
        ins.op = ex_[e].op;
        ins.a = static_cast<int16_t>(emit(ex_[e].a, phase, row_reg));
        if (ex_[e].b >= 0) ins.b = static_cast<int16_t>(emit(ex_[e].b, phase, row_reg));
        ins.dst = static_cast<int16_t>(reg);
        code_.push_back(ins);
      }
    }
    for (const Out& o : outputs_)
      if (phase < 0 || ex_[o.expr].level == phase || (phase == last && ex_[o.expr].level > last)) {
        PInstr st;
        st.op = o.row ? POp::StoreRow : POp::Store;
        st.a = static_cast<int16_t>(o.index);
        st.b = static_cast<int16_t>(emit(o.expr, phase, row_reg));
        stores.push_back(st);
      }
    mark_direct_writes(stores);
    code_.insert(code_.end(), stores.begin(), stores.end());
    allocate();
    return code_;
  }
  int registers() const { return top_; }

 private:
  int emit(int e, int phase, const std::map<int, int>& row_reg) {
    const Expr& x = ex_[e];
    if (phase >= 0 && pop_is_reduction(x.op)) {
      if (x.level > phase) throw std::logic_error("fxcpp: a reduction is read before its phase");
      return row_reg.at(e);
    }
    auto it = vreg_.find(e);
    if (it != vreg_.end()) return it->second;
    PInstr ins;
    ins.op = x.op;
    ins.imm = x.imm;
    if (x.op == POp::Load) {
      ins.a = static_cast<int16_t>(x.a);
    } else if (x.op == POp::MulAdd && ex_[x.a].op == POp::SubMul && leaf(x.b) && leaf(x.c)) {
      // A LayerNorm's affine tail: its weight and bias are loaded before the normalization, so
      // that the submul and the muladd stand side by side and run as one pass (interp_rows.h,
      // fused_affine_tail). Same operands, same ops.
      ins.b = static_cast<int16_t>(emit(x.b, phase, row_reg));
      ins.c = static_cast<int16_t>(emit(x.c, phase, row_reg));
      ins.a = static_cast<int16_t>(emit(x.a, phase, row_reg));
    } else {
      if (x.a >= 0) ins.a = static_cast<int16_t>(emit(x.a, phase, row_reg));
      if (x.b >= 0) ins.b = static_cast<int16_t>(emit(x.b, phase, row_reg));
      if (x.c >= 0) ins.c = static_cast<int16_t>(emit(x.c, phase, row_reg));
    }
    ins.dst = static_cast<int16_t>(next_++);
    code_.push_back(ins);
    vreg_.emplace(e, ins.dst);
    return ins.dst;
  }

  bool leaf(int e) const { return ex_[e].op == POp::Load || ex_[e].op == POp::Const; }

  static std::vector<int> reads(const PInstr& i) {
    std::vector<int> r;
    if (i.op == POp::Store || i.op == POp::StoreRow) r.push_back(i.b);
    else if (i.op != POp::Load && i.op != POp::Const && i.op != POp::Cols)
      for (int x : {static_cast<int>(i.a), static_cast<int>(i.b), static_cast<int>(i.c)})
        if (x >= 0) r.push_back(x);
    return r;
  }

  // A value only a store reads is written straight into that output (where its layout allows).
  void mark_direct_writes(const std::vector<PInstr>& stores) {
    std::unordered_map<int, int> n;
    for (const PInstr& i : code_)
      for (int x : reads(i)) ++n[x];
    for (const PInstr& st : stores) ++n[st.b];
    for (const PInstr& st : stores) {
      if (st.op != POp::Store || n[st.b] != 1) continue;
      for (PInstr& i : code_)
        if (i.dst == st.b && pop_arity(i.op) >= 1 && !pop_is_reduction(i.op) && i.op != POp::Load) i.out = st.a;
    }
  }

  // Linear scan: a temporary's register is free after its last reader (its writer may be that
  // reader: ops write element i after reading it). Reserved registers (a phased program's
  // reductions) are never reused.
  void allocate() {
    std::unordered_map<int, size_t> last_use;
    for (size_t k = 0; k < code_.size(); ++k)
      for (int r : reads(code_[k])) last_use[r] = k;
    std::unordered_map<int, int> phys;
    std::vector<int> free_regs;
    int top = reserved_;
    auto map_reg = [&](int v) { return v < reserved_ ? v : phys.at(v); };
    for (size_t k = 0; k < code_.size(); ++k) {
      PInstr& ins = code_[k];
      const std::vector<int> rs = reads(ins);
      const bool writes = ins.op != POp::Store && ins.op != POp::StoreRow && !(pop_is_reduction(ins.op) && ins.dst < reserved_);
      if (ins.op == POp::Store || ins.op == POp::StoreRow) {
        ins.b = static_cast<int16_t>(map_reg(ins.b));
      } else if (ins.op != POp::Load && ins.op != POp::Const && ins.op != POp::Cols) {
        if (ins.a >= 0) ins.a = static_cast<int16_t>(map_reg(ins.a));
        if (ins.b >= 0) ins.b = static_cast<int16_t>(map_reg(ins.b));
        if (ins.c >= 0) ins.c = static_cast<int16_t>(map_reg(ins.c));
      }
      for (size_t i = 0; i < rs.size(); ++i) {  // once per register, though read twice (x * x)
        const int r = rs[i];
        if (std::find(rs.begin(), rs.begin() + i, r) != rs.begin() + i) continue;
        if (r >= reserved_ && last_use.at(r) == k) free_regs.push_back(phys.at(r));
      }
      if (!writes) continue;
      int reg;
      if (!free_regs.empty()) {
        auto lowest = std::min_element(free_regs.begin(), free_regs.end());
        reg = *lowest;
        free_regs.erase(lowest);
      } else {
        reg = top++;
      }
      const int virt = ins.dst;
      phys[virt] = reg;
      ins.dst = static_cast<int16_t>(reg);
      if (!last_use.count(virt)) free_regs.push_back(reg);
    }
    top_ = std::max(top_, top);
  }

  const std::vector<Expr>& ex_;
  const std::vector<Out>& outputs_;
  std::vector<PInstr> code_;
  std::unordered_map<int, int> vreg_;
  int next_, reserved_, top_ = 0;
};

}  // namespace

Program ProgramBuilder::build(int row_dims, std::vector<c10::ScalarType> inputs, std::vector<int> input_pad,
                              bool shift_centered_means) const {
  Program p;
  p.row_dims = row_dims;
  p.inputs = std::move(inputs);
  p.input_pad = std::move(input_pad);
  p.input_pad.resize(p.inputs.size(), 0);
  RowFirst first{p.input_pad, {}};
  int nout = 0;
  for (const Out& o : outputs_) nout = std::max(nout, o.index + 1);
  p.outputs.resize(nout);
  for (const Out& o : outputs_) p.outputs[o.index] = ProgOutput{o.dtype, o.row};

  // Phased: for rows longer than a block. Every reduction keeps its own register throughout.
  const std::vector<Expr> ex = rewrite(exprs_, outputs_, /*keep_exp=*/false, shift_centered_means ? &first : nullptr);
  int last = 0;
  for (const Out& o : outputs_) last = std::max(last, ex[o.expr].level);
  std::map<int, int> row_reg;  // ordered: the same program every build
  {
    std::vector<bool> needed(ex.size(), false);
    std::vector<int> stack;
    for (const Out& o : outputs_) stack.push_back(o.expr);
    while (!stack.empty()) {
      const int e = stack.back();
      stack.pop_back();
      if (needed[e]) continue;
      needed[e] = true;
      if (ex[e].op == POp::Load) continue;
      for (int o : {ex[e].a, ex[e].b, ex[e].c})
        if (o >= 0) stack.push_back(o);
    }
    for (size_t e = 0; e < ex.size(); ++e)
      if (needed[e] && pop_is_reduction(ex[e].op)) row_reg.emplace(static_cast<int>(e), static_cast<int>(row_reg.size()));
  }
  Codegen phased(ex, outputs_, static_cast<int>(row_reg.size()));
  for (int phase = 0; phase <= last; ++phase) p.phases.push_back(phased.emit_phase(phase, row_reg, last));
  p.num_regs = std::max(phased.registers(), static_cast<int>(row_reg.size()));

  // One list: for rows that fit a block (all phases would run back to back on the same block,
  // so nothing needs recomputing) and for pointwise programs (a single phase anyway).
  if (row_dims > 0) {
    const std::vector<Expr> ex1 = rewrite(exprs_, outputs_, /*keep_exp=*/true, /*first=*/nullptr);
    Codegen single(ex1, outputs_, 0);
    p.single = single.emit_phase(-1, {}, last);
    p.num_regs = std::max(p.num_regs, single.registers());
  }
  p.row_first = first.args;
  return p;
}

}  // namespace fxcpp::fusion
