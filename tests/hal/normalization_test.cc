// softmax, attention, log_softmax, hardmax, layernorm, the reductions (reduce_sum's
// family), argmax, argmin, top_k and cumsum (hal/cpu/normalization.cc)
// against double references.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <type_traits>

#include "reference_util.h"

namespace hexir::hal::testing {
namespace {

using ops::OpId;

std::vector<double> softmax_reference(const HostTensor& x, int64_t axis) {
  const auto strides = row_major_strides(x.dims);
  std::vector<double> out(static_cast<size_t>(x.count()));
  for (int64_t i = 0; i < x.count(); ++i) {
    const auto index = unravel(i, x.dims);
    const int64_t row_start = i - index[axis] * strides[axis];
    double max_value = -INFINITY;
    for (int64_t j = 0; j < x.dims[axis]; ++j)
      max_value = std::max<double>(max_value, x.at(row_start + j * strides[axis]));
    double sum = 0;
    for (int64_t j = 0; j < x.dims[axis]; ++j)
      sum += std::exp(x.at(row_start + j * strides[axis]) - max_value);
    out[i] = std::exp(x.at(i) - max_value) / sum;
  }
  return out;
}

TEST_CASE("softmax: along every axis of a rank-3 tensor") {
  for (int64_t axis = 0; axis < 3; ++axis) {
    INFO("axis " << axis);
    HostTensor x = random_f32({3, 4, 5}, 31, -4, 4);
    HostTensor out(DType::kF32, x.dims);
    REQUIRE(run_kernel(OpId::kSoftmax, {&x}, out, {axis}).ok());
    check_close(out, softmax_reference(x, axis), 1e-5, 1e-7);
  }
}

TEST_CASE("softmax: rank 1 and rank 4 with a size-1 axis") {
  HostTensor v = random_f32({10}, 32);
  HostTensor v_out(DType::kF32, v.dims);
  REQUIRE(run_kernel(OpId::kSoftmax, {&v}, v_out, {0}).ok());
  check_close(v_out, softmax_reference(v, 0), 1e-5, 1e-7);

  HostTensor x = random_f32({2, 1, 3, 2}, 33);
  HostTensor out(DType::kF32, x.dims);
  REQUIRE(run_kernel(OpId::kSoftmax, {&x}, out, {1}).ok());
  check_close(out, std::vector<double>(static_cast<size_t>(x.count()), 1.0));
}

TEST_CASE("softmax: large logits do not overflow (max subtracted)") {
  HostTensor x(DType::kF32, {1, 3});
  x.at(0) = 1000.0f;
  x.at(1) = 999.0f;
  x.at(2) = -1000.0f;
  HostTensor out(DType::kF32, x.dims);
  REQUIRE(run_kernel(OpId::kSoftmax, {&x}, out, {1}).ok());
  check_close(out, softmax_reference(x, 1), 1e-5, 1e-30);
}

TEST_CASE("softmax: in place and zero-size") {
  HostTensor x = random_f32({4, 6}, 34);
  const auto want = softmax_reference(x, 1);
  REQUIRE(run_kernel(OpId::kSoftmax, {&x}, x, {1}).ok());
  check_close(x, want, 1e-5, 1e-7);

  HostTensor empty(DType::kF32, {0, 6}), empty_out(DType::kF32, {0, 6});
  CHECK(run_kernel(OpId::kSoftmax, {&empty}, empty_out, {1}).ok());
  HostTensor x2 = random_f32({2, 3}, 35), out2(DType::kF32, {2, 3});
  CHECK(run_kernel(OpId::kSoftmax, {&x2}, out2, {2}).code() == StatusCode::kInvalidArgument);
  CHECK(run_kernel(OpId::kSoftmax, {&x2}, out2, {}).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("softmax: last-axis rows (the vectorized exp) against the double reference at every tail length") {
  for (int64_t length : {1, 2, 15, 16, 17, 31, 33, 64, 257, 1000}) {
    INFO("length " << length);
    HostTensor x = random_f32({3, length}, 36, -30.0f, 30.0f), out(DType::kF32, {3, length});
    x.at(0) = -1e30f;  // far below the maximum: exp underflows to 0
    REQUIRE(run_kernel(OpId::kSoftmax, {&x}, out, {1}).ok());
    // x - max is rounded to float first (as in the scalar path): a relative
    // error of up to |x - max| * 2^-24 in the exponent, 4e-6 at 60.
    check_close(out, softmax_reference(x, 1), 5e-6, 1e-30);
  }
  // Rows with NaN or an infinity take the scalar path: NaN everywhere, as numpy.
  const float inf = std::numeric_limits<float>::infinity();
  HostTensor x(DType::kF32, {3, 20}), out(DType::kF32, {3, 20});
  for (int64_t i = 0; i < x.count(); ++i) x.at(i) = static_cast<float>(i % 7);
  x.at(3) = std::numeric_limits<float>::quiet_NaN();
  x.at(20 + 5) = inf;
  for (int64_t j = 0; j < 20; ++j) x.at(40 + j) = -inf;
  REQUIRE(run_kernel(OpId::kSoftmax, {&x}, out, {1}).ok());
  check_close(out, softmax_reference(x, 1), 2e-6, 1e-30);
}

TEST_CASE("softmax: masked rows give the scalar steps' bits, exp_of's subnormals and zeros included") {
  // The row's steps written out with ops::exp_of: element j's exp in lane j % 16, the lanes summed in
  // double in order, each exp times float(1 / sum). x - max spans exp_of's subnormal results (-87.3 to
  // -103.97), its zeros (-104 and below, where the vector exp skips the subnormal multiply), and the
  // masks exporters add (finfo.min, -inf, -1e4); the vector blocks and the tail at every length.
  const float kMasks[] = {-3.4028235e38f, -std::numeric_limits<float>::infinity(), -1e4f, -104.0f, -103.99f,
                          -103.3f, -100.0f, -95.5f, -88.0f, -87.5f, -87.3f, -87.0f, -50.0f};
  for (int64_t length : {16, 23, 48, 130}) {
    INFO("length " << length);
    HostTensor x = random_f32({4, length}, 37, -3.0f, -0.01f), out(DType::kF32, {4, length});
    for (int64_t i = 0; i < x.count(); ++i) {
      if (i % length == 0) x.at(i) = 0.0f;  // every row's maximum is 0 (x - max is x)
      else if ((i * 7) % 3 != 0) x.at(i) = kMasks[static_cast<size_t>(i) % std::size(kMasks)];
    }
    REQUIRE(run_kernel(OpId::kSoftmax, {&x}, out, {1}).ok());
    int64_t mismatches = 0;
    for (int64_t row = 0; row < 4; ++row) {
      float e[130], lanes[16] = {};
      for (int64_t j = 0; j < length; ++j) {
        e[j] = ops::exp_of(x.at(row * length + j) - 0.0f);
        lanes[j % 16] += e[j];
      }
      double sum = 0.0;
      for (float v : lanes) sum += v;
      const float scale = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < length; ++j)
        mismatches += std::bit_cast<uint32_t>(e[j] * scale) != std::bit_cast<uint32_t>(out.at(row * length + j));
    }
    CHECK(mismatches == 0);
  }
}

// attention: per batch element and query row, softmax over keys j < n of
// scale * q . k_j in double, then the weighted value rows.
std::vector<double> attention_reference(const HostTensor& q, const HostTensor& k, const HostTensor& v, double scale,
                                        int64_t n) {
  const size_t r = q.dims.size();
  const int64_t m = q.dims[r - 2], d = q.dims[r - 1], t = k.dims[r - 2], e = v.dims[r - 1];
  const int64_t batch = q.count() / (m * d);
  std::vector<double> out;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < m; ++i) {
      std::vector<double> s;
      for (int64_t j = 0; j < std::min(n, t); ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += double{q.at((b * m + i) * d + c)} * k.at((b * t + j) * d + c);
        s.push_back(static_cast<double>(static_cast<float>(dot)) * scale);
      }
      double max_value = -INFINITY, sum = 0;
      for (double x : s) max_value = std::max(max_value, x);
      for (double& x : s) sum += (x = std::exp(x - max_value));
      for (int64_t c = 0; c < e; ++c) {
        double acc = 0;
        for (size_t j = 0; j < s.size(); ++j) acc += s[j] / sum * v.at((b * t + static_cast<int64_t>(j)) * e + c);
        out.push_back(s.empty() ? kNaN : acc);
      }
    }
  return out;
}

TEST_CASE("attention: softmax over the first n keys only, the rest never read") {
  // [2, 3] batch, 1 and 5 query rows, widths at and off the lane counts.
  // Plain variables, not structured bindings: clang (the sanitizer legs) refuses those in INFO's lambda.
  for (const std::array<int64_t, 4>& shape : std::vector<std::array<int64_t, 4>>{{1, 64, 64, 40}, {5, 7, 19, 33}, {2, 16, 48, 1}}) {
    const int64_t m = shape[0], d = shape[1], e = shape[2], t = shape[3];
    HostTensor q = random_f32({2, 3, m, d}, 71, -1, 1), k = random_f32({2, 3, t, d}, 72, -1, 1);
    HostTensor v = random_f32({2, 3, t, e}, 73, -2, 2), out(DType::kF32, {2, 3, m, e});
    for (int64_t n : {int64_t{1}, t / 2 + 1, t, t + 7}) {
      for (int64_t offset : {0, 1}) {
        INFO("m " << m << " d " << d << " e " << e << " t " << t << " n " << n << " offset " << offset);
        const int64_t keys = std::min(std::max<int64_t>(n + offset, 0), t);
        // Keys past the count hold NaN: a kernel reading them would show it.
        HostTensor k_poisoned = k, v_poisoned = v;
        for (int64_t i = 0; i < k.count(); ++i)
          if ((i / d) % t >= keys) k_poisoned.at(i) = kNaNF;
        for (int64_t i = 0; i < v.count(); ++i)
          if ((i / e) % t >= keys) v_poisoned.at(i) = kNaNF;
        HostTensor count = i64_scalar(n);
        REQUIRE(run_kernel(OpId::kAttention, {&q, &k_poisoned, &v_poisoned, &count}, out,
                           {std::bit_cast<int64_t>(0.125), offset})
                    .ok());
        check_close(out, attention_reference(q, k, v, 0.125, keys), 2e-5, 1e-6);
      }
    }
  }
  // No key (n + offset <= 0): NaN rows, as softmax over -inf everywhere.
  HostTensor q = random_f32({1, 2, 1, 8}, 74), k = random_f32({1, 2, 4, 8}, 75), v = random_f32({1, 2, 4, 8}, 76);
  HostTensor out(DType::kF32, {1, 2, 1, 8}), count = i64_scalar(-1);
  REQUIRE(run_kernel(OpId::kAttention, {&q, &k, &v, &count}, out, {std::bit_cast<int64_t>(1.0), 0}).ok());
  for (int64_t i = 0; i < out.count(); ++i) CHECK(std::isnan(out.at(i)));
}

std::vector<double> layernorm_reference(const HostTensor& x, const HostTensor& gamma, const HostTensor& beta,
                                        int64_t axis, double epsilon) {
  int64_t rows = 1, width = 1;
  for (size_t i = 0; i < x.dims.size(); ++i) (static_cast<int64_t>(i) < axis ? rows : width) *= x.dims[i];
  std::vector<double> out;
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, variance = 0;
    for (int64_t j = 0; j < width; ++j) mean += x.at(r * width + j);
    mean /= static_cast<double>(width);
    for (int64_t j = 0; j < width; ++j) variance += std::pow(x.at(r * width + j) - mean, 2);
    variance /= static_cast<double>(width);
    for (int64_t j = 0; j < width; ++j) {
      out.push_back((x.at(r * width + j) - mean) / std::sqrt(variance + epsilon) * gamma.at(j) + beta.at(j));
    }
  }
  return out;
}

void check_layernorm(const std::vector<int64_t>& dims, int64_t axis, double epsilon) {
  INFO(dims_string(dims) << " axis " << axis << " epsilon " << epsilon);
  HostTensor x = random_f32(dims, 41, -3, 5);
  const std::vector<int64_t> norm_dims(dims.begin() + axis, dims.end());
  HostTensor gamma = random_f32(norm_dims, 42, 0.5f, 1.5f), beta = random_f32(norm_dims, 43);
  HostTensor out(DType::kF32, dims);
  REQUIRE(
      run_kernel(OpId::kLayernorm, {&x, &gamma, &beta}, out, {axis, std::bit_cast<int64_t>(epsilon)}).ok());
  check_close(out, layernorm_reference(x, gamma, beta, axis, epsilon), 1e-5, 1e-5);
}

TEST_CASE("layernorm: last axis of a rank-3 tensor") { check_layernorm({2, 3, 8}, 2, 1e-5); }

TEST_CASE("layernorm: axis 1 of a rank-3 tensor normalizes the last two dims") {
  check_layernorm({2, 3, 8}, 1, 1e-5);
}

TEST_CASE("layernorm: axis 0 normalizes everything; epsilon is read from the parameter bits") {
  check_layernorm({4, 5}, 0, 1e-5);
  check_layernorm({4, 5}, 1, 0.5);
  // A constant row: the variance is zero, so epsilon alone sets the scale.
  HostTensor x(DType::kF32, {1, 4}), gamma(DType::kF32, {4}), beta(DType::kF32, {4}),
      out(DType::kF32, {1, 4});
  for (int i = 0; i < 4; ++i) {
    x.at(i) = 3.0f;
    gamma.at(i) = 1.0f;
    beta.at(i) = static_cast<float>(i);
  }
  REQUIRE(run_kernel(OpId::kLayernorm, {&x, &gamma, &beta}, out, {1, std::bit_cast<int64_t>(0.25)}).ok());
  check_close(out, {0, 1, 2, 3});
}

TEST_CASE("layernorm: in place and zero rows") {
  HostTensor x = random_f32({3, 16}, 44), gamma = random_f32({16}, 45), beta = random_f32({16}, 46);
  const auto want = layernorm_reference(x, gamma, beta, 1, 1e-5);
  REQUIRE(run_kernel(OpId::kLayernorm, {&x, &gamma, &beta}, x, {1, std::bit_cast<int64_t>(1e-5)}).ok());
  check_close(x, want, 1e-5, 1e-5);

  HostTensor empty(DType::kF32, {0, 4}), g(DType::kF32, {4}), b(DType::kF32, {4}),
      empty_out(DType::kF32, {0, 4});
  CHECK(run_kernel(OpId::kLayernorm, {&empty, &g, &b}, empty_out, {1, std::bit_cast<int64_t>(1e-5)}).ok());
}

// ---- group_norm -------------------------------------------------------------------

// ONNX GroupNormalization in double, element by element: each (batch, group)
// block's mean and variance, then scale[c] * normalized + bias[c].
std::vector<double> group_norm_reference(const HostTensor& x, const HostTensor& scale, const HostTensor& bias,
                                         int64_t groups, double epsilon) {
  const int64_t batch = x.dims[0], channels = x.dims[1], spatial = x.count() / (batch * channels);
  const int64_t per_group = channels / groups * spatial;
  std::vector<double> out(static_cast<size_t>(x.count()));
  for (int64_t block = 0; block < batch * groups; ++block) {
    const int64_t base = block * per_group;
    double mean = 0, variance = 0;
    for (int64_t j = 0; j < per_group; ++j) mean += x.at(base + j);
    mean /= static_cast<double>(per_group);
    for (int64_t j = 0; j < per_group; ++j) variance += (x.at(base + j) - mean) * (x.at(base + j) - mean);
    variance /= static_cast<double>(per_group);
    for (int64_t j = 0; j < per_group; ++j) {
      const int64_t c = (base + j) / spatial % channels;
      out[static_cast<size_t>(base + j)] =
          (x.at(base + j) - mean) / std::sqrt(variance + epsilon) * scale.at(c) + bias.at(c);
    }
  }
  return out;
}

void check_group_norm(std::vector<int64_t> dims, int64_t groups, double epsilon, uint32_t seed, float offset = 0) {
  CAPTURE(groups);
  HostTensor x = random_f32(dims, seed), scale = random_f32({dims[1]}, seed + 1),
             bias = random_f32({dims[1]}, seed + 2), out(DType::kF32, dims);
  for (int64_t i = 0; i < x.count(); ++i) x.at(i) += offset;
  REQUIRE(run_kernel(OpId::kGroupNorm, {&x, &scale, &bias}, out, {groups, std::bit_cast<int64_t>(epsilon)}).ok());
  check_close(out, group_norm_reference(x, scale, bias, groups, epsilon), 1e-5, 1e-5);
}

TEST_CASE("group_norm: groups of channels, instance norm (a group per channel), layer norm (one group)") {
  check_group_norm({2, 6, 5, 7}, 3, 1e-5, 700);
  check_group_norm({2, 6, 5, 7}, 6, 1e-5, 703);  // InstanceNormalization
  check_group_norm({2, 6, 5, 7}, 1, 1e-5, 706);
  check_group_norm({3, 4, 37}, 2, 0.5, 709);    // rank 3, a spatial run not a multiple of the lanes
  check_group_norm({2, 8}, 4, 1e-5, 712);       // rank 2: one element per channel
  check_group_norm({1, 4, 300}, 2, 1e-5, 715, 1000.0f);  // a large mean against the deviation
}

TEST_CASE("group_norm: a constant block is scaled by epsilon alone; empty batches run") {
  HostTensor x(DType::kF32, {1, 2, 3}), scale(DType::kF32, {2}), bias(DType::kF32, {2}), out(DType::kF32, {1, 2, 3});
  for (int i = 0; i < 6; ++i) x.at(i) = 5.0f;
  scale.at(0) = scale.at(1) = 1.0f;
  bias.at(0) = -1.0f;
  bias.at(1) = 2.0f;
  REQUIRE(run_kernel(OpId::kGroupNorm, {&x, &scale, &bias}, out, {2, std::bit_cast<int64_t>(0.25)}).ok());
  check_close(out, {-1, -1, -1, 2, 2, 2});
  HostTensor empty(DType::kF32, {0, 2, 3}), empty_out(DType::kF32, {0, 2, 3});
  CHECK(run_kernel(OpId::kGroupNorm, {&empty, &scale, &bias}, empty_out, {1, std::bit_cast<int64_t>(1e-5)}).ok());
}

// ---- reduce_sum, reduce_mean ------------------------------------------------------

// Reference reduction: returns the result dims (keepdims honoured) and values.
std::pair<std::vector<int64_t>, std::vector<double>> reduce_reference(const HostTensor& x, bool keepdims,
                                                                      std::vector<int64_t> axes, bool mean) {
  if (axes.empty()) {
    axes.resize(x.dims.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  auto reduced = [&](size_t d) {
    return std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
  };
  std::vector<int64_t> kept_dims, out_dims;
  int64_t reduced_count = 1;
  for (size_t d = 0; d < x.dims.size(); ++d) {
    if (reduced(d)) {
      reduced_count *= x.dims[d];
      if (keepdims) out_dims.push_back(1);
    } else {
      kept_dims.push_back(x.dims[d]);
      out_dims.push_back(x.dims[d]);
    }
  }
  std::vector<double> sums(static_cast<size_t>(product(kept_dims)), 0.0);
  for (int64_t i = 0; i < x.count(); ++i) {
    const auto index = unravel(i, x.dims);
    int64_t o = 0;
    for (size_t d = 0; d < x.dims.size(); ++d) {
      if (!reduced(d)) o = o * x.dims[d] + index[d];
    }
    sums[o] += x.at(i);
  }
  if (mean) {
    for (double& s : sums) s /= static_cast<double>(reduced_count);
  }
  return {out_dims, sums};
}

void check_reduce(const std::vector<int64_t>& dims, bool keepdims, const std::vector<int64_t>& axes) {
  for (bool mean : {false, true}) {
    INFO(std::string(mean ? "reduce_mean " : "reduce_sum ")
         << dims_string(dims) << " keepdims " << keepdims << " axes " << dims_string(axes));
    HostTensor x = random_f32(dims, 51);
    auto [out_dims, want] = reduce_reference(x, keepdims, axes, mean);
    HostTensor out(DType::kF32, out_dims);
    std::vector<int64_t> params = {keepdims ? 1 : 0};
    params.insert(params.end(), axes.begin(), axes.end());
    REQUIRE(run_kernel(mean ? OpId::kReduceMean : OpId::kReduceSum, {&x}, out, params).ok());
    check_close(out, want, 1e-5, 1e-5);
  }
}

TEST_CASE("reduce: one axis, each position, with and without keepdims") {
  for (bool keepdims : {false, true}) {
    for (int64_t axis = 0; axis < 3; ++axis) check_reduce({3, 4, 5}, keepdims, {axis});
  }
}

TEST_CASE("reduce: multiple axes") {
  check_reduce({3, 4, 5}, false, {0, 2});
  check_reduce({3, 4, 5}, true, {0, 2});
  check_reduce({2, 3, 4, 5}, false, {1, 2});
  check_reduce({2, 3, 4, 5}, true, {0, 1, 3});
}

// The sum of a contiguous block as the cpu kernel adds it: element i into
// lane i % 32, in double, then the lanes folded in halves.
double lane_sum(const float* x, int64_t n) {
  double lanes[32] = {};
  for (int64_t i = 0; i < n; ++i) lanes[i % 32] += x[i];
  for (int width = 16; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  return lanes[0];
}

TEST_CASE("reduce: the last axes (a global pool) sum in 32 lanes, the same bits on every vector path") {
  for (int64_t length : {1, 7, 31, 32, 33, 100, 1031}) {
    INFO("block of " << length);
    HostTensor x = random_f32({3, 5, length}, 52, -100.0f, 100.0f);
    for (bool mean : {false, true}) {
      HostTensor out(DType::kF32, {3, 1, 1});
      REQUIRE(run_kernel(mean ? OpId::kReduceMean : OpId::kReduceSum, {&x}, out, {1, 1, 2}).ok());
      for (int64_t o = 0; o < 3; ++o) {
        const double sum = lane_sum(x.f32() + o * 5 * length, 5 * length);
        CHECK(out.at(o) == static_cast<float>(mean ? sum / static_cast<double>(5 * length) : sum));
      }
    }
  }
  check_reduce({2, 3, 40, 40}, true, {2, 3});
  check_reduce({2, 3, 1, 40}, false, {1, 2, 3});
}

TEST_CASE(
    "reduce: outer axes over a contiguous kept row (a channels-last pool) sum each column in row order") {
  // [N, H, W, C] over H and W: every output the double sum of its column in
  // the order of the reduced index, the same bits as one output at a time;
  // widths below, at and past one block of 64 columns, and blocks ending in
  // vectors of 4 to 28 columns and single ones (13, 47, 150).
  for (int64_t c : {8, 13, 32, 47, 64, 96, 100, 150}) {
    INFO(c << " columns");
    HostTensor x = random_f32({2, 7, 5, c}, 53, -100.0f, 100.0f);
    for (bool mean : {false, true}) {
      HostTensor out(DType::kF32, {2, 1, 1, c});
      REQUIRE(run_kernel(mean ? OpId::kReduceMean : OpId::kReduceSum, {&x}, out, {1, 1, 2}).ok());
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t k = 0; k < c; ++k) {
          double sum = 0.0;
          for (int64_t p = 0; p < 35; ++p) sum += x.f32()[(n * 35 + p) * c + k];
          CHECK(out.at(n * c + k) == static_cast<float>(mean ? sum / 35.0 : sum));
        }
    }
    check_reduce({2, 7, 5, c}, false, {1, 2});
    check_reduce({7, 5, c}, true, {0});
  }
}

TEST_CASE("reduce: no axes listed reduces everything") {
  check_reduce({3, 4, 5}, false, {});
  check_reduce({3, 4, 5}, true, {});
  check_reduce({7}, false, {});
  check_reduce({}, false, {});
}

TEST_CASE("reduce: zero-size inputs (sum 0, mean NaN like numpy) and empty outputs") {
  check_reduce({0, 4}, false, {0});
  check_reduce({4, 0}, true, {1});
  check_reduce({0, 4}, false, {1});
  HostTensor x(DType::kF32, {3}), out(DType::kF32, {});
  CHECK(run_kernel(OpId::kReduceSum, {&x}, out, {0, 1}).code() == StatusCode::kInvalidArgument);
  CHECK(run_kernel(OpId::kReduceSum, {&x}, out, {}).code() == StatusCode::kInvalidArgument);
}

// ---- reduce_max -------------------------------------------------------------------

TEST_CASE("reduce_max against a reference (NaN propagates, -inf over nothing)") {
  struct Case {
    Dims dims;
    std::vector<int64_t> params;  // [keepdims, axes...]
  };
  const Case cases[] = {
      {{4, 8}, {0}},    {{4, 8}, {1, 1}}, {{3, 4, 5}, {0, 0, 2}}, {{2, 3, 5, 7}, {1, 2, 3}}, {{0, 3}, {0, 0}},
      {{3, 0}, {1, 1}}, {{}, {0}},        {{2, 1, 3}, {0, 1}},    {{5, 6}, {0, 0, 1}}};
  uint32_t seed = 400;
  for (const Case& c : cases) {
    INFO(dims_string(c.dims) << " params " << dims_string(c.params));
    HostTensor x = random_f32(c.dims, seed++, -100.0f, 100.0f);
    if (x.count() > 7) x.at(5) = kNaNF, x.at(6) = kInfF, x.at(7) = -kInfF;
    std::vector<bool> reduced(c.dims.size(), c.params.size() == 1);
    for (size_t i = 1; i < c.params.size(); ++i) reduced[static_cast<size_t>(c.params[i])] = true;
    Dims out_dims, kept;
    for (size_t d = 0; d < c.dims.size(); ++d) {
      if (!reduced[d]) {
        out_dims.push_back(c.dims[d]);
        kept.push_back(static_cast<int64_t>(d));
      } else if (c.params[0] == 1) {
        out_dims.push_back(1);
      }
    }
    HostTensor out(DType::kF32, out_dims);
    REQUIRE(run_kernel(OpId::kReduceMax, {&x}, out, c.params).ok());
    // Reference: every input element updates the output element its kept index names.
    Dims kept_dims;
    for (int64_t d : kept) kept_dims.push_back(c.dims[static_cast<size_t>(d)]);
    std::vector<double> want(static_cast<size_t>(product(kept_dims)), -kInf);
    std::vector<bool> nan(want.size(), false);
    for (int64_t i = 0; i < x.count(); ++i) {
      const Dims index = unravel(i, c.dims);
      int64_t o = 0;
      for (int64_t d : kept) o = o * c.dims[static_cast<size_t>(d)] + index[static_cast<size_t>(d)];
      const double v = x.at(i);
      if (std::isnan(v)) nan[static_cast<size_t>(o)] = true;
      want[static_cast<size_t>(o)] = std::max(want[static_cast<size_t>(o)], v);
    }
    for (size_t o = 0; o < want.size(); ++o)
      if (nan[o]) want[o] = kNaN;
    check_close(out, want, 0.0, 0.0);
  }
}

// ---- argmax ---------------------------------------------------------------------

// numpy.argmax along `axis` (NaN: the first one wins; select_last: the
// reversed row's argmax, counted from the end), with keepdims dropped.
std::vector<int64_t> argmax_reference(const HostTensor& x, int64_t axis, bool select_last) {
  const Dims& dims = x.dims;
  const size_t a = static_cast<size_t>(axis);
  const Dims strides = row_major_strides(dims);
  Dims out_dims;
  for (size_t d = 0; d < dims.size(); ++d)
    if (d != a) out_dims.push_back(dims[d]);
  std::vector<int64_t> out(static_cast<size_t>(product(out_dims)));
  for (size_t i = 0; i < out.size(); ++i) {
    const Dims o = unravel(static_cast<int64_t>(i), out_dims);
    int64_t base = 0;
    for (size_t d = 0, k = 0; d < dims.size(); ++d)
      if (d != a) base += o[k++] * strides[d];
    std::vector<double> row;
    for (int64_t j = 0; j < dims[a]; ++j) row.push_back(x.at(base + j * strides[a]));
    if (select_last) std::reverse(row.begin(), row.end());
    size_t best = 0;
    for (size_t j = 0; j < row.size(); ++j) {
      if (std::isnan(row[j])) {
        best = j;
        break;
      }
      if (row[j] > row[best]) best = j;
    }
    out[i] = select_last ? dims[a] - 1 - static_cast<int64_t>(best) : static_cast<int64_t>(best);
  }
  return out;
}

void check_argmax(HostTensor x, int64_t axis, bool keepdims, bool select_last) {
  INFO("argmax " << dims_string(x.dims) << " axis " << axis << " keepdims " << keepdims << " last "
                 << select_last);
  Dims out_dims = x.dims;
  out_dims[static_cast<size_t>(axis)] = 1;
  if (!keepdims) out_dims.erase(out_dims.begin() + axis);
  HostTensor out(DType::kI64, out_dims);
  fill_sentinel(out, 0xEE);
  Status status = run_kernel(OpId::kArgMax, {&x}, out, {axis, keepdims, select_last});
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  check_untouched(out, 0xEE);
  const std::vector<int64_t> want = argmax_reference(x, axis, select_last);
  REQUIRE(out.count() == static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    int64_t got;
    std::memcpy(&got, &out.bytes[8 * i], 8);
    INFO("element " << i);
    CHECK(got == want[i]);
  }
}

TEST_CASE("argmax: every axis, keepdims, select_last_index, ties") {
  HostTensor x = random_f32({3, 4, 5}, 4100);
  for (int i = 0; i < x.count(); i += 3) x.at(i) = std::round(x.at(i));  // ties
  for (int64_t axis = 0; axis < 3; ++axis)
    for (bool keepdims : {false, true})
      for (bool last : {false, true}) check_argmax(x, axis, keepdims, last);
  HostTensor tied(DType::kF32, {2, 4});  // all equal: 0, or the last with select_last
  check_argmax(tied, 1, false, false);
  check_argmax(tied, 1, false, true);
  check_argmax(random_f32({1000}, 4101), 0, false, false);  // a vocabulary row
}

TEST_CASE("argmax: NaN is the largest (numpy: first NaN), infinities, one element, empty results") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  HostTensor x(DType::kF32, {3, 5});
  const float values[] = {1, nan, inf, nan, 2, -inf, -inf, -inf, -inf, -inf, 0, 7, inf, 3, inf};
  std::memcpy(x.bytes.data(), values, sizeof values);
  for (bool last : {false, true}) {
    check_argmax(x, 1, false, last);
    check_argmax(x, 0, true, last);
  }
  HostTensor out(DType::kI64, {3});
  REQUIRE(run_kernel(OpId::kArgMax, {&x}, out, {1, 0, 0}).ok());
  const int64_t* got = reinterpret_cast<const int64_t*>(out.bytes.data());
  CHECK(got[0] == 1);  // the first NaN
  CHECK(got[1] == 0);
  CHECK(got[2] == 2);
  REQUIRE(run_kernel(OpId::kArgMax, {&x}, out, {1, 0, 1}).ok());
  CHECK(got[0] == 3);  // the last NaN
  CHECK(got[1] == 4);
  CHECK(got[2] == 4);
  check_argmax(random_f32({4, 1}, 4102), 1, false, false);         // one element per row
  check_argmax(random_f32({1}, 4103), 0, false, false);            // a single element
  check_argmax(HostTensor(DType::kF32, {0, 3}), 1, false, false);  // no rows: nothing written
}

// ---- the rest of reduce_sum's family, on floats and integers ---------------------

// Reference: the reduced elements of each output gathered in input order,
// then combined by `kind` in long double (floats) or wrapping 64 bits (integers).
struct ReduceFamilyCase {
  OpId id;
  ops::ReduceKind kind;
};
constexpr ReduceFamilyCase kFamily[] = {{OpId::kReduceSum, ops::ReduceKind::kSum},
                                        {OpId::kReduceMax, ops::ReduceKind::kMax},
                                        {OpId::kReduceMin, ops::ReduceKind::kMin},
                                        {OpId::kReduceProd, ops::ReduceKind::kProd},
                                        {OpId::kReduceL1, ops::ReduceKind::kL1},
                                        {OpId::kReduceL2, ops::ReduceKind::kL2},
                                        {OpId::kReduceLogSumExp, ops::ReduceKind::kLogSumExp},
                                        {OpId::kReduceSumSquare, ops::ReduceKind::kSumSquare},
                                        {OpId::kReduceLogSum, ops::ReduceKind::kLogSum},
                                        {OpId::kReduceMean, ops::ReduceKind::kMean}};

std::vector<std::vector<double>> reduced_groups(const std::vector<double>& x, const Dims& dims,
                                                const std::vector<int64_t>& params, Dims* out_dims) {
  std::vector<bool> reduced(dims.size(), params.size() == 1);
  for (size_t i = 1; i < params.size(); ++i) reduced[static_cast<size_t>(params[i])] = true;
  Dims kept_dims;
  out_dims->clear();
  for (size_t d = 0; d < dims.size(); ++d) {
    if (!reduced[d]) {
      kept_dims.push_back(dims[d]);
      out_dims->push_back(dims[d]);
    } else if (params[0] == 1) {
      out_dims->push_back(1);
    }
  }
  std::vector<std::vector<double>> groups(static_cast<size_t>(product(kept_dims)));
  for (int64_t i = 0; i < product(dims); ++i) {
    const auto index = unravel(i, dims);
    int64_t o = 0;
    for (size_t d = 0; d < dims.size(); ++d)
      if (!reduced[d]) o = o * dims[d] + index[d];
    groups[static_cast<size_t>(o)].push_back(x[static_cast<size_t>(i)]);
  }
  return groups;
}

double reduce_float_reference(ops::ReduceKind kind, const std::vector<double>& g) {
  using K = ops::ReduceKind;
  const bool nan = std::any_of(g.begin(), g.end(), [](double v) { return std::isnan(v); });
  long double acc = kind == K::kProd ? 1.0L : 0.0L;
  double m = kind == K::kMin ? kInf : -kInf;
  for (double v : g) {
    switch (kind) {
      case K::kProd:
        acc *= v;
        break;
      case K::kL1:
        acc += std::fabs(v);
        break;
      case K::kL2:
      case K::kSumSquare:
        acc += static_cast<long double>(v) * v;
        break;
      case K::kMax:
        m = std::max(m, v);
        break;
      case K::kMin:
        m = std::min(m, v);
        break;
      case K::kLogSumExp:
        acc += std::exp(static_cast<long double>(v));
        break;
      default:
        acc += v;
    }
  }
  switch (kind) {
    case K::kMax:
    case K::kMin:
      return nan ? kNaN : m;
    case K::kL2:
      return static_cast<double>(std::sqrt(acc));
    case K::kLogSum:
    case K::kLogSumExp:
      return static_cast<double>(std::log(acc));
    case K::kMean:
      return static_cast<double>(acc / static_cast<long double>(g.size()));
    default:
      return static_cast<double>(acc);
  }
}

TEST_CASE(
    "reduce_sum's family on f32 against a long double reference: every axis set, strided runs, nothing") {
  struct Case {
    Dims dims;
    std::vector<int64_t> params;
  };
  const Case cases[] = {
      {{4, 8}, {0}},       {{4, 40}, {1, 1}}, {{3, 4, 5}, {0, 0, 2}}, {{2, 3, 5, 7}, {1, 2, 3}},
      {{6, 33}, {0, 0}},   {{0, 3}, {0, 0}},  {{3, 0}, {1, 1}},       {{}, {0}},
      {{2, 1, 3}, {0, 1}}, {{5, 70}, {0, 1}}, {{3, 4, 50}, {1, 0, 2}}};
  uint32_t seed = 600;
  for (const ReduceFamilyCase& f : kFamily) {
    for (const Case& c : cases) {
      INFO(ops::op_def(f.id).name << " " << dims_string(c.dims) << " params " << dims_string(c.params));
      // Positive values for the logarithms; products of values near 1 stay finite.
      const bool logs = f.kind == ops::ReduceKind::kLogSum;
      HostTensor x = random_f32(c.dims, seed++, logs ? 0.1f : -1.5f, 1.5f);
      std::vector<double> xs(x.f32(), x.f32() + x.count());
      Dims out_dims;
      const auto groups = reduced_groups(xs, c.dims, c.params, &out_dims);
      std::vector<double> want;
      for (const auto& g : groups) want.push_back(reduce_float_reference(f.kind, g));
      HostTensor out(DType::kF32, out_dims);
      Status status = run_kernel(f.id, {&x}, out, c.params);
      REQUIRE_MESSAGE(status.ok(), status.to_string());
      check_close(out, want, 1e-5, 1e-5);
    }
  }
}

TEST_CASE("reduce_min, reduce_log_sum_exp: NaN propagates; infinities; large values do not overflow") {
  HostTensor x(DType::kF32, {3, 4});
  const float values[] = {1, kNaNF, -kInfF, 2, -kInfF, -kInfF, -kInfF, -kInfF, 100, 200, 300, 88.5f};
  std::memcpy(x.bytes.data(), values, sizeof values);
  HostTensor out(DType::kF32, {3});
  REQUIRE(run_kernel(OpId::kReduceMin, {&x}, out, {0, 1}).ok());
  CHECK(std::isnan(out.at(0)));
  CHECK(out.at(1) == -kInfF);
  CHECK(out.at(2) == 88.5f);
  REQUIRE(run_kernel(OpId::kReduceLogSumExp, {&x}, out, {0, 1}).ok());
  CHECK(std::isnan(out.at(0)));
  CHECK(out.at(1) == -kInfF);  // log(0)
  CHECK(out.at(2) == doctest::Approx(300.0 + std::log1p(std::exp(-100.0) + std::exp(-200.0))));
  // A long contiguous row takes the vector extreme: a NaN anywhere in it wins.
  HostTensor row = random_f32({2, 100}, 650);
  row.at(137) = kNaNF;
  HostTensor two(DType::kF32, {2});
  for (OpId id : {OpId::kReduceMin, OpId::kReduceMax}) {
    REQUIRE(run_kernel(id, {&row}, two, {0, 1}).ok());
    CHECK_FALSE(std::isnan(two.at(0)));
    CHECK(std::isnan(two.at(1)));
  }
}

template <typename T>
HostTensor random_ints(Dims dims, uint32_t seed, int64_t lo, int64_t hi) {
  HostTensor t(sizeof(T) == 4 ? DType::kI32 : DType::kI64, std::move(dims));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  for (int64_t i = 0; i < t.count(); ++i) {
    const T v = static_cast<T>(dist(rng));
    std::memcpy(&t.bytes[static_cast<size_t>(i) * sizeof(T)], &v, sizeof(T));
  }
  return t;
}

template <typename T>
T element(const HostTensor& t, int64_t i) {
  T v;
  std::memcpy(&v, &t.bytes[static_cast<size_t>(i) * sizeof(T)], sizeof(T));
  return v;
}

template <typename T>
void check_integer_family() {
  using K = ops::ReduceKind;
  const struct {
    Dims dims;
    std::vector<int64_t> params;
    int64_t lo, hi;
  } cases[] = {{{4, 40}, {0, 1}, -1000, 1000},
               {{3, 4, 5}, {1, 0, 2}, -5, 5},
               {{6, 7}, {0, 0}, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()},  // wraps
               {{0, 3}, {0, 0}, 0, 1},
               {{}, {0}, -9, 9}};
  uint32_t seed = 700;
  for (const ReduceFamilyCase& f : kFamily) {
    if (f.kind == K::kMean || f.kind == K::kL2 || f.kind == K::kLogSum || f.kind == K::kLogSumExp) continue;
    for (const auto& c : cases) {
      INFO(ops::op_def(f.id).name << " " << sizeof(T) * 8 << "-bit " << dims_string(c.dims) << " params "
                                  << dims_string(c.params));
      HostTensor x = random_ints<T>(c.dims, seed++, c.lo, c.hi);
      std::vector<double> index(static_cast<size_t>(x.count()));
      std::iota(index.begin(), index.end(), 0.0);  // groups of element positions
      Dims out_dims;
      const auto groups = reduced_groups(index, c.dims, c.params, &out_dims);
      HostTensor out(x.dtype, out_dims);
      Status status = run_kernel(f.id, {&x}, out, c.params);
      REQUIRE_MESSAGE(status.ok(), status.to_string());
      for (size_t o = 0; o < groups.size(); ++o) {
        // Wrapping in T: unsigned arithmetic of T's width.
        using U = std::make_unsigned_t<T>;
        U acc = f.kind == K::kProd ? 1 : 0;
        T m = f.kind == K::kMin ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
        for (double pos : groups[o]) {
          const T v = element<T>(x, static_cast<int64_t>(pos));
          const U u = static_cast<U>(v);
          switch (f.kind) {
            case K::kMax:
              m = std::max(m, v);
              break;
            case K::kMin:
              m = std::min(m, v);
              break;
            case K::kProd:
              acc = static_cast<U>(acc * u);
              break;
            case K::kL1:
              acc = static_cast<U>(acc + (v < 0 ? static_cast<U>(0 - u) : u));
              break;
            case K::kSumSquare:
              acc = static_cast<U>(acc + static_cast<U>(u * u));
              break;
            default:
              acc = static_cast<U>(acc + u);
          }
        }
        const T want = f.kind == K::kMax || f.kind == K::kMin ? m : static_cast<T>(acc);
        CHECK(element<T>(out, static_cast<int64_t>(o)) == want);
      }
    }
  }
}

TEST_CASE("reduce_sum's family on i32 and i64: wrapping sums and products, exact extremes, nothing") {
  check_integer_family<int32_t>();
  check_integer_family<int64_t>();
}

// ---- argmin, argmax on integers ---------------------------------------------------

TEST_CASE("argmin: the smallest, ties first (last with select_last_index), NaN still wins; integers") {
  HostTensor x(DType::kF32, {3, 5});
  const float values[] = {3, 1, 2, 1, 5, kInfF, kNaNF, -kInfF, kNaNF, -kInfF, 4, 4, 4, 4, 4};
  std::memcpy(x.bytes.data(), values, sizeof values);
  HostTensor out(DType::kI64, {3});
  REQUIRE(run_kernel(OpId::kArgMin, {&x}, out, {1, 0, 0}).ok());
  CHECK(element<int64_t>(out, 0) == 1);
  CHECK(element<int64_t>(out, 1) == 1);  // the first NaN (numpy.argmin)
  CHECK(element<int64_t>(out, 2) == 0);
  REQUIRE(run_kernel(OpId::kArgMin, {&x}, out, {1, 0, 1}).ok());
  CHECK(element<int64_t>(out, 0) == 3);
  CHECK(element<int64_t>(out, 1) == 3);
  CHECK(element<int64_t>(out, 2) == 4);
  for (DType t : {DType::kI32, DType::kI64}) {
    HostTensor xi = t == DType::kI32 ? random_ints<int32_t>({4, 6}, 720, -3, 3)
                                     : random_ints<int64_t>({4, 6}, 721, -3, 3);
    HostTensor xf(DType::kF32, {4, 6});  // the same values as floats: the reference
    for (int64_t i = 0; i < 24; ++i)
      xf.at(i) = static_cast<float>(t == DType::kI32 ? element<int32_t>(xi, i) : element<int64_t>(xi, i));
    for (OpId id : {OpId::kArgMax, OpId::kArgMin})
      for (int64_t axis : {0, 1})
        for (int64_t last : {0, 1}) {
          INFO(ops::op_def(id).name << " axis " << axis << " last " << last);
          HostTensor got(DType::kI64, {axis == 0 ? 6 : 4}), want(DType::kI64, {axis == 0 ? 6 : 4});
          REQUIRE(run_kernel(id, {&xi}, got, {axis, 0, last}).ok());
          REQUIRE(run_kernel(id, {&xf}, want, {axis, 0, last}).ok());
          CHECK(got.bytes == want.bytes);
        }
  }
}

// ---- log_softmax, hardmax ---------------------------------------------------------

TEST_CASE("log_softmax: along every axis against log(softmax) in double; large logits; NaN rows") {
  HostTensor x = random_f32({3, 4, 37}, 740, -50.0f, 50.0f);
  for (int64_t axis = 0; axis < 3; ++axis) {
    INFO("axis " << axis);
    std::vector<double> want = softmax_reference(x, axis);
    for (double& w : want) w = std::log(w);
    HostTensor out(DType::kF32, x.dims);
    REQUIRE(run_kernel(OpId::kLogSoftmax, {&x}, out, {axis}).ok());
    check_close(out, want, 1e-5, 1e-4);
  }
  HostTensor big(DType::kF32, {2, 3});
  const float values[] = {1000, 1001, 1002, 1, kNaNF, 2};
  std::memcpy(big.bytes.data(), values, sizeof values);
  HostTensor out(DType::kF32, {2, 3});
  REQUIRE(run_kernel(OpId::kLogSoftmax, {&big}, out, {1}).ok());
  const double lse = std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0);
  check_close(out, {-2 - lse, -1 - lse, -lse, kNaN, kNaN, kNaN}, 1e-6, 1e-6);
  // In place: the output is the input.
  HostTensor y = random_f32({5, 40}, 741);
  std::vector<double> want = softmax_reference(y, 1);
  for (double& w : want) w = std::log(w);
  REQUIRE(run_op(OpId::kLogSoftmax, {&y}, {&y}, {1}, 0).ok());
  check_close(y, want, 1e-5, 1e-5);
}

TEST_CASE("hardmax: a 1 at the first largest along the axis, 0 elsewhere") {
  HostTensor x = random_f32({3, 4, 5}, 760);
  for (int i = 0; i < x.count(); i += 4) x.at(i) = 1.0f;  // ties
  for (int64_t axis = 0; axis < 3; ++axis) {
    INFO("axis " << axis);
    const auto strides = row_major_strides(x.dims);
    std::vector<double> want(static_cast<size_t>(x.count()));
    for (int64_t i = 0; i < x.count(); ++i) {
      const auto index = unravel(i, x.dims);
      const int64_t start = i - index[axis] * strides[axis];
      int64_t best = 0;
      for (int64_t j = 1; j < x.dims[axis]; ++j)
        if (x.at(start + j * strides[axis]) > x.at(start + best * strides[axis])) best = j;
      want[i] = index[axis] == best ? 1.0 : 0.0;
    }
    HostTensor out(DType::kF32, x.dims);
    fill_sentinel(out, 0xEE);
    REQUIRE(run_kernel(OpId::kHardmax, {&x}, out, {axis}).ok());
    check_close(out, want, 0, 0);
  }
}

// ---- top_k ----------------------------------------------------------------------

// Reference: each row's (value, index) pairs stably sorted, NaN largest.
template <typename T>
void check_top_k(const HostTensor& x, int64_t axis, int64_t k, bool largest) {
  INFO("top_k " << dims_string(x.dims) << " axis " << axis << " k " << k << " largest " << largest);
  Dims out_dims = x.dims;
  out_dims[static_cast<size_t>(axis)] = k;
  HostTensor values(x.dtype, out_dims), indices(DType::kI64, out_dims);
  Status status =
      run_op(OpId::kTopK, {const_cast<HostTensor*>(&x)}, {&values, &indices}, {axis, k, largest, 1});
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  const auto strides = row_major_strides(x.dims);
  const auto out_strides = row_major_strides(out_dims);
  const int64_t length = x.dims[static_cast<size_t>(axis)];
  for (int64_t o = 0; o < product(out_dims); ++o) {
    auto index = unravel(o, out_dims);
    const int64_t rank = index[axis];
    if (rank != 0) continue;
    std::vector<std::pair<T, int64_t>> row;
    for (int64_t j = 0; j < length; ++j) {
      index[axis] = j;
      int64_t at = 0;
      for (size_t d = 0; d < index.size(); ++d) at += index[d] * strides[d];
      row.push_back({element<T>(x, at), j});
    }
    std::stable_sort(row.begin(), row.end(), [&](const auto& a, const auto& b) {
      const bool an = a.first != a.first, bn = b.first != b.first;
      if (an || bn) return largest ? an && !bn : bn && !an;
      return largest ? a.first > b.first : a.first < b.first;
    });
    for (int64_t r = 0; r < k; ++r) {
      const int64_t at = o + r * out_strides[axis];
      INFO("output " << at);
      CHECK(element<int64_t>(indices, at) == row[r].second);
      const T got = element<T>(values, at);
      CHECK(((got == row[r].first) || (got != got && row[r].first != row[r].first)));
    }
  }
}

TEST_CASE("top_k: largest and smallest along every axis, ties by lower index, NaN largest; integers") {
  HostTensor x = random_f32({3, 6, 4}, 780);
  for (int i = 0; i < x.count(); i += 3) x.at(i) = std::round(x.at(i));  // ties
  x.at(5) = kNaNF;
  x.at(17) = kInfF;
  for (int64_t axis = 0; axis < 3; ++axis)
    for (bool largest : {true, false})
      for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{2}, x.dims[static_cast<size_t>(axis)]})
        check_top_k<float>(x, axis, k, largest);
  check_top_k<float>(random_f32({2, 500}, 781), 1, 10, true);
  const HostTensor xi = random_ints<int32_t>({4, 9}, 782, -4, 4);
  const HostTensor xl = random_ints<int64_t>({4, 9}, 783, -4, 4);
  for (bool largest : {true, false}) {
    check_top_k<int32_t>(xi, 1, 3, largest);
    check_top_k<int64_t>(xl, 0, 2, largest);
  }
}

