// Windows over images. conv2d: a direct kernel, bit-identical to the cpu's
// im2col + GEMM because each element sums its products in the GEMM's order
// (--fmad=false). separable_conv2d, conv_transpose, the 2-D pools and resize:
// direct kernels too.
#include "common.cuh"

// acc plus weight x input over one channel's window at (oy, ox), ky then kx
// (a position in the padding contributes weight x 0).
__device__ inline float conv2d_window(const hexir::ops::Conv2dPlan& q, const float* plane, const float* taps,
                                      int64_t oy, int64_t ox, float acc) {
  for (int64_t ky = 0; ky < q.kh; ++ky) {
    const int64_t iy = oy * q.stride_h - q.pad_top + ky * q.dilation_h;
    const bool row_inside = iy >= 0 && iy < q.h;
    for (int64_t kx = 0; kx < q.kw; ++kx) {
      const int64_t ix = ox * q.stride_w - q.pad_left + kx * q.dilation_w;
      const float v = (row_inside && ix >= 0 && ix < q.w) ? plane[iy * q.w + ix] : 0.0f;
      acc += taps[ky * q.kw + kx] * v;
    }
  }
  return acc;
}

// One thread per output element (n, k, oy, ox): sums weight x input over the
// group's channels, then ky, then kx, from 0 (a position in the padding
// contributes weight x 0, as the cpu's zero-filled patch matrix does), and
// adds the bias at the end.
extern "C" __global__ void hexir_conv2d(Conv2dParams p) {
  const hexir::ops::Conv2dPlan& q = p.plan;
  const int64_t spatial = q.oh * q.ow;
  const int64_t total = q.n * q.k * spatial;
  const int64_t window = q.c_per_group * q.kh * q.kw;
  const int64_t stride = hexir_kernels::global_stride();
  if (q.channels_last) {  // out [n, oy, ox, k]: the cpu kernel's order (ops::conv2d_channels_last_element)
    for (int64_t i = hexir_kernels::global_index(); i < total; i += stride) {
      const int64_t k = i % q.k, ox = (i / q.k) % q.ow, oy = (i / (q.k * q.ow)) % q.oh, image = i / (q.k * spatial);
      float acc = hexir::ops::conv2d_channels_last_element(q, p.x + image * q.h * q.w * q.c, p.w, k, oy, ox);
      if (q.has_bias) acc += p.bias[k];
      if (q.has_residual) acc += p.residual[i];
      p.out[i] = hexir::ops::apply_epilogue(q.epilogue, acc);
    }
    return;
  }
  for (int64_t i = hexir_kernels::global_index(); i < total; i += stride) {
    const int64_t ox = i % q.ow;
    const int64_t oy = (i / q.ow) % q.oh;
    const int64_t k = (i / spatial) % q.k;
    const int64_t image = i / (spatial * q.k);
    const int64_t group = k / q.k_per_group;
    const float* x = p.x + (image * q.c + group * q.c_per_group) * q.h * q.w;
    const float* w = p.w + k * window;
    float acc = 0.0f;
    for (int64_t c = 0; c < q.c_per_group; ++c)
      acc = conv2d_window(q, x + c * q.h * q.w, w + c * q.kh * q.kw, oy, ox, acc);
    if (q.has_bias) acc += p.bias[k];
    if (q.has_residual) acc += p.residual[i];
    p.out[i] = hexir::ops::apply_epilogue(q.epilogue, acc);
  }
}

