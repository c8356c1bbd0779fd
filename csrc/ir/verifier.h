// Structural checks on a Graph; throws NodeError naming the first bad node.
#pragma once
#include "ir/graph.h"

namespace fxcpp {
// - every Value a node uses is a graph input, a constant, or an output of an earlier live node
// - node names are unique; each output Value points back at its producer
// - ATen nodes carry exactly one arg per schema argument
// - tensor Values carry a TensorMeta once shape propagation has run (require_meta)
void verify_graph(const Graph& g, bool require_meta = false);
}  // namespace fxcpp
