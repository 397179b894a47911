// The spatial kernels that are not one plain GEMM: depthwise conv2d (called by
// conv2d), resize and conv_transpose.
//
// Depthwise: per task a band of output rows of one channel plane, in tiles of
// output columns. The input rows a slab of output rows reads are copied into a
// stack buffer, zero where the window reaches into the padding and split into
// stride_w phases (column q + stride_w * i of the padded rows at phase q,
// index i), so every tap of every output column is one unit-stride load: no
// bounds checks, no gathers, borders included. Blocks of kRows output rows
// are computed from it. Each output is fma(tap, x, acc) over its taps in
// (ky, kx) order from zero, then the bias, then the fused activation: the
// same chain in every path of one ISA (AVX-512, AVX2+FMA; the portable loop
// multiplies and adds), whatever the tiling or the thread count. 3x3 and 5x5
// windows with unit vertical dilation and vertical stride 1 or 2 run
// unrolled kernels that load each buffer row once for the whole block of
// rows; other windows a loop over the taps.
//
// resize: the source taps of output columns and rows are computed once per
// chunk of 256 and reused for every plane; linear keeps the horizontal blends
// of the last two input rows it read. Planes are split over the thread pool.
// The arithmetic per element is that of ops::resize_* (in double), so results
// match the definition bit for bit.
//
// conv_transpose: per image and group, col[(kk, ky, kx), (iy, ix)] =
// sum over ci of w[ci, kk, ky, kx] * x[ci, iy, ix] is one GEMM (internal::gemm,
// threaded) over a band of input rows, then each output row gathers its taps
// from col in (ky, kx) order and adds the bias. The GEMM's A is the group's
// weights transposed, [k_per_group * kh * kw, c_per_group]: constant weights
// are transposed once at prepare (every group, group after group), others on
// every call into the workspace. The scratch (that A when not prepared, then
// col) is the dispatch's workspace (ops rule); without it, each output
// element gathers its taps (ops::conv_transpose_element, or the same sum
// over the prepared layout).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernel_util.h"
#include "lanes.h"
#include "thread_pool.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HEXIR_SPATIAL_X86 1
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#define HEXIR_SPATIAL_NEON 1
#endif

namespace hexir::hal::cpu::internal {
namespace {

// ---- depthwise conv2d ------------------------------------------------------------

constexpr int64_t kRows = 4;                  // output rows per buffer block
constexpr int64_t kLanes = 16;                // the widest vector (AVX-512): slack past each phase
constexpr int64_t kBufferFloats = 4 * 1024;   // the stack buffer (16 KiB: its slab stays in L1)
constexpr int64_t kMaxTile = 512;             // output columns per tile at most
constexpr int64_t kMaxTaps = 256;             // window columns at most (wider: the direct loop)

// One block of output rows over one tile of columns, read from the buffer.
struct DwBlock {
  const float* buf;  // buffer row t at buf + t * buf_row
  int64_t buf_row;
  const int64_t* col_off;  // per kx: where output column 0's tap lies in a buffer row
  const float* taps;       // [kh, kw]
  int64_t kh, kw, sh, dh;
  int64_t width;  // output columns in the tile
  int64_t rows;   // output rows in the block (<= kRows)
  float* out;     // the block's first output element
  int64_t out_row;
  float bias;
};

// Portable: one output row at a time, each tap over the whole row (the loop
// GCC vectorizes for whatever the build targets).
void dw_block_generic(const DwBlock& b) {
  for (int64_t r = 0; r < b.rows; ++r) {
    float* __restrict o = b.out + r * b.out_row;
    for (int64_t j = 0; j < b.width; ++j) o[j] = 0.0f;
    for (int64_t ky = 0; ky < b.kh; ++ky) {
      const float* line = b.buf + (r * b.sh + ky * b.dh) * b.buf_row;
      for (int64_t kx = 0; kx < b.kw; ++kx) {
        const float t = b.taps[ky * b.kw + kx];
        const float* __restrict src = line + b.col_off[kx];
        for (int64_t j = 0; j < b.width; ++j) o[j] += t * src[j];
      }
    }
    // Row r is final here (bias added): the place for a fused epilogue.
    for (int64_t j = 0; j < b.width; ++j) o[j] += b.bias;
  }
}

#ifdef HEXIR_SPATIAL_X86
// AVX-512, KH x KW window, vertical stride SH, vertical dilation 1: per 16
// columns, R accumulators (kRows; a block of one or two rows, the whole of a
// short plane or the last block of one, runs the R = 1 or 2 instance: the
// same taps in the same order per output, half the work); each buffer row is
// loaded once per kx and feeds every row of the block whose window covers it.
template <int KH, int KW, int SH, int R = kRows>
[[gnu::target("avx512f")]] void dw_block_avx512_fixed(const DwBlock& b) {
  if constexpr (R == kRows) {
    if (b.rows == 1) return dw_block_avx512_fixed<KH, KW, SH, 1>(b);
    if (b.rows == 2) return dw_block_avx512_fixed<KH, KW, SH, 2>(b);
  }
  constexpr int T = (R - 1) * SH + KH;
  int64_t off[KW];
  for (int kx = 0; kx < KW; ++kx) off[kx] = b.col_off[kx];
  const __m512 bias = _mm512_set1_ps(b.bias);
  // The taps broadcast once per block, not once per FMA (the stores to out
  // could alias taps as far as the compiler knows).
  __m512 w[KH * KW];
#pragma GCC unroll 25
  for (int t = 0; t < KH * KW; ++t) w[t] = _mm512_set1_ps(b.taps[t]);
  // The block's fields in registers (as on AVX2: the stores could alias the
  // block): BlazeFace-256 0.94-0.98 of its time, alternated. The stores stay
  // masked: plain ones for whole vectors, behind a test, read 1.04 on Zen 5.
  const int64_t rows = b.rows, width = b.width, buf_row = b.buf_row, out_row = b.out_row;
  const float* const buf = b.buf;
  float* const out = b.out;
  for (int64_t j = 0; j < width; j += 16) {
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const float* line = buf + t * buf_row + j;
#pragma GCC unroll 8
      for (int kx = 0; kx < KW; ++kx) {
        const __m512 v = _mm512_loadu_ps(line + off[kx]);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const int ky = t - r * SH;
          if (ky >= 0 && ky < KH) acc[r] = _mm512_fmadd_ps(w[ky * KW + kx], v, acc[r]);
        }
      }
    }
    // Rows final here (bias added): the place for a fused epilogue.
    const int64_t left = width - j;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    for (int r = 0; r < R; ++r)
      if (r < rows) _mm512_mask_storeu_ps(out + r * out_row + j, m, _mm512_add_ps(acc[r], bias));
  }
}

// AVX-512, any window: one row at a time, one load per tap.
[[gnu::target("avx512f")]] void dw_block_avx512_any(const DwBlock& b) {
  const __m512 bias = _mm512_set1_ps(b.bias);
  const DwBlock k = b;  // in registers, not reloaded after each store (as on AVX2)
  for (int64_t r = 0; r < k.rows; ++r) {
    for (int64_t j = 0; j < k.width; j += 16) {
      const int64_t left = k.width - j;
      const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
      __m512 acc = _mm512_setzero_ps();
      for (int64_t ky = 0; ky < k.kh; ++ky) {
        const float* line = k.buf + (r * k.sh + ky * k.dh) * k.buf_row + j;
        const float* taps = k.taps + ky * k.kw;
        for (int64_t kx = 0; kx < k.kw; ++kx)
          acc = _mm512_fmadd_ps(_mm512_set1_ps(taps[kx]), _mm512_loadu_ps(line + k.col_off[kx]), acc);
      }
      // Final here (bias added): the place for a fused epilogue.
      _mm512_mask_storeu_ps(k.out + r * k.out_row + j, m, _mm512_add_ps(acc, bias));
    }
  }
}

// AVX2 + FMA: the same two kernels, 8 columns at a time; the last partial
// vector through a masked store (dw_store8).
[[gnu::target("avx2,fma")]] inline __m256i dw_mask8(int64_t left) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(left, 8))), lanes);
}

// A vector's first min(left, 8) lanes: a plain store when whole (a masked
// store is many times slower on AMD's cores), masked for the last columns.
[[gnu::target("avx2,fma")]] inline void dw_store8(float* out, int64_t left, __m256 v) {
  if (left >= 8)
    _mm256_storeu_ps(out, v);
  else
    _mm256_maskstore_ps(out, dw_mask8(left), v);
}

