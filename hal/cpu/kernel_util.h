// Shared helpers and per-kernel entry points of the builtin CPU kernels.
// Internal to hal/cpu; the public surface is cpu::kernel_function().
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "hexir/base/status.h"
#include "hexir/base/types.h"
#include "hexir/hal/device.h"

namespace hexir::hal::cpu::internal {

// Kernels keep index bookkeeping in fixed-size arrays so they never allocate.
inline constexpr uint32_t kMaxRank = 8;

inline int64_t element_count(const TensorArg& t) {
  int64_t n = 1;
  for (uint32_t i = 0; i < t.rank; ++i) n *= t.dims[i];
  return n;
}

// Product of dims[begin, end).
inline int64_t dims_product(const int64_t* dims, uint32_t begin, uint32_t end) {
  int64_t n = 1;
  for (uint32_t i = begin; i < end; ++i) n *= dims[i];
  return n;
}

inline const float* f32_in(const TensorArg& t) { return static_cast<const float*>(t.data); }
inline float* f32_out(const TensorArg& t) { return static_cast<float*>(t.data); }

// Cheap structural checks every kernel runs first: operand counts, ranks within
// kMaxRank and (unless the kernel moves bytes of any dtype) f32 operands. The
// verifier has checked shapes; these only keep a misused kernel from running
// off its fixed-size arrays. Error paths may allocate (the message); the ok
// path does not.
Status check_operands(const DispatchArgs& args, const char* kernel, uint32_t min_inputs,
                      uint32_t max_inputs, bool f32_only);

// Advances a row-major multi-index `index` over `dims` (rank entries) and
// returns false after the last one. Dims of size 0 never reach here.
inline bool next_index(int64_t* index, const int64_t* dims, uint32_t rank) {
  for (uint32_t i = rank; i-- > 0;) {
    if (++index[i] < dims[i]) return true;
    index[i] = 0;
  }
  return false;
}

// One function per catalog id; see format/kernel_catalog.h for operand and
// parameter conventions.
Status add(const DispatchArgs& args);
Status sub(const DispatchArgs& args);
Status mul(const DispatchArgs& args);
Status div(const DispatchArgs& args);
Status maximum(const DispatchArgs& args);
Status minimum(const DispatchArgs& args);
Status relu(const DispatchArgs& args);
Status gelu(const DispatchArgs& args);
Status silu(const DispatchArgs& args);
Status sigmoid(const DispatchArgs& args);
Status tanh(const DispatchArgs& args);
Status exp(const DispatchArgs& args);
Status sqrt(const DispatchArgs& args);
Status rsqrt(const DispatchArgs& args);
Status neg(const DispatchArgs& args);
Status matmul(const DispatchArgs& args);
Status softmax(const DispatchArgs& args);
Status layernorm(const DispatchArgs& args);
Status transpose(const DispatchArgs& args);
Status reduce_sum(const DispatchArgs& args);
Status reduce_mean(const DispatchArgs& args);
Status concat(const DispatchArgs& args);
Status copy(const DispatchArgs& args);

}  // namespace hexir::hal::cpu::internal
