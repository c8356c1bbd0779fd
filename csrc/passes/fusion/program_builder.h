// Builds a Program (ir/program.h) from an expression DAG: the same expression added twice is
// one node (hash-consed), reductions split the DAG into phases (a value needed in two phases
// is re-emitted in each, from its loads), stores come last in their phase (so an output may
// share memory with an input of the same element), and registers are reused once their
// value's last reader has run (linear scan, numexpr's temp reuse).
#pragma once
#include <map>
#include <tuple>
#include <vector>

#include "ir/program.h"

namespace fxcpp::fusion {

class ProgramBuilder {
 public:
  int load(int input);
  int konst(float v);
  int cols();
  int op(POp op, int a, int b = -1, int c = -1, float imm = 0.f);
  int reduce(POp op, int a);  // RSum, RMax or RMin over the row: a per-row value
  // Per-row (computed from constants and reductions only): a splat in every block.
  bool is_row(int e) const { return exprs_.at(e).row; }
  // Output `index` of the node is expression e (full-size, or one value per row).
  void output(int index, int e, c10::ScalarType dtype, bool row);
  // inputs: each node arg's dtype; input_pad: its trailing 1-dims (Program::input_pad; empty: none).
  // shift_centered_means: a mean subtracted from its own values, with no sum of their squares,
  // is shifted by its row's first value rather than corrected (program_builder.cpp).
  Program build(int row_dims, std::vector<c10::ScalarType> inputs, std::vector<int> input_pad = {},
                bool shift_centered_means = false) const;

 public:
  struct Expr {
    POp op;
    int a = -1, b = -1, c = -1;
    float imm = 0.f;
    int level = 0;     // reductions on its deepest path
    bool row = false;  // per-row value
  };
  struct Out {
    int index, expr;
    c10::ScalarType dtype;
    bool row;
  };

 private:
  int add(Expr e);
  std::vector<Expr> exprs_;
  std::map<std::tuple<int, int, int, int, float>, int> memo_;
  std::vector<Out> outputs_;
};

}  // namespace fxcpp::fusion
