// Half-precision operands through the f32 kernels (hexir/ops/widen.h).
#include "hexir/ops/widen.h"

namespace hexir::ops {

bool widens_halves(OpId op) {
  switch (op) {
    // The float operators of the base set (the ones whose rules take f16 and
    // bf16); an operator added later joins here and in the backends' tables
    // (docs/operators.md "Adding an operator").
    case OpId::kAdd: case OpId::kSub: case OpId::kMul: case OpId::kDiv: case OpId::kMaximum:
    case OpId::kMinimum: case OpId::kPow: case OpId::kMod:
    case OpId::kRelu: case OpId::kGelu: case OpId::kSilu: case OpId::kSigmoid: case OpId::kTanh:
    case OpId::kExp: case OpId::kSqrt: case OpId::kRsqrt: case OpId::kNeg: case OpId::kLeakyRelu:
    case OpId::kClip: case OpId::kHardSigmoid: case OpId::kHardSwish: case OpId::kErf: case OpId::kLog:
    case OpId::kAbs: case OpId::kReciprocal: case OpId::kSoftplus: case OpId::kSign: case OpId::kCeil:
    case OpId::kFloor: case OpId::kRound:
    case OpId::kEqual: case OpId::kLess: case OpId::kGreater: case OpId::kLessOrEqual:
    case OpId::kGreaterOrEqual:
    case OpId::kMatmul: case OpId::kConv2d: case OpId::kSeparableConv2d: case OpId::kConvTranspose:
    case OpId::kMaxPool: case OpId::kAveragePool: case OpId::kResize:
    case OpId::kSoftmax: case OpId::kLayernorm: case OpId::kReduceSum: case OpId::kReduceMean:
    case OpId::kReduceMax: case OpId::kArgMax:
    case OpId::kSin: case OpId::kCos: case OpId::kTan: case OpId::kAsin: case OpId::kAcos: case OpId::kAtan:
    case OpId::kSinh: case OpId::kCosh: case OpId::kAsinh: case OpId::kAcosh: case OpId::kAtanh:
    case OpId::kIsInf: case OpId::kIsNaN: case OpId::kElu: case OpId::kSelu: case OpId::kCelu: case OpId::kMish:
    case OpId::kSoftsign: case OpId::kThresholdedRelu: case OpId::kShrink: case OpId::kPRelu:
    case OpId::kGroupNorm: case OpId::kLogSoftmax: case OpId::kHardmax:
    case OpId::kReduceMin: case OpId::kReduceProd: case OpId::kReduceL1: case OpId::kReduceL2:
    case OpId::kReduceLogSumExp: case OpId::kReduceSumSquare: case OpId::kReduceLogSum: case OpId::kArgMin:
    case OpId::kTopK: case OpId::kCumSum:
      return true;
    default:
      return false;
  }
}

bool is_widened(OpId op, std::span<const TensorType> inputs, std::span<const TensorType> outputs) {
  if (!widens_halves(op)) return false;
  for (const TensorType& t : inputs)
    if (is_half(t.dtype)) return true;
  for (const TensorType& t : outputs)
    if (is_half(t.dtype)) return true;
  return false;
}

std::vector<TensorType> widened_types(std::span<const TensorType> types) {
  std::vector<TensorType> out(types.begin(), types.end());
  for (TensorType& t : out)
    if (is_half(t.dtype)) t.dtype = DType::kF32;
  return out;
}

}  // namespace hexir::ops
