// quantized_conv2d: a QDQ model's integer convolution, channels-last u8
// activations times int8 weights in int32, requantized to u8 in the
// epilogue (ops::requantize_of, the same float steps on every path, so
// every ISA gives the same bytes).
//
// Dense and grouped: an indirect GEMM. A block of output pixels gets one
// row pointer each: straight into x for a 1x1 window without padding (its
// depth is the channels), else into a row gathered in the thread's scratch
// (the window's taps one after another, x_zero where a tap falls outside,
// zeros to the padded depth). The weights are already in the VNNI layout
// (op.h): each 64-byte load is 16 output channels by 4 reduction steps, and
// one vpdpbusd adds 4 u8 x int8 products per channel, exactly; the 4 bytes
// of a row broadcast. A 6 x 64 register tile (24 accumulators) reads its
// weights once per 6 pixels. AVX2 widens both to int16 (vpmaddwd: exact;
// vpmaddubsw's int16 pair sums would saturate at 255 * 127 * 2) and sums
// each channel's two pairs at the end. Depthwise: per pixel and tap a
// vector of 16 channels (vpmaddwd of zero-extended x by sign-extended w is
// their int32 product).
#include <algorithm>
#include <cstring>

#include "kernel_util.h"
#include "thread_pool.h"
#include "vnni.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HEXIR_QCONV_X86 1
// GCC 12 takes the _mm512_undefined_* operand of the unmasked conversions
// inlined into target("avx512...") functions for an uninitialized read.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace hexir::hal::cpu::internal {
namespace {

using ops::QuantizedConv2dPlan;

constexpr int kTileRows = 6;        // pixels per register tile
constexpr int64_t kMaxBlock = 96;   // pixels per gathered block
constexpr int64_t kStackScratch = 64 * 1024;

struct QConvJob {
  const QuantizedConv2dPlan* p;
  const uint8_t* x;
  const int8_t* w;
  const int32_t* bias;
  const float* multiplier;
  uint8_t* y;
  ThreadPool* pool;
  bool direct;           // 1x1 window, no padding, one group, channels a multiple of 4: rows read x in place
  int64_t block;         // pixels per task
  int64_t blocks;        // per group
  // A small image's output channels split among tasks too (multiples of 64:
  // the tile's width), so every thread has work (ResNet's 7 x 7 layers).
  int64_t channel_parts = 1, channels_per_part = 0;
  // AVX2 (without VNNI): the rows are int16, widened once per block (the
  // tile then broadcasts a step's 4 values by a load, not a shuffle), and
  // the tile is 4 pixels high.
  bool int16_rows = false;
  int tile_rows = kTileRows;
  // Depthwise: the kernel of a task's rows [begin, end), where one is chosen.
  void (*depthwise_rows)(const QConvJob& job, int64_t row_begin, int64_t row_end) = nullptr;
};

// The tile's operands: `rows` pixel rows of depth bytes, output channels
// [k0, k0 + 16 * J) of group g (the last vector masked to `valid` channels),
// pixel r's results from out[r] on.
struct Tile {
  const uint8_t* const* rows;
  // The group's weights from channel k0 (a multiple of 16) on: channel
  // k0 + c at reduction step d at w + c / 16 * block + d * 64 + c % 16 * 4
  // (op.h's layout: blocks of 16 channels, each contiguous over the steps).
  const int8_t* w;
  int64_t depth4, block;
  const int32_t* bias;
  const float* multiplier;
  uint8_t* const* out;  // per pixel: its output at channel k0
  int64_t valid;        // channels of the tile (<= 16 * J)
  int32_t zero, lo, hi;
};

// One weight block (16 channels, 4 steps of each in 64 bytes) at a time,
// the R pixels' 16 sums in int32: the inner loop over the block's channels
// is what the compiler vectorizes (on aarch64 the block's 64 bytes are one
// de-interleaving load). Per channel, the sums were scalar.
template <int R>
void tile_portable(const Tile& t) {
  for (int64_t c0 = 0; c0 < t.valid; c0 += 16) {
    int32_t sum[R][16] = {};
    const int8_t* w = t.w + c0 / 16 * t.block;
    for (int64_t d = 0; d < t.depth4; ++d, w += 64) {
      for (int r = 0; r < R; ++r) {
        const uint8_t* a = t.rows[r] + d * 4;
        const int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
        for (int c = 0; c < 16; ++c)
          sum[r][c] += a0 * w[c * 4] + a1 * w[c * 4 + 1] + a2 * w[c * 4 + 2] + a3 * w[c * 4 + 3];
      }
    }
    const int64_t lanes = std::min<int64_t>(16, t.valid - c0);
    for (int r = 0; r < R; ++r)
      for (int64_t c = 0; c < lanes; ++c)
        t.out[r][c0 + c] =
            ops::requantize_of(sum[r][c], t.bias[c0 + c], t.multiplier[c0 + c], t.zero, t.lo, t.hi);
  }
}

// Depthwise: where output pixel (n, oy, ox)'s taps read (nullptr: x_zero).
// False past kMaxDepthwiseTaps.
constexpr int64_t kMaxDepthwiseTaps = 81;
[[maybe_unused]] bool depthwise_taps(const QuantizedConv2dPlan& p, const uint8_t* x, int64_t n, int64_t oy,
                                     int64_t ox, const uint8_t** taps) {
  if (p.kh * p.kw > kMaxDepthwiseTaps) return false;
  for (int64_t ky = 0; ky < p.kh; ++ky)
    for (int64_t kx = 0; kx < p.kw; ++kx) taps[ky * p.kw + kx] = ops::quantized_conv2d_tap(p, x, n, oy, ox, ky, kx);
  return true;
}

// The rows kernels' taps: their byte offsets from a window's first pixel
// (found once per task), then output pixel (n, oy, ox)'s taps from channel
// c0 on, at those offsets when the window lies inside the input, else one
// by one, zero_row (x_zero bytes) for a tap outside.
[[maybe_unused]] void tap_offsets(const QuantizedConv2dPlan& p, int64_t* rel) {
  for (int64_t ky = 0; ky < p.kh; ++ky)
    for (int64_t kx = 0; kx < p.kw; ++kx) rel[ky * p.kw + kx] = (ky * p.dilation_h * p.w + kx * p.dilation_w) * p.c;
}
[[maybe_unused]] void window_taps(const QuantizedConv2dPlan& p, const int64_t* rel, const uint8_t* x, int64_t n,
                                  int64_t oy, int64_t ox, int64_t c0, const uint8_t* zero_row, const uint8_t** tap) {
  const int64_t taps = p.kh * p.kw, iy0 = oy * p.stride_h - p.pad_top, ix0 = ox * p.stride_w - p.pad_left;
  if (iy0 >= 0 && iy0 + (p.kh - 1) * p.dilation_h < p.h && ix0 >= 0 && ix0 + (p.kw - 1) * p.dilation_w < p.w) {
    const uint8_t* first = x + ((n * p.h + iy0) * p.w + ix0) * p.c + c0;
    for (int64_t i = 0; i < taps; ++i) tap[i] = first + rel[i];
    return;
  }
  depthwise_taps(p, x, n, oy, ox, tap);  // taps <= kMaxDepthwiseTaps: the callers checked
  for (int64_t i = 0; i < taps; ++i) tap[i] = tap[i] ? tap[i] + c0 : zero_row;
}

#if defined(HEXIR_QCONV_X86)
// The requantization of 16 channels: their bias and multiplier, and the
// bounds, loaded once per tile and applied to every pixel's sums.
struct Requantizer16 {
  __m512i bias, zero;
  __m512 multiplier, low, high;
};
[[gnu::target("avx512f,avx512bw,avx512vl")]] inline Requantizer16 requantizer16(const Tile& t, int64_t c,
                                                                                 __mmask16 mask) {
  return {_mm512_maskz_loadu_epi32(mask, t.bias + c), _mm512_set1_epi32(t.zero),
          _mm512_maskz_loadu_ps(mask, t.multiplier + c), _mm512_set1_ps(static_cast<float>(t.lo - t.zero)),
          _mm512_set1_ps(static_cast<float>(t.hi - t.zero))};
}
// ops::requantize_of of 16 sums: int32 lanes in [lo, hi].
[[gnu::target("avx512f,avx512bw,avx512vl")]] inline __m512i requantized(__m512i sum, const Requantizer16& q) {
  __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(sum, q.bias)), q.multiplier);
  v = _mm512_min_ps(_mm512_max_ps(v, q.low), q.high);
  return _mm512_add_epi32(_mm512_cvtps_epi32(v), q.zero);
}
// 16 int32 sums of channels [c, c + 16) to u8, stored (masked) at out.
[[gnu::target("avx512f,avx512bw,avx512vl")]] inline void requantize16(__m512i sum, const Tile& t, int64_t c,
                                                                      __mmask16 mask, uint8_t* out) {
  _mm_mask_storeu_epi8(out, mask, _mm512_cvtusepi32_epi8(requantized(sum, requantizer16(t, c, mask))));
}
// Four vectors of requantized lanes (64 channels, each in [0, 255]) as one
// 64-byte store: two saturating packs interleave them per 128-bit lane, a
// permutation puts the dwords back in channel order.
[[gnu::target("avx512f,avx512bw,avx512vl")]] inline void store64(__m512i q0, __m512i q1, __m512i q2, __m512i q3,
                                                                 uint8_t* out) {
  const __m512i bytes = _mm512_packus_epi16(_mm512_packus_epi32(q0, q1), _mm512_packus_epi32(q2, q3));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  _mm512_storeu_si512(out, _mm512_permutexvar_epi32(order, bytes));
}


