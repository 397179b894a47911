// The f32 GEMM behind matmul and conv2d: C = A * B (+ a bias per row or
// column of C, + a fused activation).
//
// Goto-style. K is cut in KC blocks; the first writes C, the others add to
// it. Two loop orders, by what was prepared (GemmArgs::packed_b / packed_a,
// packed once at Program::prepare for constant weights):
//  * B prepared: per K block, an A panel of MR rows (read in place where
//    that tile is as tall, else packed here, unless prepared too) stays in L1
//    while the register tile sweeps a chunk of B's prepared strips that stays
//    in L2; nothing of B is packed.
//  * otherwise: a group of strips of NR columns of B (KC deep, 32 KiB in
//    all) is packed on the stack (or produced by pack_b: conv2d's patches;
//    or read in place when M is short), then the tile sweeps the task's rows
//    over the group, reading A in place or from prepared panels.
// Tasks own disjoint (row block, column group) tiles of C and every element
// is summed in the same order whatever the thread count, the loop order or
// what was prepared: results depend only on the ISA path chosen for the
// machine (AVX-512, AVX2+FMA, NEON or the portable loop).
#include <algorithm>
#include <cstring>

#include "kernel_util.h"
#include "thread_pool.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HEXIR_GEMM_X86 1
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#define HEXIR_GEMM_NEON 1
#endif
#ifndef HEXIR_AVX512_MR
#define HEXIR_AVX512_MR 12
#endif

namespace hexir::hal::cpu::internal {
namespace {

constexpr int64_t kKc = 256;    // K block: a packed strip is kKc x NR floats
constexpr int64_t kMaxNr = 32;  // the widest strip (AVX-512: two zmm)
constexpr int64_t kMaxMr = 16;  // the tallest register tile
// Rows per task at most (rounded to a multiple of the path's MR): on the
// per-call path each packed strip of B is used by that many rows, read from A
// in place (192 x 256 floats of A: 192 KiB, in L2).
constexpr int64_t kRowBlock = 192;
// Prepared B: the fewest strips a task takes (it packs its rows of A once per
// K block). 4 measured best on the 128-row GEMMs of a T=128 encoder at 2
// threads (1, 4, 8: 1.23-1.33, 0.83-1.06, 1.29-1.43 ms per invoke).
constexpr int64_t kMinStripsPerTask = 4;
// Prepared B: the strips one packed A panel sweeps before the next panel is
// packed, about this many bytes of B, so the chunk stays in L2 while the
// panel stays in L1.
constexpr int64_t kChunkBytes = 384 * 1024;

// One micro-kernel: C[0:mr, 0:nr] (=, or += when `accumulate`) A[0:mr, 0:kc] * B
// where row k of B is the NR floats at B + k * ldb (a packed strip: ldb = NR).
// A is read in place (row i at A + i * lda) or, when `a_packed`, from a packed
// panel (k at A + k * MR, MR the path's, zero past mr). mr <= MR, nr <= NR.
// Both ways of reading A do the same multiply-adds in the same order. Then
// `finish`, when not null (the tile's last K block).
using MicroKernel = void (*)(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda, bool a_packed,
                             const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate,
                             const TileFinish* finish);

// Optional: `strips` whole tiles of a full panel of A (mr = MR: packed, lda
// unused; or in place, rows lda apart) side by side, strip s of B at B + s *
// step with rows ldb apart (packed: kc x NR floats apart, ldb NR; read in
// place: NR apart, B's own ldb), C's and the finish's columns NR on per
// tile: one call where the tiles' own calls (through MicroKernel, its
// prologue, a TileFinish each) were a tenth of BlazeFace-256's separable time.
using StripsKernel = void (*)(int64_t kc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t step,
                              int64_t strips, float* C, int64_t ldc, bool accumulate, const TileFinish* finish);

// gemm_few_rows's block: sums[i * ld + s * NR + j] (=, or += when
// `accumulate`) sum over k < kc of A(i, k) * strip s's B[k][j], for i < rows
// (<= kFewRows) and s < strips, B[k][j] of strip s at B + s * b_strip + k *
// b_row + j (packed: b_strip kc * NR, b_row NR; row-major B read where it
// lies: b_strip NR, b_row its ldb); A(i, k) at a[i * a_row + k * a_k].
using FewRowsKernel = void (*)(int64_t rows, int64_t strips, int64_t kc, const float* a, int64_t a_row, int64_t a_k,
                               const float* B, int64_t b_strip, int64_t b_row, float* sums, int64_t ld,
                               bool accumulate);

struct GemmPath {
  int64_t mr, nr;       // the register tile with A packed (MR-interleaved panels)
  int64_t mr_in_place;  // its height when A is read in place (MR row pointers cost registers)
  MicroKernel kernel;
  FewRowsKernel few_rows;
  StripsKernel strips = nullptr;           // A packed
  StripsKernel strips_in_place = nullptr;  // A read in place
  int64_t mr_segments = 0;                 // GemmTile's
  GemmTile::Segments segments = nullptr;
};

// Writes the first `nr` lanes of an accumulated tile row.
inline void store_row(const float* acc, int64_t nr, float* c, bool accumulate) {
  if (accumulate)
    for (int64_t j = 0; j < nr; ++j) c[j] += acc[j];
  else
    std::memcpy(c, acc, static_cast<size_t>(nr) * sizeof(float));
}

// A TileFinish over a stored mr x nr tile (the paths without a register one).
void finish_stored(const TileFinish& f, float* C, int64_t ldc, int64_t mr, int64_t nr) {
  for (int64_t i = 0; i < mr; ++i) {
    float* c = C + i * ldc;
    if (f.row_bias)
      for (int64_t j = 0; j < nr; ++j) c[j] += f.row_bias[i];
    if (f.col_bias)
      for (int64_t j = 0; j < nr; ++j) c[j] += f.col_bias[j];
    if (f.residual)
      for (int64_t j = 0; j < nr; ++j) c[j] += f.residual[i * f.ldr + j];
    if (f.activation == ops::Activation::kRelu)
      for (int64_t j = 0; j < nr; ++j) c[j] = ops::relu_of(c[j]);
    else if (f.activation == ops::Activation::kClip)
      for (int64_t j = 0; j < nr; ++j) c[j] = ops::clip_of(c[j], f.lo, f.hi);
    else if (f.activation == ops::Activation::kHardSigmoid)
      for (int64_t j = 0; j < nr; ++j) c[j] = ops::hard_sigmoid_of(c[j], f.lo, f.hi);
    else if (f.activation == ops::Activation::kHardSwish)
      for (int64_t j = 0; j < nr; ++j) c[j] = ops::hard_swish_of(c[j]);
  }
}

// The A element of row i at depth k: in place (AS = 0) or from a panel AS wide.
template <int64_t AS>
inline float a_at(const float* A, int64_t lda, int64_t i, int64_t k) {
  if constexpr (AS == 0)
    return A[i * lda + k];
  else
    return A[k * AS + i];
}

// Portable: 4 x 16, a loop GCC vectorizes for whatever the build targets.
constexpr int64_t kGenericMr = 4;
template <int64_t AS>
void generic_tile(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda, const float* B, int64_t ldb,
                  float* C, int64_t ldc, bool accumulate, const TileFinish* finish) {
  constexpr int64_t MR = kGenericMr, NR = 16;
  float acc[MR][NR] = {};
  for (int64_t k = 0; k < kc; ++k) {
    const float* b = B + k * ldb;
    for (int64_t i = 0; i < MR; ++i) {
      const float a = i < mr ? a_at<AS>(A, lda, i, k) : 0.0f;
      for (int64_t j = 0; j < NR; ++j) acc[i][j] += a * b[j];
    }
  }
  for (int64_t i = 0; i < mr; ++i) store_row(acc[i], nr, C + i * ldc, accumulate);
  if (finish) finish_stored(*finish, C, ldc, mr, nr);
}

void micro_generic(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda, bool a_packed, const float* B,
                   int64_t ldb, float* C, int64_t ldc, bool accumulate, const TileFinish* finish) {
  if (a_packed) return generic_tile<kGenericMr>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
  generic_tile<0>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
}

// The few-rows block, portable: generic_tile's sums, a strip at a time.
void few_rows_generic(int64_t rows, int64_t strips, int64_t kc, const float* a, int64_t a_row, int64_t a_k,
                      const float* B, int64_t b_strip, int64_t b_row, float* sums, int64_t ld, bool accumulate) {
  constexpr int64_t NR = 16;
  for (int64_t s = 0; s < strips; ++s) {
    float acc[kFewRows][NR] = {};
    const float* b = B + s * b_strip;
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t i = 0; i < rows; ++i) {
        const float x = a[i * a_row + k * a_k];
        for (int64_t j = 0; j < NR; ++j) acc[i][j] += x * b[k * b_row + j];
      }
    for (int64_t i = 0; i < rows; ++i) store_row(acc[i], NR, sums + i * ld + s * NR, accumulate);
  }
}

#ifdef HEXIR_GEMM_X86
// AVX2 + FMA: 6 x 16 (12 ymm accumulators, 2 for B, 1 broadcast); 6 x 8
// (NV = 1) for a strip of 8 columns or fewer, which the 16-wide tile would
// compute half in vain (channels-last convolutions with 24 output channels).
constexpr int64_t kAvx2Mr = 6;
// A TileFinish's activation over a whole register tile.
template <ops::Activation A, int64_t MR, int NV>
[[gnu::target("avx2,fma")]] inline void activate_tile(__m256 (&acc)[MR][NV], __m256 lo, __m256 hi) {
#pragma GCC unroll 16
  for (int64_t i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = tile_activation(A, acc[i][v], lo, hi);
}

// LDB: B's row stride when known here (a packed strip, 16), else 0 (ldb).
// SEG: A in `segments` pieces of kc columns, piece s at A + s * segment_stride
// (row i at + i * lda), B's rows continuing (GemmTile::run_segments).
template <int64_t MR, int64_t AS, int64_t LDB = 0, int NV = 2, bool SEG = false>
[[gnu::target("avx2,fma")]] HEXIR_KERNEL_NO_UBSAN void avx2_tile(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda,
                                           const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate,
                                           const TileFinish* finish, int64_t segments = 1,
                                           int64_t segment_stride = 0) {
  if constexpr (LDB != 0) ldb = LDB;
  __m256 acc[MR][NV];
#pragma GCC unroll 16
  for (int64_t i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
  for (int64_t s = 0; s < (SEG ? segments : 1); ++s) {
    const float* As = SEG ? A + s * segment_stride : A;
    const float* Bs = SEG ? B + s * kc * ldb : B;
    for (int64_t k = 0; k < kc; ++k) {
      // B's rows come from L2 (a prepared strip) or a just-packed strip: ask
      // for the one 8 rows on (BERT-base MLP GEMMs, prepared, 5 alternated
      // runs on a noisy host: median 72 -> 82 % and 77 -> 81 % of peak).
      _mm_prefetch(reinterpret_cast<const char*>(Bs + (k + 8) * ldb), _MM_HINT_T0);
      __m256 b[NV];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) b[v] = _mm256_loadu_ps(Bs + k * ldb + 8 * v);
#pragma GCC unroll 16
      for (int64_t i = 0; i < MR; ++i) {
        const __m256 a = _mm256_set1_ps(a_at<AS>(As, lda, i, k));
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(a, b[v], acc[i][v]);
      }
    }
  }
  if (nr < 8 * NV) {  // a partial tile: stored through a row on the stack, then finished there
#pragma GCC unroll 16
    for (int64_t i = 0; i < MR && i < mr; ++i) {
      alignas(32) float row[8 * NV];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) _mm256_store_ps(row + 8 * v, acc[i][v]);
      store_row(row, nr, C + i * ldc, accumulate);
    }
    if (finish) finish_stored(*finish, C, ldc, mr, nr);
    return;
  }
  // A whole tile: the finish stage by stage over all its registers, each
  // test once per tile (tested per vector, they were 6-10 % of the 1x1
  // convolutions' time in BlazeFace-256's separable blocks). The same steps
  // in the same order per element as below.
  if (mr == MR) {
    if (accumulate)
#pragma GCC unroll 16
      for (int64_t i = 0; i < MR; ++i)
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_add_ps(_mm256_loadu_ps(C + i * ldc + 8 * v), acc[i][v]);
    if (finish) {
      const TileFinish& f = *finish;
      if (f.row_bias)
#pragma GCC unroll 16
        for (int64_t i = 0; i < MR; ++i) {
          const __m256 b = _mm256_broadcast_ss(f.row_bias + i);
#pragma GCC unroll 2
          for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_add_ps(acc[i][v], b);
        }
      if (f.col_bias)
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) {
          const __m256 b = _mm256_loadu_ps(f.col_bias + 8 * v);
#pragma GCC unroll 16
          for (int64_t i = 0; i < MR; ++i) acc[i][v] = _mm256_add_ps(acc[i][v], b);
        }
      if (f.residual)
#pragma GCC unroll 16
        for (int64_t i = 0; i < MR; ++i)
#pragma GCC unroll 2
          for (int v = 0; v < NV; ++v)
            acc[i][v] = _mm256_add_ps(acc[i][v], _mm256_loadu_ps(f.residual + i * f.ldr + 8 * v));
      if (f.activation != ops::Activation::kNone) {
        const __m256 lo = _mm256_set1_ps(f.lo), hi = _mm256_set1_ps(f.hi);
        switch (f.activation) {  // a constant activation per loop: no test per vector
          case ops::Activation::kRelu: activate_tile<ops::Activation::kRelu>(acc, lo, hi); break;
          case ops::Activation::kClip: activate_tile<ops::Activation::kClip>(acc, lo, hi); break;
          case ops::Activation::kHardSigmoid: activate_tile<ops::Activation::kHardSigmoid>(acc, lo, hi); break;
          case ops::Activation::kHardSwish: activate_tile<ops::Activation::kHardSwish>(acc, lo, hi); break;
          default: break;  // tile_finish_applies: no other
        }
      }
    }
#pragma GCC unroll 16
    for (int64_t i = 0; i < MR; ++i)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) _mm256_storeu_ps(C + i * ldc + 8 * v, acc[i][v]);
    return;
  }
  // The finish in registers, the float steps of finish_stored.
  const TileFinish f = finish ? *finish : TileFinish{};
  __m256 col[NV];
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v) col[v] = f.col_bias ? _mm256_loadu_ps(f.col_bias + 8 * v) : _mm256_setzero_ps();
  const __m256 lo = _mm256_set1_ps(f.lo), hi = _mm256_set1_ps(f.hi);
