// Graph rewrites the compiler runs before planning (the passes of passes.h
// then read the rewritten graph and never change it).
#pragma once

#include <cstddef>

#include "graph.h"

namespace hexir::serializer {

// Fused epilogues: a conv2d, matmul or add takes over what follows it when
// nothing else reads its result (and it is not returned):
//  - a matmul (b of rank >= 2, no bias yet) followed by an add of a constant
//    f32[n], n its column count, that keeps the matmul's shape: the constant
//    becomes its bias input;
//  - then (all three) a unary activation ops::epilogue_words accepts (relu, gelu, silu,
//    sigmoid, tanh, leaky_relu, clip, hard_sigmoid, hard_swish): its
//    parameters become the epilogue words.
// The fused node writes the last absorbed node's result value (its name and
// every reader stay), the absorbed nodes and the intermediate values are
// dropped. Results are bit for bit the unfused ones (the kernels apply the
// same scalar functions, ops/plans.h). Returns the number of nodes removed.
size_t fuse_epilogues(Function& fn);
size_t fuse_epilogues(Module& module);

// The exact GELU as exporters write it, x * 0.5 * (1 + erf(x / sqrt(2))) (a
// Div or a Mul by 1/sqrt(2), Erf, Add 1, and the two Muls in either order,
// every intermediate read only there, constants one-element f32), becomes
// one gelu node (erf form) writing the last Mul's value. Run by the ONNX
// front end only: unlike fuse_epilogues it changes rounding (gelu multiplies
// by 0.70710678f where the graph divides by sqrt 2: within a few ulps).
// Returns the number of GELUs found.
size_t recognize_exported_gelu(Module& module);

}  // namespace hexir::serializer
