#include "passes/fold.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>

#include "hexir/hal/cpu_kernels.h"

namespace hexir::compiler {

namespace {

// Operand memory as the VM gives it to a kernel: 64-byte aligned (the
// importer's host tensors and file ranges promise less).
class AlignedBytes {
 public:
  explicit AlignedBytes(uint64_t size)
      : size_(size), data_(size ? static_cast<uint8_t*>(::operator new(size, std::align_val_t{64})) : nullptr) {
    if (size) std::memset(data_.get(), 0, size);
  }
  uint8_t* data() const { return data_.get(); }
  uint64_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { ::operator delete(p, std::align_val_t{64}); }
  };
  uint64_t size_;
  std::unique_ptr<uint8_t, Free> data_;
};

}  // namespace

Result<std::optional<std::vector<HostResult>>> evaluate_on_cpu(ops::OpId op, std::span<const int64_t> params,
                                                               std::span<const HostOperand> inputs,
                                                               uint64_t max_bytes) {
  using NoFold = std::optional<std::vector<HostResult>>;
  std::vector<TensorType> in_types;
  for (const HostOperand& in : inputs) {
    Result<uint64_t> size = byte_size(in.type);
    if (!size.ok() || *size != in.bytes.size()) return NoFold();
    in_types.push_back(in.type);
  }
  Result<std::vector<TensorType>> out_types = ops::infer_result_types(op, in_types, params);
  if (!out_types.ok()) return NoFold();
  uint64_t out_bytes = 0;
  for (const TensorType& t : *out_types) {
    Result<uint64_t> size = byte_size(t);
    if (!size.ok() || *size > max_bytes - std::min(out_bytes, max_bytes)) return NoFold();
    out_bytes += *size;
  }
  std::vector<HostResult> results;
  const ops::OpDef& def = ops::op_def(op);
  if (def.is_view) {  // the input's bytes, read under the result type
    results.push_back({(*out_types)[0], std::vector<uint8_t>(inputs[0].bytes.begin(), inputs[0].bytes.end())});
    return NoFold(std::move(results));
  }
  const hal::cpu::KernelFn kernel = hal::cpu::find_cpu_kernel(ops::kernel_key(op, in_types, *out_types));
  if (kernel == nullptr) return NoFold();
  const uint64_t workspace_size = ops::workspace_bytes(op, in_types, params);
  if (workspace_size > max_bytes) return NoFold();
  HEXIR_ASSIGN_OR_RETURN(ops::OpPlan plan, ops::plan_op(op, in_types, *out_types, params));

  std::vector<AlignedBytes> memory;
  std::vector<void*> operands;
  for (const HostOperand& in : inputs) {
    memory.emplace_back(in.bytes.size());
    if (!in.bytes.empty()) std::memcpy(memory.back().data(), in.bytes.data(), in.bytes.size());
    operands.push_back(memory.back().data());
  }
  for (const TensorType& t : *out_types) {
    memory.emplace_back(*byte_size(t));
    operands.push_back(memory.back().data());
  }
  AlignedBytes workspace(workspace_size);
  hal::Dispatch dispatch;
  dispatch.kernel = reinterpret_cast<uintptr_t>(kernel);
  dispatch.plan = plan.words().data();
  dispatch.operands = operands.data();
  dispatch.input_count = static_cast<uint32_t>(inputs.size());
  dispatch.output_count = static_cast<uint32_t>(out_types->size());
  dispatch.workspace = workspace.data();
  dispatch.workspace_size = workspace.size();
  // No thread pool: the kernels split work only where the split never changes a result.
  HEXIR_RETURN_IF_ERROR(kernel(hal::KernelContext{}, dispatch));
  for (size_t j = 0; j < out_types->size(); ++j) {
    const AlignedBytes& out = memory[inputs.size() + j];
    results.push_back({(*out_types)[j], std::vector<uint8_t>(out.data(), out.data() + out.size())});
  }
  return NoFold(std::move(results));
}

}  // namespace hexir::compiler