#pragma GCC unroll 16
  for (int64_t i = 0; i < MR && i < mr; ++i) {
    float* c = C + i * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      __m256 x = acc[i][v];
      if (accumulate) x = _mm256_add_ps(_mm256_loadu_ps(c + 8 * v), x);
      if (finish) {
        if (f.row_bias) x = _mm256_add_ps(x, _mm256_set1_ps(f.row_bias[i]));
        if (f.col_bias) x = _mm256_add_ps(x, col[v]);
        if (f.residual) x = _mm256_add_ps(x, _mm256_loadu_ps(f.residual + i * f.ldr + 8 * v));
        x = tile_activation(f.activation, x, lo, hi);
      }
      _mm256_storeu_ps(c + 8 * v, x);
    }
  }
}

template <int NV>
[[gnu::target("avx2,fma")]] void avx2_rows(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda,
                                           const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate,
                                           const TileFinish* finish) {
  switch (mr) {
    case 6: return avx2_tile<6, 0, 0, NV>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
    case 5: return avx2_tile<5, 0, 0, NV>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
    case 4: return avx2_tile<4, 0, 0, NV>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
    case 3: return avx2_tile<3, 0, 0, NV>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
    case 2: return avx2_tile<2, 0, 0, NV>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
    default: return avx2_tile<1, 0, 0, NV>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
  }
}

[[gnu::target("avx2,fma")]] void micro_avx2(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda,
                                            bool a_packed, const float* B, int64_t ldb, float* C, int64_t ldc,
                                            bool accumulate, const TileFinish* finish) {
  if (a_packed && ldb == 16 && nr <= 8)
    return avx2_tile<kAvx2Mr, kAvx2Mr, 16, 1>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
  if (a_packed && ldb == 16)
    return avx2_tile<kAvx2Mr, kAvx2Mr, 16>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
  if (a_packed) return avx2_tile<kAvx2Mr, kAvx2Mr>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
  if (nr <= 8) return avx2_rows<1>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
  avx2_rows<2>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
}

// GemmTile::run_segments: A in place, up to kAvx2Mr rows.
template <int NV>
[[gnu::target("avx2,fma")]] void avx2_segment_rows(int64_t mr, int64_t nr, int64_t segments, int64_t kc,
                                                   const float* A, int64_t lda, int64_t stride, const float* B,
                                                   int64_t ldb, float* C, int64_t ldc, const TileFinish* finish) {
  switch (mr) {
    case 6: return avx2_tile<6, 0, 0, NV, true>(mr, nr, kc, A, lda, B, ldb, C, ldc, false, finish, segments, stride);
    case 5: return avx2_tile<5, 0, 0, NV, true>(mr, nr, kc, A, lda, B, ldb, C, ldc, false, finish, segments, stride);
    case 4: return avx2_tile<4, 0, 0, NV, true>(mr, nr, kc, A, lda, B, ldb, C, ldc, false, finish, segments, stride);
    case 3: return avx2_tile<3, 0, 0, NV, true>(mr, nr, kc, A, lda, B, ldb, C, ldc, false, finish, segments, stride);
    case 2: return avx2_tile<2, 0, 0, NV, true>(mr, nr, kc, A, lda, B, ldb, C, ldc, false, finish, segments, stride);
    default: return avx2_tile<1, 0, 0, NV, true>(mr, nr, kc, A, lda, B, ldb, C, ldc, false, finish, segments, stride);
  }
}

[[gnu::target("avx2,fma")]] void segments_avx2(int64_t mr, int64_t nr, int64_t segments, int64_t kc, const float* A,
                                               int64_t lda, int64_t stride, const float* B, int64_t ldb, float* C,
                                               int64_t ldc, const TileFinish* finish) {
  if (nr <= 8) return avx2_segment_rows<1>(mr, nr, segments, kc, A, lda, stride, B, ldb, C, ldc, finish);
  avx2_segment_rows<2>(mr, nr, segments, kc, A, lda, stride, B, ldb, C, ldc, finish);
}

// AS: A's layout, as avx2_tile's (kAvx2Mr packed, 0 in place).
template <int64_t AS>
[[gnu::target("avx2,fma")]] void strips_avx2(int64_t kc, const float* A, int64_t lda, const float* B, int64_t ldb,
                                             int64_t step, int64_t strips, float* C, int64_t ldc, bool accumulate,
                                             const TileFinish* finish) {
  TileFinish f = finish ? *finish : TileFinish{};
  for (int64_t s = 0; s < strips; ++s) {
    if (ldb == 16)  // packed: the row stride a constant
      avx2_tile<kAvx2Mr, AS, 16>(kAvx2Mr, 16, kc, A, AS != 0 ? AS : lda, B + s * step, 16, C + s * 16, ldc,
                                 accumulate, finish ? &f : nullptr);
    else
      avx2_tile<kAvx2Mr, AS>(kAvx2Mr, 16, kc, A, AS != 0 ? AS : lda, B + s * step, ldb, C + s * 16, ldc, accumulate,
                             finish ? &f : nullptr);
    if (f.col_bias) f.col_bias += 16;
    if (f.residual) f.residual += 16;
  }
}

// AVX-512: 12 x 32 from packed A (24 zmm accumulators, 2 for B, 1 broadcast),
// 8 x 32 reading A in place (up to 12 rows where B is narrow: the GEMM's
// in-place rows); partial columns through masked stores. The
// loops over rows are unrolled by pragma: GCC otherwise keeps a 12-row
// tile's accumulators on the stack (half the speed).
constexpr int64_t kAvx512Mr = HEXIR_AVX512_MR;
constexpr int64_t kAvx512MrInPlace = 8;
// A TileFinish's activation over a whole AVX-512 tile.
template <ops::Activation A, int64_t MR, int NV>
[[gnu::target("avx512f")]] inline void activate_tile512(__m512 (&c)[NV][MR], __m512 lo, __m512 hi) {
#pragma GCC unroll 16
  for (int64_t i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) c[v][i] = tile_activation(A, c[v][i], lo, hi);
}
// NV vectors of 16 columns: 2 (the 32-wide strip), or 1 for a strip of 16
// columns or fewer, which the two-vector tile computed half in vain (1x1
// convolutions to 16 channels: mnasnet's and efficientnet's 112x112 ones ran
// at half onnxruntime's rate).
// SEG as avx2_tile's.
template <int64_t MR, int64_t AS, int NV = 2, bool SEG = false>
[[gnu::target("avx512f")]] HEXIR_KERNEL_NO_UBSAN void avx512_tile(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda,
                                            const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate,
                                            const TileFinish* finish, int64_t segments = 1,
                                            int64_t segment_stride = 0) {
  __m512 c[NV][MR];
  // The C tile is read back after the K loop: ask for it now, so it arrives
  // from L2/L3 while the FMAs run (C is re-read once per K block).
  if (accumulate) {
#pragma GCC unroll 16
    for (int64_t i = 0; i < MR; ++i) {
      if (i < mr)
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) _mm_prefetch(reinterpret_cast<const char*>(C + i * ldc + 16 * v), _MM_HINT_T0);
    }
  }
  // Likewise the residual this tile adds at its end.
  if (finish && finish->residual) {
#pragma GCC unroll 16
    for (int64_t i = 0; i < MR; ++i) {
      if (i < mr)
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v)
          _mm_prefetch(reinterpret_cast<const char*>(finish->residual + i * finish->ldr + 16 * v), _MM_HINT_T0);
    }
  }
#pragma GCC unroll 16
  for (int64_t i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) c[v][i] = _mm512_setzero_ps();
  for (int64_t s = 0; s < (SEG ? segments : 1); ++s) {
    const float* As = SEG ? A + s * segment_stride : A;
    const float* Bs = SEG ? B + s * kc * ldb : B;
    for (int64_t k = 0; k < kc; ++k) {
      __m512 b[NV];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) b[v] = _mm512_loadu_ps(Bs + k * ldb + 16 * v);
#pragma GCC unroll 16
      for (int64_t i = 0; i < MR; ++i) {
        const __m512 a = _mm512_set1_ps(a_at<AS>(As, lda, i, k));
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) c[v][i] = _mm512_fmadd_ps(a, b[v], c[v][i]);
      }
    }
  }
  // A whole tile: the finish stage by stage over all its registers, each
  // test once per tile (AVX2's avx2_tile does the same), the same steps in
  // the same order per element as below.
  if (mr == MR && nr == 16 * NV) {
    if (accumulate)
#pragma GCC unroll 16
      for (int64_t i = 0; i < MR; ++i)
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) c[v][i] = _mm512_add_ps(_mm512_loadu_ps(C + i * ldc + 16 * v), c[v][i]);
    if (finish) {
      const TileFinish& f = *finish;
      if (f.row_bias)
#pragma GCC unroll 16
        for (int64_t i = 0; i < MR; ++i) {
          const __m512 b = _mm512_set1_ps(f.row_bias[i]);
#pragma GCC unroll 2
          for (int v = 0; v < NV; ++v) c[v][i] = _mm512_add_ps(c[v][i], b);
        }
      if (f.col_bias) {
        __m512 b[NV];
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) b[v] = _mm512_loadu_ps(f.col_bias + 16 * v);
#pragma GCC unroll 16
        for (int64_t i = 0; i < MR; ++i)
#pragma GCC unroll 2
          for (int v = 0; v < NV; ++v) c[v][i] = _mm512_add_ps(c[v][i], b[v]);
      }
      if (f.residual)
