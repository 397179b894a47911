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

using format::KernelId;

constexpr std::array<KernelFn, format::kKernelCount> make_table() {
  std::array<KernelFn, format::kKernelCount> table{};
  auto set = [&table](KernelId id, KernelFn fn) { table[static_cast<size_t>(id)] = fn; };
  set(KernelId::kAdd, internal::add);
  set(KernelId::kSub, internal::sub);
  set(KernelId::kMul, internal::mul);
  set(KernelId::kDiv, internal::div);
  set(KernelId::kMaximum, internal::maximum);
  set(KernelId::kMinimum, internal::minimum);
  set(KernelId::kRelu, internal::relu);
  set(KernelId::kGelu, internal::gelu);
  set(KernelId::kSilu, internal::silu);
  set(KernelId::kSigmoid, internal::sigmoid);
  set(KernelId::kTanh, internal::tanh);
  set(KernelId::kExp, internal::exp);
  set(KernelId::kSqrt, internal::sqrt);
  set(KernelId::kRsqrt, internal::rsqrt);
  set(KernelId::kNeg, internal::neg);
  set(KernelId::kMatmul, internal::matmul);
  set(KernelId::kSoftmax, internal::softmax);
  set(KernelId::kLayernorm, internal::layernorm);
  set(KernelId::kTranspose, internal::transpose);
  set(KernelId::kReshape, nullptr);  // a view: never dispatched
  set(KernelId::kReduceSum, internal::reduce_sum);
  set(KernelId::kReduceMean, internal::reduce_mean);
  set(KernelId::kConcat, internal::concat);
  set(KernelId::kCopy, internal::copy);
  return table;
}

constexpr std::array<KernelFn, format::kKernelCount> kKernelTable = make_table();

}  // namespace

KernelFn kernel_function(format::KernelId id) {
  auto index = static_cast<size_t>(id);
  if (index >= kKernelTable.size()) return nullptr;
  return kKernelTable[index];
}

}  // namespace hexir::hal::cpu
