// quantized_conv2d against a reference written from the operator's
// definition (op.h): float-free int32 sums over unpacked [K, C/g, KH, KW]
// weights, then the requantization, byte for byte, on every kernel path
// (the test runs again under each HEXIR_MAX_CPU_ISA cap) and on a pool.
#include <bit>
#include <cstring>
#include <limits>

#include "hal_test_util.h"

namespace hexir::hal::testing {
namespace {

struct ConvShape {
  const char* name;
  int64_t n, c, h, w, k, kh, kw, stride, pad, dilation, groups;
  int32_t x_zero = 128, y_zero = 100, y_min = 0, y_max = 255;
  bool extreme = false;  // every x 255 and w -128: the largest sums
};

struct Operands {
  HostTensor x, w, bias, multiplier;
  std::vector<int8_t> weights;  // [k, c/g, kh, kw]
  std::vector<int64_t> params;
  int64_t oh, ow;
};

Operands make(const ConvShape& s) {
  const int64_t cg = s.c / s.groups, kg = s.k / s.groups, taps = s.kh * s.kw;
  const bool depthwise = s.groups == s.c && s.groups == s.k;
  const int64_t depth = (taps * cg + 3) / 4 * 4;
  Operands o{HostTensor(DType::kU8, {s.n, s.h, s.w, s.c}),
             depthwise ? HostTensor(DType::kI8, {taps, s.c})
                       : HostTensor(DType::kI8, {s.groups, (kg + 15) / 16, depth / 4, 16, 4}),
             HostTensor(DType::kI32, {s.k}),
             HostTensor(DType::kF32, {s.k}),
             std::vector<int8_t>(static_cast<size_t>(s.k * cg * taps)),
             {s.kh, s.kw, s.stride, s.stride, s.pad, s.pad, s.pad, s.pad, s.dilation, s.dilation, s.groups, s.x_zero,
              s.y_zero, s.y_min, s.y_max},
             (s.h + 2 * s.pad - s.dilation * (s.kh - 1) - 1) / s.stride + 1,
             (s.w + 2 * s.pad - s.dilation * (s.kw - 1) - 1) / s.stride + 1};
  for (size_t i = 0; i < o.x.bytes.size(); ++i) o.x.bytes[i] = s.extreme ? 255 : static_cast<uint8_t>(i * 37 + i / 7 + 11);
  for (size_t i = 0; i < o.weights.size(); ++i)
    o.weights[i] = s.extreme ? int8_t{-128} : static_cast<int8_t>(static_cast<uint8_t>(i * 89 + i / 5 + 7));
  for (int64_t k = 0; k < s.k; ++k) {
    const int32_t b = static_cast<int32_t>(k * 7919 % 20001) - 10000;
    const float m = 1.0f / static_cast<float>(64 * taps * cg + 13 * k);  // outputs spread over the u8 range
    std::memcpy(o.bias.bytes.data() + k * 4, &b, 4);
    std::memcpy(o.multiplier.bytes.data() + k * 4, &m, 4);
  }
  for (int64_t k = 0; k < s.k; ++k)
    for (int64_t ci = 0; ci < cg; ++ci)
      for (int64_t t = 0; t < taps; ++t) {
        const uint8_t v = static_cast<uint8_t>(o.weights[static_cast<size_t>((k * cg + ci) * taps + t)]);
        if (depthwise) {
          o.w.bytes[static_cast<size_t>(t * s.c + k)] = v;
        } else {
          const int64_t g = k / kg, r = t * cg + ci;
          // The layout spelled out (op.h): [group, block of 16 channels, r / 4, channel % 16, r % 4].
          o.w.bytes[static_cast<size_t>(((((g * ((kg + 15) / 16)) + k % kg / 16) * (depth / 4) + r / 4) * 16 + k % kg % 16) * 4 +
                                        r % 4)] = v;
        }
      }
  return o;
}

// The operator's definition, from the unpacked weights.
std::vector<uint8_t> reference(const ConvShape& s, const Operands& o) {
  const int64_t cg = s.c / s.groups, kg = s.k / s.groups;
  std::vector<uint8_t> out(static_cast<size_t>(s.n * o.oh * o.ow * s.k));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t oy = 0; oy < o.oh; ++oy)
      for (int64_t ox = 0; ox < o.ow; ++ox)
        for (int64_t k = 0; k < s.k; ++k) {
          int64_t sum = 0;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < s.kh; ++ky)
              for (int64_t kx = 0; kx < s.kw; ++kx) {
                const int64_t iy = oy * s.stride - s.pad + ky * s.dilation, ix = ox * s.stride - s.pad + kx * s.dilation;
                const int64_t c = k / kg * cg + ci;
                const int64_t x = iy < 0 || iy >= s.h || ix < 0 || ix >= s.w
                                      ? s.x_zero
                                      : o.x.bytes[static_cast<size_t>(((n * s.h + iy) * s.w + ix) * s.c + c)];
                sum += x * o.weights[static_cast<size_t>(((k * cg + ci) * s.kh + ky) * s.kw + kx)];
              }
          if (sum < INT32_MIN || sum > INT32_MAX) FAIL("a sum past int32: the case is malformed");
          int32_t b = 0;
          float m = 0;
          std::memcpy(&b, o.bias.bytes.data() + k * 4, 4);
          std::memcpy(&m, o.multiplier.bytes.data() + k * 4, 4);
          float v = static_cast<float>(static_cast<int32_t>(sum) + b) * m;
          v = std::min(std::max(v, static_cast<float>(s.y_min - s.y_zero)), static_cast<float>(s.y_max - s.y_zero));
          out[static_cast<size_t>(((n * o.oh + oy) * o.ow + ox) * s.k + k)] =
              static_cast<uint8_t>(static_cast<int32_t>(std::nearbyint(v)) + s.y_zero);
        }
  return out;
}

