// Turns one HAL dispatch into CUDA kernel launches. Every kernel has one host
// function here that copies the dispatch's operand pointers and its operator's
// plan (ops/plans.h, computed at prepare) into the kernel's parameter struct
// (kernels/params.h) on the stack and launches: no validation, no geometry, no
// allocation, no CUDA headers. The launches go through a Launcher, which is the
// driver on a real device and a host emulation in the conformance tests.
#pragma once

#include <cstdint>

#include "hexir/base/status.h"
#include "hexir/hal/device.h"
#include "kernels/params.h"

namespace hexir::hal::cuda {

struct LaunchConfig {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
};

// C = A x B for `batch` row-major matrices: A [m,k], B [k,n], C [m,n]; stride_a
// or stride_b 0 repeats one matrix. Dims fit in int32 (checked by the caller).
struct GemmBatch {
  const float* a = nullptr;
  const float* b = nullptr;
  float* c = nullptr;
  int32_t m = 0, n = 0, k = 0;
  int32_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t lda = 0, ldb = 0;   // row strides of a and of b as stored (0: k, and n or k)
  bool b_transposed = false;  // b stored [n, k] per batch element
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  // `params` points at the kernel's parameter struct (see HEXIR_CUDA_KERNELS).
  virtual Status launch(Kernel kernel, const LaunchConfig& config, void* params) = 0;
  // Device-to-device copy of non-overlapping ranges, ordered with the launches.
  virtual Status copy(void* dst, const void* src, uint64_t bytes) = 0;
  // A library GEMM (cuBLAS); when has_gemm() is false matmul uses its own kernel.
  virtual bool has_gemm() const { return false; }
  virtual Status gemm(const GemmBatch& batch) {
    (void)batch;
    return Status(StatusCode::kUnimplemented, std::string());
  }
};

// A kernel's host side: fills its parameters from `dispatch` and launches.
using CudaKernelFn = Status (*)(const Dispatch& dispatch, Launcher& launcher);

// The function registered for `key` (one table line per operator and dtype);
// null when there is none.
CudaKernelFn find_cuda_kernel(const ops::KernelKey& key);

// resolve_kernel for the cuda devices: the function pointer as the handle, or
// hal::no_kernel("cuda", key).
Result<uintptr_t> resolve_cuda_kernel(const ops::KernelKey& key);

// Enqueues `dispatch` (its kernel a handle from resolve_cuda_kernel, non-zero)
// through `launcher`.
inline Status enqueue_dispatch(const Dispatch& dispatch, Launcher& launcher) {
  return reinterpret_cast<CudaKernelFn>(dispatch.kernel)(dispatch, launcher);
}

// Enqueues a fill of `bytes` bytes at dst with `pattern` (1..16 bytes) repeated.
Status enqueue_pattern_fill(void* dst, uint64_t bytes, const void* pattern, uint32_t pattern_size,
                            Launcher& launcher);

// 1-D launch shape for n items of a grid-stride kernel.
LaunchConfig linear_config(int64_t n);

}  // namespace hexir::hal::cuda
