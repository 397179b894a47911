// conv2d in channels-last order: x [n, h, w, c], out [n, oh, ow, k], weights
// [k, c / groups, kh, kw] as in NCHW (docs/layout.md: the compiler chooses it).
//
// Dense and grouped: per range of output pixels (a task's rows) and strip of
// NR output channels, a register tile of up to MR pixels keeps its sums over
// the whole window (every tap, a channel block's channels), reading the
// input where it lies through a table of each pixel's row per tap (a row of
// zeros for the padding): no patch matrix. The weights are the GEMM's
// strips, prepared once at Program::prepare (or packed per pass when not
// prepared). Small groups: across the output channels (below). Depthwise:
// blocks of 16 channels in vectors of the widest ISA (lanes.h), 8 interior
// pixels at a time, taps in (ky, kx) order. All keep
// ops::conv2d_channels_last_element's order of sums.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>

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
  // [g][s][t][c / groups][nr] (a strip's taps one after another: the window
  // tile streams them in order), or null: packed per task.
  const float* prepared;
  float* out;
  GemmTile tile;
  int64_t strips;
  int64_t parts = 1, strips_per_part = 0;  // a row's strips split among tasks (few rows, several threads)
  int64_t row_blocks = 1, rows_per_block = 0;  // a task's rows (row-major: a narrow map's few)
};

// ---- dense and grouped: the window's sums in registers -------------------------
//
// A tile of up to MR output pixels x one strip of NR output channels keeps
// its sums in registers over a whole channel block's window: per tap
// (ky, kx), each pixel's kc input channels (where the tap column lies
// outside the input, a row of zeros) against the tap's kc x NR weights, the
// taps one chain (ops::conv2d_channels_last_element's order), then one
// store with the bias, residual and activation. The per-tap path before it
// (a GEMM tile per tap adding its partial sum into the output) spent a load,
// an add and a store of the tile and a call per tap against 64 multiply-adds
// deep, and its row's edges were tiles of 1 or 2 pixels (a tap column's
// pixels): ResNet-50's 3x3s ran at 78 % of the FMA peak on AVX2 where
// onnxruntime's NCHWc kernel reaches 93 %. The inputs are read where they
// lie, through a table of each pixel's row per tap (the zero row for the
// padding), as XNNPACK's indirect GEMM reads them.

constexpr int64_t kChainTaps = 64;      // taps per tile call at most (the table of rows on the stack)
constexpr int64_t kRowPixels = 96;      // pixels per pass over a strip's weights (a block's sums on the stack)
constexpr int64_t kPackFloats = 8192;   // unprepared weights: the taps packed per pass (32 KiB)
// A tap column outside the input: kc (at most one channel block) zeros.
alignas(64) constexpr float kZeroRow[kConvChannelBlock] = {};

struct WindowTile {
  const float* const* rows;  // [taps][MR]: tap t's kc inputs for pixel i at rows[t * MR + i]
  int64_t taps;
  const float* b;  // tap t's kc x NR weights at b + t * b_tap
  int64_t b_tap, kc;
  float* out;  // mr rows ldo apart, cols floats each
  int64_t ldo, mr, cols;
  bool resume;               // the chain continues from out's values (else from 0)
  const TileFinish* finish;  // or null; only with cols == NR
};
constexpr int64_t kMaxWindowMr = 12;

// AVX-512: 8 pixels (16 of 32 zmm). The 12-pixel tile (24 zmm) needed 12
// row pointers beside the weights' and the loop's: GCC kept three in xmm
// registers and moved them back every k, and a dense 3x3 ran at 98
// GFLOP/s where onnxruntime's reaches 113. With 8 (Zen 4, 1 thread):
// 1024 -> 512 at 40 x 40 165 -> 143 ms, 512 -> 512 at 14 x 14 10.3 -> 9.0,
// dilated 256 -> 256 at 28 x 28 9.2 -> 8.2; VGG-11 130 -> 121 ms,
// Inception-v3 101 -> 97 (9 and 10 pixels: between the two).
template <int N>
constexpr int kWindowMr = N == 16 ? 8 : 6;  // 16 of 32 zmm; 12 of 16 ymm; 24 of NEON's 32
template <int N>
constexpr int kWindowVectors = N == 4 ? 4 : 2;  // the GEMM's strip: 32 (AVX-512), 16 floats
struct WindowMrOf {
  template <int N>
  static HEXIR_LANES int64_t run() {
    return kWindowMr<N>;
  }
};
struct WindowStripOf {  // the strip the tile computes: the GEMM's NR
  template <int N>
  static HEXIR_LANES int64_t run() {
    return kWindowVectors<N> * N;
  }
};

// One vector's activation (tile_finish_applies), lanes::'s bits of ops::*_of.
template <ops::Activation A, int N>
HEXIR_LANES lanes::F32<N> activated(lanes::F32<N> x, const TileFinish& f) {
  if constexpr (A == ops::Activation::kRelu) return lanes::relu<N>(x);
  if constexpr (A == ops::Activation::kClip) return lanes::clip<N>(x, f.lo, f.hi);
  if constexpr (A == ops::Activation::kHardSigmoid) return lanes::hard_sigmoid<N>(x, f.lo, f.hi);
  if constexpr (A == ops::Activation::kHardSwish) return lanes::hard_swish<N>(x);
  return x;
}

// A tile's activation.
template <ops::Activation A, int N, int MR>
HEXIR_LANES void activate_window(lanes::F32<N> (&acc)[MR][kWindowVectors<N>], const TileFinish& f) {
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < kWindowVectors<N>; ++v) acc[i][v] = activated<A, N>(acc[i][v], f);
}

template <int N, int MR>
HEXIR_LANES void activate_tile(lanes::F32<N> (&acc)[MR][kWindowVectors<N>], const TileFinish& f) {
  switch (f.activation) {
    case ops::Activation::kRelu: activate_window<ops::Activation::kRelu, N, MR>(acc, f); break;
    case ops::Activation::kClip: activate_window<ops::Activation::kClip, N, MR>(acc, f); break;
    case ops::Activation::kHardSigmoid: activate_window<ops::Activation::kHardSigmoid, N, MR>(acc, f); break;
    case ops::Activation::kHardSwish: activate_window<ops::Activation::kHardSwish, N, MR>(acc, f); break;
    default: break;
  }
}

template <int N, int MR>
HEXIR_LANES void window_tile(const WindowTile& t) {
  constexpr int NV = kWindowVectors<N>;
  using V = lanes::F32<N>;
  V acc[MR][NV];
  if (t.resume) {  // a part strip's columns through a row on the stack
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      float row[NV * N] = {};
      const float* from = t.out + i * t.ldo;
      if (t.cols < NV * N) from = static_cast<const float*>(std::memcpy(row, from, static_cast<size_t>(t.cols) * 4));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = lanes::load<N>(from + v * N);
    }
  } else {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = lanes::zero<N>();
  }
  for (int64_t tap = 0; tap < t.taps; ++tap) {
    const float* a[MR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) a[i] = t.rows[tap * MR + i];
    const float* b = t.b + tap * t.b_tap;
    for (int64_t k = 0; k < t.kc; ++k, b += NV * N) {
      __builtin_prefetch(b + 8 * NV * N);
      V bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = lanes::load<N>(b + v * N);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const V x = lanes::broadcast<N>(a[i][k]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = lanes::fma<N>(x, bv[v], acc[i][v]);
      }
    }
  }
  if (t.cols < NV * N) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      float row[NV * N];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) lanes::store<N>(row + v * N, acc[i][v]);
      std::memcpy(t.out + i * t.ldo, row, static_cast<size_t>(t.cols) * sizeof(float));
    }
    return;
  }
  if (t.finish) {  // the row pass's steps in its order: the bias, the residual, the activation
    const TileFinish& f = *t.finish;
    if (f.col_bias)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        const V bias = lanes::load<N>(f.col_bias + v * N);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) acc[i][v] += bias;
      }
    if (f.residual)
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] += lanes::load<N>(f.residual + i * f.ldr + v * N);
    activate_tile<N, MR>(acc, f);
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) lanes::store<N>(t.out + i * t.ldo + v * N, acc[i][v]);
}

struct WindowTileKernel {
  template <int N, int MR = kWindowMr<N>>
  static HEXIR_LANES void run(const WindowTile* t) {
    if constexpr (MR > 1)
      if (t->mr < MR) return run<N, MR - 1>(t);
    window_tile<N, MR>(*t);
  }
};

// The tiles of a range of pixels: as even as MR allows (a 7-pixel row is 4
// and 3, not 6 and 1: a one-pixel tile loads two weight vectors per two
// multiply-adds).
struct TileSplit {
  int64_t count, base, extra;  // `extra` tiles of base + 1 pixels, then base
  TileSplit(int64_t pixels, int64_t mr)
      : count((pixels + mr - 1) / mr), base(count ? pixels / count : 0), extra(count ? pixels % count : 0) {}
  int64_t begin(int64_t i) const { return i * base + std::min(i, extra); }
  int64_t size(int64_t i) const { return base + (i < extra ? 1 : 0); }
};

// The tap rows [*ky0, *ky1) of output row oy inside the input: a
// contiguous range, so its taps [ky0 * kw, ky1 * kw) are too.
void tap_rows(const Conv2dPlan& p, int64_t oy, int64_t* ky0, int64_t* ky1) {
  const int64_t first = oy * p.stride_h - p.pad_top;  // iy = first + ky * dilation_h
  *ky0 = std::clamp<int64_t>(-floor_div(first, p.dilation_h), 0, p.kh);
  *ky1 = std::clamp<int64_t>(floor_div(p.h - 1 - first, p.dilation_h) + 1, *ky0, p.kh);
}

constexpr int64_t kTableRows = 2048;  // a pass's tables of input rows (16 KiB)

// The table of input rows of the tile of pixels [q, q + mr) (q = oy * ow +
// ox), taps [t0, t1): tap t's row for pixel j at table[(t - t0) * stride +
// j], `image` at the block's first channel, the zero row where the tap
// column lies outside the input (the tap rows lie inside: dense_rows).
void build_window_table(const Conv2dPlan& p, const float* image, int64_t q, int64_t mr, int64_t t0, int64_t t1,
                        int64_t stride, const float** table) {
  int64_t iy0[kMaxWindowMr], ix0[kMaxWindowMr];  // the pixels' window corners
  for (int64_t j = 0, oy = q / p.ow, ox = q % p.ow; j < mr; ++j) {
    iy0[j] = oy * p.stride_h - p.pad_top, ix0[j] = ox * p.stride_w - p.pad_left;
    if (++ox == p.ow) ox = 0, ++oy;
  }
  for (int64_t t = t0, ky = t0 / p.kw, kx = t0 % p.kw; t < t1; ++t) {
    const float** row = table + (t - t0) * stride;
    for (int64_t j = 0; j < mr; ++j) {
      const int64_t ix = ix0[j] + kx * p.dilation_w;
      row[j] = ix >= 0 && ix < p.w ? image + ((iy0[j] + ky * p.dilation_h) * p.w + ix) * p.c : kZeroRow;
    }
    if (++kx == p.kw) kx = 0, ++ky;
  }
}