// One array of accumulators per vector of 16 channels, the loops unrolled
// by pragma: GCC otherwise keeps the accumulators on the stack, stored back
// every step (as gemm.cc found for its float tile: one 24-vector array is
// past what it splits into registers).
template <int R, int J>
[[gnu::target("avx512f,avx512bw,avx512vl,avx512vnni")]] void tile_vnni(const Tile& t) {
  static_assert(J >= 1 && J <= 4);
  __m512i s0[R], s1[R], s2[R], s3[R];
  const uint8_t* rows[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    rows[r] = t.rows[r];
    s0[r] = s1[r] = s2[r] = s3[r] = _mm512_setzero_si512();
  }
  __mmask16 mask[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const int64_t left = std::clamp<int64_t>(t.valid - 16 * j, 0, 16);
    mask[j] = static_cast<__mmask16>((1u << left) - 1);
  }
  // Block j's step d at w + j * block + d * 64: J sequential streams (the
  // blocks are zero-padded to 16 channels, so no load needs a mask).
  const int8_t* w = t.w;
  const int64_t block = t.block, depth = t.depth4 * 4;
  for (int64_t d = 0; d < depth; d += 4, w += 64) {
    const __m512i w0 = _mm512_loadu_si512(w);
    const __m512i w1 = J > 1 ? _mm512_loadu_si512(w + block) : w0;
    const __m512i w2 = J > 2 ? _mm512_loadu_si512(w + 2 * block) : w0;
    const __m512i w3 = J > 3 ? _mm512_loadu_si512(w + 3 * block) : w0;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      int32_t a4;
      std::memcpy(&a4, rows[r] + d, 4);
      const __m512i a = _mm512_set1_epi32(a4);
      dpbusd(s0[r], a, w0);
      if constexpr (J > 1) dpbusd(s1[r], a, w1);
      if constexpr (J > 2) dpbusd(s2[r], a, w2);
      if constexpr (J > 3) dpbusd(s3[r], a, w3);
    }
  }
  Requantizer16 q[J];
#pragma GCC unroll 4
  for (int j = 0; j < J; ++j) q[j] = requantizer16(t, 16 * j, mask[j]);
  if (J == 4 && t.valid == 64) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      store64(requantized(s0[r], q[0]), requantized(s1[r], q[J > 1 ? 1 : 0]), requantized(s2[r], q[J > 2 ? 2 : 0]),
              requantized(s3[r], q[J > 3 ? 3 : 0]), t.out[r]);
    return;
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm_mask_storeu_epi8(t.out[r], mask[0], _mm512_cvtusepi32_epi8(requantized(s0[r], q[0])));
    if constexpr (J > 1) _mm_mask_storeu_epi8(t.out[r] + 16, mask[1], _mm512_cvtusepi32_epi8(requantized(s1[r], q[1])));
    if constexpr (J > 2) _mm_mask_storeu_epi8(t.out[r] + 32, mask[2], _mm512_cvtusepi32_epi8(requantized(s2[r], q[2])));
    if constexpr (J > 3) _mm_mask_storeu_epi8(t.out[r] + 48, mask[3], _mm512_cvtusepi32_epi8(requantized(s3[r], q[3])));
  }
}

// ops::requantize_of of 8 channels with AVX2: the same float steps (the
// conversion rounds half to even, as rintf in the default rounding mode).
struct Requantizer8 {
  __m256i bias, zero;
  __m256 multiplier, low, high;
};
[[gnu::target("avx2")]] inline Requantizer8 requantizer8(const int32_t* bias, const float* multiplier, int32_t zero,
                                                         int32_t lo, int32_t hi) {
  return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias)), _mm256_set1_epi32(zero),
          _mm256_loadu_ps(multiplier), _mm256_set1_ps(static_cast<float>(lo - zero)),
          _mm256_set1_ps(static_cast<float>(hi - zero))};
}
// int32 lanes in [lo, hi].
[[gnu::target("avx2")]] inline __m256i requantized(__m256i sum, const Requantizer8& q) {
  __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(sum, q.bias)), q.multiplier);
  v = _mm256_min_ps(_mm256_max_ps(v, q.low), q.high);
  return _mm256_add_epi32(_mm256_cvtps_epi32(v), q.zero);
}
// 8 lanes in [0, 255] as 8 bytes (the low half).
[[gnu::target("avx2")]] inline __m128i packed_u8(__m256i q) {
  const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  return _mm_packus_epi16(words, words);
}

