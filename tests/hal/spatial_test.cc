// conv2d (direct, grouped, depthwise), separable_conv2d, max_pool and
// average_pool, resize and conv_transpose on the cpu (hal/cpu/matmul.cc,
// spatial.cc) against references written here, independently of hal/cpu and
// of the plans: plain loops over multi-indices, in double.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "cpu_isa.h"
#include "reference_util.h"

namespace hexir::hal::testing {
namespace {

using ops::OpId;

// ---- conv2d ---------------------------------------------------------------------

struct Conv {
  std::string name;
  Dims x, w;
  bool bias;
  Dims strides, pads, dilations;  // empty: the default
  int64_t groups;
};

// The direct definition: out[n,k,oy,ox] = bias[k] + sum over (c, ky, kx) of the
// group's input channels, zero outside the image.
std::vector<double> conv_reference(const HostTensor& x, const HostTensor& w, const HostTensor* bias,
                                   int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t dh, int64_t dw,
                                   int64_t groups, int64_t oh, int64_t ow) {
  const int64_t N = x.dims[0], C = x.dims[1], H = x.dims[2], W = x.dims[3];
  const int64_t K = w.dims[0], CG = w.dims[1], KH = w.dims[2], KW = w.dims[3];
  const int64_t KG = K / groups;
  REQUIRE(CG * groups == C);
  std::vector<double> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t g = k / KG;
          double sum = bias ? bias->at(k) : 0.0;
          for (int64_t c = 0; c < CG; ++c)
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                const int64_t iy = oy * sh - pt + ky * dh, ix = ox * sw - pl + kx * dw;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                sum += static_cast<double>(x.at(((n * C + g * CG + c) * H + iy) * W + ix)) *
                       static_cast<double>(w.at(((k * CG + c) * KH + ky) * KW + kx));
              }
          out.push_back(sum);
        }
  return out;
}

void check_conv(const Conv& c, uint32_t seed) {
  INFO("conv2d " << c.name << ": x " << dims_string(c.x) << " w " << dims_string(c.w)
                 << (c.bias ? " bias" : ""));
  HostTensor x = random_f32(c.x, seed), w = random_f32(c.w, seed + 1), b = random_f32({c.w[0]}, seed + 2);
  ops::AttrMap attrs;
  if (!c.strides.empty()) attrs["strides"] = int_list(c.strides);
  if (!c.pads.empty()) attrs["pads"] = int_list(c.pads);
  if (!c.dilations.empty()) attrs["dilations"] = int_list(c.dilations);
  if (c.groups != 1) attrs["groups"].value = c.groups;
  std::vector<TensorType> types{x.type(), w.type()};
  if (c.bias) types.push_back(b.type());
  auto params = ops::lower_attributes(OpId::kConv2d, types, attrs, {});
  REQUIRE_MESSAGE(params.ok(), params.status().to_string());
  const std::vector<int64_t>& p = *params;
  // the output extent from the definition, against the rule's
  const int64_t oh = (c.x[2] + p[2] + p[4] - (p[6] * (c.w[2] - 1) + 1)) / p[0] + 1;
  const int64_t ow = (c.x[3] + p[3] + p[5] - (p[7] * (c.w[3] - 1) + 1)) / p[1] + 1;
  auto result = ops::infer_result_type(OpId::kConv2d, types, p);
  REQUIRE_MESSAGE(result.ok(), result.status().to_string());
  REQUIRE(result->dims == Dims{c.x[0], c.w[0], oh, ow});

  HostTensor out(DType::kF32, result->dims);
  std::fill(out.f32(), out.f32() + out.count(), std::numeric_limits<float>::quiet_NaN());
  std::vector<HostTensor*> inputs{&x, &w};
  if (c.bias) inputs.push_back(&b);
  Status status = run_kernel(OpId::kConv2d, inputs, out, p);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  check_close(out,
              conv_reference(x, w, c.bias ? &b : nullptr, p[0], p[1], p[2], p[3], p[6], p[7], p[8], oh, ow),
              1e-4, 1e-5);
}

TEST_CASE("conv2d: against the direct 7-loop definition") {
  const Conv cases[] = {
      {"3x3 pad 1", {1, 3, 8, 8}, {4, 3, 3, 3}, true, {}, {1}, {}, 1},
      {"3x3 pad 1, no bias, batch 2", {2, 3, 8, 8}, {4, 3, 3, 3}, false, {}, {1}, {}, 1},
      {"3x3 unpadded", {1, 2, 7, 6}, {3, 2, 3, 3}, false, {}, {}, {}, 1},
      {"strided 2x3, asymmetric pads", {2, 2, 9, 7}, {3, 2, 3, 3}, false, {2, 3}, {1, 0, 2, 1}, {}, 1},
      {"dilated 2, pad 2", {1, 2, 10, 10}, {2, 2, 3, 3}, true, {}, {2}, {2}, 1},
      {"dilated 1x3, strided 2x1, 2x3 kernel",
       {2, 3, 11, 9},
       {4, 3, 2, 3},
       true,
       {2, 1},
       {0, 2, 1, 2},
       {1, 3},
       1},
      {"grouped 2", {2, 4, 6, 6}, {6, 2, 3, 3}, true, {}, {1}, {}, 2},
      {"grouped 3, strided, no bias", {1, 6, 9, 8}, {3, 2, 3, 3}, false, {2}, {1}, {}, 3},
      {"depthwise", {1, 5, 7, 7}, {5, 1, 3, 3}, true, {}, {1}, {}, 5},
      {"depthwise multiplier 2, strided", {2, 3, 6, 5}, {6, 1, 3, 3}, false, {2}, {1}, {}, 3},
      {"1x1", {2, 8, 5, 5}, {4, 8, 1, 1}, false, {}, {}, {}, 1},
      {"1x1 with bias", {2, 8, 5, 5}, {4, 8, 1, 1}, true, {}, {}, {}, 1},
      {"1x1 grouped", {3, 8, 4, 4}, {6, 4, 1, 1}, true, {}, {}, {}, 2},
      {"1x1 strided", {1, 4, 7, 6}, {3, 4, 1, 1}, true, {2}, {}, {}, 1},
      {"1x1 padded", {1, 4, 3, 3}, {2, 4, 1, 1}, true, {}, {1}, {}, 1},
      {"1x1 trailing pads only", {1, 4, 3, 3}, {2, 4, 1, 1}, false, {}, {0, 0, 1, 2}, {}, 1},
      {"kernel larger than the image, padded", {1, 1, 2, 2}, {1, 1, 3, 3}, true, {}, {1}, {}, 1},
      {"batch 3, stride equals kernel", {3, 2, 8, 8}, {2, 2, 2, 2}, true, {2}, {}, {}, 1},
      {"K 144, 400 outputs (blocked GEMM)", {1, 16, 20, 20}, {32, 16, 3, 3}, true, {}, {1}, {}, 1},
      {"batch 2 grouped 4 large", {2, 8, 13, 11}, {12, 2, 5, 3}, true, {1, 2}, {2, 1}, {1, 2}, 4},
  };
  uint32_t seed = 100;
  for (const Conv& c : cases) check_conv(c, seed += 10);
}

