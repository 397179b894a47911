// conv2d in channels-last order: x [n, h, w, c], out [n, oh, ow, k], weights
// [k, c / groups, kh, kw] as in NCHW (docs/layout.md: the compiler chooses it).
//
// Dense and grouped: per output row (a task) and strip of NR output channels,
// the GEMM's register tile runs once per (tap, block of input channels) over
// the row's pixels whose tap lies inside the input, reading the input in
// place (a tap's pixels are stride_w * c floats apart: no patch matrix, no
// packing of activations) against that tap's weights as a strip, prepared
// once at Program::prepare (or packed per row when not prepared). Depthwise:
// blocks of 16 channels in vectors of the widest ISA (lanes.h), 8 interior
// pixels at a time, taps in (ky, kx) order. Both keep ops::conv2d_channels_last_element's order of sums.
#include <algorithm>
#include <cstring>

#include "kernel_util.h"
#include "lanes.h"
#include "thread_pool.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HEXIR_CL_X86 1
#endif

namespace hexir::hal::cpu::internal {
namespace {

using ops::Conv2dPlan;
using ops::kConvChannelBlock;

constexpr int64_t kMaxStrip = 32;  // the widest strip of any GEMM path (AVX-512: two zmm)
// Below this many multiply-adds a conv2d runs on the calling thread.
constexpr int64_t kSerialMacs = 1 << 17;

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The output columns [*lo, *hi) whose tap column kx reads inside the input.
void tap_columns(const Conv2dPlan& p, int64_t kx, int64_t* lo, int64_t* hi) {
  const int64_t offset = kx * p.dilation_w - p.pad_left;  // ix = ox * stride_w + offset
  *lo = std::max<int64_t>(0, -floor_div(offset, p.stride_w));
  *hi = std::min(p.ow, floor_div(p.w - 1 - offset, p.stride_w) + 1);
  *hi = std::max(*hi, *lo);
}

int64_t strips_of(const Conv2dPlan& p, int64_t nr) { return (p.k_per_group + nr - 1) / nr; }

// Rows [c0, c0 + kc) of strip s of tap t of group g: kc rows of `nr` floats,
// output channel g * k_per_group + s * nr + j in column j, zero past the group.
void pack_tap_strip(const Conv2dPlan& p, const float* w, int64_t g, int64_t t, int64_t s, int64_t nr, int64_t c0,
                    int64_t kc, float* out) {
  const int64_t taps = p.kh * p.kw, cg = p.c_per_group;
  const int64_t k0 = g * p.k_per_group + s * nr, width = std::min(nr, p.k_per_group - s * nr);
  for (int64_t ci = 0; ci < kc; ++ci) {
    float* row = out + ci * nr;
    for (int64_t j = 0; j < width; ++j) row[j] = w[((k0 + j) * cg + c0 + ci) * taps + t];
    for (int64_t j = width; j < nr; ++j) row[j] = 0.0f;
  }
}

struct DenseJob {
  const Conv2dPlan* p;
  const float *x, *w, *bias, *residual;
  const float* prepared;  // [g][t][s][c / groups][nr], or null: packed per task
  float* out;
  GemmTile tile;
  int64_t strips;
};

// One task: output row oy of image n, group g, every strip of the group
// (a task owns whole pixels of the output: no cache line is written by two).
void dense_task(void* context, int64_t task) {
  const DenseJob& job = *static_cast<const DenseJob*>(context);
  const Conv2dPlan& p = *job.p;
  const int64_t nr = job.tile.nr_max, taps = p.kh * p.kw, cg = p.c_per_group;
  const int64_t g = task % p.groups, oy = task / p.groups % p.oh, n = task / p.groups / p.oh;
  float* const row_out = job.out + (n * p.oh + oy) * p.ow * p.k + g * p.k_per_group;
  const int64_t ldc = p.k;
  for (int64_t ox = 0; ox < p.ow; ++ox)
    std::memset(row_out + ox * ldc, 0, static_cast<size_t>(p.k_per_group) * sizeof(float));
  alignas(64) float strip[kConvChannelBlock * kMaxStrip];
  const int64_t lda = p.stride_w * p.c;
  for (int64_t ky = 0; ky < p.kh; ++ky) {
    const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
    if (iy < 0 || iy >= p.h) continue;
    const float* row = job.x + (n * p.h + iy) * p.w * p.c + g * cg;
    for (int64_t kx = 0; kx < p.kw; ++kx) {
      int64_t lo, hi;
      tap_columns(p, kx, &lo, &hi);
      if (lo == hi) continue;
      const int64_t t = ky * p.kw + kx;
      const float* a0 = row + (lo * p.stride_w + kx * p.dilation_w - p.pad_left) * p.c;
      for (int64_t s = 0; s < job.strips; ++s) {
        const int64_t col0 = s * nr, width = std::min(nr, p.k_per_group - col0);
        float* const c = row_out + col0;
        const float* b_tap = job.prepared ? job.prepared + ((g * taps + t) * job.strips + s) * cg * nr : nullptr;
        for (int64_t c0 = 0; c0 < cg; c0 += kConvChannelBlock) {
          const int64_t kc = std::min(kConvChannelBlock, cg - c0);
          const float* b = b_tap ? b_tap + c0 * nr : strip;
          if (!b_tap) pack_tap_strip(p, job.w, g, t, s, nr, c0, kc, strip);
          for (int64_t ox = lo; ox < hi; ox += job.tile.mr_max) {
            const int64_t mr = std::min(job.tile.mr_max, hi - ox);
            job.tile.run(mr, width, kc, a0 + (ox - lo) * lda + c0, lda, false, b, nr, c + ox * ldc, ldc, true, nullptr);
          }
        }
      }
    }
  }
  const float* bias = job.bias ? job.bias + g * p.k_per_group : nullptr;
  if (bias)
    for (int64_t ox = 0; ox < p.ow; ++ox)
      for (int64_t j = 0; j < p.k_per_group; ++j) row_out[ox * ldc + j] += bias[j];
  if (job.residual)
    add_residual(row_out, ldc, job.residual + (row_out - job.out), ldc, p.ow, p.k_per_group);
  if (p.epilogue.activation != 0) apply_epilogue(p.epilogue, row_out, ldc, p.ow, p.k_per_group);
}

// ---- depthwise ----------------------------------------------------------------

constexpr int64_t kDwLanes = 16;
constexpr int64_t kDwMaxTaps = 1024;  // taps of a kernel whose weights go on the stack, per 16 channels

struct DepthwiseJob {
  const Conv2dPlan* p;
  const float *x, *w, *bias, *residual;
  float* out;
};

// Output pixel (oy, ox) of image n over channels [c0, c0 + lanes): the taps
// inside the input in (ky, kx) order, each product rounded then added (the
// element function's one-channel partial sums).
void depthwise_pixel_scalar(const DepthwiseJob& job, int64_t n, int64_t oy, int64_t ox, int64_t c0, int64_t lanes,
                            const float* taps_w) {
  const Conv2dPlan& p = *job.p;
  float acc[kDwLanes] = {};
  for (int64_t ky = 0; ky < p.kh; ++ky) {
    const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
    if (iy < 0 || iy >= p.h) continue;
    for (int64_t kx = 0; kx < p.kw; ++kx) {
      const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
      if (ix < 0 || ix >= p.w) continue;
      const float* in = job.x + ((n * p.h + iy) * p.w + ix) * p.c + c0;
      const float* wt = taps_w + (ky * p.kw + kx) * kDwLanes;
      for (int64_t j = 0; j < lanes; ++j) acc[j] += in[j] * wt[j];
    }
  }
  float* o = job.out + ((n * p.oh + oy) * p.ow + ox) * p.k + c0;
  for (int64_t j = 0; j < lanes; ++j) o[j] = job.bias ? acc[j] + job.bias[c0 + j] : acc[j];
}

// A row of output pixels over channels [c0, c0 + lanes) (lanes a multiple
// of N), vectors of N channels; interior pixels kDwPixels at a time (each sum
// is a chain of adds: one pixel at a time waits on the add's latency), taps in
// (ky, kx) order, each product rounded then added: depthwise_pixel_scalar's
// steps, the same bits on every ISA.
constexpr int64_t kDwPixels = 8;
struct DepthwiseRow {
  template <int N>
  static HEXIR_LANES void run(const DepthwiseJob* job_ptr, int64_t n, int64_t oy, int64_t c0, int64_t lanes,
                              const float* taps_w) {
    using V = lanes::F32<N>;
    const DepthwiseJob& job = *job_ptr;
    const Conv2dPlan& p = *job.p;
    // Output columns whose every tap lies inside the input: [inner_lo, inner_hi).
    int64_t inner_lo = 0, inner_hi = p.ow, lo, hi;
    for (int64_t kx = 0; kx < p.kw; ++kx) {
      tap_columns(p, kx, &lo, &hi);
      inner_lo = std::max(inner_lo, lo);
      inner_hi = std::min(inner_hi, hi);
    }
    const int64_t pixel = p.stride_w * p.c;
    for (int64_t v0 = 0; v0 < lanes; v0 += N) {
      float* o = job.out + (n * p.oh + oy) * p.ow * p.k + c0 + v0;
      const float* image = job.x + n * p.h * p.w * p.c + c0 + v0;
      const float* w = taps_w + v0;
      // The bias after the whole sum, as the element function adds it.
      const V bias = job.bias ? lanes::load<N>(job.bias + c0 + v0) : V{};
      for (int64_t ox = 0; ox < p.ow;) {
        if (ox >= inner_lo && ox + kDwPixels <= inner_hi) {
          V acc[kDwPixels] = {};
          for (int64_t ky = 0; ky < p.kh; ++ky) {
            const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
            if (iy < 0 || iy >= p.h) continue;
            const float* in = image + (iy * p.w + ox * p.stride_w - p.pad_left) * p.c;
            for (int64_t kx = 0; kx < p.kw; ++kx) {
              const V wv = lanes::load<N>(w + (ky * p.kw + kx) * kDwLanes);
              const float* tap = in + kx * p.dilation_w * p.c;
#pragma GCC unroll 8
              for (int64_t i = 0; i < kDwPixels; ++i) acc[i] += lanes::load<N>(tap + i * pixel) * wv;
            }
          }
#pragma GCC unroll 8
          for (int64_t i = 0; i < kDwPixels; ++i) lanes::store<N>(o + (ox + i) * p.k, job.bias ? acc[i] + bias : acc[i]);
          ox += kDwPixels;
          continue;
        }
        V acc = {};
        for (int64_t ky = 0; ky < p.kh; ++ky) {
          const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
          if (iy < 0 || iy >= p.h) continue;
          const float* in_row = image + iy * p.w * p.c;
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
            if (ix < 0 || ix >= p.w) continue;
            acc += lanes::load<N>(in_row + ix * p.c) * lanes::load<N>(w + (ky * p.kw + kx) * kDwLanes);
          }
        }
        lanes::store<N>(o + ox * p.k, job.bias ? acc + bias : acc);
        ++ox;
      }
    }
  }
};

// One task: output row oy of image n, all channels.
void depthwise_task(void* context, int64_t task) {
  const DepthwiseJob& job = *static_cast<const DepthwiseJob*>(context);
  const Conv2dPlan& p = *job.p;
  const int64_t oy = task % p.oh, n = task / p.oh, taps = p.kh * p.kw;
  alignas(64) float taps_w[kDwMaxTaps * kDwLanes];
  const int64_t lanes_per_vector = widest<LaneCount>();
  for (int64_t c0 = 0; c0 < p.c; c0 += kDwLanes) {
    const int64_t lanes = std::min(kDwLanes, p.c - c0);
    for (int64_t t = 0; t < taps; ++t)  // this block's weights, tap-major
      for (int64_t j = 0; j < kDwLanes; ++j) taps_w[t * kDwLanes + j] = j < lanes ? job.w[(c0 + j) * taps + t] : 0.0f;
    // Whole vectors of the widest ISA's lanes in vector registers, a block's
    // last channels (fewer than a vector) one pixel at a time.
    const int64_t vector_lanes = lanes / lanes_per_vector * lanes_per_vector;
    if (vector_lanes > 0) widest<DepthwiseRow>(&job, n, oy, c0, vector_lanes, taps_w);
    if (vector_lanes < lanes)
      for (int64_t ox = 0; ox < p.ow; ++ox)
        depthwise_pixel_scalar(job, n, oy, ox, c0 + vector_lanes, lanes - vector_lanes, taps_w + vector_lanes);
  }
  float* row = job.out + (n * p.oh + oy) * p.ow * p.k;
  if (job.residual) add_residual(row, 0, job.residual + (row - job.out), 0, 1, p.ow * p.k);
  if (p.epilogue.activation != 0) apply_epilogue(p.epilogue, row, 0, 1, p.ow * p.k);
}

// Depthwise kernels too large for the stack's weight block: each element
// from the plan's own order.
void depthwise_element_task(void* context, int64_t task) {
  const DepthwiseJob& job = *static_cast<const DepthwiseJob*>(context);
  const Conv2dPlan& p = *job.p;
  const int64_t oy = task % p.oh, n = task / p.oh;
  float* row = job.out + (n * p.oh + oy) * p.ow * p.k;
  for (int64_t ox = 0; ox < p.ow; ++ox)
    for (int64_t ch = 0; ch < p.k; ++ch) {
      float v = ops::conv2d_channels_last_element(p, job.x + n * p.h * p.w * p.c, job.w, ch, oy, ox);
      if (job.bias) v += job.bias[ch];
      row[ox * p.k + ch] = v;
    }
  if (job.residual) add_residual(row, 0, job.residual + (row - job.out), 0, 1, p.ow * p.k);
  if (p.epilogue.activation != 0) apply_epilogue(p.epilogue, row, 0, 1, p.ow * p.k);
}

// ---- small groups ----------------------------------------------------------
//
// A grouped convolution of narrow groups (regnet's 8 channels in, 8 out; the
// GEMM tile ran 8 of its 32 columns, 8 deep, per call: 14 GFLOP/s) computed
// across the output channels: per output pixel, a vector of 16 (AVX-512) or
// 8 (AVX2) output channels; for each tap inside the input the pixel's input
// channels of the same lanes are loaded once, and input channel ci of each
// lane's group is spread to the group's lanes by a permute, times the tap's
// weights [t][ci][k] (prepared). Per tap a partial sum from 0 in channel
// order, added to the running sum, then the bias: the order of
// ops::conv2d_channels_last_element (fmaf), so the bits of the dense path.
// Groups of 2, 4, 8 or 16 channels in and as many out (16 lanes only on AVX-512).
bool small_groups(const Conv2dPlan& p, int64_t lanes) {
  const int64_t cg = p.c_per_group;
  return p.groups > 1 && cg == p.k_per_group && cg >= 2 && cg <= lanes && lanes % cg == 0 &&
         p.kh * p.kw <= 49;
}
int64_t vector_lanes() {
#ifdef HEXIR_CL_X86
  if (isa_avx512()) return 16;
  if (isa_avx2()) return 8;
#endif
  return 0;
}

struct SmallGroupJob {
  const Conv2dPlan* p;
  const float *x, *w, *bias, *residual;  // w: prepared [t][ci][k]
  float* out;
};

#ifdef HEXIR_CL_X86
// The ISA's vector of floats for small_group_block: loads (all lanes, or
// those under the mask), the group spread, fma, add, store.
struct Avx512 {
  using V = __m512;
  using I = __m512i;
  using Mask = __mmask16;
  static constexpr int64_t kLanes = 16;
  [[gnu::target("avx512f"), gnu::always_inline]] static inline V zero() { return _mm512_setzero_ps(); }
  [[gnu::target("avx512f"), gnu::always_inline]] static inline V load(const float* at, Mask m) { return _mm512_maskz_loadu_ps(m, at); }
  [[gnu::target("avx512f"), gnu::always_inline]] static inline V spread(V x, I idx) { return _mm512_maskz_permutexvar_ps(0xffff, idx, x); }
  [[gnu::target("avx512f"), gnu::always_inline]] static inline V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  [[gnu::target("avx512f"), gnu::always_inline]] static inline V add(V a, V b) { return _mm512_add_ps(a, b); }
  [[gnu::target("avx512f"), gnu::always_inline]] static inline void store(float* at, Mask m, V v) { _mm512_mask_storeu_ps(at, m, v); }
  [[gnu::target("avx512f"), gnu::always_inline]] static inline Mask mask(int64_t n) {
    return n >= 16 ? Mask(0xffff) : Mask((1u << n) - 1);
  }
  [[gnu::target("avx512f"), gnu::always_inline]] static inline I index(const int32_t* idx) { return _mm512_loadu_si512(idx); }
};
struct Avx2 {
  using V = __m256;
  using I = __m256i;
  struct Mask {
    __m256i bits;
    bool all;
  };
  static constexpr int64_t kLanes = 8;
  [[gnu::target("avx2"), gnu::always_inline]] static inline V zero() { return _mm256_setzero_ps(); }
  [[gnu::target("avx2"), gnu::always_inline]] static inline V load(const float* at, Mask m) {
    return m.all ? _mm256_loadu_ps(at) : _mm256_maskload_ps(at, m.bits);
  }
  [[gnu::target("avx2"), gnu::always_inline]] static inline V spread(V x, I idx) { return _mm256_permutevar8x32_ps(x, idx); }
  [[gnu::target("avx2,fma"), gnu::always_inline]] static inline V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  [[gnu::target("avx2"), gnu::always_inline]] static inline V add(V a, V b) { return _mm256_add_ps(a, b); }
  [[gnu::target("avx2"), gnu::always_inline]] static inline void store(float* at, Mask m, V v) {
    if (m.all)
      _mm256_storeu_ps(at, v);
    else
      _mm256_maskstore_ps(at, m.bits, v);
  }
  [[gnu::target("avx2"), gnu::always_inline]] static inline Mask mask(int64_t n) {
    return {_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(n, 8))),
                               _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
            n >= 8};
  }
  [[gnu::target("avx2"), gnu::always_inline]] static inline I index(const int32_t* idx) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx));
  }
};

