// Fused epilogues: a conv2d or matmul carrying an activation (and a matmul
// its column bias) gives bit for bit what the unfused sequence gives — the
// plain kernel, then the add, then the activation's own kernel — on every
// kernel path (GEMM with packed patches, 1x1, grouped, depthwise, batched
// matmul) and at 1 and 2 threads.
#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <limits>

#include "hal_test_util.h"

namespace hexir::hal::testing {
namespace {

using ops::OpId;

struct ActivationCase {
  const char* name;
  OpId op;
  std::vector<int64_t> params;
};

std::vector<ActivationCase> activations() {
  auto word = [](double v) { return std::bit_cast<int64_t>(v); };
  const double inf = std::numeric_limits<double>::infinity();
  return {
      {"relu", OpId::kRelu, {}},
      {"gelu", OpId::kGelu, {0}},
      {"gelu tanh", OpId::kGelu, {1}},
      {"silu", OpId::kSilu, {}},
      {"sigmoid", OpId::kSigmoid, {}},
      {"tanh", OpId::kTanh, {}},
      {"leaky_relu", OpId::kLeakyRelu, {word(0.1)}},
      {"clip relu6", OpId::kClip, {word(0.0), word(6.0)}},
      {"clip unbounded above", OpId::kClip, {word(-0.5), word(inf)}},
      {"hard_sigmoid", OpId::kHardSigmoid, {word(0.2), word(0.5)}},
      {"hard_swish", OpId::kHardSwish, {}},
  };
}

// Runs one call through a cpu queue with `threads` threads.
void run(int threads, OpId id, std::vector<HostTensor*> inputs, HostTensor& out, const std::vector<int64_t>& params) {
  CpuQueueCall q = prepare_on_cpu_queue(threads, id, inputs, {&out}, params);
  Status status = q.queue->dispatch(q.call.dispatch);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
}

// Fused against unfused, for every activation and both thread counts.
// `bias` (a matmul's bias, a conv2d's residual: the last input) is added by
// an add kernel when unfused.
void check_fused(OpId id, std::vector<HostTensor*> inputs, HostTensor* bias, const std::vector<int64_t>& params,
                 const std::vector<int64_t>& out_dims) {
  for (const ActivationCase& a : activations()) {
    INFO(a.name);
    std::optional<std::vector<int64_t>> words = ops::epilogue_words(a.op, a.params);  // a.params: a vector
    REQUIRE(words.has_value());
    std::vector<int64_t> fused_params = params;
    if (id == OpId::kMatmul && fused_params.empty()) fused_params.push_back(0);  // its transpose_b word
    fused_params.insert(fused_params.end(), words->begin(), words->end());
    std::vector<HostTensor*> fused_inputs = inputs;
    if (bias) fused_inputs.push_back(bias);
    for (int threads : {1, 2}) {
      INFO("threads " << threads);
      HostTensor plain(DType::kF32, out_dims), biased(DType::kF32, out_dims), want(DType::kF32, out_dims),
          got(DType::kF32, out_dims);
      run(threads, id, inputs, plain, params);
      HostTensor* pre = &plain;
      if (bias) {
        run(threads, OpId::kAdd, {&plain, bias}, biased, {});
        pre = &biased;
      }
      run(threads, a.op, {pre}, want, a.params);
      run(threads, id, fused_inputs, got, fused_params);
      CHECK(got.bytes == want.bytes);
    }
  }
}

HostTensor with_nan(HostTensor t) {
  t.at(t.count() / 2) = std::numeric_limits<float>::quiet_NaN();
  return t;
}

TEST_CASE("epilogue: conv2d with a fused activation is bit-identical to conv2d then the activation") {
  HostTensor x = with_nan(random_f32({2, 8, 13, 11}, 1, -3.0f, 3.0f)), bias = random_f32({8}, 2);
  HostTensor w3 = random_f32({8, 8, 3, 3}, 3), w1 = random_f32({8, 8, 1, 1}, 4);
  HostTensor wg = random_f32({8, 4, 3, 3}, 5), wd = random_f32({8, 1, 5, 5}, 6);
  SUBCASE("3x3, packed patches, bias") {
    HostTensor* b = &bias;
    check_fused(OpId::kConv2d, {&x, &w3, b}, nullptr, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {2, 8, 13, 11});
  }
  SUBCASE("1x1 plain GEMM, no bias") {
    check_fused(OpId::kConv2d, {&x, &w1}, nullptr, {1, 1, 0, 0, 0, 0, 1, 1, 1}, {2, 8, 13, 11});
  }
  SUBCASE("grouped, strided") {
    check_fused(OpId::kConv2d, {&x, &wg, &bias}, nullptr, {2, 2, 1, 1, 1, 1, 1, 1, 2}, {2, 8, 7, 6});
  }
  SUBCASE("depthwise 5x5") {
    check_fused(OpId::kConv2d, {&x, &wd, &bias}, nullptr, {1, 1, 2, 2, 2, 2, 1, 1, 8}, {2, 8, 13, 11});
  }
}

TEST_CASE("epilogue: conv2d with a residual and an activation is bit-identical to conv2d, add, activation") {
  // The residual (with a NaN) goes in as the conv2d's fourth input fused, through an add kernel unfused;
  // odd widths leave partial register tiles (columns and rows).
  HostTensor x = random_f32({2, 8, 13, 11}, 21, -3.0f, 3.0f), bias = random_f32({8}, 22);
  HostTensor w3 = random_f32({8, 8, 3, 3}, 23), w1 = random_f32({8, 8, 1, 1}, 24);
  HostTensor wg = random_f32({8, 4, 3, 3}, 25), wd = random_f32({8, 1, 5, 5}, 26);
  HostTensor residual = with_nan(random_f32({2, 8, 13, 11}, 27, -3.0f, 3.0f));
  SUBCASE("3x3, packed patches") {
    check_fused(OpId::kConv2d, {&x, &w3, &bias}, &residual, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {2, 8, 13, 11});
  }
  SUBCASE("1x1 plain GEMM, wide enough to split over threads") {
    HostTensor xs = random_f32({1, 24, 40, 37}, 28), ws = random_f32({24, 24, 1, 1}, 29), bs = random_f32({24}, 30);
    HostTensor rs = with_nan(random_f32({1, 24, 40, 37}, 31));
    check_fused(OpId::kConv2d, {&xs, &ws, &bs}, &rs, {1, 1, 0, 0, 0, 0, 1, 1, 1}, {1, 24, 40, 37});
  }
  SUBCASE("grouped, strided") {
    HostTensor r = with_nan(random_f32({2, 8, 7, 6}, 32));
    check_fused(OpId::kConv2d, {&x, &wg, &bias}, &r, {2, 2, 1, 1, 1, 1, 1, 1, 2}, {2, 8, 7, 6});
  }
  SUBCASE("depthwise 5x5") {
    check_fused(OpId::kConv2d, {&x, &wd, &bias}, &residual, {1, 1, 2, 2, 2, 2, 1, 1, 8}, {2, 8, 13, 11});
  }
  SUBCASE("a few-channel stem, strided") {
    HostTensor xs = random_f32({1, 3, 20, 37}, 33), ws = random_f32({16, 3, 5, 5}, 34), bs = random_f32({16}, 35);
    HostTensor r = with_nan(random_f32({1, 16, 10, 19}, 36));
    check_fused(OpId::kConv2d, {&xs, &ws, &bs}, &r, {2, 2, 2, 2, 2, 2, 1, 1, 1}, {1, 16, 10, 19});
  }
}

TEST_CASE("epilogue: matmul with a fused bias and activation is bit-identical to matmul, add, activation") {
  SUBCASE("large enough to split over threads, with bias") {
    HostTensor a = with_nan(random_f32({97, 300}, 7)), b = random_f32({300, 70}, 8), bias = random_f32({70}, 9);
    check_fused(OpId::kMatmul, {&a, &b}, &bias, {}, {97, 70});
  }
  SUBCASE("batched, no bias") {
    HostTensor a = random_f32({3, 5, 8}, 10), b = random_f32({8, 6}, 11);
    check_fused(OpId::kMatmul, {&a, &b}, nullptr, {}, {3, 5, 6});
  }
  SUBCASE("batched with bias") {
    HostTensor a = random_f32({2, 4, 8}, 12), b = random_f32({2, 8, 6}, 13), bias = random_f32({6}, 14);
    check_fused(OpId::kMatmul, {&a, &b}, &bias, {}, {2, 4, 6});
  }
}

TEST_CASE("epilogue: add with a fused activation is bit-identical to add then the activation") {
  HostTensor a = with_nan(random_f32({3, 61, 1031}, 15)), b = random_f32({3, 61, 1031}, 16);
  HostTensor row = random_f32({1031}, 17), column = random_f32({3, 61, 1}, 18), scalar = random_f32({1}, 19);
  const std::vector<int64_t> dims{3, 61, 1031};
  SUBCASE("flat") { check_fused(OpId::kAdd, {&a, &b}, nullptr, {}, dims); }
  SUBCASE("scalar") { check_fused(OpId::kAdd, {&scalar, &a}, nullptr, {}, dims); }
  SUBCASE("general: rows") { check_fused(OpId::kAdd, {&a, &row}, nullptr, {}, dims); }
  SUBCASE("general: a column") { check_fused(OpId::kAdd, {&column, &a}, nullptr, {}, dims); }
  SUBCASE("one element") {
    HostTensor x = random_f32({1}, 20), y = random_f32({1, 1}, 21);
    check_fused(OpId::kAdd, {&x, &y}, nullptr, {}, {1, 1});
  }
}

TEST_CASE("epilogue: mul with a fused activation, and add / mul with the affine map, bit-identical to the passes") {
  HostTensor a = with_nan(random_f32({3, 61, 1031}, 22)), b = random_f32({3, 61, 1031}, 23);
  HostTensor column = random_f32({3, 61, 1}, 24), scalar = random_f32({1}, 25);
  const std::vector<int64_t> dims{3, 61, 1031};
  SUBCASE("mul + activation, flat") { check_fused(OpId::kMul, {&a, &b}, nullptr, {}, dims); }
  SUBCASE("mul + activation, a broadcast column (the squeeze-excitation gate)") {
    check_fused(OpId::kMul, {&column, &a}, nullptr, {}, dims);
  }
  // affine: x * s then + t, against the mul and add kernels; s = 1 or t = -0 where one step is missing.
  auto word = [](float v) { return std::bit_cast<int64_t>(static_cast<double>(v)); };
  const int64_t affine = static_cast<int64_t>(ops::Activation::kAffine);
  HostTensor zero(DType::kF32, {1});
  for (OpId id : {OpId::kMul, OpId::kAdd}) {
    for (HostTensor* other : {&b, &scalar, &column}) {
      for (const std::pair<float, float>& st :
           {std::pair{0.75f, -0.125f}, std::pair{1.0f, 3.5f}, std::pair{-2.0f, -0.0f}}) {
        const float s = st.first, t = st.second;  // not a structured binding: INFO's lambda captures them (clang 14)
        INFO(ops::op_def(id).name << " scale " << s << " shift " << t);
        for (int threads : {1, 2}) {
          HostTensor plain(DType::kF32, dims), scaled(DType::kF32, dims), want(DType::kF32, dims),
              got(DType::kF32, dims), sv(DType::kF32, {1}), tv(DType::kF32, {1});
          sv.at(0) = s;
          tv.at(0) = t;
          run(threads, id, {&a, other}, plain, {});
          run(threads, OpId::kMul, {&plain, &sv}, scaled, {});
          run(threads, OpId::kAdd, {&scaled, &tv}, want, {});
          if (s == 1.0f) run(threads, OpId::kAdd, {&plain, &tv}, want, {});
          if (t == -0.0f && std::signbit(t)) want = scaled;
          run(threads, id, {&a, other}, got, {affine, word(s), word(t)});
          CHECK(got.bytes == want.bytes);
        }
      }
    }
  }
}

TEST_CASE("erf, gelu, hard_sigmoid, hard_swish: the vector paths give the scalar functions' bits; erf within 7 ulps of libm") {
  // Every tail length past a 16-lane block, edges, infinities and NaN.
  HostTensor x(DType::kF32, {40037});
  for (int64_t i = 0; i < x.count(); ++i) x.at(i) = -5.0f + 10.0f * static_cast<float>(i) / 40037.0f;
  const float specials[] = {0.0f, -0.0f, 4.0f, -4.0f, 3.9999f, 1e-30f, -1e-20f,
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  for (size_t i = 0; i < std::size(specials); ++i) x.at(static_cast<int64_t>(i) * 17) = specials[i];
  HostTensor erf_out(DType::kF32, {40037}), gelu_out(DType::kF32, {40037});
  REQUIRE(run_kernel(OpId::kErf, {&x}, erf_out).ok());
  REQUIRE(run_kernel(OpId::kGelu, {&x}, gelu_out, {0}).ok());
  int mismatches = 0;
  double worst = 0;
  for (int64_t i = 0; i < x.count(); ++i) {
    const float e = ops::erf_of(x.at(i)), g = ops::gelu_erf_of(x.at(i));
    mismatches += std::bit_cast<uint32_t>(e) != std::bit_cast<uint32_t>(erf_out.at(i));
    mismatches += std::bit_cast<uint32_t>(g) != std::bit_cast<uint32_t>(gelu_out.at(i));
    const double want = std::erf(static_cast<double>(x.at(i)));
    if (std::isnan(want)) {
      CHECK(std::isnan(erf_out.at(i)));
      continue;
    }
    worst = std::max(worst, std::fabs(erf_out.at(i) - want) / std::max(std::fabs(want), 1e-30));
  }
  CHECK(mismatches == 0);
  CHECK(worst < 5e-7);

  // hard_sigmoid and hard_swish: vector blocks (branch-free clamps) with the scalar functions' bits,
  // on wide data (both sides of the clamps), -0, infinities and NaN.
  HostTensor wide(DType::kF32, {40037});
  for (int64_t i = 0; i < wide.count(); ++i) wide.at(i) = 8.0f * x.at(i);
  for (size_t i = 0; i < std::size(specials); ++i) wide.at(static_cast<int64_t>(i) * 19) = specials[i];
  wide.at(7) = -3.0f;
  wide.at(8) = 3.0f;
  HostTensor sigmoid_out(DType::kF32, {40037}), swish_out(DType::kF32, {40037});
  const int64_t alpha = std::bit_cast<int64_t>(0.2), beta = std::bit_cast<int64_t>(0.5);
  REQUIRE(run_kernel(OpId::kHardSigmoid, {&wide}, sigmoid_out, {alpha, beta}).ok());
  REQUIRE(run_kernel(OpId::kHardSwish, {&wide}, swish_out).ok());
  int hard_mismatches = 0;
  for (int64_t i = 0; i < wide.count(); ++i) {
    const float v = wide.at(i);
    hard_mismatches += std::bit_cast<uint32_t>(ops::hard_sigmoid_of(v, 0.2f, 0.5f)) !=
                       std::bit_cast<uint32_t>(sigmoid_out.at(i));
    hard_mismatches += std::bit_cast<uint32_t>(ops::hard_swish_of(v)) != std::bit_cast<uint32_t>(swish_out.at(i));
  }
  CHECK(hard_mismatches == 0);

  // relu (a vector select, also the fused epilogues' pass): relu_of's bits,
  // -0 to +0 and NaN kept.
  wide.at(9) = -0.0f;
  HostTensor relu_out(DType::kF32, {40037});
  REQUIRE(run_kernel(OpId::kRelu, {&wide}, relu_out).ok());
  int relu_mismatches = 0;
  for (int64_t i = 0; i < wide.count(); ++i)
    relu_mismatches += std::bit_cast<uint32_t>(ops::relu_of(wide.at(i))) != std::bit_cast<uint32_t>(relu_out.at(i));
  CHECK(relu_mismatches == 0);
  CHECK(std::bit_cast<uint32_t>(relu_out.at(9)) == 0u);
}

// Distance from the exact value `want` in units of the float ulp at want.
double ulps(float got, double want) {
  int exponent = 0;
  std::frexp(std::fabs(want), &exponent);
  return std::fabs(static_cast<double>(got) - want) / std::ldexp(1.0, std::max(exponent - 24, -149));
}

TEST_CASE("sigmoid, silu, tanh, gelu tanh: the vector paths give the scalar functions' bits; within 3 ulps of exact") {
  // A dense sweep of [-20, 20], every 4099th float (subnormals, tiny, huge,
  // infinities, NaNs), and the edges of the ranges: 1,247,830 values, so
  // every tail length past a 16-lane block comes up in the threads' ranges.
  std::vector<float> values;
  for (int i = 0; i < 200003; ++i) values.push_back(-20.0f + 40.0f * static_cast<float>(i) / 200003.0f);
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099)
    values.push_back(std::bit_cast<float>(static_cast<uint32_t>(u)));
  const float inf = std::numeric_limits<float>::infinity();
  // 17: the vector paths raise exp's argument to -17 (lanes.h: logistic_exp); from 88.03 on, its scale is
  // 2^128 (2^127 times 2).
  for (float v : {0.0f, 1e-30f, 1e-40f, 0.625f, 0.62499994f, 9.0f, 9.5f, 16.99999f, 17.0f, 17.00001f, 86.99999f,
                  87.0f, 87.00001f, 88.0f, 88.02f, 88.03f, 88.04f, 88.5f, 88.72f, 88.73f, 89.0f, 103.9f, 104.0f, 1e30f,
                  inf, std::numeric_limits<float>::quiet_NaN()}) {
    values.push_back(v);
    values.push_back(-v);
  }
  HostTensor x(DType::kF32, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) x.at(static_cast<int64_t>(i)) = values[i];
  const double kMinNormal = std::numeric_limits<float>::min();

  struct Case {
    const char* name;
    OpId op;
    std::vector<int64_t> params;
    float (*scalar)(float);
    double (*exact)(double);
    double max_ulps;  // where the exact result is a normal float (see `counted`)
  };
  const Case cases[] = {
      {"sigmoid", OpId::kSigmoid, {}, ops::sigmoid_of, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, 3},
      {"silu", OpId::kSilu, {}, ops::silu_of, [](double v) { return v / (1.0 + std::exp(-v)); }, 3},
      {"tanh", OpId::kTanh, {}, ops::tanh_of, [](double v) { return std::tanh(v); }, 2},
      {"gelu tanh", OpId::kGelu, {1}, ops::gelu_tanh_of,
       [](double v) { return 0.5 * v * (1.0 + std::tanh(0.79788456080286536 * (v + 0.044715 * v * v * v))); }, 0},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    for (int threads : {1, 2}) {
      HostTensor out(DType::kF32, x.dims);
      run(threads, c.op, {&x}, out, c.params);
      int64_t mismatches = 0, counted = 0;
      double worst = 0;
      float worst_at = 0;
      for (int64_t i = 0; i < x.count(); ++i) {
        const float v = x.at(i), got = out.at(i), want = c.scalar(v);
        // The same bits (a NaN is a NaN: its sign and payload are not compared).
        mismatches += std::isnan(want) ? !std::isnan(got)
                                       : std::bit_cast<uint32_t>(want) != std::bit_cast<uint32_t>(got);
        const double exact = c.exact(v);
        if (!std::isfinite(exact) || std::fabs(exact) < kMinNormal || std::fabs(exact) > 3.4e38) continue;
        // silu: x / (1 + exp(-x)) is 0 once exp(-x) overflows (x < -88.72), as with expf.
        if (c.op == OpId::kSilu && v < -88.72f) continue;
        double error;
        if (c.op == OpId::kGelu) {
          // 1 + tanh(u) cancels for x below about -3 (the relative error of
          // the result grows as it vanishes), so: |error| against |x|,
          // 2^-22 |x| at most (the tanh form with libm's tanhf: 2.2 * 2^-24 |x|).
          if (std::fabs(v) < 1e-30f || std::fabs(v) > 1e18f) continue;
          error = std::fabs(got - exact) / (std::fabs(static_cast<double>(v)) * 0x1p-22);
        } else {
          error = ulps(got, exact);
        }
        ++counted;
        if (error > worst) {
          worst = error;
          worst_at = v;
        }
      }
      CHECK(mismatches == 0);
      const std::string unit = c.op == OpId::kGelu ? " x 2^-22 |x|" : " ulps";
      INFO("worst at x = " << worst_at << ": " << worst << unit);
      CHECK(counted > 400000);
      CHECK(worst <= (c.op == OpId::kGelu ? 1.0 : c.max_ulps));
    }
  }
  // The edges, exactly.
  CHECK(ops::sigmoid_of(inf) == 1.0f);
  CHECK(ops::sigmoid_of(-inf) == 0.0f);
  CHECK(ops::sigmoid_of(-89.0f) == 0.0f);  // exp(89) overflows
  CHECK(ops::sigmoid_of(0.0f) == 0.5f);
  CHECK(ops::silu_of(inf) == inf);
  CHECK(std::isnan(ops::silu_of(-inf)));  // -inf / inf, as x / (1 + expf(-x)) gives
  CHECK(ops::tanh_of(inf) == 1.0f);
  CHECK(ops::tanh_of(-inf) == -1.0f);
  CHECK(ops::tanh_of(9.5f) == 1.0f);
  CHECK(ops::tanh_of(-9.5f) == -1.0f);
  CHECK(std::signbit(ops::tanh_of(-0.0f)));
  CHECK(ops::tanh_of(1e-30f) == 1e-30f);
  CHECK(std::isnan(ops::tanh_of(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(ops::sigmoid_of(std::numeric_limits<float>::quiet_NaN())));
  CHECK(ops::gelu_tanh_of(inf) == inf);
  CHECK(ops::gelu_tanh_of(-30.0f) == 0.0f);

  // exp_of itself: within 1 ulp of exp wherever exp is a normal float;
  // inf from 88.73 on, 0 below -103.98 and for -inf, subnormal in between.
  double worst_exp = 0;
  for (float v : values) {
    const double exact = std::exp(static_cast<double>(v));
    if (std::isnan(exact) || exact < kMinNormal || exact > 3.4e38) continue;
    worst_exp = std::max(worst_exp, ulps(ops::exp_of(v), exact));
  }
  CHECK(worst_exp <= 1.0);
  CHECK(ops::exp_of(0.0f) == 1.0f);
  CHECK(ops::exp_of(88.72f) == doctest::Approx(std::exp(static_cast<double>(88.72f))).epsilon(1e-6));
  CHECK(ops::exp_of(88.73f) == inf);
  CHECK(ops::exp_of(inf) == inf);
  CHECK(ops::exp_of(-inf) == 0.0f);
  CHECK(ops::exp_of(-104.0f) == 0.0f);
  CHECK(ops::exp_of(-100.0f) == doctest::Approx(std::exp(-100.0)).epsilon(0.05));  // subnormal: 26 units of 2^-149
  CHECK(std::isnan(ops::exp_of(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("epilogue: the operator rules check the epilogue words and the bias") {
  auto f32 = [](std::vector<int64_t> d) { return TensorType{DType::kF32, std::move(d)}; };
  const std::vector<int64_t> conv{1, 1, 0, 0, 0, 0, 1, 1, 1};
  auto conv_with = [&](std::vector<int64_t> words) {
    std::vector<int64_t> p = conv;
    p.insert(p.end(), words.begin(), words.end());
    return ops::infer_result_types(OpId::kConv2d, std::vector<TensorType>{f32({1, 2, 3, 3}), f32({4, 2, 1, 1})}, p);
  };
  const int64_t relu = static_cast<int64_t>(ops::Activation::kRelu);
  const int64_t clip = static_cast<int64_t>(ops::Activation::kClip);
  const int64_t nan = std::bit_cast<int64_t>(std::numeric_limits<double>::quiet_NaN());
  const int64_t inf = std::bit_cast<int64_t>(std::numeric_limits<double>::infinity());
  CHECK(conv_with({relu, 0, 0}).ok());
  CHECK(conv_with({clip, std::bit_cast<int64_t>(0.0), inf}).ok());
  CHECK_FALSE(conv_with({relu}).ok());           // a partial epilogue
  CHECK_FALSE(conv_with({99, 0, 0}).ok());       // unknown activation
  CHECK_FALSE(conv_with({0, 0, 0}).ok());        // "none" is no epilogue: not written
  CHECK_FALSE(conv_with({relu, 1, 0}).ok());     // relu takes no parameters
  CHECK_FALSE(conv_with({clip, nan, inf}).ok());  // never NaN
  const int64_t leaky = static_cast<int64_t>(ops::Activation::kLeakyRelu);
  CHECK_FALSE(conv_with({leaky, inf, 0}).ok());  // finite unless clip
  // The affine map is for add and mul only.
  const int64_t affine = static_cast<int64_t>(ops::Activation::kAffine);
  const int64_t one = std::bit_cast<int64_t>(1.0);
  CHECK_FALSE(conv_with({affine, one, 0}).ok());
  CHECK(ops::infer_result_types(OpId::kMul, std::vector<TensorType>{f32({2, 3}), f32({1})}, std::vector<int64_t>{affine, one, 0})
            .ok());
  CHECK_FALSE(ops::infer_result_types(OpId::kSub, std::vector<TensorType>{f32({2, 3}), f32({1})},
                                      std::vector<int64_t>{affine, one, 0})
                  .ok());
  CHECK_FALSE(ops::infer_result_types(OpId::kMatmul, std::vector<TensorType>{f32({2, 3}), f32({3, 4})},
                                      std::vector<int64_t>{affine, one, 0})
                  .ok());
  Result<std::vector<TensorType>> mm =
      ops::infer_result_types(OpId::kMatmul, std::vector<TensorType>{f32({2, 3}), f32({3, 4}), f32({4})}, {});
  CHECK(mm.ok());
  CHECK_FALSE(
      ops::infer_result_types(OpId::kMatmul, std::vector<TensorType>{f32({2, 3}), f32({3, 4}), f32({3})}, {}).ok());
  CHECK_FALSE(
      ops::infer_result_types(OpId::kMatmul, std::vector<TensorType>{f32({2, 3}), f32({3}), f32({1})}, {}).ok());
  CHECK(ops::infer_result_types(OpId::kMatmul, std::vector<TensorType>{f32({2, 3}), f32({3, 4})}, std::vector<int64_t>{0, relu, 0, 0})
            .ok());
  // Before the epilogue, matmul's transpose_b word (0 or 1): [2, 3] x [4, 3]^T.
  CHECK(ops::infer_result_types(OpId::kMatmul, std::vector<TensorType>{f32({2, 3}), f32({4, 3})}, std::vector<int64_t>{1})
            .ok());
  CHECK_FALSE(ops::infer_result_types(OpId::kMatmul, std::vector<TensorType>{f32({2, 3}), f32({3, 4})},
                                      std::vector<int64_t>{relu, 0, 0})
                  .ok());
  CHECK_FALSE(ops::infer_result_types(OpId::kMatmul, std::vector<TensorType>{f32({2, 3}), f32({4, 3})},
                                      std::vector<int64_t>{2})
                  .ok());
  CHECK_FALSE(ops::infer_result_types(OpId::kMatmul, std::vector<TensorType>{f32({2, 3}), f32({3, 4})}, std::vector<int64_t>{relu})
                  .ok());
  // The mapping both ways.
  CHECK_FALSE(ops::epilogue_words(OpId::kExp, std::vector<int64_t>{}).has_value());
  CHECK_FALSE(ops::epilogue_words(OpId::kGelu, std::vector<int64_t>{2}).has_value());
  auto back = ops::epilogue_op(*ops::epilogue_words(OpId::kGelu, std::vector<int64_t>{1}));
  REQUIRE(back.has_value());
  CHECK(back->first == OpId::kGelu);
  CHECK(back->second == std::vector<int64_t>{1});
}

}  // namespace
}  // namespace hexir::hal::testing
