// The kernel table: one line per builtin CPU kernel, looked up once per
// instruction at prepare.
#include "kernel_util.h"

namespace hexir::hal::cpu {
namespace {

using namespace internal;
using ops::OpId;
constexpr int kF32 = static_cast<int>(DType::kF32);
constexpr int kI32 = static_cast<int>(DType::kI32);
constexpr int kI64 = static_cast<int>(DType::kI64);

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
    {OpId::kLayernorm, kF32, kF32, layernorm},
    {OpId::kTranspose, kAnyDType, kAnyDType, strided_gather},
    {OpId::kReduceSum, kF32, kF32, reduce},
    {OpId::kReduceMean, kF32, kF32, reduce},
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
    {OpId::kReduceMax, kF32, kF32, reduce},
    {OpId::kMaxPool, kF32, kF32, pool2d},
    {OpId::kAveragePool, kF32, kF32, pool2d},
    {OpId::kPad, kAnyDType, kAnyDType, pad},
    {OpId::kExpand, kAnyDType, kAnyDType, strided_gather},
    {OpId::kResize, kF32, kF32, resize},
    {OpId::kConvTranspose, kF32, kF32, conv_transpose},
    // argmax: keyed by its f32 operand; the result is always i64 (its rule).
    {OpId::kArgMax, kF32, kAnyDType, argmax},
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
};

// Kernels that prepare something from constant operands (their weights).
struct PrepareEntry {
  KernelFn kernel;
  KernelPrepare prepare;
};
constexpr PrepareEntry kPrepares[] = {
    {matmul, {matmul_prepared_bytes, matmul_prepare, 1u << 1}},  // B
    {conv2d, {conv2d_prepared_bytes, conv2d_prepare, 1u << 1}},  // the weights
    {separable_conv2d, {separable_conv2d_prepared_bytes, separable_conv2d_prepare, 1u << 2}},  // the 1x1's
    {conv_transpose, {conv_transpose_prepared_bytes, conv_transpose_prepare, 1u << 1}},  // the weights
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