template <int KH, int KW, int SH, int R = kRows>
[[gnu::target("avx2,fma")]] void dw_block_avx2_fixed(const DwBlock& b) {
  if constexpr (R == kRows) {
    if (b.rows == 1) return dw_block_avx2_fixed<KH, KW, SH, 1>(b);
    if (b.rows == 2) return dw_block_avx2_fixed<KH, KW, SH, 2>(b);
  }
  constexpr int T = (R - 1) * SH + KH;
  int64_t off[KW];
  for (int kx = 0; kx < KW; ++kx) off[kx] = b.col_off[kx];
  const __m256 bias = _mm256_set1_ps(b.bias);
  // The taps broadcast once per block (in registers for 3x3; 5x5's spill to
  // the stack, still plain loads), not once per FMA.
  __m256 w[KH * KW];
#pragma GCC unroll 25
  for (int t = 0; t < KH * KW; ++t) w[t] = _mm256_broadcast_ss(b.taps + t);
  // The block's fields in registers: the stores could alias the DwBlock as
  // far as the compiler knows, and it reloaded them for every row stored
  // (with a test per row for a partial vector: 9-10 % of BlazeFace-256's
  // separable blocks, alternated in one process).
  const int64_t rows = b.rows, width = b.width, buf_row = b.buf_row, out_row = b.out_row;
  const float* const buf = b.buf;
  float* const out = b.out;
  for (int64_t j = 0; j < width; j += 8) {
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const float* line = buf + t * buf_row + j;
#pragma GCC unroll 8
      for (int kx = 0; kx < KW; ++kx) {
        const __m256 v = _mm256_loadu_ps(line + off[kx]);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const int ky = t - r * SH;
          if (ky >= 0 && ky < KH)
            acc[r] = _mm256_fmadd_ps(w[ky * KW + kx], v, acc[r]);
        }
      }
    }
    // Rows final here (bias added): the place for a fused epilogue.
    if (width - j >= 8) {
      for (int r = 0; r < R; ++r)
        if (r < rows) _mm256_storeu_ps(out + r * out_row + j, _mm256_add_ps(acc[r], bias));
    } else {
      for (int r = 0; r < R; ++r)
        if (r < rows) dw_store8(out + r * out_row + j, width - j, _mm256_add_ps(acc[r], bias));
    }
  }
}

[[gnu::target("avx2,fma")]] void dw_block_avx2_any(const DwBlock& b) {
  const __m256 bias = _mm256_set1_ps(b.bias);
  const DwBlock k = b;  // in registers, not reloaded after each store (as above)
  for (int64_t r = 0; r < k.rows; ++r) {
    for (int64_t j = 0; j < k.width; j += 8) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t ky = 0; ky < k.kh; ++ky) {
        const float* line = k.buf + (r * k.sh + ky * k.dh) * k.buf_row + j;
        const float* taps = k.taps + ky * k.kw;
        for (int64_t kx = 0; kx < k.kw; ++kx)
          acc = _mm256_fmadd_ps(_mm256_broadcast_ss(taps + kx), _mm256_loadu_ps(line + k.col_off[kx]), acc);
      }
      // Final here (bias added): the place for a fused epilogue.
      dw_store8(k.out + r * k.out_row + j, k.width - j, _mm256_add_ps(acc, bias));
    }
  }
}
#endif

#ifdef HEXIR_SPATIAL_NEON
// NEON: AVX2's two kernels 4 columns at a time (fmla: the FMA order of the
// x86 paths); the last partial vector stored through the stack.
inline void dw_store4(float* out, int64_t left, float32x4_t v) {
  if (left >= 4) return vst1q_f32(out, v);
  alignas(16) float row[4];
  vst1q_f32(row, v);
  std::memcpy(out, row, static_cast<size_t>(left) * sizeof(float));
}

// The taps in registers (5x5: 25 of the 32 q beside R accumulators and the load).
template <int KH, int KW, int SH, int R = kRows>
void dw_block_neon_fixed(const DwBlock& b) {
  if constexpr (R == kRows) {
    if (b.rows == 1) return dw_block_neon_fixed<KH, KW, SH, 1>(b);
    if (b.rows == 2) return dw_block_neon_fixed<KH, KW, SH, 2>(b);
  }
  constexpr int T = (R - 1) * SH + KH;
  int64_t off[KW];
  for (int kx = 0; kx < KW; ++kx) off[kx] = b.col_off[kx];
  const float32x4_t bias = vdupq_n_f32(b.bias);
  float32x4_t w[KH * KW];
#pragma GCC unroll 25
  for (int t = 0; t < KH * KW; ++t) w[t] = vdupq_n_f32(b.taps[t]);
  // The block's fields in locals: the stores could alias it (as on x86).
  const int64_t rows = b.rows, width = b.width, buf_row = b.buf_row, out_row = b.out_row;
  const float* const buf = b.buf;
  float* const out = b.out;
  for (int64_t j = 0; j < width; j += 4) {
    float32x4_t acc[R];
    for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0.0f);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const float* line = buf + t * buf_row + j;
#pragma GCC unroll 8
      for (int kx = 0; kx < KW; ++kx) {
        const float32x4_t v = vld1q_f32(line + off[kx]);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const int ky = t - r * SH;
          if (ky >= 0 && ky < KH) acc[r] = vfmaq_f32(acc[r], w[ky * KW + kx], v);
        }
      }
    }
    // Rows final here (bias added): the place for a fused epilogue.
    for (int r = 0; r < R; ++r)
      if (r < rows) dw_store4(out + r * out_row + j, width - j, vaddq_f32(acc[r], bias));
  }
}

void dw_block_neon_any(const DwBlock& b) {
  const float32x4_t bias = vdupq_n_f32(b.bias);
  const DwBlock k = b;  // in registers, not reloaded after each store (as on x86)
  for (int64_t r = 0; r < k.rows; ++r) {
    for (int64_t j = 0; j < k.width; j += 4) {
      float32x4_t acc = vdupq_n_f32(0.0f);
      for (int64_t ky = 0; ky < k.kh; ++ky) {
        const float* line = k.buf + (r * k.sh + ky * k.dh) * k.buf_row + j;
        const float* taps = k.taps + ky * k.kw;
        for (int64_t kx = 0; kx < k.kw; ++kx) acc = vfmaq_n_f32(acc, vld1q_f32(line + k.col_off[kx]), taps[kx]);
      }
      // Final here (bias added): the place for a fused epilogue.
      dw_store4(k.out + r * k.out_row + j, k.width - j, vaddq_f32(acc, bias));
    }
  }
}
#endif

// Deinterleaves n pairs: even[i] = src[2 i], odd[i] = src[2 i + 1] (the two
// phases of a stride-2 buffer row).
using Deinterleave = void (*)(const float* src, int64_t n, float* even, float* odd);

void deinterleave_generic(const float* src, int64_t n, float* even, float* odd) {
  for (int64_t i = 0; i < n; ++i) {
    even[i] = src[2 * i];
    odd[i] = src[2 * i + 1];
  }
}

#ifdef HEXIR_SPATIAL_NEON
// ld2 splits even and odd floats in the load itself.
void deinterleave_neon(const float* src, int64_t n, float* even, float* odd) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4x2_t v = vld2q_f32(src + 2 * i);
    vst1q_f32(even + i, v.val[0]);
    vst1q_f32(odd + i, v.val[1]);
  }
  deinterleave_generic(src + 2 * i, n - i, even + i, odd + i);
}
#endif

#ifdef HEXIR_SPATIAL_X86
[[gnu::target("avx512f")]] void deinterleave_avx512(const float* src, int64_t n, float* even, float* odd) {
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 lo = _mm512_loadu_ps(src + 2 * i), hi = _mm512_loadu_ps(src + 2 * i + 16);
    _mm512_storeu_ps(even + i, _mm512_permutex2var_ps(lo, ie, hi));
    _mm512_storeu_ps(odd + i, _mm512_permutex2var_ps(lo, io, hi));
  }
  deinterleave_generic(src + 2 * i, n - i, even + i, odd + i);
}

[[gnu::target("avx2")]] void deinterleave_avx2(const float* src, int64_t n, float* even, float* odd) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 e, o;
    deinterleave8(_mm256_loadu_ps(src + 2 * i), _mm256_loadu_ps(src + 2 * i + 8), e, o);
    _mm256_storeu_ps(even + i, e);
    _mm256_storeu_ps(odd + i, o);
  }
  deinterleave_generic(src + 2 * i, n - i, even + i, odd + i);
}
#endif

struct DwPath {
  void (*kernel)(const DwBlock&);
  Deinterleave deinterleave;
};

// The kernel for this window on the widest path this process runs (cpu_isa()).
DwPath select_depthwise(const ops::Conv2dPlan& p) {
#ifdef HEXIR_SPATIAL_X86
  const bool fixed =
      p.kh == p.kw && (p.kh == 3 || p.kh == 5) && p.dilation_h == 1 && (p.stride_h == 1 || p.stride_h == 2);
  const int key = fixed ? static_cast<int>(p.kh * 10 + p.stride_h) : 0;
  if (isa_avx512()) {
    switch (key) {
      case 31:
        return {dw_block_avx512_fixed<3, 3, 1>, deinterleave_avx512};
      case 32:
        return {dw_block_avx512_fixed<3, 3, 2>, deinterleave_avx512};
      case 51:
        return {dw_block_avx512_fixed<5, 5, 1>, deinterleave_avx512};
      case 52:
        return {dw_block_avx512_fixed<5, 5, 2>, deinterleave_avx512};
      default:
        return {dw_block_avx512_any, deinterleave_avx512};
    }
  }
  if (isa_avx2()) {
    switch (key) {
      case 31:
        return {dw_block_avx2_fixed<3, 3, 1>, deinterleave_avx2};
      case 32:
        return {dw_block_avx2_fixed<3, 3, 2>, deinterleave_avx2};
      case 51:
        return {dw_block_avx2_fixed<5, 5, 1>, deinterleave_avx2};
      case 52:
        return {dw_block_avx2_fixed<5, 5, 2>, deinterleave_avx2};
      default:
        return {dw_block_avx2_any, deinterleave_avx2};
    }
  }
#elif defined(HEXIR_SPATIAL_NEON)
  const bool fixed =
      p.kh == p.kw && (p.kh == 3 || p.kh == 5) && p.dilation_h == 1 && (p.stride_h == 1 || p.stride_h == 2);
  const int key = fixed ? static_cast<int>(p.kh * 10 + p.stride_h) : 0;
  if (isa_neon()) {
    switch (key) {
      case 31:
        return {dw_block_neon_fixed<3, 3, 1>, deinterleave_neon};
      case 32:
        return {dw_block_neon_fixed<3, 3, 2>, deinterleave_neon};
      case 51:
        return {dw_block_neon_fixed<5, 5, 1>, deinterleave_neon};
      case 52:
        return {dw_block_neon_fixed<5, 5, 2>, deinterleave_neon};
      default:
        return {dw_block_neon_any, deinterleave_neon};
    }
  }
#else
  (void)p;
#endif
  return {dw_block_generic, deinterleave_generic};
}