// separable_conv2d: one thread per output element (n, k, oy, ox); each
// depthwise value it reads is computed as hexir_conv2d computes it (taps in
// (ky, kx) order from 0, padding as 0, then the bias and its activation),
// then summed over the channels in order as the 1x1's GEMM does, then the
// bias, the residual and the activation.
extern "C" __global__ void hexir_separable_conv2d(SeparableConv2dParams p) {
  const hexir::ops::Conv2dPlan& dw = p.plan.depthwise;
  const hexir::ops::Conv2dPlan& pw = p.plan.pointwise;
  const int64_t spatial = pw.oh * pw.ow;
  const int64_t total = pw.n * pw.k * spatial;
  const int64_t stride = hexir_kernels::global_stride();
  for (int64_t i = hexir_kernels::global_index(); i < total; i += stride) {
    const int64_t ox = i % pw.ow;
    const int64_t oy = (i / pw.ow) % pw.oh;
    const int64_t k = (i / spatial) % pw.k;
    const int64_t image = i / (spatial * pw.k);
    float acc = 0.0f;
    for (int64_t c = 0; c < dw.c; ++c) {
      float v = conv2d_window(dw, p.x + (image * dw.c + c) * dw.h * dw.w, p.dw_w + c * dw.kh * dw.kw, oy, ox, 0.0f);
      if (dw.has_bias) v += p.dw_bias[c];
      v = hexir::ops::apply_epilogue(dw.epilogue, v);
      acc += p.pw_w[k * dw.c + c] * v;
    }
    if (pw.has_bias) acc += p.pw_bias[k];
    if (pw.has_residual) acc += p.residual[i];
    p.out[i] = hexir::ops::apply_epilogue(pw.epilogue, acc);
  }
}

// max_pool / average_pool: one thread per output element, the taps inside the
// input only (ops::pool_tap_range), in the cpu kernel's order and arithmetic.
// Channels-last: output element i is (n, oy, ox, c), a tap (y, x) at (y * w + x) * C.
// Output element i of a pool: its pixel (ox, oy) and where its channel's
// image starts in x (channels-last: taps (y, x) at (y * w + x) * C from there).
template <typename T>
__device__ inline const T* pool_output_image(const hexir::ops::Pool2dPlan& q, const T* x, int64_t i, int64_t* ox,
                                      int64_t* oy) {
  if (q.channels_last) {
    const int64_t pixel = i / q.c;
    *ox = pixel % q.ow, *oy = (pixel / q.ow) % q.oh;
    return x + pixel / (q.ow * q.oh) * q.h * q.w * q.c + i % q.c;
  }
  *ox = i % q.ow, *oy = (i / q.ow) % q.oh;
  return x + i / (q.ow * q.oh) * q.h * q.w;
}

extern "C" __global__ void hexir_pool2d(Pool2dParams p) {
  const hexir::ops::Pool2dPlan& q = p.plan;
  const int64_t total = q.n * q.c * q.oh * q.ow;
  const int64_t stride = hexir_kernels::global_stride();
  const int64_t col = q.channels_last ? q.c : 1;  // floats between neighbouring taps in a row
  for (int64_t i = hexir_kernels::global_index(); i < total; i += stride) {
    int64_t ox, oy;
    const float* image = pool_output_image(q, p.x, i, &ox, &oy);
    const int64_t y0 = oy * q.stride_h - q.pad_top, x0 = ox * q.stride_w - q.pad_left;
    int64_t ky0, ky1, kx0, kx1;
    hexir::ops::pool_tap_range(y0, q.dilation_h, q.kh, 0, q.h, &ky0, &ky1);
    hexir::ops::pool_tap_range(x0, q.dilation_w, q.kw, 0, q.w, &kx0, &kx1);
    if (q.is_max) {
      float m = hexir_kernels::negative_infinity();
      for (int64_t ky = ky0; ky < ky1; ++ky) {
        const int64_t row = (y0 + ky * q.dilation_h) * q.w + x0;
        for (int64_t kx = kx0; kx < kx1; ++kx) {
          const float v = image[(row + kx * q.dilation_w) * col];
          if (v > m || v != v) m = v;  // NaN sticks: nothing compares greater
        }
      }
      p.out[i] = m;
      continue;
    }
    double sum = 0.0;
    for (int64_t ky = ky0; ky < ky1; ++ky) {
      const int64_t row = (y0 + ky * q.dilation_h) * q.w + x0;
      for (int64_t kx = kx0; kx < kx1; ++kx) sum += image[(row + kx * q.dilation_w) * col];
    }
    int64_t count = (ky1 - ky0) * (kx1 - kx0);
    if (q.count_include_pad) {
      int64_t py0, py1, px0, px1;
      hexir::ops::pool_tap_range(y0, q.dilation_h, q.kh, -q.pad_top, q.h + q.pad_bottom, &py0, &py1);
      hexir::ops::pool_tap_range(x0, q.dilation_w, q.kw, -q.pad_left, q.w + q.pad_right, &px0, &px1);
      count = (py1 - py0) * (px1 - px0);
    }
    p.out[i] = static_cast<float>(sum / static_cast<double>(count));  // no taps: 0/0, NaN
  }
}

