// What running an operator once costs, in floating-point operations: the
// compiler's rematerialization weighs the bytes a recomputation saves
// against this, and hexir-dump reports the FLOPs recomputed per invoke.
#pragma once

#include <cstdint>
#include <span>

#include "hexir/base/types.h"
#include "hexir/ops/op.h"

namespace hexir::ops {

// An estimate of the work of one dispatch of `id` on operands that passed its
// result-type rule, by the operator's own rule (OpDef::flops): 2 per
// multiply-add of a contraction (matmul: 2*m*n*k, conv2d: 2 * output elements
// * C/groups * KH * KW), taps per output element of a pool, input elements of
// a reduction, a few per element of softmax and layernorm, and one per output
// element of an elementwise operator or a data movement (transpose, copy,
// slice, concat, ...). Views cost nothing. Saturates at UINT64_MAX instead of
// wrapping.
uint64_t flop_estimate(OpId id, std::span<const TensorType> inputs, std::span<const TensorType> outputs,
                       std::span<const int64_t> params);

}  // namespace hexir::ops
