// The spatial kernels that are not a plain GEMM: depthwise conv2d (called by
// conv2d), resize and conv_transpose.
#include <algorithm>

#include "kernel_util.h"
#include "thread_pool.h"

namespace hexir::hal::cpu::internal {
namespace {

// Depthwise: one channel plane per task. Each output row adds its taps in
// (ky, kx) order, one tap over the whole row at a time (unit stride: it
// vectorizes), skipping taps that fall in the padding; then the bias.
struct DepthwiseJob {
  const ops::Conv2dPlan* p;
  const float *x, *w, *bias;
  float* out;
};

void depthwise_plane(void* context, int64_t plane) {
  const DepthwiseJob& job = *static_cast<const DepthwiseJob*>(context);
  const ops::Conv2dPlan& p = *job.p;
  const int64_t channel = plane % p.c;
  const float* image = job.x + plane * p.h * p.w;
  const float* taps = job.w + channel * p.kh * p.kw;
  float* result = job.out + plane * p.oh * p.ow;
  for (int64_t oy = 0; oy < p.oh; ++oy) {
    float* __restrict row = result + oy * p.ow;
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
  }
}

}  // namespace

Status depthwise_conv2d(const KernelContext& context, const Dispatch& d) {
  const ops::Conv2dPlan& p = plan_of<ops::Conv2dPlan>(d);
  DepthwiseJob job{&p, input(d, 0), input(d, 1), p.has_bias ? input(d, 2) : nullptr, output(d, 0)};
  const double taps = static_cast<double>(p.n * p.c) * static_cast<double>(p.oh * p.ow * p.kh * p.kw);
  if (taps < 2e5) {
    for (int64_t plane = 0; plane < p.n * p.c; ++plane) depthwise_plane(&job, plane);
  } else {
    parallel_for(context, p.n * p.c, depthwise_plane, &job);
  }
  return ok_status();
}

// resize: the source coordinate of each output row and column (ops::resize_source,
// in double), then the nearest element or the blend of the two neighbours per
// dim, in double.
Status resize(const KernelContext&, const Dispatch& d) {
  const ops::ResizePlan& p = plan_of<ops::ResizePlan>(d);
  const float* x = input(d, 0);
  float* out = output(d, 0);
  for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
    const float* image = x + plane * p.h * p.w;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      const double sy = ops::resize_source(p.coordinate_mode, oy, p.scale_h, p.h, p.oh);
      if (p.mode == 0) {
        const float* row = image + ops::resize_nearest(p.nearest_mode, sy, p.h) * p.w;
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          const double sx = ops::resize_source(p.coordinate_mode, ox, p.scale_w, p.w, p.ow);
          *out++ = row[ops::resize_nearest(p.nearest_mode, sx, p.w)];
        }
        continue;
      }
      int64_t y0, y1;
      double dy;
      ops::resize_linear_taps(sy, p.h, &y0, &y1, &dy);
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        const double sx = ops::resize_source(p.coordinate_mode, ox, p.scale_w, p.w, p.ow);
        int64_t x0, x1;
        double dx;
        ops::resize_linear_taps(sx, p.w, &x0, &x1, &dx);
        *out++ = static_cast<float>(ops::resize_blend(image[y0 * p.w + x0], image[y0 * p.w + x1],
                                                      image[y1 * p.w + x0], image[y1 * p.w + x1], dy, dx));
      }
    }
  }
  return ok_status();
}

// conv_transpose: each output element gathers its taps (ops::conv_transpose_element).
Status conv_transpose(const KernelContext&, const Dispatch& d) {
  const ops::ConvTransposePlan& p = plan_of<ops::ConvTransposePlan>(d);
  const float* x = input(d, 0);
  const float* w = input(d, 1);
  const float* bias = p.has_bias ? input(d, 2) : nullptr;
  float* out = output(d, 0);
  for (int64_t n = 0; n < p.n; ++n) {
    const float* image = x + n * p.c * p.h * p.w;
    for (int64_t k = 0; k < p.k; ++k) {
      const int64_t g = k / p.k_per_group, kk = k % p.k_per_group;
      const float b = bias ? bias[k] : 0.0f;
      for (int64_t oy = 0; oy < p.oh; ++oy)
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          const float v = ops::conv_transpose_element(p, image, w, g, kk, oy, ox);
          *out++ = bias ? v + b : v;
        }
    }
  }
  return ok_status();
}

}  // namespace hexir::hal::cpu::internal