// ---- cumsum ---------------------------------------------------------------------

// numpy.cumsum along `axis` in double (flipped for reverse; shifted by one,
// a 0 first, for exclusive): exact for the small integers these tests use.
std::vector<double> cumsum_reference(const std::vector<double>& x, const Dims& dims, int64_t axis,
                                     bool exclusive, bool reverse) {
  const auto strides = row_major_strides(dims);
  const int64_t length = dims[static_cast<size_t>(axis)], stride = strides[static_cast<size_t>(axis)];
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const auto index = unravel(static_cast<int64_t>(i), dims);
    const int64_t k = index[static_cast<size_t>(axis)];
    const int64_t line = static_cast<int64_t>(i) - k * stride;
    double sum = 0;
    for (int64_t j = 0; j < length; ++j) {
      const bool before = reverse ? j > k : j < k;
      if (before || (j == k && !exclusive)) sum += x[static_cast<size_t>(line + j * stride)];
    }
    out[i] = sum;
  }
  return out;
}

void check_cumsum(DType dtype, const Dims& dims, int64_t axis, bool exclusive, bool reverse) {
  INFO("cumsum " << dtype_name(dtype) << dims_string(dims) << " axis " << axis << " exclusive " << exclusive
                 << " reverse " << reverse);
  HostTensor x(dtype, dims);
  std::vector<double> values(static_cast<size_t>(x.count()));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<double>(static_cast<int64_t>(i * 7 % 11) - 5);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kF32) {
      x.at(static_cast<int64_t>(i)) = static_cast<float>(values[i]);
    } else if (dtype == DType::kI32) {
      const int32_t v = static_cast<int32_t>(values[i]);
      std::memcpy(&x.bytes[4 * i], &v, 4);
    } else {
      const int64_t v = static_cast<int64_t>(values[i]);
      std::memcpy(&x.bytes[8 * i], &v, 8);
    }
  }
  HostTensor out(dtype, dims);
  Status status = run_kernel(OpId::kCumSum, {&x}, out, {axis, exclusive, reverse});
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  const std::vector<double> want = cumsum_reference(values, dims, axis, exclusive, reverse);
  for (size_t i = 0; i < want.size(); ++i) {
    double got;
    if (dtype == DType::kF32) {
      got = out.at(static_cast<int64_t>(i));
    } else if (dtype == DType::kI32) {
      int32_t v;
      std::memcpy(&v, &out.bytes[4 * i], 4);
      got = v;
    } else {
      int64_t v;
      std::memcpy(&v, &out.bytes[8 * i], 8);
      got = static_cast<double>(v);
    }
    INFO("element " << i);
    CHECK(got == want[i]);
  }
}

