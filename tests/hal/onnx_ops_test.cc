// The operators the ONNX importer maps onto (issue 8) on the cpu, against
// references written here, independently of hal/cpu and of the plans: plain
// loops over multi-indices, in double, with ONNX's (numpy's) NaN rules spelled
// out.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "hal_test_util.h"

namespace hexir::hal::testing {
namespace {

using ops::OpId;
using Dims = std::vector<int64_t>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();

int64_t word(double v) { return std::bit_cast<int64_t>(v); }

// x in [lo, hi) with NaN, +-inf, +-0 and a few exact values at the front.
HostTensor unary_input(uint32_t seed, float lo = -6.0f, float hi = 6.0f) {
  HostTensor x = random_f32({5, 41}, seed, lo, hi);
  const float specials[] = {kNaNF, kInfF, -kInfF, 0.0f, -0.0f, 1.0f, -1.0f, 3.0f, -3.0f, 0.5f, -2.5f};
  for (size_t i = 0; i < std::size(specials); ++i) x.at(static_cast<int64_t>(i)) = specials[i];
  return x;
}

// max(lo, min(hi, v)) with NaN in, NaN out.
double clamp_nan(double v, double lo, double hi) {
  if (std::isnan(v)) return v;
  return v < lo ? lo : (v > hi ? hi : v);
}

struct UnaryRef {
  const char* name;
  OpId id;
  std::vector<int64_t> params;
  std::function<double(double)> ref;
};

std::vector<UnaryRef> unary_refs() {
  return {
      {"leaky_relu 0.01",
       OpId::kLeakyRelu,
       {word(0.01)},
       [](double x) { return std::isnan(x) ? x : (x < 0 ? 0.01 * x : x); }},
      {"leaky_relu 0.2",
       OpId::kLeakyRelu,
       {word(0.2)},
       [](double x) { return std::isnan(x) ? x : (x < 0 ? 0.2 * x : x); }},
      {"clip [-1, 2]",
       OpId::kClip,
       {word(-1.0), word(2.0)},
       [](double x) { return clamp_nan(x, -1.0, 2.0); }},
      {"clip unbounded", OpId::kClip, {word(-kInf), word(kInf)}, [](double x) { return x; }},
      {"clip min 0.5 only",
       OpId::kClip,
       {word(0.5), word(kInf)},
       [](double x) { return clamp_nan(x, 0.5, kInf); }},
      // numpy.clip with min > max: every value becomes max.
      {"clip min above max",
       OpId::kClip,
       {word(2.0), word(-1.0)},
       [](double x) { return std::isnan(x) ? x : -1.0; }},
      {"hard_sigmoid",
       OpId::kHardSigmoid,
       {word(0.2), word(0.5)},
       [](double x) { return clamp_nan(0.2 * x + 0.5, 0.0, 1.0); }},
      {"hard_sigmoid alpha -0.5 beta 0.25",
       OpId::kHardSigmoid,
       {word(-0.5), word(0.25)},
       [](double x) { return clamp_nan(-0.5 * x + 0.25, 0.0, 1.0); }},
      // ONNX's definition x * hard_sigmoid(x; 1/6, 1/2): -inf * 0 is NaN.
      {"hard_swish", OpId::kHardSwish, {}, [](double x) { return x * clamp_nan(x / 6.0 + 0.5, 0.0, 1.0); }},
      {"erf", OpId::kErf, {}, [](double x) { return std::erf(x); }},
      {"log", OpId::kLog, {}, [](double x) { return std::log(x); }},
      {"abs", OpId::kAbs, {}, [](double x) { return std::fabs(x); }},
      {"reciprocal", OpId::kReciprocal, {}, [](double x) { return 1.0 / x; }},
  };
}

TEST_CASE("onnx unary operators against double references (NaN, infinities, signed zeros)") {
  uint32_t seed = 10;
  for (const UnaryRef& u : unary_refs()) {
    INFO(u.name);
    HostTensor x = unary_input(seed++);
    HostTensor out(DType::kF32, x.dims);
    REQUIRE(run_kernel(u.id, {&x}, out, u.params).ok());
    std::vector<double> want;
    for (int64_t i = 0; i < x.count(); ++i) want.push_back(u.ref(x.at(i)));
    check_close(out, want, 2e-6, 1e-6);
  }
}

TEST_CASE("onnx unary operators: spelled-out values") {
  auto run1 = [](OpId id, std::vector<float> xs, std::vector<int64_t> params) {
    HostTensor x(DType::kF32, {static_cast<int64_t>(xs.size())});
    for (size_t i = 0; i < xs.size(); ++i) x.at(static_cast<int64_t>(i)) = xs[i];
    HostTensor out(DType::kF32, x.dims);
    REQUIRE(run_kernel(id, {&x}, out, params).ok());
    return std::vector<float>(out.f32(), out.f32() + out.count());
  };
  auto r = run1(OpId::kClip, {kNaNF, -5.0f, 5.0f, 0.5f}, {word(0.0), word(1.0)});
  CHECK(std::isnan(r[0]));
  CHECK(r[1] == 0.0f);
  CHECK(r[2] == 1.0f);
  CHECK(r[3] == 0.5f);
  r = run1(OpId::kLeakyRelu, {kNaNF, -kInfF, -2.0f, 3.0f}, {word(0.5)});
  CHECK(std::isnan(r[0]));
  CHECK(r[1] == -kInfF);
  CHECK(r[2] == -1.0f);
  CHECK(r[3] == 3.0f);
  r = run1(OpId::kHardSwish, {-kInfF, kInfF, -3.0f, 3.0f, 0.0f, kNaNF}, {});
  CHECK(std::isnan(r[0]));
  CHECK(r[1] == kInfF);
  CHECK(r[2] == 0.0f);
  CHECK(r[3] == 3.0f);
  CHECK(r[4] == 0.0f);
  CHECK(std::isnan(r[5]));
  r = run1(OpId::kHardSigmoid, {kNaNF, -kInfF, kInfF, 0.0f}, {word(0.2), word(0.5)});
  CHECK(std::isnan(r[0]));
  CHECK(r[1] == 0.0f);
  CHECK(r[2] == 1.0f);
  CHECK(r[3] == 0.5f);
  r = run1(OpId::kLog, {0.0f, -1.0f, 1.0f, kInfF}, {});
  CHECK(r[0] == -kInfF);
  CHECK(std::isnan(r[1]));
  CHECK(r[2] == 0.0f);
  CHECK(r[3] == kInfF);
  r = run1(OpId::kReciprocal, {0.0f, -0.0f, 4.0f, kInfF}, {});
  CHECK(r[0] == kInfF);
  CHECK(r[1] == -kInfF);
  CHECK(r[2] == 0.25f);
  CHECK(r[3] == 0.0f);
  r = run1(OpId::kAbs, {-0.0f, -kInfF, -2.5f}, {});
  CHECK(!std::signbit(r[0]));
  CHECK(r[1] == kInfF);
  CHECK(r[2] == 2.5f);
  r = run1(OpId::kErf, {0.0f, kInfF, -kInfF, kNaNF}, {});
  CHECK(r[0] == 0.0f);
  CHECK(r[1] == 1.0f);
  CHECK(r[2] == -1.0f);
  CHECK(std::isnan(r[3]));
}

TEST_CASE("onnx unary operators run in place") {
  for (const UnaryRef& u : unary_refs()) {
    INFO(u.name);
    HostTensor x = unary_input(99);
    std::vector<double> want;
    for (int64_t i = 0; i < x.count(); ++i) want.push_back(u.ref(x.at(i)));
    REQUIRE(run_op(u.id, {&x}, {&x}, u.params, 0).ok());
    check_close(x, want, 2e-6, 1e-6);
  }
}

// ---- binary: pow, comparisons, not ---------------------------------------------

// numpy's broadcast of two shapes (the test's own).
Dims broadcast(const Dims& a, const Dims& b) {
  const size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Flat offset in a tensor of `dims` of the element broadcasting picks for output index `index`.
int64_t broadcast_offset(const Dims& index, const Dims& dims) {
  const size_t shift = index.size() - dims.size();
  int64_t offset = 0, stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    offset += (dims[d] == 1 ? 0 : index[d + shift]) * stride;
    stride *= dims[d];
  }
  return offset;
}

template <typename T>
T element(const HostTensor& t, int64_t i) {
  T v;
  std::memcpy(&v, t.bytes.data() + static_cast<size_t>(i) * sizeof(T), sizeof(T));
  return v;
}

HostTensor ints(DType dtype, Dims dims, uint32_t seed, int64_t range) {
  HostTensor t(dtype, std::move(dims));
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < t.count(); ++i) {
    const int64_t v = static_cast<int64_t>(rng() % static_cast<uint32_t>(range)) - range / 2;
    if (dtype == DType::kI64) {
      std::memcpy(t.bytes.data() + 8 * i, &v, 8);
    } else {
      const int32_t w = static_cast<int32_t>(v);
      std::memcpy(t.bytes.data() + 4 * i, &w, 4);
    }
  }
  return t;
}

TEST_CASE("pow against a double reference with broadcasting") {
  const std::pair<Dims, Dims> shapes[] = {{{3, 5}, {3, 5}},       {{3, 5}, {}},        {{}, {4, 2}},
                                          {{4, 1}, {1, 3, 1, 6}}, {{2, 1, 5}, {3, 1}}, {{0, 3}, {3}}};
  uint32_t seed = 200;
  for (const auto& shape : shapes) {
    const Dims& da = shape.first;  // not a structured binding: clang 14 cannot capture those (INFO)
    const Dims& db = shape.second;
    INFO(dims_string(da) << " ** " << dims_string(db));
    HostTensor a = random_f32(da, seed++, -3.0f, 3.0f), b = random_f32(db, seed++, -3.0f, 3.0f);
    if (a.count() > 2) a.at(0) = 0.0f, a.at(1) = 1.0f, a.at(2) = kNaNF;
    if (b.count() > 2) b.at(0) = 0.0f, b.at(1) = kNaNF, b.at(2) = 2.0f;
    const Dims dims = broadcast(da, db);
    HostTensor out(DType::kF32, dims);
    REQUIRE(run_kernel(OpId::kPow, {&a, &b}, out).ok());
    std::vector<double> want;
    for (int64_t i = 0; i < product(dims); ++i) {
      const Dims index = unravel(i, dims);
      const double x = a.at(broadcast_offset(index, da)), y = b.at(broadcast_offset(index, db));
      want.push_back(std::pow(x, y));  // C pow: pow(x, 0) = 1 and pow(1, y) = 1 even for NaN, like numpy
    }
    check_close(out, want, 1e-5, 1e-6);
  }
}

TEST_CASE("pow: spelled-out values") {
  HostTensor a(DType::kF32, {6}), b(DType::kF32, {6});
  const float av[] = {-8.0f, -2.0f, 0.0f, kNaNF, 1.0f, 4.0f};
  const float bv[] = {1.0f / 3.0f, 3.0f, -1.0f, 0.0f, kNaNF, 0.5f};
  std::memcpy(a.bytes.data(), av, sizeof av);
  std::memcpy(b.bytes.data(), bv, sizeof bv);
  HostTensor out(DType::kF32, {6});
  REQUIRE(run_kernel(OpId::kPow, {&a, &b}, out).ok());
  CHECK(std::isnan(out.at(0)));  // negative base, fractional exponent
  CHECK(out.at(1) == -8.0f);
  CHECK(out.at(2) == kInfF);
  CHECK(out.at(3) == 1.0f);
  CHECK(out.at(4) == 1.0f);
  CHECK(out.at(5) == 2.0f);
}

template <typename T>
void check_compare(OpId id, const HostTensor& a, const HostTensor& b, const std::function<bool(T, T)>& ref) {
  INFO(ops::op_def(id).name << " " << dtype_name(a.dtype) << dims_string(a.dims) << " vs "
                            << dims_string(b.dims));
  const Dims dims = broadcast(a.dims, b.dims);
  HostTensor out(DType::kBool, dims);
  std::fill(out.bytes.begin(), out.bytes.end(), uint8_t{0xEE});
  HostTensor ac = a, bc = b;
  REQUIRE(run_kernel(id, {&ac, &bc}, out).ok());
  for (int64_t i = 0; i < product(dims); ++i) {
    const Dims index = unravel(i, dims);
    const bool want =
        ref(element<T>(a, broadcast_offset(index, a.dims)), element<T>(b, broadcast_offset(index, b.dims)));
    if (out.bytes[static_cast<size_t>(i)] != static_cast<uint8_t>(want)) {
      INFO("element " << i << ": got byte " << int(out.bytes[static_cast<size_t>(i)]) << ", want " << want);
      CHECK(false);
      return;
    }
  }
}

TEST_CASE("equal, less, greater: f32 (NaN, infinities, -0 == 0), i32 and i64, broadcasting") {
  HostTensor a(DType::kF32, {8}), b(DType::kF32, {8});
  const float av[] = {kNaNF, kNaNF, 1.0f, kInfF, -kInfF, 0.0f, 2.0f, -1.0f};
  const float bv[] = {kNaNF, 1.0f, kNaNF, kInfF, kInfF, -0.0f, 1.0f, -1.0f};
  std::memcpy(a.bytes.data(), av, sizeof av);
  std::memcpy(b.bytes.data(), bv, sizeof bv);
  const std::pair<Dims, Dims> shapes[] = {{{4, 6}, {4, 6}},       {{4, 6}, {6}},       {{}, {3, 2}},
                                          {{4, 1}, {1, 3, 1, 6}}, {{2, 1, 5}, {3, 1}}, {{0, 2}, {2}}};
  auto eq = [](auto x, auto y) { return x == y; };
  auto lt = [](auto x, auto y) { return x < y; };
  auto gt = [](auto x, auto y) { return x > y; };
  check_compare<float>(OpId::kEqual, a, b, eq);
  check_compare<float>(OpId::kLess, a, b, lt);
  check_compare<float>(OpId::kGreater, a, b, gt);
  uint32_t seed = 300;
  for (const auto& [da, db] : shapes) {
    // Few distinct values, so that equal is often true.
    HostTensor fa = random_f32(da, seed++), fb = random_f32(db, seed++);
    for (int64_t i = 0; i < fa.count(); ++i) fa.at(i) = std::round(fa.at(i));
    for (int64_t i = 0; i < fb.count(); ++i) fb.at(i) = std::round(fb.at(i));
    const HostTensor ia = ints(DType::kI64, da, seed++, 5), ib = ints(DType::kI64, db, seed++, 5);
    const HostTensor ja = ints(DType::kI32, da, seed++, 5), jb = ints(DType::kI32, db, seed++, 5);
    for (auto [id, which] : {std::pair<OpId, int>{OpId::kEqual, 0}, {OpId::kLess, 1}, {OpId::kGreater, 2}}) {
      const int ref = which;  // clang 14 cannot capture a structured binding
      auto pick = [ref, eq, lt, gt](auto x, auto y) {
        return ref == 0 ? eq(x, y) : ref == 1 ? lt(x, y) : gt(x, y);
      };
      check_compare<float>(id, fa, fb, pick);
      check_compare<int64_t>(id, ia, ib, pick);
      check_compare<int32_t>(id, ja, jb, pick);
    }
  }
  // i64 values a double cannot tell apart compare exactly.
  HostTensor big(DType::kI64, {2}), big2(DType::kI64, {2});
  const int64_t bv1[] = {std::numeric_limits<int64_t>::max(), (int64_t{1} << 53) + 1};
  const int64_t bv2[] = {std::numeric_limits<int64_t>::max() - 1, int64_t{1} << 53};
  std::memcpy(big.bytes.data(), bv1, sizeof bv1);
  std::memcpy(big2.bytes.data(), bv2, sizeof bv2);
  HostTensor out(DType::kBool, {2});
  REQUIRE(run_kernel(OpId::kEqual, {&big, &big2}, out).ok());
  CHECK(out.bytes == std::vector<uint8_t>{0, 0});
  REQUIRE(run_kernel(OpId::kGreater, {&big, &big2}, out).ok());
  CHECK(out.bytes == std::vector<uint8_t>{1, 1});
}

TEST_CASE("not: any non-zero byte is true, results are 0 or 1, in place too") {
  HostTensor x(DType::kBool, {2, 128});
  for (size_t i = 0; i < x.bytes.size(); ++i) x.bytes[i] = static_cast<uint8_t>(i);
  HostTensor out(DType::kBool, x.dims);
  REQUIRE(run_kernel(OpId::kNot, {&x}, out).ok());
  for (size_t i = 0; i < x.bytes.size(); ++i) {
    CAPTURE(i);
    CHECK(out.bytes[i] == (x.bytes[i] == 0 ? 1 : 0));
  }
  std::vector<uint8_t> want = out.bytes;
  REQUIRE(run_op(OpId::kNot, {&x}, {&x}, {}, 0).ok());
  CHECK(x.bytes == want);
}

// ---- reduce_max, max_pool, average_pool --------------------------------------------

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
      if (pick[t] == 0) bits[at[t]] = 0x7fc00000u + static_cast<uint32_t>(at[t]);  // NaNs told apart by payload
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

// ---- pad, expand --------------------------------------------------------------------

// numpy.pad's index rule for one dim, written out: i is the index into the kept
// range [lo, hi) before folding. -1: the constant.
int64_t numpy_pad_index(int mode, int64_t i, int64_t lo, int64_t hi) {
  if (i >= lo && i < hi) return i;
  const int64_t n = hi - lo;
  if (mode == 0) return -1;
  if (mode == 2) return i < lo ? lo : hi - 1;
  if (mode == 3) return lo + (((i - lo) % n) + n) % n;
  // reflect, folding one mirror at a time as numpy does (no period formula)
  if (n == 1) return lo;
  int64_t t = i - lo;
  while (t < 0 || t >= n) t = t < 0 ? -t : 2 * (n - 1) - t;
  return lo + t;
}

void check_pad(DType dtype, const Dims& dims, int mode, int64_t value_word, const Dims& begin,
               const Dims& end) {
  INFO("pad " << dtype_name(dtype) << dims_string(dims) << " mode " << mode << " begin " << dims_string(begin)
              << " end " << dims_string(end));
  HostTensor x(dtype, dims);
  for (size_t i = 0; i < x.bytes.size(); ++i) x.bytes[i] = static_cast<uint8_t>(i * 13 + 5);
  std::vector<int64_t> params{mode, value_word};
  params.insert(params.end(), begin.begin(), begin.end());
  params.insert(params.end(), end.begin(), end.end());
  Dims out_dims;
  for (size_t d = 0; d < dims.size(); ++d) out_dims.push_back(dims[d] + begin[d] + end[d]);
  HostTensor out(dtype, out_dims);
  std::fill(out.bytes.begin(), out.bytes.end(), uint8_t{0xEE});
  REQUIRE(run_kernel(OpId::kPad, {&x}, out, params).ok());
  const size_t e = dtype_size(dtype);
  const Dims in_strides = row_major_strides(dims);
  for (int64_t k = 0; k < product(out_dims); ++k) {
    const Dims index = unravel(k, out_dims);
    int64_t offset = 0;
    bool constant = false;
    for (size_t d = 0; d < dims.size(); ++d) {
      const int64_t lo = std::max<int64_t>(0, -begin[d]), hi = dims[d] - std::max<int64_t>(0, -end[d]);
      const int64_t i = numpy_pad_index(mode, index[d] - begin[d], lo, hi);
      if (i < 0) constant = true;
      offset += i * in_strides[d];
    }
    std::vector<uint8_t> want(e);
    for (size_t b = 0; b < e; ++b)
      want[b] = constant ? static_cast<uint8_t>(static_cast<uint64_t>(value_word) >> (8 * b))
                         : x.bytes[static_cast<size_t>(offset) * e + b];
    const std::vector<uint8_t> got(
        out.bytes.begin() + static_cast<std::ptrdiff_t>(k * static_cast<int64_t>(e)),
        out.bytes.begin() + static_cast<std::ptrdiff_t>((k + 1) * static_cast<int64_t>(e)));
    if (got != want) {
      INFO("output element " << k << " " << dims_string(index) << (constant ? " (constant)" : ""));
      CHECK(false);
      return;
    }
  }
}

TEST_CASE("pad: every mode and element size against numpy's rule") {
  for (DType dtype : {DType::kU8, DType::kF16, DType::kF32, DType::kI64}) {
    const int64_t value = dtype_size(dtype) == 8 ? -5 : 0x5A;
    check_pad(dtype, {3, 4}, 0, value, {1, 2}, {2, 0});
    check_pad(dtype, {4, 5}, 1, 0, {3, 4}, {3, 1});
    check_pad(dtype, {3}, 1, 0, {7}, {9});  // beyond the dim: mirrored again and again
    check_pad(dtype, {2, 3, 4}, 2, 0, {1, 0, 5}, {0, 3, 6});
    check_pad(dtype, {3, 5}, 3, 0, {4, 11}, {5, 7});
    check_pad(dtype, {5, 6}, 0, value, {-1, 2}, {-2, -3});  // crop and pad
    check_pad(dtype, {5, 6}, 1, 0, {-1, 3}, {2, -2});       // reflect inside the cropped part
    check_pad(dtype, {5, 6}, 2, 0, {-4, -1}, {3, 2});
    check_pad(dtype, {1, 4}, 1, 0, {3, 0}, {2, 0});        // reflect of one row repeats it
    check_pad(dtype, {0, 3}, 0, value, {2, 1}, {1, 1});    // constant around nothing
    check_pad(dtype, {3, 2}, 0, value, {-2, 0}, {-1, 0});  // cropped to nothing
    check_pad(dtype, {2, 2, 2, 2, 2}, 2, 0, {1, 0, 1, 0, 1}, {0, 1, 0, 1, 0});
  }
  check_pad(DType::kBool, {2, 3}, 0, 1, {1, 1}, {1, 1});
}

TEST_CASE("pad: ONNX attributes lowered (mode, pads begin-then-end, value in the dtype, axes)") {
  auto lower = [](TensorType x, ops::AttrMap attrs) {
    return ops::lower_attributes(OpId::kPad, std::vector{x}, attrs, {});
  };
  ops::AttrMap attrs;
  attrs["pads"].value = std::vector<ops::AttrValue>{{int64_t{1}}, {int64_t{2}}, {int64_t{3}}, {int64_t{4}}};
  attrs["value"].value = 2.5;
  auto p = lower({DType::kF32, {2, 2}}, attrs);
  REQUIRE(p.ok());
  CHECK(*p == std::vector<int64_t>{0, int64_t{std::bit_cast<uint32_t>(2.5f)}, 1, 2, 3, 4});
  p = lower({DType::kF16, {2, 2}}, attrs);
  REQUIRE(p.ok());
  CHECK((*p)[1] == 0x4100);                               // 2.5 as f16
  CHECK_FALSE(lower({DType::kI32, {2, 2}}, attrs).ok());  // 2.5 is not an i32
  attrs["value"].value = int64_t{-1};
  CHECK((*lower({DType::kI8, {2, 2}}, attrs))[1] == 0xFF);
  CHECK((*lower({DType::kI32, {2, 2}}, attrs))[1] == 0xFFFFFFFF);
  CHECK((*lower({DType::kI64, {2, 2}}, attrs))[1] == -1);
  CHECK_FALSE(lower({DType::kU8, {2, 2}}, attrs).ok());
  attrs["value"].value = int64_t{256};
  CHECK_FALSE(lower({DType::kU8, {2, 2}}, attrs).ok());
  attrs.erase("value");
  attrs["mode"].value = std::string("reflect");
  CHECK((*lower({DType::kF32, {4, 5}}, attrs))[0] == 1);
  attrs["mode"].value = std::string("edge");
  CHECK((*lower({DType::kF32, {4, 5}}, attrs))[0] == 2);
  attrs["mode"].value = std::string("wrap");
  CHECK((*lower({DType::kF32, {4, 5}}, attrs))[0] == 3);
  attrs["value"].value = 1.0;
  CHECK_FALSE(lower({DType::kF32, {4, 5}}, attrs).ok());  // a value for a non-constant mode
  attrs["mode"].value = std::string("symmetric");
  CHECK_FALSE(lower({DType::kF32, {4, 5}}, attrs).ok());
  // axes: the pads list begin then end for the listed axes only
  ops::AttrMap with_axes;
  with_axes["axes"].value = std::vector<ops::AttrValue>{{int64_t{-1}}};
  with_axes["pads"].value = std::vector<ops::AttrValue>{{int64_t{2}}, {int64_t{3}}};
  CHECK(*lower({DType::kF32, {4, 5, 6}}, with_axes) == std::vector<int64_t>{0, 0, 0, 0, 2, 0, 0, 3});
}

TEST_CASE("expand: numpy broadcast of any dtype to the result dims") {
  struct Case {
    DType dtype;
    Dims from, to;
  };
  const Case cases[] = {{DType::kF32, {3, 1}, {2, 3, 4}},     {DType::kI64, {}, {5}},
                        {DType::kU8, {1, 4}, {3, 4}},         {DType::kF16, {2, 3}, {2, 3}},
                        {DType::kBool, {2, 1, 3}, {2, 4, 3}}, {DType::kI32, {1, 3}, {0, 3}},
                        {DType::kF32, {1}, {1, 1, 1}},        {DType::kI64, {4, 1, 1}, {2, 4, 3, 2}}};
  for (const Case& c : cases) {
    INFO(dtype_name(c.dtype) << dims_string(c.from) << " -> " << dims_string(c.to));
    HostTensor x(c.dtype, c.from);
    for (size_t i = 0; i < x.bytes.size(); ++i) x.bytes[i] = static_cast<uint8_t>(i * 29 + 3);
    HostTensor out(c.dtype, c.to);
    REQUIRE(run_kernel(OpId::kExpand, {&x}, out, c.to).ok());
    const size_t e = dtype_size(c.dtype);
    for (int64_t k = 0; k < out.count(); ++k) {
      const int64_t src = broadcast_offset(unravel(k, c.to), c.from);
      CHECK(std::equal(out.bytes.begin() + k * static_cast<int64_t>(e),
                       out.bytes.begin() + (k + 1) * static_cast<int64_t>(e),
                       x.bytes.begin() + src * static_cast<int64_t>(e)));
    }
  }
  // ONNX Expand broadcasts both ways: a stated 1 keeps x's dim.
  auto p = ops::lower_attributes(
      OpId::kExpand, std::vector{TensorType{DType::kF32, {3, 1}}},
      {{"shape", ops::AttrValue{std::vector<ops::AttrValue>{{int64_t{2}}, {int64_t{1}}, {int64_t{6}}}}}}, {});
  REQUIRE(p.ok());
  CHECK(*p == std::vector<int64_t>{2, 3, 6});
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
  o = run({1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 4}, {{"scales", list({1, 1, 0.6, 0.6})}, {"mode", str("linear")}});
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
