// The in-memory order of convolution activations (docs/layout.md): a graph
// rewrite the compiler runs after fusion.h's, before planning.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hexir/compiler/graph.h"

namespace hexir::compiler {

// NCHW -> NHWC and back, as transpose perms; kToNhwc[d] is the NCHW dim at
// NHWC position d. A pass that puts these transposes around a channels-last
// operator (quantized.h) has them taken as a region's edges here.
inline constexpr int64_t kToNhwc[4] = {0, 2, 3, 1};
inline constexpr int64_t kToNchw[4] = {0, 3, 1, 2};

// Convolutions in channels-last order. At the top level of each function
// (never inside a loop or a branch), a conv2d on f32 becomes
//   transpose(x, [0,2,3,1]) -> conv2d channels_last -> transpose(y, [0,3,1,2])
// when its kernel is dense and larger than 1x1 with 8 or more input channels
// per group (the shapes whose NCHW patch packing costs most), or when its
// input is already channels-last (a depthwise one only when every reader of
// its result can take channels-last too: a conv2d, or an elementwise map).
// A residual input is converted with x. The exit transpose
// then moves below the elementwise maps that read it (ops::elementwise_map_arity:
// a unary map; a binary map whose other operand is channels-last too, or a
// value whose non-unit dims keep their order, read through a reshape), when
// every reader of the map's result can take channels-last; an entry
// transpose of a moved exit transpose is its source, so where convolutions
// meet through such maps nothing is converted between them. The transposes
// left are views or copies (passes/storage.h assign_storage), counted by hexir-dump.
// Results are the NCHW graph's within rounding (the channels-last sum order,
// ops::conv2d_channels_last_element). Returns the number of conv2d nodes made
// channels-last.
size_t choose_channels_last(Module& module);

// Channels-last conv2d nodes (after choose_channels_last) with a 3x3 kernel
// at stride 1, dilation 1, one group, constant f32 weights, 32 to 256 input
// channels and 100 or more output pixels per image get layout word 3,
// Winograd's F(4x4, 3x3) (ops::conv2d_winograd_element<4>), on maps of 400+
// pixels that 4x4 tiles cover within 1.15x of what 2x2 tiles do, else word
// 2, F(2x2, 3x3) (ops::conv2d_winograd_element<2>; 1.4-1.8x the direct
// window's speed on an AVX2 core, docs/layout.md). Returns how many.
size_t choose_winograd(Module& module);

}  // namespace hexir::compiler