#pragma GCC unroll 16
        for (int64_t i = 0; i < MR; ++i)
#pragma GCC unroll 2
          for (int v = 0; v < NV; ++v)
            c[v][i] = _mm512_add_ps(c[v][i], _mm512_loadu_ps(f.residual + i * f.ldr + 16 * v));
      if (f.activation != ops::Activation::kNone) {
        const __m512 lo = _mm512_set1_ps(f.lo), hi = _mm512_set1_ps(f.hi);
        switch (f.activation) {  // a constant activation per loop: no test per vector
          case ops::Activation::kRelu: activate_tile512<ops::Activation::kRelu, MR, NV>(c, lo, hi); break;
          case ops::Activation::kClip: activate_tile512<ops::Activation::kClip, MR, NV>(c, lo, hi); break;
          case ops::Activation::kHardSigmoid:
            activate_tile512<ops::Activation::kHardSigmoid, MR, NV>(c, lo, hi);
            break;
          case ops::Activation::kHardSwish: activate_tile512<ops::Activation::kHardSwish, MR, NV>(c, lo, hi); break;
          default: break;  // tile_finish_applies: no other
        }
      }
    }
#pragma GCC unroll 16
    for (int64_t i = 0; i < MR; ++i)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) _mm512_storeu_ps(C + i * ldc + 16 * v, c[v][i]);
    return;
  }
  __mmask16 m[NV];
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v) {
    const int64_t left = nr - 16 * v;
    m[v] = left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
  }
  // The finish in registers: no pass over the stored tile (a masked store
  // does not forward to the narrower loads such a pass makes).
  const TileFinish f = finish ? *finish : TileFinish{};
  __m512 col[NV];
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v) col[v] = f.col_bias ? _mm512_maskz_loadu_ps(m[v], f.col_bias + 16 * v) : _mm512_setzero_ps();
  const __m512 lo = _mm512_set1_ps(f.lo), hi = _mm512_set1_ps(f.hi);
#pragma GCC unroll 16
  for (int64_t i = 0; i < MR && i < mr; ++i) {
    float* ci = C + i * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      if (accumulate) c[v][i] = _mm512_add_ps(_mm512_maskz_loadu_ps(m[v], ci + 16 * v), c[v][i]);
      if (finish) {
        if (f.row_bias) c[v][i] = _mm512_add_ps(c[v][i], _mm512_set1_ps(f.row_bias[i]));
        if (f.col_bias) c[v][i] = _mm512_add_ps(c[v][i], col[v]);
        if (f.residual) c[v][i] = _mm512_add_ps(c[v][i], _mm512_maskz_loadu_ps(m[v], f.residual + i * f.ldr + 16 * v));
        c[v][i] = tile_activation(f.activation, c[v][i], lo, hi);
      }
      _mm512_mask_storeu_ps(ci + 16 * v, m[v], c[v][i]);
    }
  }
}

template <int64_t MR, int NV>
[[gnu::target("avx512f")]] void avx512_rows(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda,
                                            const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate,
                                            const TileFinish* finish) {
  if constexpr (MR > 1) {
    if (mr < MR) return avx512_rows<MR - 1, NV>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
  }
  avx512_tile<MR, 0, NV>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
}

// A packed panel's last tile of fewer than MR rows: a tile as tall as its
// rows, reading the panel (kAvx512Mr floats per k). The full-height tile
// computed the zero rows too: a 7 x 7 map's 49 pixels were 60 rows of
// work (four 12-row panels and a 1-row one), ViT-B/32's 50 tokens 60.
template <int64_t MR, int NV>
[[gnu::target("avx512f")]] void avx512_packed_rows(int64_t mr, int64_t nr, int64_t kc, const float* A,
                                                   const float* B, int64_t ldb, float* C, int64_t ldc,
                                                   bool accumulate, const TileFinish* finish) {
  if constexpr (MR > 1) {
    if (mr < MR) return avx512_packed_rows<MR - 1, NV>(mr, nr, kc, A, B, ldb, C, ldc, accumulate, finish);
  }
  avx512_tile<MR, kAvx512Mr, NV>(mr, nr, kc, A, kAvx512Mr, B, ldb, C, ldc, accumulate, finish);
}

// A packed panel's whole tiles side by side (StripsKernel).
[[gnu::target("avx512f")]] void strips_avx512(int64_t kc, const float* A, int64_t, const float* B, int64_t ldb,
                                              int64_t step, int64_t strips, float* C, int64_t ldc, bool accumulate,
                                              const TileFinish* finish) {
  TileFinish f = finish ? *finish : TileFinish{};
  for (int64_t s = 0; s < strips; ++s) {
    avx512_tile<kAvx512Mr, kAvx512Mr>(kAvx512Mr, 32, kc, A, kAvx512Mr, B + s * step, ldb, C + s * 32, ldc, accumulate,
                                      finish ? &f : nullptr);
    if (f.col_bias) f.col_bias += 32;
    if (f.residual) f.residual += 32;
  }
}

[[gnu::target("avx512f")]] void micro_avx512(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda,
                                             bool a_packed, const float* B, int64_t ldb, float* C, int64_t ldc,
                                             bool accumulate, const TileFinish* finish) {
  if (nr <= 16) {
    if (a_packed && mr < kAvx512Mr)
      return avx512_packed_rows<kAvx512Mr - 1, 1>(mr, nr, kc, A, B, ldb, C, ldc, accumulate, finish);
    if (a_packed) return avx512_tile<kAvx512Mr, kAvx512Mr, 1>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
    return avx512_rows<kAvx512Mr, 1>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
  }
  if (a_packed && mr < kAvx512Mr)
    return avx512_packed_rows<kAvx512Mr - 1, 2>(mr, nr, kc, A, B, ldb, C, ldc, accumulate, finish);
  if (a_packed) return avx512_tile<kAvx512Mr, kAvx512Mr>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
  avx512_rows<kAvx512Mr, 2>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
}

// GemmTile::run_segments: A in place, up to kAvx512MrSegments rows (a row
// pointer is a displacement here, lda apart from one base per segment).
constexpr int64_t kAvx512MrSegments = 12;
template <int64_t MR, int NV>
[[gnu::target("avx512f")]] void avx512_segment_rows(int64_t mr, int64_t nr, int64_t segments, int64_t kc,
                                                    const float* A, int64_t lda, int64_t stride, const float* B,
                                                    int64_t ldb, float* C, int64_t ldc, const TileFinish* finish) {
  if constexpr (MR > 1) {
    if (mr < MR)
      return avx512_segment_rows<MR - 1, NV>(mr, nr, segments, kc, A, lda, stride, B, ldb, C, ldc, finish);
  }
  avx512_tile<MR, 0, NV, true>(mr, nr, kc, A, lda, B, ldb, C, ldc, false, finish, segments, stride);
}

[[gnu::target("avx512f")]] void segments_avx512(int64_t mr, int64_t nr, int64_t segments, int64_t kc,
                                                const float* A, int64_t lda, int64_t stride, const float* B,
                                                int64_t ldb, float* C, int64_t ldc, const TileFinish* finish) {
  if (nr <= 16)
    return avx512_segment_rows<kAvx512MrSegments, 1>(mr, nr, segments, kc, A, lda, stride, B, ldb, C, ldc, finish);
  avx512_segment_rows<kAvx512MrSegments, 2>(mr, nr, segments, kc, A, lda, stride, B, ldb, C, ldc, finish);
}

// The few-rows blocks: R rows x G strips of accumulators (2 vectors per
// strip), G as many as the registers hold beside B's vectors; the strips
// past a multiple of G one at a time.
template <int64_t R, int64_t G>
[[gnu::target("avx2,fma")]] inline void few_rows_avx2_block(int64_t kc, const float* a, int64_t a_row, int64_t a_k,
                                                            const float* B, int64_t b_strip, int64_t b_row,
                                                            float* sums, int64_t ld, bool accumulate) {
  __m256 acc[R][G][2];
#pragma GCC unroll 16
  for (int64_t i = 0; i < R; ++i)
#pragma GCC unroll 16
    for (int64_t s = 0; s < G; ++s) acc[i][s][0] = acc[i][s][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    __m256 b[G][2];
#pragma GCC unroll 16
    for (int64_t s = 0; s < G; ++s) {
      b[s][0] = _mm256_loadu_ps(B + s * b_strip + k * b_row);
      b[s][1] = _mm256_loadu_ps(B + s * b_strip + k * b_row + 8);
    }
#pragma GCC unroll 16
    for (int64_t i = 0; i < R; ++i) {
      const __m256 x = _mm256_broadcast_ss(a + i * a_row + k * a_k);
#pragma GCC unroll 16
      for (int64_t s = 0; s < G; ++s) {
        acc[i][s][0] = _mm256_fmadd_ps(x, b[s][0], acc[i][s][0]);
        acc[i][s][1] = _mm256_fmadd_ps(x, b[s][1], acc[i][s][1]);
      }
    }
  }
#pragma GCC unroll 16
  for (int64_t i = 0; i < R; ++i)
#pragma GCC unroll 16
    for (int64_t s = 0; s < G; ++s)
#pragma GCC unroll 2
      for (int64_t v = 0; v < 2; ++v) {
        float* out = sums + i * ld + s * 16 + v * 8;
        _mm256_storeu_ps(out, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out), acc[i][s][v]) : acc[i][s][v]);
      }
}

template <int64_t R>
[[gnu::target("avx2,fma")]] void few_rows_avx2_rows(int64_t strips, int64_t kc, const float* a, int64_t a_row,
                                                    int64_t a_k, const float* B, int64_t b_strip, int64_t b_row,
                                                    float* sums, int64_t ld, bool accumulate) {
  constexpr int64_t G = R == 1 ? 4 : R == 2 ? 2 : 1;  // 8, 8, 6, 8 accumulators of 16 ymm
  int64_t s = 0;
  for (; s + G <= strips; s += G)
    few_rows_avx2_block<R, G>(kc, a, a_row, a_k, B + s * b_strip, b_strip, b_row, sums + s * 16, ld, accumulate);
  for (; s < strips; ++s)
    few_rows_avx2_block<R, 1>(kc, a, a_row, a_k, B + s * b_strip, b_strip, b_row, sums + s * 16, ld, accumulate);
}

[[gnu::target("avx2,fma")]] void few_rows_avx2(int64_t rows, int64_t strips, int64_t kc, const float* a, int64_t a_row,
                                               int64_t a_k, const float* B, int64_t b_strip, int64_t b_row,
                                               float* sums, int64_t ld, bool accumulate) {
  static_assert(kFewRows == 4);
  switch (rows) {
    case 1: return few_rows_avx2_rows<1>(strips, kc, a, a_row, a_k, B, b_strip, b_row, sums, ld, accumulate);
    case 2: return few_rows_avx2_rows<2>(strips, kc, a, a_row, a_k, B, b_strip, b_row, sums, ld, accumulate);
    case 3: return few_rows_avx2_rows<3>(strips, kc, a, a_row, a_k, B, b_strip, b_row, sums, ld, accumulate);
    default: return few_rows_avx2_rows<4>(strips, kc, a, a_row, a_k, B, b_strip, b_row, sums, ld, accumulate);
  }
}

