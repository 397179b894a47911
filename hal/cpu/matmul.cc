// numpy.matmul for f32 (one GEMM per batch element, batch geometry from the
// MatmulPlan), conv2d (a GEMM packing its patches straight from the image, the
// bias as its epilogue; depthwise in spatial.cc) and the 2-D pools.
#include <algorithm>
#include <cstring>
#include <limits>

#include "kernel_util.h"
#include "thread_pool.h"

namespace hexir::hal::cpu::internal {

Status matmul(const KernelContext& context, const Dispatch& d) {
  const ops::MatmulPlan& p = plan_of<ops::MatmulPlan>(d);
  if (p.batch_count == 0 || p.m == 0 || p.n == 0) return ok_status();
  const float* pa = input(d, 0);
  const float* pb = input(d, 1);
  float* pc = output(d, 0);
  const float* bias = p.has_bias ? input(d, 2) : nullptr;
  const ops::Epilogue* epilogue = p.epilogue.activation != 0 ? &p.epilogue : nullptr;
  int64_t index[kMaxRank] = {};
  for (int64_t batch = 0; batch < p.batch_count; ++batch) {
    int64_t a_offset = 0, b_offset = 0;
    for (int32_t i = 0; i < p.batch_rank; ++i) {
      a_offset += index[i] * p.a_stride[i];
      b_offset += index[i] * p.b_stride[i];
    }
    GemmArgs args{p.m, p.n, p.k, pa + a_offset, p.k, pb + b_offset, p.n, pc + batch * p.m * p.n, p.n};
    args.col_bias = bias;
    args.epilogue = epilogue;
    gemm(context, args);
    next_index(index, p.batch_dims, p.batch_rank);
  }
  return ok_status();
}

namespace {

// Implicit im2col: the patch matrix of one group of one image, row (c, ky, kx)
// and column (oy, ox), zero where the window reaches into the padding, is
// produced strip by strip as the GEMM packs it; it never exists whole.
struct PatchSource {
  const ops::Conv2dPlan* p;
  const float* image;  // the group's first channel
};

void pack_patches(const void* context, int64_t k0, int64_t kc, int64_t j0, int64_t nr, int64_t width, float* out) {
  const PatchSource& src = *static_cast<const PatchSource*>(context);
  const ops::Conv2dPlan& p = *src.p;
  const int64_t taps = p.kh * p.kw;
  for (int64_t r = 0; r < kc; ++r) {
    const int64_t row = k0 + r;
    const int64_t c = row / taps, ky = (row % taps) / p.kw, kx = row % p.kw;
    const float* plane = src.image + c * p.h * p.w;
    float* dst = out + r * width;
    int64_t oy = j0 / p.ow, ox = j0 % p.ow;
    for (int64_t j = 0; j < nr;) {
      // One run along an output row.
      const int64_t run = std::min(nr - j, p.ow - ox);
      const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      if (iy < 0 || iy >= p.h) {
        for (int64_t t = 0; t < run; ++t) dst[j + t] = 0.0f;
      } else {
        const float* in = plane + iy * p.w;
        const int64_t shift = kx * p.dilation_w - p.pad_left;  // ix = (ox + t) * stride_w + shift
        // The part of the run whose taps land inside the row: t in [lo, hi).
        const int64_t first = ox * p.stride_w + shift;
        const int64_t lo = std::clamp<int64_t>(first >= 0 ? 0 : (-first + p.stride_w - 1) / p.stride_w, 0, run);
        const int64_t hi = std::clamp<int64_t>(first > p.w - 1 ? 0 : (p.w - 1 - first) / p.stride_w + 1, lo, run);
        float* out_run = dst + j;
        for (int64_t t = 0; t < lo; ++t) out_run[t] = 0.0f;
        if (p.stride_w == 1) {
          std::memcpy(out_run + lo, in + first + lo, static_cast<size_t>(hi - lo) * sizeof(float));
        } else {
          const float* src = in + first;
          for (int64_t t = lo; t < hi; ++t) out_run[t] = src[t * p.stride_w];
        }
        for (int64_t t = hi; t < run; ++t) out_run[t] = 0.0f;
      }
      j += run;
      ox = 0;
      ++oy;
    }
    for (int64_t j = nr; j < width; ++j) dst[j] = 0.0f;
  }
}

}  // namespace

// Per image and group: out[k_g, oh*ow] = W[k_g, c_g*kh*kw] x col[c_g*kh*kw, oh*ow],
// then the bias and the fused activation. Each output sums its products in
// (c, ky, kx) order.
Status conv2d(const KernelContext& context, const Dispatch& d) {
  const ops::Conv2dPlan& p = plan_of<ops::Conv2dPlan>(d);
  if (ops::conv2d_is_depthwise(p)) return depthwise_conv2d(context, d);
  const ops::Epilogue* epilogue = p.epilogue.activation != 0 ? &p.epilogue : nullptr;
  const float* x = input(d, 0);
  const float* w = input(d, 1);
  const float* bias = p.has_bias ? input(d, 2) : nullptr;
  float* out = output(d, 0);
  const int64_t spatial = p.oh * p.ow;
  const int64_t patch = p.c_per_group * p.kh * p.kw;
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t g = 0; g < p.groups; ++g) {
      const float* image = x + (n * p.c + g * p.c_per_group) * p.h * p.w;
      float* result = out + (n * p.k + g * p.k_per_group) * spatial;
      GemmArgs args{p.k_per_group, spatial, patch, w + g * p.k_per_group * patch, patch,
                    image,  // 1x1, stride 1, no padding: the image is the patch matrix
                    spatial, result, spatial, bias ? bias + g * p.k_per_group : nullptr};
      args.epilogue = epilogue;
      const PatchSource source{&p, image};
      if (!ops::conv2d_is_plain_gemm(p)) {
        args.pack_b = pack_patches;
        args.pack_context = &source;
      }
      gemm(context, args);
    }
  }
  return ok_status();
}

