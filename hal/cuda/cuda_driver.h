// The CUDA driver API, loaded at run time with dlopen from one table of entry
// points (the pattern of IREE's cuda_dynamic_symbols), so libhexir_vm links
// and runs on machines without CUDA. Only the types and prototypes of cuda.h
// are used at build time; nothing links against libcuda or libcudart.
//
// Every symbol is looked up by its exact versioned name (cuMemAlloc_v2,
// cuMemAdvise_v2, ...): cuda.h maps the plain names to those with macros, and
// the unversioned exports keep their old signatures (CUDA 13's cuMemAdvise_v2
// and cuMemPrefetchAsync_v2 take a CUmemLocation; cuMemAdvise takes a CUdevice).
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

#include "hexir/base/status.h"

namespace hexir::hal::cuda {

// X(symbol): required entry points, by the exported (versioned) name.
#define HEXIR_CUDA_DRIVER_SYMBOLS(X) \
  X(cuInit)                          \
  X(cuDriverGetVersion)              \
  X(cuGetErrorName)                  \
  X(cuGetErrorString)                \
  X(cuDeviceGet)                     \
  X(cuDeviceGetCount)                \
  X(cuDeviceGetName)                 \
  X(cuDeviceTotalMem_v2)             \
  X(cuDeviceGetAttribute)            \
  X(cuDevicePrimaryCtxRetain)        \
  X(cuDevicePrimaryCtxRelease_v2)    \
  X(cuCtxSetCurrent)                 \
  X(cuCtxGetCurrent)                 \
  X(cuMemGetInfo_v2)                 \
  X(cuMemAlloc_v2)                   \
  X(cuMemFree_v2)                    \
  X(cuMemAllocManaged)               \
  X(cuMemAdvise_v2)                  \
  X(cuMemPrefetchAsync_v2)           \
  X(cuMemHostAlloc)                  \
  X(cuMemFreeHost)                   \
  X(cuMemHostGetDevicePointer_v2)    \
  X(cuMemcpyHtoD_v2)                 \
  X(cuMemcpyDtoH_v2)                 \
  X(cuMemcpyDtoD_v2)                 \
  X(cuMemcpyHtoDAsync_v2)            \
  X(cuMemcpyDtoHAsync_v2)            \
  X(cuMemcpyDtoDAsync_v2)            \
  X(cuMemcpyAsync)                   \
  X(cuMemsetD8_v2)                   \
  X(cuMemsetD16_v2)                  \
  X(cuMemsetD32_v2)                  \
  X(cuMemsetD8Async)                 \
  X(cuMemsetD16Async)                \
  X(cuMemsetD32Async)                \
  X(cuModuleLoadData)                \
  X(cuModuleGetFunction)             \
  X(cuModuleUnload)                  \
  X(cuLaunchKernel)                  \
  X(cuStreamCreate)                  \
  X(cuStreamDestroy_v2)              \
  X(cuStreamSynchronize)             \
  X(cuStreamBeginCapture_v2)         \
  X(cuStreamEndCapture)              \
  X(cuGraphInstantiateWithFlags)     \
  X(cuGraphLaunch)                   \
  X(cuGraphExecDestroy)              \
  X(cuGraphDestroy)                  \
  X(cuEventCreate)                   \
  X(cuEventRecord)                   \
  X(cuEventSynchronize)              \
  X(cuEventElapsedTime)              \
  X(cuEventDestroy_v2)               \
  X(cuStreamWaitEvent)

// The loaded table. Members are named exactly like the exported symbols and
// typed from the prototypes in cuda.h, so a signature mismatch cannot compile.
struct Driver {
#define HEXIR_CUDA_DECLARE(symbol) decltype(&::symbol) symbol = nullptr;
  HEXIR_CUDA_DRIVER_SYMBOLS(HEXIR_CUDA_DECLARE)
#undef HEXIR_CUDA_DECLARE

  void* library = nullptr;  // dlopen handle; the table is never unloaded
  int version = 0;          // cuDriverGetVersion, e.g. 13000

  // "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"; works on every code.
  std::string error_text(CUresult result) const;
  // ok for CUDA_SUCCESS, else a status naming `what` and the error.
  Status check(CUresult result, const char* what) const;
};

// dlopens `path`, resolves every symbol and calls cuInit(0). Each failure is
// kUnavailable "CUDA driver not available: <reason>" (dlerror text, a missing
// symbol, or cuInit's error such as CUDA_ERROR_STUB_LIBRARY from the link stub).
// Exposed for tests; the backend uses driver().
Result<std::unique_ptr<Driver>> load_driver(const char* path);

// The process-wide table, loaded once (thread-safe) from $HEXIR_CUDA_DRIVER or
// "libcuda.so.1". Later calls return the first call's result.
Result<const Driver*> driver();

}  // namespace hexir::hal::cuda