template <int64_t R, int64_t G>
[[gnu::target("avx512f")]] inline void few_rows_avx512_block(int64_t kc, const float* a, int64_t a_row, int64_t a_k,
                                                            const float* B, int64_t b_strip, int64_t b_row,
                                                            float* sums, int64_t ld, bool accumulate) {
  __m512 acc[R][G][2];
#pragma GCC unroll 16
  for (int64_t i = 0; i < R; ++i)
#pragma GCC unroll 16
    for (int64_t s = 0; s < G; ++s) acc[i][s][0] = acc[i][s][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    __m512 b[G][2];
#pragma GCC unroll 16
    for (int64_t s = 0; s < G; ++s) {
      b[s][0] = _mm512_loadu_ps(B + s * b_strip + k * b_row);
      b[s][1] = _mm512_loadu_ps(B + s * b_strip + k * b_row + 16);
    }
#pragma GCC unroll 16
    for (int64_t i = 0; i < R; ++i) {
      const __m512 x = _mm512_set1_ps(a[i * a_row + k * a_k]);
#pragma GCC unroll 16
      for (int64_t s = 0; s < G; ++s) {
        acc[i][s][0] = _mm512_fmadd_ps(x, b[s][0], acc[i][s][0]);
        acc[i][s][1] = _mm512_fmadd_ps(x, b[s][1], acc[i][s][1]);
      }
    }
  }
#pragma GCC unroll 16
  for (int64_t i = 0; i < R; ++i)
#pragma GCC unroll 16
    for (int64_t s = 0; s < G; ++s)
#pragma GCC unroll 2
      for (int64_t v = 0; v < 2; ++v) {
        float* out = sums + i * ld + s * 32 + v * 16;
        _mm512_storeu_ps(out, accumulate ? _mm512_add_ps(_mm512_loadu_ps(out), acc[i][s][v]) : acc[i][s][v]);
      }
}

template <int64_t R>
[[gnu::target("avx512f")]] void few_rows_avx512_rows(int64_t strips, int64_t kc, const float* a, int64_t a_row,
                                                      int64_t a_k, const float* B, int64_t b_strip, int64_t b_row,
                                                      float* sums, int64_t ld, bool accumulate) {
  // One row: one strip at a time. The packed strips are kc x 128 bytes
  // apart (a multiple of 4 KiB for kc a multiple of 32), so four strips'
  // rows likely share L1 sets; a 1 x 128 x 512 product from L2 took 2.5
  // us with four, 2.4 with one (a recurrent step: lstm_2x_bidir 1.86 ->
  // 1.82 ms on a Zen 4); two were slower than either.
  constexpr int64_t G = R == 1 ? 1 : R == 2 ? 4 : R == 3 ? 3 : 2;  // 2, 16, 18, 16 accumulators of 32 zmm
  int64_t s = 0;
  for (; s + G <= strips; s += G)
    few_rows_avx512_block<R, G>(kc, a, a_row, a_k, B + s * b_strip, b_strip, b_row, sums + s * 32, ld, accumulate);
  for (; s < strips; ++s)
    few_rows_avx512_block<R, 1>(kc, a, a_row, a_k, B + s * b_strip, b_strip, b_row, sums + s * 32, ld, accumulate);
}

[[gnu::target("avx512f")]] void few_rows_avx512(int64_t rows, int64_t strips, int64_t kc, const float* a,
                                                int64_t a_row, int64_t a_k, const float* B, int64_t b_strip,
                                                int64_t b_row, float* sums, int64_t ld, bool accumulate) {
  switch (rows) {
    case 1: return few_rows_avx512_rows<1>(strips, kc, a, a_row, a_k, B, b_strip, b_row, sums, ld, accumulate);
    case 2: return few_rows_avx512_rows<2>(strips, kc, a, a_row, a_k, B, b_strip, b_row, sums, ld, accumulate);
    case 3: return few_rows_avx512_rows<3>(strips, kc, a, a_row, a_k, B, b_strip, b_row, sums, ld, accumulate);
    default: return few_rows_avx512_rows<4>(strips, kc, a, a_row, a_k, B, b_strip, b_row, sums, ld, accumulate);
  }
}
#endif

#ifdef HEXIR_GEMM_NEON
// NEON: 6 x 16 (24 q accumulators, 4 for B's row, 2 for A's 6 floats: 30 of
// the 32 q registers), the AVX2 tile's shape, so the strips stay 16 wide.
// Packed A: one k's 6 floats in two overlapping q loads (floats 0-3 and
// 2-5: a d load of 4-5 compiled to two scalar ones), each row an fmla by
// element (vfmaq_laneq_f32); A in place: a scalar per row (vfmaq_n_f32, the same
// fused multiply-add). Each element an FMA chain over k from 0, as on x86.
constexpr int64_t kNeonMr = 6;

// Row I of the tile += b * A's row I at this k (packed: a0 holds rows 0-3,
// a1 rows 2-5).
template <int I>
inline void neon_fma_row(float32x4_t (&acc)[4], const float32x4_t (&b)[4], float32x4_t a0, float32x4_t a1) {
  for (int v = 0; v < 4; ++v) {
    if constexpr (I < 4)
      acc[v] = vfmaq_laneq_f32(acc[v], b[v], a0, I);
    else
      acc[v] = vfmaq_laneq_f32(acc[v], b[v], a1, I - 2);
  }
}

// MR rows (AS: A's layout, as a_at's: kNeonMr packed, 0 in place with mr ==
// MR rows readable).
// SEG as avx2_tile's.
template <int64_t MR, int64_t AS, bool SEG = false>
void neon_tile(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda, const float* B, int64_t ldb,
               float* C, int64_t ldc, bool accumulate, const TileFinish* finish, int64_t segments = 1,
               int64_t segment_stride = 0) {
  float32x4_t acc[MR][4];
#pragma GCC unroll 16
  for (int64_t i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) acc[i][v] = vdupq_n_f32(0.0f);
  for (int64_t s = 0; s < (SEG ? segments : 1); ++s) {
    const float* As = SEG ? A + s * segment_stride : A;
    const float* Bs = SEG ? B + s * kc * ldb : B;
    for (int64_t k = 0; k < kc; ++k) {
      const float* bk = Bs + k * ldb;
      const float32x4_t b[4] = {vld1q_f32(bk), vld1q_f32(bk + 4), vld1q_f32(bk + 8), vld1q_f32(bk + 12)};
      if constexpr (AS == kNeonMr && MR == kNeonMr) {
        const float32x4_t a0 = vld1q_f32(As + k * AS);
        const float32x4_t a1 = vld1q_f32(As + k * AS + 2);
        neon_fma_row<0>(acc[0], b, a0, a1);
        neon_fma_row<1>(acc[1], b, a0, a1);
        neon_fma_row<2>(acc[2], b, a0, a1);
        neon_fma_row<3>(acc[3], b, a0, a1);
        neon_fma_row<4>(acc[4], b, a0, a1);
        neon_fma_row<5>(acc[5], b, a0, a1);
      } else {
#pragma GCC unroll 16
        for (int64_t i = 0; i < MR; ++i) {
          const float a = a_at<AS>(As, lda, i, k);
#pragma GCC unroll 4
          for (int v = 0; v < 4; ++v) acc[i][v] = vfmaq_n_f32(acc[i][v], b[v], a);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int64_t i = 0; i < MR && i < mr; ++i) {
    float* c = C + i * ldc;
    if (nr == 16) {
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v)
        vst1q_f32(c + 4 * v, accumulate ? vaddq_f32(vld1q_f32(c + 4 * v), acc[i][v]) : acc[i][v]);
    } else {
      alignas(16) float row[16];
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) vst1q_f32(row + 4 * v, acc[i][v]);
      store_row(row, nr, c, accumulate);
    }
  }
  // The finish over the stored tile, in L1 (the float steps of x86's register finish).
  if (finish) finish_stored(*finish, C, ldc, mr, nr);
}

void micro_neon(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda, bool a_packed, const float* B,
                int64_t ldb, float* C, int64_t ldc, bool accumulate, const TileFinish* finish) {
  if (a_packed) return neon_tile<kNeonMr, kNeonMr>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
  switch (mr) {  // in place: only the tile's own rows are read
    case 6: return neon_tile<6, 0>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
    case 5: return neon_tile<5, 0>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
    case 4: return neon_tile<4, 0>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
    case 3: return neon_tile<3, 0>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
    case 2: return neon_tile<2, 0>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
    default: return neon_tile<1, 0>(mr, nr, kc, A, lda, B, ldb, C, ldc, accumulate, finish);
  }
}

// GemmTile::run_segments: A in place, up to kNeonMr rows.
void segments_neon(int64_t mr, int64_t nr, int64_t segments, int64_t kc, const float* A, int64_t lda, int64_t stride,
                   const float* B, int64_t ldb, float* C, int64_t ldc, const TileFinish* finish) {
  switch (mr) {
    case 6: return neon_tile<6, 0, true>(mr, nr, kc, A, lda, B, ldb, C, ldc, false, finish, segments, stride);
    case 5: return neon_tile<5, 0, true>(mr, nr, kc, A, lda, B, ldb, C, ldc, false, finish, segments, stride);
    case 4: return neon_tile<4, 0, true>(mr, nr, kc, A, lda, B, ldb, C, ldc, false, finish, segments, stride);
    case 3: return neon_tile<3, 0, true>(mr, nr, kc, A, lda, B, ldb, C, ldc, false, finish, segments, stride);
    case 2: return neon_tile<2, 0, true>(mr, nr, kc, A, lda, B, ldb, C, ldc, false, finish, segments, stride);
    default: return neon_tile<1, 0, true>(mr, nr, kc, A, lda, B, ldb, C, ldc, false, finish, segments, stride);
  }
}

// The few-rows block: R rows x G strips of 16 (4 q each), the tile's FMA
// chains (the same bits as gemm's tiles).
template <int64_t R, int64_t G>
inline void few_rows_neon_block(int64_t kc, const float* a, int64_t a_row, int64_t a_k, const float* B,
                                int64_t b_strip, int64_t b_row, float* sums, int64_t ld, bool accumulate) {
  float32x4_t acc[R][G][4];
#pragma GCC unroll 16
  for (int64_t i = 0; i < R; ++i)
#pragma GCC unroll 16
    for (int64_t s = 0; s < G; ++s)
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) acc[i][s][v] = vdupq_n_f32(0.0f);
  for (int64_t k = 0; k < kc; ++k) {
    float32x4_t b[G][4];
#pragma GCC unroll 16
    for (int64_t s = 0; s < G; ++s)
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) b[s][v] = vld1q_f32(B + s * b_strip + k * b_row + 4 * v);
#pragma GCC unroll 16
    for (int64_t i = 0; i < R; ++i) {
      const float x = a[i * a_row + k * a_k];
#pragma GCC unroll 16
      for (int64_t s = 0; s < G; ++s)
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) acc[i][s][v] = vfmaq_n_f32(acc[i][s][v], b[s][v], x);
    }
  }
#pragma GCC unroll 16
  for (int64_t i = 0; i < R; ++i)
#pragma GCC unroll 16
    for (int64_t s = 0; s < G; ++s)
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        float* out = sums + i * ld + s * 16 + v * 4;
        vst1q_f32(out, accumulate ? vaddq_f32(vld1q_f32(out), acc[i][s][v]) : acc[i][s][v]);
      }
}

