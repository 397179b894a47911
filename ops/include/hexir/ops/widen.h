// Half-precision operands (f16, bf16) through the f32 kernels
// (docs/design-notes.md "Half precision through the f32 kernels").
//
// An operator that computes on floats takes f16 and bf16 operands wherever it
// takes f32 ones (its rule: the float operands of one dtype, the result of
// that dtype). Its kernels are the f32 ones: the plan of such a dispatch is a
// WidenPlan followed by the f32 plan (computed for the same operands typed
// f32), and the backend's widening kernel converts each half operand to f32
// in the workspace, runs the f32 kernel on those copies (f32 accumulation),
// then rounds the f32 results back to half (nearest even). The workspace is
// planned like any kernel's scratch: nothing is allocated on invoke.
#pragma once

#include <cstdint>
#include <span>

#include "hexir/base/types.h"
#include "hexir/ops/op.h"

namespace hexir::ops {

// Inputs plus outputs a widened dispatch may have (separable_conv2d: 6 + 1).
inline constexpr int kMaxWidenOperands = 8;

struct WidenOperand {
  int32_t dtype;    // hexir::DType; f16 and bf16 are staged, others passed through
  int32_t staged;   // 1: converted through workspace[offset, offset + count * 4)
  int64_t count;    // elements staged (a strided input: up to its last element)
  uint64_t offset;  // of its f32 copy in the workspace
};

struct WidenPlan {
  int32_t input_count;
  int32_t output_count;
  // elementwise_map_arity of the operator: 1 or 2 lets a backend convert
  // block by block (the cpu: tiles in L1) where the f32 plan is flat; the
  // staging copies are still planned for backends that copy whole operands.
  int32_t map_arity;
  int32_t unused = 0;
  int64_t inner_words;       // the f32 plan's 8-byte words, right after this struct
  uint64_t staging_bytes;    // the f32 copies, at the workspace's start
  uint64_t inner_workspace;  // the f32 kernel's own scratch, right after them
  WidenOperand operands[kMaxWidenOperands];
};

// The f32 plan after the header.
inline const void* widen_inner_plan(const WidenPlan& p) {
  return reinterpret_cast<const uint64_t*>(&p) + (sizeof(WidenPlan) + 7) / 8;
}

inline bool is_half(DType t) { return t == DType::kF16 || t == DType::kBF16; }
inline bool is_float(DType t) { return t == DType::kF32 || is_half(t); }

// Whether `op` computes on floats through the f32 kernels (the operators
// whose rules take f16 and bf16), and whether this dispatch of it has a
// half operand, so its plan is a WidenPlan and its kernel the widening one.
bool widens_halves(OpId op);
bool is_widened(OpId op, std::span<const TensorType> inputs, std::span<const TensorType> outputs);

// The same operands with f16 and bf16 typed f32 (the f32 kernel's view).
std::vector<TensorType> widened_types(std::span<const TensorType> types);

}  // namespace hexir::ops