// Pixels [q0, q1) of image n (q = oy * ow + ox: rows whose tap rows inside
// the input are taps [t_begin, t_end), so their pixels share tiles: a 7 x 7
// map's 5 inner rows are tiles of 6 and 5, not of 4 and 3 per row), group
// g, strips [s_begin, s_end) of the group (whole strips: no cache line is
// written by two tasks).
void dense_pixels(const DenseJob& job, int64_t n, int64_t g, int64_t q0, int64_t q1, int64_t t_begin, int64_t t_end,
                  int64_t s_begin, int64_t s_end) {
  const Conv2dPlan& p = *job.p;
  const int64_t nr = job.tile.nr_max, taps_all = p.kh * p.kw, cg = p.c_per_group, ldc = p.k;
  float* const image_out = job.out + n * p.oh * p.ow * p.k + g * p.k_per_group;  // pixel q at + q * ldc
  const auto activation = static_cast<ops::Activation>(p.epilogue.activation);
  const int64_t blocks = (cg + kConvChannelBlock - 1) / kConvChannelBlock;
  const int64_t mr_max = widest<WindowMrOf>();
  alignas(64) float sums[kRowPixels * kMaxStrip];  // a later channel block's sums
  alignas(64) float packed[kPackFloats];
  // The tiles' tables of input rows, [tile][tap][pixel]: all of a pass's
  // tiles when they fit (built once for every strip: one block, one call of
  // taps), else one tile's at a time.
  const float* rows[kTableRows];
  int64_t table_c0 = -1, table_t0 = -1, table_q = -1;  // what `rows` holds
  const float* const image = job.x + n * p.h * p.w * p.c + g * cg;
  for (int64_t px0 = q0; px0 < q1; px0 += kRowPixels) {
    const int64_t px1 = std::min(q1, px0 + kRowPixels);
    const TileSplit split(px1 - px0, mr_max);
    for (int64_t s = s_begin; s < s_end; ++s) {
      const int64_t col0 = s * nr, width = std::min(nr, p.k_per_group - col0);
      float* const c = image_out + col0;
      TileFinish f;
      f.col_bias = job.bias ? job.bias + g * p.k_per_group + col0 : nullptr;
      f.ldr = ldc;
      if (tile_finish_applies(activation)) f.activation = activation, f.lo = p.epilogue.a, f.hi = p.epilogue.b;
      const int64_t chain = job.prepared ? kChainTaps : 0;  // taps per call (unprepared: what the buffer holds)
      bool fused = width == nr && blocks == 1 && (activation == ops::Activation::kNone || tile_finish_applies(activation));
      for (int64_t c0 = 0; c0 < cg; c0 += kConvChannelBlock) {
        const int64_t kc = std::min(kConvChannelBlock, cg - c0);
        const int64_t per_call = chain ? chain : std::clamp<int64_t>(kPackFloats / (kc * nr), 1, kChainTaps);
        fused = fused && t_end - t_begin <= per_call;
        for (int64_t t0 = t_begin; t0 < t_end || t0 == t_begin; t0 += per_call) {
          const int64_t t1 = std::min(t_end, t0 + per_call);
          const float* b;
          int64_t b_tap;
          if (job.prepared) {
            b = job.prepared + ((g * job.strips + s) * taps_all + t0) * cg * nr + c0 * nr, b_tap = cg * nr;
          } else {
            for (int64_t t = t0; t < t1; ++t) pack_tap_strip(p, job.w, g, t, s, nr, c0, kc, packed + (t - t0) * kc * nr);
            b = packed, b_tap = kc * nr;
          }
          const int64_t taps = t1 - t0, per_tile = taps * mr_max;
          const bool whole = split.count * per_tile <= kTableRows;
          const bool built = whole && table_c0 == c0 && table_t0 == t0 && table_q == px0;
          for (int64_t i = 0; i < split.count; ++i) {
            const int64_t q = px0 + split.begin(i), mr = split.size(i);
            const float** table = rows + (whole ? i * per_tile : 0);
            if (!built) build_window_table(p, image + c0, q, mr, t0, t1, mr, table);
            WindowTile tile{table, taps, b, b_tap, kc, nullptr, 0, mr, width, t0 > t_begin, nullptr};
            if (c0 == 0) {
              tile.out = c + q * ldc, tile.ldo = ldc;
              if (fused) {
                f.residual = job.residual ? job.residual + (tile.out - job.out) : nullptr;
                tile.finish = &f;
              }
            } else {
              tile.out = sums + (q - px0) * nr, tile.ldo = nr;
            }
            widest<WindowTileKernel>(static_cast<const WindowTile*>(&tile));
          }
          if (whole) table_c0 = c0, table_t0 = t0, table_q = px0;
          if (t1 == t_end) break;
        }
        if (c0 > 0)  // the block's sums added to the earlier blocks'
          for (int64_t q = px0; q < px1; ++q)
            for (int64_t j = 0; j < width; ++j) c[q * ldc + j] += sums[(q - px0) * nr + j];
      }
      if (fused) continue;
      // The finish the tiles did not apply: the bias, the residual, then the activation.
      float* const out = c + px0 * ldc;
      if (f.col_bias)
        for (int64_t q = px0; q < px1; ++q)
          for (int64_t j = 0; j < width; ++j) out[(q - px0) * ldc + j] += f.col_bias[j];
      if (job.residual) add_residual(out, ldc, job.residual + (out - job.out), ldc, px1 - px0, width);
      if (activation != ops::Activation::kNone) apply_epilogue(p.epilogue, out, ldc, px1 - px0, width);
    }
  }
}

// Output rows [oy0, oy1) of image n, group g, strips [s_begin, s_end): runs
// of rows with the same tap rows inside the input as one range of pixels.
void dense_rows(const DenseJob& job, int64_t n, int64_t g, int64_t oy0, int64_t oy1, int64_t s_begin, int64_t s_end) {
  for (int64_t oy = oy0; oy < oy1;) {
    int64_t ky0, ky1, next = oy + 1;
    tap_rows(*job.p, oy, &ky0, &ky1);
    for (int64_t a, b; next < oy1; ++next) {
      tap_rows(*job.p, next, &a, &b);
      if (a != ky0 || b != ky1) break;
    }
    const int64_t ow = job.p->ow, kw = job.p->kw;
    dense_pixels(job, n, g, oy * ow, next * ow, ky0 * kw, ky1 * kw, s_begin, s_end);
    oy = next;
  }
}

// Row-major: a task is a block of output rows of image n, group g (one row,
// or a narrow map's rows: kTaskPixels), the part's strips.
constexpr int64_t kTaskPixels = 24;
void dense_task(void* context, int64_t task) {
  const DenseJob& job = *static_cast<const DenseJob*>(context);
  const Conv2dPlan& p = *job.p;
  const int64_t part = task % job.parts, rest = task / job.parts;
  const int64_t g = rest % p.groups, block = rest / p.groups % job.row_blocks, n = rest / p.groups / job.row_blocks;
  const int64_t s_begin = part * job.strips_per_part, oy0 = block * job.rows_per_block;
  dense_rows(job, n, g, oy0, std::min(p.oh, oy0 + job.rows_per_block), s_begin,
             std::min(job.strips, s_begin + job.strips_per_part));
}

// Strip-major: a task is one strip of image n, group g, over a block of
// rows, so the strip's weights (taps x channels x NR floats) come from
// memory once and stay in L2 for every row. Row-major tasks read all of a
// group's weights once per row: ResNet's 3x3 512 -> 512 at 7 x 7 streamed
// its 9 MiB of weights 7 times (0.70 ms in onnxruntime, 1.10 in Hexir at 2 threads).
void dense_strip_task(void* context, int64_t task) {
  const DenseJob& job = *static_cast<const DenseJob*>(context);
  const Conv2dPlan& p = *job.p;
  const int64_t block = task % job.row_blocks, rest = task / job.row_blocks;
  const int64_t s = rest % job.strips, g = rest / job.strips % p.groups, n = rest / job.strips / p.groups;
  const int64_t oy_end = std::min(p.oh, (block + 1) * job.rows_per_block);
  dense_rows(job, n, g, block * job.rows_per_block, oy_end, s, s + 1);
}

// Strip-major past this many bytes of a group's packed weights (half of a
// 1 MiB L2: each row re-read them from L3 or memory).
constexpr int64_t kStripMajorBytes = int64_t{512} << 10;

// Parts per row so that every thread has about four tasks: a 7 x 7 map's 7
// rows went 4 to one thread and 3 to the other (ResNet's last stage at 2
// threads ran 1.35x onnxruntime's time).
int64_t row_parts(const KernelContext& context, int64_t rows, int64_t strips) {
  const ThreadPool* pool = pool_of(context);
  const int64_t threads = pool ? pool->size() : 1;
  if (threads <= 1) return 1;
  return std::clamp<int64_t>((4 * threads + rows - 1) / rows, 1, strips);
}

// ---- few input channels: the window's patch --------------------------------
//
// ops::conv2d_channels_last_patch: per task (an output row), pixels in bands
// of a stack buffer's rows, each row a pixel's patch ((ky, kx, c) order: a
// tap row's kw * c floats are adjacent in the input, one copy each; zeros
// outside the input); then the register tile once per strip over the band,
// the patch's whole length in registers and the bias, residual and activation
// in its finish. Per tap (the dense path) the ResNet stem's 3 channels gave
// the tile 3 multiply-adds per pass over the output: 45 GFLOP/s.
constexpr int64_t kPatchFloats = 8192;  // the band's buffer (32 KiB)
constexpr int64_t kPatchSlack = 16;     // floats a tap row's copy may write past the row

struct PatchJob {
  const Conv2dPlan* p;
  const float *x, *w, *bias, *residual;
  const float* prepared;  // [s][patch][nr], or null: packed per task
  float* out;
  GemmTile tile;
  int64_t strips;
};

// Strip s of the weights as the patch's rows: row (ky * kw + kx) * c + ci, nr floats.
void pack_patch_strip(const Conv2dPlan& p, const float* w, int64_t s, int64_t nr, float* out) {
  const int64_t taps = p.kh * p.kw;
  for (int64_t t = 0; t < taps; ++t) {
    pack_tap_strip(p, w, 0, t, s, nr, 0, p.c, out);
    out += p.c * nr;
  }
}

// Pixels [ox0, ox1) of output row oy of image n: one patch per row of buf;
// `end`: the input's end (no read reaches past it). In the widest lanes: the
// tap rows are a few dozen bytes, copied as whole 64-byte vectors past the
// row's end (the next row, or the buffer's slack, takes what they write
// beyond it) where the input reaches that far (a copy call per row, or 16-byte
// moves, cost as much as the 3x3 stem's multiply-adds).
struct FillPatches {
  template <int N>
  static HEXIR_LANES void run(const Conv2dPlan* plan, const float* image, const float* end, int64_t oy, int64_t ox0,
                              int64_t ox1, float* buf) {
    const Conv2dPlan& p = *plan;
    const int64_t patch = p.kh * p.kw * p.c, row = p.kw * p.c;
    for (int64_t ox = ox0; ox < ox1; ++ox, buf += patch) {
      const int64_t first = ox * p.stride_w - p.pad_left;  // ix of kx = 0
      for (int64_t ky = 0; ky < p.kh; ++ky) {
        float* dst = buf + ky * row;
        const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
        if (iy < 0 || iy >= p.h) {
          for (int64_t i = 0; i < row; ++i) dst[i] = 0.0f;
          continue;
        }
        const float* src = image + iy * p.w * p.c;
        if (p.dilation_w == 1 && first >= 0 && first + p.kw <= p.w) {
          const float* from = src + first * p.c;
          if (from + (row + kPatchSlack - 1) / kPatchSlack * kPatchSlack <= end) {
            for (int64_t i = 0; i < row; i += kPatchSlack)
#pragma GCC unroll 4
              for (int64_t j = 0; j < kPatchSlack; j += N) lanes::store<N>(dst + i + j, lanes::load<N>(from + i + j));
          } else {
            for (int64_t i = 0; i < row; ++i) dst[i] = from[i];
          }
          continue;
        }
        for (int64_t kx = 0; kx < p.kw; ++kx) {
          const int64_t ix = first + kx * p.dilation_w;
          const float* from = src + ix * p.c;
          const bool inside = ix >= 0 && ix < p.w;
          for (int64_t ci = 0; ci < p.c; ++ci) dst[kx * p.c + ci] = inside ? from[ci] : 0.0f;
        }
      }
    }
  }
};

// The window's rows where they lie (GemmTile::run_segments, dilation_w 1):
// for a band of pixels, the kh input rows its windows cover, each copied
// once into buf (`pitch` floats apart, zeros outside the input); pixel i's
// tap row ky is then at buf + ky * pitch + i * stride_w * c, and the tile
// reads the kh rows of kw * c floats as the pieces of its one chain: the
// patch's order, no patch. The patch copy wrote each pixel's whole window
// (the 7x7/2 stem: 147 floats a pixel, each input float ~12 times).
// Returns the band's pixels (0: none fit) and its pitch.
int64_t window_rows_band(const Conv2dPlan& p, int64_t mr, int64_t* pitch) {
  const int64_t widest = kPatchFloats / p.kh / 16 * 16;  // a row's floats at most
  int64_t band = (widest / p.c - p.kw) / p.stride_w + 1;
  if (band < 1) return 0;
  if (band < p.ow) band = band >= mr ? band / mr * mr : band;
  band = std::min(band, p.ow);
  *pitch = ((band - 1) * p.stride_w + p.kw) * p.c;
  *pitch = (*pitch + 15) / 16 * 16;
  return band;
}

// Copies the kh input rows pixels [ox0, ox1) of output row oy read (see window_rows_band).
void fill_window_rows(const Conv2dPlan& p, const float* image, int64_t oy, int64_t ox0, int64_t ox1, int64_t pitch,
                      float* buf) {
  const int64_t cols = (ox1 - ox0 - 1) * p.stride_w + p.kw;  // input pixels a row holds
  const int64_t ix0 = ox0 * p.stride_w - p.pad_left;
  const int64_t lo = std::clamp<int64_t>(-ix0, 0, cols), hi = std::clamp<int64_t>(p.w - ix0, lo, cols);
  for (int64_t ky = 0; ky < p.kh; ++ky, buf += pitch) {
    const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
    if (iy < 0 || iy >= p.h) {
      std::fill(buf, buf + cols * p.c, 0.0f);
      continue;
    }
    std::fill(buf, buf + lo * p.c, 0.0f);
    if (hi > lo)
      std::memcpy(buf + lo * p.c, image + (iy * p.w + ix0 + lo) * p.c, static_cast<size_t>((hi - lo) * p.c) * 4);
    std::fill(buf + hi * p.c, buf + cols * p.c, 0.0f);
  }
}