template <int64_t R>
void few_rows_neon_rows(int64_t strips, int64_t kc, const float* a, int64_t a_row, int64_t a_k, const float* B,
                        int64_t b_strip, int64_t b_row, float* sums, int64_t ld, bool accumulate) {
  constexpr int64_t G = R <= 2 ? 2 : 1;  // 8, 16, 12, 16 accumulators beside 4 G for B
  int64_t s = 0;
  for (; s + G <= strips; s += G)
    few_rows_neon_block<R, G>(kc, a, a_row, a_k, B + s * b_strip, b_strip, b_row, sums + s * 16, ld, accumulate);
  for (; s < strips; ++s)
    few_rows_neon_block<R, 1>(kc, a, a_row, a_k, B + s * b_strip, b_strip, b_row, sums + s * 16, ld, accumulate);
}

void few_rows_neon(int64_t rows, int64_t strips, int64_t kc, const float* a, int64_t a_row, int64_t a_k,
                   const float* B, int64_t b_strip, int64_t b_row, float* sums, int64_t ld, bool accumulate) {
  static_assert(kFewRows == 4);
  switch (rows) {
    case 1: return few_rows_neon_rows<1>(strips, kc, a, a_row, a_k, B, b_strip, b_row, sums, ld, accumulate);
    case 2: return few_rows_neon_rows<2>(strips, kc, a, a_row, a_k, B, b_strip, b_row, sums, ld, accumulate);
    case 3: return few_rows_neon_rows<3>(strips, kc, a, a_row, a_k, B, b_strip, b_row, sums, ld, accumulate);
    default: return few_rows_neon_rows<4>(strips, kc, a, a_row, a_k, B, b_strip, b_row, sums, ld, accumulate);
  }
}
#endif

// The widest path this process runs (cpu_isa(): the CPU's, or a narrower
// one HEXIR_MAX_CPU_ISA asks for).
GemmPath select_path() {
#ifdef HEXIR_GEMM_X86
  if (isa_avx512())
    return {kAvx512Mr,     32, kAvx512MrInPlace, micro_avx512, few_rows_avx512, strips_avx512, nullptr,
            kAvx512MrSegments, segments_avx512};
  if (isa_avx2())
    return {kAvx2Mr, 16, kAvx2Mr, micro_avx2, few_rows_avx2, strips_avx2<kAvx2Mr>, strips_avx2<0>, kAvx2Mr,
            segments_avx2};
#endif
#ifdef HEXIR_GEMM_NEON
  if (isa_neon()) return {kNeonMr, 16, kNeonMr, micro_neon, few_rows_neon, nullptr, nullptr, kNeonMr, segments_neon};
#endif
  return {kGenericMr, 16, kGenericMr, micro_generic, few_rows_generic};
}

}  // namespace

GemmTile gemm_tile() {
  const GemmPath path = select_path();
  return {path.mr_in_place, path.nr, path.kernel, path.mr_segments, path.segments};
}

namespace {

// Packs B[k0:k0+kc, j0:j0+nr] as kc rows of NR floats, zero beyond nr (a
// row's last strip; whole strips go through pack_strips).
void pack_strip(const float* B, int64_t ldb, int64_t k0, int64_t kc, int64_t j0, int64_t nr, int64_t NR,
                float* out) {
  for (int64_t k = 0; k < kc; ++k) {
    const float* src = B + (k0 + k) * ldb + j0;
    float* dst = out + k * NR;
    std::memcpy(dst, src, static_cast<size_t>(nr) * sizeof(float));
    for (int64_t j = nr; j < NR; ++j) dst[j] = 0.0f;
  }
}

#ifdef HEXIR_GEMM_X86
// pack_strips' 16-wide strip rows as two 32-byte moves (the baseline build's
// copy is four 16-byte ones; in place of it BlazeFace-256's separable blocks
// ran 1-2 % faster, alternated in one process).
[[gnu::target("avx2")]] void pack_strips16_avx2(const float* B, int64_t ldb, int64_t k0, int64_t kc, int64_t j0,
                                                int64_t strips, float* out) {
  for (int64_t k = 0; k < kc; ++k) {
    const float* src = B + (k0 + k) * ldb + j0;
    float* dst = out + k * 16;
    for (int64_t s = 0; s < strips; ++s) {
      const __m256 a = _mm256_loadu_ps(src + s * 16), b = _mm256_loadu_ps(src + s * 16 + 8);
      _mm256_storeu_ps(dst + s * kc * 16, a);
      _mm256_storeu_ps(dst + s * kc * 16 + 8, b);
    }
  }
}
#endif

// Packs `strips` whole strips of B from column j0 on (strip s at out + s *
// kc * NR), a row of B at a time: each row's run of the group is read in
// order. Strip by strip, the reads went down kc rows at once, kc streams of
// one line each; on a 1x1 convolution those rows are planes 64 KiB apart
// (128 x 128 maps), whose lines share L1 and L2 sets, and the 1x1 over 24
// channels ran 45 % slower than on 128 x 126 maps. A strip row is a
// fixed-size copy the compiler inlines (a memcpy call per 64 bytes was 13 %
// of BlazeFace-256's time).
void pack_strips(const float* B, int64_t ldb, int64_t k0, int64_t kc, int64_t j0, int64_t strips, int64_t NR,
                 float* out) {
  auto copy = [&]<int64_t W>() {
    for (int64_t k = 0; k < kc; ++k) {
      const float* src = B + (k0 + k) * ldb + j0;
      float* dst = out + k * W;
      for (int64_t s = 0; s < strips; ++s) std::memcpy(dst + s * kc * W, src + s * W, W * sizeof(float));
    }
  };
#ifdef HEXIR_GEMM_X86
  if (NR == 16 && isa_avx2()) return pack_strips16_avx2(B, ldb, k0, kc, j0, strips, out);
#endif
  if (NR == 16) return copy.template operator()<16>();
  if (NR == 32) return copy.template operator()<32>();
  for (int64_t s = 0; s < strips; ++s) pack_strip(B, ldb, k0, kc, j0 + s * NR, NR, NR, out + s * kc * NR);
}

// Packs A[i0:i0+mr, k0:k0+kc] as kc groups of MR floats (row i of depth k at
// k * MR + i), zero beyond mr.
void pack_panel(const float* A, int64_t lda, int64_t i0, int64_t mr, int64_t k0, int64_t kc, int64_t MR,
                float* out) {
#ifdef HEXIR_GEMM_X86
  // A full panel of 8 to 16 rows, 8 columns of k at a time: two 8 x 8
  // transposes, rows [0, 8) and [MR - 8, MR) (the rows both hold are
  // written twice, the same floats). One float per store was 4 % of the
  // BERT-base MLP block's samples.
  if (mr == MR && MR >= 8 && MR <= 16 && kc >= 8 && isa_avx2()) {
    const float* src = A + i0 * lda + k0;
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
      transpose8x8(src + k, lda, out + k * MR, MR);
      transpose8x8(src + (MR - 8) * lda + k, lda, out + k * MR + MR - 8, MR);
    }
    for (int64_t i = 0; i < MR; ++i)
      for (int64_t r = k; r < kc; ++r) out[r * MR + i] = src[i * lda + r];
    return;
  }
#endif
  for (int64_t i = 0; i < mr; ++i) {
    const float* src = A + (i0 + i) * lda + k0;
    for (int64_t k = 0; k < kc; ++k) out[k * MR + i] = src[k];
  }
  for (int64_t i = mr; i < MR; ++i)
    for (int64_t k = 0; k < kc; ++k) out[k * MR + i] = 0.0f;
}

// Prepared layouts. B: per K block (k0, kc), strip s at k0 * strips * NR +
// s * kc * NR. A: per K block, panel p at k0 * panels * MR + p * kc * MR.
int64_t strips_of(int64_t n, int64_t nr) { return (n + nr - 1) / nr; }

struct GemmJob {
  const GemmArgs* args;
  GemmPath path;
  ThreadPool* pool;       // its participants' scratch holds a task's packed A block; null: none
  int64_t row_blocks;     // tasks are row_blocks x column_groups
  int64_t row_block;      // rows per block (a multiple of MR)
  int64_t column_groups;  // the strips of NR columns split into this many near-equal groups
  bool b_in_place;        // full strips of B read where they are (a short M: packing would not pay)
};

