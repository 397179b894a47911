// The kernel catalog: the one list of kernels shared by the serializer (which
// checks result types and lowers attributes to parameters), the verifier
// (which re-checks both for every instruction of an untrusted file) and every
// HAL (which implements each id). Adding a kernel means adding it here first.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/base/types.h"

namespace hexir::format {

enum class KernelId : uint16_t {
  // Elementwise binary, numpy broadcasting. No parameters.
  kAdd, kSub, kMul, kDiv, kMaximum, kMinimum,
  // Elementwise unary. No parameters except gelu: [approximate] (0 = erf, 1 = tanh).
  kRelu, kGelu, kSilu, kSigmoid, kTanh, kExp, kSqrt, kRsqrt, kNeg,
  // numpy matmul: 1-D operands promoted and the added dim removed, batch dims broadcast.
  kMatmul,
  // params: [axis] (normalized to 0..rank-1)
  kSoftmax,
  // (x, gamma, beta); params: [axis, bit_cast<int64>(double epsilon)].
  // Normalizes over dims axis..rank-1; gamma and beta have shape x.dims[axis:].
  kLayernorm,
  // params: perm (rank entries, a permutation of 0..rank-1)
  kTranspose,
  // A view: shares its input's storage, never dispatched. params: the result dims.
  kReshape,
  // params: [keepdims (0|1), axis...] axes normalized, sorted, unique; none listed = all axes.
  kReduceSum, kReduceMean,
  // Variadic (>= 1 input); params: [axis] normalized.
  kConcat,
  // Explicit copy (returning an input or constant, or one value as two outputs). No params.
  kCopy,
  kCount,
};
inline constexpr int kKernelCount = static_cast<int>(KernelId::kCount);

enum class KernelClass : uint8_t { kElementwiseBinary, kElementwiseUnary, kOther };

struct KernelInfo {
  KernelId id;
  const char* name;          // as written after '@' in .hxir and stored in the kernel table
  KernelClass klass;
  int min_inputs;            // operand counts: inputs, then exactly one output
  int max_inputs;            // -1 = variadic
  bool may_run_in_place;     // result may take the storage of an input of equal byte size
  bool is_view;              // metadata only: result shares input 0's storage, never dispatched
  bool any_dtype;            // byte-moving kernels accept every dtype; the rest need f32
};

const KernelInfo& kernel_info(KernelId id);
std::optional<KernelId> find_kernel(std::string_view name);

// Scratch bytes a kernel wants for these operand types and (normalized)
// parameters; the plan provides them as DispatchArgs.workspace. Today only
// softmax over a non-last axis: 12 bytes per element of the dims after the
// axis. A kernel given less (or none) takes a slower path, same results.
uint64_t kernel_workspace_bytes(KernelId id, std::span<const TensorType> inputs, std::span<const int64_t> params);

// An attribute value as written in .hxir: {axis = -1, perm = [1, 0], approximate = "tanh"}.
struct AttrValue {
  std::variant<int64_t, double, std::string, std::vector<AttrValue>> value;
};
using AttrMap = std::map<std::string, AttrValue, std::less<>>;

// Checks attribute names and values and turns them into the normalized
// parameter words stored in the file. `result` is the declared result type;
// only reshape reads it (its dims become the parameters).
Result<std::vector<int64_t>> lower_attributes(KernelId id, std::span<const TensorType> inputs,
                                              const AttrMap& attrs, const TensorType& result);

// The shape rule: validates operand count, dtypes and normalized parameters
// and returns the result type. The verifier calls this on untrusted files, so
// it must reject every malformed parameter list without crashing.
Result<TensorType> infer_result_type(KernelId id, std::span<const TensorType> inputs,
                                     std::span<const int64_t> params);

// Broadcast of two shapes (numpy rules); nullopt when incompatible.
std::optional<std::vector<int64_t>> broadcast_shapes(std::span<const int64_t> a, std::span<const int64_t> b);

}  // namespace hexir::format