void patch_task(void* context, int64_t task) {
  const PatchJob& job = *static_cast<const PatchJob*>(context);
  const Conv2dPlan& p = *job.p;
  const int64_t nr = job.tile.nr_max, patch = p.kh * p.kw * p.c;
  const int64_t oy = task % p.oh, n = task / p.oh;
  const float* image = job.x + n * p.h * p.w * p.c;
  float* const row_out = job.out + (n * p.oh + oy) * p.ow * p.k;
  const float* const row_residual = job.residual ? job.residual + (row_out - job.out) : nullptr;
  const auto activation = static_cast<ops::Activation>(p.epilogue.activation);
  const bool in_tile = tile_finish_applies(activation);
  alignas(64) float buf[kPatchFloats + kPatchSlack];
  alignas(64) float strip[ops::kConvPatchFloats * kMaxStrip];
  int64_t pitch = 0;
  const int64_t rows_band =
      job.tile.run_segments && p.dilation_w == 1 ? window_rows_band(p, job.tile.mr_segments, &pitch) : 0;
  const int64_t mr = rows_band ? job.tile.mr_segments : job.tile.mr_max;
  const int64_t band = rows_band ? rows_band : std::max<int64_t>(1, kPatchFloats / patch / mr) * mr;
  for (int64_t ox0 = 0; ox0 < p.ow; ox0 += band) {
    const int64_t ox1 = std::min(p.ow, ox0 + band);
    if (rows_band)
      fill_window_rows(p, image, oy, ox0, ox1, pitch, buf);
    else
      widest<FillPatches>(&p, image, job.x + p.n * p.h * p.w * p.c, oy, ox0, ox1, buf);
    for (int64_t s = 0; s < job.strips; ++s) {
      const int64_t col0 = s * nr, width = std::min(nr, p.k - col0);
      const float* b = job.prepared ? job.prepared + s * patch * nr : strip;
      if (!job.prepared) pack_patch_strip(p, job.w, s, nr, strip);
      TileFinish f;
      f.col_bias = job.bias ? job.bias + col0 : nullptr;
      if (row_residual) f.residual = row_residual + ox0 * p.k + col0, f.ldr = p.k;
      if (in_tile) f.activation = activation, f.lo = p.epilogue.a, f.hi = p.epilogue.b;
      for (int64_t ox = ox0; ox < ox1; ox += mr) {
        const int64_t rows = std::min(mr, ox1 - ox);
        if (rows_band)
          job.tile.run_segments(rows, width, p.kh, p.kw * p.c, buf + (ox - ox0) * p.stride_w * p.c,
                                p.stride_w * p.c, pitch, b, nr, row_out + ox * p.k + col0, p.k, &f);
        else
          job.tile.run(rows, width, patch, buf + (ox - ox0) * patch, patch, false, b, nr, row_out + ox * p.k + col0,
                       p.k, false, &f);
        if (f.residual) f.residual += mr * p.k;
      }
    }
  }
  if (!in_tile && p.epilogue.activation != 0) apply_epilogue(p.epilogue, row_out, p.k, p.ow, p.k);
}

// ---- depthwise ----------------------------------------------------------------
//
// Weights block-major, [ceil(c / 16)][taps][16] with zeros past c, prepared
// once (or packed per task for one chunk of blocks). A task is one output
// row of one image (or a part of its channels: few rows, several threads).
// Pixels whose every tap lies inside along x, 8 (then 4, 2) at a time per vector, every
// vector of the row's channels before the next 8 pixels: the tap's weights
// loaded once for the 8, and the 10 input pixels of 3 rows the block reads
// stay in L1 across its vectors (a chunk of 4 vectors over the whole row
// before the next chunk read the row's three input rows from L2 once per
// chunk: mobilenet_v2's 144 @ 56 x 56 ran at 24 GFLOP/s). A 3- or 5-wide
// window at stride 1 or 2 takes a row's edges (a 7x7 map's every pixel) as
// 8- or 4-pixel blocks reading zeros outside the row (dw_tile's kBorder); the
// other windows take the edges one pixel at a time, 4 vectors at once:
// independent chains (one vector at a time waited on the add's latency:
// mnasnet's 5x5 depthwise at 7x7 x 1152 ran 2.5x onnxruntime's time), their
// taps found once per pixel. Channels past a
// multiple of the vector: vectors of N/2 and N/4 (mnasnet's and
// mobilenet_v3's 72, 120, 184, 200 end 8 past a multiple of 16; they ran one
// channel at a time), then one at a time (fewer than 4). Every path sums the
// taps inside in (ky, kx) order as one FMA chain from zero (dw_madd), then
// the bias, the residual and the activation (tile_finish_applies) in
// registers: ops::conv2d_channels_last_element's bits on every ISA; other
// activations over the stored row.

constexpr int64_t kDwBlock = 16;
constexpr int64_t kDwPixels = 8;
constexpr int64_t kDwChunkVectors = 4;
constexpr int64_t kDwStackTaps = 64;  // unprepared weights: packed per task up to this many taps (16 KiB)

int64_t dw_blocks(const Conv2dPlan& p) { return (p.c + kDwBlock - 1) / kDwBlock; }

// Blocks [b0, b1) of the block-major weights.
void dw_pack(const Conv2dPlan& p, const float* w, int64_t b0, int64_t b1, float* out) {
  const int64_t taps = p.kh * p.kw;
  for (int64_t b = b0; b < b1; ++b)
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t j = 0; j < kDwBlock; ++j) {
        const int64_t c = b * kDwBlock + j;
        *out++ = c < p.c ? w[c * taps + t] : 0.0f;
      }
}

struct DepthwiseJob {
  const Conv2dPlan* p;
  const float *x, *w, *bias, *residual;
  const float* prepared;  // block-major weights, or null
  float* out;
  int64_t chunk = 0;     // unprepared weights: channels packed at once (kDwChunkVectors of the widest vectors)
  int64_t parts = 1;     // a row's chunks split among tasks (few rows, several threads)
  int64_t chunks_per_part = 0;
  TileFinish finish = {};  // the activation in registers (tile_finish_applies), else kNone
};

// One output row: where its input, output and weights are, and the taps inside.
struct DwRow {
  const DepthwiseJob* job;
  const float* image;  // image n
  float* out;          // the row's first pixel
  const float* w;      // block-major weights whose block 0 holds channel c_base
  int64_t c_base;
  int64_t oy, ky0, ky1;          // taps [ky0, ky1) read inside the input along y
  int64_t inner_lo, inner_hi;    // pixels whose every tap is inside along x
};

// Weights of channel c at tap 0; tap t at + t * kDwBlock.
inline const float* dw_weights(const DwRow& r, int64_t c) {
  const Conv2dPlan& p = *r.job->p;
  return r.w + (c - r.c_base) / kDwBlock * p.kh * p.kw * kDwBlock + c % kDwBlock;
}

// The taps [*lo, *hi) of pixel ox inside the input along x.
void dw_tap_columns(const Conv2dPlan& p, int64_t ox, int64_t* lo, int64_t* hi) {
  const int64_t first = ox * p.stride_w - p.pad_left;  // ix = first + kx * dilation_w
  if (p.dilation_w == 1) {  // no division (a border pixel's taps, per pixel)
    *lo = std::clamp<int64_t>(-first, 0, p.kw);
    *hi = std::clamp<int64_t>(p.w - first, *lo, p.kw);
    return;
  }
  *lo = std::clamp<int64_t>(-floor_div(first, p.dilation_w), 0, p.kw);
  *hi = std::clamp<int64_t>(floor_div(p.w - 1 - first, p.dilation_w) + 1, *lo, p.kw);
}

// acc + x * w as ops::conv2d_channels_last_element's depthwise chain has it
// (one rounding: FMA) where the ISA has FMA (AVX2, AVX-512, NEON: widest's
// N of 8, 16, or aarch64); SSE2 (N = 4 on x86) rounds the product apart
// (within rounding, as the portable GEMM tile). One rounding halved the FP
// operations: a product and an add per tap ran mobilenet_v2's 144 @ 56 x 56
// at 0.28 ms where one FMA took 0.16-0.19 (Zen 3), and FMA is NEON's fmla.
template <int N>
constexpr bool kDwFused =
#if defined(__aarch64__)
    true;
#else
    N >= 8;
#endif
template <int N, int M>
HEXIR_LANES lanes::F32<M> dw_madd(lanes::F32<M> x, lanes::F32<M> w, lanes::F32<M> acc) {
  if constexpr (kDwFused<N>) return lanes::fma<M>(x, w, acc);
  return acc + x * w;
}

// P sums of M channels from c (sums[i] at o + i * step): the bias, the
// residual (at the same place of job.residual), the activation, stored.
// The first n of them (n < P: a row's last block, its pixels past the row
// computed from zeros and dropped).
template <ops::Activation A, int M, int P>
HEXIR_LANES void dw_store_as(const DwRow& r, lanes::F32<M> (&sums)[P], float* o, int64_t step, int64_t c,
                             int64_t n = P) {
  const DepthwiseJob& job = *r.job;
  if (job.bias) {
    const lanes::F32<M> bias = lanes::load<M>(job.bias + c);
#pragma GCC unroll 8
    for (int i = 0; i < P; ++i) sums[i] += bias;
  }
  if (job.residual) {
    const float* res = job.residual + (o - job.out);
#pragma GCC unroll 8
    for (int i = 0; i < P; ++i)
      if (i < n) sums[i] += lanes::load<M>(res + i * step);
  }
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i)
    if (i < n) lanes::store<M>(o + i * step, activated<A, M>(sums[i], job.finish));
}

// P interior pixels from ox, one vector of M channels from c. KW, SW: the
// window's width (3 or 5) and stride (1 or 2) at dilation 1, where a row's
// SW * (P - 1) + KW input pixels are each loaded once for the products that
// read it (24 loads for 3 x 8 products took the load ports and, their 24
// addresses, the registers), each sum still taking its taps in kx order;
// else KW = SW = 0 (the plan's values, one load per product).
// kBorder (KW > 0 only): pixels at the row's edges, an input pixel outside
// the row read as zeros (its products add +-0 to a sum that is never -0:
// the bits of the chain that skips them), the first n pixels stored: the
// border pixels take the tile's P chains and one load per input pixel, where
// one at a time (dw_pixel) they took two loads per product.
template <int N, int M, int KW, int SW, int P, ops::Activation A, bool kBorder = false>
HEXIR_LANES void dw_tile(const DwRow& r, int64_t ox, int64_t c, int64_t n = P) {
  using V = lanes::F32<M>;
  const Conv2dPlan& p = *r.job->p;
  const int64_t kw = KW ? KW : p.kw;
  const float* w = dw_weights(r, c) + r.ky0 * kw * kDwBlock;
  const int64_t ix0 = ox * p.stride_w - p.pad_left;
  // The tap row's input pixel ix0 (kBorder: the row's pixel 0, ix0 added per input).
  const float* in = r.image + ((r.oy * p.stride_h - p.pad_top + r.ky0 * p.dilation_h) * p.w + (kBorder ? 0 : ix0)) * p.c + c;
  const int64_t row_step = p.dilation_h * p.w * p.c;
  V acc[P] = {};
  if constexpr (KW > 0) {
    constexpr int kInputs = SW * (P - 1) + KW;
    for (int64_t ky = r.ky0; ky < r.ky1; ++ky, in += row_step, w += KW * kDwBlock) {
      V wv[KW];
#pragma GCC unroll 5
      for (int kx = 0; kx < KW; ++kx) wv[kx] = lanes::load<M>(w + kx * kDwBlock);
      const float* x = in;
#pragma GCC unroll 24
      for (int j = 0; j < kInputs; ++j, x += p.c) {
        const float* at = x;
        if constexpr (kBorder) at = ix0 + j >= 0 && ix0 + j < p.w ? in + (ix0 + j) * p.c : kZeroRow;
        V xv = lanes::load<M>(at);
        lanes::in_register(xv);  // one load for its KW / SW products (folded into each: 1.3x the time)
#pragma GCC unroll 5
        for (int kx = 0; kx < KW; ++kx)
          if ((j - kx) % SW == 0 && (j - kx) / SW >= 0 && (j - kx) / SW < P)
            acc[(j - kx) / SW] = dw_madd<N, M>(xv, wv[kx], acc[(j - kx) / SW]);
      }
    }
  } else {
    const int64_t pixel = p.stride_w * p.c, tap_step = p.dilation_w * p.c;
    for (int64_t ky = r.ky0; ky < r.ky1; ++ky, in += row_step, w += kw * kDwBlock)
      for (int64_t kx = 0; kx < kw; ++kx) {
        const V wv = lanes::load<M>(w + kx * kDwBlock);
        const float* tap = in + kx * tap_step;
#pragma GCC unroll 8
        for (int64_t i = 0; i < P; ++i) acc[i] = dw_madd<N, M>(lanes::load<M>(tap + i * pixel), wv, acc[i]);
      }
  }
  dw_store_as<A, M, P>(r, acc, r.out + ox * p.k + c, p.k, c, n);
}

