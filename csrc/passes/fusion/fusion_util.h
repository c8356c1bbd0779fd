// Small predicates the oneDNN fusion passes share.
#pragma once
#include <vector>

#include "ir/graph.h"

namespace fxcpp::fusion {

// fp16 runs as fp32 in the kernels (oneDNN 3.2 has fp16 kernels only on AVX512-FP16/AMX-FP16 hosts).
inline bool onednn_dtype(c10::ScalarType t) { return t == c10::kFloat || t == c10::kBFloat16 || t == c10::kHalf; }

// A CPU tensor Value of a dtype oneDNN runs, with a known rank.
inline bool onednn_tensor(const Value* v) {
  return v && v->kind == ValueKind::Tensor && v->meta && v->meta->device.is_cpu() && onednn_dtype(v->meta->dtype);
}

inline const Value* value_of(const Arg& a) { return a.kind == Arg::Kind::Value ? a.value : nullptr; }

inline bool is_onednn_node(const Node* n) { return n->fused != nullptr; }

// The one node that uses `v`, or null when `v` has another use or is a graph output:
// a fusion may only swallow a value nobody else sees.
inline Node* sole_user(const Graph& g, const Value* v, const std::vector<int>& uses) {
  if (uses[v->id] != 1 || g.is_graph_output(v)) return nullptr;
  for (Node* n : g.nodes()) {
    bool hit = false;
    for (const auto& a : n->args) for_each_value(a, [&](Value* u) { hit |= (u == v); });
    if (hit) return n;
  }
  return nullptr;
}

inline bool same_sizes(const TensorMeta& a, const TensorMeta& b) {
  if (a.sizes.size() != b.sizes.size()) return false;
  for (size_t i = 0; i < a.sizes.size(); ++i)
    if (!(a.sizes[i] == b.sizes[i])) return false;
  return true;
}

// Whether two values of the same sizes are laid out alike, as far as the traced strides say
// (dims of size 1 have no layout; unknown strides are taken as alike). A post-op's result is
// laid out by eager's TensorIterator, which can follow the other operand (x * matmul(x, ..)
// of a transposed x comes back transposed), while the oneDNN kernel writes its own layout.
inline bool same_layout(const TensorMeta& a, const TensorMeta& b) {
  if (a.strides.size() != a.sizes.size() || b.strides.size() != b.sizes.size() || a.sizes.size() != b.sizes.size())
    return true;
  for (const Dim& d : a.sizes)
    if (d == Dim::of(0)) return true;  // empty: no layout either
  for (size_t i = 0; i < a.sizes.size(); ++i)
    if (!(a.sizes[i] == Dim::of(1)) && !(a.strides[i] == b.strides[i])) return false;
  return true;
}

inline bool const_int_list(const Arg& a, std::vector<int64_t>& out) {
  out.clear();
  if (a.kind == Arg::Kind::Const && a.constant.isIntList()) {
    out = a.constant.toIntVector();
    return true;
  }
  if (a.kind != Arg::Kind::List) return false;
  for (const auto& e : a.elems) {
    if (e.kind != Arg::Kind::Const || !e.constant.isInt()) return false;
    out.push_back(e.constant.toInt());
  }
  return true;
}

inline bool const_number(const Arg& a, double& out) {
  if (a.kind != Arg::Kind::Const) return false;
  if (a.constant.isDouble()) { out = a.constant.toDouble(); return true; }
  if (a.constant.isInt()) { out = static_cast<double>(a.constant.toInt()); return true; }
  if (a.constant.isBool()) { out = a.constant.toBool() ? 1.0 : 0.0; return true; }
  return false;
}

// Whether oneDNN was compiled in (the passes do nothing without it).
bool onednn_available();

}  // namespace fxcpp::fusion