// The buffer of one tile: buffer rows (input rows iy0, iy0 + 1, ...) of
// stride_w phases of `phase` floats; input column ix0 + q + stride_w * i at
// phase q, index i; zero outside the input. It holds a slab of output rows
// (whole blocks), so each input row is copied once per slab, not per block.
struct DwGeometry {
  int64_t tile;   // output columns per tile
  int64_t phase;  // floats per phase
  int64_t slab;   // output rows per buffer fill (a multiple of kRows)
};

// Buffer rows a run of `out_rows` output rows reads.
int64_t dw_buffer_rows(const ops::Conv2dPlan& p, int64_t out_rows) {
  return (out_rows - 1) * p.stride_h + (p.kh - 1) * p.dilation_h + 1;
}
int64_t dw_phase_floats(const ops::Conv2dPlan& p, int64_t tile) {
  const int64_t span = (tile - 1) * p.stride_w + (p.kw - 1) * p.dilation_w + 1;  // input columns
  return (span + p.stride_w - 1) / p.stride_w + kLanes;
}

// The widest tile whose buffer holds one block of rows, and as many blocks as
// fit (up to all rows of the plane); tile 0 when not even one vector of
// columns fits (huge windows or dilations): the direct loop then.
DwGeometry dw_geometry(const ops::Conv2dPlan& p) {
  const DwGeometry none{0, 0, 0};
  if (p.kh > kBufferFloats || p.kw > kMaxTaps || p.dilation_h > kBufferFloats ||
      p.dilation_w > kBufferFloats || p.stride_h > kBufferFloats || p.stride_w > kLanes)
    return none;
  const int64_t block_rows = dw_buffer_rows(p, kRows);
  for (int64_t tile = std::min(p.ow, kMaxTile);; tile /= 2) {
    const int64_t phase = dw_phase_floats(p, tile);
    const int64_t row = p.stride_w * phase;
    if (block_rows * row <= kBufferFloats) {
      const int64_t fit = (kBufferFloats / row - block_rows) / (kRows * p.stride_h);  // more blocks
      const int64_t blocks = std::min((p.oh + kRows - 1) / kRows, 1 + fit);
      return {tile, phase, blocks * kRows};
    }
    if (tile <= kLanes) return none;
  }
}

// The columns of a buffer row that come from the input, the same for every
// row of a tile: phase q holds input columns for i in [lo[q], hi[q]); both
// phases of a stride-2 row for i in [a, b). The rest stays zero.
struct DwColumns {
  int64_t lo[kLanes], hi[kLanes];
  int64_t a, b;
};

DwColumns dw_columns(int64_t w, int64_t ix0, int64_t sw, int64_t phase) {
  DwColumns c{};
  for (int64_t q = 0; q < sw; ++q) {  // 0 <= ix0 + q + sw * i < w
    const int64_t first = ix0 + q;
    c.lo[q] = std::min(phase, first >= 0 ? 0 : (-first + sw - 1) / sw);
    c.hi[q] = std::clamp(first >= w ? 0 : (w - 1 - first) / sw + 1, c.lo[q], phase);
  }
  c.a = std::max(c.lo[0], c.lo[sw > 1 ? 1 : 0]);
  c.b = std::max(c.a, std::min(c.hi[0], c.hi[sw > 1 ? 1 : 0]));
  return c;
}

// Copies input row `in` into a buffer row whose padding is already zero.
void dw_fill_row(const float* in, const DwColumns& c, int64_t ix0, int64_t sw, int64_t phase,
                 Deinterleave deinterleave, float* dst) {
  if (sw == 1) {
    std::memcpy(dst + c.lo[0], in + ix0 + c.lo[0], static_cast<size_t>(c.hi[0] - c.lo[0]) * sizeof(float));
  } else if (sw == 2) {
    // One vector pass where both phases are inside; the ends apart.
    deinterleave(in + ix0 + 2 * c.a, c.b - c.a, dst + c.a, dst + phase + c.a);
    for (int64_t q = 0; q < 2; ++q) {
      float* out = dst + q * phase;
      const float* src = in + ix0 + q;
      for (int64_t i = c.lo[q]; i < std::min(c.a, c.hi[q]); ++i) out[i] = src[2 * i];
      for (int64_t i = std::max(c.b, c.lo[q]); i < c.hi[q]; ++i) out[i] = src[2 * i];
    }
  } else {
    for (int64_t q = 0; q < sw; ++q) {
      float* out = dst + q * phase;
      const float* src = in + ix0 + q;
      for (int64_t i = c.lo[q]; i < c.hi[q]; ++i) out[i] = src[sw * i];
    }
  }
}

// The buffer of depthwise_rows, kept across the calls of one kernel run
// that share a geometry (separable_conv2d's channels): the zeros of a
// tile's padding columns are written once, not once per call (two small
// fills per buffer row were 5 % of BlazeFace-256's time, 2,500 calls per
// invoke). The row copies never write those columns.
struct DwBuffer {
  alignas(64) float floats[kBufferFloats];
  int64_t zeroed_tile = -1;  // the tile (its first column) whose padding columns are zero
  int64_t zeroed_rows = 0;   // in buffer rows [0, zeroed_rows)
  DwColumns columns;         // that tile's input columns
};

struct DepthwiseJob {
  const ops::Conv2dPlan* p;
  const float *x, *w, *bias;
  float* out;
  const ops::Epilogue* epilogue;  // the fused activation, or null
  const float* residual;          // added before it, or null
  DwPath path;
  DwGeometry g;
  int64_t band;   // output rows per task (a multiple of kRows)
  int64_t bands;  // tasks per plane
};

// Output rows [oy_begin, oy_end) of plane `plane` (image * c + channel), row
// oy at rows + (oy - oy_begin) * ow: the plane's rows in the output
// (depthwise_task) or in separable_conv2d's scratch.
void depthwise_rows(const DepthwiseJob& job, int64_t plane, int64_t oy_begin, int64_t oy_end, float* rows,
                    DwBuffer* kept = nullptr, const float* next_image = nullptr) {
  const ops::Conv2dPlan& p = *job.p;
  const int64_t channel = plane % p.c;
  const float* image = job.x + plane * p.h * p.w;
  DwBuffer local;
  DwBuffer& buffer = kept ? *kept : local;
  float* const buf = buffer.floats;
  int64_t col_off[kMaxTaps];
  const int64_t buf_row = p.stride_w * job.g.phase;
  for (int64_t kx = 0; kx < p.kw; ++kx)
    col_off[kx] = (kx * p.dilation_w % p.stride_w) * job.g.phase + kx * p.dilation_w / p.stride_w;
  DwBlock b{
      buf, buf_row, col_off, job.w + channel * p.kh * p.kw,      p.kh, p.kw, p.stride_h, p.dilation_h, 0,
      0,   nullptr, p.ow,    job.bias ? job.bias[channel] : 0.0f};
  for (int64_t ox0 = 0; ox0 < p.ow; ox0 += job.g.tile) {
    b.width = std::min(job.g.tile, p.ow - ox0);
    const int64_t ix0 = ox0 * p.stride_w - p.pad_left;
    if (buffer.zeroed_tile != ox0) {
      buffer.columns = dw_columns(p.w, ix0, p.stride_w, job.g.phase);
      buffer.zeroed_rows = 0;
    }
    const DwColumns& columns = buffer.columns;
    // Zeros where the window reaches past the rows (and the slack the last
    // vector reads), once per tile (and buffer) for every buffer row it uses: the fills
    // below write only the input's columns. (Zeroing the whole buffer was
    // 5.5 % of PP-OCR v2 cls's samples, its planes 2 rows high; these
    // columns zeroed per row filled, 12 % of BlazeFace-128's, its rows short.)
    const int64_t slab_rows = std::min(job.g.slab, (oy_end - oy_begin + kRows - 1) / kRows * kRows);
    const int64_t buffer_rows = dw_buffer_rows(p, slab_rows);
    if (buffer.zeroed_rows < buffer_rows) {
      for (int64_t t = 0; t < buffer_rows; ++t)
        for (int64_t q = 0; q < p.stride_w; ++q) {
          float* phase_row = buf + t * buf_row + q * job.g.phase;
          std::fill(phase_row, phase_row + columns.lo[q], 0.0f);
          std::fill(phase_row + columns.hi[q], phase_row + job.g.phase, 0.0f);
        }
      buffer.zeroed_tile = ox0;
      buffer.zeroed_rows = buffer_rows;
    }
    for (int64_t s0 = oy_begin; s0 < oy_end; s0 += job.g.slab) {
      const int64_t s1 = std::min(oy_end, s0 + job.g.slab);
      const int64_t blocks = (s1 - s0 + kRows - 1) / kRows;
      const int64_t iy0 = s0 * p.stride_h - p.pad_top;
      for (int64_t t = 0; t < dw_buffer_rows(p, blocks * kRows); ++t) {
        float* dst = buf + t * buf_row;
        const int64_t iy = iy0 + t;
        if (iy < 0 || iy >= p.h) {
          for (int64_t q = 0; q < p.stride_w; ++q)
            std::fill(dst + q * job.g.phase + columns.lo[q], dst + q * job.g.phase + columns.hi[q], 0.0f);
          continue;
        }
        dw_fill_row(image + iy * p.w, columns, ix0, p.stride_w, job.g.phase, job.path.deinterleave, dst);
        if (next_image) {  // the same row of the next channel, a plane away: its lines are on their way
          const char* next = reinterpret_cast<const char*>(next_image + iy * p.w + ix0 + columns.lo[0]);
          const int64_t bytes = (columns.hi[0] - columns.lo[0]) * p.stride_w * static_cast<int64_t>(sizeof(float));
          for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch(next + at, 0, 3);
        }
      }
      for (int64_t oy0 = s0; oy0 < s1; oy0 += kRows) {
        b.rows = std::min(kRows, s1 - oy0);
        b.buf = buf + (oy0 - s0) * p.stride_h * buf_row;
        b.out = rows + (oy0 - oy_begin) * p.ow + ox0;
        job.path.kernel(b);
        // The block is final (bias added): the residual and the fused activation while it is in cache.
        if (job.residual)
          add_residual(b.out, p.ow, job.residual + plane * p.oh * p.ow + oy0 * p.ow + ox0, p.ow, b.rows, b.width);
        if (job.epilogue) apply_epilogue(*job.epilogue, b.out, p.ow, b.rows, b.width);
      }
    }
  }
}

