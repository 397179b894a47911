// Operators, each defined once: name, operand and result counts, whether it
// may run in place or is a view, how its attributes lower to parameter words
// and back, its result-type rule, its FLOPs, its scratch rule and its plan
// (the geometry its kernels need, ops/plans.h). The compiler's graph builder,
// the printer, the verifier, the VM (at prepare) and every backend read these
// definitions; nobody else re-derives shapes.
//
// Adding an operator: an OpId below, an OpDef in the family file under
// ops/src/ (with its `raise`, the inverse of `lower`, and its FLOPs rule),
// one kernel per backend, one conformance case (docs/operators.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/base/types.h"
#include "hexir/ops/plans.h"

namespace hexir::ops {

// clang-format off
enum class OpId : uint16_t {
  // Elementwise binary, numpy broadcasting, f32, i32 or i64 (both operands of
  // one dtype; integers as kMod below). No parameters (add and mul on f32:
  // optionally a fused epilogue [activation, a, b], see conv2d; also
  // "affine", x * a + b, which conv2d and matmul do not take).
  kAdd, kSub, kMul, kDiv, kMaximum, kMinimum,
  // Elementwise unary, f32 (neg also i32 and i64, wrapping). gelu: [approximate] (0 = erf, 1 = tanh).
  kRelu, kGelu, kSilu, kSigmoid, kTanh, kExp, kSqrt, kRsqrt, kNeg,
  // numpy matmul: 1-D operands promoted and the added dim removed, batch dims broadcast.
  // (a, b, bias f32[n] optional, added to every row; needs b of rank >= 2);
  // no parameters, or a fused epilogue [activation, a, b] (below).
  kMatmul,
  // [axis] (normalized to 0..rank-1)
  kSoftmax,
  // (x, gamma, beta); [axis, bit_cast<int64>(double epsilon)]; normalizes dims axis..rank-1.
  kLayernorm,
  // perm (rank entries, a permutation of 0..rank-1); any dtype.
  kTranspose,
  // A view: shares its input's storage, never dispatched. Params: the result dims.
  kReshape,
  // [keepdims (0|1), axis...] axes normalized, sorted, unique; none listed = all axes.
  kReduceSum, kReduceMean,
  // Variadic (>= 1 input), any dtype; [axis] normalized.
  kConcat,
  // Explicit copy (returning an input or constant, or one value as two outputs).
  kCopy,
  // One input, one output per part, any dtype; [axis, size_0, size_1, ...].
  kSplit,
  // f32/f16/i32/i64/bool/u8 to one of them; [to dtype].
  kCast,
  // (cond bool, x, y), numpy broadcasting of all three; x and y any equal dtype.
  kWhere,
  // (data any dtype, indices i32/i64): numpy.take along [axis].
  kGather,
  // Any dtype; per input dim [start, step, size] (normalized: in range, size = result dim).
  kSlice,
  // (x f32[N,C,H,W], w f32[K,C/groups,KH,KW], bias f32[K] optional, residual optional after the
  // bias: the result's type, added after the bias and before the epilogue's activation);
  // [stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right, dilation_h, dilation_w, groups],
  // optionally followed by a fused epilogue [activation, a, b], then optionally 1: channels-last
  // (x [N,H,W,C], result [N,OH,OW,K], weights as above; conv2d_channels_last, docs/layout.md).
  //
  // A fused epilogue (conv2d, matmul): an ops::Activation (plans.h) applied to
  // every result element after the bias, and its float parameters as the bits
  // of doubles (0 when unused; never NaN; infinite only for clip). Written in
  // .hxir as attributes: activation = "relu" | "gelu" | "gelu_tanh" | "silu" |
  // "sigmoid" | "tanh" | "leaky_relu" | "clip" | "hard_sigmoid" | "hard_swish",
  // activation_alpha, activation_beta (leaky_relu alpha; clip min, max;
  // hard_sigmoid alpha, beta). The compiler fuses a following unary operator
  // into it (serializer fuse_epilogues); the result is bit for bit the unfused one.
  kConv2d,
  // Elementwise unary, f32 (ONNX semantics; NaN in, NaN out). Float
  // parameters are the bits of a double (std::bit_cast<int64_t>(double)), finite.
  // leaky_relu: [alpha] (x < 0 ? alpha * x : x).
  kLeakyRelu,
  // clip: [min, max], -inf / +inf when unbounded, never NaN; min > max gives max
  // (numpy.clip: minimum(maximum(x, min), max)).
  kClip,
  // hard_sigmoid: [alpha, beta], max(0, min(1, alpha * x + beta)).
  kHardSigmoid,
  // No parameters: x * hard_sigmoid(x) with alpha 1/6, beta 1/2; erf; natural log; |x| (also
  // i32 and i64, wrapping); 1 / x.
  kHardSwish, kErf, kLog, kAbs, kReciprocal,
  // numpy.power, f32, i32 or i64 (plans.h int_pow_of), broadcasting. No parameters.
  kPow,
  // Comparisons with numpy broadcasting: a and b of one dtype (f32, i32 or i64,
  // the key), a bool result (NaN compares unequal, and neither less nor greater). No parameters.
  kEqual, kLess, kGreater,
  // Logical not, bool to bool (any non-zero byte is true; the result is 0 or 1). No parameters.
  kNot,
  // Like reduce_sum: [keepdims (0|1), axis...]. NaN propagates; the max of nothing is -inf.
  kReduceMax,
  // 2-D pooling, x f32[N,C,H,W] (ONNX MaxPool / AveragePool):
  // [kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right,
  //  dilation_h, dilation_w, ceil_mode (0|1), count_include_pad (0|1; 0 for max_pool)].
  // Pads are below the kernel size; a ceil_mode window must start inside the
  // input or its leading pad. max_pool propagates NaN (-inf for a window of pads
  // only); average_pool divides by the taps inside the input, or inside the
  // padded input with count_include_pad. Optionally followed by 1:
  // channels-last (x [N,H,W,C], result [N,OH,OW,C]; pool2d_channels_last).
  kMaxPool, kAveragePool,
  // pad, any dtype: [mode, value, begin_0..begin_{r-1}, end_0..end_{r-1}] (ONNX Pad with
  // its pads and constant_value as attributes). mode 0 constant, 1 reflect, 2 edge,
  // 3 wrap (numpy's modes). value: the constant's element bytes, zero-extended
  // (0 unless mode is constant). Negative pads crop; |pad| < 2^48.
  kPad,
  // expand: numpy broadcast of x to the result dims (ONNX Expand: x and the
  // stated shape broadcast together); any dtype. Params: the result dims.
  kExpand,
  // resize, x f32[N,C,H,W] to [N,C,out_h,out_w] (ONNX Resize of H and W, the
  // scales out / in): [mode (0 nearest, 1 linear), coordinate_transformation_mode
  // (0 half_pixel, 1 align_corners, 2 asymmetric, 3 pytorch_half_pixel,
  // 4 tf_half_pixel_for_nn), nearest_mode (0 round_prefer_floor,
  // 1 round_prefer_ceil, 2 floor, 3 ceil; 0 for linear), out_h, out_w].
  kResize,
  // conv_transpose (ONNX ConvTranspose), x f32[N,C,H,W], w f32[C,K/groups,KH,KW], bias f32[K] optional:
  // [stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right, dilation_h, dilation_w, groups,
  //  output_padding_h, output_padding_w]; output dim = stride * (in - 1) + output_padding +
  // dilation * (kernel - 1) + 1 - pad_begin - pad_end.
  kConvTranspose,
  // argmax (ONNX ArgMax), x f32: [axis (normalized), keepdims (0|1), select_last_index (0|1)];
  // an i64 result, the index along axis of the largest element (ties: the first,
  // or the last with select_last_index). NaN is larger than every number
  // (numpy.argmax: the first NaN wins; the last one with select_last_index). An
  // empty axis is refused unless the result is empty too.
  kArgMax,
  // dynamic_slice, (x any dtype, start_0 .. start_{r-1} i64[]): the window of
  // x of the sizes [size_0, .., size_{r-1}] (<= the dims) at the run-time start
  // indices, each clamped to [0, dim - size] (XLA DynamicSlice). Params: the sizes.
  kDynamicSlice,
  // update_slice, (x any dtype, update of x's dtype and rank with dims <= x's,
  // start_0 .. start_{r-1} i64[]): a copy of x with update written at the
  // run-time start indices, clamped to [0, dim - update dim] (XLA
  // DynamicUpdateSlice). No parameters. Runs in place on x (input 0 only:
  // then only the window is written).
  kUpdateSlice,
  // separable_conv2d, a depthwise conv2d then a 1x1 conv2d over its result,
  // in one pass (the compiler fuses the pair: compiler/passes fuse_separable),
  // NCHW: (x f32[N,C,H,W], dw_w [C,1,KH,KW], pw_w [K,C,1,1], dw_bias [C] and
  // pw_bias [K] where the last word says, residual optional: the result's
  // type, as conv2d's, after pw_bias); [the depthwise's nine conv2d words
  // (groups = C), its epilogue [activation, a, b] (activation 0: none), the
  // 1x1's epilogue, the biases present (bit 0: dw_bias, bit 1: pw_bias)]:
  // 16 words.
  // The depthwise rows the 1x1 reads are held apart, so C * OW is at most
  // kSeparableMaxRowFloats (plans.h). Each element is the two conv2ds' (the
  // same sums in the same order as unfused, so the same bits).
  kSeparableConv2d,
  // Elementwise unary, f32: ONNX Softplus, log(1 + exp(x)) (softplus_of,
  // plans.h). No parameters.
  kSoftplus,
  // Integer and boolean arithmetic (ONNX; the integer rules are ops/plans.h's
  // int_*_of: wrapping, no undefined behaviour; a zero divisor fails the
  // invoke on the cpu). mod: a, b of one dtype, broadcasting; [fmod (0|1)]:
  // 0, i32/i64 only, the remainder takes the divisor's sign (Python's %);
  // 1, also f32, the dividend's (C's fmod).
  kMod,
  // Comparisons as equal/less/greater (f32, i32 or i64; a bool result; NaN
  // compares false). No parameters.
  kLessOrEqual, kGreaterOrEqual,
  // Logical and, or, xor: two bool operands, broadcasting (any non-zero byte
  // is true); a bool result (0 or 1). No parameters.
  kAnd, kOr, kXor,
  // sign: f32, i32 or i64: -1, 0 or 1 (NaN and -0 pass through). No parameters.
  kSign,
  // ceil, floor, round (half to even, ONNX Round): f32. No parameters.
  kCeil, kFloor, kRound,
  // scatter_nd (ONNX ScatterND), (data any dtype, indices i32/i64 [..., k],
  // updates [indices dims but the last, then data's dims from k on]): a copy
  // of data with each update slice written at (or, with a reduction,
  // combined into) the k-tuple of indices naming it; negative indices count
  // from the end, one outside its dim fails the invoke. [reduction
  // (ScatterReduction, plans.h: 0 none, 1 add, 2 mul, 3 max, 4 min; not
  // none: f32, i32, i64 only)]. Index tuples apply in order: a duplicate
  // tuple takes the last update (none) or combines them all in order. Runs
  // in place on data (input 0 only).
  kScatterND,
  // scatter_elements (ONNX ScatterElements, Scatter), (data any dtype,
  // indices i32/i64 of data's rank, no dim larger except along axis,
  // updates of indices' dims): a copy of data with updates[i] written at i
  // with its axis coordinate replaced by indices[i] (negative from the end;
  // outside the axis fails the invoke). [axis (normalized), reduction (as
  // scatter_nd)]. Updates apply in row-major order (duplicates as
  // scatter_nd). Runs in place on data (input 0 only).
  kScatterElements,
  // Elementwise unary math, f32 (ONNX Sin .. Atanh; libm's float functions,
  // math_of in plans.h). No parameters.
  kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh,
  // is_inf (ONNX IsInf), f32 to bool: [detect_positive (0|1), detect_negative
  // (0|1)]. is_nan (ONNX IsNaN), f32 to bool. No parameters.
  kIsInf, kIsNaN,
  // Activations, f32 (ONNX; math_of in plans.h), float parameters as the
  // bits of doubles: elu [alpha]; selu [alpha, gamma]; celu [alpha]; mish,
  // softsign: none; thresholded_relu [alpha]; shrink [lambd, bias].
  kElu, kSelu, kCelu, kMish, kSoftsign, kThresholdedRelu, kShrink,
  // prelu (ONNX PRelu), f32 (x, slope) with numpy broadcasting: x < 0 ?
  // slope * x : x. No parameters.
  kPRelu,
  // group_norm (ONNX GroupNormalization, InstanceNormalization), f32 (x
  // [N, C, ...], scale [C], bias [C]): x normalized over each group of C /
  // groups channels (and every spatial element) by its mean and variance,
  // then scale[c] * . + bias[c]. [groups (divides C), bits of epsilon].
  kGroupNorm,
  // The reductions of reduce_sum's family, with its parameters [keepdims (0|1),
  // axis...] (ONNX ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSumExp,
  // ReduceSumSquare, ReduceLogSum; ReduceKind, plans.h). f32 (sums and
  // products in double); reduce_min, reduce_prod, reduce_l1 and
  // reduce_sum_square also i32 and i64 (wrapping, as reduce_sum and
  // reduce_max on integers). Over nothing: min +inf (the largest integer),
  // prod 1, l1, l2, sum_square 0, log_sum and log_sum_exp -inf. NaN propagates.
  kReduceMin, kReduceProd, kReduceL1, kReduceL2, kReduceLogSumExp, kReduceSumSquare, kReduceLogSum,
  // argmin (ONNX ArgMin): as argmax, the smallest (NaN still wins, numpy.argmin).
  // argmax and argmin take f32, i32 or i64.
  kArgMin,
  // log_softmax (ONNX LogSoftmax), f32: [axis] (normalized); x - max - log(sum(exp(x - max))).
  kLogSoftmax,
  // hardmax (ONNX Hardmax), f32: [axis] (normalized); 1 at the argmax along
  // axis (the first of ties; a NaN wins, as argmax), 0 elsewhere.
  kHardmax,
  // top_k (ONNX TopK with k constant), x f32, i32 or i64: [axis (normalized),
  // k, largest (0|1), sorted (0|1)]; two results, the k values along axis
  // (x's dtype) and their indices (i64), largest (or smallest) first, ties
  // by lower index (NaN is larger than every number). Always sorted.
  kTopK,
  // gather_elements (ONNX GatherElements), (data any dtype, indices i32/i64
  // of data's rank, no dim larger except along axis): result element i (of
  // indices' dims) is data's element at i with its axis coordinate replaced
  // by indices[i] (negative from the end; outside the axis fails the invoke).
  // [axis (normalized)].
  kGatherElements,
  // gather_nd (ONNX GatherND), (data any dtype, indices i32/i64 [..., k]):
  // each k-tuple of indices names a slice of data (data's dims from
  // batch_dims + k on), within the batch element its leading batch_dims
  // coordinates (shared by data and indices) name; the result is [indices'
  // dims but the last, then data's dims from batch_dims + k on]. Negative
  // indices count from the end; one outside its dim fails the invoke.
  // [batch_dims].
  kGatherND,
  // cumsum (ONNX CumSum), x f32, i32 or i64: running sums along [axis
  // (normalized), exclusive (0|1), reverse (0|1)] (CumSumPlan, plans.h).
  kCumSum,
  // Bounded dynamic shapes (docs/design-notes.md): results whose size along
  // one dim is known only at run time, planned at an upper bound (the
  // TensorType's bounded dim); each gives the actual extent as a last i64[]
  // result, and zero-fills its result past it.
  // nonzero (ONNX NonZero), x any dtype of rank >= 1 (-0.0 is zero, NaN is
  // not): (indices i64[rank, <=numel(x)], count i64[]), the coordinates of
  // the non-zero elements in row-major order. No parameters.
  kNonZero,
  // non_max_suppression (ONNX NonMaxSuppression), (boxes f32[B, N, 4],
  // scores f32[B, C, N], max_output_boxes_per_class i64[], iou_threshold
  // f32[], score_threshold f32[]; all five present, the importer fills the
  // absent ones): (selected i64[<=B*C*K, 3] rows [b, c, box], count i64[]).
  // [center_point_box (0: [y1, x1, y2, x2] any diagonal, 1: [xc, yc, w, h]),
  //  K: the bound per class (>= the run-time max_output_boxes_per_class it
  //  is clamped to, <= N)]. Per batch and class, the boxes scoring above
  //  score_threshold by descending score (ties: lower index first), each kept
  //  unless its IoU with one kept before is above iou_threshold.
  kNonMaxSuppression,
  // compress (ONNX Compress), (x any dtype, condition bool[L]): the slices
  // of x along [axis] whose condition is true (those past L dropped), x
  // flattened first when axis is -1: (y with that dim <=min(dim, L), count
  // i64[]). [axis (normalized, or -1: flattened)].
  kCompress,
  // compact, (x with a bounded dim, its extent i64[]): x's elements at its
  // actual extent, row-major with no padding (what a function result
  // holds when its bounded dim is not the leading one; the compiler adds
  // it). Any dtype. No parameters.
  kCompact,
  // bound, (x, n i64[]): x with dim [dim] bounded at its size, n (computed
  // at run time) its extent: rows from n on zeroed. n outside [0, dim]
  // fails the invoke (the cpu; CUDA and the kernels reading it clamp). x
  // plain. The importer builds what mixes data across a bounded dim from it
  // and unbound (docs/design-notes.md). [dim].
  kBound,
  // unbound, (x with a bounded dim): x's stored elements, the padding's
  // zeros included, as a plain value of the bound's shape. No parameters.
  kUnbound,
  // attention, (q f32[B.., M, D], k f32[B.., T, D], v f32[B.., T, E], n
  // one i64, any rank): per batch element and query row, softmax over keys j < n +
  // offset of scale * q k_j^T, those weights times v's rows: [B.., M, E]
  // (the batch dims equal). The keys from n + offset on take no part: a
  // static KV cache's rows not yet written, which the graph masked to -inf
  // (the compiler's rewrite, docs/design-notes.md), are never read. With
  // no key (n + offset <= 0) the rows are NaN, as softmax of -inf everywhere;
  // more than T is T. [bits of double scale (finite), offset (|offset| <
  // 2^32)]. q, k and v may be strided views with unit last stride (matmul's
  // rule).
  kAttention,
  // quantize_linear (ONNX QuantizeLinear), (x f32, scale f32, zero_point i8
  // or u8): round(x / scale) (half to even) + zero_point, saturated to
  // zero_point's dtype (NaN: zero_point). scale and zero_point hold one
  // element (per tensor) or [x's dim `axis`] (per axis, channel c of every
  // element at coordinate c along the axis). [axis (normalized; 0 per tensor)].
  kQuantizeLinear,
  // dequantize_linear (ONNX DequantizeLinear), (x i8, u8 or i32, scale f32,
  // zero_point of x's dtype): (x - zero_point) * scale, f32. [axis] as
  // quantize_linear.
  kDequantizeLinear,
  // quantized_matmul, (a f32[.., M, K], w i8[N, K], scale f32[N], bias f32[N]
  // optional): a x (w * scale)^T + bias, w int8 per output channel
  // (hexir-compile --weights int8 stores a matmul's constant weights so),
  // dequantized in registers: a quarter of the bytes read. a's leading dims
  // are more rows. No parameters.
  kQuantizedMatmul,
  // int4_matmul, (a f32[.., M, K], w u8[N, K/2], scale f16[N, K/G], bias
  // f32[N] optional): a x dequantized(w)^T + bias, w 4-bit per group of G
  // consecutive weights of a row (hexir-compile --weights int4[:group=G]):
  // an eighth of f32's bytes. A row is K/32 blocks of 16 bytes; byte i of
  // block b holds weight 32b+i in its low nibble and 32b+16+i in its high
  // one, each as its value + 8 (values -8..7); weight t of row n is that
  // value times scale[n, t / G]. G = K / scale's columns, a multiple of 32.
  // No parameters.
  kInt4Matmul,
  // dequantize_int4, (w u8[.., K/2], scale f16[.., K/G]): f32[.., K], each
  // row of w decoded as int4_matmul reads it (an embedding's gathered rows
  // under hexir-compile --weights int4). No parameters.
  kDequantizeInt4,
  // integer_matmul, (a u8[.., M, K], w i8[N, K], a_zero u8 one element):
  // sum_k (a - a_zero) * w in int32, exact (K <= 65536), i32[.., M, N]: the
  // integer GEMM of ONNX MatMulInteger with symmetric weights (zero point
  // 0), w's rows the output channels. No parameters.
  kIntegerMatmul,
  // quantized_conv2d, (x u8[N,H,W,C] channels-last, w i8 (below), bias i32[K],
  // multiplier f32[K]): the integer convolution of a QDQ model's DQ -> Conv
  // -> Q (compiler/passes/quantized.cc), u8[N,OH,OW,K]. Each output is
  // requantize_of(sum, bias[k], multiplier[k], y_zero, y_min, y_max)
  // (plans.h): sum the int32 sum over the window of x * w, a tap outside the
  // input reading x_zero (quantized_conv2d_sum). The compiler folds
  // -x_zero * sum w and the float bias into bias, x_scale * w_scale[k] /
  // y_scale into multiplier, and a relu or clip into [y_min, y_max].
  // Weights: depthwise (groups = C = K) [KH*KW, C]; otherwise [groups,
  // ceil(K/groups/16), depth/4, 16, 4] (plans.h quantized_conv2d_weight_index),
  // reduction index r = (ky*KW + kx)*C/groups + ci padded with zeros to
  // depth (a multiple of 4): four consecutive r of one output channel side
  // by side, what vpdpbusd multiplies, 16 channels to 64 bytes, each block of
  // 16 contiguous over r (zeros past the group's channels). At most 65536
  // terms per sum. [kernel_h, kernel_w, stride_h, stride_w, pad_top,
  // pad_left, pad_bottom, pad_right, dilation_h, dilation_w, groups, x_zero,
  // y_zero, y_min, y_max].
  kQuantizedConv2d,
  // quantized_add, (a u8, b u8 of one shape): a QDQ model's DQ, DQ -> Add ->
  // [Relu] -> Q (compiler/passes/quantized.cc) as one pass over the bytes,
  // quantized_add_of (plans.h): exactly the float steps of the group it
  // replaces, ONNX's DequantizeLinear of each input, their float sum and
  // QuantizeLinear's division by y_scale, rounded half to even, plus
  // y_zero, clamped to [y_min, y_max] (a relu: y_min = y_zero). u8 of the
  // operands' shape. [a_zero, b_zero, y_zero, y_min, y_max, bits of double
  // a_scale, b_scale, y_scale] (finite and positive, the zero points and
  // bounds in 0..255).
  kQuantizedAdd,
  // lstm_cell, (gates f32[B, 4H], c f32[B, H]): one step of an LSTM cell
  // with ONNX's default activations after its two matmuls, gates = x W^T +
  // h R^T + biases in ONNX's order i, o, f, c. Results the new c f32[B, H]
  // (in place on c: a loop carries it in one buffer) and h f32[B, H]:
  // lstm_cell_of (plans.h), the bits of the sigmoid, tanh, mul and add
  // operators it stands for (the recurrent importer's step). No parameters.
  kLstmCell,
  kCount,
};
// clang-format on
inline constexpr int kOpCount = static_cast<int>(OpId::kCount);

// An attribute value as a front end gives it: {axis = -1, perm = [1, 0], approximate = "tanh"}.
struct AttrValue {
  std::variant<int64_t, double, std::string, std::vector<AttrValue>> value;
};
using AttrMap = std::map<std::string, AttrValue, std::less<>>;

// The operands a plan rule sees: types that passed the result-type rule, and
// the parameter words.
struct PlanInput {
  std::span<const TensorType> inputs;
  std::span<const TensorType> outputs;
  std::span<const int64_t> params;
  // Per input: its element strides when it is a strided view (ViewLayout;
  // only inputs accepts_strided_input allows), empty when row-major. An empty
  // span: every input row-major. The plan walks the input by these strides.
  std::span<const std::vector<int64_t>> input_strides = {};
};

// A kernel plan: one struct of plans.h, possibly followed by per-operand
// words, in 8-byte aligned storage the VM keeps for the life of a program.
class OpPlan {
 public:
  // Starts a plan of type T (value-initialized) with `tail` int64 words after it.
  template <typename T>
  T& start(size_t tail = 0) {
    static_assert(alignof(T) <= alignof(uint64_t));
    words_.assign((sizeof(T) + 7) / 8 + tail, 0);
    return *reinterpret_cast<T*>(words_.data());
  }
  template <typename T>
  const T& as() const {
    return *reinterpret_cast<const T*>(words_.data());
  }
  template <typename T>
  int64_t* tail() {
    return reinterpret_cast<int64_t*>(words_.data() + (sizeof(T) + 7) / 8);
  }
  std::span<const uint64_t> words() const { return words_; }
  bool empty() const { return words_.empty(); }