// Output channels [c0, c0 + 8) (fewer at the tail) of R pixels: two
// accumulators per pixel, each holding 4 channels' two int16 pair sums,
// summed at the end.
// A pixel's 4 int16 values of a step in every 64 bits: one broadcast load.
[[gnu::target("avx2")]] inline __m256i broadcast4(const int16_t* values) {
  int64_t v;
  std::memcpy(&v, values, 8);
  return _mm256_set1_epi64x(v);
}

// A pixel's step times the two weight vectors, into its two accumulators.
[[gnu::target("avx2")]] inline void madd2(__m256i& s0, __m256i& s1, __m256i pixel, __m256i w0, __m256i w1) {
  s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(pixel, w0));
  s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(pixel, w1));
}

template <int R>
[[gnu::target("avx2,fma")]] inline void tile_avx2_channels(const Tile& t, int64_t c0) {
  static_assert(R >= 1 && R <= 4);
  // Named accumulators, not arrays: with [R] arrays GCC added a register
  // move (and a stack store) after every sum, 40 instructions a step.
  __m256i a00 = _mm256_setzero_si256(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
  const int64_t n = std::min<int64_t>(8, t.valid - c0);
  // Channels c0 .. c0 + 7 of one 16-channel block: 32 of its 64 bytes per step (the block is zero-padded).
  const int8_t* w = t.w + c0 / 16 * t.block + c0 % 16 * 4;
  // The rows are int16 (QConvJob::int16_rows).
  const auto* r0 = reinterpret_cast<const int16_t*>(t.rows[0]);
  const auto* r1 = R > 1 ? reinterpret_cast<const int16_t*>(t.rows[1]) : r0;
  const auto* r2 = R > 2 ? reinterpret_cast<const int16_t*>(t.rows[2]) : r0;
  const auto* r3 = R > 3 ? reinterpret_cast<const int16_t*>(t.rows[3]) : r0;
  for (int64_t d = 0; d < t.depth4 * 4; d += 4, w += 64) {
    const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
    const __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16)));
    madd2(a00, a01, broadcast4(r0 + d), w0, w1);
    if constexpr (R > 1) madd2(a10, a11, broadcast4(r1 + d), w0, w1);
    if constexpr (R > 2) madd2(a20, a21, broadcast4(r2 + d), w0, w1);
    if constexpr (R > 3) madd2(a30, a31, broadcast4(r3 + d), w0, w1);
  }
  const __m256i s0[4] = {a00, a10, a20, a30}, s1[4] = {a01, a11, a21, a31};
  if (n == 8) {  // the epilogue in vectors: the per-lane form was most of a shallow (1x1, 16-channel) layer's time
    const Requantizer8 q = requantizer8(t.bias + c0, t.multiplier + c0, t.zero, t.lo, t.hi);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      // [c0 c1 c4 c5 | c2 c3 c6 c7] after the pair sums; then in channel order.
      const __m256i s = _mm256_permute4x64_epi64(_mm256_hadd_epi32(s0[r], s1[r]), 0xd8);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(t.out[r] + c0), packed_u8(requantized(s, q)));
    }
    return;
  }
  for (int r = 0; r < R; ++r) {
    const __m256i s = _mm256_permute4x64_epi64(_mm256_hadd_epi32(s0[r], s1[r]), 0xd8);
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
    for (int64_t c = 0; c < n; ++c)
      t.out[r][c0 + c] = ops::requantize_of(lanes[c], t.bias[c0 + c], t.multiplier[c0 + c], t.zero, t.lo, t.hi);
  }
}

// All the tile's channels, 8 at a time, in one call: a shallow layer's
// (1x1, 16 channels: 4 steps) call and setup per 8 channels cost as much as its sums.
template <int R>
[[gnu::target("avx2,fma")]] void tile_avx2(const Tile& t) {
  for (int64_t c0 = 0; c0 < t.valid; c0 += 8) tile_avx2_channels<R>(t, c0);
}

// Depthwise output pixel (n, oy, ox), 64 channels (4 vectors) per pass over
// the taps: x zero-extended and w sign-extended to int32, vpmaddwd of the
// two is their product (the high int16 halves multiply to 0).
[[gnu::target("avx512f,avx512bw,avx512vl")]] void depthwise_pixel_avx512(const QConvJob& job, const uint8_t* const* tap_x,
                                                                          uint8_t* out) {
  const QuantizedConv2dPlan& p = *job.p;
  const int64_t taps = p.kh * p.kw;
  const __m512i zero = _mm512_set1_epi32(p.x_zero);
  const Tile t{nullptr, nullptr, 0, 0, job.bias, job.multiplier, nullptr, 0, p.y_zero, p.y_min, p.y_max};
  for (int64_t c = 0; c < p.c; c += 64) {
    __mmask16 mask[4];
    __m512i sum[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      mask[v] = static_cast<__mmask16>((1u << std::clamp<int64_t>(p.c - c - 16 * v, 0, 16)) - 1);
      sum[v] = _mm512_setzero_si512();
    }
    for (int64_t tap = 0; tap < taps; ++tap) {
      const int8_t* w = job.w + tap * p.c + c;
      const uint8_t* x = tap_x[tap] ? tap_x[tap] + c : nullptr;
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        const __m512i wv = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask[v], w + 16 * v));
        const __m512i xv = x ? _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask[v], x + 16 * v)) : zero;
        sum[v] = _mm512_add_epi32(sum[v], _mm512_madd_epi16(xv, wv));
      }
    }
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v)
      if (mask[v]) requantize16(sum[v], t, c + 16 * v, mask[v], out + c + 16 * v);
  }
}

// A whole output row (n, oy) of a 3x3 depthwise convolution, 16 channels
// at a time: the block's nine weight vectors, bias and multiplier stay in
// registers across the row; a pixel whose window lies inside the input
// reads its taps at fixed offsets, without checks (the edge pixels take
// depthwise_pixel_avx512). MobileNet-V2's depthwise layers were a third of
// its time one pixel at a time.
[[gnu::target("avx512f,avx512bw,avx512vl")]] void depthwise3x3_row_avx512(const QConvJob& job, int64_t n, int64_t oy,
                                                                           int64_t ox_begin, int64_t ox_end) {
  const QuantizedConv2dPlan& p = *job.p;
  int64_t rel[9];  // the taps' byte offsets from the window's first pixel
  for (int64_t ky = 0; ky < 3; ++ky)
    for (int64_t kx = 0; kx < 3; ++kx) rel[ky * 3 + kx] = (ky * p.dilation_h * p.w + kx * p.dilation_w) * p.c;
  const int64_t iy0 = oy * p.stride_h - p.pad_top;
  const Tile t{nullptr, nullptr, 0, 0, job.bias, job.multiplier, nullptr, 0, p.y_zero, p.y_min, p.y_max};
  for (int64_t c = 0; c < p.c; c += 16) {
    const __mmask16 mask = static_cast<__mmask16>((1u << std::min<int64_t>(16, p.c - c)) - 1);
    __m512i w[9];
#pragma GCC unroll 9
    for (int i = 0; i < 9; ++i) w[i] = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask, job.w + i * p.c + c));
    const uint8_t* row = job.x + ((n * p.h + iy0) * p.w) * p.c + c;
    for (int64_t ox = ox_begin; ox < ox_end; ++ox) {
      const uint8_t* x = row + (ox * p.stride_w - p.pad_left) * p.c;
      __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 9
      for (int i = 0; i < 9; ++i)
        sum = _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask, x + rel[i])), w[i]));
      requantize16(sum, t, c, mask, job.y + ((n * p.oh + oy) * p.ow + ox) * p.k + c);
    }
  }
}