void depthwise_task(void* context, int64_t task) {
  const DepthwiseJob& job = *static_cast<const DepthwiseJob*>(context);
  const ops::Conv2dPlan& p = *job.p;
  const int64_t planes = p.n * p.c;
  const int64_t band = task / planes, plane = task % planes;  // band-major: a pool share is a run of rows
  const int64_t oy_begin = band * job.band;
  depthwise_rows(job, plane, oy_begin, std::min(p.oh, oy_begin + job.band), job.out + plane * p.oh * p.ow + oy_begin * p.ow);
}

// The direct loop, for windows too wide for the buffer: each output row adds
// its taps in (ky, kx) order, skipping those in the padding; then the bias.
struct DepthwiseDirect {
  const ops::Conv2dPlan* p;
  const float *x, *w, *bias;
  float* out;
  const ops::Epilogue* epilogue;  // the fused activation, or null
  const float* residual;          // added before it, or null
};

// Rows [oy_begin, oy_end) of a plane, as depthwise_rows.
void depthwise_direct_rows(const DepthwiseDirect& job, int64_t plane, int64_t oy_begin, int64_t oy_end, float* rows) {
  const ops::Conv2dPlan& p = *job.p;
  const int64_t channel = plane % p.c;
  const float* image = job.x + plane * p.h * p.w;
  const float* taps = job.w + channel * p.kh * p.kw;
  for (int64_t oy = oy_begin; oy < oy_end; ++oy) {
    float* __restrict row = rows + (oy - oy_begin) * p.ow;
    for (int64_t ox = 0; ox < p.ow; ++ox) row[ox] = 0.0f;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      if (iy < 0 || iy >= p.h) continue;
      const float* __restrict in = image + iy * p.w;
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const float t = taps[ky * p.kw + kx];
        const int64_t shift = kx * p.dilation_w - p.pad_left;  // ix = ox * stride + shift
        // The outputs whose tap lands inside the row: ox in [lo, hi).
        int64_t lo = shift >= 0 ? 0 : (-shift + p.stride_w - 1) / p.stride_w;
        int64_t hi = p.w - 1 - shift < 0 ? 0 : (p.w - 1 - shift) / p.stride_w + 1;
        hi = std::min(hi, p.ow);
        if (p.stride_w == 1) {
          const float* __restrict src = in + shift;
          for (int64_t ox = lo; ox < hi; ++ox) row[ox] += t * src[ox];
        } else {
          for (int64_t ox = lo; ox < hi; ++ox) row[ox] += t * in[ox * p.stride_w + shift];
        }
      }
    }
    if (job.bias) {
      const float b = job.bias[channel];
      for (int64_t ox = 0; ox < p.ow; ++ox) row[ox] += b;
    }
    if (job.residual) add_residual(row, p.ow, job.residual + plane * p.oh * p.ow + oy * p.ow, p.ow, 1, p.ow);
    if (job.epilogue) apply_epilogue(*job.epilogue, row, p.ow, 1, p.ow);
  }
}

void depthwise_direct_plane(void* context, int64_t plane) {
  const DepthwiseDirect& job = *static_cast<const DepthwiseDirect*>(context);
  const ops::Conv2dPlan& p = *job.p;
  depthwise_direct_rows(job, plane, 0, p.oh, job.out + plane * p.oh * p.ow);
}

#ifdef HEXIR_SPATIAL_X86
// Small planes (mobilenet_v3's 5x5 on 7 x 7: a row is 7 of a vector's 16
// lanes, 3 GMAC/s): channels in the lanes instead. A task takes 16 (AVX-512)
// or 8 (AVX2) channels of one image, copies their planes into a zero-padded
// buffer interleaved by channel, sums every output pixel's taps over all
// its lanes at once (fma, zero taps included, in (ky, kx) order from 0, then
// the bias: the buffered kernels' steps, their bits), and writes the planes
// back. Plane sizes whose buffer holds kDwLanesFloats floats.
constexpr int64_t kDwLanesFloats = 4096 * 4;

struct DwLanesJob {
  const ops::Conv2dPlan* p;
  const float *x, *w, *bias, *residual;
  float* out;
  const ops::Epilogue* epilogue;
  int64_t ph, pw;  // the padded plane
  int64_t lanes;   // 16 or 8
};

int64_t dw_lanes_padded(const ops::Conv2dPlan& p, int64_t* ph, int64_t* pw) {
  *ph = (p.oh - 1) * p.stride_h + (p.kh - 1) * p.dilation_h + 1;
  *pw = (p.ow - 1) * p.stride_w + (p.kw - 1) * p.dilation_w + 1;
  return *ph * *pw;
}

// The channels [c0, c0 + count) of image n into buf (pixel-major, `lanes`
// floats per pixel, zero in the padding and past count), their taps into wt.
void dw_lanes_fill(const DwLanesJob& job, int64_t n, int64_t c0, int64_t count, float* buf, float* wt) {
  const ops::Conv2dPlan& p = *job.p;
  const int64_t L = job.lanes, taps = p.kh * p.kw;
  std::fill(buf, buf + job.ph * job.pw * L, 0.0f);
  for (int64_t l = 0; l < count; ++l) {
    const float* plane = job.x + (n * p.c + c0 + l) * p.h * p.w;
    for (int64_t iy = 0; iy < p.h; ++iy) {
      const int64_t by = iy + p.pad_top;
      if (by < 0 || by >= job.ph) continue;
      for (int64_t ix = 0; ix < p.w; ++ix) {
        const int64_t bx = ix + p.pad_left;
        if (bx >= 0 && bx < job.pw) buf[(by * job.pw + bx) * L + l] = plane[iy * p.w + ix];
      }
    }
  }
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t l = 0; l < L; ++l) wt[t * L + l] = l < count ? job.w[(c0 + l) * taps + t] : 0.0f;
}

// The sums (pixel-major, `lanes` per pixel) to the output planes (channel
// c0 + l's at out + l * stride), then the residual and the activation.
void dw_lanes_store(const DwLanesJob& job, int64_t n, int64_t c0, int64_t count, const float* sums, float* out,
                    int64_t stride) {
  const ops::Conv2dPlan& p = *job.p;
  const int64_t L = job.lanes, pixels = p.oh * p.ow;
  for (int64_t l = 0; l < count; ++l) {
    float* plane_out = out + l * stride;
    for (int64_t i = 0; i < pixels; ++i) plane_out[i] = sums[i * L + l];
    if (job.residual) add_residual(plane_out, p.ow, job.residual + (n * p.c + c0 + l) * pixels, p.ow, p.oh, p.ow);
    if (job.epilogue) apply_epilogue(*job.epilogue, plane_out, p.ow, p.oh, p.ow);
  }
}