// Pixel ox, NV vectors of M channels from c (independent chains).
template <int N, int M, int NV, ops::Activation A>
HEXIR_LANES void dw_pixel(const DwRow& r, int64_t ox, int64_t c) {
  using V = lanes::F32<M>;
  const Conv2dPlan& p = *r.job->p;
  int64_t kx0, kx1;
  dw_tap_columns(p, ox, &kx0, &kx1);
  const float* w[NV];
  for (int v = 0; v < NV; ++v) w[v] = dw_weights(r, c + v * M);
  V acc[NV] = {};
  for (int64_t ky = r.ky0; ky < r.ky1; ++ky) {
    const float* in = r.image + ((r.oy * p.stride_h - p.pad_top + ky * p.dilation_h) * p.w +
                                 ox * p.stride_w - p.pad_left) * p.c + c;
    for (int64_t kx = kx0; kx < kx1; ++kx) {
      const float* tap = in + kx * p.dilation_w * p.c;
      const int64_t t = (ky * p.kw + kx) * kDwBlock;
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[v] = dw_madd<N, M>(lanes::load<M>(tap + v * M), lanes::load<M>(w[v] + t), acc[v]);
    }
  }
  float* o = r.out + ox * p.k + c;
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {  // each vector its own bias
    V one[1] = {acc[v]};
    dw_store_as<A, M, 1>(r, one, o + v * M, M, c + v * M);
  }
}

// Pixel ox, channels [c0, c1) one at a time (the bias, the residual and an
// in-register activation as dw_store gives them).
void dw_pixel_scalar(const DwRow& r, int64_t ox, int64_t c0, int64_t c1) {
  const DepthwiseJob& job = *r.job;
  const Conv2dPlan& p = *job.p;
  int64_t kx0, kx1;
  dw_tap_columns(p, ox, &kx0, &kx1);
  for (int64_t c = c0; c < c1; ++c) {
    const float* w = dw_weights(r, c);
    float acc = 0.0f;
    for (int64_t ky = r.ky0; ky < r.ky1; ++ky) {
      const float* in = r.image + ((r.oy * p.stride_h - p.pad_top + ky * p.dilation_h) * p.w +
                                   ox * p.stride_w - p.pad_left) * p.c + c;
      for (int64_t kx = kx0; kx < kx1; ++kx) {
        acc = std::fma(in[kx * p.dilation_w * p.c], w[(ky * p.kw + kx) * kDwBlock], acc);
      }
    }
    float* o = r.out + ox * p.k + c;
    if (job.bias) acc += job.bias[c];
    if (job.residual) acc += job.residual[o - job.out];
    *o = job.finish.activation == ops::Activation::kNone ? acc : ops::apply_epilogue(p.epilogue, acc);
  }
}

// Channels [c0, c1) of the row: pixel blocks outermost, every vector of the
// range per block. KW, SW: dw_tile's window (3 or 5 wide, stride 1 or 2, or
// 0, 0 for any); A: the activation; one instantiation each, picked once a row
// (dw_channels), not per tile.
template <int KW, int SW, ops::Activation A>
struct DepthwiseChannels {
  // The channels past the whole vectors of [c0, c1): a vector of N/2 at [half0, half1), of N/4 at
  // [half1, quarter1), then one at a time to c1.
  struct Split {
    int64_t c0, c1, full, half0, half1, quarter1;
  };
  // P pixels from ox, every vector of the range: interior ones, or (kBorder)
  // n pixels of which some read outside the row.
  template <int N, int P, bool kBorder = false>
  static HEXIR_LANES void interior(const DwRow& r, int64_t ox, const Split& s, int64_t n = P) {
    for (int64_t v = 0; v < s.full; ++v) dw_tile<N, N, KW, SW, P, A, kBorder>(r, ox, s.c0 + v * N, n);
    if constexpr (N >= 16)
      if (s.half1 > s.half0) dw_tile<N, N / 2, KW, SW, P, A, kBorder>(r, ox, s.half0, n);
    if constexpr (N >= 8)
      if (s.quarter1 > s.half1) dw_tile<N, 4, KW, SW, P, A, kBorder>(r, ox, s.half1, n);
    if (s.quarter1 < s.c1)
      for (int64_t i = 0; i < n; ++i) dw_pixel_scalar(r, ox + i, s.quarter1, s.c1);
  }
  template <int N>
  static HEXIR_LANES void run(const DwRow* row, int64_t c0, int64_t c1) {
    const DwRow& r = *row;
    const Conv2dPlan& p = *r.job->p;
    Split s{c0, c1, (c1 - c0) / N, 0, 0, 0};
    s.half0 = c0 + s.full * N;
    s.half1 = N >= 16 && c1 - s.half0 >= N / 2 ? s.half0 + N / 2 : s.half0;
    s.quarter1 = N >= 8 && c1 - s.half1 >= 4 ? s.half1 + 4 : s.half1;
    for (int64_t ox = 0; ox < p.ow;) {
      // Interior pixels 8 at a time, the interior's last 4 to 7, then 2 or 3: a border pixel's path
      // finds its taps per pixel (mobilenet_v2's 56-wide rows: 4 of 56 pixels there, 0.95 of the time).
      if (ox >= r.inner_lo && ox + kDwPixels <= r.inner_hi) {
        interior<N, kDwPixels>(r, ox, s);
        ox += kDwPixels;
      } else if constexpr (KW > 0) {
        // The row's first 8 pixels and its last 1 to 8 (a small map's every pixel) as blocks
        // that read zeros outside the row.
        const int64_t n = std::min<int64_t>(kDwPixels, p.ow - ox);
        if (n > kDwPixels / 2)
          interior<N, kDwPixels, true>(r, ox, s, n);
        else
          interior<N, kDwPixels / 2, true>(r, ox, s, n);
        ox += n;
      } else if (ox >= r.inner_lo && ox + kDwPixels / 2 <= r.inner_hi) {
        interior<N, kDwPixels / 2>(r, ox, s);
        ox += kDwPixels / 2;
      } else if (ox >= r.inner_lo && ox + 2 <= r.inner_hi) {
        interior<N, 2>(r, ox, s);
        ox += 2;
      } else {
        for (int64_t v = 0; v < s.full; v += kDwChunkVectors) switch (std::min(kDwChunkVectors, s.full - v)) {
            case 4: dw_pixel<N, N, 4, A>(r, ox, c0 + v * N); break;
            case 3: dw_pixel<N, N, 3, A>(r, ox, c0 + v * N); break;
            case 2: dw_pixel<N, N, 2, A>(r, ox, c0 + v * N); break;
            default: dw_pixel<N, N, 1, A>(r, ox, c0 + v * N); break;
          }
        if constexpr (N >= 16)
          if (s.half1 > s.half0) dw_pixel<N, N / 2, 1, A>(r, ox, s.half0);
        if constexpr (N >= 8)
          if (s.quarter1 > s.half1) dw_pixel<N, 4, 1, A>(r, ox, s.half1);
        if (s.quarter1 < c1) dw_pixel_scalar(r, ox, s.quarter1, c1);
        ++ox;
      }
    }
  }
};

template <int KW, int SW>
void dw_channels_as(DwRow* r, int64_t c0, int64_t c1) {
  switch (r->job->finish.activation) {
    case ops::Activation::kRelu: return widest<DepthwiseChannels<KW, SW, ops::Activation::kRelu>>(r, c0, c1);
    case ops::Activation::kClip: return widest<DepthwiseChannels<KW, SW, ops::Activation::kClip>>(r, c0, c1);
    case ops::Activation::kHardSigmoid:
      return widest<DepthwiseChannels<KW, SW, ops::Activation::kHardSigmoid>>(r, c0, c1);
    case ops::Activation::kHardSwish:
      return widest<DepthwiseChannels<KW, SW, ops::Activation::kHardSwish>>(r, c0, c1);
    default: return widest<DepthwiseChannels<KW, SW, ops::Activation::kNone>>(r, c0, c1);
  }
}
void dw_channels(DwRow* r, int64_t c0, int64_t c1) {
  const Conv2dPlan& p = *r->job->p;
  if (p.dilation_w == 1 && p.kw == 3 && p.stride_w == 1) return dw_channels_as<3, 1>(r, c0, c1);
  if (p.dilation_w == 1 && p.kw == 3 && p.stride_w == 2) return dw_channels_as<3, 2>(r, c0, c1);
  if (p.dilation_w == 1 && p.kw == 5 && p.stride_w == 1) return dw_channels_as<5, 1>(r, c0, c1);
  if (p.dilation_w == 1 && p.kw == 5 && p.stride_w == 2) return dw_channels_as<5, 2>(r, c0, c1);
  return dw_channels_as<0, 0>(r, c0, c1);
}

// One task: output row oy of image n, the part's channels.
void depthwise_task(void* context, int64_t task) {
  const DepthwiseJob& job = *static_cast<const DepthwiseJob*>(context);
  const Conv2dPlan& p = *job.p;
  const int64_t part = task % job.parts, row = task / job.parts;
  const int64_t oy = row % p.oh, n = row / p.oh;
  DwRow r{&job, job.x + n * p.h * p.w * p.c, job.out + (n * p.oh + oy) * p.ow * p.k, job.prepared, 0, oy, 0, 0, 0, 0};
  tap_rows(p, oy, &r.ky0, &r.ky1);
  r.inner_lo = 0, r.inner_hi = p.ow;
  for (int64_t kx = 0; kx < p.kw; ++kx) {
    int64_t lo, hi;
    tap_columns(p, kx, &lo, &hi);
    r.inner_lo = std::max(r.inner_lo, lo);
    r.inner_hi = std::min(r.inner_hi, hi);
  }
  const int64_t chunk = job.chunk;  // a multiple of kDwBlock
  const int64_t c_first = part * job.chunks_per_part * chunk;
  const int64_t c_last = std::min(p.c, c_first + job.chunks_per_part * chunk);
  if (job.prepared) {
    dw_channels(&r, c_first, c_last);
  } else {
    alignas(64) float packed[kDwChunkVectors * kDwStackTaps * kDwBlock];
    for (int64_t c0 = c_first; c0 < c_last; c0 += chunk) {
      const int64_t c1 = std::min(p.c, c0 + chunk);
      dw_pack(p, job.w, c0 / kDwBlock, (c1 + kDwBlock - 1) / kDwBlock, packed);
      r.w = packed;
      r.c_base = c0;
      dw_channels(&r, c0, c1);
    }
  }
  // An activation not applied in registers, over the part's stored columns (the whole row: one run).
  if (p.epilogue.activation != 0 && job.finish.activation == ops::Activation::kNone)
    apply_epilogue(p.epilogue, r.out + c_first, p.k, p.ow, c_last - c_first);
}

// Each element of an output row from the plan's own order: depthwise with
// unprepared weights of more taps than the task's stack holds; Winograd
// without a pool's scratch (a direct kernel call).
void element_row_task(void* context, int64_t task) {
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

// ---- a 1x1 depthwise: a per-channel scale and shift --------------------------
//
// What the compiler makes of a batch normalization no convolution took
// (compiler/passes/fusion.h channel_affine_as_conv): each pixel's channels
// times the weights, plus the bias, then the residual and the activation,
// over blocks of pixels still in L1 (the row-at-a-time depthwise path made
// three passes over 56 x 224 floats). The element function's order: the
// tap's product from 0, then the bias.
bool depthwise_pointwise(const Conv2dPlan& p) { return ops::conv2d_is_depthwise(p) && ops::conv2d_is_plain_gemm(p); }

constexpr int64_t kScaleBlockFloats = 4096;  // a task's pixels: about 16 KiB of results

struct ChannelScaleJob {
  const Conv2dPlan* p;
  const float *x, *w, *bias, *residual;
  float* out;
  int64_t pixels_per_task, pixels;
};

struct ChannelScaleRows {
  template <int N>
  static HEXIR_LANES void run(const float* x, const float* w, const float* bias, float* out, int64_t pixels,
                              int64_t c) {
    const int64_t whole = c / N * N;
    for (int64_t i = 0; i < pixels; ++i, x += c, out += c) {
      int64_t j = 0;
      if (bias)
        for (; j < whole; j += N)
          lanes::store<N>(out + j, lanes::load<N>(x + j) * lanes::load<N>(w + j) + lanes::load<N>(bias + j));
      else
        for (; j < whole; j += N) lanes::store<N>(out + j, lanes::load<N>(x + j) * lanes::load<N>(w + j));
      for (; j < c; ++j) out[j] = bias ? x[j] * w[j] + bias[j] : x[j] * w[j];
    }
  }
};

void channel_scale_task(void* context, int64_t task) {
  const ChannelScaleJob& job = *static_cast<const ChannelScaleJob*>(context);
  const int64_t c = job.p->c, first = task * job.pixels_per_task;
  const int64_t pixels = std::min(job.pixels_per_task, job.pixels - first);
  float* out = job.out + first * c;
  widest<ChannelScaleRows>(job.x + first * c, job.w, job.bias, out, pixels, c);
  if (job.residual) add_residual(out, 0, job.residual + first * c, 0, 1, pixels * c);
  if (job.p->epilogue.activation != 0) apply_epilogue(job.p->epilogue, out, 0, 1, pixels * c);
}

// ---- small groups ----------------------------------------------------------
//
// A grouped convolution of narrow groups (RegNet's 8 or 16 channels in and
// out, ResNeXt's 4, 8 and 16) computed across the output channels: a vector
// of 16 (AVX-512) or 8 (AVX2) output channels holds whole groups, times the
// tap's weights [t][ci][k] (prepared), and input channel ci of each lane's
// group reaches the group's lanes without a cross-lane permute: a memory
// broadcast where one group fills the vector, an in-lane shuffle (vpermilps)
// of the pixel's loaded channels where groups are 2 or 4 wide, and for 8 wide
// groups in 16 lanes that shuffle of a copy with each group's half of the
// 128-bit lanes repeated (vshuff32x4, once per 4 channels). Interior pixels go
// P at a time (AVX-512: 12 broadcast, 8 shuffled; AVX2: 6 and 4), P chains of
// FMAs. A cross-lane permute per FMA with 4 pixels (its 16 index vectors held
// the registers) ran ResNeXt's and RegNetX's grouped 3x3s at 40-45 % of
// onnxruntime's speed. One chain from 0 over the taps and each tap's
// channels (a border pixel's tap columns outside the input as zeros), then
// the bias: the order of ops::conv2d_channels_last_element (fmaf), so the
// bits of the dense path.
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
  int64_t parts = 1, vectors_per_part = 1;  // a row's output vectors split among tasks (few rows)
};