void gemm_task(void* context, int64_t task, int participant) {
  const GemmJob& job = *static_cast<const GemmJob*>(context);
  const GemmArgs& g = *job.args;
  const int64_t MR = job.path.mr, NR = job.path.nr;
  const int64_t rb = task % job.row_blocks, cg = task / job.row_blocks;
  const int64_t i0 = rb * job.row_block, i1 = std::min(g.m, i0 + job.row_block);
  const int64_t s_begin = cg * strips_of(g.n, NR) / job.column_groups;
  const int64_t s_end = (cg + 1) * strips_of(g.n, NR) / job.column_groups;
  const int64_t j_begin = s_begin * NR;
  const int64_t j_end = std::min(g.n, s_end * NR);
  const int64_t strips = strips_of(g.n, NR), panels = (g.m + MR - 1) / MR;
  // A finished register tile (after its last K block): its biases, residual
  // and relu, clip or hard_sigmoid/hard_swish in the micro-kernel (TileFinish), any other activation
  // over the stored panel row right after (finish_panel), while it is in L1 or L2.
  const bool activation_in_tile = g.epilogue && tile_finish_applies(static_cast<ops::Activation>(g.epilogue->activation));
  const ops::Epilogue* stored_epilogue = g.epilogue && !activation_in_tile ? g.epilogue : nullptr;
  const bool finishes = g.row_bias || g.col_bias || g.residual || activation_in_tile;
  auto tile_finish = [&](int64_t i, int64_t j) {
    TileFinish f;
    f.row_bias = g.row_bias ? g.row_bias + i : nullptr;
    f.col_bias = g.col_bias ? g.col_bias + j : nullptr;
    f.residual = g.residual ? g.residual + i * g.ldr + j : nullptr;
    f.ldr = g.ldr;
    if (activation_in_tile) {
      f.activation = static_cast<ops::Activation>(g.epilogue->activation);
      f.lo = g.epilogue->a;
      f.hi = g.epilogue->b;
    }
    return f;
  };
  // Runs the micro-kernel on the tile at (i, j), finishing it after the last K block.
  auto run_tile = [&](int64_t mr, int64_t nr, int64_t kc, const float* a, int64_t lda, bool a_packed,
                      const float* b, int64_t ldb, int64_t i, int64_t j, bool accumulate, bool last) {
    float* c = g.c + i * g.ldc + j;
    if (!last || !finishes) {
      job.path.kernel(mr, nr, kc, a, lda, a_packed, b, ldb, c, g.ldc, accumulate, nullptr);
    } else {
      const TileFinish f = tile_finish(i, j);
      job.path.kernel(mr, nr, kc, a, lda, a_packed, b, ldb, c, g.ldc, accumulate, &f);
    }
  };
  // The other activations (stored_epilogue) over a panel's rows once it has
  // swept its strips [sa, sb) for the last K block, while they are in L1 or
  // L2: one call per panel and chunk, not per tile (a 16-float row per call
  // of gelu_erf_block cost as much again as its erfs: ConvNeXt's MLP up
  // projections), and the whole strips in one call still.
  auto finish_panel = [&](int64_t i, int64_t mr, int64_t sa, int64_t sb, bool last) {
    if (!last || !stored_epilogue) return;
    const int64_t j0 = sa * NR, j1 = std::min(g.n, sb * NR);
    apply_epilogue(*stored_epilogue, g.c + i * g.ldc + j0, g.ldc, mr, j1 - j0);
  };
  // The whole strips among [s_begin, s_end) of a full panel at row i, B's
  // first at b (StripsKernel's ldb and step), through the path's strips
  // kernel (the stored epilogue comes after: finish_panel); returns the first strip
  // left for run_tile.
  auto run_strips = [&](StripsKernel kernel, int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb,
                        int64_t step, int64_t s_begin, int64_t s_end, int64_t i, bool accumulate, bool last) {
    const int64_t count = std::min(s_end, g.n / NR) - s_begin;
    if (count <= 0) return s_begin;
    float* c = g.c + i * g.ldc + s_begin * NR;
    if (!last || !finishes) {
      kernel(kc, a, lda, b, ldb, step, count, c, g.ldc, accumulate, nullptr);
    } else {
      const TileFinish f = tile_finish(i, s_begin * NR);
      kernel(kc, a, lda, b, ldb, step, count, c, g.ldc, accumulate, &f);
    }
    return s_begin + count;
  };
  if (g.k == 0) {
    for (int64_t i = i0; i < i1; ++i) std::fill(g.c + i * g.ldc + j_begin, g.c + i * g.ldc + j_end, 0.0f);
    if (finishes) finish_stored(tile_finish(i0, j_begin), g.c + i0 * g.ldc + j_begin, g.ldc, i1 - i0, j_end - j_begin);
    if (stored_epilogue) apply_epilogue(*stored_epilogue, g.c + i0 * g.ldc + j_begin, g.ldc, i1 - i0, j_end - j_begin);
  }
  // B prepared: the task's rows of A packed once per K block into the
  // participant's scratch (panel p of the block at p * MR * kc), when A is
  // not prepared and the block fits; otherwise each panel is packed again for
  // every chunk of strips (8 times per K block on BERT's 3072-wide GEMM). The
  // per-call path reads A in place: packing it there measured slower.
  // Where the tile reading A in place is as tall as the packed one (AVX2,
  // portable), A is read in place: packing it was a pass as long as the
  // multiply for short K (a 1x1 convolution's 24 channels).
  // So is one strip of B on AVX-512 (N <= 32): each float of A then feeds
  // at most 32 multiply-adds, and packing it cost a quarter of the time of
  // mobilenet_v2's and mnasnet's narrow projections (1x1 144 -> 24 at
  // 56 x 56: 0.19-0.23 -> 0.14-0.16 ms in place, 8 rows a tile).
  // Up to two strips (N <= 64), A read in place in the packed tile's height
  // (12 rows on AVX-512: its 24 accumulators), not packed: ResNet-50's 1x1
  // 256 -> 64 at 56 x 56 0.53 -> 0.47 ms (bench/cpu_kernels); wider B keeps
  // packing (squeezenet's 512 -> 1000 classifier was 1.2x slower in place).
  const bool narrow = g.n <= 2 * NR;
  const int64_t in_place_rows = narrow ? MR : job.path.mr_in_place;
  const bool a_in_place = g.packed_b && !g.packed_a && (job.path.mr == job.path.mr_in_place || narrow);
  float* const a_block = !g.packed_b || g.packed_a || a_in_place || job.pool == nullptr ||
                                 (i1 - i0 + MR - 1) / MR * MR * kKc > kScratchFloatsPerParticipant
                             ? nullptr
                             : job.pool->scratch(participant);
  for (int64_t k0 = 0; k0 < g.k; k0 += kKc) {
    const int64_t kc = std::min(kKc, g.k - k0);
    const bool accumulate = k0 > 0, last = k0 + kc >= g.k;
    if (a_block)
      for (int64_t i = i0; i < i1; i += MR) pack_panel(g.a, g.lda, i, std::min(MR, i1 - i), k0, kc, MR, a_block + (i - i0) * kc);
    if (g.packed_b) {
      // B prepared: an A panel (packed once above, or prepared, or packed
      // here) stays in L1 while it sweeps a chunk of strips that stays in L2.
      alignas(64) float panel[kKc * kMaxMr];
      const float* bk = g.packed_b + k0 * strips * NR;
      const int64_t chunk = std::max<int64_t>(1, kChunkBytes / (kc * NR * static_cast<int64_t>(sizeof(float))));
      for (int64_t s0 = s_begin; s0 < s_end; s0 += chunk) {
        const int64_t s1 = std::min(s_end, s0 + chunk);
        for (int64_t i = i0; i < i1; i += MR) {
          const int64_t mr = std::min(MR, i1 - i);
          if (a_in_place) {
            // The in-place tile's rows at a time (shorter than the packed
            // panel's where the path's packed tile is taller).
            for (int64_t ii = i; ii < i + mr; ii += in_place_rows) {
              const int64_t mi = std::min(in_place_rows, i + mr - ii);
              int64_t s = s0;
              // Whole strips in one call where the path has one (BERT-base's
              // matmuls 0.96-0.98 of their time, alternated in one process).
              if (job.path.strips_in_place && mi == job.path.mr_in_place)
                s = run_strips(job.path.strips_in_place, kc, g.a + ii * g.lda + k0, g.lda, bk + s0 * kc * NR, NR,
                               kc * NR, s0, s1, ii, accumulate, last);
              for (; s < s1; ++s) {
                const int64_t j0 = s * NR, nr = std::min(NR, g.n - j0);
                run_tile(mi, nr, kc, g.a + ii * g.lda + k0, g.lda, false, bk + s * kc * NR, NR, ii, j0, accumulate,
                         last);
              }
            }
            finish_panel(i, mr, s0, s1, last);
            continue;
          }
          const float* ap = panel;
          if (g.packed_a)
            ap = g.packed_a + k0 * panels * MR + (i / MR) * kc * MR;
          else if (a_block)
            ap = a_block + (i - i0) * kc;
          else
            pack_panel(g.a, g.lda, i, mr, k0, kc, MR, panel);
          for (int64_t s = s0; s < s1; ++s) {
            const int64_t j0 = s * NR, nr = std::min(NR, g.n - j0);
            run_tile(mr, nr, kc, ap, MR, true, bk + s * kc * NR, NR, i, j0, accumulate, last);
          }
          finish_panel(i, mr, s0, s1, last);
        }
      }
      continue;
    }
    // Strips are packed a group at a time (as many as fill the buffer: 21 for
    // a 1x1 convolution over 24 channels), then each row tile sweeps the
    // group, so a tile writes (and reads its residual from) runs of the
    // group's columns: one 64-byte line per plane per strip, 72 planes 64 KiB
    // apart on BlazeFace's 128 x 128 maps, was more streams than the
    // hardware prefetcher follows.
    alignas(64) float strip[kKc * kMaxNr];
    const int64_t group = std::max<int64_t>(1, (kKc * kMaxNr) / (kc * NR));
    for (int64_t sg = s_begin; sg < s_end; sg += group) {
      const int64_t sg_end = std::min(s_end, sg + group);
      if (g.pack_b) {
        for (int64_t s = sg; s < sg_end; ++s) {
          const int64_t j0 = s * NR, nr = std::min(NR, g.n - j0);
          g.pack_b(g.pack_context, k0, kc, j0, nr, NR, strip + (s - sg) * kc * NR);
        }
      } else {
        const int64_t whole = std::min(sg_end, g.n / NR);  // strips of NR columns end here
        if (!job.b_in_place && whole > sg) pack_strips(g.b, g.ldb, k0, kc, sg * NR, whole - sg, NR, strip);
        for (int64_t s = std::max(sg, whole); s < sg_end; ++s)
          pack_strip(g.b, g.ldb, k0, kc, s * NR, g.n - s * NR, NR, strip + (s - sg) * kc * NR);
      }
      const int64_t step = g.packed_a ? MR : job.path.mr_in_place;
      for (int64_t i = i0; i < i1; i += step) {
        const int64_t mr = std::min(step, i1 - i);
        // The prepared A panel of rows i.. (a division once per panel, not per tile).
        const float* panel_a = g.packed_a ? g.packed_a + k0 * panels * MR + (i / MR) * kc * MR : nullptr;
        int64_t s = sg;
        // The group's whole strips, packed or read in place, in one call
        // where the path has one (in one process, alternating invokes:
        // BlazeFace-256's separable blocks 0.905-0.915 of their time through
        // run_tile on AVX2).
        if (job.path.strips && panel_a && mr == MR) {
          if (job.b_in_place)
            s = run_strips(job.path.strips, kc, panel_a, MR, g.b + k0 * g.ldb + sg * NR, g.ldb, NR, sg, sg_end, i,
                           accumulate, last);
          else
            s = run_strips(job.path.strips, kc, panel_a, MR, strip, NR, kc * NR, sg, sg_end, i, accumulate, last);
        }
        for (; s < sg_end; ++s) {
          const int64_t j0 = s * NR, nr = std::min(NR, g.n - j0);
          const bool in_place = !g.pack_b && job.b_in_place && nr == NR;
          const float* bp = in_place ? g.b + k0 * g.ldb + j0 : strip + (s - sg) * kc * NR;
          const int64_t ldbp = in_place ? g.ldb : NR;
          if (panel_a)
            run_tile(mr, nr, kc, panel_a, MR, true, bp, ldbp, i, j0, accumulate, last);
          else
            run_tile(mr, nr, kc, g.a + i * g.lda + k0, g.lda, false, bp, ldbp, i, j0, accumulate, last);
        }
        finish_panel(i, mr, sg, sg_end, last);
      }
    }
  }
}

}  // namespace

int64_t gemm_k_block() { return kKc; }

bool gemm_reads_a_in_place() {
  const GemmPath path = select_path();
  return path.mr == path.mr_in_place;
}

int64_t gemm_packed_a_floats(int64_t m, int64_t k) {
  const int64_t MR = select_path().mr;
  return (m + MR - 1) / MR * MR * k;
}

void gemm_pack_a(const float* a, int64_t lda, int64_t m, int64_t k, float* out) {
  const int64_t MR = select_path().mr, panels = (m + MR - 1) / MR;
  for (int64_t k0 = 0; k0 < k; k0 += kKc) {
    const int64_t kc = std::min(kKc, k - k0);
    for (int64_t p = 0; p < panels; ++p)
      pack_panel(a, lda, p * MR, std::min(MR, m - p * MR), k0, kc, MR, out + k0 * panels * MR + p * kc * MR);
  }
}

int64_t gemm_packed_b_floats(int64_t k, int64_t n) {
  const int64_t NR = select_path().nr;
  return strips_of(n, NR) * NR * k;
}

void gemm_pack_b(const float* b, int64_t ldb, int64_t k, int64_t n, float* out) {
  const int64_t NR = select_path().nr, strips = strips_of(n, NR);
  // Row by row of B, so B is read in order (a strip at a time reads a few
  // cache lines per page of B).
  for (int64_t k0 = 0; k0 < k; k0 += kKc) {
    const int64_t kc = std::min(kKc, k - k0);
    float* block = out + k0 * strips * NR;
    for (int64_t r = 0; r < kc; ++r) {
      const float* src = b + (k0 + r) * ldb;
      for (int64_t s = 0; s < strips; ++s) {
        const int64_t nr = std::min(NR, n - s * NR);
        float* dst = block + s * kc * NR + r * NR;
        std::memcpy(dst, src + s * NR, static_cast<size_t>(nr) * sizeof(float));
        for (int64_t j = nr; j < NR; ++j) dst[j] = 0.0f;
      }
    }
  }
}

void add_residual(float* c, int64_t ld, const float* r, int64_t ldr, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    float* __restrict row = c + i * ld;
    const float* __restrict add = r + i * ldr;
    for (int64_t j = 0; j < cols; ++j) row[j] += add[j];
  }
}

