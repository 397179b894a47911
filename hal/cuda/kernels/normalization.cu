// softmax, layernorm, the reductions, argmax and cumsum, with the semantics of
// hal/cpu/normalization.cc and layout.cc: one block per row (or output
// element), sums in double. Every element of a row is read before the
// barrier that precedes any write of it, so an output aliasing the input is safe.
#include "common.cuh"

using hexir::hal::cuda::kRowBlockMax;

extern "C" __global__ void hexir_softmax(SoftmaxParams p) {
  __shared__ float scratch_f[kRowBlockMax];
  __shared__ double scratch_d[kRowBlockMax];
  const hexir::ops::SoftmaxPlan& q = p.plan;
  const int64_t rows = q.outer * q.inner;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = (row / q.inner) * q.length * q.inner + row % q.inner;
    const float* in = p.in + base;
    float* out = p.out + base;
    float max_value = hexir_kernels::negative_infinity();
    for (int64_t j = threadIdx.x; j < q.length; j += blockDim.x)
      max_value = fmaxf(max_value, in[j * q.inner]);
    max_value = hexir_kernels::block_reduce(max_value, scratch_f, hexir_kernels::MaxOp());
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < q.length; j += blockDim.x) {
      const float e = expf(in[j * q.inner] - max_value);
      out[j * q.inner] = e;
      sum += e;
    }
    sum = hexir_kernels::block_reduce(sum, scratch_d, hexir_kernels::SumOp());
    const float scale = static_cast<float>(1.0 / sum);
    for (int64_t j = threadIdx.x; j < q.length; j += blockDim.x) out[j * q.inner] *= scale;
  }
}

extern "C" __global__ void hexir_layernorm(LayernormParams p) {
  __shared__ double scratch[kRowBlockMax];
  const hexir::ops::LayernormPlan& q = p.plan;
  for (int64_t r = blockIdx.x; r < q.rows; r += gridDim.x) {
    const float* in = p.in + r * q.width;
    float* out = p.out + r * q.width;
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < q.width; j += blockDim.x) sum += in[j];
    sum = hexir_kernels::block_reduce(sum, scratch, hexir_kernels::SumOp());
    const double mean = sum / static_cast<double>(q.width);
    double square_sum = 0.0;
    for (int64_t j = threadIdx.x; j < q.width; j += blockDim.x) {
      const double d = in[j] - mean;
      square_sum += d * d;
    }
    square_sum = hexir_kernels::block_reduce(square_sum, scratch, hexir_kernels::SumOp());
    const double variance = square_sum / static_cast<double>(q.width);
    const float inv_std = static_cast<float>(1.0 / sqrt(variance + q.epsilon));
    const float mean_f = static_cast<float>(mean);
    for (int64_t j = threadIdx.x; j < q.width; j += blockDim.x)
      out[j] = (in[j] - mean_f) * inv_std * p.gamma[j] + p.beta[j];
  }
}

extern "C" __global__ void hexir_reduce(ReduceParams p) {
  __shared__ double scratch[kRowBlockMax];
  const hexir::ops::ReducePlan& q = p.plan;
  for (int64_t o = blockIdx.x; o < q.out_count; o += gridDim.x) {
    int64_t rest = o, base = 0;
    for (int d = q.kept_rank - 1; d >= 0; --d) {
      base += (rest % q.kept_dims[d]) * q.kept_stride[d];
      rest /= q.kept_dims[d];
    }
    // max: in double (exact for floats), -inf over nothing, NaN if any is NaN.
    double sum = q.max ? static_cast<double>(hexir_kernels::negative_infinity()) : 0.0;
    for (int64_t r = threadIdx.x; r < q.red_count; r += blockDim.x) {
      int64_t rrest = r, offset = base;
      for (int d = q.red_rank - 1; d >= 0; --d) {
        offset += (rrest % q.red_dims[d]) * q.red_stride[d];
        rrest /= q.red_dims[d];
      }
      if (q.max)
        sum = hexir_kernels::NanMaxOp()(sum, p.in[offset]);
      else
        sum += p.in[offset];
    }
    if (q.max) {
      sum = hexir_kernels::block_reduce(sum, scratch, hexir_kernels::NanMaxOp());
      if (threadIdx.x == 0) p.out[o] = static_cast<float>(sum);
      continue;
    }
    sum = hexir_kernels::block_reduce(sum, scratch, hexir_kernels::SumOp());
    // numpy: the mean over zero elements is NaN (0/0).
    if (threadIdx.x == 0)
      p.out[o] = static_cast<float>(q.mean ? sum / static_cast<double>(q.red_count) : sum);
  }
}

// argmax: one thread per output element, its column of the axis in order.
extern "C" __global__ void hexir_argmax(ArgmaxParams p) {
  const hexir::ops::ArgmaxPlan& q = p.plan;
  const int64_t n = q.outer * q.inner;
  const int64_t stride = hexir_kernels::global_stride();
  for (int64_t i = hexir_kernels::global_index(); i < n; i += stride) {
    const int64_t o = i / q.inner, c = i % q.inner;
    p.out[i] = hexir::ops::argmax_of(p.x + o * q.length * q.inner + c, q.length, q.inner, q.select_last);
  }
}

// cumsum: one thread per line along the axis, in the cpu kernel's order
// (each result the previous one plus one element; ops::scatter_add).
namespace hexir_kernels {
template <typename T>
__device__ void cumsum(const CumSumParams& p) {
  const hexir::ops::CumSumPlan& q = p.plan;
  const T* x = static_cast<const T*>(p.x);
  T* out = static_cast<T*>(p.out);
  const int64_t lines = q.outer * q.inner;
  const int64_t step = q.reverse ? -q.inner : q.inner;
  const int64_t stride = hexir_kernels::global_stride();
  for (int64_t line = hexir_kernels::global_index(); line < lines; line += stride) {
    const int64_t first =
        (line / q.inner) * q.length * q.inner + line % q.inner + (q.reverse ? (q.length - 1) * q.inner : 0);
    T sum = T(0);
    for (int64_t k = 0; k < q.length; ++k) {
      const int64_t at = first + k * step;
      if (q.exclusive) {
        out[at] = sum;
        sum = hexir::ops::scatter_add(sum, x[at]);
      } else {
        sum = k == 0 ? x[at] : hexir::ops::scatter_add(sum, x[at]);
        out[at] = sum;
      }
    }
  }
}
}  // namespace hexir_kernels

extern "C" __global__ void hexir_cumsum_f32(CumSumParams p) { hexir_kernels::cumsum<float>(p); }
extern "C" __global__ void hexir_cumsum_i32(CumSumParams p) { hexir_kernels::cumsum<int32_t>(p); }
extern "C" __global__ void hexir_cumsum_i64(CumSumParams p) { hexir_kernels::cumsum<int64_t>(p); }