#ifdef HEXIR_CL_X86
// The ISA's vector of floats for the small-group block: loads (all lanes, or
// those under the mask), a broadcast, the in-lane spread of a group's channel,
// fma, add, store; pixels per block when broadcast and when shuffled (the
// registers: 2 or 3 vectors a pixel).
struct Avx512 {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int64_t kLanes = 16;
  static constexpr int kBroadcastPixels = 12, kShuffledPixels = 8;
  [[gnu::target("avx512f"), gnu::always_inline]] static inline V zero() { return _mm512_setzero_ps(); }
  // kWhole: every lane (plain loads and stores; masked ones are slower on AMD's cores).
  template <bool kWhole = false>
  [[gnu::target("avx512f"), gnu::always_inline]] static inline V load(const float* at, Mask m) {
    if constexpr (kWhole) return _mm512_loadu_ps(at);
    return _mm512_maskz_loadu_ps(m, at);
  }
  template <bool kWhole = false>
  [[gnu::target("avx512f"), gnu::always_inline]] static inline void store(float* at, Mask m, V v) {
    if constexpr (kWhole)
      _mm512_storeu_ps(at, v);
    else
      _mm512_mask_storeu_ps(at, m, v);
  }
  [[gnu::target("avx512f"), gnu::always_inline]] static inline V broadcast(const float* at) { return _mm512_set1_ps(*at); }
  // The pixel's channels as the source of each group's channels [4q, 4q + 4).
  template <int CG, int Q, bool kWhole>
  [[gnu::target("avx512f"), gnu::always_inline]] static inline V source(const float* at, Mask m) {
    const V x = load<kWhole>(at, m);
    if constexpr (CG == 8) return _mm512_shuffle_f32x4(x, x, Q == 0 ? 0xA0 : 0xF5);  // 128-bit lanes 0,0,2,2 / 1,1,3,3
    return x;
  }
  template <int CG, int CI>
  [[gnu::target("avx512f"), gnu::always_inline]] static inline V spread(V x) {
    if constexpr (CG == 2) return _mm512_permute_ps(x, CI | CI << 2 | (2 + CI) << 4 | (2 + CI) << 6);
    return _mm512_permute_ps(x, (CI % 4) * 0x55);
  }
  [[gnu::target("avx512f"), gnu::always_inline]] static inline V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  [[gnu::target("avx512f"), gnu::always_inline]] static inline V add(V a, V b) { return _mm512_add_ps(a, b); }
  [[gnu::target("avx512f"), gnu::always_inline]] static inline Mask mask(int64_t n) {
    return n >= 16 ? Mask(0xffff) : Mask((1u << n) - 1);
  }
};
struct Avx2 {
  using V = __m256;
  struct Mask {
    __m256i bits;
    bool all;
  };
  static constexpr int64_t kLanes = 8;
  static constexpr int kBroadcastPixels = 6, kShuffledPixels = 4;
  [[gnu::target("avx2"), gnu::always_inline]] static inline V zero() { return _mm256_setzero_ps(); }
  template <bool kWhole = false>
  [[gnu::target("avx2"), gnu::always_inline]] static inline V load(const float* at, Mask m) {
    return kWhole || m.all ? _mm256_loadu_ps(at) : _mm256_maskload_ps(at, m.bits);
  }
  template <bool kWhole = false>
  [[gnu::target("avx2"), gnu::always_inline]] static inline void store(float* at, Mask m, V v) {
    if (kWhole || m.all)
      _mm256_storeu_ps(at, v);
    else
      _mm256_maskstore_ps(at, m.bits, v);
  }
  [[gnu::target("avx2"), gnu::always_inline]] static inline V broadcast(const float* at) { return _mm256_broadcast_ss(at); }
  template <int CG, int Q, bool kWhole>
  [[gnu::target("avx2"), gnu::always_inline]] static inline V source(const float* at, Mask m) { return load<kWhole>(at, m); }
  template <int CG, int CI>
  [[gnu::target("avx2"), gnu::always_inline]] static inline V spread(V x) {
    if constexpr (CG == 2) return _mm256_permute_ps(x, CI | CI << 2 | (2 + CI) << 4 | (2 + CI) << 6);
    return _mm256_permute_ps(x, (CI % 4) * 0x55);
  }
  [[gnu::target("avx2,fma"), gnu::always_inline]] static inline V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  [[gnu::target("avx2"), gnu::always_inline]] static inline V add(V a, V b) { return _mm256_add_ps(a, b); }
  [[gnu::target("avx2"), gnu::always_inline]] static inline Mask mask(int64_t n) {
    return {_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(n, 8))),
                               _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
            n >= 8};
  }
};

// The functions once per ISA (a template cannot choose its target): NAME_*
// compiled for TARGET. A block is P chains of sums: P pixels of one vector of
// output channels (the tap's weights loaded once for all), or, kVectors, one
// pixel's P vectors of output channels (a border pixel: P chains where a lone
// vector's chain would wait on each FMA).
// NAME_channels: channels [CI, end of CI's quarter) of one tap into the
// sums, xs[j] chain j's source for the quarter.
// NAME_tap: one tap into the sums, chain j reading its pixel's channels at
// a + j * a_step, channel by channel.
// NAME_block: P pixels from ox (all their taps inside along x), the lanes of
// output channels [v, v + kLanes) under `m`.
// NAME_pixel: pixel ox, P vectors of output channels from v (those past
// v_end masked off), tap rows outside the input skipped, tap columns zeros.
// NAME_row: one output row (a part of its vectors): pixels whose taps all lie
// inside along x P at a time, then 4 at a time, the others (borders and the
// rest) one by one, 8, 4, 2 or 1 vectors at a time.
#define HEXIR_SMALL_GROUP_FUNCTIONS(NAME, TARGET) \
template <typename S, int CG, int P, bool kVectors, bool kWhole, int CI> \
[[gnu::target(TARGET), gnu::always_inline]] inline void NAME##_channels(const typename S::V (&xs)[P], const float* w, \
                                                                      int64_t k, const typename S::Mask (&m)[P], \
                                                                      typename S::V (&sums)[P]) { \
  if constexpr (kVectors) { \
    for (int j = 0; j < P; ++j) \
      sums[j] = S::fma(S::template spread<CG, CI>(xs[j]), S::template load<kWhole>(w + CI * k + j * S::kLanes, m[j]), \
                          sums[j]); \
  } else { \
    const typename S::V wv = S::template load<kWhole>(w + CI * k, m[0]); \
    for (int j = 0; j < P; ++j) sums[j] = S::fma(S::template spread<CG, CI>(xs[j]), wv, sums[j]); \
  } \
  if constexpr (CI + 1 < CG && (CI + 1) % 4 != 0) NAME##_channels<S, CG, P, kVectors, kWhole, CI + 1>(xs, w, k, m, sums); \
} \
 \
template <typename S, int CG, int P, bool kVectors, bool kWhole, bool kBorder = false> \
[[gnu::target(TARGET), gnu::always_inline]] inline void NAME##_tap(const float* a, int64_t a_step, const float* w, \
                                                                 int64_t k, const typename S::Mask (&m)[P], \
                                                                 typename S::V (&sums)[P], \
                                                                 const float* const* as = nullptr) { \
  /* Chain j's pixel: a + j * a_step, or (kBorder) as[j]. */ \
  if constexpr (CG == S::kLanes) { \
    for (int ci = 0; ci < CG; ++ci) { \
      if constexpr (kVectors) { \
        for (int j = 0; j < P; ++j) \
          sums[j] = S::fma(S::broadcast(a + j * a_step + ci), S::template load<true>(w + ci * k + j * S::kLanes, m[j]), \
                              sums[j]); \
      } else { \
        const typename S::V wv = S::template load<true>(w + ci * k, m[0]); \
        for (int j = 0; j < P; ++j) \
          sums[j] = S::fma(S::broadcast((kBorder ? as[j] : a + j * a_step) + ci), wv, sums[j]); \
      } \
    } \
  } else { \
    typename S::V xs[P]; \
    for (int j = 0; j < P; ++j) \
      xs[j] = S::template source<CG, 0, kWhole>(kBorder ? as[j] : a + j * a_step, m[kVectors ? j : 0]); \
    NAME##_channels<S, CG, P, kVectors, kWhole, 0>(xs, w, k, m, sums); \
    if constexpr (CG == 8 && S::kLanes == 16) { \
      for (int j = 0; j < P; ++j) \
        xs[j] = S::template source<CG, 1, kWhole>(kBorder ? as[j] : a + j * a_step, m[kVectors ? j : 0]); \
      NAME##_channels<S, CG, P, kVectors, kWhole, 4>(xs, w, k, m, sums); \
    } \
  } \
} \
 \
template <typename S, int CG, int P, bool kVectors, bool kWhole, bool kBorder = false> \
[[gnu::target(TARGET)]] inline void NAME##_chains(const SmallGroupJob& job, const float* image, int64_t oy, \
                                                int64_t ox, int64_t v, const typename S::Mask (&m)[P], \
                                                float* row_out, int64_t n = P) { \
  const Conv2dPlan& p = *job.p; \
  const int64_t k = p.k, a_step = kVectors ? S::kLanes : p.stride_w * p.c; \
  typename S::V acc[P]; \
  for (int j = 0; j < P; ++j) acc[j] = S::zero(); \
  for (int64_t ky = 0; ky < p.kh; ++ky) { \
    const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h; \
    if (iy < 0 || iy >= p.h) continue; \
    for (int64_t kx = 0; kx < p.kw; ++kx) { \
      const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w; \
      const float* const w = job.w + (ky * p.kw + kx) * CG * k + v; \
      if constexpr (kBorder) { /* each pixel's tap column, zeros outside the input */ \
        const float* as[P]; \
        for (int j = 0; j < P; ++j) { \
          const int64_t ixj = ix + j * p.stride_w; \
          as[j] = ixj >= 0 && ixj < p.w ? image + (iy * p.w + ixj) * p.c + v : kZeroRow; \
        } \
        NAME##_tap<S, CG, P, false, kWhole, true>(nullptr, 0, w, k, m, acc, as); \
      } else { \
        /* A tap column outside the input: its products with zeros (a border pixel's). */ \
        const float* a = kVectors && (ix < 0 || ix >= p.w) ? kZeroRow : image + (iy * p.w + ix) * p.c + v; \
        NAME##_tap<S, CG, P, kVectors, kWhole>(a, a_step, w, k, m, acc); \
      } \
    } \
  } \
  for (int j = 0; j < P; ++j) { \
    if (kBorder && j >= n) break; \
    const int64_t channel = kVectors ? v + j * S::kLanes : v, pixel = kVectors ? ox : ox + j; \
    const typename S::Mask mj = m[kVectors ? j : 0]; \
    S::template store<kWhole>(row_out + pixel * k + channel, mj, \
                              job.bias ? S::add(acc[j], S::template load<kWhole>(job.bias + channel, mj)) : acc[j]); \
  } \
} \
 \
template <typename S, int CG, int P, bool kWhole, bool kBorder = false> \
[[gnu::target(TARGET)]] void NAME##_block(const SmallGroupJob& job, const float* image, int64_t oy, int64_t ox, \
                                          int64_t v, typename S::Mask mask, float* row_out, int64_t n = P) { \
  typename S::Mask m[P]; \
  for (int j = 0; j < P; ++j) m[j] = mask; \
  NAME##_chains<S, CG, P, false, kWhole, kBorder>(job, image, oy, ox, v, m, row_out, n); \
} \
 \
template <typename S, int CG, int P, bool kWhole> \
[[gnu::target(TARGET)]] void NAME##_pixel(const SmallGroupJob& job, const float* image, int64_t oy, int64_t ox, \
                                          int64_t v, int64_t v_end, float* row_out) { \
  typename S::Mask m[P]; \
  for (int j = 0; j < P; ++j) m[j] = S::mask(v_end - v - j * S::kLanes); \
  NAME##_chains<S, CG, P, true, kWhole>(job, image, oy, ox, v, m, row_out); \
} \
 \