// max_pool / average_pool: per output element, only the taps inside the
// input (ops::pool_tap_range), so the work is bounded by the input, not by
// the kernel size; the count_include_pad divisor is counted the same way.
Status pool2d(const KernelContext&, const Dispatch& d) {
  const ops::Pool2dPlan& p = plan_of<ops::Pool2dPlan>(d);
  const float* x = input(d, 0);
  float* out = output(d, 0);
  for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
    const float* image = x + plane * p.h * p.w;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      const int64_t y0 = oy * p.stride_h - p.pad_top;
      int64_t ky0, ky1;
      ops::pool_tap_range(y0, p.dilation_h, p.kh, 0, p.h, &ky0, &ky1);
      int64_t py0 = 0, py1 = 0;
      if (!p.is_max && p.count_include_pad)
        ops::pool_tap_range(y0, p.dilation_h, p.kh, -p.pad_top, p.h + p.pad_bottom, &py0, &py1);
      for (int64_t ox = 0; ox < p.ow; ++ox, ++out) {
        const int64_t x0 = ox * p.stride_w - p.pad_left;
        int64_t kx0, kx1;
        ops::pool_tap_range(x0, p.dilation_w, p.kw, 0, p.w, &kx0, &kx1);
        if (p.is_max) {
          float m = -std::numeric_limits<float>::infinity();
          for (int64_t ky = ky0; ky < ky1; ++ky) {
            const int64_t row = (y0 + ky * p.dilation_h) * p.w + x0;  // + kx * dilation_w is inside
            for (int64_t kx = kx0; kx < kx1; ++kx) {
              const float v = image[row + kx * p.dilation_w];
              if (v > m || v != v) m = v;  // NaN sticks: nothing compares greater
            }
          }
          *out = m;
          continue;
        }
        double sum = 0.0;
        for (int64_t ky = ky0; ky < ky1; ++ky) {
          const int64_t row = (y0 + ky * p.dilation_h) * p.w + x0;
          for (int64_t kx = kx0; kx < kx1; ++kx) sum += image[row + kx * p.dilation_w];
        }
        int64_t count = (ky1 - ky0) * (kx1 - kx0);
        if (p.count_include_pad) {
          int64_t px0, px1;
          ops::pool_tap_range(x0, p.dilation_w, p.kw, -p.pad_left, p.w + p.pad_right, &px0, &px1);
          count = (py1 - py0) * (px1 - px0);
        }
        *out = static_cast<float>(sum / static_cast<double>(count));  // no taps: 0/0, NaN
      }
    }
  }
  return ok_status();
}

}  // namespace hexir::hal::cpu::internal