// The block and row functions once per ISA (a template cannot choose its
// target): NAME_block and NAME_row compiled for TARGET.
// P pixels from ox (P > 1: all their taps inside along x), the lanes of
// output channels [v, v + kLanes) under `m`: P independent chains of sums,
// the tap's weights loaded once for all P.
// One output row: pixels whose taps all lie inside along x 4 at a time, the others one by one.
// ox * stride_w - pad_left >= 0 and its last tap <= w - 1.
#define HEXIR_SMALL_GROUP_FUNCTIONS(NAME, TARGET) \
template <typename S, int P> \
[[gnu::target(TARGET)]] inline void NAME##_block(const SmallGroupJob& job, const float* image, int64_t oy, \
                                                          int64_t ox, int64_t v, typename S::Mask m, \
                                                          const typename S::I* spread, float* row_out) { \
  const Conv2dPlan& p = *job.p; \
  const int64_t cg = p.c_per_group, k = p.k; \
  typename S::V acc[P]; \
  for (int j = 0; j < P; ++j) acc[j] = S::zero(); \
  for (int64_t ky = 0; ky < p.kh; ++ky) { \
    const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h; \
    if (iy < 0 || iy >= p.h) continue; \
    for (int64_t kx = 0; kx < p.kw; ++kx) { \
      const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w; \
      if (P == 1 && (ix < 0 || ix >= p.w)) continue; \
      const float* at = image + (iy * p.w + ix) * p.c + v; \
      typename S::V x[P], partial[P]; \
      for (int j = 0; j < P; ++j) x[j] = S::load(at + j * p.stride_w * p.c, m), partial[j] = S::zero(); \
      const float* w = job.w + (ky * p.kw + kx) * cg * k + v; \
      for (int64_t ci = 0; ci < cg; ++ci) { \
        const typename S::V wv = S::load(w + ci * k, m); \
        for (int j = 0; j < P; ++j) partial[j] = S::fma(S::spread(x[j], spread[ci]), wv, partial[j]); \
      } \
      for (int j = 0; j < P; ++j) acc[j] = S::add(acc[j], partial[j]); \
    } \
  } \
  const typename S::V bias = job.bias ? S::load(job.bias + v, m) : S::zero(); \
  for (int j = 0; j < P; ++j) S::store(row_out + (ox + j) * k + v, m, job.bias ? S::add(acc[j], bias) : acc[j]); \
} \
 \