// Channels [c0, c0 + count) of image n, count <= the lanes, to out + l * stride.
[[gnu::target("avx512f")]] void dw_lanes_block_avx512(const DwLanesJob& job, int64_t n, int64_t c0, int64_t count,
                                                      float* out, int64_t stride) {
  const ops::Conv2dPlan& p = *job.p;
  alignas(64) float buf[kDwLanesFloats];
  alignas(64) float sums[kDwLanesFloats];
  alignas(64) float wt[16 * 64];
  dw_lanes_fill(job, n, c0, count, buf, wt);
  alignas(64) float bias[16] = {};
  if (job.bias) std::copy(job.bias + c0, job.bias + c0 + count, bias);
  const __m512 b = _mm512_load_ps(bias);
  for (int64_t oy = 0; oy < p.oh; ++oy)
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      __m512 acc = _mm512_setzero_ps();
      for (int64_t ky = 0; ky < p.kh; ++ky) {
        const float* row = buf + ((oy * p.stride_h + ky * p.dilation_h) * job.pw + ox * p.stride_w) * 16;
        for (int64_t kx = 0; kx < p.kw; ++kx)
          acc = _mm512_fmadd_ps(_mm512_load_ps(wt + (ky * p.kw + kx) * 16),
                                _mm512_load_ps(row + kx * p.dilation_w * 16), acc);
      }
      _mm512_store_ps(sums + (oy * p.ow + ox) * 16, _mm512_add_ps(acc, b));
    }
  dw_lanes_store(job, n, c0, count, sums, out, stride);
}

[[gnu::target("avx2,fma")]] void dw_lanes_block_avx2(const DwLanesJob& job, int64_t n, int64_t c0, int64_t count,
                                                     float* out, int64_t stride) {
  const ops::Conv2dPlan& p = *job.p;
  alignas(32) float buf[kDwLanesFloats];
  alignas(32) float sums[kDwLanesFloats];
  alignas(32) float wt[8 * 64];
  dw_lanes_fill(job, n, c0, count, buf, wt);
  alignas(32) float bias[8] = {};
  if (job.bias) std::copy(job.bias + c0, job.bias + c0 + count, bias);
  const __m256 b = _mm256_load_ps(bias);
  for (int64_t oy = 0; oy < p.oh; ++oy)
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t ky = 0; ky < p.kh; ++ky) {
        const float* row = buf + ((oy * p.stride_h + ky * p.dilation_h) * job.pw + ox * p.stride_w) * 8;
        for (int64_t kx = 0; kx < p.kw; ++kx)
          acc = _mm256_fmadd_ps(_mm256_load_ps(wt + (ky * p.kw + kx) * 8), _mm256_load_ps(row + kx * p.dilation_w * 8),
                                acc);
      }
      _mm256_store_ps(sums + (oy * p.ow + ox) * 8, _mm256_add_ps(acc, b));
    }
  dw_lanes_store(job, n, c0, count, sums, out, stride);
}

// Channels [c0, c1) of image n, channel c's plane at out + (c - c0) * stride.
void dw_lanes_channels(const DwLanesJob& job, int64_t n, int64_t c0, int64_t c1, float* out, int64_t stride) {
  for (int64_t c = c0; c < c1; c += job.lanes) {
    const int64_t count = std::min(job.lanes, c1 - c);
    if (job.lanes == 16)
      dw_lanes_block_avx512(job, n, c, count, out + (c - c0) * stride, stride);
    else
      dw_lanes_block_avx2(job, n, c, count, out + (c - c0) * stride, stride);
  }
}

// One task: a block of channels of one image into the conv2d's output.
void dw_lanes_task(void* context, int64_t task) {
  const DwLanesJob& job = *static_cast<const DwLanesJob*>(context);
  const ops::Conv2dPlan& p = *job.p;
  const int64_t blocks = (p.c + job.lanes - 1) / job.lanes, n = task / blocks, c0 = task % blocks * job.lanes;
  const int64_t pixels = p.oh * p.ow;
  dw_lanes_channels(job, n, c0, std::min(p.c, c0 + job.lanes), job.out + (n * p.c + c0) * pixels, pixels);
}

// Whether the planes are small enough for the lanes path (and it is faster:
// rows narrower than a vector).
bool dw_lanes_fits(const ops::Conv2dPlan& p, int64_t lanes) {
  int64_t ph, pw;
  return lanes > 0 && p.ow < lanes && p.kh * p.kw <= 64 && dw_lanes_padded(p, &ph, &pw) * lanes <= kDwLanesFloats &&
         p.oh * p.ow * lanes <= kDwLanesFloats;
}
#endif

}  // namespace

namespace {

// A 1x1 depthwise at stride 1 without padding (conv2d_is_plain_gemm; a batch normalization the
// compiler made one, fusion.h channel_affine_as_conv): each plane times its
// weight plus its bias, then the residual and the activation, a plane at a
// time (56 x 56 floats: in L1). The element order: the product from 0, then
// the bias. The tiled path ran it 5x slower than the channels-last one.
struct PlaneScale {
  template <int N>
  static HEXIR_LANES void run(const float* x, float w, const float* bias, float* out, int64_t n) {
    int64_t i = 0;
    if (bias) {
      const float b = *bias;
      for (; i + N <= n; i += N) lanes::store<N>(out + i, lanes::load<N>(x + i) * w + b);
      for (; i < n; ++i) out[i] = x[i] * w + b;
    } else {
      for (; i + N <= n; i += N) lanes::store<N>(out + i, lanes::load<N>(x + i) * w);
      for (; i < n; ++i) out[i] = x[i] * w;
    }
  }
};

struct PlaneScaleJob {
  const ops::Conv2dPlan* p;
  const float *x, *w, *bias, *residual;
  float* out;
};

void plane_scale_task(void* context, int64_t plane) {
  const PlaneScaleJob& job = *static_cast<const PlaneScaleJob*>(context);
  const ops::Conv2dPlan& p = *job.p;
  const int64_t c = plane % p.c, size = p.h * p.w;
  float* out = job.out + plane * size;
  widest<PlaneScale>(job.x + plane * size, job.w[c], job.bias ? job.bias + c : nullptr, out, size);
  if (job.residual) add_residual(out, 0, job.residual + plane * size, 0, 1, size);
  if (p.epilogue.activation != 0) apply_epilogue(p.epilogue, out, 0, 1, size);
}

}  // namespace

Status depthwise_conv2d(const KernelContext& context, const Dispatch& d) {
  const ops::Conv2dPlan& p = plan_of<ops::Conv2dPlan>(d);
  const int64_t planes = p.n * p.c;
  if (planes == 0 || p.oh == 0 || p.ow == 0) return ok_status();
  const float* bias = p.has_bias ? input(d, 2) : nullptr;
  const ops::Epilogue* epilogue = p.epilogue.activation != 0 ? &p.epilogue : nullptr;
  const float* residual = p.has_residual ? input(d, 3) : nullptr;
  const double taps = static_cast<double>(planes) * static_cast<double>(p.oh * p.ow * p.kh * p.kw);
  ThreadPool* pool = pool_of(context);
  const int threads = taps < 2e5 || pool == nullptr ? 1 : pool->size();
  if (ops::conv2d_is_plain_gemm(p)) {
    PlaneScaleJob job{&p, input(d, 0), input(d, 1), bias, residual, output(d, 0)};
    parallel_for(threads == 1 ? KernelContext{} : context, planes, plane_scale_task, &job);
    return ok_status();
  }
#ifdef HEXIR_SPATIAL_X86
  const int64_t lanes = isa_avx512() ? 16 : isa_avx2() ? 8 : 0;
  if (dw_lanes_fits(p, lanes)) {
    DwLanesJob job{&p, input(d, 0), input(d, 1), bias, residual, output(d, 0), epilogue, 0, 0, lanes};
    dw_lanes_padded(p, &job.ph, &job.pw);
    const int64_t tasks = p.n * ((p.c + lanes - 1) / lanes);
    if (threads == 1) {
      for (int64_t t = 0; t < tasks; ++t) dw_lanes_task(&job, t);
    } else {
      parallel_for(context, tasks, dw_lanes_task, &job);
    }
    return ok_status();
  }
#endif
  const DwGeometry g = dw_geometry(p);
  if (g.tile == 0) {
    DepthwiseDirect job{&p, input(d, 0), input(d, 1), bias, output(d, 0), epilogue, residual};
    if (threads == 1) {
      for (int64_t plane = 0; plane < planes; ++plane) depthwise_direct_plane(&job, plane);
    } else {
      parallel_for(context, planes, depthwise_direct_plane, &job);
    }
  } else {
    // At least a band of rows per thread (the pool gives each thread its
    // share of the tasks, numbered band by band: the same rows the kernels
    // before and after it give that thread), more when there are too few
    // planes to share (about 4 tasks per thread); the split never changes a
    // result.
    const int64_t blocks = (p.oh + kRows - 1) / kRows;
    int64_t bands = 1;
    if (threads > 1) bands = std::min(blocks, std::max<int64_t>(threads, (4 * threads + planes - 1) / planes));
    const int64_t band_blocks = (blocks + bands - 1) / bands;
    DepthwiseJob job{&p,
                     input(d, 0),
                     input(d, 1),
                     bias,
                     output(d, 0),
                     epilogue,
                     residual,
                     select_depthwise(p),
                     g,
                     band_blocks * kRows,
                     (blocks + band_blocks - 1) / band_blocks};
    if (threads == 1) {
      for (int64_t task = 0; task < planes * job.bands; ++task) depthwise_task(&job, task);
    } else {
      parallel_for(context, planes * job.bands, depthwise_task, &job);
    }
  }
  return ok_status();
}

// ---- separable_conv2d ---------------------------------------------------------------
//
// Per task a run of output rows of one image: the depthwise's rows of every
// channel into the participant's scratch (depthwise_rows: the same kernels,
// the same bits as the depthwise conv2d), then the 1x1 as one GEMM over them
// (C = the 1x1's weights x those rows, with its bias, the residual and the
// activation in the tile: the 1x1 conv2d's GEMM, the same bits). The
// depthwise's result never goes to the arena: written, packed and read in
// L2, where the 1x1 alone packed its B from 24 planes 64 KiB apart.

