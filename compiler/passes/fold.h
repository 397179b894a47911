// Constant folding through the operators themselves: one operator evaluated
// at compile time on host bytes by the builtin CPU kernel, planned as the VM
// plans it (ops::infer_result_types, ops::plan_op, hal::cpu::find_cpu_kernel
// on ops::kernel_key). The result is the bits the CPU kernel computes at run
// time, in the operator's own dtype; an operator or dtype with no CPU kernel
// does not fold here, and picks folding up the day its kernel is registered.
// The ONNX importer folds every node with constant inputs through it
// (frontends/onnx Importer::fold), so shape arithmetic on constants
// (ReduceMax -> Ceil) folds whichever operators it uses.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/base/types.h"
#include "hexir/ops/op.h"

namespace hexir::compiler {

// An operand in host memory: its type and its row-major bytes.
struct HostOperand {
  TensorType type;
  std::span<const uint8_t> bytes;
};

// A result computed at compile time.
struct HostResult {
  TensorType type;
  std::vector<uint8_t> bytes;
};

// `op` with parameter words `params` on `inputs`, evaluated by the CPU
// kernel. nullopt when it does not fold here: the operands fail the
// operator's rules (the caller's builder then reports why), the results
// (together) or the kernel's workspace hold more than `max_bytes`, or there
// is no CPU kernel for the operator and these dtypes. A view (reshape)
// folds to its input's bytes under the result type. An error: the kernel
// failed, as it would at run time (an index out of range).
Result<std::optional<std::vector<HostResult>>> evaluate_on_cpu(ops::OpId op, std::span<const int64_t> params,
                                                               std::span<const HostOperand> inputs,
                                                               uint64_t max_bytes);

}  // namespace hexir::compiler