const std::vector<ConvShape>& shapes() {
  static const std::vector<ConvShape> all = {
      {"3x3 pad 1, channels past one tile", 1, 16, 9, 11, 70, 3, 3, 1, 1, 1, 1},
      {"3x3 stride 2, two images", 2, 24, 10, 9, 33, 3, 3, 2, 1, 1, 1},
      {"1x1 read in place", 1, 32, 7, 13, 130, 1, 1, 1, 0, 1, 1},
      {"1x1 stride 2 read in place", 1, 64, 8, 8, 20, 1, 1, 2, 0, 1, 1},
      {"1x1 with channels not a multiple of 4 (gathered)", 1, 6, 5, 5, 9, 1, 1, 1, 0, 1, 1},
      {"7x7 stem, 3 channels, stride 2 pad 3", 1, 3, 23, 19, 20, 7, 7, 2, 3, 1, 1},
      {"grouped, 4 groups", 1, 16, 6, 7, 24, 3, 3, 1, 1, 1, 4},
      {"dilation 2", 1, 8, 12, 12, 16, 3, 3, 1, 2, 2, 1},
      {"depthwise 3x3, 37 channels", 1, 37, 8, 9, 37, 3, 3, 1, 1, 1, 37},
      {"depthwise 5x5 stride 2", 2, 64, 11, 11, 64, 5, 5, 2, 2, 1, 64},
      {"depthwise 3x3 stride 2 dilation 2, 72 channels (rows inside read without checks)", 2, 72, 13, 14, 72, 3, 3, 2, 2, 2, 72},
      {"depthwise 3x3 without padding, 20 channels", 1, 20, 9, 10, 20, 3, 3, 1, 0, 1, 20},
      {"depthwise 3x3, 144 channels (blocks of 64 and a tail of 16)", 1, 144, 7, 6, 144, 3, 3, 1, 1, 1, 144},
      {"depthwise 9x9, 640 channels (interleaved weights past a task's buffer)", 1, 640, 6, 5, 640, 9, 9, 1, 4, 1, 640},
      {"deep window (gathered in blocks smaller than a row)", 1, 512, 5, 20, 40, 3, 3, 1, 1, 1, 1},
      {"relu and clip bounds", 1, 16, 6, 6, 16, 3, 3, 1, 1, 1, 1, 3, 40, 40, 200},
      {"1x1 16 -> 96 with clip bounds (whole vectors of the epilogue)", 1, 16, 6, 7, 96, 1, 1, 1, 0, 1, 1, 3, 40, 40, 200},
      {"depthwise 3x3 with clip bounds, 48 channels", 1, 48, 7, 7, 48, 3, 3, 1, 1, 1, 48, 3, 40, 40, 200},
      {"depthwise 3x3, 1200 channels (weights prepared in chunks)", 1, 1200, 4, 5, 1200, 3, 3, 1, 1, 1, 1200},
      {"depthwise 5x5 stride 2, 24 channels, the largest sums", 1, 24, 9, 9, 24, 5, 5, 2, 2, 1, 24, 0, 0, 0, 255, true},
      {"largest sums", 1, 256, 4, 4, 17, 3, 3, 1, 1, 1, 1, 0, 0, 0, 255, true},
  };
  return all;
}

TEST_CASE("quantized_conv2d: the integer sums and the requantization, byte for byte, on every window shape") {
  for (const ConvShape& s : shapes()) {
    INFO(s.name);
    Operands o = make(s);
    HostTensor out(DType::kU8, {s.n, o.oh, o.ow, s.k});
    REQUIRE(run_kernel(OpId::kQuantizedConv2d, {&o.x, &o.w, &o.bias, &o.multiplier}, out, o.params).ok());
    const std::vector<uint8_t> want = reference(s, o);
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < want.size(); ++i)
      if (out.bytes[i] != want[i] && wrong++ == 0) first = i;
    INFO("first wrong byte " << first << ": got " << int{out.bytes[first]} << ", want " << int{want[first]});
    CHECK(wrong == 0);
  }
}