// Depthwise with VNNI: four taps of a channel in one 32-bit lane, so one
// vpdpbusd adds 4 taps x 16 channels. Per block of 64 channels, four taps'
// bytes are interleaved by two rounds of unpacks (per 128-bit lane L:
// unpack*_epi8 of taps 0/1 and 2/3, then unpack*_epi16 of those): vector j
// holds channels 16L + 4j .. 16L + 4j + 3, a tap per byte. The weights are
// interleaved the same way once per task, the biases and multipliers
// permuted to match, and the requantized lanes' signed/unsigned packs undo
// the permutation (packs_epi32 of vectors 0, 1 is channels 16L .. 16L + 7,
// of 2, 3 the next 8). A tap outside the input, and the missing taps of the
// last group of four (weight 0), read a row of x_zero. 2.5x fewer vector
// operations per product than widening to int32 (vpmaddwd): 2.1-2.5x faster
// on MobileNet-V2's 192 to 960 channels, 1.5x on 144 (a block of 64 a
// quarter full).
constexpr int64_t kDepthwiseVnniBytes = 48 * 1024;  // a task's interleaved weights, biases, multipliers, zero row

struct DepthwiseVnniLayout {
  int64_t blocks, groups;       // of 64 channels; of 4 taps
  int64_t weights, bias, mult;  // byte offsets in the task's buffer
  int64_t zero_row;
  int64_t bytes;
};
DepthwiseVnniLayout depthwise_vnni_layout(const QuantizedConv2dPlan& p) {
  DepthwiseVnniLayout l{};
  l.blocks = (p.c + 63) / 64;
  l.groups = (p.kh * p.kw + 3) / 4;
  l.weights = 0;
  l.bias = l.groups * l.blocks * 256;
  l.mult = l.bias + l.blocks * 256;
  l.zero_row = l.mult + l.blocks * 256;
  l.bytes = l.zero_row + l.blocks * 64;
  return l;
}

// A mask of the first n (<= 64) bytes.
inline uint64_t byte_mask(int64_t n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

[[gnu::target("avx512f,avx512bw,avx512vl")]] inline void interleave4(__m512i t0, __m512i t1, __m512i t2, __m512i t3,
                                                                     __m512i* v) {
  const __m512i a = _mm512_unpacklo_epi8(t0, t1), b = _mm512_unpackhi_epi8(t0, t1);
  const __m512i c = _mm512_unpacklo_epi8(t2, t3), d = _mm512_unpackhi_epi8(t2, t3);
  v[0] = _mm512_unpacklo_epi16(a, c);
  v[1] = _mm512_unpackhi_epi16(a, c);
  v[2] = _mm512_unpacklo_epi16(b, d);
  v[3] = _mm512_unpackhi_epi16(b, d);
}

// Output rows [row_begin, row_end) of (n * oh) rows.
[[gnu::target("avx512f,avx512bw,avx512vl,avx512vnni")]] void depthwise_rows_vnni(const QConvJob& job,
                                                                                  int64_t row_begin,
                                                                                  int64_t row_end) {
  const QuantizedConv2dPlan& p = *job.p;
  const DepthwiseVnniLayout l = depthwise_vnni_layout(p);
  alignas(64) uint8_t buffer[kDepthwiseVnniBytes];
  auto* wq = reinterpret_cast<__m512i*>(buffer + l.weights);  // [group][block][4]
  auto* bias = reinterpret_cast<int32_t*>(buffer + l.bias);
  auto* mult = reinterpret_cast<float*>(buffer + l.mult);
  const uint8_t* zero_row = buffer + l.zero_row;
  std::memset(buffer + l.zero_row, p.x_zero, static_cast<size_t>(l.blocks * 64));
  const int64_t taps = p.kh * p.kw;
  for (int64_t b = 0; b < l.blocks; ++b) {
    const uint64_t mask = byte_mask(p.c - 64 * b);
    for (int64_t g = 0; g < l.groups; ++g) {
      __m512i t[4];
      for (int i = 0; i < 4; ++i)
        t[i] = 4 * g + i < taps ? _mm512_maskz_loadu_epi8(mask, job.w + (4 * g + i) * p.c + 64 * b)
                                : _mm512_setzero_si512();
      interleave4(t[0], t[1], t[2], t[3], wq + (g * l.blocks + b) * 4);
    }
    // Lane i of vector j, 128-bit lane L: channel 64b + 16L + 4j + i.
    for (int j = 0; j < 4; ++j)
      for (int lane = 0; lane < 4; ++lane)
        for (int i = 0; i < 4; ++i) {
          const int64_t c = 64 * b + 16 * lane + 4 * j + i, at = 64 * b + 16 * j + 4 * lane + i;
          bias[at] = c < p.c ? job.bias[c] : 0;
          mult[at] = c < p.c ? job.multiplier[c] : 0.0f;
        }
  }
  const __m512i y_zero = _mm512_set1_epi32(p.y_zero);
  const __m512 low = _mm512_set1_ps(static_cast<float>(p.y_min - p.y_zero));
  const __m512 high = _mm512_set1_ps(static_cast<float>(p.y_max - p.y_zero));
  int64_t rel[kMaxDepthwiseTaps];
  tap_offsets(p, rel);
  const uint8_t* tap[kMaxDepthwiseTaps + 3];
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t n = row / p.oh, oy = row % p.oh;
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      window_taps(p, rel, job.x, n, oy, ox, 0, zero_row, tap);
      for (int64_t i = taps; i < 4 * l.groups; ++i) tap[i] = zero_row;
      uint8_t* out = job.y + ((n * p.oh + oy) * p.ow + ox) * p.k;
      for (int64_t b = 0; b < l.blocks; ++b) {
        const int64_t c = 64 * b;
        const uint64_t mask = byte_mask(p.c - c);
        __m512i sum[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                          _mm512_setzero_si512()};
        const __m512i* w = wq + b * 4;
        for (int64_t g = 0; g < l.groups; ++g, w += l.blocks * 4) {
          __m512i v[4];
          const uint8_t* const* t = tap + 4 * g;
          // The zero row is blocks * 64 bytes long: only x's last block needs the mask.
          interleave4(_mm512_maskz_loadu_epi8(mask, t[0] + c), _mm512_maskz_loadu_epi8(mask, t[1] + c),
                      _mm512_maskz_loadu_epi8(mask, t[2] + c), _mm512_maskz_loadu_epi8(mask, t[3] + c), v);
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) dpbusd(sum[j], v[j], w[j]);
        }
        __m512i q[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const Requantizer16 r{_mm512_load_si512(bias + c + 16 * j), y_zero, _mm512_load_ps(mult + c + 16 * j), low,
                                high};
          q[j] = requantized(sum[j], r);
        }
        const __m512i bytes = _mm512_packus_epi16(_mm512_packs_epi32(q[0], q[1]), _mm512_packs_epi32(q[2], q[3]));
        _mm512_mask_storeu_epi8(out + c, mask, bytes);
      }
    }
  }
}