// The depthwise kernels (hal/cpu/spatial.cc) copy the input of each block of
// 4 output rows into a zero-padded buffer split by stride_w phases; 3x3 and 5x5 at
// vertical stride 1 and 2 run unrolled kernels, other windows a tap loop,
// windows too wide for the buffer the direct loop. Their edges: partial
// vectors (widths past 8 and 16), row counts not a multiple of 4, padding
// larger than the window, column tiles (rows wider than 512), strides 1-3,
// dilations, non-square kernels, planes of one element. Output rows narrower
// than a vector (AVX-512: 16, AVX2: 8) take the channels-in-lanes path:
// channel blocks past a multiple of the lanes, strides, dilations, batches.
TEST_CASE("conv2d depthwise: the fast paths' edges against the direct definition") {
  const Conv cases[] = {
      {"channels in lanes: 20 channels of 7 x 7, 5x5 pad 2", {1, 20, 7, 7}, {20, 1, 5, 5}, true, {}, {2}, {}, 20},
      {"channels in lanes: strided, dilated, batch 2", {2, 19, 9, 11}, {19, 1, 3, 3}, true, {2}, {2}, {2}, 19},
      {"3x3 s1 pad 1, odd sizes", {1, 16, 33, 37}, {16, 1, 3, 3}, true, {}, {1}, {}, 16},
      {"3x3 s2 pad 1, batch 2", {2, 8, 35, 41}, {8, 1, 3, 3}, true, {2}, {1}, {}, 8},
      {"5x5 s1 pad 2 (BlazeFace)", {1, 4, 64, 64}, {4, 1, 5, 5}, true, {}, {2}, {}, 4},
      {"5x5 s2, asymmetric pads", {1, 3, 21, 19}, {3, 1, 5, 5}, false, {2}, {1, 2, 2, 1}, {}, 3},
      {"5x5 unpadded", {1, 2, 9, 30}, {2, 1, 5, 5}, true, {}, {}, {}, 2},
      {"3x3 s1 on 1x1 planes", {1, 6, 1, 1}, {6, 1, 3, 3}, true, {}, {1}, {}, 6},
      {"3x3 s1 on two-row planes (PP-OCR cls; blocks of 2 rows)",
       {1, 40, 2, 96},
       {40, 1, 3, 3},
       true,
       {},
       {1},
       {},
       40},
      {"5x5 s2x1 to two rows, one row", {1, 8, 3, 37}, {8, 1, 5, 5}, true, {2, 1}, {2}, {}, 8},
      {"3x3 s2 to one row (blocks of 1 row)", {2, 5, 2, 45}, {5, 1, 3, 3}, false, {2}, {1}, {}, 5},
      {"5x5 s1, six rows (a block of 4, then of 2)", {1, 3, 6, 20}, {3, 1, 5, 5}, true, {}, {2}, {}, 3},
      {"5x5 larger than the 2x3 image", {1, 3, 2, 3}, {3, 1, 5, 5}, true, {}, {2}, {}, 3},
      {"pads past the window (bias-only outputs)", {1, 2, 4, 5}, {2, 1, 3, 3}, true, {}, {3}, {}, 2},
      {"3x3 dilated 2 (tap loop)", {1, 5, 17, 23}, {5, 1, 3, 3}, true, {}, {2}, {2}, 5},
      {"7x7 s1 pad 3 (tap loop)", {1, 4, 20, 21}, {4, 1, 7, 7}, false, {}, {3}, {}, 4},
      {"3x5 kernel, strides 1x2", {1, 3, 13, 29}, {3, 1, 3, 5}, true, {1, 2}, {1, 2, 1, 2}, {}, 3},
      {"3x3 stride 3 (three phases)", {1, 4, 19, 26}, {4, 1, 3, 3}, true, {3}, {1}, {}, 4},
      {"5x5 strides 2x1", {1, 3, 22, 17}, {3, 1, 5, 5}, true, {2, 1}, {2}, {}, 3},
      {"3x3 strides 1x2", {2, 2, 11, 40}, {2, 1, 3, 3}, false, {1, 2}, {1}, {}, 2},
      {"3x3 dilated 1x3, strides 2x1", {1, 2, 15, 33}, {2, 1, 3, 3}, true, {2, 1}, {1, 3, 2, 1}, {1, 3}, 2},
      {"rows wider than one tile", {1, 2, 5, 1100}, {2, 1, 3, 3}, true, {}, {1}, {}, 2},
      {"5x5 s2 rows wider than one tile", {1, 1, 6, 1500}, {1, 1, 5, 5}, true, {2}, {2}, {}, 1},
      {"1x300 window (direct loop)", {1, 2, 3, 310}, {2, 1, 1, 300}, true, {}, {}, {}, 2},
      {"dilation 5000 (direct loop)", {1, 2, 5003, 3}, {2, 1, 2, 1}, true, {}, {}, {5000, 1}, 2},
  };
  uint32_t seed = 900;
  for (const Conv& c : cases) check_conv(c, seed += 10);
}

// The depthwise buffer paths sum every tap of the window (zeros outside the
// image) from 0 in (ky, kx) order, then add the bias: one fused multiply-add
// per tap on AVX-512, AVX2 and NEON, product then sum on the portable path.
// Bit for bit, so the path cpu_isa() names is the one that ran. Rows of 16
// outputs or more (narrower ones take x86's channels-in-lanes path).
TEST_CASE("conv2d depthwise: the running CPU's path gives its tap chain's bits (fmaf on AVX-512, AVX2, NEON)") {
  const bool fma = hal::cpu::internal::cpu_isa() != hal::cpu::internal::CpuIsa::kPortable;
  const Conv cases[] = {
      {"3x3 s1", {1, 3, 9, 37}, {3, 1, 3, 3}, true, {}, {1}, {}, 3},
      {"3x3 s2", {1, 2, 11, 41}, {2, 1, 3, 3}, true, {2}, {1}, {}, 2},
      {"5x5 s1", {1, 2, 10, 35}, {2, 1, 5, 5}, true, {}, {2}, {}, 2},
      {"5x5 s2", {1, 2, 9, 38}, {2, 1, 5, 5}, true, {2}, {2}, {}, 2},
      {"3x3 dilated 2 (any window)", {1, 2, 12, 30}, {2, 1, 3, 3}, true, {}, {2}, {2}, 2},
      {"7x7 (any window)", {1, 2, 9, 21}, {2, 1, 7, 7}, true, {}, {3}, {}, 2},
  };
  uint32_t seed = 1700;
  for (const Conv& c : cases) {
    INFO(c.name);
    HostTensor x = random_f32(c.x, seed += 10), w = random_f32(c.w, seed + 1), b = random_f32({c.w[0]}, seed + 2);
    ops::AttrMap attrs;
    if (!c.strides.empty()) attrs["strides"] = int_list(c.strides);
    attrs["pads"] = int_list(c.pads);
    if (!c.dilations.empty()) attrs["dilations"] = int_list(c.dilations);
    attrs["groups"].value = c.groups;
    const std::vector<TensorType> types{x.type(), w.type(), b.type()};
    auto params = ops::lower_attributes(OpId::kConv2d, types, attrs, {});
    REQUIRE(params.ok());
    const std::vector<int64_t>& p = *params;
    auto result = ops::infer_result_type(OpId::kConv2d, types, p);
    REQUIRE(result.ok());
    HostTensor out(DType::kF32, result->dims);
    REQUIRE(run_kernel(OpId::kConv2d, {&x, &w, &b}, out, p).ok());
    const int64_t C = c.x[1], H = c.x[2], W = c.x[3], KH = c.w[2], KW = c.w[3];
    const int64_t oh = result->dims[2], ow = result->dims[3];
    REQUIRE(ow >= 16);
    int64_t mismatches = 0;
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          float acc = 0.0f;
          for (int64_t ky = 0; ky < KH; ++ky)
            for (int64_t kx = 0; kx < KW; ++kx) {
              const int64_t iy = oy * p[0] - p[2] + ky * p[6], ix = ox * p[1] - p[3] + kx * p[7];
              const float v = iy < 0 || iy >= H || ix < 0 || ix >= W ? 0.0f : x.at((ch * H + iy) * W + ix);
              const float t = w.at((ch * KH + ky) * KW + kx);
              acc = fma ? std::fmaf(t, v, acc) : acc + t * v;
            }
          const float want = acc + b.at(ch), have = out.at((ch * oh + oy) * ow + ox);
          if (std::memcmp(&have, &want, sizeof want) != 0) ++mismatches;
        }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("conv2d: every output element is written, batches and groups do not mix") {
  // One-hot inputs: each output is exactly one weight (or zero), so a wrong
  // image, group or channel offset shows as a wrong value, not a tolerance miss.
  HostTensor x(DType::kF32, {2, 4, 3, 3}), w(DType::kF32, {4, 2, 1, 1});
  for (int64_t i = 0; i < x.count(); ++i) x.at(i) = static_cast<float>(i);
  for (int64_t i = 0; i < w.count(); ++i) w.at(i) = static_cast<float>(1 << i);  // 1, 2, 4, ... 128
  HostTensor out(DType::kF32, {2, 4, 3, 3});
  std::fill(out.f32(), out.f32() + out.count(), std::numeric_limits<float>::quiet_NaN());
  REQUIRE(run_kernel(OpId::kConv2d, {&x, &w}, out, {1, 1, 0, 0, 0, 0, 1, 1, 2}).ok());
  std::vector<double> want;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t k = 0; k < 4; ++k)
      for (int64_t s = 0; s < 9; ++s) {
        const int64_t g = k / 2;
        double sum = 0;
        for (int64_t c = 0; c < 2; ++c) sum += x.at((n * 4 + g * 2 + c) * 9 + s) * w.at(k * 2 + c);
        want.push_back(sum);
      }
  check_close(out, want, 0, 0);
}

