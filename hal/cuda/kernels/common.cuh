// Helpers shared by the kernel files. Kept free of CUDA headers beyond what
// nvcc includes itself, so the host-side emulation in the conformance tests
// can compile the same sources with a small shim.
#pragma once

#include "params.h"

using hexir::hal::cuda::BinaryParams;
using hexir::hal::cuda::FillParams;
using hexir::hal::cuda::LayernormParams;
using hexir::hal::cuda::MatmulParams;
using hexir::hal::cuda::ReduceParams;
using hexir::hal::cuda::SoftmaxParams;
using hexir::hal::cuda::StridedCopyParams;
using hexir::hal::cuda::TransposeParams;
using hexir::hal::cuda::UnaryParams;

namespace hexir_kernels {

__device__ __forceinline__ bool is_nan(float x) { return x != x; }

__device__ __forceinline__ float negative_infinity() { return __int_as_float(0xff800000u); }

// First global index and stride of a grid-stride loop over a 1-D launch.
__device__ __forceinline__ int64_t global_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t global_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }  // ignores NaN, like std::fmax
};
struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// Tree reduction over the block (blockDim.x a power of two, at most
// kRowBlockMax) through shared scratch; every thread gets the result. Must be
// reached by all threads of the block.
template <typename T, typename Op>
__device__ T block_reduce(T value, T* scratch, Op op) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) scratch[threadIdx.x] = op(scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }
  const T result = scratch[0];
  __syncthreads();  // scratch may be reused right after
  return result;
}

}  // namespace hexir_kernels