// Depthwise with AVX2, two taps per vpmaddwd: per block of 16 channels, the
// bytes of taps 2i and 2i + 1 interleaved (unpack*_epi8) and zero-extended
// to int16 pairs, times the two taps' weights interleaved the same way
// (sign-extended once per task), sums a * wa + b * wb per channel in int32,
// exactly. Channel blocks in chunks whose weights fit the task's buffer,
// each over all the task's rows. A tap outside the input, and the missing
// second tap of an odd count (weight 0), read a row of x_zero. One tap per
// vpmaddwd and the per-lane epilogue was 13x the f32 layer's time.
constexpr int64_t kDepthwiseAvx2Bytes = 32 * 1024;

[[gnu::target("avx2,fma")]] void depthwise_rows_avx2(const QConvJob& job, int64_t row_begin, int64_t row_end) {
  const QuantizedConv2dPlan& p = *job.p;
  const int64_t taps = p.kh * p.kw, pairs = (taps + 1) / 2, blocks = (p.c + 15) / 16;
  // Per block: its weights (two vectors per pair), 16 biases, multipliers and x_zero bytes.
  const int64_t block_bytes = pairs * 64 + 64 + 64 + 16;
  const int64_t chunk = std::min(blocks, kDepthwiseAvx2Bytes / block_bytes);  // >= 1: taps <= kMaxDepthwiseTaps
  alignas(32) uint8_t buffer[kDepthwiseAvx2Bytes];
  auto* wq = reinterpret_cast<__m256i*>(buffer);  // [block][pair][2]
  auto* bias = reinterpret_cast<int32_t*>(buffer + chunk * pairs * 64);
  auto* mult = reinterpret_cast<float*>(buffer + chunk * pairs * 64 + chunk * 64);
  uint8_t* zero_row = buffer + chunk * pairs * 64 + chunk * 128;
  std::memset(zero_row, p.x_zero, static_cast<size_t>(chunk * 16));
  int64_t rel[kMaxDepthwiseTaps];
  tap_offsets(p, rel);
  const __m256i y_zero = _mm256_set1_epi32(p.y_zero);
  const __m256 low = _mm256_set1_ps(static_cast<float>(p.y_min - p.y_zero));
  const __m256 high = _mm256_set1_ps(static_cast<float>(p.y_max - p.y_zero));
  const uint8_t* tap[kMaxDepthwiseTaps + 1];
  alignas(16) uint8_t tail[(kMaxDepthwiseTaps + 1) * 16];  // the last block's taps when C % 16 != 0
  const uint8_t* tail_tap[kMaxDepthwiseTaps + 1];
  for (int64_t i = 0; i <= taps; ++i) tail_tap[i] = tail + 16 * i;
  for (int64_t c0 = 0; c0 < p.c; c0 += chunk * 16) {
    const int64_t nb = std::min(chunk, blocks - c0 / 16), channels = std::min(p.c - c0, nb * 16);
    for (int64_t b = 0; b < nb; ++b) {
      for (int64_t i = 0; i < pairs; ++i) {
        alignas(16) int8_t wa[16] = {}, wb[16] = {};
        const int64_t c = c0 + 16 * b, valid = std::min<int64_t>(16, p.c - c);
        std::memcpy(wa, job.w + 2 * i * p.c + c, static_cast<size_t>(valid));
        if (2 * i + 1 < taps) std::memcpy(wb, job.w + (2 * i + 1) * p.c + c, static_cast<size_t>(valid));
        const __m128i va = _mm_load_si128(reinterpret_cast<const __m128i*>(wa));
        const __m128i vb = _mm_load_si128(reinterpret_cast<const __m128i*>(wb));
        _mm256_store_si256(wq + (b * pairs + i) * 2, _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(va, vb)));
        _mm256_store_si256(wq + (b * pairs + i) * 2 + 1, _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(va, vb)));
      }
    }
    for (int64_t j = 0; j < nb * 16; ++j) {
      bias[j] = j < channels ? job.bias[c0 + j] : 0;
      mult[j] = j < channels ? job.multiplier[c0 + j] : 0.0f;
    }
    for (int64_t row = row_begin; row < row_end; ++row) {
      const int64_t n = row / p.oh, oy = row % p.oh;
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        window_taps(p, rel, job.x, n, oy, ox, c0, zero_row, tap);
        tap[taps] = zero_row;
        uint8_t* out = job.y + ((n * p.oh + oy) * p.ow + ox) * p.k + c0;
        for (int64_t b = 0; b < nb; ++b) {
          const int64_t j = 16 * b, valid = std::min<int64_t>(16, channels - j);
          const uint8_t* const* t = tap;
          int64_t at = j;
          if (valid < 16) {  // 16-byte loads would read past the pixel (and the tensor)
            for (int64_t i = 0; i < taps; ++i) std::memcpy(tail + 16 * i, tap[i] + j, static_cast<size_t>(valid));
            std::memcpy(tail + 16 * taps, zero_row, 16);
            t = tail_tap;
            at = 0;
          }
          __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
          const __m256i* w = wq + b * pairs * 2;
          for (int64_t i = 0; i < pairs; ++i, w += 2) {
            const __m128i xa = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t[2 * i] + at));
            const __m128i xb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t[2 * i + 1] + at));
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(xa, xb)), w[0]));
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi8(xa, xb)), w[1]));
          }
          const Requantizer8 q0{_mm256_load_si256(reinterpret_cast<const __m256i*>(bias + j)), y_zero,
                                _mm256_load_ps(mult + j), low, high};
          const Requantizer8 q1{_mm256_load_si256(reinterpret_cast<const __m256i*>(bias + j + 8)), y_zero,
                                _mm256_load_ps(mult + j + 8), low, high};
          const __m128i bytes = _mm_unpacklo_epi64(packed_u8(requantized(s0, q0)), packed_u8(requantized(s1, q1)));
          if (valid == 16) {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), bytes);
          } else {
            alignas(16) uint8_t last[16];
            _mm_store_si128(reinterpret_cast<__m128i*>(last), bytes);
            std::memcpy(out + j, last, static_cast<size_t>(valid));
          }
        }
      }
    }
  }
}
#endif

#if defined(__aarch64__)
// NEON (every ARMv8-A core; no dot-product extension assumed): u8 and int8
// widened to int16, products summed into int32 lanes by the widening
// multiply-adds (smlal), exact like vpmaddwd.