TEST_CASE("conv2d, slice and gather: an empty output is not written") {
  // conv2d over an empty batch
  HostTensor x(DType::kF32, {0, 2, 4, 4}), w = random_f32({3, 2, 3, 3}, 5), b = random_f32({3}, 6);
  HostTensor out(DType::kF32, {0, 3, 4, 4});
  fill_sentinel(x, 0x11);
  fill_sentinel(out, 0xEE);
  REQUIRE(run_kernel(OpId::kConv2d, {&x, &w, &b}, out, {1, 1, 1, 1, 1, 1, 1, 1, 1}).ok());
  check_untouched(out, 0xEE);
  // slice to nothing along one dim
  HostTensor s = iota_bytes(DType::kI32, {3, 4}), s_out(DType::kI32, {3, 0});
  fill_sentinel(s_out, 0xEE);
  REQUIRE(run_kernel(OpId::kSlice, {&s}, s_out, {0, 1, 3, 0, 1, 0}).ok());
  check_untouched(s_out, 0xEE);
  // gather of no indices
  HostTensor data = iota_bytes(DType::kF32, {3, 4}), idx(DType::kI64, {0}), g_out(DType::kF32, {0, 4});
  fill_sentinel(idx, 0x7f);
  fill_sentinel(g_out, 0xEE);
  REQUIRE(run_kernel(OpId::kGather, {&data, &idx}, g_out, {0}).ok());
  check_untouched(g_out, 0xEE);
}

// ---- separable_conv2d ------------------------------------------------------------

// separable_conv2d against the two conv2ds it replaces, run apart: the same
// bits (its cpu kernel runs the depthwise kernels into a thread's scratch,
// then the 1x1's GEMM over those rows).
struct Separable {
  const char* name;
  std::vector<int64_t> x;  // [N, C, H, W]
  int64_t k, kh, kw;
  std::vector<int64_t> conv;  // the depthwise's strides, pads (t, l, b, r), dilations
  bool dw_bias, pw_bias, residual;
  int64_t dw_activation, pw_activation;  // ops::Activation, 0: none
};

void check_separable(const Separable& s, uint32_t seed) {
  INFO(s.name);
  const int64_t c = s.x[1];
  HostTensor x = random_f32(s.x, seed), dw_w = random_f32({c, 1, s.kh, s.kw}, seed + 1);
  HostTensor pw_w = random_f32({s.k, c, 1, 1}, seed + 2), dw_b = random_f32({c}, seed + 3);
  HostTensor pw_b = random_f32({s.k}, seed + 4);
  auto epilogue = [](int64_t a) {
    // hard_sigmoid's alpha and beta; the others take none.
    if (a == static_cast<int64_t>(ops::Activation::kHardSigmoid))
      return std::vector<int64_t>{a, std::bit_cast<int64_t>(0.2), std::bit_cast<int64_t>(0.5)};
    return std::vector<int64_t>{a, 0, 0};
  };
  // The unfused pair.
  std::vector<int64_t> dw_params = s.conv;
  dw_params.push_back(c);
  if (s.dw_activation != 0)
    for (int64_t w : epilogue(s.dw_activation)) dw_params.push_back(w);
  std::vector<HostTensor*> dw_in{&x, &dw_w};
  if (s.dw_bias) dw_in.push_back(&dw_b);
  std::vector<TensorType> dw_types;
  for (HostTensor* t : dw_in) dw_types.push_back(t->type());
  auto mid_type = ops::infer_result_type(OpId::kConv2d, dw_types, dw_params);
  REQUIRE(mid_type.ok());
  HostTensor mid(DType::kF32, mid_type->dims);
  REQUIRE(run_kernel(OpId::kConv2d, dw_in, mid, dw_params).ok());
  const std::vector<int64_t> out_dims{s.x[0], s.k, mid.dims[2], mid.dims[3]};
  HostTensor residual = random_f32(out_dims, seed + 5);
  std::vector<int64_t> pw_params{1, 1, 0, 0, 0, 0, 1, 1, 1};
  if (s.pw_activation != 0)
    for (int64_t w : epilogue(s.pw_activation)) pw_params.push_back(w);
  std::vector<HostTensor*> pw_in{&mid, &pw_w};
  if (s.pw_bias) pw_in.push_back(&pw_b);
  if (s.residual) pw_in.push_back(&residual);
  HostTensor want(DType::kF32, out_dims);
  REQUIRE(run_kernel(OpId::kConv2d, pw_in, want, pw_params).ok());
  // The fused operator: (x, dw_w, pw_w, biases, residual); its 16 words.
  std::vector<int64_t> params = s.conv;
  params.push_back(c);
  for (int64_t w : epilogue(s.dw_activation)) params.push_back(s.dw_activation != 0 ? w : 0);
  for (int64_t w : epilogue(s.pw_activation)) params.push_back(s.pw_activation != 0 ? w : 0);
  params.push_back((s.dw_bias ? 1 : 0) | (s.pw_bias ? 2 : 0));
  std::vector<HostTensor*> in{&x, &dw_w, &pw_w};
  if (s.dw_bias) in.push_back(&dw_b);
  if (s.pw_bias) in.push_back(&pw_b);
  if (s.residual) in.push_back(&residual);
  HostTensor got(DType::kF32, out_dims);
  std::fill(got.f32(), got.f32() + got.count(), std::numeric_limits<float>::quiet_NaN());
  const Status status = run_kernel(OpId::kSeparableConv2d, in, got, params);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  CHECK(std::memcmp(got.f32(), want.f32(), static_cast<size_t>(want.count()) * sizeof(float)) == 0);
}

TEST_CASE("separable_conv2d: bit for bit the depthwise conv2d then the 1x1 conv2d") {
  const int64_t relu = static_cast<int64_t>(ops::Activation::kRelu);
  const int64_t hard_swish = static_cast<int64_t>(ops::Activation::kHardSwish);
  const int64_t hard_sigmoid = static_cast<int64_t>(ops::Activation::kHardSigmoid);
  const Separable cases[] = {
      {"BlazeFace's block: 3x3 without a bias, 1x1 + bias + residual + relu",
       {1, 24, 40, 40},
       24,
       3,
       3,
       {1, 1, 1, 1, 1, 1, 1, 1},
       false,
       true,
       true,
       0,
       relu},
      {"5x5 s2, both biases, hard_swish between, hard_sigmoid after, batch 2",
       {2, 8, 21, 19},
       12,
       5,
       5,
       {2, 2, 2, 2, 2, 2, 1, 1},
       true,
       true,
       false,
       hard_swish,
       hard_sigmoid},
      {"no biases, 3x3 dilated 2 (the tap loop), odd sizes",
       {1, 5, 17, 23},
       7,
       3,
       3,
       {1, 1, 2, 2, 2, 2, 2, 2},
       false,
       false,
       false,
       0,
       0},
      {"a row of C * OW = 8192 floats (one row per task)",
       {1, 16, 6, 512},
       9,
       3,
       3,
       {1, 1, 1, 1, 1, 1, 1, 1},
       true,
       true,
       true,
       relu,
       relu},
      {"1x300 window (the direct loop)",
       {1, 3, 4, 310},
       5,
       1,
       300,
       {1, 1, 0, 0, 0, 0, 1, 1},
       true,
       true,
       false,
       0,
       relu},
      {"K past a GEMM tile, C past its K block (300 channels)",
       {1, 300, 5, 6},
       70,
       3,
       3,
       {1, 1, 1, 1, 1, 1, 1, 1},
       true,
       true,
       true,
       0,
       hard_swish},
      // The depthwise buffer is kept from channel to channel (its padding
      // zeros written once per tile): rows of several tiles, the last one
      // narrower, whose padding columns differ.
      {"rows of two tiles (512 + 188 columns)",
       {1, 4, 9, 700},
       6,
       3,
       3,
       {1, 1, 1, 1, 1, 1, 1, 1},
       true,
       true,
       true,
       0,
       relu},
      {"stride 2 rows of six tiles, asymmetric pads",
       {1, 3, 8, 1500},
       5,
       3,
       3,
       {2, 2, 0, 0, 1, 1, 1, 1},
       false,
       true,
       false,
       relu,
       0},
  };
  uint32_t seed = 2000;
  for (const Separable& s : cases) check_separable(s, seed += 10);
}