TEST_CASE("cumsum: every axis, exclusive and reverse, f32, i32 and i64") {
  for (DType dtype : {DType::kF32, DType::kI32, DType::kI64})
    for (int64_t axis = 0; axis < 3; ++axis)
      for (bool exclusive : {false, true})
        for (bool reverse : {false, true}) check_cumsum(dtype, {3, 4, 5}, axis, exclusive, reverse);
  check_cumsum(DType::kF32, {1}, 0, true, false);
  check_cumsum(DType::kI64, {4, 0}, 1, false, true);  // empty lines
}

TEST_CASE("cumsum: integers wrap (two's complement), no undefined behaviour") {
  HostTensor x(DType::kI32, {3});
  const int32_t values[] = {std::numeric_limits<int32_t>::max(), 1, 1};
  std::memcpy(x.bytes.data(), values, sizeof values);
  HostTensor out(DType::kI32, {3});
  REQUIRE(run_kernel(OpId::kCumSum, {&x}, out, {0, 0, 0}).ok());
  int32_t got[3];
  std::memcpy(got, out.bytes.data(), sizeof got);
  CHECK(got[0] == std::numeric_limits<int32_t>::max());
  CHECK(got[1] == std::numeric_limits<int32_t>::min());
  CHECK(got[2] == std::numeric_limits<int32_t>::min() + 1);
}

}  // namespace
}  // namespace hexir::hal::testing