template <typename S, int CG, bool kWhole> \
[[gnu::target(TARGET), gnu::always_inline]] inline void NAME##_span(const SmallGroupJob& job, const float* image, int64_t oy, int64_t v, \
                                         typename S::Mask m, float* row_out, int64_t inside0, int64_t inside1, \
                                         int64_t blocked, bool edge_blocks) { \
  constexpr int kP = CG == S::kLanes ? S::kBroadcastPixels : S::kShuffledPixels; \
  constexpr int kEdge = kP < 8 ? kP : 8; \
  const int64_t ow = job.p->ow; \
  if (!edge_blocks) { /* the interior [inside0, blocked) only */ \
    int64_t ox = inside0; \
    for (; ox + kP <= inside1; ox += kP) NAME##_block<S, CG, kP, kWhole>(job, image, oy, ox, v, m, row_out); \
    for (; ox < blocked; ox += 4) NAME##_block<S, CG, 4, kWhole>(job, image, oy, ox, v, m, row_out); \
    return; \
  } \
  for (int64_t ox = 0; ox < ow;) { \
    if (ox >= inside0 && ox + kP <= inside1) { \
      NAME##_block<S, CG, kP, kWhole>(job, image, oy, ox, v, m, row_out); \
      ox += kP; \
    } else if (ox >= inside0 && ox + 4 <= inside1 && ow - ox > kEdge) { \
      NAME##_block<S, CG, 4, kWhole>(job, image, oy, ox, v, m, row_out); \
      ox += 4; \
    } else { /* the row's first pixels and its last ones */ \
      const int64_t n = std::min<int64_t>(kEdge, ow - ox); \
      if (n > kEdge / 2) \
        NAME##_block<S, CG, kEdge, kWhole, true>(job, image, oy, ox, v, m, row_out, n); \
      else \
        NAME##_block<S, CG, kEdge / 2, kWhole, true>(job, image, oy, ox, v, m, row_out, n); \
      ox += n; \
    } \
  } \
} \
 \
template <typename S, int CG> \
[[gnu::target(TARGET)]] void NAME##_row(void* context, int64_t task) { \
  const SmallGroupJob& job = *static_cast<const SmallGroupJob*>(context); \
  const Conv2dPlan& p = *job.p; \
  const int64_t part = task % job.parts, row = task / job.parts; \
  const int64_t oy = row % p.oh, n = row / p.oh, k = p.k; \
  constexpr int kP = CG == S::kLanes ? S::kBroadcastPixels : S::kShuffledPixels; \
  constexpr int kEdge = kP < 8 ? kP : 8; \
  const int64_t inside0 = std::min(p.ow, (p.pad_left + p.stride_w - 1) / p.stride_w); \
  const int64_t last = p.w - 1 - (p.kw - 1) * p.dilation_w + p.pad_left; \
  const int64_t inside1 = last < 0 ? inside0 : std::clamp(last / p.stride_w + 1, inside0, p.ow); \
  /* The interior pixels [inside0, blocked) in blocks of kP, then of 4. */ \
  const int64_t whole = (inside1 - inside0) / kP * kP; \
  const int64_t blocked = inside0 + whole + (kP > 4 ? (inside1 - inside0 - whole) / 4 * 4 : 0); \
  float* row_out = job.out + (n * p.oh + oy) * p.ow * k; \
  const float* image = job.x + n * p.h * p.w * p.c; \
  const int64_t v0 = part * job.vectors_per_part * S::kLanes, v1 = std::min(k, v0 + job.vectors_per_part * S::kLanes); \
  /* The row's edge pixels as blocks reading zeros outside the input where the row is short (a 7 x 7 map) or  \
     has few vectors: one pixel's vectors as chains (below) were then too few to hide the FMA's latency, and  \
     took two loads per product (RegNetX's 400 channels at 7 x 7: 98 -> 168 GFLOP/s). */ \
  const bool edge_blocks = p.ow <= kEdge || v1 - v0 < 8 * S::kLanes; \
  for (int64_t v = v0; v < v1; v += S::kLanes) { \
    const typename S::Mask m = S::mask(k - v); \
    if (CG == S::kLanes || k - v >= S::kLanes) /* CG == kLanes: k is whole vectors */ \
      NAME##_span<S, CG, true>(job, image, oy, v, m, row_out, inside0, inside1, blocked, edge_blocks); \
    else if constexpr (CG < S::kLanes) /* the last vector, part of one */ \
      NAME##_span<S, CG, false>(job, image, oy, v, m, row_out, inside0, inside1, blocked, edge_blocks); \
  } \
  for (int64_t ox = 0; ox < p.ow && !edge_blocks; ++ox) { \
    if (ox == inside0) ox = std::max(ox, blocked); \
    if (ox >= p.ow) break; \
    int64_t v = v0; \
    if constexpr (S::kLanes == 16) \
      for (; v + 8 * S::kLanes <= v1; v += 8 * S::kLanes) NAME##_pixel<S, CG, 8, true>(job, image, oy, ox, v, v1, row_out); \
    for (; v + 4 * S::kLanes <= v1; v += 4 * S::kLanes) NAME##_pixel<S, CG, 4, true>(job, image, oy, ox, v, v1, row_out); \
    for (; v + 2 * S::kLanes <= v1; v += 2 * S::kLanes) NAME##_pixel<S, CG, 2, true>(job, image, oy, ox, v, v1, row_out); \
    if (v + S::kLanes <= v1) NAME##_pixel<S, CG, 1, true>(job, image, oy, ox, v, v1, row_out), v += S::kLanes; \
    if constexpr (CG < S::kLanes) /* the last vector, part of one */ \
      if (v < v1) NAME##_pixel<S, CG, 1, false>(job, image, oy, ox, v, v1, row_out); \
  } \
  if (job.residual) add_residual(row_out + v0, k, job.residual + (row_out + v0 - job.out), k, p.ow, v1 - v0); \
  if (p.epilogue.activation != 0) apply_epilogue(p.epilogue, row_out + v0, k, p.ow, v1 - v0); \
}

HEXIR_SMALL_GROUP_FUNCTIONS(small_group_avx512, "avx512f,avx2,fma")
HEXIR_SMALL_GROUP_FUNCTIONS(small_group_avx2, "avx2,fma")
#undef HEXIR_SMALL_GROUP_FUNCTIONS

// The row function for the ISA's lanes and the group width (small_groups holds).
ThreadPool::TaskFn small_group_row(int64_t lanes, int64_t cg) {
  if (lanes == 16) {
    switch (cg) {
      case 2: return small_group_avx512_row<Avx512, 2>;
      case 4: return small_group_avx512_row<Avx512, 4>;
      case 8: return small_group_avx512_row<Avx512, 8>;
      default: return small_group_avx512_row<Avx512, 16>;
    }
  }
  switch (cg) {
    case 2: return small_group_avx2_row<Avx2, 2>;
    case 4: return small_group_avx2_row<Avx2, 4>;
    default: return small_group_avx2_row<Avx2, 8>;
  }
}
#endif

// ---- Winograd F(2x2, 3x3) and F(4x4, 3x3): ops::conv2d_winograd_element<2|4> ----
//
// Per task a chunk of 2x2 output tiles of one image: their 4x4 input tiles
// transformed (V, [xi nu][tile][c]) into the pool's scratch, then per strip
// of NR output channels the 16 products V[xi nu] x U[xi nu] as the window
// tile with one tap (one chain over the input channels, resumed from M
// between passes), into M ([xi nu][tile][NR], scratch too), then the output transform with the
// bias, residual and activation. 16 multiply-adds per input channel for 4
// outputs where the window takes 36; the transforms cost ~32 adds per
// channel and tile in and ~24 per output channel and tile out. U is
// prepared ([s][xi nu][c][NR], 16/9 of the weights' bytes) or packed per
// pass from the weights. F(4x4, 3x3) is the same task with 4x4 output
// tiles from 6x6 inputs: 36 slices (36 multiply-adds per channel for 16
// outputs), U 36/9 of the weights' bytes, half as many tiles a chunk.

// U's slices: 16 for F(2x2, 3x3), 36 for F(4x4, 3x3) (the input tile's
// 4x4 or 6x6 values).
int64_t winograd_slices(const Conv2dPlan& p) { return (p.winograd + 2) * (p.winograd + 2); }

// Strip s of U[xn] (xn = xi * side + nu, side 4 or 6), input channels [c0,
// c0 + kc): kc rows of nr floats, zeros past k.
void pack_winograd_strip(const Conv2dPlan& p, const float* w, int64_t s, int64_t nr, int64_t xn, int64_t c0,
                         int64_t kc, float* out) {
  const int64_t k0 = s * nr, width = std::min(nr, p.k - k0), side = p.winograd + 2;
  const int xi = static_cast<int>(xn / side), nu = static_cast<int>(xn % side);
  for (int64_t ci = 0; ci < kc; ++ci) {
    float* row = out + ci * nr;
    for (int64_t j = 0; j < width; ++j) {
      const float* g = w + ((k0 + j) * p.c + c0 + ci) * 9;
      row[j] = p.winograd == 4 ? ops::winograd_weight<4>(g, xi, nu) : ops::winograd_weight<2>(g, xi, nu);
    }
    for (int64_t j = width; j < nr; ++j) row[j] = 0.0f;
  }
}

constexpr int64_t kWinogradTiles = 24;     // tiles a task over channel passes
constexpr int64_t kWinogradOnePassTiles = 12;  // one pass over all the channels when this many tiles fit
constexpr int64_t kWinogradChannels = 64;  // input channels per pass over V when all do not fit

struct WinogradJob {
  const Conv2dPlan* p;
  const float *x, *w, *bias, *residual;
  const float* prepared;  // [s][xi nu][c][nr], or null: packed per pass
  float* out;
  const ThreadPool* pool;  // a participant's scratch holds its task's V and M
  int64_t nr, strips, tiles_w, tiles;  // tiles per image, tiles_w per tile row
  int64_t chunk, chunks;               // tiles per task, tasks per image
  int64_t c_pass, k_group;             // input channels per pass over V, strips per group (M holds theirs)
  int64_t vstride;                     // floats between V's slices
  int64_t m = 2, slices = 16;          // the output tile's side; V's, U's and M's slices ((m + 2)^2)
};

// The tiles [t0, t0 + nt) of one image, input channels [c0, c0 + cp):
// V[xn][tile][c - c0] from their 4x4 (F(2x2)) or 6x6 (F(4x4)) inputs (zeros
// outside the input): ops::winograd_input_1d (F(2x2) or F(4x4)) over the
// columns, then over the rows, per lane.
struct WinogradInput {
  const WinogradJob* job;
  const float* image;  // at channel c0
  float* v;
  int64_t t0, nt, cp;
};
template <int M>  // the output tile's side: 2, F(2x2, 3x3); 4, F(4x4, 3x3)
struct WinogradInputKernel {
  static constexpr int S = M + 2;  // the input tile's side
  template <int N>
  static HEXIR_LANES void run(const WinogradInput* in) {
    using V = lanes::F32<N>;
    const Conv2dPlan& p = *in->job->p;
    const int64_t c = in->cp, vstride = in->job->vstride;
    for (int64_t ti = 0; ti < in->nt; ++ti) {
      const int64_t tile = in->t0 + ti, ty = tile / in->job->tiles_w, tx = tile % in->job->tiles_w;
      const float* src[S][S];
      for (int i = 0; i < S; ++i)
        for (int j = 0; j < S; ++j) {
          const int64_t iy = M * ty - p.pad_top + i, ix = M * tx - p.pad_left + j;
          src[i][j] = iy >= 0 && iy < p.h && ix >= 0 && ix < p.w ? in->image + (iy * p.w + ix) * p.c : nullptr;
        }
      float* const dst = in->v + ti * c;
      int64_t ch = 0;
      for (; ch + N <= c; ch += N) {
        V r[S][S];  // [xi][j]: the columns transformed
#pragma GCC unroll 6
        for (int j = 0; j < S; ++j) {
          V d[S], t[S];
#pragma GCC unroll 6
          for (int i = 0; i < S; ++i) d[i] = src[i][j] ? lanes::load<N>(src[i][j] + ch) : lanes::zero<N>();
          ops::winograd_input_1d(d, t);
#pragma GCC unroll 6
          for (int xi = 0; xi < S; ++xi) r[xi][j] = t[xi];
        }
#pragma GCC unroll 6
        for (int xi = 0; xi < S; ++xi) {
          V v[S];
          ops::winograd_input_1d(r[xi], v);
          float* const o = dst + xi * S * vstride + ch;
#pragma GCC unroll 6
          for (int nu = 0; nu < S; ++nu) lanes::store<N>(o + nu * vstride, v[nu]);
        }
      }
      for (; ch < c; ++ch) {
        float d[S][S];
        for (int i = 0; i < S; ++i)
          for (int j = 0; j < S; ++j) d[i][j] = src[i][j] ? src[i][j][ch] : 0.0f;
        for (int xn = 0; xn < S * S; ++xn) dst[xn * vstride + ch] = ops::winograd_input<M>(d, xn / S, xn % S);
      }
    }
  }
};

