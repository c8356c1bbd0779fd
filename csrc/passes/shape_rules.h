// Shape and dtype rules for the ops the core knows, keyed by op name ("aten::add").
// A rule returns one optional TensorMeta per node output (nullopt: not determined).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace fxcpp {

// Read access to a node's normalized args for shape rules.
struct ShapeCtx {
  const Node& node;
  const TensorMeta& in(size_t i) const;        // meta of tensor arg i; throws if unknown
  bool is_tensor(size_t i) const;              // arg i is a tensor with a known meta
  int64_t int_arg(size_t i) const;             // a constant int
  bool bool_arg(size_t i) const;
  std::vector<Dim> dims_arg(size_t i) const;   // int[] / SymInt[]: constants and symbolic Values
  std::vector<int64_t> int_list(size_t i) const;  // int[] of constants
  bool is_none(size_t i) const { return node.args.at(i).is_none(); }
  std::optional<c10::ScalarType> dtype_arg(size_t i) const;  // ScalarType? arg
  // The category-aware dtype of a Scalar/number arg, as a wrapped number (int→Long, float→default).
  c10::ScalarType scalar_dtype(size_t i) const;
  [[noreturn]] void fail(const std::string& why) const { throw NodeError(node, why); }
};

using Metas = std::vector<std::optional<TensorMeta>>;
using ShapeRule = std::function<Metas(const ShapeCtx&)>;
using ShapeRuleTable = std::unordered_map<std::string, ShapeRule>;

const ShapeRuleTable& shape_rules();
void add_pointwise_rules(ShapeRuleTable& t);
void add_linalg_rules(ShapeRuleTable& t);
void add_view_rules(ShapeRuleTable& t);
void add_nn_rules(ShapeRuleTable& t);

// Helpers shared by the rule files.
TensorMeta meta_like(const TensorMeta& m, std::vector<Dim> sizes, std::optional<c10::ScalarType> dtype = std::nullopt);
std::vector<Dim> broadcast_shapes(const ShapeCtx& c, const std::vector<Dim>& a, const std::vector<Dim>& b);
int64_t wrap_dim(const ShapeCtx& c, int64_t d, int64_t rank);
Dim dim_mul(const Dim& a, const Dim& b);
// Type promotion as ATen's result_type: dimensioned tensors > zero-dim tensors > wrapped numbers.
struct PromoteOperand {
  c10::ScalarType dtype;
  int priority;  // 2 tensor with dims, 1 zero-dim tensor, 0 wrapped number
};
c10::ScalarType promote_types(const std::vector<PromoteOperand>& ops);
TensorMeta meta_of(const at::Tensor& t);

}  // namespace fxcpp
