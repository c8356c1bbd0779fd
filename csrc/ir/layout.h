// The dense layout a value's traced strides describe, for the passes that make a kernel
// write what eager writes. Symbolic sizes and strides (dynamic shapes) count too: a dynamic
// batch leaves every stride static, a dynamic sequence makes the outer strides products
// like "768*s0", and both still say which dim is innermost.
#pragma once
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace fxcpp {

// The dims of m longer than 1, innermost first, when its strides lay them out densely (no
// overlap, no gap); nullopt when they do not or cannot be told (unknown strides, an empty
// tensor, a size or stride that is not a product of integers and symbols). A symbolic size
// is taken as larger than 1, as Dynamo specializes sizes 0 and 1.
std::optional<std::vector<int>> dense_dim_order(const TensorMeta& m);

// Whether m's strides are channels-last (nwc, nhwc, ndhwc) and not also contiguous (one
// channel, say): what eager returns for a channels-last input.
bool traced_channels_last(const TensorMeta& m);

}  // namespace fxcpp
