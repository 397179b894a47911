// The fallback matmul (cuBLAS is used when present): square shared-memory
// tiles, one output element per thread, batches over grid z. Each element
// sums its products in k order, so with --fmad=false it matches the cpu
// kernel bit for bit.
#include "common.cuh"

extern "C" __global__ void hexir_matmul_tiled(MatmulParams p) {
  constexpr int T = hexir::hal::cuda::kMatmulTile;
  __shared__ float a_tile[T][T + 1];
  __shared__ float b_tile[T][T + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * T + ty;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * T + tx;
  for (int64_t batch = blockIdx.z; batch < p.batch_count; batch += gridDim.z) {
    int64_t rest = batch, a_offset = 0, b_offset = 0;
    for (int d = p.batch_rank - 1; d >= 0; --d) {
      const int64_t index = rest % p.batch_dims[d];
      rest /= p.batch_dims[d];
      a_offset += index * p.a_stride[d];
      b_offset += index * p.b_stride[d];
    }
    const float* a = p.a + a_offset;
    const float* b = p.b + b_offset;
    float acc = 0.0f;
    for (int64_t k0 = 0; k0 < p.k; k0 += T) {
      a_tile[ty][tx] = (row < p.m && k0 + tx < p.k) ? a[row * p.k + k0 + tx] : 0.0f;
      b_tile[ty][tx] = (k0 + ty < p.k && col < p.n) ? b[(k0 + ty) * p.n + col] : 0.0f;
      __syncthreads();
      const int64_t kmax = p.k - k0 < T ? p.k - k0 : T;
      for (int k = 0; k < kmax; ++k) acc += a_tile[ty][k] * b_tile[k][tx];
      __syncthreads();
    }
    if (row < p.m && col < p.n) p.c[batch * p.m * p.n + row * p.n + col] = acc;
  }
}