namespace {

// Floats of a task's depthwise rows without a pool's scratch (a direct call).
constexpr int64_t kSeparableStackFloats = ops::kSeparableMaxRowFloats + 16;

struct SeparableJob {
  const ops::SeparableConv2dPlan* p;
  const float *x, *dw_w, *dw_bias, *pw_w, *pw_bias, *residual;
  float* out;
  ThreadPool* pool;
  DepthwiseJob depthwise;      // g.tile > 0: the buffered kernels
  DepthwiseDirect direct;      // else the direct loop
  int64_t rows;                // output rows per task
  int64_t tasks_per_image;
  int64_t pad;                 // floats between one channel's rows and the next's
  const float* packed_pw_w;    // the 1x1's weights packed at prepare, or null
#ifdef HEXIR_SPATIAL_X86
  DwLanesJob lanes;            // lanes.lanes > 0: whole maps narrower than a vector, channels in lanes
#endif
};

// The depthwise's rows [oy0, oy1) of channels [c0, c1) of one image, channel
// c at scratch + c * ld.
void separable_depthwise(const SeparableJob& job, int64_t image, int64_t oy0, int64_t oy1, int64_t c0, int64_t c1,
                         float* scratch, int64_t ld) {
  const ops::Conv2dPlan& dw = job.p->depthwise;
#ifdef HEXIR_SPATIAL_X86
  if (job.lanes.lanes > 0 && oy0 == 0 && oy1 == dw.oh)
    return dw_lanes_channels(job.lanes, image, c0, c1, scratch + c0 * ld, ld);
#endif
  DwBuffer buffer;  // one geometry for every channel
  for (int64_t c = c0; c < c1; ++c) {
    const int64_t plane = image * dw.c + c;
    if (job.depthwise.g.tile > 0)
      depthwise_rows(job.depthwise, plane, oy0, oy1, scratch + c * ld, &buffer,
                     c + 1 < c1 ? job.x + (plane + 1) * dw.h * dw.w : nullptr);
    else
      depthwise_direct_rows(job.direct, plane, oy0, oy1, scratch + c * ld);
  }
}

// The 1x1 over those rows: one GEMM (on `context`'s threads, or this one).
void separable_pointwise(const SeparableJob& job, const KernelContext& context, int64_t image, int64_t oy0,
                         int64_t oy1, const float* scratch, int64_t ld) {
  const ops::Conv2dPlan& pw = job.p->pointwise;
  const int64_t plane = pw.oh * pw.ow, at = image * pw.k * plane + oy0 * pw.ow;
  GemmArgs g{pw.k, (oy1 - oy0) * pw.ow, pw.c, job.pw_w, pw.c, scratch, ld, job.out + at, plane};
  g.row_bias = job.pw_bias;
  g.epilogue = pw.epilogue.activation != 0 ? &pw.epilogue : nullptr;
  if (job.residual) {
    g.residual = job.residual + at;
    g.ldr = plane;
  }
  g.packed_a = job.packed_pw_w;
  gemm(context, g);
}

void separable_task(void* context, int64_t task, int participant) {
  const SeparableJob& job = *static_cast<const SeparableJob*>(context);
  const ops::Conv2dPlan& dw = job.p->depthwise;
  const int64_t image = task / job.tasks_per_image;
  const int64_t oy0 = task % job.tasks_per_image * job.rows, oy1 = std::min(dw.oh, oy0 + job.rows);
  alignas(64) float stack[kSeparableStackFloats];
  float* scratch = job.pool && job.pool->scratch(participant) ? job.pool->scratch(participant) : stack;
  // Channel c's rows at scratch + c * ld: a few floats more than the rows
  // where they fit, so the channels do not start 4 KiB apart (the same L1 sets).
  const int64_t ld = (oy1 - oy0) * dw.ow + job.pad;
  separable_depthwise(job, image, oy0, oy1, 0, dw.c, scratch, ld);
  separable_pointwise(job, KernelContext{}, image, oy0, oy1, scratch, ld);  // the task is the unit of parallel work
}

// Whole images for few tasks: the channels split over the pool.
struct SeparableImage {
  const SeparableJob* job;
  int64_t image, groups, ld;
  float* scratch;
};

void separable_channels(void* context, int64_t group) {
  const SeparableImage& s = *static_cast<const SeparableImage*>(context);
  const int64_t c = s.job->p->depthwise.c;
  separable_depthwise(*s.job, s.image, 0, s.job->p->depthwise.oh, group * c / s.groups, (group + 1) * c / s.groups,
                      s.scratch, s.ld);
}

}  // namespace

Status separable_conv2d(const KernelContext& context, const Dispatch& d) {
  const ops::SeparableConv2dPlan& p = plan_of<ops::SeparableConv2dPlan>(d);
  const ops::Conv2dPlan& dw = p.depthwise;
  if (dw.n == 0 || dw.oh == 0 || dw.ow == 0 || p.pointwise.k == 0) return ok_status();
  ThreadPool* pool = pool_of(context);
  // Operands (op.h): x, dw_w, pw_w, then the biases the plan has, then the residual.
  const float* x = input(d, 0);
  const float* dw_bias = dw.has_bias ? input(d, 3) : nullptr;
  const float* pw_bias = p.pointwise.has_bias ? input(d, 3 + dw.has_bias) : nullptr;
  const float* residual = p.pointwise.has_residual ? input(d, 3 + dw.has_bias + p.pointwise.has_bias) : nullptr;
  const ops::Epilogue* dw_epilogue = dw.epilogue.activation != 0 ? &dw.epilogue : nullptr;
  SeparableJob job{&p, x, input(d, 1), dw_bias, input(d, 2), pw_bias, residual, output(d, 0), pool,
                   DepthwiseJob{&dw, x, input(d, 1), dw_bias, nullptr, dw_epilogue, nullptr,
                                select_depthwise(dw), dw_geometry(dw), 0, 0},
                   DepthwiseDirect{&dw, x, input(d, 1), dw_bias, nullptr, dw_epilogue, nullptr}, 0, 0, 0,
                   static_cast<const float*>(d.prepared)
#ifdef HEXIR_SPATIAL_X86
                   ,
                   DwLanesJob{}
#endif
  };
#ifdef HEXIR_SPATIAL_X86
  const int64_t lanes = isa_avx512() ? 16 : isa_avx2() ? 8 : 0;
  job.lanes = DwLanesJob{&dw, x, input(d, 1), dw_bias, nullptr, nullptr, dw_epilogue, 0, 0, 0};
  if (dw_lanes_fits(dw, lanes)) {
    job.lanes.lanes = lanes;
    dw_lanes_padded(dw, &job.lanes.ph, &job.lanes.pw);
  }
#endif
  // As many rows as the scratch holds with the padding (at least one without
  // it: c * ow <= kSeparableMaxRowFloats, the operator's rule), at most 16 (a
  // longer GEMM gains little, more tasks share better), then about 4 tasks
  // per thread where there are enough rows, but never a GEMM narrower than
  // 256 columns where the scratch holds them (PP-OCRv4 det's 10 x 10 maps,
  // a row per task: a 384 x 10 GEMM per row, slower than unfused at 2 threads).
  // Without the padding where that holds the whole map (mobilenet_v2's last
  // blocks: 960 channels of 7 x 7, one GEMM of 49 columns, not 35 + 14:
  // 0.77 -> 0.53 ms; more rows of a 14 x 14 map, 6 not 4, were slower).
  // Then rows balanced over the tasks (14 rows at 4: 4 + 4 + 3 + 3, not 4 + 4 + 4 + 2).
  const int64_t scratch = pool && pool->scratch(0) ? kScratchFloatsPerParticipant : kSeparableStackFloats;
  const int64_t whole_map = dw.c * dw.oh * dw.ow <= scratch ? dw.oh : 0;
  const int64_t fit = std::clamp<int64_t>(std::max((scratch / dw.c - 16) / dw.ow, whole_map), 1, 16);
  int64_t rows = fit;
  const int threads = pool ? pool->size() : 1;
  if (threads > 1)
    rows = std::clamp<int64_t>(std::max<int64_t>(dw.n * dw.oh / (4 * threads), (256 + dw.ow - 1) / dw.ow), 1, fit);
  rows = std::min(rows, dw.oh);
  const int64_t row_tasks = (dw.oh + rows - 1) / rows;
  job.rows = (dw.oh + row_tasks - 1) / row_tasks;
  job.pad = dw.c * (job.rows * dw.ow + 16) <= scratch ? 16 : 0;
  job.tasks_per_image = (dw.oh + job.rows - 1) / job.rows;
  // Fewer tasks than the threads could share well (small maps of many
  // channels: PP-OCRv4 det's 10 x 10 and 20 x 20 ran on one of two threads):
  // per image, its depthwise rows with the channels split over the pool into
  // participant 0's scratch (this kernel holds the pool between its two
  // runs), then the 1x1's GEMM on the pool.
  // The channels' maps 16 floats apart where that fits, else back to back
  // (mnasnet's 1152 channels of 7 x 7: unpadded they fit, and ran on one
  // thread of two before).
  const int64_t map = dw.oh * dw.ow;
  const int64_t whole_ld = dw.c * (map + 16) <= kScratchFloatsPerParticipant ? map + 16
                           : dw.c * map <= kScratchFloatsPerParticipant      ? map
                                                                              : 0;
  if (threads > 1 && dw.n * job.tasks_per_image < 2 * threads && pool->scratch(0) && whole_ld > 0) {
    SeparableImage s{&job, 0, std::min<int64_t>(dw.c, 4 * threads), whole_ld, pool->scratch(0)};
    for (s.image = 0; s.image < dw.n; ++s.image) {
      parallel_for(context, s.groups, separable_channels, &s);
      separable_pointwise(job, context, s.image, 0, dw.oh, s.scratch, s.ld);
    }
    return ok_status();
  }
  parallel_for_participants(context, dw.n * job.tasks_per_image, separable_task, &job);
  return ok_status();
}

