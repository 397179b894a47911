// Integer kernels for a QDQ model's quantized groups: a graph rewrite the
// compiler runs with the fusions (before fusion.h's, whose epilogues would
// hide the activation), before layout.h's.
#pragma once

#include <cstddef>

#include "hexir/compiler/graph.h"

namespace hexir::compiler {

// DQ -> Conv -> [Relu | Clip] -> Q as onnxruntime's quantizer writes it:
//   quantize_linear(act(conv2d(dequantize_linear(xq, sx, zx),
//                              dequantize_linear(wq, sw, 0) [, bias])), sy, zy)
// with xq u8 (one scale and zero point), wq an int8 constant [K, C/g, KH,
// KW] (per tensor or per output channel, zero points 0), the bias a float
// constant, a u8 result with one scale and zero point, every intermediate
// read only by the next (the dequantized x may have other readers), becomes
//   transpose(quantized_conv2d(transpose(xq, NHWC), w', bias', m), NCHW)
// (ops quantized_conv2d): the int32 sum of the integer products, then one
// float multiply by m[k] = sx * sw[k] / sy, rounded, plus zy. w' is the
// weights in the operator's layout, bias' = round(bias / (sx * sw[k])) -
// zx * sum w[k] (the zero point leaves the inner loop), the activation
// clamps in the quantized domain (relu: [zy, 255]; clip(a, b): [q(a),
// q(b)]): exact, since rounding is monotone. Results are the float
// composition's within one quantization step (one rounding instead of the
// float sum's). The transposes between two such convolutions cancel in
// layout.h's pass (quantize_linear and dequantize_linear are maps there).
// The same for a matmul (x u8 [.., M, K] dequantized, an int8 constant
// [K, N] or, transpose_b, [N, K], per tensor or per N), its bias an add of
// a constant [N] (an imported Gemm's): a 1x1 quantized_conv2d over the M
// rows of x as pixels, x and the result reshaped (views), not moved.
// And an add of two dequantized u8 values of one shape (per tensor), a
// relu or clip after it, quantized: quantized_add (ops), one pass over the
// bytes where there were four over floats (a ResNet's residual joins).
// Only at the top level of a function. Returns the number of convolutions,
// matmuls and adds rewritten.
size_t use_integer_kernels(Module& module);

}  // namespace hexir::compiler
