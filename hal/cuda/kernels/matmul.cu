// Contractions. The fallback matmul (cuBLAS is used when present): square
// shared-memory tiles, one output element per thread, tiles over grid x/y and
// batches over grid z (each a grid-stride loop, so any size fits one launch).
// Each element sums its products in k order, so with --fmad=false it matches
// the cpu kernel bit for bit.
#include "common.cuh"

extern "C" __global__ void hexir_matmul_tiled(MatmulParams p) {
  constexpr int T = hexir::hal::cuda::kMatmulTile;
  __shared__ float a_tile[T][T + 1];
  __shared__ float b_tile[T][T + 1];
  const hexir::ops::MatmulPlan& q = p.plan;
  const int tx = threadIdx.x, ty = threadIdx.y;
  // Every loop bound below depends on the block only, so all threads of a
  // block reach each __syncthreads together.
  for (int64_t batch = blockIdx.z; batch < q.batch_count; batch += gridDim.z) {
    int64_t rest = batch, a_offset = 0, b_offset = 0;
    for (int d = q.batch_rank - 1; d >= 0; --d) {
      const int64_t index = rest % q.batch_dims[d];
      rest /= q.batch_dims[d];
      a_offset += index * q.a_stride[d];
      b_offset += index * q.b_stride[d];
    }
    const float* a = p.a + a_offset;
    const float* b = p.b + b_offset;
    float* c = p.c + batch * q.m * q.n;
    for (int64_t row0 = static_cast<int64_t>(blockIdx.y) * T; row0 < q.m;
         row0 += static_cast<int64_t>(gridDim.y) * T) {
      for (int64_t col0 = static_cast<int64_t>(blockIdx.x) * T; col0 < q.n;
           col0 += static_cast<int64_t>(gridDim.x) * T) {
        const int64_t row = row0 + ty, col = col0 + tx;
        float acc = 0.0f;
        for (int64_t k0 = 0; k0 < q.k; k0 += T) {
          a_tile[ty][tx] = (row < q.m && k0 + tx < q.k) ? a[row * q.lda + k0 + tx] : 0.0f;
          b_tile[ty][tx] = (k0 + ty < q.k && col < q.n)
                               ? (q.b_transposed ? b[col * q.ldb + k0 + ty] : b[(k0 + ty) * q.ldb + col])
                               : 0.0f;
          __syncthreads();
          const int64_t kmax = q.k - k0 < T ? q.k - k0 : T;
          for (int k = 0; k < kmax; ++k) acc += a_tile[ty][k] * b_tile[k][tx];
          __syncthreads();
        }
        if (row < q.m && col < q.n)
          c[row * q.n + col] = hexir::ops::apply_epilogue(q.epilogue, q.has_bias ? acc + p.bias[col] : acc);
      }
    }
  }
}

// The fused bias and activation after a library GEMM: one pass over the
// batch's results (the tiled kernel applies them as it stores).
extern "C" __global__ void hexir_matmul_epilogue(MatmulParams p) {
  const hexir::ops::MatmulPlan& q = p.plan;
  const int64_t total = q.batch_count * q.m * q.n;
  const int64_t stride = hexir_kernels::global_stride();
  for (int64_t i = hexir_kernels::global_index(); i < total; i += stride) {
    const float v = q.has_bias ? p.c[i] + p.bias[i % q.n] : p.c[i];
    p.c[i] = hexir::ops::apply_epilogue(q.epilogue, v);
  }
}

// quantized_matmul: one thread per output element, the int8 row widened as it is read.
extern "C" __global__ void hexir_quantized_matmul(hexir::hal::cuda::QuantizedMatmulParams p) {
  const hexir::ops::QuantizedMatmulPlan& q = p.plan;
  for (int64_t e = hexir_kernels::global_index(); e < q.m * q.n; e += hexir_kernels::global_stride()) {
    const int64_t i = e / q.n, j = e % q.n;
    const float* a = p.a + i * q.k;
    const int8_t* w = p.w + j * q.k;
    float sum = 0.0f;
    for (int64_t t = 0; t < q.k; ++t) sum += a[t] * static_cast<float>(w[t]);
    p.c[e] = sum * p.scale[j] + (q.has_bias ? p.bias[j] : 0.0f);
  }
}

// int4_matmul: one thread per output element, the packed row decoded as it is read.
extern "C" __global__ void hexir_int4_matmul(hexir::hal::cuda::Int4MatmulParams p) {
  const hexir::ops::Int4MatmulPlan& q = p.plan;
  const int64_t groups = q.k / q.group;
  for (int64_t e = hexir_kernels::global_index(); e < q.m * q.n; e += hexir_kernels::global_stride()) {
    const int64_t i = e / q.n, j = e % q.n;
    const float* a = p.a + i * q.k;
    const uint8_t* w = p.w + j * (q.k / 2);
    float sum = 0.0f;
    for (int64_t g = 0; g < groups; ++g) {
      const float s = hexir_kernels::half_bits_to_float(p.scale[j * groups + g]);
      for (int64_t t = g * q.group; t < (g + 1) * q.group; ++t)
        sum += a[t] * (static_cast<float>(hexir::ops::int4_weight_of(w, t)) * s);
    }
    p.c[e] = sum + (q.has_bias ? p.bias[j] : 0.0f);
  }
}