// The 1x1's weights [K, C] packed as the GEMM's A (a constant pw_w).
uint64_t separable_conv2d_prepared_bytes(const Dispatch& d) {
  const ops::Conv2dPlan& pw = plan_of<ops::SeparableConv2dPlan>(d).pointwise;
  if (d.operands[2] == nullptr || pw.k == 0 || pw.c == 0) return 0;
  return static_cast<uint64_t>(gemm_packed_a_floats(pw.k, pw.c)) * sizeof(float);
}

void separable_conv2d_prepare(const Dispatch& d, void* out) {
  const ops::Conv2dPlan& pw = plan_of<ops::SeparableConv2dPlan>(d).pointwise;
  gemm_pack_a(input(d, 2), pw.c, pw.k, pw.c, static_cast<float*>(out));
}

namespace {

// ---- resize -------------------------------------------------------------------

constexpr int64_t kResizeChunk = 256;  // output columns whose taps are computed at once

struct ResizeJob {
  const ops::ResizePlan* p;
  const float* x;
  float* out;
  int64_t planes_per_task;
};

// Linear: the horizontal blend of input row y over a chunk of columns,
// (1 - dx) * a + dx * b in double: the inner terms of ops::resize_blend.
void resize_blend_row(const float* row, const int64_t* x0, const int64_t* x1, const double* dx, int64_t cols,
                      double* out) {
  for (int64_t j = 0; j < cols; ++j) out[j] = (1.0 - dx[j]) * row[x0[j]] + dx[j] * row[x1[j]];
}

// The nearest or the blend of the two neighbours per dim, as the definition
// (ops::resize_*): the same doubles in the same order, so the same bits.
// Linear keeps the horizontal blends of the last two input rows it used, so
// an input row shared by neighbouring output rows is blended once per plane.
void resize_task(void* context, int64_t task) {
  const ResizeJob& job = *static_cast<const ResizeJob*>(context);
  const ops::ResizePlan& p = *job.p;
  const int64_t plane0 = task * job.planes_per_task;
  const int64_t plane1 = std::min(p.n * p.c, plane0 + job.planes_per_task);
  const int64_t plane_in = p.h * p.w, plane_out = p.oh * p.ow;
  int64_t x0[kResizeChunk], x1[kResizeChunk];
  double dx[kResizeChunk];
  int64_t y0[kResizeChunk], y1[kResizeChunk];
  double dy[kResizeChunk];
  double blended[2][kResizeChunk];
  for (int64_t c0 = 0; c0 < p.ow; c0 += kResizeChunk) {
    const int64_t cols = std::min(kResizeChunk, p.ow - c0);
    for (int64_t j = 0; j < cols; ++j) {
      const double sx = ops::resize_source(p.coordinate_mode, c0 + j, p.scale_w, p.w, p.ow);
      if (p.mode == 0)
        x0[j] = ops::resize_nearest(p.nearest_mode, sx, p.w);
      else
        ops::resize_linear_taps(sx, p.w, &x0[j], &x1[j], &dx[j]);
    }
    for (int64_t r0 = 0; r0 < p.oh; r0 += kResizeChunk) {
      const int64_t rows = std::min(kResizeChunk, p.oh - r0);
      for (int64_t i = 0; i < rows; ++i) {
        const double sy = ops::resize_source(p.coordinate_mode, r0 + i, p.scale_h, p.h, p.oh);
        if (p.mode == 0)
          y0[i] = ops::resize_nearest(p.nearest_mode, sy, p.h);
        else
          ops::resize_linear_taps(sy, p.h, &y0[i], &y1[i], &dy[i]);
      }
      for (int64_t plane = plane0; plane < plane1; ++plane) {
        const float* image = job.x + plane * plane_in;
        float* result = job.out + plane * plane_out + r0 * p.ow + c0;
        if (p.mode == 0) {
          for (int64_t i = 0; i < rows; ++i) {
            const float* __restrict row = image + y0[i] * p.w;
            float* __restrict out = result + i * p.ow;
            for (int64_t j = 0; j < cols; ++j) out[j] = row[x0[j]];
          }
          continue;
        }
        int64_t held[2] = {-1, -1};  // the input rows whose blends `blended` holds
        for (int64_t i = 0; i < rows; ++i) {
          const double* h[2];
          for (int k = 0; k < 2; ++k) {
            const int64_t y = k == 0 ? y0[i] : y1[i];
            int slot = held[0] == y ? 0 : (held[1] == y ? 1 : -1);
            if (slot < 0) {
              // Replace the row the other tap does not need.
              const int64_t other = k == 0 ? y1[i] : y0[i];
              slot = held[0] == other ? 1 : 0;
              if (k == 1 && h[0] == blended[slot]) slot = 1 - slot;
              resize_blend_row(image + y * p.w, x0, x1, dx, cols, blended[slot]);
              held[slot] = y;
            }
            h[k] = blended[slot];
          }
          const double wy = dy[i];
          float* __restrict out = result + i * p.ow;
          for (int64_t j = 0; j < cols; ++j) out[j] = static_cast<float>((1.0 - wy) * h[0][j] + wy * h[1][j]);
        }
      }
    }
  }
}

// ---- conv_transpose -------------------------------------------------------------

// The direct loop (no workspace, or one too small): each output element
// gathers its taps (ops::conv_transpose_element).
struct ConvTransposeDirect {
  const ops::ConvTransposePlan* p;
  const float *x, *w, *bias;
  float* out;
  const float* prepared;  // the weights transposed per group (then w is not read), or null
};

// ops::conv_transpose_element over the prepared weights (group g's at
// prepared + g * taps * c_per_group, tap t of input channel ci at t *
// c_per_group + ci): the same products summed in the same (ci, ky, kx)
// order, so the same bits.
float conv_transpose_element_prepared(const ops::ConvTransposePlan& p, const float* x_image,
                                      const float* prepared, int64_t g, int64_t k_in_group, int64_t oy,
                                      int64_t ox) {
  const int64_t taps = p.k_per_group * p.kh * p.kw;
  const float* wt = prepared + (g * taps + k_in_group * p.kh * p.kw) * p.c_per_group;
  float acc = 0.0f;
  for (int64_t ci = 0; ci < p.c_per_group; ++ci) {
    const float* plane = x_image + (g * p.c_per_group + ci) * p.h * p.w;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t ty = oy + p.pad_top - ky * p.dilation_h;
      if (ty < 0) break;  // only smaller from here on
      if (ty % p.stride_h != 0) continue;
      const int64_t iy = ty / p.stride_h;
      if (iy >= p.h) continue;
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const int64_t tx = ox + p.pad_left - kx * p.dilation_w;
        if (tx < 0) break;
        if (tx % p.stride_w != 0) continue;
        const int64_t ix = tx / p.stride_w;
        if (ix >= p.w) continue;
        acc += plane[iy * p.w + ix] * wt[(ky * p.kw + kx) * p.c_per_group + ci];
      }
    }
  }
  return acc;
}

// Group g's weights [c_per_group, taps] (taps = k_per_group * kh * kw)
// transposed into out [taps, c_per_group]: the GEMM's A.
void conv_transpose_weights_transposed(const ops::ConvTransposePlan& p, const float* w, int64_t g,
                                       float* out) {
  const int64_t taps = p.k_per_group * p.kh * p.kw;
  const float* wg = w + g * p.c_per_group * taps;
  for (int64_t ci = 0; ci < p.c_per_group; ++ci)
    for (int64_t r = 0; r < taps; ++r) out[r * p.c_per_group + ci] = wg[ci * taps + r];
}

void conv_transpose_direct_plane(void* context, int64_t plane) {
  const ConvTransposeDirect& job = *static_cast<const ConvTransposeDirect*>(context);
  const ops::ConvTransposePlan& p = *job.p;
  const int64_t n = plane / p.k, k = plane % p.k;
  const int64_t g = k / p.k_per_group, kk = k % p.k_per_group;
  const float* image = job.x + n * p.c * p.h * p.w;
  float* out = job.out + plane * p.oh * p.ow;
  for (int64_t oy = 0; oy < p.oh; ++oy) {
    if (job.prepared)
      for (int64_t ox = 0; ox < p.ow; ++ox)
        out[ox] = conv_transpose_element_prepared(p, image, job.prepared, g, kk, oy, ox);
    else
      for (int64_t ox = 0; ox < p.ow; ++ox)
        out[ox] = ops::conv_transpose_element(p, image, job.w, g, kk, oy, ox);
    // Row final here, after the bias: the place for a fused epilogue.
    if (job.bias)
      for (int64_t ox = 0; ox < p.ow; ++ox) out[ox] += job.bias[k];
    out += p.ow;
  }
}