// One loop per activation (the switch stays outside the element loop).
void apply_epilogue(const ops::Epilogue& e, float* c, int64_t ld, int64_t rows, int64_t cols) {
  using ops::Activation;
  const float a = e.a, b = e.b;
  auto each_row = [&](auto block) {  // block(in, out, n): a vector block of the unary kernels
    if (ld == cols) return block(c, c, rows * cols);  // rows one after another: one run
    for (int64_t i = 0; i < rows; ++i) block(c + i * ld, c + i * ld, cols);
  };
  switch (static_cast<Activation>(e.activation)) {
    case Activation::kNone: return;
    case Activation::kRelu: return each_row(relu_block);
    // The vector blocks of the unary kernels, row by row (same bits as ops::*_of).
    case Activation::kGeluErf: return each_row(gelu_erf_block);
    case Activation::kGeluTanh: return each_row(gelu_tanh_block);
    case Activation::kSilu: return each_row(silu_block);
    case Activation::kSigmoid: return each_row(sigmoid_block);
    case Activation::kTanh: return each_row(tanh_block);
    case Activation::kLeakyRelu:
      return each_row([a](const float* in, float* out, int64_t n) { leaky_relu_block(in, out, n, a); });
    case Activation::kClip:
      return each_row([a, b](const float* in, float* out, int64_t n) { clip_block(in, out, n, a, b); });
    case Activation::kHardSigmoid:
      return each_row([a, b](const float* in, float* out, int64_t n) { hard_sigmoid_block(in, out, n, a, b); });
    case Activation::kHardSwish: return each_row(hard_swish_block);
    case Activation::kAffine:  // add and mul only (their rule): never a GEMM's epilogue
    case Activation::kCount: return;
  }
}

namespace {

// Strips of B per gemm_few_rows task at most (its sums on the stack:
// kFewRows x 8 x kMaxNr floats, 4 KiB).
constexpr int64_t kFewRowsTaskStrips = 8;

struct FewRowsJob {
  const FewRowsGemm* args;
  GemmPath path;
  int64_t strips;
  int64_t task_strips;  // <= kFewRowsTaskStrips
};

void few_rows_task(void* context, int64_t task) {
  const FewRowsJob& job = *static_cast<const FewRowsJob*>(context);
  const FewRowsGemm& g = *job.args;
  const int64_t NR = job.path.nr;
  const int64_t s0 = task * job.task_strips, s1 = std::min(job.strips, s0 + job.task_strips);
  const int64_t j0 = s0 * NR, j1 = std::min(g.n, s1 * NR), ld = (s1 - s0) * NR;
  alignas(64) float sums[kFewRows * kFewRowsTaskStrips * kMaxNr];
  if (g.k == 0) std::fill(sums, sums + g.m * ld, 0.0f);
  // Row-major B read where it lies: its whole strips in place; a last strip
  // past n copied, zero-padded, the way packing lays it out (the same sums).
  const int64_t whole = g.ldb == 0 ? s1 : std::min(s1, g.n / NR);
  alignas(64) float tail[kKc * kMaxNr];
  for (int64_t k0 = 0; k0 < g.k; k0 += kKc) {
    const int64_t kc = std::min(kKc, g.k - k0);
    const float* a = g.a + k0 * g.a_k;
    if (g.ldb == 0) {
      job.path.few_rows(g.m, s1 - s0, kc, a, g.a_row, g.a_k, g.packed_b + k0 * job.strips * NR + s0 * kc * NR,
                        kc * NR, NR, sums, ld, k0 > 0);
      continue;
    }
    if (whole > s0)
      job.path.few_rows(g.m, whole - s0, kc, a, g.a_row, g.a_k, g.packed_b + k0 * g.ldb + s0 * NR, NR, g.ldb, sums,
                        ld, k0 > 0);
    if (whole < s1) {
      const int64_t width = g.n - whole * NR;
      for (int64_t k = 0; k < kc; ++k) {
        std::memcpy(tail + k * NR, g.packed_b + (k0 + k) * g.ldb + whole * NR, static_cast<size_t>(width) * 4);
        std::fill(tail + k * NR + width, tail + (k + 1) * NR, 0.0f);
      }
      job.path.few_rows(g.m, 1, kc, a, g.a_row, g.a_k, tail, kc * NR, NR, sums + (whole - s0) * NR, ld, k0 > 0);
    }
  }
  // The finish in TileFinish's order, one add a pass over the sums
  // (finish_stored: the same bits as element by element), then the
  // activation in apply_epilogue's vector blocks (the tile's bits), then
  // the store: a pass per term vectorizes, where the element loop with its
  // four tests was 28 % of a 1 x 128 x 512 product. In the sums, not in C:
  // the residual may be C itself (an in-place update).
  const int64_t width = j1 - j0;
  const bool strided_residual = g.residual && g.r_col != 1;
  TileFinish f;
  f.row_bias = g.row_bias;
  f.col_bias = g.col_bias ? g.col_bias + j0 : nullptr;
  if (g.residual && !strided_residual) f.residual = g.residual + j0, f.ldr = g.r_row;
  finish_stored(f, sums, ld, g.m, width);
  if (strided_residual)  // last, as in TileFinish's order
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < width; ++j) sums[i * ld + j] += g.residual[i * g.r_row + (j0 + j) * g.r_col];
  if (g.epilogue) apply_epilogue(*g.epilogue, sums, ld, g.m, width);
  for (int64_t i = 0; i < g.m; ++i) {
    float* c = g.c + i * g.c_row + j0 * g.c_col;
    if (g.c_col == 1) {
      std::memcpy(c, sums + i * ld, static_cast<size_t>(width) * sizeof(float));
    } else {
      for (int64_t j = 0; j < width; ++j) c[j * g.c_col] = sums[i * ld + j];
    }
  }
}

}  // namespace

void gemm_few_rows(const KernelContext& context, const FewRowsGemm& args) {
  if (args.m <= 0 || args.n <= 0) return;
  FewRowsJob job{&args, select_path(), 0, kFewRowsTaskStrips};
  job.strips = strips_of(args.n, job.path.nr);
  ThreadPool* pool = pool_of(context);
  const int threads = pool ? pool->size() : 1;
  const double flops = 2.0 * static_cast<double>(args.m) * static_cast<double>(args.n) * static_cast<double>(args.k);
  // Shared from about 1 us of work: a recurrent step's 1 x 128 x 512 (131
  // kFLOP, 2.5 us) or 1 x 128 x 384 is worth a wake-up of the pool's
  // spinning workers (each thread's half of B stays in its own L2 from step
  // to step: lstm_2x_bidir 1.75 -> 1.35-1.58 ms, gru 1.37 -> 1.13, a decode
  // step 0.29-0.39 -> 0.17-0.19 at 2 threads on a Zen 4); at the 1 MFLOP it
  // was, they ran on one thread.
  const bool parallel = threads > 1 && flops >= 6e4;
  // About 2 tasks per thread where there is work to share (a 256-channel
  // convolution's 8 strips are 4 tasks at 2 threads, not one).
  if (parallel) job.task_strips = std::clamp<int64_t>((job.strips + 2 * threads - 1) / (2 * threads), 1, kFewRowsTaskStrips);
  const int64_t tasks = (job.strips + job.task_strips - 1) / job.task_strips;
  if (!parallel || tasks == 1) {
    for (int64_t t = 0; t < tasks; ++t) few_rows_task(&job, t);
    return;
  }
  parallel_for(context, tasks, few_rows_task, &job);
}

namespace {

// Dot products of R rows of A with J rows of B, each k long and contiguous:
// out[i * J + j]. Lanes accumulate strided partial sums, then one horizontal
// sum (the tail, masked, in the same lanes).
template <int64_t R, int64_t J>
void dot_block_generic(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* out) {
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < J; ++j) {
      float lanes[8] = {};
      for (int64_t x = 0; x < k; ++x) lanes[x & 7] += a[i * lda + x] * b[j * ldb + x];
      out[i * J + j] = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
    }
}

#ifdef HEXIR_GEMM_X86
// One step of dot_block_avx2: 8 of k from x (the lanes under `mask` when `masked`).
template <int64_t R, int64_t J, bool kMasked>
[[gnu::target("avx2,fma")]] inline void dot_step_avx2(__m256 (&acc)[R][J], const float* a, int64_t lda,
                                                      const float* b, int64_t ldb, int64_t x, __m256i mask) {
  __m256 av[R];
#pragma GCC unroll 16
  for (int64_t i = 0; i < R; ++i)
    av[i] = kMasked ? _mm256_maskload_ps(a + i * lda + x, mask) : _mm256_loadu_ps(a + i * lda + x);
#pragma GCC unroll 16
  for (int64_t j = 0; j < J; ++j) {
    const __m256 bv = kMasked ? _mm256_maskload_ps(b + j * ldb + x, mask) : _mm256_loadu_ps(b + j * ldb + x);
#pragma GCC unroll 16
    for (int64_t i = 0; i < R; ++i) acc[i][j] = _mm256_fmadd_ps(av[i], bv, acc[i][j]);
  }
}

template <int64_t R, int64_t J>
[[gnu::target("avx2,fma")]] void dot_block_avx2(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                                                float* out) {
  __m256 acc[R][J];
#pragma GCC unroll 16
  for (int64_t i = 0; i < R; ++i)
#pragma GCC unroll 16
    for (int64_t j = 0; j < J; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t x = 0;
  for (; x + 8 <= k; x += 8) dot_step_avx2<R, J, false>(acc, a, lda, b, ldb, x, _mm256_setzero_si256());
  if (x < k) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    dot_step_avx2<R, J, true>(acc, a, lda, b, ldb, x,
                              _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(k - x)), lane));
  }
#pragma GCC unroll 16
  for (int64_t i = 0; i < R; ++i)
#pragma GCC unroll 16
    for (int64_t j = 0; j < J; ++j) {
      const __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[i][j]), _mm256_extractf128_ps(acc[i][j], 1));
      const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
      out[i * J + j] = _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
    }
}

// One step of dot_block_avx512: the 16 of k from x under `mask`.
template <int64_t R, int64_t J>
[[gnu::target("avx512f")]] inline void dot_step_avx512(__m512 (&acc)[R][J], const float* a, int64_t lda,
                                                       const float* b, int64_t ldb, int64_t x, __mmask16 mask) {
  __m512 av[R];
#pragma GCC unroll 16
  for (int64_t i = 0; i < R; ++i) av[i] = _mm512_maskz_loadu_ps(mask, a + i * lda + x);
#pragma GCC unroll 16
  for (int64_t j = 0; j < J; ++j) {
    const __m512 bv = _mm512_maskz_loadu_ps(mask, b + j * ldb + x);
#pragma GCC unroll 16
    for (int64_t i = 0; i < R; ++i) acc[i][j] = _mm512_fmadd_ps(av[i], bv, acc[i][j]);
  }
}

// The 16 lanes' sum, pairwise (GCC 12's _mm512_reduce_add_ps warns of an
// uninitialized temporary).
[[gnu::target("avx512f")]] inline float lane_sum16(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 r = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
}

template <int64_t R, int64_t J>
[[gnu::target("avx512f")]] void dot_block_avx512(int64_t k, const float* a, int64_t lda, const float* b,
                                                 int64_t ldb, float* out) {
  __m512 acc[R][J];
#pragma GCC unroll 16
  for (int64_t i = 0; i < R; ++i)
#pragma GCC unroll 16
    for (int64_t j = 0; j < J; ++j) acc[i][j] = _mm512_setzero_ps();
  int64_t x = 0;
  for (; x + 16 <= k; x += 16) dot_step_avx512<R, J>(acc, a, lda, b, ldb, x, 0xffff);
  if (x < k) dot_step_avx512<R, J>(acc, a, lda, b, ldb, x, static_cast<__mmask16>((1u << (k - x)) - 1));
#pragma GCC unroll 16
  for (int64_t i = 0; i < R; ++i)
#pragma GCC unroll 16
    for (int64_t j = 0; j < J; ++j) out[i * J + j] = lane_sum16(acc[i][j]);
}
#endif