// A full strip's outputs of the tiles [t0, t0 + nt) from M: the output
// transform's 1-D steps over the columns, then the rows, per lane; then the
// bias, the residual and a tile's activation.
struct WinogradOutput {
  const WinogradJob* job;
  const float* m;
  float* out;             // image n's output at the strip's first channel
  const float* residual;  // the same place in the residual, or null
  const float* bias;      // the strip's, or null
  int64_t t0, nt;
  const TileFinish* finish;  // its activation (one tile_finish_applies to), or null
};
// A tile's SIDE x SIDE outputs (pixel (a, b) at a * SIDE + b, from (oy,
// ox)) of a full strip: the bias, the residual, a tile's activation, then
// the stores of those inside the output.
template <int N, int SIDE>
HEXIR_LANES void finish_winograd_tile(lanes::F32<N> (&acc)[SIDE * SIDE][kWindowVectors<N>], const WinogradOutput& o,
                                      int64_t oy, int64_t ox) {
  using V = lanes::F32<N>;
  constexpr int NV = kWindowVectors<N>, P = SIDE * SIDE;
  const Conv2dPlan& p = *o.job->p;
  if (o.bias)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const V b = lanes::load<N>(o.bias + v * N);
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) acc[i][v] += b;
    }
  bool inside[P];
  int64_t at[P];
  for (int i = 0; i < P; ++i) {
    const int64_t y = oy + i / SIDE, x = ox + i % SIDE;
    inside[i] = y < p.oh && x < p.ow, at[i] = (y * p.ow + x) * p.k;
  }
  if (o.residual)
#pragma GCC unroll 16
    for (int i = 0; i < P; ++i)
      if (inside[i])
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] += lanes::load<N>(o.residual + at[i] + v * N);
  if (o.finish) activate_tile<N, P>(acc, *o.finish);
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i)
    if (inside[i])
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) lanes::store<N>(o.out + at[i] + v * N, acc[i][v]);
}

template <int M>  // as WinogradInputKernel's
struct WinogradOutputKernel {
  static constexpr int S = M + 2;
  template <int N>
  static HEXIR_LANES void run(const WinogradOutput* o) {
    using V = lanes::F32<N>;
    constexpr int NV = kWindowVectors<N>;
    const WinogradJob& job = *o->job;
    const int64_t nr = job.nr, mstride = job.chunk * nr;
    for (int64_t ti = 0; ti < o->nt; ++ti) {
      const int64_t tile = o->t0 + ti, oy = tile / job.tiles_w * M, ox = tile % job.tiles_w * M;
      V acc[M * M][NV];  // pixel (a, b) of the tile at a * M + b
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        const float* m = o->m + ti * nr + v * N;
        V s[M][S];  // [a][j]: the columns transformed
#pragma GCC unroll 6
        for (int j = 0; j < S; ++j) {
          V col[S], t[M];
#pragma GCC unroll 6
          for (int xi = 0; xi < S; ++xi) col[xi] = lanes::load<N>(m + (xi * S + j) * mstride);
          ops::winograd_output_1d(col, t);
#pragma GCC unroll 4
          for (int a = 0; a < M; ++a) s[a][j] = t[a];
        }
#pragma GCC unroll 4
        for (int a = 0; a < M; ++a) {
          V y[M];
          ops::winograd_output_1d(s[a], y);
#pragma GCC unroll 4
          for (int b = 0; b < M; ++b) acc[a * M + b][v] = y[b];
        }
      }
      finish_winograd_tile<N, M>(acc, *o, oy, ox);
    }
  }
};

// A part strip (k not a multiple of NR): the same adds, element by element.
template <int M>
void winograd_output_part(const WinogradJob& job, const float* m, float* out, const float* residual,
                          const float* bias, int64_t t0, int64_t nt, int64_t width) {
  constexpr int S = M + 2;
  const Conv2dPlan& p = *job.p;
  const int64_t mstride = job.chunk * job.nr;
  for (int64_t ti = 0; ti < nt; ++ti) {
    const int64_t tile = t0 + ti, oy = tile / job.tiles_w * M, ox = tile % job.tiles_w * M;
    for (int64_t j = 0; j < width; ++j) {
      float sums[S][S];
      for (int xn = 0; xn < S * S; ++xn) sums[xn / S][xn % S] = m[xn * mstride + ti * job.nr + j];
      for (int a = 0; a < M; ++a)
        for (int b = 0; b < M; ++b) {
          const int64_t y = oy + a, x = ox + b;
          if (y >= p.oh || x >= p.ow) continue;
          float v = ops::winograd_output<M>(sums, a, b);
          if (bias) v += bias[j];
          if (residual) v += residual[(y * p.ow + x) * p.k + j];
          out[(y * p.ow + x) * p.k + j] = v;  // the activation after, as for a full strip's other ones
        }
    }
  }
}

void winograd_task(void* context, int64_t task, int participant) {
  const WinogradJob& job = *static_cast<const WinogradJob*>(context);
  const Conv2dPlan& p = *job.p;
  const int64_t n = task / job.chunks, t0 = task % job.chunks * job.chunk, nt = std::min(job.chunk, job.tiles - t0);
  float* const v = job.pool->scratch(participant);
  float* const m = v + job.slices * job.vstride;  // per strip of the group: [xn][tile][nr]
  const auto activation = static_cast<ops::Activation>(p.epilogue.activation);
  TileFinish finish;
  if (tile_finish_applies(activation)) finish.activation = activation, finish.lo = p.epilogue.a, finish.hi = p.epilogue.b;
  const TileSplit split(nt, widest<WindowMrOf>());
  const int64_t nr = job.nr, m_strip = job.slices * job.chunk * nr;
  const int64_t per_pack = job.prepared ? job.c_pass : std::max<int64_t>(1, kPackFloats / nr);
  alignas(64) float packed[kPackFloats];
  const float* const image = job.x + n * p.h * p.w * p.c;
  float* const image_out = job.out + n * p.oh * p.ow * p.k;
  const float* const image_residual = job.residual ? job.residual + n * p.oh * p.ow * p.k : nullptr;
  for (int64_t s0 = 0; s0 < job.strips; s0 += job.k_group) {
    const int64_t s1 = std::min(job.strips, s0 + job.k_group);
    // One chain over the channels per (tile, xn, output channel), resumed from M per pass over V and
    // per pack of unprepared weights. V is transformed again for each group of strips (its adds are
    // a few percent of the group's multiply-adds).
    for (int64_t c0 = 0; c0 < p.c; c0 += job.c_pass) {
      const int64_t cp = std::min(job.c_pass, p.c - c0);
      const WinogradInput in{&job, image + c0, v, t0, nt, cp};
      if (job.m == 4)
        widest<WinogradInputKernel<4>>(&in);
      else
        widest<WinogradInputKernel<2>>(&in);
      for (int64_t s = s0; s < s1; ++s)
        for (int64_t xn = 0; xn < job.slices; ++xn)
          for (int64_t q0 = c0; q0 < c0 + cp; q0 += per_pack) {
            const int64_t kc = std::min(per_pack, c0 + cp - q0);
            const float* b = packed;
            if (job.prepared)
              b = job.prepared + ((s * job.slices + xn) * p.c + q0) * nr;
            else
              pack_winograd_strip(p, job.w, s, nr, xn, q0, kc, packed);
            for (int64_t i = 0; i < split.count; ++i) {
              const int64_t first = split.begin(i), mr = split.size(i);
              const float* rows[kMaxWindowMr];
              for (int64_t j = 0; j < mr; ++j) rows[j] = v + xn * job.vstride + (first + j) * cp + (q0 - c0);
              float* const out = m + (s - s0) * m_strip + (xn * job.chunk + first) * nr;
              const WindowTile tile{rows, 1, b, 0, kc, out, nr, mr, nr, q0 > 0, nullptr};
              widest<WindowTileKernel>(&tile);
            }
          }
    }
    for (int64_t s = s0; s < s1; ++s) {
      const float* const ms = m + (s - s0) * m_strip;
      const int64_t col0 = s * nr, width = std::min(nr, p.k - col0);
      const float* bias = job.bias ? job.bias + col0 : nullptr;
      const float* residual = image_residual ? image_residual + col0 : nullptr;
      if (width == nr) {
        const WinogradOutput o{&job, ms, image_out + col0, residual, bias, t0, nt,
                               finish.activation != ops::Activation::kNone ? &finish : nullptr};
        if (job.m == 4)
          widest<WinogradOutputKernel<4>>(&o);
        else
          widest<WinogradOutputKernel<2>>(&o);
        if (finish.activation != ops::Activation::kNone || activation == ops::Activation::kNone) continue;
      } else {
        (job.m == 4 ? winograd_output_part<4> : winograd_output_part<2>)(job, ms, image_out + col0, residual, bias,
                                                                          t0, nt, width);
        if (activation == ops::Activation::kNone) continue;
      }
      for (int64_t ti = 0; ti < nt; ++ti) {  // the activation the tiles did not apply, per output row of a tile
        const int64_t tile = t0 + ti, oy = tile / job.tiles_w * job.m, ox = tile % job.tiles_w * job.m;
        for (int64_t y = oy; y < std::min(oy + job.m, p.oh); ++y)
          apply_epilogue(p.epilogue, image_out + (y * p.ow + ox) * p.k + col0, p.k, std::min(job.m, p.ow - ox),
                         width);
      }
    }
  }
}

// The prepared strips are the GEMM's, the window tile's too: their widths must agree.
Status check_window_strip(int64_t nr) {
  if (nr == widest<WindowStripOf>()) return ok_status();
  return internal_error("conv2d: the GEMM's strip of " + std::to_string(nr) + " floats is not the window tile's " +
                        std::to_string(widest<WindowStripOf>()));
}

// The pool for work of `macs` multiply-adds: none (the caller alone) when small.
KernelContext split_for(const KernelContext& context, int64_t macs) {
  return macs < kSerialMacs ? KernelContext{} : context;
}

Status conv2d_winograd(const KernelContext& context, const Dispatch& d, const float* bias, const float* residual,
                       int64_t macs) {
  const Conv2dPlan& p = plan_of<Conv2dPlan>(d);
  const KernelContext split = split_for(context, macs);
  const ThreadPool* pool = pool_of(context);
  const int64_t nr = gemm_tile().nr_max, mr = widest<WindowMrOf>();
  HEXIR_RETURN_IF_ERROR(check_window_strip(nr));
  WinogradJob job{&p, input(d, 0), input(d, 1), bias, residual, static_cast<const float*>(d.prepared), output(d, 0), pool,
                  nr, strips_of(p, nr), 0, 0, 0, 0, p.c, 1, 0};
  job.m = p.winograd, job.slices = winograd_slices(p);
  job.tiles_w = (p.ow + job.m - 1) / job.m;
  job.tiles = (p.oh + job.m - 1) / job.m * job.tiles_w;
  // Tiles a task: up to about four tasks a thread. With all the channels in V and one strip's M, as
  // many as the scratch holds (the form measured up to 256 channels: 12 tiles there); where that is
  // under kWinogradOnePassTiles (past ~320 channels), kWinogradTiles tiles over passes of
  // kWinogradChannels channels, M for as many strips as the rest holds, so each read of U serves
  // them all (at 512 channels the one-pass form fit 6 tiles and streamed U for them: VGG's 512 -> 512
  // at 14 x 14 slower than the window).
  const int64_t floats = kScratchFloatsPerParticipant;
  const int64_t slices = job.slices, fit = (floats / slices - 16) / (p.c + nr);
  const ThreadPool* workers = pool_of(split);
  const int64_t threads = workers ? workers->size() : 1;
  const int64_t share = ((p.n * job.tiles + 4 * threads - 1) / (4 * threads) + mr - 1) / mr * mr;
  // F(4x4, 3x3)'s tiles hold 4 times the outputs and 36 slices: half as many.
  const int64_t most = job.m == 4 ? kWinogradTiles / 2 : kWinogradTiles;
  const int64_t one_pass = job.m == 4 ? kWinogradOnePassTiles / 2 : kWinogradOnePassTiles;
  const int64_t target = std::min((most + mr - 1) / mr * mr, share);
  if (fit >= std::min(target, one_pass)) {
    job.chunk = std::min(fit < mr ? fit : fit / mr * mr, share);
  } else {
    job.chunk = target;
    job.c_pass = std::min(p.c, kWinogradChannels);
    job.k_group = std::clamp<int64_t>((floats - slices * (job.chunk * job.c_pass + 16)) / (slices * job.chunk * nr), 1,
                                      job.strips);
  }
  if (pool == nullptr || pool->scratch(0) == nullptr || slices * (job.chunk * job.c_pass + 16) +
                                                             slices * job.chunk * nr * job.k_group > floats) {
    DepthwiseJob element{&p, input(d, 0), input(d, 1), bias, residual, nullptr, output(d, 0)};
    parallel_for(split, p.n * p.oh, element_row_task, &element);
    return ok_status();
  }
  job.vstride = job.chunk * job.c_pass + 16;  // 64 bytes between the slices: not 4 KiB apart (loads and stores alias)
  job.chunks = (job.tiles + job.chunk - 1) / job.chunk;
  parallel_for_participants(split, p.n * job.chunks, winograd_task, &job);
  return ok_status();
}

