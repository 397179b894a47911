// The kernel table: one line per builtin CPU kernel, looked up once per
// instruction at prepare.
#include "kernel_util.h"
#include "widen.h"

namespace hexir::hal::cpu {
namespace {

using namespace internal;
using ops::OpId;
constexpr int kF32 = static_cast<int>(DType::kF32);
constexpr int kI32 = static_cast<int>(DType::kI32);
constexpr int kI64 = static_cast<int>(DType::kI64);
constexpr int kF16 = static_cast<int>(DType::kF16);
constexpr int kBF16 = static_cast<int>(DType::kBF16);
constexpr int kI8 = static_cast<int>(DType::kI8);
constexpr int kU8 = static_cast<int>(DType::kU8);

// f16 and bf16 through the f32 kernel (widen.h): keyed by the half dtype of
// the key input and of the result, or of the key input only (a bool or i64 result).
#define HEXIR_WIDENED(op, fn) {OpId::op, kF16, kF16, widened<fn>}, {OpId::op, kBF16, kBF16, widened<fn>}
#define HEXIR_WIDENED_KEY(op, fn) \
  {OpId::op, kF16, kAnyDType, widened<fn>}, {OpId::op, kBF16, kAnyDType, widened<fn>}

constexpr KernelEntry<KernelFn> kKernels[] = {
    {OpId::kAdd, kF32, kF32, add},
    {OpId::kSub, kF32, kF32, sub},
    {OpId::kMul, kF32, kF32, mul},
    {OpId::kDiv, kF32, kF32, div},
    {OpId::kMaximum, kF32, kF32, maximum},
    {OpId::kMinimum, kF32, kF32, minimum},
    {OpId::kRelu, kF32, kF32, relu},
    {OpId::kGelu, kF32, kF32, gelu},
    {OpId::kSilu, kF32, kF32, silu},
    {OpId::kSigmoid, kF32, kF32, sigmoid},
    {OpId::kTanh, kF32, kF32, tanh},
    {OpId::kExp, kF32, kF32, exp},
    {OpId::kSqrt, kF32, kF32, sqrt},
    {OpId::kRsqrt, kF32, kF32, rsqrt},
    {OpId::kNeg, kF32, kF32, neg},
    {OpId::kMatmul, kF32, kF32, matmul},
    {OpId::kSoftmax, kF32, kF32, softmax},
    {OpId::kAttention, kF32, kF32, attention},
    {OpId::kQuantizedMatmul, kF32, kF32, quantized_matmul},
    {OpId::kInt4Matmul, kF32, kF32, int4_matmul},
    {OpId::kDequantizeInt4, kU8, kF32, dequantize_int4},
    {OpId::kIntegerMatmul, kU8, kI32, integer_matmul},
    {OpId::kQuantizedConv2d, kU8, kU8, quantized_conv2d},
    {OpId::kQuantizedAdd, kU8, kU8, quantized_add},
    {OpId::kLstmCell, kF32, kF32, lstm_cell},
    {OpId::kQuantizeLinear, kI8, kI8, quantize_linear<int8_t>},
    {OpId::kQuantizeLinear, kU8, kU8, quantize_linear<uint8_t>},
    {OpId::kDequantizeLinear, kI8, kF32, dequantize_linear<int8_t>},
    {OpId::kDequantizeLinear, kU8, kF32, dequantize_linear<uint8_t>},
    {OpId::kDequantizeLinear, kI32, kF32, dequantize_linear<int32_t>},
    {OpId::kLayernorm, kF32, kF32, layernorm},
    {OpId::kTranspose, kAnyDType, kAnyDType, strided_gather},
    {OpId::kReduceSum, kF32, kF32, reduce<float>},
    {OpId::kReduceMean, kF32, kF32, reduce<float>},
    {OpId::kConcat, kAnyDType, kAnyDType, concat},
    {OpId::kCopy, kAnyDType, kAnyDType, copy},
    {OpId::kSplit, kAnyDType, kAnyDType, split},
    {OpId::kWhere, kAnyDType, kAnyDType, where},
    {OpId::kGather, kAnyDType, kAnyDType, gather},
    {OpId::kSlice, kAnyDType, kAnyDType, strided_gather},
    {OpId::kConv2d, kF32, kF32, conv2d},
    {OpId::kSeparableConv2d, kF32, kF32, separable_conv2d},
    {OpId::kLeakyRelu, kF32, kF32, leaky_relu},
    {OpId::kClip, kF32, kF32, clip},
    {OpId::kHardSigmoid, kF32, kF32, hard_sigmoid},
    {OpId::kHardSwish, kF32, kF32, hard_swish},
    {OpId::kErf, kF32, kF32, erf},
    {OpId::kLog, kF32, kF32, log},
    {OpId::kAbs, kF32, kF32, abs},
    {OpId::kReciprocal, kF32, kF32, reciprocal},
    {OpId::kSoftplus, kF32, kF32, softplus},
    {OpId::kPow, kF32, kF32, pow},
    // Comparisons are keyed by the operands' dtype; the result is always bool.
    {OpId::kEqual, kF32, kAnyDType, equal<float>},
    {OpId::kEqual, kI32, kAnyDType, equal<int32_t>},
    {OpId::kEqual, kI64, kAnyDType, equal<int64_t>},
    {OpId::kLess, kF32, kAnyDType, less<float>},
    {OpId::kLess, kI32, kAnyDType, less<int32_t>},
    {OpId::kLess, kI64, kAnyDType, less<int64_t>},
    {OpId::kGreater, kF32, kAnyDType, greater<float>},
    {OpId::kGreater, kI32, kAnyDType, greater<int32_t>},
    {OpId::kGreater, kI64, kAnyDType, greater<int64_t>},
    // not: bool only (its rule); bytes in, bytes out.
    {OpId::kNot, kAnyDType, kAnyDType, logical_not},
    {OpId::kReduceMax, kF32, kF32, reduce<float>},
    {OpId::kMaxPool, kF32, kF32, pool2d},
    {OpId::kMaxPool, kU8, kU8, max_pool_u8},
    {OpId::kAveragePool, kF32, kF32, pool2d},
    {OpId::kPad, kAnyDType, kAnyDType, pad},
    {OpId::kExpand, kAnyDType, kAnyDType, strided_gather},
    {OpId::kResize, kF32, kF32, resize},
    {OpId::kConvTranspose, kF32, kF32, conv_transpose},
    // argmax: keyed by its f32 operand; the result is always i64 (its rule).
    {OpId::kArgMax, kF32, kAnyDType, argmax<float>},
    {OpId::kDynamicSlice, kAnyDType, kAnyDType, dynamic_slice},
    {OpId::kUpdateSlice, kAnyDType, kAnyDType, update_slice},
    // Integer arithmetic (the existing f32 operators on i32 and i64) and the
    // integer, boolean and rounding operators.
    {OpId::kAdd, kI32, kI32, int_add<int32_t>},
    {OpId::kAdd, kI64, kI64, int_add<int64_t>},
    {OpId::kSub, kI32, kI32, int_sub<int32_t>},
    {OpId::kSub, kI64, kI64, int_sub<int64_t>},
    {OpId::kMul, kI32, kI32, int_mul<int32_t>},
    {OpId::kMul, kI64, kI64, int_mul<int64_t>},
    {OpId::kDiv, kI32, kI32, int_div<int32_t>},
    {OpId::kDiv, kI64, kI64, int_div<int64_t>},
    {OpId::kMaximum, kI32, kI32, int_maximum<int32_t>},
    {OpId::kMaximum, kI64, kI64, int_maximum<int64_t>},
    {OpId::kMinimum, kI32, kI32, int_minimum<int32_t>},
    {OpId::kMinimum, kI64, kI64, int_minimum<int64_t>},
    {OpId::kNeg, kI32, kI32, int_neg<int32_t>},
    {OpId::kNeg, kI64, kI64, int_neg<int64_t>},
    {OpId::kAbs, kI32, kI32, int_abs<int32_t>},
    {OpId::kAbs, kI64, kI64, int_abs<int64_t>},
    {OpId::kMod, kF32, kF32, fmod},
    {OpId::kMod, kI32, kI32, int_mod<int32_t>},
    {OpId::kMod, kI64, kI64, int_mod<int64_t>},
    {OpId::kPow, kI32, kI32, int_pow<int32_t>},
    {OpId::kPow, kI64, kI64, int_pow<int64_t>},
    {OpId::kLessOrEqual, kF32, kAnyDType, less_or_equal<float>},
    {OpId::kLessOrEqual, kI32, kAnyDType, less_or_equal<int32_t>},
    {OpId::kLessOrEqual, kI64, kAnyDType, less_or_equal<int64_t>},
    {OpId::kGreaterOrEqual, kF32, kAnyDType, greater_or_equal<float>},
    {OpId::kGreaterOrEqual, kI32, kAnyDType, greater_or_equal<int32_t>},
    {OpId::kGreaterOrEqual, kI64, kAnyDType, greater_or_equal<int64_t>},
    // and, or, xor: bool only (their rule).
    {OpId::kAnd, kAnyDType, kAnyDType, logical_and},
    {OpId::kOr, kAnyDType, kAnyDType, logical_or},
    {OpId::kXor, kAnyDType, kAnyDType, logical_xor},
    {OpId::kSign, kF32, kF32, sign<float>},
    {OpId::kSign, kI32, kI32, sign<int32_t>},
    {OpId::kSign, kI64, kI64, sign<int64_t>},
    {OpId::kCeil, kF32, kF32, ceil},
    {OpId::kFloor, kF32, kF32, floor},
    {OpId::kRound, kF32, kF32, round},
    // none moves any dtype; the reductions' dtypes (f32, i32, i64) are checked by the rule.
    {OpId::kScatterND, kAnyDType, kAnyDType, scatter},
    {OpId::kScatterElements, kAnyDType, kAnyDType, scatter},
    // The unary math and ONNX activations (ops::math_of<F>); is_inf and is_nan: bool results (their rule).
    {OpId::kSin, kF32, kF32, math<ops::MathFn::kSin>},
    {OpId::kCos, kF32, kF32, math<ops::MathFn::kCos>},
    {OpId::kTan, kF32, kF32, math<ops::MathFn::kTan>},
    {OpId::kAsin, kF32, kF32, math<ops::MathFn::kAsin>},
    {OpId::kAcos, kF32, kF32, math<ops::MathFn::kAcos>},
    {OpId::kAtan, kF32, kF32, math<ops::MathFn::kAtan>},
    {OpId::kSinh, kF32, kF32, math<ops::MathFn::kSinh>},
    {OpId::kCosh, kF32, kF32, math<ops::MathFn::kCosh>},
    {OpId::kAsinh, kF32, kF32, math<ops::MathFn::kAsinh>},
    {OpId::kAcosh, kF32, kF32, math<ops::MathFn::kAcosh>},
    {OpId::kAtanh, kF32, kF32, math<ops::MathFn::kAtanh>},
    {OpId::kIsInf, kF32, kAnyDType, math<ops::MathFn::kIsInf>},
    {OpId::kIsNaN, kF32, kAnyDType, math<ops::MathFn::kIsNaN>},
    {OpId::kElu, kF32, kF32, math<ops::MathFn::kElu>},
    {OpId::kSelu, kF32, kF32, math<ops::MathFn::kSelu>},
    {OpId::kCelu, kF32, kF32, math<ops::MathFn::kCelu>},
    {OpId::kMish, kF32, kF32, math<ops::MathFn::kMish>},
    {OpId::kSoftsign, kF32, kF32, math<ops::MathFn::kSoftsign>},
    {OpId::kThresholdedRelu, kF32, kF32, math<ops::MathFn::kThresholdedRelu>},
    {OpId::kShrink, kF32, kF32, math<ops::MathFn::kShrink>},
    {OpId::kPRelu, kF32, kF32, prelu},
    {OpId::kGroupNorm, kF32, kF32, group_norm},
    // f16 and bf16: the float operators through their f32 kernels (ops/widen.h's list).
    HEXIR_WIDENED(kAdd, add), HEXIR_WIDENED(kSub, sub), HEXIR_WIDENED(kMul, mul), HEXIR_WIDENED(kDiv, div),
    HEXIR_WIDENED(kMaximum, maximum), HEXIR_WIDENED(kMinimum, minimum), HEXIR_WIDENED(kPow, pow),
    HEXIR_WIDENED(kMod, fmod), HEXIR_WIDENED(kRelu, relu), HEXIR_WIDENED(kGelu, gelu),
    HEXIR_WIDENED(kSilu, silu), HEXIR_WIDENED(kSigmoid, sigmoid), HEXIR_WIDENED(kTanh, tanh),
    HEXIR_WIDENED(kExp, exp), HEXIR_WIDENED(kSqrt, sqrt), HEXIR_WIDENED(kRsqrt, rsqrt), HEXIR_WIDENED(kNeg, neg),
    HEXIR_WIDENED(kLeakyRelu, leaky_relu), HEXIR_WIDENED(kClip, clip), HEXIR_WIDENED(kHardSigmoid, hard_sigmoid),
    HEXIR_WIDENED(kHardSwish, hard_swish), HEXIR_WIDENED(kErf, erf), HEXIR_WIDENED(kLog, log),
    HEXIR_WIDENED(kAbs, abs), HEXIR_WIDENED(kReciprocal, reciprocal), HEXIR_WIDENED(kSoftplus, softplus),
    HEXIR_WIDENED(kSign, sign<float>), HEXIR_WIDENED(kCeil, ceil), HEXIR_WIDENED(kFloor, floor),
    HEXIR_WIDENED(kRound, round), HEXIR_WIDENED_KEY(kEqual, equal<float>), HEXIR_WIDENED_KEY(kLess, less<float>),
    HEXIR_WIDENED_KEY(kGreater, greater<float>), HEXIR_WIDENED_KEY(kLessOrEqual, less_or_equal<float>),
    HEXIR_WIDENED_KEY(kGreaterOrEqual, greater_or_equal<float>), HEXIR_WIDENED(kMatmul, matmul),
    HEXIR_WIDENED(kConv2d, conv2d), HEXIR_WIDENED(kSeparableConv2d, separable_conv2d),
    HEXIR_WIDENED(kConvTranspose, conv_transpose), HEXIR_WIDENED(kMaxPool, pool2d),
    HEXIR_WIDENED(kAveragePool, pool2d), HEXIR_WIDENED(kResize, resize), HEXIR_WIDENED(kSoftmax, softmax),
    HEXIR_WIDENED(kLayernorm, layernorm), HEXIR_WIDENED(kReduceSum, reduce<float>),
    HEXIR_WIDENED(kReduceMean, reduce<float>), HEXIR_WIDENED(kReduceMax, reduce<float>),
    HEXIR_WIDENED_KEY(kArgMax, argmax<float>),
    // The reductions: every one on f32, those ONNX defines on integers on i32 and i64 (their rule).
    {OpId::kReduceSum, kI32, kI32, reduce<int32_t>},
    {OpId::kReduceSum, kI64, kI64, reduce<int64_t>},
    {OpId::kReduceMax, kI32, kI32, reduce<int32_t>},
    {OpId::kReduceMax, kI64, kI64, reduce<int64_t>},
    {OpId::kReduceMin, kF32, kF32, reduce<float>},
    {OpId::kReduceMin, kI32, kI32, reduce<int32_t>},
    {OpId::kReduceMin, kI64, kI64, reduce<int64_t>},
    {OpId::kReduceProd, kF32, kF32, reduce<float>},
    {OpId::kReduceProd, kI32, kI32, reduce<int32_t>},
    {OpId::kReduceProd, kI64, kI64, reduce<int64_t>},
    {OpId::kReduceL1, kF32, kF32, reduce<float>},
    {OpId::kReduceL1, kI32, kI32, reduce<int32_t>},
    {OpId::kReduceL1, kI64, kI64, reduce<int64_t>},
    {OpId::kReduceL2, kF32, kF32, reduce<float>},
    {OpId::kReduceLogSumExp, kF32, kF32, reduce<float>},
    {OpId::kReduceSumSquare, kF32, kF32, reduce<float>},
    {OpId::kReduceSumSquare, kI32, kI32, reduce<int32_t>},
    {OpId::kReduceSumSquare, kI64, kI64, reduce<int64_t>},
    {OpId::kReduceLogSum, kF32, kF32, reduce<float>},
    // argmax, argmin: keyed by the operand; the result is always i64 (their rule).
    {OpId::kArgMax, kI32, kAnyDType, argmax<int32_t>},
    {OpId::kArgMax, kI64, kAnyDType, argmax<int64_t>},
    {OpId::kArgMin, kF32, kAnyDType, argmax<float>},
    {OpId::kArgMin, kI32, kAnyDType, argmax<int32_t>},
    {OpId::kArgMin, kI64, kAnyDType, argmax<int64_t>},
    {OpId::kLogSoftmax, kF32, kF32, log_softmax},
    {OpId::kHardmax, kF32, kF32, hardmax},
    // f16 and bf16 for the operators added after the first list (ops/widen.h).
    HEXIR_WIDENED(kSin, math<ops::MathFn::kSin>), HEXIR_WIDENED(kCos, math<ops::MathFn::kCos>),
    HEXIR_WIDENED(kTan, math<ops::MathFn::kTan>), HEXIR_WIDENED(kAsin, math<ops::MathFn::kAsin>),
    HEXIR_WIDENED(kAcos, math<ops::MathFn::kAcos>), HEXIR_WIDENED(kAtan, math<ops::MathFn::kAtan>),
    HEXIR_WIDENED(kSinh, math<ops::MathFn::kSinh>), HEXIR_WIDENED(kCosh, math<ops::MathFn::kCosh>),
    HEXIR_WIDENED(kAsinh, math<ops::MathFn::kAsinh>), HEXIR_WIDENED(kAcosh, math<ops::MathFn::kAcosh>),
    HEXIR_WIDENED(kAtanh, math<ops::MathFn::kAtanh>), HEXIR_WIDENED(kElu, math<ops::MathFn::kElu>),
    HEXIR_WIDENED(kSelu, math<ops::MathFn::kSelu>), HEXIR_WIDENED(kCelu, math<ops::MathFn::kCelu>),
    HEXIR_WIDENED(kMish, math<ops::MathFn::kMish>), HEXIR_WIDENED(kSoftsign, math<ops::MathFn::kSoftsign>),
    HEXIR_WIDENED(kThresholdedRelu, math<ops::MathFn::kThresholdedRelu>),
    HEXIR_WIDENED(kShrink, math<ops::MathFn::kShrink>), HEXIR_WIDENED_KEY(kIsInf, math<ops::MathFn::kIsInf>),
    HEXIR_WIDENED_KEY(kIsNaN, math<ops::MathFn::kIsNaN>), HEXIR_WIDENED(kPRelu, prelu),
    HEXIR_WIDENED(kGroupNorm, group_norm), HEXIR_WIDENED(kLogSoftmax, log_softmax),
    HEXIR_WIDENED(kHardmax, hardmax), HEXIR_WIDENED(kReduceMin, reduce<float>),
    HEXIR_WIDENED(kReduceProd, reduce<float>), HEXIR_WIDENED(kReduceL1, reduce<float>),
    HEXIR_WIDENED(kReduceL2, reduce<float>), HEXIR_WIDENED(kReduceLogSumExp, reduce<float>),
    HEXIR_WIDENED(kReduceSumSquare, reduce<float>), HEXIR_WIDENED(kReduceLogSum, reduce<float>),
    HEXIR_WIDENED_KEY(kArgMin, argmax<float>),
    // top_k: keyed by x; values of x's dtype, i64 indices.
    {OpId::kTopK, kF32, kAnyDType, top_k<float>},
    {OpId::kTopK, kI32, kAnyDType, top_k<int32_t>},
    {OpId::kTopK, kI64, kAnyDType, top_k<int64_t>},
    {OpId::kGatherElements, kAnyDType, kAnyDType, gather_indexed},
    {OpId::kGatherND, kAnyDType, kAnyDType, gather_indexed},
    {OpId::kCumSum, kF32, kF32, cumsum<float>},
    {OpId::kCumSum, kI32, kI32, cumsum<int32_t>},
    {OpId::kCumSum, kI64, kI64, cumsum<int64_t>},
    // top_k (values half, indices i64) and cumsum on halves through the f32 kernels.
    HEXIR_WIDENED_KEY(kTopK, top_k<float>), HEXIR_WIDENED(kCumSum, cumsum<float>),
    // Bounded dynamic shapes: byte-moving (nonzero reads the element size and sign from its plan).
    {OpId::kNonZero, kAnyDType, kAnyDType, nonzero},
    {OpId::kNonMaxSuppression, kF32, kAnyDType, non_max_suppression},
    {OpId::kCompress, kAnyDType, kAnyDType, compress},
    {OpId::kCompact, kAnyDType, kAnyDType, compact},
    {OpId::kBound, kAnyDType, kAnyDType, bound},
    {OpId::kUnbound, kAnyDType, kAnyDType, copy},  // the stored bytes (ops' CopyPlan)
};

// Kernels that prepare something from constant operands (their weights).
struct PrepareEntry {
  KernelFn kernel;
  KernelPrepare prepare;
};
constexpr PrepareEntry kPrepares[] = {
    {matmul, {matmul_prepared_bytes, matmul_prepare, 1u << 1, matmul_prepare_key}},  // B
    {conv2d, {conv2d_prepared_bytes, conv2d_prepare, 1u << 1, conv2d_prepare_key}},  // the weights
    {separable_conv2d,
     {separable_conv2d_prepared_bytes, separable_conv2d_prepare, 1u << 2, nullptr}},  // the 1x1's
    {conv_transpose,
     {conv_transpose_prepared_bytes, conv_transpose_prepare, 1u << 1, nullptr}},  // the weights
    // Their f16 / bf16 forms: the constants converted to f32 once, then packed as above.
    {widened<matmul>, {widened_bytes<matmul>, widened_fill<matmul>, 1u << 1, widened_key<matmul>}},
    {widened<conv2d>, {widened_bytes<conv2d>, widened_fill<conv2d>, 1u << 1, widened_key<conv2d>}},
    {widened<separable_conv2d>,
     {widened_bytes<separable_conv2d>, widened_fill<separable_conv2d>, 1u << 2, nullptr}},
    {widened<conv_transpose>,
     {widened_bytes<conv_transpose>, widened_fill<conv_transpose>, 1u << 1, nullptr}},
};

}  // namespace

const KernelPrepare* find_cpu_prepare(KernelFn kernel) {
  for (const PrepareEntry& e : kPrepares)
    if (e.kernel == kernel) return &e.prepare;
  return nullptr;
}

KernelFn find_cpu_kernel(const ops::KernelKey& key) {
  // cast: one instantiation per (from, to) pair, picked by the pair.
  if (key.op == OpId::kCast) return cast_kernel(key.input, key.output);
  return find_kernel(std::span<const KernelEntry<KernelFn>>(kKernels), key);
}

}  // namespace hexir::hal::cpu