// dequantize_int4: one thread per weight.
extern "C" __global__ void hexir_dequantize_int4(hexir::hal::cuda::DequantizeInt4Params p) {
  const hexir::ops::DequantizeInt4Plan& q = p.plan;
  for (int64_t e = hexir_kernels::global_index(); e < q.rows * q.k; e += hexir_kernels::global_stride()) {
    const int64_t r = e / q.k, t = e % q.k;
    const float s = hexir_kernels::half_bits_to_float(p.scale[r * (q.k / q.group) + t / q.group]);
    p.out[e] = static_cast<float>(hexir::ops::int4_weight_of(p.w + r * (q.k / 2), t)) * s;
  }
}

namespace hexir_kernels {
// A dense quantized_conv2d's sum with dp4a when a group's channels come in
// fours (four consecutive reduction steps are one tap's four channels: one
// 32-bit word of x and one of the weights). dp4a's signed form takes x as
// x - 128 (the top bit flipped) and adds 128 * sum w back (a second dp4a
// against bytes of 1).
__device__ inline int32_t quantized_conv2d_sum_dp4a(const hexir::ops::QuantizedConv2dPlan& q, const uint8_t* x,
                                                    const int8_t* w, int64_t n, int64_t oy, int64_t ox, int64_t k) {
  const int64_t g = k / q.k_per_group, kg = k % q.k_per_group;
  const int32_t padding = static_cast<int32_t>(static_cast<uint32_t>(q.x_zero) * 0x01010101u ^ 0x80808080u);
  int32_t sum = 0, sum_w = 0;
  for (int64_t ky = 0; ky < q.kh; ++ky)
    for (int64_t kx = 0; kx < q.kw; ++kx) {
      const uint8_t* px = hexir::ops::quantized_conv2d_tap(q, x, n, oy, ox, ky, kx);
      const int64_t r0 = (ky * q.kw + kx) * q.c_per_group;
      for (int64_t ci = 0; ci < q.c_per_group; ci += 4) {
        const int64_t r = r0 + ci;
        int32_t xv = padding, wv;
        if (px) {
          uint32_t bytes;
          memcpy(&bytes, px + g * q.c_per_group + ci, 4);
          xv = static_cast<int32_t>(bytes ^ 0x80808080u);
        }
        memcpy(&wv, w + hexir::ops::quantized_conv2d_weight_index(q.depth, q.k_per_group, g, kg, r), 4);
        sum = __dp4a(xv, wv, sum);
        sum_w = __dp4a(0x01010101, wv, sum_w);
      }
    }
  return static_cast<int32_t>(static_cast<uint32_t>(sum) + 128u * static_cast<uint32_t>(sum_w));
}
}  // namespace hexir_kernels

// quantized_conv2d: one thread per output element (n, oy, ox, k), the
// int32 sum (exact in any order: dp4a where the channels come in fours, the
// plan's loop elsewhere) and the requantization.
extern "C" __global__ void hexir_quantized_conv2d(hexir::hal::cuda::QuantizedConv2dParams p) {
  const hexir::ops::QuantizedConv2dPlan& q = p.plan;
  const int64_t total = q.n * q.oh * q.ow * q.k;
  const bool fours = !q.depthwise && q.c_per_group % 4 == 0;
  for (int64_t e = hexir_kernels::global_index(); e < total; e += hexir_kernels::global_stride()) {
    const int64_t k = e % q.k, ox = e / q.k % q.ow, oy = e / (q.k * q.ow) % q.oh, n = e / (q.k * q.ow * q.oh);
    const int32_t sum = fours ? hexir_kernels::quantized_conv2d_sum_dp4a(q, p.x, p.w, n, oy, ox, k)
                              : hexir::ops::quantized_conv2d_sum(q, p.x, p.w, n, oy, ox, k);
    p.out[e] = hexir::ops::requantize_of(sum, p.bias[k], p.multiplier[k], q.y_zero, q.y_min, q.y_max);
  }
}

// integer_matmul: one thread per output element, int32 sums (exact in any order).
extern "C" __global__ void hexir_integer_matmul(hexir::hal::cuda::IntegerMatmulParams p) {
  const hexir::ops::IntegerMatmulPlan& q = p.plan;
  const int32_t zero = p.zero[0];
  for (int64_t e = hexir_kernels::global_index(); e < q.m * q.n; e += hexir_kernels::global_stride()) {
    const int64_t i = e / q.n, j = e % q.n;
    const uint8_t* a = p.a + i * q.k;
    const int8_t* w = p.w + j * q.k;
    int32_t sum = 0;
    for (int64_t t = 0; t < q.k; ++t) sum += (static_cast<int32_t>(a[t]) - zero) * static_cast<int32_t>(w[t]);
    p.c[e] = sum;
  }
}