 private:
  std::vector<uint64_t> words_;
};

// Which dtypes a kernel is chosen by: the dtype of one input (`key_input`) and
// of output 0. Backends register kernels per key (hal).
struct KernelKey {
  OpId op = OpId::kCount;
  DType input = DType::kF32;
  DType output = DType::kF32;
};

struct OpDef {
  OpId id;
  const char* name;  // as written after '@' in .hxir and stored in the kernel table
  int min_inputs;
  int max_inputs;  // -1: variadic
  int min_outputs;
  int max_outputs;        // -1: variadic (the result-type rule gives the count)
  bool f32_only;          // every input must be f32 (checked before the rule runs)
  bool may_run_in_place;  // output 0 may take the storage of an input of equal type
  bool is_view;           // output 0 shares input 0's storage; never dispatched
  int key_input;          // the input whose dtype keys the kernel (KernelKey)
  // Attributes to parameter words. `declared` are the result types the front
  // end states (empty when it states none); reshape takes its shape from them
  // and split its part count.
  Result<std::vector<int64_t>> (*lower)(std::span<const TensorType> inputs, const AttrMap& attrs,
                                        std::span<const TensorType> declared);
  // The inverse of `lower`, for printers: parameter words back to attributes
  // that lower to the same words (with the result types as `declared`).
  // Words that have no attribute form give attributes that lower to other
  // words or fail; the caller checks. raise_none (ops/src/util.h): no
  // parameters.
  AttrMap (*raise)(std::span<const TensorType> inputs, std::span<const int64_t> params);
  // The result-type rule: validates dtypes, shapes and parameter words and
  // returns the result types. Runs on untrusted files, so it must reject any
  // malformed parameter list without crashing.
  Result<std::vector<TensorType>> (*infer)(std::span<const TensorType> inputs,
                                           std::span<const int64_t> params);
  // The FLOPs of one dispatch (cost.h flop_estimate) on operands that passed
  // `infer`. Every operator states one; where no rule of its own applies,
  // flops_per_element (ops/src/util.h: one per element written, elementwise
  // maps and data movement) or flops_none (a view: nothing runs).
  uint64_t (*flops)(std::span<const TensorType> inputs, std::span<const TensorType> outputs,
                    std::span<const int64_t> params);
  // Scratch bytes the kernel needs (null: none).
  uint64_t (*workspace)(const PlanInput& operands);
  // The plan (null for views). Operands passed `infer`.
  void (*plan)(const PlanInput& operands, OpPlan& out);
  // With may_run_in_place: the inputs (bit i: input i) whose storage output 0
  // may take; other inputs naming the same value share it. Every input by
  // default; update_slice only x (its update and start indices are read while
  // the result is written).
  uint32_t in_place_inputs = ~0u;
  // The inputs (bit i: input i) that must never share output 0's storage
  // when it runs in place: read while the result is written, so a value
  // that is both data and one of them cannot be overwritten (scatter_nd and
  // scatter_elements: indices and updates). update_slice's update may: then
  // it is the whole result.
  uint32_t read_while_writing = 0;
  // Bounded dims (docs/design-notes.md): the input holding the run-time
  // extent of input `extent_of`'s bounded dim (compact), -1: none. The
  // verifier checks it is that value's extent.
  int extent_input = -1;
  int extent_of = -1;
};

const OpDef& op_def(OpId id);
std::optional<OpId> find_op(std::string_view name);

// Entry points: the common checks (operand counts, ranks up to kMaxRank, byte
// sizes, f32-only operands), then the operator's own rule. Messages start
// with "@name: ".
Result<std::vector<int64_t>> lower_attributes(OpId id, std::span<const TensorType> inputs,
                                              const AttrMap& attrs, std::span<const TensorType> declared);
// `raise` after the common operand count check (an empty map when it fails).
AttrMap raise_attributes(OpId id, std::span<const TensorType> inputs, std::span<const int64_t> params);
Result<std::vector<TensorType>> infer_result_types(OpId id, std::span<const TensorType> inputs,
                                                   std::span<const int64_t> params);
// Single-result shorthand (fails for an operator that gives several).
Result<TensorType> infer_result_type(OpId id, std::span<const TensorType> inputs,
                                     std::span<const int64_t> params);
uint64_t workspace_bytes(OpId id, std::span<const TensorType> inputs, std::span<const int64_t> params);
// Runs the result-type rule again, checks `outputs` against it, then plans.
// `input_strides` as PlanInput's; an input given strides its operator does
// not accept (accepts_strided_input) is refused.
Result<OpPlan> plan_op(OpId id, std::span<const TensorType> inputs, std::span<const TensorType> outputs,
                       std::span<const int64_t> params,
                       std::span<const std::vector<int64_t>> input_strides = {});
KernelKey kernel_key(OpId id, std::span<const TensorType> inputs, std::span<const TensorType> outputs);

// ---- bounded dims (docs/design-notes.md) ----------------------------------------

// Where a result's bounded dim gets its run-time extent: the extent of the
// bounded dim of each input in `inputs` (all of them the same value, which
// the builder and the verifier check), or result `result` of the same
// instruction (an i64[] the operator writes). Neither: the result is not bounded.
// Or (bound) input `operand` itself: an i64[] the operator is given.
struct ExtentSource {
  std::vector<int> inputs;
  int result = -1;
  int operand = -1;
  bool bounded() const { return result >= 0 || operand >= 0 || !inputs.empty(); }
};
// Per result of `outputs` (as infer_result_types gave them). infer_result_types
// marks a result's bounded dim by the same rule, in one place (ops/src/bounds.cc):
// maps and broadcasts, cast, copy, transpose, gather, slice and concat of
// other dims, reshapes keeping the dim pass it through; the operators that
// make one (nonzero, non_max_suppression, compress) name their count result;
// any other operator given a bounded operand is refused, naming the operand and dim.
// Empty when the rule refuses the operands (infer_result_types says why).
std::vector<ExtentSource> extent_sources(OpId id, std::span<const TensorType> inputs,
                                         std::span<const int64_t> params, std::span<const TensorType> outputs);
// Whether values of `type` need compacting to be read row-major at their
// actual extent: a bounded dim after a dim larger than 1.
bool bounded_is_padded(const TensorType& type);

// The epilogue words [activation, a, b] that apply unary operator `op` with
// its parameter words `params` inside a conv2d or matmul; nullopt when `op`
// is not one an epilogue can apply.
std::optional<std::vector<int64_t>> epilogue_words(OpId op, std::span<const int64_t> params);
// The inverse, for printers: the unary operator and its parameter words.
std::optional<std::pair<OpId, std::vector<int64_t>>> epilogue_op(std::span<const int64_t> words);
// Number of parameter words of an operator before its epilogue (conv2d 9, matmul 1: transpose_b;
// add, mul 0). A matmul with an epilogue always has its transpose_b word.
size_t epilogue_offset(OpId op);
// Whether conv2d's parameter words say channels-last ([N, H, W, C] in and out;
// the layout word after the epilogue, plans.h Conv2dPlan::channels_last).
bool conv2d_channels_last(std::span<const int64_t> params);
// Whether they say channels-last by Winograd: F(2x2, 3x3) (the layout word
// 2) or F(4x4, 3x3) (3); plans.h Conv2dPlan::winograd.
bool conv2d_winograd(std::span<const int64_t> params);
// The Winograd output tile's side: 2, 4, or 0 (not Winograd).
int64_t conv2d_winograd_tile(std::span<const int64_t> params);
// Whether max_pool's / average_pool's parameter words say channels-last (a 13th word, 1).
bool pool2d_channels_last(std::span<const int64_t> params);
// The .hxir name of an epilogue's activation word ("relu", "gelu_tanh", ...),
// its float parameter count in *floats; nullptr when unknown.
const char* activation_name(int64_t activation, int* floats = nullptr);

// ---- strided views (docs/views.md) ----------------------------------------------

// Where a view's elements lie in the value it views (its base): element
// (i_0, .., i_{r-1}) is base element offset + sum i_d * strides[d]. Empty
// strides: row-major over the view's own dims from `offset` on (a reshape,
// or a contiguous part of the base). Strides are never negative; 0 repeats
// an element (a broadcast).
struct ViewLayout {
  int64_t offset = 0;
  std::vector<int64_t> strides;
  bool strided() const { return !strides.empty(); }
};

// The elementwise maps: 1 for a unary map (relu, gelu, ..., reciprocal), 2
// for a binary one with numpy broadcasting (add .. pow, the comparisons), 0
// for any other operator. Their result does not depend on how the dims are
// stored, only on the operands' shapes (layout.h moves conversions past them).
int elementwise_map_arity(OpId op);
// reduce_sum .. reduce_log_sum: the reductions, [keepdims, axes...] over any dtype they take.
bool is_reduction(OpId op);
// Whether the kernels of `op` read input `input` through a strided view
// (PlanInput::input_strides): the f32 elementwise maps (unary and binary,
// comparisons), the reductions and copy. Every other operand must be
// row-major (an offset into its base is fine: the VM moves the pointer).
bool accepts_strided_input(OpId op, size_t input);
// accepts_strided_input, or a view with these strides that `op` reads as it
// lies all the same: matmul's a and b (rank >= 2) whose last stride is 1 and
// whose row stride is at least the row's length (a leading dimension, as
// BLAS takes it; batch strides any), e.g. the heads of an attention split
// by a transpose; attention's q, k and v likewise.
bool accepts_strided_layout(OpId op, size_t input, std::span<const int64_t> dims,
                            std::span<const int64_t> strides);
// Whether `op`'s result can be a view of its input 0 instead of a copy:
// transpose, slice, expand (and reshape, a view already).
bool can_be_view(OpId op);
// The layout of the result of `op` (can_be_view) as a view of the base of
// x, which is laid out in that base as `x_layout`; canonical (row-major
// strides dropped). nullopt where the result cannot be such a view: a slice
// with a negative step, a reshape of a strided x that would have to merge
// dims whose strides do not line up, an empty result.
std::optional<ViewLayout> result_view_layout(OpId op, const TensorType& x, const ViewLayout& x_layout,
                                             std::span<const int64_t> params, const TensorType& result);
// Drops strides equal to the row-major ones of `dims` (size-1 dims may have any).
void canonicalize_view(std::span<const int64_t> dims, ViewLayout& layout);
// The last base element a view of `dims` reaches, offset + sum (d_i - 1) * s_i
// (row-major strides when `strides` is empty), computed without overflow;
// -1 for an empty view (some dim 0). nullopt when it overflows int64 or an
// offset or stride is negative. A view fits a base of n elements iff this is < n.
std::optional<int64_t> view_last_element(std::span<const int64_t> dims, int64_t offset,
                                         std::span<const int64_t> strides);

// numpy broadcast of two shapes; nullopt when incompatible.
std::optional<std::vector<int64_t>> broadcast_shapes(std::span<const int64_t> a, std::span<const int64_t> b);

// ONNX Slice bounds along an axis of `dim` elements: `start` and `end`
// (negative ones count from the end) clamped for `step` (non-zero; negative
// walks backwards), and how many elements start, start + step, ... are taken.
// `start` is 0 when none is. @slice's lowering and the ONNX importer's
// constant folding both use it.
struct SliceBounds {
  int64_t start = 0;
  int64_t size = 0;
};
SliceBounds slice_bounds(int64_t start, int64_t end, int64_t step, int64_t dim);

}  // namespace hexir::ops