TEST_CASE("quantized_conv2d: the same bytes on a pool of threads (each with its scratch)") {
  for (const ConvShape& s : {shapes()[0], shapes()[2], shapes()[8], shapes()[10], shapes()[12]}) {
    INFO(s.name);
    Operands o = make(s);
    HostTensor out(DType::kU8, {s.n, o.oh, o.ow, s.k});
    CpuQueueCall call = prepare_on_cpu_queue(2, OpId::kQuantizedConv2d, {&o.x, &o.w, &o.bias, &o.multiplier},
                                             {&out}, o.params);
    REQUIRE(call.queue->dispatch(call.call.dispatch).ok());
    REQUIRE(call.queue->synchronize().ok());
    CHECK(out.bytes == reference(s, o));
  }
}

TEST_CASE("quantized_conv2d: the rule refuses malformed operands, naming them") {
  const ConvShape s{"", 1, 8, 5, 5, 8, 3, 3, 1, 1, 1, 1};
  Operands o = make(s);
  std::vector<TensorType> in{o.x.type(), o.w.type(), o.bias.type(), o.multiplier.type()};
  CHECK(ops::infer_result_type(OpId::kQuantizedConv2d, in, o.params).ok());
  std::vector<int64_t> bad = o.params;
  bad[13] = 200, bad[14] = 100;  // y_min above y_max
  CHECK(ops::infer_result_type(OpId::kQuantizedConv2d, in, bad).status().message().find("y_min") != std::string::npos);
  bad = o.params;
  bad[11] = 256;
  CHECK(!ops::infer_result_type(OpId::kQuantizedConv2d, in, bad).ok());
  std::vector<TensorType> wrong = in;
  wrong[1].dims[1] += 1;  // depth
  CHECK(ops::infer_result_type(OpId::kQuantizedConv2d, wrong, o.params).status().message().find("weights") !=
        std::string::npos);
  wrong = in;
  wrong[0].dtype = DType::kI8;
  CHECK(!ops::infer_result_type(OpId::kQuantizedConv2d, wrong, o.params).ok());
}

TEST_CASE("quantized_add: every pair of bytes, the definition's (ops::quantized_add_of), with and without a relu") {
  // Scales for which a ratio-of-scales or reciprocal form gives other bytes (onnx_test.cc), so a vector
  // path that rounds a step differently from the definition fails here, at each ISA cap.
  for (const int32_t y_min : {0, 140}) {
    INFO("y_min " << y_min);
    HostTensor a(DType::kU8, {256, 256}), b(DType::kU8, {256, 256});
    for (size_t i = 0; i < a.bytes.size(); ++i) {
      a.bytes[i] = static_cast<uint8_t>(i / 256);
      b.bytes[i] = static_cast<uint8_t>(i % 256);
    }
    const std::vector<int64_t> params{121, 97, 140, y_min, 255, std::bit_cast<int64_t>(double{0.0663f}),
                                      std::bit_cast<int64_t>(double{0.0907f}), std::bit_cast<int64_t>(double{0.0798f})};
    HostTensor out(DType::kU8, {256, 256});
    REQUIRE(run_kernel(OpId::kQuantizedAdd, {&a, &b}, out, params).ok());
    ops::QuantizedAddPlan p{};
    p.a_scale = 0.0663f, p.b_scale = 0.0907f, p.y_scale = 0.0798f;
    p.a_zero = 121, p.b_zero = 97, p.y_zero = 140, p.y_min = y_min, p.y_max = 255;
    size_t wrong = 0;
    for (size_t i = 0; i < out.bytes.size(); ++i)
      wrong += out.bytes[i] != ops::quantized_add_of(p, a.bytes[i], b.bytes[i]);
    CHECK(wrong == 0);
  }
}

TEST_CASE("quantized_add: the rule refuses operands of two shapes, bounds out of order and scales not finite and positive") {
  const TensorType a{DType::kU8, {2, 3}}, b{DType::kU8, {3, 2}};
  const std::vector<int64_t> ok{128, 3, 7, 7, 255, std::bit_cast<int64_t>(0.05), std::bit_cast<int64_t>(0.125),
                                std::bit_cast<int64_t>(0.1)};
  CHECK(ops::infer_result_type(OpId::kQuantizedAdd, std::vector<TensorType>{a, a}, ok).ok());
  CHECK(ops::infer_result_type(OpId::kQuantizedAdd, std::vector<TensorType>{a, b}, ok).status().message().find(
            "one shape") != std::string::npos);
  std::vector<int64_t> bad = ok;
  bad[3] = 200, bad[4] = 100;
  CHECK(ops::infer_result_type(OpId::kQuantizedAdd, std::vector<TensorType>{a, a}, bad).status().message().find(
            "y_min") != std::string::npos);
  bad = ok;
  bad[5] = std::bit_cast<int64_t>(std::numeric_limits<double>::infinity());
  CHECK(ops::infer_result_type(OpId::kQuantizedAdd, std::vector<TensorType>{a, a}, bad).status().message().find(
            "finite positive") != std::string::npos);
  bad = ok;
  bad[7] = std::bit_cast<int64_t>(0.0);  // QuantizeLinear divides by it
  CHECK(ops::infer_result_type(OpId::kQuantizedAdd, std::vector<TensorType>{a, a}, bad).status().message().find(
            "finite positive") != std::string::npos);
}

}  // namespace
}  // namespace hexir::hal::testing