TEST_CASE(
    "separable_conv2d: the rule refuses a depthwise row past 8192 floats, a wrong bias word, a 3x3 second "
    "stage") {
  auto infer = [](std::vector<TensorType> in, std::vector<int64_t> p) {
    return ops::infer_result_type(OpId::kSeparableConv2d, in, p);
  };
  const TensorType x{DType::kF32, {1, 16, 4, 513}}, dw{DType::kF32, {16, 1, 3, 3}},
      pw{DType::kF32, {8, 16, 1, 1}};
  const std::vector<int64_t> words{1, 1, 1, 1, 1, 1, 1, 1, 16, 0, 0, 0, 0, 0, 0, 0};
  auto too_wide = infer({x, dw, pw}, words);
  REQUIRE_FALSE(too_wide.ok());
  CHECK(too_wide.status().message().find("8192") != std::string::npos);
  const TensorType narrow{DType::kF32, {1, 16, 4, 500}};
  CHECK(infer({narrow, dw, pw}, words).ok());
  std::vector<int64_t> one_bias = words;
  one_bias.back() = 1;  // says dw_bias, none given
  CHECK(infer({narrow, dw, pw}, one_bias).status().message().find("bias word") != std::string::npos);
  const TensorType pw3{DType::kF32, {8, 16, 3, 3}};
  CHECK(infer({narrow, dw, pw3}, words).status().message().find("pointwise weights") != std::string::npos);
}

// ---- max_pool, average_pool -------------------------------------------------------

struct PoolCase {
  Dims x;
  std::vector<int64_t> params;  // [kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, ceil_mode, count_include_pad]
};

// Direct definition: every tap of every window, in double.
std::vector<double> pool_reference(bool is_max, const HostTensor& x, const PoolCase& c,
                                   const Dims& out_dims) {
  const auto& p = c.params;
  const int64_t n = x.dims[0], ch = x.dims[1], h = x.dims[2], w = x.dims[3];
  const int64_t oh = out_dims[2], ow = out_dims[3];
  std::vector<double> out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < ch; ++k)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double m = -kInf, sum = 0;
          bool any_nan = false;
          int64_t inside = 0, padded = 0;
          for (int64_t ky = 0; ky < p[0]; ++ky)
            for (int64_t kx = 0; kx < p[1]; ++kx) {
              const int64_t iy = oy * p[2] - p[4] + ky * p[8];
              const int64_t ix = ox * p[3] - p[5] + kx * p[9];
              if (iy >= -p[4] && iy < h + p[6] && ix >= -p[5] && ix < w + p[7]) ++padded;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              const double v = x.at(((b * ch + k) * h + iy) * w + ix);
              ++inside;
              any_nan = any_nan || std::isnan(v);
              m = std::max(m, v);
              sum += v;
            }
          if (is_max)
            out.push_back(any_nan ? kNaN : m);
          else
            out.push_back(sum / static_cast<double>(p[11] ? padded : inside));
        }
  return out;
}

TEST_CASE("max_pool and average_pool against the direct definition") {
  const PoolCase cases[] = {
      {{1, 3, 8, 8}, {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0}},
      {{2, 2, 7, 6}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
      {{2, 2, 7, 6}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1}},
      {{1, 2, 8, 7}, {3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0}},
      {{1, 2, 8, 7}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1}},
      {{1, 2, 8, 7}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0}},
      {{1, 1, 5, 5}, {2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1}},
      {{2, 3, 10, 9}, {2, 3, 3, 2, 1, 2, 0, 1, 1, 1, 0, 1}},
      {{1, 2, 9, 9}, {2, 3, 1, 2, 1, 0, 1, 2, 2, 2, 0, 0}},
      {{1, 2, 9, 9}, {2, 3, 1, 2, 1, 0, 1, 2, 2, 2, 1, 1}},
      {{1, 1, 2, 2}, {2, 2, 1, 1, 1, 1, 1, 1, 3, 3, 0, 0}},
      {{1, 1, 2, 2}, {2, 2, 1, 1, 1, 1, 1, 1, 3, 3, 0, 1}},
      {{1, 1, 1, 12}, {1, 5, 1, 3, 0, 2, 0, 4, 1, 1, 1, 1}},
      {{0, 2, 4, 4}, {2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0}},
      {{2, 1, 6, 6}, {6, 6, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0}},
      {{1, 1, 7, 7}, {3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 0}},
      // 2x2 stride 2 over rows of 21 and 19 outputs (the AVX2 kernel's 8 at a
      // time, a tail, a padded border).
      {{1, 2, 6, 42}, {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0}},
      {{1, 1, 5, 37}, {2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0}},
      // Rows wide enough for the vectorized interior (8 outputs a step, stride
      // 1 or 2, any window), its tail and the padded borders; average pools
      // with and without the pads counted.
      {{1, 2, 9, 45}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1}},
      {{1, 2, 9, 45}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
      {{1, 1, 7, 61}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 1}},
      {{1, 1, 8, 40}, {5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 0, 0}},
      {{2, 1, 6, 50}, {2, 3, 2, 2, 0, 1, 0, 1, 1, 1, 1, 0}},
  };
  uint32_t seed = 500;
  for (const PoolCase& c : cases) {
    for (OpId id : {OpId::kMaxPool, OpId::kAveragePool}) {
      const bool is_max = id == OpId::kMaxPool;
      if (is_max && c.params[11] == 1) continue;
      INFO(ops::op_def(id).name << " x " << dims_string(c.x) << " params " << dims_string(c.params));
      HostTensor x = random_f32(c.x, seed++);
      if (x.count() > 9) x.at(9) = kNaNF;
      auto types = ops::infer_result_types(id, std::vector<TensorType>{x.type()}, c.params);
      REQUIRE_MESSAGE(types.ok(), types.status().to_string());
      HostTensor out(DType::kF32, types->at(0).dims);
      std::fill(out.bytes.begin(), out.bytes.end(), uint8_t{0xEE});
      REQUIRE(run_kernel(id, {&x}, out, c.params).ok());
      check_close(out, pool_reference(is_max, x, c, out.dims), 1e-6, 1e-6);
    }
  }
}

// [N,C,H,W] as [N,H,W,C] and back.
HostTensor to_channels_last(const HostTensor& x) {
  const int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2], w = x.dims[3];
  HostTensor t(DType::kF32, {n, h, w, c});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t i = 0; i < h * w; ++i) t.f32()[(b * h * w + i) * c + k] = x.f32()[(b * c + k) * h * w + i];
  return t;
}