// Input rows per band the workspace holds (ops' conv_transpose workspace
// rule: the transposed weights of a group, then col for the band; the first
// part unused when they are prepared); 0 when it holds less than the rows one
// output row reads: the direct loop then.
int64_t conv_transpose_band_rows(const ops::ConvTransposePlan& p, uint64_t workspace_bytes) {
  const double taps = static_cast<double>(p.k_per_group * p.kh * p.kw);
  const double weights = taps * static_cast<double>(p.c_per_group) * sizeof(float);
  const double row = taps * static_cast<double>(p.w) * sizeof(float);
  const double bytes = static_cast<double>(workspace_bytes);
  if (row <= 0.0 || bytes <= weights) return 0;
  const int64_t rows =
      static_cast<int64_t>(std::min(static_cast<double>(p.h), std::floor((bytes - weights) / row)));
  const int64_t reach = std::min(p.h, (p.kh - 1) * p.dilation_h / p.stride_h + 1);
  return rows >= reach ? rows : 0;
}

// One band of output rows [oy0, oy1) of one image and group, from col (the
// GEMM over input rows [iy0, iy1)): task = output channel in the group x
// chunk of rows.
struct Col2im {
  const ops::ConvTransposePlan* p;
  const float* col;  // [k_per_group * kh * kw, (iy1 - iy0) * w]
  int64_t iy0, iy1;
  int64_t oy0, oy1;
  int64_t chunk;      // output rows per task
  int64_t chunks;     // tasks per channel
  float* out;         // the group's first output channel
  const float* bias;  // the group's first bias, or null
};

void col2im_task(void* context, int64_t task) {
  const Col2im& job = *static_cast<const Col2im*>(context);
  const ops::ConvTransposePlan& p = *job.p;
  const int64_t kk = task / job.chunks;
  const int64_t row_begin = job.oy0 + (task % job.chunks) * job.chunk;
  const int64_t row_end = std::min(job.oy1, row_begin + job.chunk);
  const int64_t ldc = (job.iy1 - job.iy0) * p.w;
  for (int64_t oy = row_begin; oy < row_end; ++oy) {
    float* __restrict row = job.out + (kk * p.oh + oy) * p.ow;
    std::fill(row, row + p.ow, 0.0f);
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t ty = oy + p.pad_top - ky * p.dilation_h;
      if (ty < 0) break;  // only smaller from here on
      if (ty % p.stride_h != 0) continue;
      const int64_t iy = ty / p.stride_h;
      if (iy >= job.iy1) continue;
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const float* __restrict src = job.col + ((kk * p.kh + ky) * p.kw + kx) * ldc + (iy - job.iy0) * p.w;
        // ox = ix * stride_w + shift for ix in [lo, hi) inside the output row.
        const int64_t shift = kx * p.dilation_w - p.pad_left;
        const int64_t lo = shift >= 0 ? 0 : (-shift + p.stride_w - 1) / p.stride_w;
        const int64_t hi =
            std::min(p.w, p.ow - shift <= 0 ? 0 : (p.ow - shift + p.stride_w - 1) / p.stride_w);
        if (p.stride_w == 1) {
          float* __restrict dst = row + shift;
          for (int64_t ix = lo; ix < hi; ++ix) dst[ix] += src[ix];
        } else if (p.stride_w == 2) {
          for (int64_t ix = lo; ix < hi; ++ix) row[2 * ix + shift] += src[ix];
        } else {
          for (int64_t ix = lo; ix < hi; ++ix) row[ix * p.stride_w + shift] += src[ix];
        }
      }
    }
    // Row final here, after the bias: the place for a fused epilogue.
    if (job.bias) {
      const float b = job.bias[kk];
      for (int64_t ox = 0; ox < p.ow; ++ox) row[ox] += b;
    }
  }
}

}  // namespace

Status resize(const KernelContext& context, const Dispatch& d) {
  const ops::ResizePlan& p = plan_of<ops::ResizePlan>(d);
  const int64_t planes = p.n * p.c;
  if (planes == 0 || p.oh == 0 || p.ow == 0) return ok_status();
  // Tasks of at least 16K outputs (about 4 per thread at most).
  ThreadPool* pool = pool_of(context);
  const int64_t threads = pool ? pool->size() : 1;
  const int64_t per_plane = p.oh * p.ow;
  const int64_t by_work = std::max<int64_t>(
      1, static_cast<int64_t>(static_cast<double>(planes) * static_cast<double>(per_plane) / 16384.0));
  const int64_t tasks = std::min({planes, 4 * threads, by_work});
  ResizeJob job{&p, input(d, 0), output(d, 0), (planes + tasks - 1) / tasks};
  parallel_for(context, (planes + job.planes_per_task - 1) / job.planes_per_task, resize_task, &job);
  return ok_status();
}

Status conv_transpose(const KernelContext& context, const Dispatch& d) {
  const ops::ConvTransposePlan& p = plan_of<ops::ConvTransposePlan>(d);
  if (p.n == 0 || p.k == 0) return ok_status();
  const float* x = input(d, 0);
  const float* w = input(d, 1);  // not read when prepared (the caller may have let it go)
  const float* prepared = static_cast<const float*>(d.prepared);
  const float* bias = p.has_bias ? input(d, 2) : nullptr;
  float* out = output(d, 0);
  ThreadPool* pool = pool_of(context);
  const int64_t threads = pool ? pool->size() : 1;
  const int64_t m = p.k_per_group * p.kh * p.kw;  // rows of col
  const int64_t band_rows = d.workspace ? conv_transpose_band_rows(p, d.workspace_size) : 0;
  if (band_rows == 0) {
    ConvTransposeDirect job{&p, x, w, bias, out, prepared};
    parallel_for(context, p.n * p.k, conv_transpose_direct_plane, &job);
    return ok_status();
  }
  float* scratch = static_cast<float*>(d.workspace);  // [m, c_per_group]: the group's A when not prepared
  float* col = scratch + m * p.c_per_group;
  for (int64_t g = 0; g < p.groups; ++g) {
    const float* wt = prepared ? prepared + g * m * p.c_per_group : scratch;
    if (!prepared) conv_transpose_weights_transposed(p, w, g, scratch);
    for (int64_t n = 0; n < p.n; ++n) {
      const float* image = x + (n * p.c + g * p.c_per_group) * p.h * p.w;
      Col2im job{&p,
                 col,
                 0,
                 0,
                 0,
                 0,
                 1,
                 1,
                 out + (n * p.k + g * p.k_per_group) * p.oh * p.ow,
                 bias ? bias + g * p.k_per_group : nullptr};
      for (int64_t oy0 = 0; oy0 < p.oh;) {
        // The input rows output rows [oy0, oy1) read: iy * stride_h in
        // [oy0 + pad_top - (kh - 1) * dilation_h, oy1 - 1 + pad_top].
        const int64_t reach = oy0 + p.pad_top - (p.kh - 1) * p.dilation_h;
        const int64_t iy0 = reach <= 0 ? 0 : std::min(p.h, (reach + p.stride_h - 1) / p.stride_h);
        const int64_t oy1 =
            iy0 + band_rows >= p.h ? p.oh : std::min(p.oh, (iy0 + band_rows) * p.stride_h - p.pad_top);
        const int64_t iy1 = std::min(p.h, (oy1 - 1 + p.pad_top) / p.stride_h + 1);
        if (iy1 > iy0) {
          GemmArgs args{
              m,   (iy1 - iy0) * p.w, p.c_per_group, wt, p.c_per_group, image + iy0 * p.w, p.h * p.w,
              col, (iy1 - iy0) * p.w};
          gemm(context, args);
        }
        job.iy0 = iy0;
        job.iy1 = std::max(iy0, iy1);
        job.oy0 = oy0;
        job.oy1 = oy1;
        // Tasks of at least 8K outputs, about 4 per thread.
        const int64_t rows = oy1 - oy0;
        const int64_t wanted = std::clamp<int64_t>(p.k_per_group * rows * p.ow / 8192, 1, 4 * threads);
        const int64_t chunks = std::clamp<int64_t>((wanted + p.k_per_group - 1) / p.k_per_group, 1, rows);
        job.chunk = (rows + chunks - 1) / chunks;
        job.chunks = (rows + job.chunk - 1) / job.chunk;
        parallel_for(context, p.k_per_group * job.chunks, col2im_task, &job);
        oy0 = oy1;
      }
    }
  }
  return ok_status();
}

// Constant weights transposed per group (the GEMM's A), group after group.
uint64_t conv_transpose_prepared_bytes(const Dispatch& d) {
  const ops::ConvTransposePlan& p = plan_of<ops::ConvTransposePlan>(d);
  if (d.operands[1] == nullptr) return 0;
  return static_cast<uint64_t>(p.groups * p.c_per_group * p.k_per_group * p.kh * p.kw) * sizeof(float);
}

void conv_transpose_prepare(const Dispatch& d, void* out) {
  const ops::ConvTransposePlan& p = plan_of<ops::ConvTransposePlan>(d);
  const int64_t group_floats = p.c_per_group * p.k_per_group * p.kh * p.kw;
  for (int64_t g = 0; g < p.groups; ++g)
    conv_transpose_weights_transposed(p, input(d, 1), g, static_cast<float*>(out) + g * group_floats);
}

}  // namespace hexir::hal::cpu::internal