template <typename S> \
[[gnu::target(TARGET)]] void NAME##_row(void* context, int64_t task) { \
  const SmallGroupJob& job = *static_cast<const SmallGroupJob*>(context); \
  const Conv2dPlan& p = *job.p; \
  const int64_t oy = task % p.oh, n = task / p.oh, cg = p.c_per_group, k = p.k; \
  typename S::I spread[S::kLanes]; \
  for (int64_t ci = 0; ci < cg; ++ci) { \
    int32_t idx[S::kLanes]; \
    for (int l = 0; l < S::kLanes; ++l) idx[l] = static_cast<int32_t>((l & ~(cg - 1)) + ci); \
    spread[ci] = S::index(idx); \
  } \
  const int64_t inside0 = std::min(p.ow, (p.pad_left + p.stride_w - 1) / p.stride_w); \
  const int64_t last = p.w - 1 - (p.kw - 1) * p.dilation_w + p.pad_left; \
  const int64_t inside1 = last < 0 ? inside0 : std::clamp(last / p.stride_w + 1, inside0, p.ow); \
  float* row_out = job.out + (n * p.oh + oy) * p.ow * k; \
  const float* image = job.x + n * p.h * p.w * p.c; \
  for (int64_t v = 0; v < k; v += S::kLanes) { \
    const typename S::Mask m = S::mask(k - v); \
    int64_t ox = 0; \
    for (; ox < inside0; ++ox) NAME##_block<S, 1>(job, image, oy, ox, v, m, spread, row_out); \
    for (; ox + 4 <= inside1; ox += 4) NAME##_block<S, 4>(job, image, oy, ox, v, m, spread, row_out); \
    for (; ox < p.ow; ++ox) NAME##_block<S, 1>(job, image, oy, ox, v, m, spread, row_out); \
  } \
  if (job.residual) add_residual(row_out, k, job.residual + (row_out - job.out), k, p.ow, k); \
  if (p.epilogue.activation != 0) apply_epilogue(p.epilogue, row_out, k, p.ow, k); \
} \