TEST_CASE("max_pool and average_pool channels-last: the NCHW kernel's bits on the transposed image") {
  // Channel counts below, at and past the vector widths (the 16-lane masked
  // steps, the 8-lane steps and their scalar tail); windows clipped by pads
  // and ceil mode; NaN, inf and signed zeros among the taps.
  const PoolCase cases[] = {
      {{1, 3, 8, 8}, {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0}},
      {{2, 17, 7, 6}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
      {{2, 17, 7, 6}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1}},
      {{1, 40, 8, 7}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1}},
      {{1, 40, 8, 7}, {3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0}},
      {{1, 8, 9, 9}, {2, 3, 1, 2, 1, 0, 1, 2, 2, 2, 0, 0}},
      {{1, 33, 2, 2}, {2, 2, 1, 1, 1, 1, 1, 1, 3, 3, 0, 1}},
      {{1, 64, 11, 11}, {3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0}},
      {{1, 100, 9, 8}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0}},  // 64 in four chains, then 16s, masked 4
      {{1, 200, 7, 6},
       {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1}},  // Inception's counted 3x3: 3 x 64, then 8 masked
  };
  // Without NaNs too: a vector step that saw a NaN is done again by the
  // scalar rule, so the signed zeros of the vector max show only without.
  const float with_nan[] = {kNaNF, -0.0f, 0.0f, kInfF, -kInfF};
  const float without_nan[] = {0.0f, -0.0f, 0.0f, kInfF, -kInfF};
  uint32_t seed = 560;
  for (const PoolCase& c : cases)
    for (const float* specials : {with_nan, without_nan}) {
      for (OpId id : {OpId::kMaxPool, OpId::kAveragePool}) {
        if (id == OpId::kMaxPool && c.params[11] == 1) continue;
        INFO(ops::op_def(id).name << " x " << dims_string(c.x) << " params " << dims_string(c.params)
                                  << (specials == with_nan ? ", NaNs" : ", no NaN"));
        HostTensor x = random_f32(c.x, seed++);
        for (int64_t i = 0; i < x.count(); i += 7) x.at(i) = specials[(i / 7) % 5];
        auto types = ops::infer_result_types(id, std::vector<TensorType>{x.type()}, c.params);
        REQUIRE_MESSAGE(types.ok(), types.status().to_string());
        HostTensor want(DType::kF32, types->at(0).dims);
        REQUIRE(run_kernel(id, {&x}, want, c.params).ok());
        HostTensor xt = to_channels_last(x);
        std::vector<int64_t> params = c.params;
        params.push_back(1);
        auto nhwc = ops::infer_result_types(id, std::vector<TensorType>{xt.type()}, params);
        REQUIRE_MESSAGE(nhwc.ok(), nhwc.status().to_string());
        const HostTensor want_t = to_channels_last(want);
        REQUIRE(nhwc->at(0).dims == want_t.dims);
        HostTensor got(DType::kF32, want_t.dims);
        REQUIRE(run_kernel(id, {&xt}, got, params).ok());
        // The same bits; a NaN is a NaN (which of two NaNs an add keeps
        // depends on its operand order, which a compiler may swap: clang's
        // vector average sums gave -NaN where the scalar loop gave +NaN).
        int64_t mismatches = 0;
        for (int64_t i = 0; i < got.count(); ++i) {
          const float a = got.at(i), b = want_t.at(i);
          mismatches +=
              std::isnan(b) ? !std::isnan(a) : std::bit_cast<uint32_t>(a) != std::bit_cast<uint32_t>(b);
        }
        CHECK(mismatches == 0);
      }
    }
}

TEST_CASE("max_pool of u8, NCHW and channels-last: the f32 kernel's maxima of the same values") {
  // Windows with at least one tap inside (the only ones a QDQ pool's rewrite makes); channels below,
  // at and past the 64-byte vector.
  const PoolCase cases[] = {
      {{1, 3, 8, 8}, {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0}},
      {{2, 17, 7, 6}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
      {{1, 64, 9, 8}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0}},
      {{1, 70, 8, 7}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0}},
      {{1, 130, 9, 9}, {2, 3, 1, 2, 1, 0, 1, 2, 2, 2, 0, 0}},
      {{1, 24, 11, 11}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0}},  // ShuffleNet's: below one AVX2 vector
  };
  uint32_t seed = 590;
  for (const PoolCase& c : cases) {
    for (const bool channels_last : {false, true}) {
      INFO("x " << dims_string(c.x) << " params " << dims_string(c.params) << (channels_last ? " nhwc" : ""));
      HostTensor xf(DType::kF32, c.x);
      for (int64_t i = 0; i < xf.count(); ++i)
        xf.at(i) = static_cast<float>((seed = seed * 1103515245u + 12345u) >> 24);
      std::vector<int64_t> params = c.params;
      if (channels_last) {
        xf = to_channels_last(xf);
        params.push_back(1);
      }
      HostTensor x(DType::kU8, xf.dims);
      for (int64_t i = 0; i < xf.count(); ++i) x.bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(xf.at(i));
      auto types = ops::infer_result_types(OpId::kMaxPool, std::vector<TensorType>{x.type()}, params);
      REQUIRE_MESSAGE(types.ok(), types.status().to_string());
      HostTensor want(DType::kF32, types->at(0).dims), got(DType::kU8, types->at(0).dims);
      REQUIRE(run_kernel(OpId::kMaxPool, {&xf}, want, params).ok());
      REQUIRE(run_kernel(OpId::kMaxPool, {&x}, got, params).ok());
      size_t wrong = 0;
      for (int64_t i = 0; i < want.count(); ++i)
        wrong += static_cast<float>(got.bytes[static_cast<size_t>(i)]) != want.at(i);
      CHECK(wrong == 0);
    }
  }
  // i8 is not a max_pool operand.
  CHECK(!ops::infer_result_types(OpId::kMaxPool, std::vector<TensorType>{TensorType{DType::kI8, {1, 1, 4, 4}}},
                                 std::vector<int64_t>{2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0})
             .ok());
}

// The max pool takes a tap that is greater or NaN, in (ky, kx) order: of
// equal values the first (-0 before +0 keeps -0), of NaNs the last. The 2x2
// stride-2 windows of 16 outputs, each tap position holding NaN, -0, +0, inf.
TEST_CASE("max_pool 2x2 stride 2: the bits of the tap rule, NaN, signed zeros") {
  const float kinds[] = {kNaNF, -0.0f, 0.0f, kInfF, -kInfF, 1.5f};
  HostTensor x(DType::kF32, {1, 1, 2, 64});
  uint32_t* bits = reinterpret_cast<uint32_t*>(x.bytes.data());
  for (int64_t ox = 0; ox < 32; ++ox) {
    // The first two taps take every pair of kinds over outputs 0..35 (-0
    // then +0 at 13, +0 then -0 at 8, two NaNs at 0).
    const int64_t pick[4] = {ox % 6, ox / 6 % 6, ox / 2 % 6, ox / 3 % 6};
    const int64_t at[4] = {2 * ox, 2 * ox + 1, 64 + 2 * ox, 64 + 2 * ox + 1};
    for (int t = 0; t < 4; ++t) {
      x.at(at[t]) = kinds[pick[t]];
      if (pick[t] == 0)
        bits[at[t]] = 0x7fc00000u + static_cast<uint32_t>(at[t]);  // NaNs told apart by payload
    }
  }
  HostTensor out(DType::kF32, {1, 1, 1, 32});
  REQUIRE(run_kernel(OpId::kMaxPool, {&x}, out, {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0}).ok());
  for (int64_t ox = 0; ox < 32; ++ox) {
    float m = -kInfF;
    for (int64_t at : {2 * ox, 2 * ox + 1, 64 + 2 * ox, 64 + 2 * ox + 1}) {
      const float v = x.at(at);
      if (v > m || v != v) m = v;
    }
    const float got = out.at(ox);
    INFO("output " << ox);
    CHECK(std::memcmp(&got, &m, sizeof m) == 0);
  }
}