// A 1x1 window without padding, one group: a GEMM of the pixels it reads
// (rows of c floats) times the prepared weights as the GEMM's B (strips of
// NR columns per K block: for c up to one block, the dense path's layout
// too). Deeper than one block where the GEMM reads A in place in its
// tile height (AVX2, NEON, portable), or on enough pixels
// (kPackedPointwiseMinPixels): the dense path tiles each output row
// apart, and a 7-pixel row of a 7 x 7 map was a 6-row tile and a 1-row one,
// the latter a quarter of the FMA rate (2 chains where the units want 8 in
// flight): ResNet-50's 1x1 512 -> 2048 and 2048 -> 512 at 7 x 7 ran at
// 60-65 % of the core's peak on AVX2 (Zen 3), 87-95 % in one GEMM.
// At a stride (ResNet's and RegNet's projections to a smaller map) the
// pixels read are gathered first, kGatherFloats at a time (see
// strided_pointwise), where that holds kMinGatherRows of them.
// A gathered chunk of A: 32 KiB on the caller's stack, which also holds the
// GEMM task's own buffers (48 KiB) as the pool's participant 0; up to 341
// channels (ResNet-50's 512- and 1024-channel projections keep the per-row path).
constexpr int64_t kGatherFloats = 8192;
constexpr int64_t kMinGatherRows = 24;  // four 6-row tiles at least per chunk
// Where the GEMM packs A (AVX-512: 12-row tiles, A in place only 8), a 1x1
// deeper than one block is one GEMM from this many output pixels: on a Zen
// 4, 512 -> 1024 and 1024 -> 256 at 14 x 14 0.86-0.89 of the dense path's
// time (95 -> 107 GFLOP/s). At 7 x 7 too, since a packed panel's last tile
// is as tall as its rows (49 pixels were 60 rows of work): ResNeXt's 1024
// -> 2048 0.72-0.86, 2048 -> 512 0.80-0.93, RegNetX's 400 -> 400 0.87, a
// chain of eight 2048 <-> 1024 0.81 (22.0 -> 17.9 ms; onnxruntime 16.6); at
// 5 x 5 0.92-0.96, 4 x 4 the same, 3 x 3 1.07-1.13, so 3 x 3 keeps the
// dense path.
constexpr int64_t kPackedPointwiseMinPixels = 16;

bool pointwise_gemm(const Conv2dPlan& p) {
  static_assert(kConvChannelBlock == 256, "the dense path's channel blocks are the GEMM's K blocks");
  const bool strided = p.stride_h != 1 || p.stride_w != 1;
  // No padding: every pixel a window reads is inside ((oh - 1) * stride_h <
  // h; at stride 1, oh == h).
  return p.kh == 1 && p.kw == 1 && p.pad_top == 0 && p.pad_left == 0 && (p.oh - 1) * p.stride_h < p.h &&
         (p.ow - 1) * p.stride_w < p.w && p.groups == 1 && (!strided || p.c * kMinGatherRows <= kGatherFloats) &&
         (p.c <= gemm_k_block() || gemm_reads_a_in_place() || p.n * p.oh * p.ow >= kPackedPointwiseMinPixels);
}

// pointwise_gemm's GEMM over `rows` output pixels from pixel `first` (in the
// batch's order), their input pixels at a, c floats apart.
void pointwise_rows(const KernelContext& context, const Conv2dPlan& p, const Dispatch& d, const float* a,
                    int64_t first, int64_t rows) {
  GemmArgs g{rows, p.k, p.c, a, p.c, nullptr, 0, output(d, 0) + first * p.k, p.k};
  g.col_bias = p.has_bias ? input(d, 2) : nullptr;
  g.epilogue = p.epilogue.activation != 0 ? &p.epilogue : nullptr;
  g.packed_b = static_cast<const float*>(d.prepared);
  if (p.has_residual) g.residual = input(d, 3) + first * p.k, g.ldr = p.k;
  gemm(context, g);
}

// pointwise_gemm at a stride: balanced chunks of output pixels, each one's
// input pixels copied together, then one GEMM per chunk (threaded inside).
// Tiled per output row in the dense path, a 7 x 7 map's rows were tiles of 6
// and 1 pixels reading all of B per row: regnet_x_400mf's 160 -> 400 at
// 14 x 14 / 2 ran at 16 GFLOP/s (onnxruntime's node in a third of the time).
void strided_pointwise(const KernelContext& context, const Conv2dPlan& p, const Dispatch& d) {
  const int64_t total = p.n * p.oh * p.ow, most = kGatherFloats / p.c;  // pointwise_gemm: most >= kMinGatherRows
  const int64_t chunks = (total + most - 1) / most;
  const int64_t rows = (total + chunks - 1) / chunks;  // <= most
  const float* x = input(d, 0);
  const size_t pixel_bytes = static_cast<size_t>(p.c) * sizeof(float);
  alignas(64) float a[kGatherFloats];
  int64_t n = 0, oy = 0, ox = 0;  // the next output pixel's place
  for (int64_t first = 0; first < total; first += rows) {
    const int64_t count = std::min(rows, total - first);
    for (int64_t q = 0; q < count; ++q) {
      std::memcpy(a + q * p.c, x + ((n * p.h + oy * p.stride_h) * p.w + ox * p.stride_w) * p.c, pixel_bytes);
      if (++ox == p.ow) {
        ox = 0;
        if (++oy == p.oh) oy = 0, ++n;
      }
    }
    pointwise_rows(context, p, d, a, first, count);
  }
}

}  // namespace

uint64_t conv2d_channels_last_prepared_bytes(const Dispatch& d) {
  const Conv2dPlan& p = plan_of<Conv2dPlan>(d);
  if (d.operands[1] == nullptr || p.k_per_group == 0) return 0;
  if (p.winograd)
    return static_cast<uint64_t>(strips_of(p, gemm_tile().nr_max) * winograd_slices(p) * p.c * gemm_tile().nr_max) *
           sizeof(float);
  if (depthwise_pointwise(p)) return 0;  // read as stored
  if (ops::conv2d_is_depthwise(p)) return static_cast<uint64_t>(dw_blocks(p) * p.kh * p.kw * kDwBlock) * sizeof(float);
  if (small_groups(p, vector_lanes())) return static_cast<uint64_t>(p.kh * p.kw * p.c_per_group * p.k) * sizeof(float);
  const int64_t nr = gemm_tile().nr_max;
  return static_cast<uint64_t>(p.groups * p.kh * p.kw * strips_of(p, nr) * p.c_per_group * nr) * sizeof(float);
}

void conv2d_channels_last_prepare(const Dispatch& d, void* out) {
  const Conv2dPlan& p = plan_of<Conv2dPlan>(d);
  if (p.winograd) {  // [s][xi nu][c][nr]
    const int64_t nr = gemm_tile().nr_max;
    float* dst = static_cast<float*>(out);
    for (int64_t s = 0; s < strips_of(p, nr); ++s)
      for (int64_t xn = 0; xn < winograd_slices(p); ++xn, dst += p.c * nr)
        pack_winograd_strip(p, input(d, 1), s, nr, xn, 0, p.c, dst);
    return;
  }
  if (ops::conv2d_is_depthwise(p)) return dw_pack(p, input(d, 1), 0, dw_blocks(p), static_cast<float*>(out));
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
  if (ops::conv2d_channels_last_patch(p)) {  // [s][patch][nr]: the same bytes in another order
    for (int64_t s = 0; s < strips; ++s, dst += taps * p.c * nr) pack_patch_strip(p, input(d, 1), s, nr, dst);
    return;
  }
  if (pointwise_gemm(p)) {  // the GEMM's prepared B: per K block, its strips
    for (int64_t c0 = 0; c0 < p.c; c0 += gemm_k_block()) {
      const int64_t kc = std::min(gemm_k_block(), p.c - c0);
      for (int64_t s = 0; s < strips; ++s, dst += kc * nr) pack_tap_strip(p, input(d, 1), 0, 0, s, nr, c0, kc, dst);
    }
    return;
  }
  for (int64_t g = 0; g < p.groups; ++g)
    for (int64_t s = 0; s < strips; ++s)
      for (int64_t t = 0; t < taps; ++t) {
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
  if (p.winograd) return conv2d_winograd(context, d, bias, residual, macs);
  if (depthwise_pointwise(p)) {
    ChannelScaleJob job{&p, input(d, 0), input(d, 1), bias, residual, output(d, 0),
                        std::max<int64_t>(1, kScaleBlockFloats / p.c), p.n * p.h * p.w};
    parallel_for(split_for(context, macs), (job.pixels + job.pixels_per_task - 1) / job.pixels_per_task,
                 channel_scale_task, &job);
    return ok_status();
  }
  if (ops::conv2d_is_depthwise(p)) {
    DepthwiseJob job{&p, input(d, 0), input(d, 1), bias, residual, static_cast<const float*>(d.prepared),
                     output(d, 0)};
    const KernelContext split = split_for(context, macs);
    if (!job.prepared && p.kh * p.kw > kDwStackTaps) {
      parallel_for(split, p.n * p.oh, element_row_task, &job);
      return ok_status();
    }
    const auto activation = static_cast<ops::Activation>(p.epilogue.activation);
    if (tile_finish_applies(activation)) job.finish.activation = activation, job.finish.lo = p.epilogue.a, job.finish.hi = p.epilogue.b;
    job.chunk = kDwChunkVectors * widest<LaneCount>();
    const int64_t chunks = (p.c + job.chunk - 1) / job.chunk;
    const int64_t parts = row_parts(split, p.n * p.oh, chunks);
    job.chunks_per_part = (chunks + parts - 1) / parts;
    job.parts = (chunks + job.chunks_per_part - 1) / job.chunks_per_part;
    parallel_for(split, p.n * p.oh * job.parts, depthwise_task, &job);
    return ok_status();
  }
  // pointwise_gemm: the bias, residual and activation (tile_finish_applies)
  // finish in the register tile. At stride 1 the batch's pixels are one A.
  if (d.prepared != nullptr && pointwise_gemm(p)) {
    if (p.stride_h != 1 || p.stride_w != 1) {
      strided_pointwise(context, p, d);
      return ok_status();
    }
    pointwise_rows(context, p, d, input(d, 0), 0, p.n * p.oh * p.ow);
    return ok_status();
  }
  if (ops::conv2d_channels_last_patch(p)) {
    const GemmTile tile = gemm_tile();
    PatchJob job{&p, input(d, 0), input(d, 1), bias, residual, static_cast<const float*>(d.prepared), output(d, 0),
                 tile, strips_of(p, tile.nr_max)};
    parallel_for(split_for(context, macs), p.n * p.oh, patch_task, &job);
    return ok_status();
  }
#ifdef HEXIR_CL_X86
  if (d.prepared != nullptr && small_groups(p, vector_lanes())) {
    const int64_t lanes = vector_lanes(), vectors = (p.k + lanes - 1) / lanes;
    SmallGroupJob job{&p, input(d, 0), static_cast<const float*>(d.prepared), bias, residual, output(d, 0)};
    const KernelContext split = split_for(context, macs);
    const int64_t parts = row_parts(split, p.n * p.oh, vectors);
    job.vectors_per_part = (vectors + parts - 1) / parts;
    job.parts = (vectors + job.vectors_per_part - 1) / job.vectors_per_part;
    parallel_for(split, p.n * p.oh * job.parts, small_group_row(lanes, p.c_per_group), &job);
    return ok_status();
  }
#endif
  const GemmTile tile = gemm_tile();
  HEXIR_RETURN_IF_ERROR(check_window_strip(tile.nr_max));
  DenseJob job{&p, input(d, 0), input(d, 1), bias, residual, static_cast<const float*>(d.prepared), output(d, 0), tile,
               strips_of(p, tile.nr_max)};
  const KernelContext split = split_for(context, macs);
  if (p.kh * p.kw * p.c_per_group * job.strips * tile.nr_max * static_cast<int64_t>(sizeof(float)) > kStripMajorBytes) {
    // About four tasks per thread: the rows split into blocks when strips are few.
    const ThreadPool* pool = pool_of(split);
    const int64_t threads = pool ? pool->size() : 1, strip_tasks = p.n * p.groups * job.strips;
    job.row_blocks = std::clamp<int64_t>((4 * threads + strip_tasks - 1) / strip_tasks, 1, p.oh);
    job.rows_per_block = (p.oh + job.row_blocks - 1) / job.row_blocks;
    job.row_blocks = (p.oh + job.rows_per_block - 1) / job.rows_per_block;
    parallel_for(split, strip_tasks * job.row_blocks, dense_strip_task, &job);
    return ok_status();
  }
  // Rows of a narrow map together (kTaskPixels at least): their pixels share
  // tiles (a 7 x 7 map's rows were tiles of 4 and 3 pixels each).
  job.rows_per_block = std::clamp<int64_t>((kTaskPixels + p.ow - 1) / p.ow, 1, p.oh);
  job.row_blocks = (p.oh + job.rows_per_block - 1) / job.rows_per_block;
  const int64_t rows = p.n * job.row_blocks * p.groups;
  const int64_t parts = row_parts(split, rows, job.strips);
  job.strips_per_part = (job.strips + parts - 1) / parts;
  job.parts = (job.strips + job.strips_per_part - 1) / job.strips_per_part;
  parallel_for(split, rows * job.parts, dense_task, &job);
  return ok_status();
}

}  // namespace hexir::hal::cpu::internal
