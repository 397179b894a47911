// Weight storage chosen at compile time (hexir-compile --weights
// int8|int4[:group=G]): a matmul's constant f32 weights stored int8 per
// output channel or int4 per group, read by quantized_matmul or
// int4_matmul, which dequantize them in registers. Runs before planning,
// with the rewrites (compiler.cc).
#pragma once

#include <span>
#include <vector>

#include "hexir/compiler/compiler.h"
#include "hexir/compiler/graph.h"

namespace hexir::compiler {

// Every matmul whose b is a constant f32 matrix of at least
// kMinCompressedElements elements (and nothing else: no bias, no epilogue
// yet, a of rank >= 1) is stored in the format chosen for that constant
// (`weights`, or the last of `overrides` whose pattern matches its name):
// - int8: quantized_matmul(a, w, scale): w int8 [N, K] (b's columns as
//   rows, so a decode step's dot products read it contiguously), scale f32
//   [N] = max |column| / 127 (symmetric, round half away from zero,
//   clamped to [-127, 127]);
// - int4:group=G: int4_matmul(a, w, scale): w u8 [N, K/2] packed as op.h
//   says, scale f16 [N, K/G] per group = (its value of largest magnitude) /
//   -8, values round(w / scale) clamped to [-8, 7] (llama.cpp's Q4_0 rule:
//   the extreme value exact, 16 levels used, so a weight of the other sign
//   as large clamps to 7, a step off; rounding elsewhere half a step); a K
//   that G does not divide is stored int8.
// An embedding, gather(table, ids) along axis 0 of such a matrix, gathers
// the stored rows and their scales and dequantizes only those
// (dequantize_linear, dequantize_int4): a tied head and its embedding share
// one copy. One weight read by
// several nodes or functions (found by content) is quantized once per
// format. Returns what was stored, per weight, with its largest error.
inline constexpr int64_t kMinCompressedElements = 4096;
std::vector<CompressedWeight> compress_weights(Module& module, const WeightFormat& weights,
                                               std::span<const WeightOverride> overrides);

// A matmul whose b is dequantize_linear(w, scale, 0) of a constant int8
// matrix with a constant scale per tensor or per output channel and zero
// points 0 (the symmetric weights of a QDQ model: onnxruntime's quantizer
// writes them so) becomes quantized_matmul on those int8 values (rows [N,
// K]: transposed at compile time when b is [K, N]), the dequantize gone: the
// weights are read as int8 each invoke instead of widened into the arena.
// Float sums in another order (x . w * s for x . (w * s)). Returns the number rewritten.
size_t use_dequantized_weights(Module& module);

// ONNX MatMulInteger as the importer composes it, cast(matmul(
// dequantize_linear(a u8, 1, a_zero), dequantize_linear(w int8 constant, 1,
// 0)), i32) with one zero point for a, becomes integer_matmul(a, w's rows,
// a_zero): int32 sums exact at any K (the float matmul was exact while sums
// stayed under 2^24) and the weights read as int8. Returns the number rewritten.
size_t use_integer_matmul(Module& module);

}  // namespace hexir::compiler
