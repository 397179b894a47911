// cuBLAS, loaded at run time like the driver (dlopen of libcublas.so.13, then
// the toolkit's lib64 this build was configured with). Optional: without it
// matmul runs the tiled kernel. Only the few entry points used are declared,
// with cuBLAS's C types spelled out, so no cuBLAS header is needed.
#pragma once

#include <cuda.h>

#include <string>

#include "cuda_dispatch.h"
#include "cuda_driver.h"
#include "hexir/base/status.h"

namespace hexir::hal::cuda {

struct BlasLibrary {
  using Handle = void*;
  int (*create)(Handle*) = nullptr;                       // cublasCreate_v2
  int (*destroy)(Handle) = nullptr;                       // cublasDestroy_v2
  int (*set_stream)(Handle, CUstream) = nullptr;          // cublasSetStream_v2
  int (*set_math_mode)(Handle, int) = nullptr;            // cublasSetMathMode
  int (*set_workspace)(Handle, void*, size_t) = nullptr;  // cublasSetWorkspace_v2
  int (*sgemm)(Handle, int, int, int, int, int, const float*, const float*, int, const float*, int,
               const float*, float*, int) = nullptr;  // cublasSgemm_v2
  int (*sgemm_strided_batched)(Handle, int, int, int, int, int, const float*, const float*, int, long long,
                               const float*, int, long long, const float*, float*, int, long long,
                               int) = nullptr;  // cublasSgemmStridedBatched
  void* library = nullptr;
  std::string path;  // what was loaded
};

// Loaded once per process; kUnavailable when no libcublas can be opened.
Result<const BlasLibrary*> blas_library();

// One cuBLAS handle bound to a stream, with its own workspace (so calls can be
// captured into a CUDA graph without cuBLAS allocating).
class BlasHandle {
 public:
  static Result<std::unique_ptr<BlasHandle>> create(const Driver& driver, const BlasLibrary& blas,
                                                    CUstream stream);
  ~BlasHandle();
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;

  // Row-major C = A x B per batch element (see GemmBatch).
  Status gemm(const GemmBatch& g);

 private:
  BlasHandle(const Driver& driver, const BlasLibrary& blas) : driver_(driver), blas_(blas) {}
  const Driver& driver_;
  const BlasLibrary& blas_;
  BlasLibrary::Handle handle_ = nullptr;
  CUdeviceptr workspace_ = 0;
};

}  // namespace hexir::hal::cuda