#ifdef HEXIR_GEMM_NEON
// dot_block_generic's 8 lanes as two q registers with fmla; the tail
// through zero-padded copies (the zeros add nothing, as AVX2's masked loads).
template <int64_t R, int64_t J>
inline void dot_step_neon(float32x4_t (&acc)[R][J][2], const float* a, int64_t lda, const float* b, int64_t ldb) {
  float32x4_t av[R][2];
#pragma GCC unroll 16
  for (int64_t i = 0; i < R; ++i) av[i][0] = vld1q_f32(a + i * lda), av[i][1] = vld1q_f32(a + i * lda + 4);
#pragma GCC unroll 16
  for (int64_t j = 0; j < J; ++j) {
    const float32x4_t b0 = vld1q_f32(b + j * ldb), b1 = vld1q_f32(b + j * ldb + 4);
#pragma GCC unroll 16
    for (int64_t i = 0; i < R; ++i) {
      acc[i][j][0] = vfmaq_f32(acc[i][j][0], av[i][0], b0);
      acc[i][j][1] = vfmaq_f32(acc[i][j][1], av[i][1], b1);
    }
  }
}

template <int64_t R, int64_t J>
void dot_block_neon(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* out) {
  float32x4_t acc[R][J][2];
#pragma GCC unroll 16
  for (int64_t i = 0; i < R; ++i)
#pragma GCC unroll 16
    for (int64_t j = 0; j < J; ++j) acc[i][j][0] = acc[i][j][1] = vdupq_n_f32(0.0f);
  int64_t x = 0;
  for (; x + 8 <= k; x += 8) dot_step_neon<R, J>(acc, a + x, lda, b + x, ldb);
  if (x < k) {
    float at[R][8] = {}, bt[J][8] = {};
    for (int64_t i = 0; i < R; ++i) std::memcpy(at[i], a + i * lda + x, static_cast<size_t>(k - x) * sizeof(float));
    for (int64_t j = 0; j < J; ++j) std::memcpy(bt[j], b + j * ldb + x, static_cast<size_t>(k - x) * sizeof(float));
    dot_step_neon<R, J>(acc, at[0], 8, bt[0], 8);
  }
  // ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)), dot_block_generic's tree.
#pragma GCC unroll 16
  for (int64_t i = 0; i < R; ++i)
#pragma GCC unroll 16
    for (int64_t j = 0; j < J; ++j) out[i * J + j] = vaddvq_f32(vaddq_f32(acc[i][j][0], acc[i][j][1]));
}
#endif

using DotBlock = void (*)(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* out);
// B's rows per block: as many accumulators as the registers hold beside A's
// and B's vectors (8 for one row of A: eight loads in flight).
constexpr int64_t dot_block_rows(int64_t r) { return r == 1 ? 8 : r == 2 ? 4 : 2; }

DotBlock dot_block_of(int64_t rows, bool whole) {
#define HEXIR_DOT_BLOCKS(kernel)                                                                   \
  switch (rows) {                                                                                  \
    case 1: return whole ? kernel<1, dot_block_rows(1)> : kernel<1, 1>;                            \
    case 2: return whole ? kernel<2, dot_block_rows(2)> : kernel<2, 1>;                            \
    case 3: return whole ? kernel<3, dot_block_rows(3)> : kernel<3, 1>;                            \
    default: return whole ? kernel<4, dot_block_rows(4)> : kernel<4, 1>;                           \
  }
#ifdef HEXIR_GEMM_X86
  if (isa_avx512()) HEXIR_DOT_BLOCKS(dot_block_avx512)
  if (isa_avx2()) HEXIR_DOT_BLOCKS(dot_block_avx2)
#endif
#ifdef HEXIR_GEMM_NEON
  if (isa_neon()) HEXIR_DOT_BLOCKS(dot_block_neon)
#endif
  HEXIR_DOT_BLOCKS(dot_block_generic)
#undef HEXIR_DOT_BLOCKS
}

// Columns of C per gemm_dot_rows task (a multiple of every block's rows).
constexpr int64_t kDotTaskColumns = 64;

struct DotRowsJob {
  const DotRowsGemm* args;
  DotBlock whole, single;
  int64_t block;
};

void dot_rows_task(void* context, int64_t task) {
  const DotRowsJob& job = *static_cast<const DotRowsJob*>(context);
  const DotRowsGemm& g = *job.args;
  const int64_t j0 = task * kDotTaskColumns, j1 = std::min(g.n, j0 + kDotTaskColumns);
  float sums[kFewRows * 8];
  for (int64_t j = j0; j < j1;) {
    const bool whole = j + job.block <= j1;
    const int64_t J = whole ? job.block : 1;
    (whole ? job.whole : job.single)(g.k, g.a, g.lda, g.b + j * g.ldb, g.ldb, sums);
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t t = 0; t < J; ++t) {
        float v = sums[i * J + t];
        if (g.col_bias) v += g.col_bias[j + t];
        if (g.epilogue) v = ops::apply_epilogue(*g.epilogue, v);
        g.c[i * g.ldc + j + t] = v;
      }
    j += J;
  }
}

}  // namespace

void gemm_dot_rows(const KernelContext& context, const DotRowsGemm& args) {
  if (args.m <= 0 || args.n <= 0) return;
  const int64_t rows = std::min(args.m, kFewRows);
  DotRowsJob job{&args, dot_block_of(rows, true), dot_block_of(rows, false), dot_block_rows(rows)};
  const int64_t tasks = (args.n + kDotTaskColumns - 1) / kDotTaskColumns;
  ThreadPool* pool = pool_of(context);
  const double flops = 2.0 * static_cast<double>(args.m) * static_cast<double>(args.n) * static_cast<double>(args.k);
  if (pool == nullptr || pool->size() <= 1 || flops < 1e6 || tasks == 1) {
    for (int64_t t = 0; t < tasks; ++t) dot_rows_task(&job, t);
    return;
  }
  parallel_for(context, tasks, dot_rows_task, &job);
}

void gemm(const KernelContext& context, const GemmArgs& args) {
  if (args.m <= 0 || args.n <= 0) return;
  // A few rows against a prepared B, or a row-major B read where it lies (a
  // decode step's weights, unpacked so N processes share the mapped file's
  // pages): the few-rows kernel (its bits either way).
  const bool b_row_major = !args.packed_b && !args.pack_b;
  if ((args.packed_b || b_row_major) && !args.packed_a && args.m <= kFewRows) {
    FewRowsGemm few{args.m,     args.n,         args.k,        args.a,        args.lda,
                    1,          args.packed_b,  args.c,        args.ldc,      1,
                    args.row_bias, args.col_bias, args.residual, args.ldr,   1,
                    args.epilogue};
    if (b_row_major) {
      few.packed_b = args.b;
      few.ldb = args.ldb;
    }
    return gemm_few_rows(context, few);
  }
  GemmJob job{&args, select_path(), pool_of(context), 0, 0, 0, false};
  const int64_t MR = job.path.mr, NR = job.path.nr;
#ifdef HEXIR_GEMM_X86
  static_assert(kAvx512Mr <= kMaxMr);
#endif
  static_assert(kRowBlock % 24 == 0);
  const int64_t strips = strips_of(args.n, NR);
  // Balanced blocks of whole panels either way (24: a multiple of every MR,
  // packed or in place): 256 rows are two of 144 and 112, not 192 and 64.
  job.row_blocks = (args.m + kRowBlock - 1) / kRowBlock;
  job.row_block = ((args.m + job.row_blocks - 1) / job.row_blocks + 23) / 24 * 24;
  job.row_blocks = (args.m + job.row_block - 1) / job.row_block;
  // A short M (a few panels): each strip of B would be packed for a few
  // micro-kernel calls only, so full strips are read where they lie.
  job.b_in_place = !args.pack_b && !args.packed_b && args.m <= 2 * MR;
  // Enough tasks to balance the pool (about 2 per thread) when there is
  // work to share; one task otherwise. The split never changes a result.
  // Each task packs its rows of A (or its strips of B) again: 4 per thread
  // packed the BERT-base GEMMs' A twice as often, and at 2 threads they ran
  // 1.05-1.4x slower than with 2 per thread (bench/cpu_kernels, 4 rounds
  // alternated: MLP up 2.81-3.37 -> 2.66-2.84 ms, down 3.27-4.09 ->
  // 2.90-3.41, QKV 0.79-1.00 -> 0.71-0.74, T=128 MLP 0.19-0.24 -> 0.16).
  // The tasks are near equal, and a thread first takes its own share.
  ThreadPool* pool = pool_of(context);
  const int threads = pool ? pool->size() : 1;
  const double flops = 2.0 * static_cast<double>(args.m) * static_cast<double>(args.n) * static_cast<double>(args.k);
  int64_t groups = 1;
  if (threads > 1 && flops >= 1e6) {
    const int64_t wanted = 2 * threads;
    // With B prepared, each task packs its rows of A once per K block: a
    // task needs enough columns to pay for that (one strip per task made a
    // 128-row GEMM pack all of A eight times, no faster at 2 threads).
    const int64_t most = args.packed_b && !args.packed_a ? std::max<int64_t>(1, strips / kMinStripsPerTask) : strips;
    groups = std::clamp<int64_t>((wanted + job.row_blocks - 1) / job.row_blocks, 1, most);
    // Still fewer tasks than threads (one row block of a few strips:
    // squeezenet's 1x1 512 -> 64 at 13 x 13 ran on one thread at 2):
    // smaller row blocks (whole multiples of 24 still) where A is the larger
    // operand (each task then reads all of B), else fewer strips a task
    // (each reads all of A's rows). Rows first measured 0.91x the time at 2
    // threads on squeezenet1_1, columns first 1.01x.
    const bool rows_first = args.m >= args.n;
    if (!rows_first && job.row_blocks * groups < threads)
      groups = std::min<int64_t>(strips, (threads + job.row_blocks - 1) / job.row_blocks);
    if (job.row_blocks * groups < threads && args.m > 24) {
      const int64_t blocks = std::min<int64_t>((threads + groups - 1) / groups, (args.m + 23) / 24);
      job.row_block = ((args.m + blocks - 1) / blocks + 23) / 24 * 24;
      job.row_blocks = (args.m + job.row_block - 1) / job.row_block;
    }
  }
  groups = std::min(groups, strips);
  // One row block: whole rounds of the threads (13 strips as 7 + 6 at 2
  // threads, not 5 + 5 + 3, whose third task one thread ran after its first:
  // RegNetX's 1x1 400 -> 400 at 7 x 7 took 1.57x less time at 2 threads than
  // at 1, onnxruntime's 1.97x).
  if (job.row_blocks == 1 && groups > threads && groups % threads != 0) groups = groups / threads * threads;
  job.column_groups = groups;
  const int64_t tasks = job.row_blocks * groups;
  if (flops < 1e6) {
    for (int64_t t = 0; t < tasks; ++t) gemm_task(&job, t, 0);  // the caller is participant 0
    return;
  }
  parallel_for_participants(context, tasks, gemm_task, &job);
}

void gemm(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C) {
  gemm(KernelContext{}, GemmArgs{M, N, K, A, K, B, N, C, N});
}

}  // namespace hexir::hal::cpu::internal