// ops::requantize_of of 16 sums (channels c .. c + 15 of bias and multiplier,
// `lanes` of them valid) as 16 bytes: the same float steps, the conversion
// rounding to nearest even (fcvtns, rintf's default mode).
inline uint8x16_t requantized16_neon(const int32x4_t (&sum)[4], const int32_t* bias, const float* multiplier,
                                     int64_t lanes, int32_t zero, int32_t lo, int32_t hi) {
  int32_t b[16] = {};
  float m[16] = {};
  if (lanes < 16) {
    std::memcpy(b, bias, static_cast<size_t>(lanes) * 4);
    std::memcpy(m, multiplier, static_cast<size_t>(lanes) * 4);
    bias = b;
    multiplier = m;
  }
  const float32x4_t low = vdupq_n_f32(static_cast<float>(lo - zero)), high = vdupq_n_f32(static_cast<float>(hi - zero));
  int16x4_t q[4];
  for (int i = 0; i < 4; ++i) {
    float32x4_t v = vmulq_f32(vcvtq_f32_s32(vaddq_s32(sum[i], vld1q_s32(bias + 4 * i))), vld1q_f32(multiplier + 4 * i));
    v = vminq_f32(vmaxq_f32(v, low), high);
    q[i] = vqmovn_s32(vaddq_s32(vcvtnq_s32_f32(v), vdupq_n_s32(zero)));
  }
  return vcombine_u8(vqmovun_s16(vcombine_s16(q[0], q[1])), vqmovun_s16(vcombine_s16(q[2], q[3])));
}

inline void store_bytes(uint8_t* out, uint8x16_t bytes, int64_t lanes) {
  if (lanes == 16) {
    vst1q_u8(out, bytes);
    return;
  }
  uint8_t all[16];
  vst1q_u8(all, bytes);
  std::memcpy(out, all, static_cast<size_t>(lanes));
}

// R pixels (R <= 4) by one weight block of 16 channels per pass: the
// block's 64 bytes of a step de-interleaved by one load (vld4: reduction
// step j of the 16 channels in vector j), widened, and each pixel's 4
// values of the step multiplied in by lane (smlal by element).
template <int R>
void tile_neon(const Tile& t) {
  static_assert(R >= 1 && R <= 4);
  for (int64_t c0 = 0; c0 < t.valid; c0 += 16) {
    int32x4_t acc[R][4];
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < 4; ++i) acc[r][i] = vdupq_n_s32(0);
    const int8_t* w = t.w + c0 / 16 * t.block;
    for (int64_t d = 0; d < t.depth4; ++d, w += 64) {
      const int8x16x4_t wv = vld4q_s8(w);
      int16x8_t wl[4], wh[4];
      for (int j = 0; j < 4; ++j) {
        wl[j] = vmovl_s8(vget_low_s8(wv.val[j]));
        wh[j] = vmovl_high_s8(wv.val[j]);
      }
      for (int r = 0; r < R; ++r) {
        uint32_t a4;
        std::memcpy(&a4, t.rows[r] + d * 4, 4);
        const int16x4_t a = vget_low_s16(vreinterpretq_s16_u16(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(a4)))));
#define HEXIR_QCONV_NEON_STEP(j)                                                 \
  acc[r][0] = vmlal_lane_s16(acc[r][0], vget_low_s16(wl[j]), a, j);              \
  acc[r][1] = vmlal_high_lane_s16(acc[r][1], wl[j], a, j);                       \
  acc[r][2] = vmlal_lane_s16(acc[r][2], vget_low_s16(wh[j]), a, j);              \
  acc[r][3] = vmlal_high_lane_s16(acc[r][3], wh[j], a, j);
        HEXIR_QCONV_NEON_STEP(0)
        HEXIR_QCONV_NEON_STEP(1)
        HEXIR_QCONV_NEON_STEP(2)
        HEXIR_QCONV_NEON_STEP(3)
#undef HEXIR_QCONV_NEON_STEP
      }
    }
    const int64_t lanes = std::min<int64_t>(16, t.valid - c0);
    for (int r = 0; r < R; ++r)
      store_bytes(t.out[r] + c0,
                  requantized16_neon(acc[r], t.bias + c0, t.multiplier + c0, lanes, t.zero, t.lo, t.hi), lanes);
  }
}

// Depthwise output pixel (n, oy, ox), 16 channels at a time over the taps.
void depthwise_pixel_neon(const QConvJob& job, int64_t n, int64_t oy, int64_t ox, uint8_t* out) {
  const QuantizedConv2dPlan& p = *job.p;
  const int64_t taps = p.kh * p.kw;
  const uint8_t* tap[kMaxDepthwiseTaps];
  depthwise_taps(p, job.x, n, oy, ox, tap);  // taps <= kMaxDepthwiseTaps: the caller checked
  const uint8x16_t x_zero = vdupq_n_u8(static_cast<uint8_t>(p.x_zero));
  for (int64_t c0 = 0; c0 < p.c; c0 += 16) {
    const int64_t lanes = std::min<int64_t>(16, p.c - c0);
    int32x4_t acc[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
    for (int64_t i = 0; i < taps; ++i) {
      const int8_t* wp = job.w + i * p.c + c0;
      const uint8_t* xp = tap[i] ? tap[i] + c0 : nullptr;
      int8x16_t w;
      uint8x16_t x = x_zero;
      if (lanes == 16) {
        w = vld1q_s8(wp);
        if (xp) x = vld1q_u8(xp);
      } else {  // 16-byte loads would read past the row (and the tensor)
        int8_t wt[16] = {};
        uint8_t xt[16] = {};
        std::memcpy(wt, wp, static_cast<size_t>(lanes));
        if (xp) std::memcpy(xt, xp, static_cast<size_t>(lanes));
        w = vld1q_s8(wt);
        if (xp) x = vld1q_u8(xt);
      }
      const int16x8_t xl = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(x)));
      const int16x8_t xh = vreinterpretq_s16_u16(vmovl_high_u8(x));
      const int16x8_t wl = vmovl_s8(vget_low_s8(w)), wh = vmovl_high_s8(w);
      acc[0] = vmlal_s16(acc[0], vget_low_s16(xl), vget_low_s16(wl));
      acc[1] = vmlal_high_s16(acc[1], xl, wl);
      acc[2] = vmlal_s16(acc[2], vget_low_s16(xh), vget_low_s16(wh));
      acc[3] = vmlal_high_s16(acc[3], xh, wh);
    }
    store_bytes(out + c0,
                requantized16_neon(acc, job.bias + c0, job.multiplier + c0, lanes, p.y_zero, p.y_min, p.y_max),
                lanes);
  }
}
#endif

// Output channels [k0, k0 + 16 * J) of R pixels.
template <int R, int J>
void tile(const Tile& t) {
#if defined(HEXIR_QCONV_X86)
  if (isa_avx512_vnni()) return tile_vnni<R, J>(t);
  if (isa_avx2()) {
    // At most 4 pixels a pass (dense_task's AVX2 tiles are 4 high): 6 (12
    // accumulators) left GCC too few of the 16 registers, and it kept half
    // of them on the stack.
    constexpr int kFirst = R > 4 ? 4 : R;
    tile_avx2<kFirst>(t);
    if constexpr (R > 4) {
      Tile rest = t;
      rest.rows += 4;
      rest.out += 4;
      tile_avx2<R - 4>(rest);
    }
    return;
  }
#endif
#if defined(__aarch64__)
  if (isa_neon()) {
    if constexpr (R <= 4) return tile_neon<R>(t);  // dense_task's NEON tiles are 4 pixels high
  }
#endif
  tile_portable<R>(t);
}

