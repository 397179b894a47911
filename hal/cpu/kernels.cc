// The kernel table: one line per builtin CPU kernel, looked up once per
// instruction at prepare.
#include "kernel_util.h"

namespace hexir::hal::cpu {
namespace {

using namespace internal;
using ops::OpId;
constexpr int kF32 = static_cast<int>(DType::kF32);

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
};

}  // namespace

KernelFn find_cpu_kernel(const ops::KernelKey& key) {
  // cast: one instantiation per (from, to) pair, picked by the pair.
  if (key.op == OpId::kCast) return cast_kernel(key.input, key.output);
  return find_kernel(std::span<const KernelEntry<KernelFn>>(kKernels), key);
}

}  // namespace hexir::hal::cpu