// max_pool of u8: the taps inside the input, as the cpu kernel.
extern "C" __global__ void hexir_max_pool_u8(MaxPoolU8Params p) {
  const hexir::ops::Pool2dPlan& q = p.plan;
  const int64_t total = q.n * q.c * q.oh * q.ow;
  const int64_t stride = hexir_kernels::global_stride();
  const int64_t col = q.channels_last ? q.c : 1;
  for (int64_t i = hexir_kernels::global_index(); i < total; i += stride) {
    int64_t ox, oy;
    const uint8_t* image = pool_output_image(q, p.x, i, &ox, &oy);
    const int64_t y0 = oy * q.stride_h - q.pad_top, x0 = ox * q.stride_w - q.pad_left;
    int64_t ky0, ky1, kx0, kx1;
    hexir::ops::pool_tap_range(y0, q.dilation_h, q.kh, 0, q.h, &ky0, &ky1);
    hexir::ops::pool_tap_range(x0, q.dilation_w, q.kw, 0, q.w, &kx0, &kx1);
    uint8_t m = 0;
    for (int64_t ky = ky0; ky < ky1; ++ky) {
      const int64_t row = (y0 + ky * q.dilation_h) * q.w + x0;
      for (int64_t kx = kx0; kx < kx1; ++kx) {
        const uint8_t v = image[(row + kx * q.dilation_w) * col];
        m = v > m ? v : m;
      }
    }
    p.out[i] = m;
  }
}

// resize: one thread per output element, the cpu kernel's arithmetic (double).
extern "C" __global__ void hexir_resize(ResizeParams p) {
  const hexir::ops::ResizePlan& q = p.plan;
  const int64_t total = q.n * q.c * q.oh * q.ow;
  const int64_t stride = hexir_kernels::global_stride();
  for (int64_t i = hexir_kernels::global_index(); i < total; i += stride) {
    const int64_t ox = i % q.ow, oy = (i / q.ow) % q.oh, plane = i / (q.ow * q.oh);
    const float* image = p.x + plane * q.h * q.w;
    const double sy = hexir::ops::resize_source(q.coordinate_mode, oy, q.scale_h, q.h, q.oh);
    const double sx = hexir::ops::resize_source(q.coordinate_mode, ox, q.scale_w, q.w, q.ow);
    if (q.mode == 0) {
      p.out[i] = image[hexir::ops::resize_nearest(q.nearest_mode, sy, q.h) * q.w +
                       hexir::ops::resize_nearest(q.nearest_mode, sx, q.w)];
      continue;
    }
    int64_t y0, y1, x0, x1;
    double dy, dx;
    hexir::ops::resize_linear_taps(sy, q.h, &y0, &y1, &dy);
    hexir::ops::resize_linear_taps(sx, q.w, &x0, &x1, &dx);
    p.out[i] = static_cast<float>(hexir::ops::resize_blend(
        image[y0 * q.w + x0], image[y0 * q.w + x1], image[y1 * q.w + x0], image[y1 * q.w + x1], dy, dx));
  }
}

// conv_transpose: one thread per output element, the cpu kernel's loop (ops::conv_transpose_element).
extern "C" __global__ void hexir_conv_transpose(ConvTransposeParams p) {
  const hexir::ops::ConvTransposePlan& q = p.plan;
  const int64_t total = q.n * q.k * q.oh * q.ow;
  const int64_t stride = hexir_kernels::global_stride();
  for (int64_t i = hexir_kernels::global_index(); i < total; i += stride) {
    const int64_t ox = i % q.ow, oy = (i / q.ow) % q.oh, k = (i / (q.ow * q.oh)) % q.k,
                  n = i / (q.ow * q.oh * q.k);
    const float v = hexir::ops::conv_transpose_element(q, p.x + n * q.c * q.h * q.w, p.w, k / q.k_per_group,
                                                       k % q.k_per_group, oy, ox);
    p.out[i] = p.bias ? v + p.bias[k] : v;
  }
}