template <int R>
void tile_channels(const Tile& t, int units) {
  switch (units) {
    case 1: return tile<R, 1>(t);
    case 2: return tile<R, 2>(t);
    case 3: return tile<R, 3>(t);
    default: return tile<R, 4>(t);
  }
}

void run_rows(const Tile& base, int rows, int units) {
  switch (rows) {
    case 1: return tile_channels<1>(base, units);
    case 2: return tile_channels<2>(base, units);
    case 3: return tile_channels<3>(base, units);
    case 4: return tile_channels<4>(base, units);
    case 5: return tile_channels<5>(base, units);
    default: return tile_channels<6>(base, units);
  }
}

// Pixel `pixel` (flattened n, oy, ox) of group g gathered into dst: depth bytes.
void gather_row(const QuantizedConv2dPlan& p, const uint8_t* x, int64_t g, int64_t pixel, uint8_t* dst) {
  const int64_t ox = pixel % p.ow, oy = pixel / p.ow % p.oh, n = pixel / (p.ow * p.oh);
  const int64_t cg = p.c_per_group;
  uint8_t* d = dst;
  const int64_t ix0 = ox * p.stride_w - p.pad_left;
  // One group and a row of taps inside the input: the row's channels lie side by side in x.
  const bool whole_rows = p.groups == 1 && p.dilation_w == 1 && ix0 >= 0 && ix0 + p.kw <= p.w;
  for (int64_t ky = 0; ky < p.kh; ++ky) {
    const uint8_t* first = ops::quantized_conv2d_tap(p, x, n, oy, ox, ky, 0);
    if (whole_rows && first) {
      std::memcpy(d, first, static_cast<size_t>(p.kw * cg));
      d += p.kw * cg;
      continue;
    }
    for (int64_t kx = 0; kx < p.kw; ++kx, d += cg) {
      const uint8_t* tap = ops::quantized_conv2d_tap(p, x, n, oy, ox, ky, kx);
      if (tap)
        std::memcpy(d, tap + g * cg, static_cast<size_t>(cg));
      else
        std::memset(d, p.x_zero, static_cast<size_t>(cg));
    }
  }
  std::memset(d, 0, static_cast<size_t>(dst + p.depth - d));
}

#if defined(HEXIR_QCONV_X86)
// n (a multiple of 4) bytes to int16.
[[gnu::target("avx2")]] void widen_row(const uint8_t* src, int64_t n, int16_t* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = src[i];
}
#else
void widen_row(const uint8_t* src, int64_t n, int16_t* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}
#endif

void dense_task(void* context, int64_t task, int participant) {
  const QConvJob& job = *static_cast<const QConvJob*>(context);
  const QuantizedConv2dPlan& p = *job.p;
  const int64_t part = task % job.channel_parts;
  task /= job.channel_parts;
  const int64_t g = task / job.blocks, first = task % job.blocks * job.block;
  const int64_t pixels = std::min(job.block, p.n * p.oh * p.ow - first);
  alignas(64) uint8_t stack[kStackScratch];
  uint8_t* scratch = stack;
  if ((!job.direct || job.int16_rows) && job.pool && job.pool->scratch(participant))
    scratch = reinterpret_cast<uint8_t*>(job.pool->scratch(participant));
  // int16 rows: the block's rows first, then one gathered u8 row.
  auto* rows16 = reinterpret_cast<int16_t*>(scratch);
  uint8_t* gathered = job.int16_rows ? scratch + job.block * p.depth * 2 : nullptr;
  const uint8_t* rows[kMaxBlock];
  uint8_t* out[kMaxBlock];
  for (int64_t i = 0; i < pixels; ++i) {
    const int64_t pixel = first + i;
    const uint8_t* row;
    if (job.direct && p.stride_h == 1 && p.stride_w == 1) {
      row = job.x + pixel * p.c;  // output pixel i reads input pixel i (no divisions: a shallow layer's pixels are many)
    } else if (job.direct) {
      const int64_t ox = pixel % p.ow, oy = pixel / p.ow % p.oh, n = pixel / (p.ow * p.oh);
      row = job.x + ((n * p.h + oy * p.stride_h) * p.w + ox * p.stride_w) * p.c;
    } else {
      uint8_t* into = job.int16_rows ? gathered : scratch + i * p.depth;
      gather_row(p, job.x, g, pixel, into);
      row = into;
    }
    if (job.int16_rows) {
      widen_row(row, p.depth, rows16 + i * p.depth);
      row = reinterpret_cast<const uint8_t*>(rows16 + i * p.depth);
    }
    rows[i] = row;
    out[i] = job.y + pixel * p.k + g * p.k_per_group;
  }
  const int64_t kg = p.k_per_group;
  const int64_t block = p.depth / 4 * 64;  // bytes per block of 16 channels
  const int8_t* wg = job.w + g * ((kg + 15) / 16) * block;
  const int64_t k_first = part * job.channels_per_part, k_end = std::min(kg, k_first + job.channels_per_part);
  for (int64_t k0 = k_first; k0 < k_end; k0 += 64) {
    const int64_t valid = std::min<int64_t>(64, k_end - k0);
    const int units = static_cast<int>((valid + 15) / 16);
    uint8_t* tile_out[kTileRows];
    for (int64_t i = 0; i < pixels; i += job.tile_rows) {
      const int rows_here = static_cast<int>(std::min<int64_t>(job.tile_rows, pixels - i));
      for (int r = 0; r < rows_here; ++r) tile_out[r] = out[i + r] + k0;
      const int64_t bias_at = g * kg + k0;
      const Tile t{rows + i, wg + k0 / 16 * block, p.depth / 4, block, job.bias + bias_at, job.multiplier + bias_at,
                   tile_out, valid,  p.y_zero,  p.y_min, p.y_max};
      run_rows(t, rows_here, units);
    }
  }
}

// Depthwise: one output row (n, oy) per task.
// Depthwise output pixel (n, oy, ox) without intrinsics: the taps found
// once, then 16 channels at a time over the taps in int32 (loops the
// compiler vectorizes: NEON's widening multiply-adds on aarch64); a tap
// outside the input adds x_zero times its weights. Per channel through
// the reference sum, each tap's geometry was found again for every channel.
void depthwise_pixel_portable(const QConvJob& job, int64_t n, int64_t oy, int64_t ox, uint8_t* out) {
  const QuantizedConv2dPlan& p = *job.p;
  const int64_t taps = p.kh * p.kw;
  const uint8_t* tap[kMaxDepthwiseTaps];
  depthwise_taps(p, job.x, n, oy, ox, tap);
  for (int64_t c0 = 0; c0 < p.c; c0 += 16) {
    const int64_t lanes = std::min<int64_t>(16, p.c - c0);
    int32_t sum[16] = {};
    for (int64_t i = 0; i < taps; ++i) {
      const int8_t* w = job.w + i * p.c + c0;
      if (const uint8_t* x = tap[i]) {
        x += c0;
        for (int64_t c = 0; c < lanes; ++c) sum[c] += static_cast<int32_t>(x[c]) * w[c];
      } else {
        for (int64_t c = 0; c < lanes; ++c) sum[c] += p.x_zero * w[c];
      }
    }
    for (int64_t c = 0; c < lanes; ++c)
      out[c0 + c] = ops::requantize_of(sum[c], job.bias[c0 + c], job.multiplier[c0 + c], p.y_zero, p.y_min, p.y_max);
  }
}

