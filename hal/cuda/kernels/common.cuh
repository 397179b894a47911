// Helpers shared by the kernel files. Kept free of CUDA headers beyond what
// nvcc includes itself, so the host-side emulation in the conformance tests
// can compile the same sources with a small shim.
#pragma once

#include "params.h"

using hexir::hal::cuda::ArgmaxParams;
using hexir::hal::cuda::BinaryParams;
using hexir::hal::cuda::CastParams;
using hexir::hal::cuda::CompareParams;
using hexir::hal::cuda::Conv2dParams;
using hexir::hal::cuda::SeparableConv2dParams;
using hexir::hal::cuda::ConvTransposeParams;
using hexir::hal::cuda::FillParams;
using hexir::hal::cuda::GatherParams;
using hexir::hal::cuda::IntBinaryParams;
using hexir::hal::cuda::IntUnaryParams;
using hexir::hal::cuda::GroupNormParams;
using hexir::hal::cuda::LayernormParams;
using hexir::hal::cuda::MathParams;
using hexir::hal::cuda::MatmulParams;
using hexir::hal::cuda::NotParams;
using hexir::hal::cuda::PadParams;
using hexir::hal::cuda::Pool2dParams;
using hexir::hal::cuda::MaxPoolU8Params;
using hexir::hal::cuda::ReduceParams;
using hexir::hal::cuda::ResizeParams;
using hexir::hal::cuda::ScatterParams;
using hexir::hal::cuda::GatherIndexedParams;
using hexir::hal::cuda::CumSumParams;
using hexir::hal::cuda::SoftmaxParams;
using hexir::hal::cuda::StridedCopyParams;
using hexir::hal::cuda::StridedParams;
using hexir::hal::cuda::UnaryParams;
using hexir::hal::cuda::WhereParams;
using hexir::hal::cuda::WindowParams;

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
// The larger, NaN if either is NaN (numpy.maximum, reduce_max).
struct NanMaxOp {
  __device__ double operator()(double a, double b) const { return (a != a) ? a : ((b != b || b > a) ? b : a); }
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

// IEEE half precision from and to float, bit by bit (no cuda_fp16.h, so the
// host emulation runs the same code): round to nearest even, overflow to
// infinity, NaN kept NaN. The algorithms of base/half.h.
__device__ __forceinline__ uint16_t float_to_half_bits(float value) {
  const uint32_t x = __float_as_uint(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exponent = (x >> 23) & 0xffu;
  uint32_t mantissa = x & 0x7fffffu;
  if (exponent == 0xffu)
    return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u | (mantissa >> 13) : 0u));
  const int32_t e = static_cast<int32_t>(exponent) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;
    const int shift = 14 - e;
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  // A carry out of the mantissa rounds up into the exponent (to infinity at the top).
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

__device__ __forceinline__ float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return __uint_as_float(sign);
    int e = -1;  // subnormal: normalize
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    return __uint_as_float(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mantissa & 0x3ffu) << 13);
  }
  return __uint_as_float(sign | (exponent + 127 - 15) << 23 | mantissa << 13);
}

// bfloat16: f32's top half. Narrowing rounds to nearest even, NaN kept NaN
// (base/half.h's float_to_bfloat16_bits).
__device__ __forceinline__ uint16_t float_to_bfloat16_bits(float value) {
  uint32_t x = __float_as_uint(value);
  if (value != value) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}
__device__ __forceinline__ float bfloat16_bits_to_float(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

}  // namespace hexir_kernels