TEST_CASE("max_pool without NaN (maxps a tap): the tap rule's bits on signed zeros and infinities") {
  // Planes without a NaN take one maxps a tap (stride 2: even and odd
  // columns apart); v > m ? v : m over the taps in order is the rule, -0
  // against +0 included. Odd and even left pads (the columns' parity),
  // rows of fewer than 8 outputs, a last step overlapping the one before.
  const float kinds[] = {-0.0f, 0.0f, kInfF, -kInfF, 1.5f, -2.5f};
  const PoolCase cases[] = {
      {{1, 2, 9, 37}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0}}, {{1, 1, 8, 40}, {3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0}},
      {{1, 1, 7, 29}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}}, {{1, 1, 6, 11}, {2, 2, 2, 2, 0, 1, 0, 1, 1, 1, 0, 0}},
      {{1, 1, 11, 30}, {5, 4, 2, 2, 2, 3, 2, 0, 1, 1, 1, 0}}};
  uint32_t seed = 77;
  for (const PoolCase& c : cases) {
    INFO("x " << dims_string(c.x) << " params " << dims_string(c.params));
    HostTensor x(DType::kF32, c.x);
    for (int64_t i = 0; i < x.count(); ++i) {
      seed = seed * 1103515245u + 12345u;
      x.at(i) = kinds[(seed >> 16) % 6];
    }
    auto types = ops::infer_result_types(OpId::kMaxPool, std::vector<TensorType>{x.type()}, c.params);
    REQUIRE(types.ok());
    HostTensor out(DType::kF32, types->at(0).dims);
    REQUIRE(run_kernel(OpId::kMaxPool, {&x}, out, c.params).ok());
    const auto& q = c.params;
    const int64_t h = c.x[2], w = c.x[3], oh = out.dims[2], ow = out.dims[3];
    int64_t mismatches = 0;
    for (int64_t k = 0; k < c.x[1]; ++k)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          float m = -kInfF;
          for (int64_t ky = 0; ky < q[0]; ++ky)
            for (int64_t kx = 0; kx < q[1]; ++kx) {
              const int64_t iy = oy * q[2] - q[4] + ky, ix = ox * q[3] - q[5] + kx;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              const float v = x.at((k * h + iy) * w + ix);
              if (v > m) m = v;
            }
          const float got = out.at((k * oh + oy) * ow + ox);
          mismatches += std::memcmp(&got, &m, sizeof m) != 0;
        }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("max_pool of planes zero columns wide: every window reaches only pads (-inf), nothing read") {
  // Stride 2 with an odd left pad: the padded plane's column parity step must not read a column the row lacks.
  for (const std::vector<int64_t>& params : {std::vector<int64_t>{2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0},
                                              std::vector<int64_t>{2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}}) {
    INFO("params " << dims_string(params));
    HostTensor x(DType::kF32, {1, 2, 4, 0});
    auto types = ops::infer_result_types(OpId::kMaxPool, std::vector<TensorType>{x.type()}, params);
    REQUIRE_MESSAGE(types.ok(), types.status().to_string());
    HostTensor out(DType::kF32, types->at(0).dims);
    REQUIRE(out.count() > 0);
    REQUIRE(run_kernel(OpId::kMaxPool, {&x}, out, params).ok());
    for (int64_t i = 0; i < out.count(); ++i) CHECK(out.at(i) == -kInfF);
  }
}

TEST_CASE("pools: windows reaching only pads, NaN, infinities") {
  // in 2, kernel 2 dilated 3, pads 1: the only window's taps are -1 and 2.
  HostTensor x = random_f32({1, 1, 2, 2}, 7);
  HostTensor out(DType::kF32, {1, 1, 1, 1});
  REQUIRE(run_kernel(OpId::kMaxPool, {&x}, out, {2, 2, 1, 1, 1, 1, 1, 1, 3, 3, 0, 0}).ok());
  CHECK(out.at(0) == -kInfF);
  REQUIRE(run_kernel(OpId::kAveragePool, {&x}, out, {2, 2, 1, 1, 1, 1, 1, 1, 3, 3, 0, 0}).ok());
  CHECK(std::isnan(out.at(0)));  // 0 / 0
  REQUIRE(run_kernel(OpId::kAveragePool, {&x}, out, {2, 2, 1, 1, 1, 1, 1, 1, 3, 3, 0, 1}).ok());
  CHECK(out.at(0) == 0.0f);  // 0 / 4 pads
  HostTensor y(DType::kF32, {1, 1, 1, 4});
  const float yv[] = {1.0f, kNaNF, kInfF, -kInfF};
  std::memcpy(y.bytes.data(), yv, sizeof yv);
  HostTensor o2(DType::kF32, {1, 1, 1, 2});
  REQUIRE(run_kernel(OpId::kMaxPool, {&y}, o2, {1, 2, 1, 2, 0, 0, 0, 0, 1, 1, 0, 0}).ok());
  CHECK(std::isnan(o2.at(0)));
  CHECK(o2.at(1) == kInfF);
}

// ---- resize ---------------------------------------------------------------------------

// ONNX Resize, written from the operator's documentation: the coordinate
// transformation, then nearest rounding or linear interpolation with edge values.
double resize_coordinate(int mode, double x, double in, double out) {
  const double scale = out / in;
  switch (mode) {
    case 1:
      return out == 1 ? 0 : x * (in - 1) / (out - 1);
    case 2:
      return x / scale;
    case 3:
      return out > 1 ? (x + 0.5) / scale - 0.5 : 0;
    case 4:
      return (x + 0.5) / scale;
    default:
      return (x + 0.5) / scale - 0.5;
  }
}

int64_t nearest_index(int mode, double v, int64_t in) {
  double r;
  const double f = std::floor(v);
  switch (mode) {
    case 1:
      r = v - f == 0.5 ? f + 1 : std::round(v);
      break;  // ties up
    case 2:
      r = f;
      break;
    case 3:
      r = std::ceil(v);
      break;
    default:
      r = v - f == 0.5 ? f : std::round(v);
      break;  // ties down
  }
  return std::clamp<int64_t>(static_cast<int64_t>(r), 0, in - 1);
}

std::vector<double> resize_reference(const HostTensor& x, const std::vector<int64_t>& p) {
  const int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2], w = x.dims[3], oh = p[3], ow = p[4];
  std::vector<double> out;
  // Linear with edge values: element (i) of a dim outside [0, in) reads the nearest edge.
  auto at = [&](int64_t plane, int64_t y, int64_t xx) {
    y = std::clamp<int64_t>(y, 0, h - 1);
    xx = std::clamp<int64_t>(xx, 0, w - 1);
    return static_cast<double>(x.at((plane * h + y) * w + xx));
  };
  for (int64_t plane = 0; plane < n * c; ++plane)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        const double sy = resize_coordinate(static_cast<int>(p[1]), static_cast<double>(oy),
                                            static_cast<double>(h), static_cast<double>(oh));
        const double sx = resize_coordinate(static_cast<int>(p[1]), static_cast<double>(ox),
                                            static_cast<double>(w), static_cast<double>(ow));
        if (p[0] == 0) {
          out.push_back(at(plane, nearest_index(static_cast<int>(p[2]), sy, h),
                           nearest_index(static_cast<int>(p[2]), sx, w)));
          continue;
        }
        const double fy = std::floor(sy), fx = std::floor(sx);
        const double wy = sy - fy, wx = sx - fx;
        const int64_t y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
        // Beyond the last element, both taps are the edge; before the first, too.
        double v = 0;
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx)
            v += (dy ? wy : 1 - wy) * (dx ? wx : 1 - wx) * at(plane, y0 + dy, x0 + dx);
        out.push_back(v);
      }
  return out;
}