HEXIR_SMALL_GROUP_FUNCTIONS(small_group_avx512, "avx512f,avx2,fma")
HEXIR_SMALL_GROUP_FUNCTIONS(small_group_avx2, "avx2,fma")
#undef HEXIR_SMALL_GROUP_FUNCTIONS
#endif

// The pool for work of `macs` multiply-adds: none (the caller alone) when small.
KernelContext split_for(const KernelContext& context, int64_t macs) {
  return macs < kSerialMacs ? KernelContext{} : context;
}

}  // namespace

uint64_t conv2d_channels_last_prepared_bytes(const Dispatch& d) {
  const Conv2dPlan& p = plan_of<Conv2dPlan>(d);
  if (d.operands[1] == nullptr || ops::conv2d_is_depthwise(p) || p.k_per_group == 0) return 0;
  if (small_groups(p, vector_lanes())) return static_cast<uint64_t>(p.kh * p.kw * p.c_per_group * p.k) * sizeof(float);
  const int64_t nr = gemm_tile().nr_max;
  return static_cast<uint64_t>(p.groups * p.kh * p.kw * strips_of(p, nr) * p.c_per_group * nr) * sizeof(float);
}

void conv2d_channels_last_prepare(const Dispatch& d, void* out) {
  const Conv2dPlan& p = plan_of<Conv2dPlan>(d);
  if (small_groups(p, vector_lanes())) {  // [t][ci][k]: tap t's weight from input channel ci of k's group to k
    const int64_t taps = p.kh * p.kw, cg = p.c_per_group;
    const float* w = input(d, 1);
    float* dst = static_cast<float*>(out);
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t ci = 0; ci < cg; ++ci)
        for (int64_t o = 0; o < p.k; ++o) dst[(t * cg + ci) * p.k + o] = w[(o * cg + ci) * taps + t];
    return;
  }
  const int64_t nr = gemm_tile().nr_max, strips = strips_of(p, nr), taps = p.kh * p.kw;
  float* dst = static_cast<float*>(out);
  for (int64_t g = 0; g < p.groups; ++g)
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t s = 0; s < strips; ++s) {
        pack_tap_strip(p, input(d, 1), g, t, s, nr, 0, p.c_per_group, dst);
        dst += p.c_per_group * nr;
      }
}

