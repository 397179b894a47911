// The kernel table: one builtin CPU function per catalog id.
#include <array>

#include "kernel_util.h"
#include "hexir/hal/cpu_kernels.h"

namespace hexir::hal::cpu {
namespace internal {

Status check_operands(const DispatchArgs& args, const char* kernel, uint32_t min_inputs,
                      uint32_t max_inputs, bool f32_only) {
  if (args.operands == nullptr || args.input_count < min_inputs || args.input_count > max_inputs ||
      args.operand_count != args.input_count + 1) {
    return invalid_argument(std::string(kernel) + ": expected " + std::to_string(min_inputs) +
                            (min_inputs == max_inputs ? "" : "+") + " inputs and one output, got " +
                            std::to_string(args.input_count) + " inputs of " +
                            std::to_string(args.operand_count) + " operands");
  }
  for (uint32_t i = 0; i < args.operand_count; ++i) {
    const TensorArg& t = args.operands[i];
    if (t.rank > kMaxRank) {
      return invalid_argument(std::string(kernel) + ": operand " + std::to_string(i) + " has rank " +
                              std::to_string(t.rank) + "; the cpu kernels support up to " +
                              std::to_string(kMaxRank));
    }
    if (t.rank > 0 && t.dims == nullptr) {
      return invalid_argument(std::string(kernel) + ": operand " + std::to_string(i) + " has no dims");
    }
    if (f32_only && t.dtype != DType::kF32) {
      return invalid_argument(std::string(kernel) + ": operand " + std::to_string(i) + " is " +
                              dtype_name(t.dtype) + ", expected f32");
    }
  }
  return ok_status();
}

}  // namespace internal

namespace {

using ops::OpId;

constexpr std::array<KernelFn, ops::kOpCount> make_table() {
  std::array<KernelFn, ops::kOpCount> table{};
  auto set = [&table](OpId id, KernelFn fn) { table[static_cast<size_t>(id)] = fn; };
  set(OpId::kAdd, internal::add);
  set(OpId::kSub, internal::sub);
  set(OpId::kMul, internal::mul);
  set(OpId::kDiv, internal::div);
  set(OpId::kMaximum, internal::maximum);
  set(OpId::kMinimum, internal::minimum);
  set(OpId::kRelu, internal::relu);
  set(OpId::kGelu, internal::gelu);
  set(OpId::kSilu, internal::silu);
  set(OpId::kSigmoid, internal::sigmoid);
  set(OpId::kTanh, internal::tanh);
  set(OpId::kExp, internal::exp);
  set(OpId::kSqrt, internal::sqrt);
  set(OpId::kRsqrt, internal::rsqrt);
  set(OpId::kNeg, internal::neg);
  set(OpId::kMatmul, internal::matmul);
  set(OpId::kSoftmax, internal::softmax);
  set(OpId::kLayernorm, internal::layernorm);
  set(OpId::kTranspose, internal::transpose);
  set(OpId::kReshape, nullptr);  // a view: never dispatched
  set(OpId::kReduceSum, internal::reduce_sum);
  set(OpId::kReduceMean, internal::reduce_mean);
  set(OpId::kConcat, internal::concat);
  set(OpId::kCopy, internal::copy);
  return table;
}

constexpr std::array<KernelFn, ops::kOpCount> kKernelTable = make_table();

}  // namespace

KernelFn kernel_function(ops::OpId id) {
  auto index = static_cast<size_t>(id);
  if (index >= kKernelTable.size()) return nullptr;
  return kKernelTable[index];
}

}  // namespace hexir::hal::cpu