TEST_CASE("resize: every coordinate mode and nearest mode against the ONNX definition") {
  struct Case {
    Dims x;
    std::vector<int64_t> params;
  };
  std::vector<Case> cases;
  for (int64_t coordinate = 0; coordinate <= 4; ++coordinate) {
    for (int64_t nearest = 0; nearest <= 3; ++nearest) {
      cases.push_back({{1, 2, 3, 4}, {0, coordinate, nearest, 6, 8}});
      cases.push_back({{1, 1, 8, 9}, {0, coordinate, nearest, 3, 4}});
      cases.push_back({{1, 1, 4, 6}, {0, coordinate, nearest, 9, 5}});
      cases.push_back({{1, 1, 5, 7}, {0, coordinate, nearest, 1, 1}});
    }
    cases.push_back({{1, 2, 4, 5}, {1, coordinate, 0, 8, 10}});
    cases.push_back({{2, 1, 9, 7}, {1, coordinate, 0, 4, 3}});
    cases.push_back({{1, 1, 5, 4}, {1, coordinate, 0, 9, 7}});
    cases.push_back({{1, 1, 6, 6}, {1, coordinate, 0, 1, 5}});
    cases.push_back({{1, 1, 1, 3}, {1, coordinate, 0, 4, 7}});
  }
  uint32_t seed = 600;
  for (const Case& c : cases) {
    INFO("x " << dims_string(c.x) << " params " << dims_string(c.params));
    HostTensor x = random_f32(c.x, seed++);
    HostTensor out(DType::kF32, {c.x[0], c.x[1], c.params[3], c.params[4]});
    REQUIRE(run_kernel(OpId::kResize, {&x}, out, c.params).ok());
    check_close(out, resize_reference(x, c.params), 1e-6, 1e-6);
  }
}