Status conv2d_channels_last(const KernelContext& context, const Dispatch& d) {
  const Conv2dPlan& p = plan_of<Conv2dPlan>(d);
  if (p.n == 0 || p.oh == 0 || p.ow == 0 || p.k == 0) return ok_status();
  const float* bias = p.has_bias ? input(d, 2) : nullptr;
  const float* residual = p.has_residual ? input(d, 3) : nullptr;
  const int64_t macs = p.n * p.oh * p.ow * p.k * p.c_per_group * p.kh * p.kw;
  if (ops::conv2d_is_depthwise(p)) {
    DepthwiseJob job{&p, input(d, 0), input(d, 1), bias, residual, output(d, 0)};
    parallel_for(split_for(context, macs), p.n * p.oh,
                 p.kh * p.kw <= kDwMaxTaps ? depthwise_task : depthwise_element_task, &job);
    return ok_status();
  }
  // A 1x1 window at stride 1 without padding is one GEMM per image: its
  // pixels (rows of c floats) times the prepared weights, which for c up to
  // the GEMM's K block are its prepared B (strips of NR columns, c rows each);
  // the bias, residual and activation (tile_finish_applies) finish in the register tile.
  if (p.kh == 1 && p.kw == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 && p.pad_left == 0 &&
      p.oh == p.h && p.ow == p.w && p.groups == 1 && d.prepared != nullptr && p.c <= gemm_k_block()) {
    const int64_t pixels = p.oh * p.ow;
    for (int64_t n = 0; n < p.n; ++n) {
      GemmArgs g{pixels, p.k, p.c, input(d, 0) + n * pixels * p.c, p.c, nullptr, 0,
                 output(d, 0) + n * pixels * p.k, p.k};
      g.col_bias = bias;
      g.epilogue = p.epilogue.activation != 0 ? &p.epilogue : nullptr;
      g.packed_b = static_cast<const float*>(d.prepared);
      if (residual) {
        g.residual = residual + n * pixels * p.k;
        g.ldr = p.k;
      }
      gemm(context, g);
    }
    return ok_status();
  }
#ifdef HEXIR_CL_X86
  if (d.prepared != nullptr && small_groups(p, vector_lanes())) {
    SmallGroupJob job{&p, input(d, 0), static_cast<const float*>(d.prepared), bias, residual, output(d, 0)};
    parallel_for(split_for(context, macs), p.n * p.oh, vector_lanes() == 16 ? small_group_avx512_row<Avx512> : small_group_avx2_row<Avx2>,
                 &job);
    return ok_status();
  }
#endif
  const GemmTile tile = gemm_tile();
  DenseJob job{&p, input(d, 0), input(d, 1), bias, residual, static_cast<const float*>(d.prepared), output(d, 0), tile,
               strips_of(p, tile.nr_max)};
  parallel_for(split_for(context, macs), p.n * p.oh * p.groups, dense_task, &job);
  return ok_status();
}

}  // namespace hexir::hal::cpu::internal
