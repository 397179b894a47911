// Graph rewrites the compiler runs before planning (the planning passes,
// pipeline.h, then read the rewritten graph and never change it).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "hexir/compiler/graph.h"

namespace hexir::compiler {

// Fused epilogues: a conv2d, matmul, add or mul takes over what follows it
// when nothing else reads its result (and it is not returned):
//  - a matmul (b of rank >= 2, no bias yet) followed by an add of a constant
//    f32[n], n its column count, that keeps the matmul's shape: the constant
//    becomes its bias input;
//  - a conv2d with a bias followed by an add of another value r of its result's
//    type (a residual connection), r computed before the conv2d: r becomes its
//    residual input, added after the bias;
//  - then (all four) a unary activation ops::epilogue_words accepts (relu, gelu, silu,
//    sigmoid, tanh, leaky_relu, clip, hard_sigmoid, hard_swish): its
//    parameters become the epilogue words;
//  - or (add and mul, with the module: its constants are read) a mul by a
//    one-element finite f32 constant a, an add of one b, or the mul then the
//    add, keeping the shape: the "affine" epilogue x * a + b (the missing step
//    is the exact * 1 or + -0), one pass where there were up to three (the
//    scalar affine PP-OCRv4 puts after each hard swish).
// Last, a copy of a result nothing else reads (an ONNX Identity before an
// output) is absorbed by that result's producer (not a view, one result).
// The fused node writes the last absorbed node's result value (its name and
// every reader stay), the absorbed nodes and the intermediate values are
// dropped. Results are bit for bit the unfused ones (the kernels apply the
// same scalar functions, ops/plans.h). Returns the number of nodes removed.
size_t fuse_epilogues(Function& fn);  // no affine epilogue (no constants to read)
size_t fuse_epilogues(Module& module);

// The exact GELU as exporters write it, x * 0.5 * (1 + erf(x / sqrt(2))) (a
// Div or a Mul by 1/sqrt(2), Erf, Add 1, and the two Muls in either order,
// every intermediate read only there, constants one-element f32), becomes
// one gelu node (erf form) writing the last Mul's value. Run by the ONNX
// front end only: unlike fuse_epilogues it changes rounding (gelu multiplies
// by 0.70710678f where the graph divides by sqrt 2: within a few ulps).
// Returns the number of GELUs found.
size_t recognize_exported_gelu(Module& module);

// The hard swish and hard sigmoid as exporters write them (PaddlePaddle,
// older PyTorch): a = x + 3, c = clip(a, 0, 6), then (x * c) / 6 (a Div by 6
// or a Mul by 1/6, the Muls in either order) becomes hard_swish(x), and c / 6
// alone hard_sigmoid(x, 1/6, 1/2); also x * (c / 6). Every intermediate is read
// only there; constants one-element f32. Run by the ONNX front end only: like
// recognize_exported_gelu it changes rounding (x * clamp01(x / 6 + 1/2) is
// computed as x * (1/6) + 0.5: within an ulp or two). The new node takes the
// Add's place and writes the last node's value. Returns the number found.
size_t recognize_exported_hard_swish(Module& module);

// Per-channel scale and shift folded into a convolution's constants (what an
// imported BatchNormalization becomes: a mul then an add; also a scalar
// affine). A conv2d without an epilogue whose weights and bias are constants
// nothing else uses (one use in the whole module, read once), followed by a
// mul, an add, or several, of constants broadcasting along its output
// channels only ([], [1], [K,1,1], [1,K,1,1]; finite), each result read only
// by the next: the weights of output channel k are multiplied by s_k, the
// bias becomes b_k * s_k + t_k (a new constant when it had none). The conv2d
// writes the last absorbed node's value. Changes rounding (float products
// folded into the weights, as onnxruntime's Conv+BatchNormalization fusion
// does), so the compiler runs it with the fusions and --no-fuse turns it
// off. Returns the number of nodes removed. `values_visited` (optional) adds
// the values it visited counting constant uses: a work counter, linear in
// the module's values (once per function, it was quadratic in the functions).
size_t fold_channel_affine(Module& module, uint64_t* values_visited = nullptr);

// The same before a convolution: a conv2d with no padding (every tap reads
// the input) whose input, read only by it, is x * s, x + t or x * s + t with
// constants per input channel: conv(x * s + t) = conv'(x) with the weights of
// input channel c multiplied by s_c and the bias of output channel k grown by
// the sum of its weights times t (summed in double). The weights (and the
// bias) must be constants nothing else uses. Returns the number of nodes
// removed; `values_visited` as for fold_channel_affine.
size_t fold_input_affine(Module& module, uint64_t* values_visited = nullptr);

// Convolution windows cut to the taps some output reads inside the input: a
// conv2d (NCHW) whose weights are a constant it alone reads and whose
// window's edge rows or columns only ever fall on the padding (an atrous
// 3x3 at a dilation as large as its map: DeepLabV3's ASPP at 24 and 36 on 20
// x 20 is a 1x1) keeps the live rows and columns of its weights, its pads
// moved to match. The same sums but for the sign of an exact zero (the
// dropped products were zeros). Run by fuse, first. Returns the number of
// convolutions cut.
size_t trim_dead_taps(Module& module);

// A per-channel affine no convolution took (a batch normalization after a
// concat, an add or the input: DenseNet's pre-activation ones): a mul of an
// f32 [N,C,H,W] value by constants per channel ([C,1,1] or [1,C,1,1], C > 1,
// finite) whose result only an add of such constants reads becomes one
// depthwise 1x1 conv2d (weights s as [C,1,1,1], bias t) writing the add's
// value: one pass where there were two, a following activation fused into
// it, and channels-last where its neighbours are. Bit for bit the mul and
// the add (the tap's product is the first sum, then the bias; only a -0
// product becomes +0). Run after fold_input_affine (a fold into the next
// convolution removes the pass entirely). Returns the number of nodes removed.
size_t channel_affine_as_conv(Module& module);

// A depthwise conv2d (NCHW, no residual; a bias, an epilogue or not) whose
// result only a 1x1 conv2d (stride 1, no padding, NCHW; a bias, a residual,
// an epilogue or not) reads, in the same loop body or branch:
// one separable_conv2d at the 1x1's place, writing its value, where the
// operator's rule takes it (a depthwise row of C * OW <= 8192 floats). The
// depthwise's result never goes to memory. Bit for bit the two conv2ds (the
// cpu kernel runs their kernels on rows held in a thread's scratch). Runs
// after choose_channels_last: channels-last convolutions stay as they are.
// Returns the number of nodes removed.
size_t fuse_separable(Module& module);

// Removes the dropped nodes and values, and the constant uses no node left
// reads, and renumbers what is left, in the same order (ids in nodes,
// arguments, outputs; each result's node and index; region markers' node
// indices). For the rewrites here and in layout.h.
void drop(Function& fn, const std::vector<bool>& node_dropped, std::vector<bool> value_dropped);

// After a rewrite rebuilt fn.nodes from `original_count` nodes, node n now
// at new_index[n] (nodes it added in between): region markers name their
// partners' new indices and each result value its writer's. For the
// rewrites of layout.h and donation.h.
void renumber_nodes(Function& fn, size_t original_count, const std::vector<int64_t>& new_index);

// Attention over the rows of a static KV cache written so far: softmax(
// where(mask, -inf, scale * q k^T)) v (or where(kept, scores, -inf)), the
// mask comparing a constant iota 0..T-1 along the keys with a one-element
// i64 position (j <= p, j < p, either side, through nots), the scale a mul
// or div by a one-element f32 constant or absent, k^T a transpose of k's
// last two dims or transpose_b, every intermediate read only by the next,
// becomes one `attention(q, k, v, p) {scale, offset}` writing the final
// matmul's value: the keys the mask removes are never read (a decode step
// at position p reads p + 1 of the cache's T rows, not T). The comparisons
// nothing reads any more go too. The sums run in another order (and a div
// becomes a multiply by the reciprocal): within a few ulps, so it runs with
// the fusions (--no-fuse turns it off). Returns the number fused.
size_t fuse_prefix_attention(Module& module);

// For the rewrites that add to a graph (donation.h, weights.h): a node of
// one operator writing `result`; a module constant of `type` from `source`
// under `base_name` or, when a constant has it, base_name.1, .2, ...
// (returns its index); a function's value using module constant `constant`.
Node op_node(ops::OpId op, std::vector<int> inputs, int result, std::vector<int64_t> params, const Location& loc);
int add_constant(Module& module, const std::string& base_name, TensorType type, ConstantSource source);
int use_constant(Function& fn, const Module& module, int constant);

// Per value of fn: how many nodes read it (+2 for a function output: never
// single-use) and the node writing it (-1: none).
struct ValueUses {
  std::vector<int> readers, writer;
};
ValueUses value_uses(const Function& fn);

// What the compiler runs before planning unless told not to
// (CompileOptions::fuse_epilogues, hexir-compile --no-fuse):
// trim_dead_taps, fuse_prefix_attention, fold_channel_affine, fold_input_affine,
// channel_affine_as_conv, then fuse_epilogues. Returns the number of nodes removed.
size_t fuse(Module& module);

}  // namespace hexir::compiler
