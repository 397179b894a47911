// Elementwise kernels: binary ops with numpy broadcasting and unary maps,
// with the semantics of hal/cpu/elementwise.cc. Each thread reads element i
// of the inputs before writing element i of the output, so an output that
// shares storage with a same-shaped input is safe.
#include "common.cuh"

namespace hexir_kernels {

struct AddOp { __device__ static float apply(float a, float b) { return a + b; } };
struct SubOp { __device__ static float apply(float a, float b) { return a - b; } };
struct MulOp { __device__ static float apply(float a, float b) { return a * b; } };
struct DivOp { __device__ static float apply(float a, float b) { return a / b; } };
// numpy.maximum/minimum propagate NaN from either side.
struct MaximumOp { __device__ static float apply(float a, float b) { return (a > b || is_nan(a)) ? a : b; } };
struct MinimumOp { __device__ static float apply(float a, float b) { return (a < b || is_nan(a)) ? a : b; } };

struct ReluOp { __device__ static float apply(float x) { return x > 0.0f ? x : (is_nan(x) ? x : 0.0f); } };
struct GeluErfOp {
  __device__ static float apply(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
};
struct GeluTanhOp {
  __device__ static float apply(float x) {
    const float kSqrt2OverPi = 0.79788456080286536f;
    return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
  }
};
struct SigmoidOp { __device__ static float apply(float x) { return 1.0f / (1.0f + expf(-x)); } };
struct SiluOp { __device__ static float apply(float x) { return x / (1.0f + expf(-x)); } };
struct TanhOp { __device__ static float apply(float x) { return tanhf(x); } };
struct ExpOp { __device__ static float apply(float x) { return expf(x); } };
struct SqrtOp { __device__ static float apply(float x) { return sqrtf(x); } };
// 1/sqrt rather than the approximate rsqrtf, to match the cpu kernel.
struct RsqrtOp { __device__ static float apply(float x) { return 1.0f / sqrtf(x); } };
struct NegOp { __device__ static float apply(float x) { return -x; } };

template <typename Op>
__device__ void binary(const BinaryParams& p) {
  const int64_t stride = global_stride();
  switch (p.mode) {
    case 0:
      for (int64_t i = global_index(); i < p.n; i += stride) p.out[i] = Op::apply(p.a[i], p.b[i]);
      break;
    case 1: {
      const float b = p.b[0];
      for (int64_t i = global_index(); i < p.n; i += stride) p.out[i] = Op::apply(p.a[i], b);
      break;
    }
    case 2: {
      const float a = p.a[0];
      for (int64_t i = global_index(); i < p.n; i += stride) p.out[i] = Op::apply(a, p.b[i]);
      break;
    }
    default:
      for (int64_t i = global_index(); i < p.n; i += stride) {
        int64_t rest = i, offset_a = 0, offset_b = 0;
        for (int d = p.rank - 1; d >= 0; --d) {
          const int64_t index = rest % p.dims[d];
          rest /= p.dims[d];
          offset_a += index * p.stride_a[d];
          offset_b += index * p.stride_b[d];
        }
        p.out[i] = Op::apply(p.a[offset_a], p.b[offset_b]);
      }
      break;
  }
}

template <typename Op>
__device__ void unary(const UnaryParams& p) {
  const int64_t stride = global_stride();
  for (int64_t i = global_index(); i < p.n; i += stride) p.out[i] = Op::apply(p.in[i]);
}

}  // namespace hexir_kernels

#define HEXIR_BINARY_KERNEL(name, op) \
  extern "C" __global__ void name(BinaryParams p) { hexir_kernels::binary<hexir_kernels::op>(p); }
#define HEXIR_UNARY_KERNEL(name, op) \
  extern "C" __global__ void name(UnaryParams p) { hexir_kernels::unary<hexir_kernels::op>(p); }

HEXIR_BINARY_KERNEL(hexir_add, AddOp)
HEXIR_BINARY_KERNEL(hexir_sub, SubOp)
HEXIR_BINARY_KERNEL(hexir_mul, MulOp)
HEXIR_BINARY_KERNEL(hexir_div, DivOp)
HEXIR_BINARY_KERNEL(hexir_maximum, MaximumOp)
HEXIR_BINARY_KERNEL(hexir_minimum, MinimumOp)
HEXIR_UNARY_KERNEL(hexir_relu, ReluOp)
HEXIR_UNARY_KERNEL(hexir_gelu_erf, GeluErfOp)
HEXIR_UNARY_KERNEL(hexir_gelu_tanh, GeluTanhOp)
HEXIR_UNARY_KERNEL(hexir_silu, SiluOp)
HEXIR_UNARY_KERNEL(hexir_sigmoid, SigmoidOp)
HEXIR_UNARY_KERNEL(hexir_tanh, TanhOp)
HEXIR_UNARY_KERNEL(hexir_exp, ExpOp)
HEXIR_UNARY_KERNEL(hexir_sqrt, SqrtOp)
HEXIR_UNARY_KERNEL(hexir_rsqrt, RsqrtOp)
HEXIR_UNARY_KERNEL(hexir_neg, NegOp)
