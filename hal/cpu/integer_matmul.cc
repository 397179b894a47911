// integer_matmul: sum_k (a - a_zero) * w in int32, exactly, for u8 rows of a
// against int8 rows of w (ONNX MatMulInteger with symmetric weights). The
// zero point leaves the inner loop: sum (a - z) w = sum a w - z sum w, with
// sum w per row of w taken in the same pass.
//
// AVX-512 VNNI: vpdpbusd multiplies 4 u8 by 4 s8 and adds the four products
// to an int32 lane, exactly (no saturation, unlike AVX2's vpmaddubsw, whose
// int16 pair sums saturate at 255 * 127 * 2). AVX2 and AVX-512 without VNNI
// widen both to int16 first (vpmaddwd: exact int16 products summed in
// pairs into int32). A tile of 4 rows of a by 4 rows of w shares the loads.
#include <algorithm>
#include <cstring>

#include "kernel_util.h"
#include "thread_pool.h"
#include "vnni.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HEXIR_INTEGER_X86 1
#endif

namespace hexir::hal::cpu::internal {
namespace {

struct IntegerRows {
  const uint8_t* a;
  const int8_t* w;
  int32_t zero;
  int64_t k, n;
  int32_t* c;
};

// Rows [i0, i0 + R) of a against rows [j0, j0 + J) of w, portable.
template <int R, int J>
void tile_portable(const IntegerRows& p, int64_t i0, int64_t j0) {
  int32_t sum[R][J] = {}, wsum[J] = {};
  for (int64_t t = 0; t < p.k; ++t) {
    for (int j = 0; j < J; ++j) {
      const int32_t w = p.w[(j0 + j) * p.k + t];
      wsum[j] += w;
      for (int r = 0; r < R; ++r) sum[r][j] += static_cast<int32_t>(p.a[(i0 + r) * p.k + t]) * w;
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) p.c[(i0 + r) * p.n + j0 + j] = sum[r][j] - p.zero * wsum[j];
}

#if defined(HEXIR_INTEGER_X86)
// 64 k at a time; the tail through zero-masked loads (a zero adds nothing to either sum).
template <int R, int J>
[[gnu::target("avx512f,avx512bw,avx512vnni")]] void tile_vnni(const IntegerRows& p, int64_t i0, int64_t j0) {
  __m512i sum[R][J], wsum[J];
  const __m512i ones = _mm512_set1_epi8(1);
  for (int j = 0; j < J; ++j) {
    wsum[j] = _mm512_setzero_si512();
    for (int r = 0; r < R; ++r) sum[r][j] = _mm512_setzero_si512();
  }
  for (int64_t t = 0; t < p.k; t += 64) {
    const __mmask64 mask = p.k - t >= 64 ? ~__mmask64{0} : (__mmask64{1} << (p.k - t)) - 1;
    __m512i a[R];
    for (int r = 0; r < R; ++r) a[r] = _mm512_maskz_loadu_epi8(mask, p.a + (i0 + r) * p.k + t);
    for (int j = 0; j < J; ++j) {
      const __m512i w = _mm512_maskz_loadu_epi8(mask, p.w + (j0 + j) * p.k + t);
      dpbusd(wsum[j], ones, w);
      for (int r = 0; r < R; ++r) dpbusd(sum[r][j], a[r], w);
    }
  }
  for (int j = 0; j < J; ++j) {
    const int32_t ws = _mm512_reduce_add_epi32(wsum[j]);
    for (int r = 0; r < R; ++r) p.c[(i0 + r) * p.n + j0 + j] = _mm512_reduce_add_epi32(sum[r][j]) - p.zero * ws;
  }
}

[[gnu::target("avx2")]] int32_t reduce_avx2(__m256i v) {
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  int32_t s = 0;
  for (int32_t x : lanes) s += x;
  return s;
}

// 16 k at a time, both widened to int16; the tail portable.
template <int R, int J>
[[gnu::target("avx2")]] void tile_avx2(const IntegerRows& p, int64_t i0, int64_t j0) {
  __m256i sum[R][J], wsum[J];
  const __m256i ones = _mm256_set1_epi16(1);
  for (int j = 0; j < J; ++j) {
    wsum[j] = _mm256_setzero_si256();
    for (int r = 0; r < R; ++r) sum[r][j] = _mm256_setzero_si256();
  }
  int64_t t = 0;
  for (; t + 16 <= p.k; t += 16) {
    __m256i a[R];
    for (int r = 0; r < R; ++r)
      a[r] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p.a + (i0 + r) * p.k + t)));
    for (int j = 0; j < J; ++j) {
      const __m256i w =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p.w + (j0 + j) * p.k + t)));
      wsum[j] = _mm256_add_epi32(wsum[j], _mm256_madd_epi16(w, ones));
      for (int r = 0; r < R; ++r) sum[r][j] = _mm256_add_epi32(sum[r][j], _mm256_madd_epi16(a[r], w));
    }
  }
  for (int j = 0; j < J; ++j) {
    int32_t ws = reduce_avx2(wsum[j]);
    for (int64_t u = t; u < p.k; ++u) ws += p.w[(j0 + j) * p.k + u];
    for (int r = 0; r < R; ++r) {
      int32_t s = reduce_avx2(sum[r][j]);
      for (int64_t u = t; u < p.k; ++u)
        s += static_cast<int32_t>(p.a[(i0 + r) * p.k + u]) * p.w[(j0 + j) * p.k + u];
      p.c[(i0 + r) * p.n + j0 + j] = s - p.zero * ws;
    }
  }
}

#endif

template <int R, int J>
void tile(const IntegerRows& p, int64_t i0, int64_t j0) {
#if defined(HEXIR_INTEGER_X86)
  if (isa_avx512_vnni()) return tile_vnni<R, J>(p, i0, j0);
  if (isa_avx2()) return tile_avx2<R, J>(p, i0, j0);
#endif
  tile_portable<R, J>(p, i0, j0);
}

// Output columns [j0, j1) for every row: 4 x 4 tiles, then the edges one by one.
void columns(const IntegerRows& p, int64_t m, int64_t j0, int64_t j1) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4) tile<4, 4>(p, i, j);
    for (; j < j1; ++j) tile<4, 1>(p, i, j);
  }
  for (; i < m; ++i) {
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4) tile<1, 4>(p, i, j);
    for (; j < j1; ++j) tile<1, 1>(p, i, j);
  }
}

}  // namespace

// Output columns shared out among the threads (w's rows are the larger
// operand for the matmuls this serves: weights).
Status integer_matmul(const KernelContext& context, const Dispatch& d) {
  const ops::IntegerMatmulPlan& plan = plan_of<ops::IntegerMatmulPlan>(d);
  if (plan.m == 0 || plan.n == 0) return ok_status();
  const IntegerRows p{input<uint8_t>(d, 0), input<int8_t>(d, 1), static_cast<int32_t>(input<uint8_t>(d, 2)[0]),
                      plan.k, plan.n, output<int32_t>(d, 0)};
  if (plan.k == 0) {
    std::memset(p.c, 0, static_cast<size_t>(plan.m * plan.n) * sizeof(int32_t));
    return ok_status();
  }
  parallel_ranges(context, plan.n, std::max<int64_t>(4, (int64_t{1} << 16) / std::max<int64_t>(1, plan.k * plan.m)),
                  [&](int64_t j0, int64_t j1) { columns(p, plan.m, j0, j1); });
  return ok_status();
}

}  // namespace hexir::hal::cpu::internal