void depthwise_task(void* context, int64_t task, int) {
  const QConvJob& job = *static_cast<const QConvJob*>(context);
  const QuantizedConv2dPlan& p = *job.p;
  const int64_t n = task / p.oh, oy = task % p.oh;
  // The pixels whose 3x3 window lies inside the input, when the row's does: one pass per channel block.
  int64_t inside_begin = 0, inside_end = 0;
#if defined(HEXIR_QCONV_X86)
  const int64_t iy0 = oy * p.stride_h - p.pad_top;
  if (p.kh == 3 && p.kw == 3 && isa_avx512_bw_vl() && iy0 >= 0 && iy0 + 2 * p.dilation_h < p.h) {
    inside_begin = std::min(p.ow, (p.pad_left + p.stride_w - 1) / p.stride_w);
    // ox * stride - pad + 2 * dilation < w
    const int64_t last = p.w - 1 - 2 * p.dilation_w + p.pad_left;
    inside_end = last < 0 ? inside_begin : std::clamp<int64_t>(last / p.stride_w + 1, inside_begin, p.ow);
    if (inside_end > inside_begin) depthwise3x3_row_avx512(job, n, oy, inside_begin, inside_end);
  }
#endif
  for (int64_t ox = 0; ox < p.ow; ++ox) {
    if (ox == inside_begin && inside_end > inside_begin) {
      ox = inside_end - 1;
      continue;
    }
    uint8_t* out = job.y + ((n * p.oh + oy) * p.ow + ox) * p.k;
#if defined(HEXIR_QCONV_X86)
    const uint8_t* taps[kMaxDepthwiseTaps];
    if (depthwise_taps(p, job.x, n, oy, ox, taps)) {
      if (isa_avx512_bw_vl()) {
        depthwise_pixel_avx512(job, taps, out);
        continue;
      }
    }
#endif
    if (p.kh * p.kw <= kMaxDepthwiseTaps) {
#if defined(__aarch64__)
      if (isa_neon()) {
        depthwise_pixel_neon(job, n, oy, ox, out);
        continue;
      }
#endif
      depthwise_pixel_portable(job, n, oy, ox, out);
      continue;
    }
    for (int64_t c = 0; c < p.c; ++c)
      out[c] = ops::requantize_of(ops::quantized_conv2d_sum(p, job.x, job.w, n, oy, ox, c), job.bias[c],
                                  job.multiplier[c], p.y_zero, p.y_min, p.y_max);
  }
}

}  // namespace

Status quantized_conv2d(const KernelContext& context, const Dispatch& d) {
  const QuantizedConv2dPlan& p = plan_of<QuantizedConv2dPlan>(d);
  if (p.n == 0 || p.oh == 0 || p.ow == 0 || p.k == 0) return ok_status();
  QConvJob job{&p, input<uint8_t>(d, 0), input<int8_t>(d, 1), input<int32_t>(d, 2), input<float>(d, 3),
               output<uint8_t>(d, 0), pool_of(context), false, 0, 0};
  if (p.depthwise) {
#if defined(HEXIR_QCONV_X86)
    if (p.kh * p.kw <= kMaxDepthwiseTaps) {
      // VNNI past 64 channels (below, half a block or more would be padding:
      // the per-channel form was 1.3x faster on 32 channels at 112 x 112).
      if (isa_avx512_vnni() && p.c >= 64 && depthwise_vnni_layout(p).bytes <= kDepthwiseVnniBytes)
        job.depthwise_rows = depthwise_rows_vnni;
      else if (!isa_avx512_bw_vl() && isa_avx2())
        job.depthwise_rows = depthwise_rows_avx2;
    }
    if (job.depthwise_rows) {
      // Tasks of several rows: each prepares the weights once.
      const int threads = job.pool ? job.pool->size() : 1;
      const int64_t rows = p.n * p.oh, tasks = std::min<int64_t>(rows, threads > 1 ? 4 * threads : 1);
      job.block = (rows + tasks - 1) / tasks;
      parallel_for_participants(
          context, (rows + job.block - 1) / job.block,
          [](void* context, int64_t task, int) {
            const QConvJob& j = *static_cast<const QConvJob*>(context);
            const int64_t rows = j.p->n * j.p->oh;
            j.depthwise_rows(j, task * j.block, std::min(rows, (task + 1) * j.block));
          },
          &job);
      return ok_status();
    }
#endif
    parallel_for_participants(context, p.n * p.oh, depthwise_task, &job);
    return ok_status();
  }
  job.direct = p.kh == 1 && p.kw == 1 && p.pad_top == 0 && p.pad_left == 0 && p.groups == 1 && p.c % 4 == 0;
  const int64_t scratch = job.pool && job.pool->scratch(0) ? kScratchFloatsPerParticipant * 4 : kStackScratch;
#if defined(HEXIR_QCONV_X86)
  if (!isa_avx512_vnni() && isa_avx2()) {
    job.int16_rows = true;
    job.tile_rows = 4;
  }
#elif defined(__aarch64__)
  if (isa_neon()) job.tile_rows = 4;  // 16 accumulators, 8 widened weight vectors, 4 pixels' steps: 28 of 32 registers
#endif
  // int16 rows: the block's, 2 bytes a value, and one gathered row.
  job.block = job.direct && !job.int16_rows ? kMaxBlock
              : job.int16_rows              ? std::min<int64_t>(kMaxBlock, (scratch - p.depth) / (2 * p.depth))
                                            : std::min<int64_t>(kMaxBlock, scratch / p.depth);
  if (job.block < 1) {  // a window deeper than the scratch: one element at a time
    const int64_t total = p.n * p.oh * p.ow;
    parallel_ranges(context, total, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        for (int64_t k = 0; k < p.k; ++k)
          job.y[i * p.k + k] = ops::requantize_of(
              ops::quantized_conv2d_sum(p, job.x, job.w, i / (p.oh * p.ow), i / p.ow % p.oh, i % p.ow, k),
              job.bias[k], job.multiplier[k], p.y_zero, p.y_min, p.y_max);
    });
    return ok_status();
  }
  job.blocks = (p.n * p.oh * p.ow + job.block - 1) / job.block;
  const int threads = job.pool ? job.pool->size() : 1;
  const int64_t chunks = (p.k_per_group + 63) / 64;
  // (Each part gathers its rows again: none at one thread, about two tasks per thread past it.)
  const int64_t wanted = threads > 1 ? 2 * threads : 1;
  job.channel_parts = std::clamp<int64_t>(wanted / std::max<int64_t>(1, job.blocks * p.groups), 1, chunks);
  job.channels_per_part = (chunks + job.channel_parts - 1) / job.channel_parts * 64;
  job.channel_parts = (p.k_per_group + job.channels_per_part - 1) / job.channels_per_part;
  parallel_for_participants(context, job.blocks * p.groups * job.channel_parts, dense_task, &job);
  return ok_status();
}

}  // namespace hexir::hal::cpu::internal