TEST_CASE("resize: the ONNX documentation's examples, from attributes") {
  auto run = [](std::vector<float> values, Dims dims, ops::AttrMap attrs) {
    HostTensor x(DType::kF32, dims);
    std::memcpy(x.bytes.data(), values.data(), x.bytes.size());
    auto params = ops::lower_attributes(OpId::kResize, std::vector{x.type()}, attrs, {});
    REQUIRE_MESSAGE(params.ok(), params.status().to_string());
    auto type = ops::infer_result_type(OpId::kResize, std::vector{x.type()}, *params);
    REQUIRE(type.ok());
    HostTensor out(DType::kF32, type->dims);
    REQUIRE(run_kernel(OpId::kResize, {&x}, out, *params).ok());
    return out;
  };
  auto list = [](std::vector<double> v) {
    ops::AttrValue a;
    std::vector<ops::AttrValue> items;
    for (double d : v) items.push_back({d});
    a.value = items;
    return a;
  };
  auto str = [](const char* s) { return ops::AttrValue{std::string(s)}; };
  // resize_upsample_scales_nearest
  HostTensor o = run({1, 2, 3, 4}, {1, 1, 2, 2}, {{"scales", list({1, 1, 2, 3})}});
  CHECK(o.dims == Dims{1, 1, 4, 6});
  check_close(o, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  // resize_upsample_scales_linear
  o = run({1, 2, 3, 4}, {1, 1, 2, 2}, {{"scales", list({1, 1, 2, 2})}, {"mode", str("linear")}});
  check_close(o, {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  // resize_upsample_scales_linear_align_corners
  o = run({1, 2, 3, 4}, {1, 1, 2, 2},
          {{"scales", list({1, 1, 2, 2})},
           {"mode", str("linear")},
           {"coordinate_transformation_mode", str("align_corners")}});
  check_close(o, {1, 4.0 / 3, 5.0 / 3, 2, 5.0 / 3, 2, 7.0 / 3, 8.0 / 3, 7.0 / 3, 8.0 / 3, 3, 10.0 / 3, 3,
                  10.0 / 3, 11.0 / 3, 4});
  // resize_downsample_scales_nearest: sizes floor(2 * 0.6), floor(4 * 0.6)
  o = run({1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 4}, {{"scales", list({1, 1, 0.6, 0.6})}});
  CHECK(o.dims == Dims{1, 1, 1, 2});
  check_close(o, {1, 3});
  // resize_downsample_scales_linear and _align_corners: coordinates follow the
  // stated scale 0.6 (and the unrounded length 4 * 0.6), not the rounded sizes.
  o = run({1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 4},
          {{"scales", list({1, 1, 0.6, 0.6})}, {"mode", str("linear")}});
  check_close(o, {2.6666665, 4.3333331});
  o = run({1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 4},
          {{"scales", list({1, 1, 0.6, 0.6})},
           {"mode", str("linear")},
           {"coordinate_transformation_mode", str("align_corners")}});
  check_close(o, {1, 3.142857});
  // sizes, asymmetric floor (the upsampling many exporters write)
  ops::AttrMap attrs{{"coordinate_transformation_mode", str("asymmetric")}, {"nearest_mode", str("floor")}};
  attrs["sizes"].value = std::vector<ops::AttrValue>{{int64_t{1}}, {int64_t{1}}, {int64_t{4}}, {int64_t{4}}};
  o = run({1, 2, 3, 4}, {1, 1, 2, 2}, attrs);
  check_close(o, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
}

TEST_CASE("resize: bit for bit the definition's double arithmetic (ops::resize_*), past chunk edges") {
  // The kernel computes column taps once per chunk of 256 columns and row taps
  // once per row; every element must still be exactly the per-element formula.
  struct Case {
    Dims x;
    std::vector<int64_t> params;
  };
  std::vector<Case> cases;
  for (int64_t coordinate = 0; coordinate <= 4; ++coordinate) {
    cases.push_back({{1, 3, 7, 300}, {0, coordinate, coordinate % 4, 13, 601}});
    cases.push_back({{2, 2, 9, 130}, {1, coordinate, 0, 17, 257}});
    cases.push_back({{1, 5, 40, 40}, {1, coordinate, 0, 80, 80}});
    cases.push_back({{1, 2, 11, 13}, {0, coordinate, 1, 5, 4}});
    cases.push_back({{1, 1, 1, 1}, {1, coordinate, 0, 3, 2}});
  }
  uint32_t seed = 640;
  for (const Case& c : cases) {
    INFO("x " << dims_string(c.x) << " params " << dims_string(c.params));
    HostTensor x = random_f32(c.x, seed++);
    HostTensor out(DType::kF32, {c.x[0], c.x[1], c.params[3], c.params[4]});
    REQUIRE(run_kernel(OpId::kResize, {&x}, out, c.params).ok());
    const int64_t h = c.x[2], w = c.x[3], oh = c.params[3], ow = c.params[4];
    const double scale_h = static_cast<double>(oh) / static_cast<double>(h);
    const double scale_w = static_cast<double>(ow) / static_cast<double>(w);
    const int32_t mode = static_cast<int32_t>(c.params[1]), nearest = static_cast<int32_t>(c.params[2]);
    int64_t mismatches = 0;
    for (int64_t plane = 0; plane < c.x[0] * c.x[1]; ++plane)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const float* image = x.f32() + plane * h * w;
          const double sy = ops::resize_source(mode, oy, scale_h, h, oh);
          const double sx = ops::resize_source(mode, ox, scale_w, w, ow);
          float want;
          if (c.params[0] == 0) {
            want = image[ops::resize_nearest(nearest, sy, h) * w + ops::resize_nearest(nearest, sx, w)];
          } else {
            int64_t y0, y1, x0, x1;
            double dy, dx;
            ops::resize_linear_taps(sy, h, &y0, &y1, &dy);
            ops::resize_linear_taps(sx, w, &x0, &x1, &dx);
            want = static_cast<float>(ops::resize_blend(image[y0 * w + x0], image[y0 * w + x1],
                                                        image[y1 * w + x0], image[y1 * w + x1], dy, dx));
          }
          const float got = out.at((plane * oh + oy) * ow + ox);
          if (std::memcmp(&got, &want, sizeof got) != 0) ++mismatches;
        }
    CHECK(mismatches == 0);
  }
}

// ---- conv_transpose ------------------------------------------------------------------

// The scatter definition (ONNX ConvTranspose): every input element adds x * w
// to the outputs its taps reach, in double; then the bias.
std::vector<double> conv_transpose_reference(const HostTensor& x, const HostTensor& w, const HostTensor* bias,
                                             const std::vector<int64_t>& p, const Dims& out_dims) {
  const int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2], wd = x.dims[3];
  const int64_t kg = w.dims[1], kh = w.dims[2], kw = w.dims[3], groups = p[8];
  const int64_t k = out_dims[1], oh = out_dims[2], ow = out_dims[3], cg = c / groups;
  std::vector<double> out(static_cast<size_t>(n * k * oh * ow), 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t iy = 0; iy < h; ++iy)
        for (int64_t ix = 0; ix < wd; ++ix)
          for (int64_t kk = 0; kk < kg; ++kk)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t oy = iy * p[0] - p[2] + ky * p[6], ox = ix * p[1] - p[3] + kx * p[7];
                if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
                const int64_t ko = (ci / cg) * kg + kk;
                out[static_cast<size_t>(((b * k + ko) * oh + oy) * ow + ox)] +=
                    static_cast<double>(x.at(((b * c + ci) * h + iy) * wd + ix)) *
                    w.at(((ci * kg + kk) * kh + ky) * kw + kx);
              }
  if (bias)
    for (size_t i = 0; i < out.size(); ++i)
      out[i] += bias->at(static_cast<int64_t>(i / static_cast<size_t>(oh * ow)) % k);
  return out;
}

TEST_CASE("conv_transpose against the scatter definition") {
  struct Case {
    Dims x, w;
    bool bias;
    std::vector<int64_t> params;  // [sh, sw, pt, pl, pb, pr, dh, dw, groups, oph, opw]
  };
  const Case cases[] = {
      {{1, 4, 5, 5}, {4, 3, 3, 3}, true, {2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
      {{2, 3, 4, 4}, {3, 2, 3, 3}, false, {1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0}},
      {{1, 4, 5, 4}, {4, 3, 2, 3}, true, {2, 1, 0, 1, 1, 0, 2, 2, 2, 1, 0}},
      {{1, 3, 4, 3}, {3, 1, 4, 4}, true, {3, 2, 2, 0, 1, 3, 1, 1, 3, 2, 1}},
      {{1, 2, 1, 1}, {2, 5, 1, 1}, true, {1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0}},   // a 1x1 image
      {{1, 1, 3, 3}, {1, 1, 2, 2}, false, {4, 4, 0, 0, 0, 0, 1, 1, 1, 3, 2}},  // gaps between taps
      {{0, 2, 3, 3}, {2, 2, 3, 3}, true, {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}},   // no images
      // The cpu kernel's GEMM + gather (hal/cpu/spatial.cc): PP-OCR's 2x2 stride 2 (one tap per output),
      {{1, 8, 10, 12}, {8, 4, 2, 2}, true, {2, 2, 0, 0, 0, 0, 1, 1, 1, 0, 0}},
      {{1, 24, 9, 7}, {24, 1, 2, 2}, true, {2, 2, 0, 0, 0, 0, 1, 1, 1, 0, 0}},
      // bands of input rows (col past 1 MiB) whose windows overlap (4x4 taps, stride 2),
      {{1, 4, 80, 64}, {4, 8, 4, 4}, true, {2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
      // bands with groups, dilation, output padding and asymmetric pads,
      {{1, 4, 300, 70}, {4, 6, 3, 3}, true, {2, 3, 1, 2, 2, 0, 2, 1, 2, 1, 2}},
      // pads cropping all but one output row, output padding past the last tap.
      {{1, 2, 5, 5}, {2, 3, 3, 3}, true, {1, 1, 3, 3, 3, 3, 1, 1, 1, 0, 0}},
      {{2, 3, 3, 4}, {3, 2, 3, 2}, true, {3, 3, 0, 1, 0, 0, 1, 2, 1, 2, 1}},
  };
  uint32_t seed = 700;
  for (const Case& c : cases) {
    INFO("x " << dims_string(c.x) << " w " << dims_string(c.w) << " params " << dims_string(c.params));
    HostTensor x = random_f32(c.x, seed++), w = random_f32(c.w, seed++);
    HostTensor bias = random_f32({c.w[1] * c.params[8]}, seed++);
    std::vector<HostTensor*> inputs{&x, &w};
    if (c.bias) inputs.push_back(&bias);
    std::vector<TensorType> types;
    for (HostTensor* t : inputs) types.push_back(t->type());
    auto result = ops::infer_result_type(OpId::kConvTranspose, types, c.params);
    REQUIRE_MESSAGE(result.ok(), result.status().to_string());
    HostTensor out(DType::kF32, result->dims);
    REQUIRE(run_kernel(OpId::kConvTranspose, inputs, out, c.params).ok());
    check_close(out, conv_transpose_reference(x, w, c.bias ? &bias : nullptr, c.params, out.dims), 1e-5,
                1e-5);
  }
}

TEST_CASE("conv_transpose without its workspace runs the direct loop, with the same results") {
  // A dispatch whose workspace is missing (or smaller than the rule asked)
  // takes the per-element gather; both agree with the definition.
  HostTensor x = random_f32({1, 4, 9, 11}, 750), w = random_f32({4, 3, 3, 3}, 751), b = random_f32({6}, 752);
  const std::vector<int64_t> params{2, 2, 1, 1, 1, 1, 1, 1, 2, 1, 1};
  const std::vector<TensorType> types{x.type(), w.type(), b.type()};
  auto type = ops::infer_result_type(OpId::kConvTranspose, types, params);
  REQUIRE(type.ok());
  CHECK(ops::workspace_bytes(OpId::kConvTranspose, types, params) > 0);
  const std::vector<double> want = conv_transpose_reference(x, w, &b, params, type->dims);
  for (uint64_t size : {uint64_t{0}, uint64_t{64}}) {
    INFO("workspace " << size);
    HostTensor out(DType::kF32, type->dims);
    auto call = prepare_call(OpId::kConvTranspose, {&x, &w, &b}, {&out}, params);
    REQUIRE(call.ok());
    if (size == 0) call->dispatch.workspace = nullptr;
    call->dispatch.workspace_size = size;
    REQUIRE(reinterpret_cast<cpu::KernelFn>(call->dispatch.kernel)(KernelContext{}, call->dispatch).ok());
    check_close(out, want, 1e-5, 1e-5);
  }
}

TEST_CASE("conv_transpose: ONNX's example (ConvTranspose with strides and output_shape)") {
  // onnx/docs/Operators.md, convtranspose_output_shape: x 1x1x3x3 of 0..8, w 1x2x3x3 of ones, strides [3, 2],
  // output_shape [10, 8], one more than the natural 9 x 7 each way: output_padding [1, 1] (its twin example,
  // convtranspose_pad).
  HostTensor x(DType::kF32, {1, 1, 3, 3}), w(DType::kF32, {1, 2, 3, 3});
  for (int64_t i = 0; i < 9; ++i) x.at(i) = static_cast<float>(i);
  for (int64_t i = 0; i < 18; ++i) w.at(i) = 1.0f;
  ops::AttrMap attrs;
  attrs["strides"].value = std::vector<ops::AttrValue>{{int64_t{3}}, {int64_t{2}}};
  attrs["output_shape"].value = std::vector<ops::AttrValue>{{int64_t{10}}, {int64_t{8}}};
  auto params = ops::lower_attributes(OpId::kConvTranspose, std::vector{x.type(), w.type()}, attrs, {});
  REQUIRE_MESSAGE(params.ok(), params.status().to_string());
  CHECK(*params == std::vector<int64_t>{3, 2, 0, 0, 0, 0, 1, 1, 1, 1, 1});
  auto type = ops::infer_result_type(OpId::kConvTranspose, std::vector{x.type(), w.type()}, *params);
  REQUIRE(type.ok());
  CHECK(type->dims == Dims{1, 2, 10, 8});
  HostTensor out(DType::kF32, type->dims);
  REQUIRE(run_kernel(OpId::kConvTranspose, {&x, &w}, out, *params).ok());
  check_close(out, conv_transpose_reference(x, w, nullptr, *params, out.dims));
  // The first rows of the documented output (channel 0).
  const std::vector<double> row0{0, 0, 1, 1, 3, 2, 2, 0}, row9(8, 0.0);
  for (int64_t j = 0; j < 8; ++j) {
    CHECK(out.at(j) == row0[static_cast<size_t>(j)]);
    CHECK(out.at(9 * 8 + j) == row9[static_cast<size_t>(j)]);
  }
}

}  // namespace
}  // namespace hexir::hal::testing
