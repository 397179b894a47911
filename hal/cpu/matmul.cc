// numpy.matmul for f32: 1-D operands promoted (and the added dim dropped from
// the result), batch dims broadcast, one blocked GEMM per batch element.
#include <algorithm>

#include "kernel_util.h"

namespace hexir::hal::cpu::internal {
namespace {

// C[M,N] = A[M,K] * B[K,N], all row-major and contiguous. Four rows of C share
// every load of a row of B (i-k-j order, inner loop unit-stride over N so it
// vectorizes); K and N are blocked so the B panel stays in cache. Each c[j]
// sums its products in k order whatever the vector width, so every build of
// this body gives bit-identical results.
[[gnu::always_inline]] inline void gemm_body(int64_t M, int64_t N, int64_t K, const float* __restrict A,
                                             const float* __restrict B, float* __restrict C) {
  constexpr int64_t kBlockK = 128;
  constexpr int64_t kBlockN = 256;
  std::fill(C, C + M * N, 0.0f);
  for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
    const int64_t k1 = std::min(K, k0 + kBlockK);
    for (int64_t j0 = 0; j0 < N; j0 += kBlockN) {
      const int64_t nj = std::min(N, j0 + kBlockN) - j0;
      int64_t i = 0;
      for (; i + 4 <= M; i += 4) {
        float* __restrict c0 = C + (i + 0) * N + j0;
        float* __restrict c1 = C + (i + 1) * N + j0;
        float* __restrict c2 = C + (i + 2) * N + j0;
        float* __restrict c3 = C + (i + 3) * N + j0;
        for (int64_t k = k0; k < k1; ++k) {
          const float a0 = A[(i + 0) * K + k];
          const float a1 = A[(i + 1) * K + k];
          const float a2 = A[(i + 2) * K + k];
          const float a3 = A[(i + 3) * K + k];
          const float* __restrict b = B + k * N + j0;
          for (int64_t j = 0; j < nj; ++j) {
            const float bv = b[j];
            c0[j] += a0 * bv;
            c1[j] += a1 * bv;
            c2[j] += a2 * bv;
            c3[j] += a3 * bv;
          }
        }
      }
      for (; i < M; ++i) {
        float* __restrict c = C + i * N + j0;
        for (int64_t k = k0; k < k1; ++k) {
          const float a = A[i * K + k];
          const float* __restrict b = B + k * N + j0;
          for (int64_t j = 0; j < nj; ++j) c[j] += a * b[j];
        }
      }
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define HEXIR_GEMM_AVX2 1
// The same body compiled for AVX2, chosen per call from the running CPU. (A
// plain runtime check rather than an ifunc/target_clones resolver, which runs
// before sanitizer runtimes start and crashes under TSan.)
[[gnu::target("avx2")]] void gemm_avx2(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C) {
  gemm_body(M, N, K, A, B, C);
}
#endif

void gemm_generic(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C) {
  gemm_body(M, N, K, A, B, C);
}

void gemm(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C) {
#ifdef HEXIR_GEMM_AVX2
  if (__builtin_cpu_supports("avx2")) {
    gemm_avx2(M, N, K, A, B, C);
    return;
  }
#endif
  gemm_generic(M, N, K, A, B, C);
}

}  // namespace

Status matmul(const DispatchArgs& args) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, "matmul", 2, 2, /*f32_only=*/true));
  const TensorArg& a = args.operands[0];
  const TensorArg& b = args.operands[1];
  if (a.rank == 0 || b.rank == 0) return invalid_argument("matmul: operands must have rank >= 1");

  // Promote 1-D operands: a vector on the left is a row [1,K], on the right a column [K,1].
  int64_t a_dims[kMaxRank], b_dims[kMaxRank];
  uint32_t a_rank = a.rank, b_rank = b.rank;
  if (a_rank == 1) {
    a_dims[0] = 1;
    a_dims[1] = a.dims[0];
    a_rank = 2;
  } else {
    std::copy(a.dims, a.dims + a_rank, a_dims);
  }
  if (b_rank == 1) {
    b_dims[0] = b.dims[0];
    b_dims[1] = 1;
    b_rank = 2;
  } else {
    std::copy(b.dims, b.dims + b_rank, b_dims);
  }
  const int64_t M = a_dims[a_rank - 2];
  const int64_t K = a_dims[a_rank - 1];
  const int64_t N = b_dims[b_rank - 1];
  if (b_dims[b_rank - 2] != K) return invalid_argument("matmul: inner dimensions differ");

  // Broadcast batch dims, right-aligned; a size-1 batch dim repeats its matrix.
  const uint32_t a_batch_rank = a_rank - 2;
  const uint32_t b_batch_rank = b_rank - 2;
  const uint32_t batch_rank = std::max(a_batch_rank, b_batch_rank);
  int64_t batch_dims[kMaxRank], a_stride[kMaxRank], b_stride[kMaxRank];
  int64_t a_step = M * K, b_step = K * N;  // elements per matrix, growing outwards
  for (uint32_t i = batch_rank; i-- > 0;) {
    const int64_t ai = static_cast<int64_t>(i) - static_cast<int64_t>(batch_rank - a_batch_rank);
    const int64_t bi = static_cast<int64_t>(i) - static_cast<int64_t>(batch_rank - b_batch_rank);
    const int64_t ad = ai >= 0 ? a_dims[ai] : 1;
    const int64_t bd = bi >= 0 ? b_dims[bi] : 1;
    if (ad != bd && ad != 1 && bd != 1) return invalid_argument("matmul: batch dims do not broadcast");
    batch_dims[i] = std::max(ad, bd);
    if (ad == 0 || bd == 0) batch_dims[i] = 0;
    a_stride[i] = ad == 1 ? 0 : a_step;
    b_stride[i] = bd == 1 ? 0 : b_step;
    a_step *= ad;
    b_step *= bd;
  }
  int64_t batch_count = dims_product(batch_dims, 0, batch_rank);
  if (batch_count == 0 || M == 0 || N == 0) return ok_status();

  const float* pa = f32_in(a);
  const float* pb = f32_in(b);
  float* pc = f32_out(args.operands[2]);
  int64_t index[kMaxRank] = {};
  for (int64_t batch = 0; batch < batch_count; ++batch) {
    int64_t a_offset = 0, b_offset = 0;
    for (uint32_t i = 0; i < batch_rank; ++i) {
      a_offset += index[i] * a_stride[i];
      b_offset += index[i] * b_stride[i];
    }
    gemm(M, N, K, pa + a_offset, pb + b_offset, pc + batch * M * N);
    next_index(index, batch_dims, batch_rank);
  }
  return ok_status();
}

}  // namespace hexir::hal::cpu::internal
