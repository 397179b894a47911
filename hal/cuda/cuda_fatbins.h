// The kernel fatbins nvcc built from hal/cuda/kernels/*.cu (sm_80, sm_90 and
// compute_90 PTX), embedded by embed_fatbins.py into the generated cuda_fatbins.cc.
#pragma once

#include <cstddef>

namespace hexir::hal::cuda {

struct EmbeddedModule {
  const char* name;           // "elementwise", "matmul", ...
  const unsigned char* data;  // 64-byte aligned fatbin image for cuModuleLoadData
  size_t size;
};

extern const EmbeddedModule kEmbeddedModules[];
extern const size_t kEmbeddedModuleCount;

}  // namespace hexir::hal::cuda
