// Elementwise kernels (hal/cpu/elementwise.cc) against references written
// here: binary operators over every broadcasting shape class, unary maps
// (NaN, infinities, signed zeros), outputs that alias an input, pow and the
// comparisons, not, where, and cast between every pair of dtypes (bit
// patterns for f16).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <type_traits>

#include "hexir/ops/plans.h"
#include "reference_util.h"

namespace hexir::hal::testing {
namespace {

using ops::OpId;

// Dim i of `dims` right-aligned to `rank` dims (numpy: the missing leading dims are 1).
int64_t aligned_dim(const Dims& dims, size_t i, size_t rank) {
  return i + dims.size() >= rank ? dims[i + dims.size() - rank] : 1;
}

// numpy broadcast of two shapes, written out independently of the kernels.
Dims broadcast(const Dims& a, const Dims& b) {
  const size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = aligned_dim(a, i, rank), db = aligned_dim(b, i, rank);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

using BinaryRef = std::function<double(double, double)>;

std::vector<double> binary_reference(const HostTensor& a, const HostTensor& b,
                                     const std::vector<int64_t>& out_dims, const BinaryRef& op) {
  std::vector<double> out(static_cast<size_t>(product(out_dims)));
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    const auto index = unravel(i, out_dims);
    out[i] = op(a.at(broadcast_offset(index, a.dims)), b.at(broadcast_offset(index, b.dims)));
  }
  return out;
}

struct BinaryCase {
  OpId id;
  std::string name;
  BinaryRef ref;
};

double np_maximum(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b); }
double np_minimum(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::min(a, b); }

const std::vector<BinaryCase>& binary_cases() {
  static const std::vector<BinaryCase> cases = {
      {OpId::kAdd, "add", [](double a, double b) { return a + b; }},
      {OpId::kSub, "sub", [](double a, double b) { return a - b; }},
      {OpId::kMul, "mul", [](double a, double b) { return a * b; }},
      {OpId::kDiv, "div", [](double a, double b) { return a / b; }},
      {OpId::kMaximum, "maximum", np_maximum},
      {OpId::kMinimum, "minimum", np_minimum},
  };
  return cases;
}

// Runs every binary kernel on a (dims_a) and b (dims_b) and checks against the reference.
void check_binary_shapes(const std::vector<int64_t>& dims_a, const std::vector<int64_t>& dims_b) {
  const auto out_dims = broadcast(dims_a, dims_b);
  for (size_t i = 0; i < out_dims.size(); ++i) {  // the case's shapes broadcast
    const int64_t da = aligned_dim(dims_a, i, out_dims.size()), db = aligned_dim(dims_b, i, out_dims.size());
    REQUIRE((da == db || da == 1 || db == 1));
  }
  HostTensor a = random_f32(dims_a, 1);
  HostTensor b = random_f32(dims_b, 2, 0.5f, 3.0f);  // positive: div stays well conditioned
  for (const BinaryCase& c : binary_cases()) {
    INFO(c.name << " " << dims_string(dims_a) << " with " << dims_string(dims_b));
    HostTensor out(DType::kF32, out_dims);
    REQUIRE(run_kernel(c.id, {&a, &b}, out).ok());
    check_close(out, binary_reference(a, b, out_dims, c.ref), 1e-6, 0.0);
  }
}

TEST_CASE("binary: identical shapes") {
  check_binary_shapes({2, 3, 4}, {2, 3, 4});
  check_binary_shapes({7}, {7});
  check_binary_shapes({1037}, {1037});  // odd length: vector body plus tail
}

TEST_CASE("binary: scalar f32[] against a tensor, both sides") {
  check_binary_shapes({}, {3, 4});
  check_binary_shapes({3, 4}, {});
  check_binary_shapes({}, {});
}

TEST_CASE("binary: [3,1] with [1,4] broadcasts both operands") {
  check_binary_shapes({3, 1}, {1, 4});
  check_binary_shapes({1, 4}, {3, 1});
}

TEST_CASE("binary: rank mismatch") {
  check_binary_shapes({4}, {2, 3, 4});
  check_binary_shapes({2, 3, 4}, {3, 1});
  check_binary_shapes({5, 1}, {2, 3, 1, 4});
  check_binary_shapes({1}, {2, 2});
}

TEST_CASE("binary: size-1 dims in the middle and at both ends") {
  check_binary_shapes({2, 1, 3}, {1, 4, 3});
  check_binary_shapes({1, 5, 1}, {3, 1, 2});
  check_binary_shapes({2, 3, 4, 5}, {2, 1, 4, 1});
  check_binary_shapes({1, 1}, {1, 1});
  check_binary_shapes({6, 1, 1}, {1, 1, 1});
}

TEST_CASE("binary: rank 8 with alternating broadcast dims") {
  check_binary_shapes({2, 1, 2, 1, 2, 1, 2, 1}, {1, 2, 1, 2, 1, 2, 1, 2});
  check_binary_shapes({2, 2, 2, 2, 2, 2, 2, 3}, {3});
}

TEST_CASE("binary: zero-size dims write nothing and do not crash") {
  check_binary_shapes({0, 4}, {1, 4});
  check_binary_shapes({0, 4}, {4});
  check_binary_shapes({3, 0}, {3, 1});
  check_binary_shapes({0}, {});
}

TEST_CASE("binary: rank above 8 is rejected") {
  std::vector<int64_t> dims(9, 1);
  HostTensor a = random_f32(dims, 1), b = random_f32(dims, 2), out(DType::kF32, dims);
  Status status = run_kernel(OpId::kAdd, {&a, &b}, out);
  CHECK(status.code() == StatusCode::kInvalidArgument);
}

TEST_CASE("binary: unsupported and mixed dtypes and wrong operand counts are rejected") {
  HostTensor a(DType::kU8, {4}), b(DType::kU8, {4}), out(DType::kU8, {4});
  CHECK(run_kernel(OpId::kAdd, {&a, &b}, out).code() == StatusCode::kInvalidArgument);
  HostTensor i(DType::kI32, {4}), j(DType::kI64, {4}), k(DType::kI64, {4});
  CHECK(run_kernel(OpId::kAdd, {&i, &j}, k).code() == StatusCode::kInvalidArgument);
  HostTensor f = random_f32({4}, 1), g(DType::kF32, {4});
  CHECK(run_kernel(OpId::kAdd, {&f}, g).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("maximum and minimum propagate NaN from either side, like numpy") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  HostTensor a(DType::kF32, {4}), b(DType::kF32, {4});
  const float av[] = {nan, 1.0f, nan, -2.0f};
  const float bv[] = {1.0f, nan, nan, 3.0f};
  std::memcpy(a.f32(), av, sizeof(av));
  std::memcpy(b.f32(), bv, sizeof(bv));
  HostTensor out(DType::kF32, {4});
  REQUIRE(run_kernel(OpId::kMaximum, {&a, &b}, out).ok());
  check_close(out, {NAN, NAN, NAN, 3.0});
  REQUIRE(run_kernel(OpId::kMinimum, {&a, &b}, out).ok());
  check_close(out, {NAN, NAN, NAN, -2.0});
}

TEST_CASE("div follows IEEE: x/0 is inf, 0/0 is NaN") {
  HostTensor a(DType::kF32, {3}), b(DType::kF32, {});
  a.at(0) = 1.0f;
  a.at(1) = -1.0f;
  a.at(2) = 0.0f;
  b.at(0) = 0.0f;
  HostTensor out(DType::kF32, {3});
  REQUIRE(run_kernel(OpId::kDiv, {&a, &b}, out).ok());
  check_close(out, {INFINITY, -INFINITY, NAN});
}

// --- unary ---

double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}
double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct UnaryCase {
  OpId id;
  std::string name;
  std::function<double(double)> ref;
  float lo, hi;
  std::vector<int64_t> params;
  // gelu(erf): erf is a rational approximation (ops::erf_of: 4.2e-7 relative
  // near +-1, exactly +-1 past |4|), so x * (1 + erf(x / sqrt 2)) / 2 for x in
  // [-6, -4] is off by up to 6e-7 (absolute; the values there are below 1e-4).
  double atol = 1e-7;
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {OpId::kRelu, "relu", [](double x) { return x > 0 ? x : 0.0; }, -3, 3, {}},
      {OpId::kGelu, "gelu(erf)", gelu_erf, -6, 6, {0}, 1e-6},
      {OpId::kGelu, "gelu(tanh)", gelu_tanh, -6, 6, {1}},
      {OpId::kSilu, "silu", [](double x) { return x * sigmoid_ref(x); }, -10, 10, {}},
      {OpId::kSigmoid, "sigmoid", sigmoid_ref, -10, 10, {}},
      {OpId::kTanh, "tanh", [](double x) { return std::tanh(x); }, -5, 5, {}},
      {OpId::kExp, "exp", [](double x) { return std::exp(x); }, -10, 10, {}},
      {OpId::kSqrt, "sqrt", [](double x) { return std::sqrt(x); }, 0, 100, {}},
      {OpId::kRsqrt, "rsqrt", [](double x) { return 1.0 / std::sqrt(x); }, 0.01f, 100, {}},
      {OpId::kNeg, "neg", [](double x) { return -x; }, -5, 5, {}},
  };
  return cases;
}

TEST_CASE("unary: every kernel against its double reference") {
  for (const UnaryCase& c : unary_cases()) {
    for (const auto& dims : std::vector<std::vector<int64_t>>{{}, {1}, {3, 5}, {2, 3, 67}}) {
      INFO(c.name << " " << dims_string(dims));
      HostTensor x = random_f32(dims, 11, c.lo, c.hi);
      HostTensor out(DType::kF32, dims);
      REQUIRE(run_kernel(c.id, {&x}, out, c.params).ok());
      std::vector<double> want;
      for (int64_t i = 0; i < x.count(); ++i) want.push_back(c.ref(x.at(i)));
      check_close(out, want, 2e-6, c.atol);
    }
  }
}

TEST_CASE("unary: zero-size tensors") {
  for (const UnaryCase& c : unary_cases()) {
    HostTensor x(DType::kF32, {0, 3}), out(DType::kF32, {0, 3});
    CHECK(run_kernel(c.id, {&x}, out, c.params).ok());
  }
}

TEST_CASE("gelu: the two forms differ and match their own formula") {
  HostTensor x(DType::kF32, {3});
  x.at(0) = -1.5f;
  x.at(1) = 0.7f;
  x.at(2) = 2.5f;
  HostTensor erf_out(DType::kF32, {3}), tanh_out(DType::kF32, {3});
  REQUIRE(run_kernel(OpId::kGelu, {&x}, erf_out, {0}).ok());
  REQUIRE(run_kernel(OpId::kGelu, {&x}, tanh_out, {1}).ok());
  check_close(erf_out, {gelu_erf(-1.5), gelu_erf(0.7), gelu_erf(2.5)});
  check_close(tanh_out, {gelu_tanh(-1.5), gelu_tanh(0.7), gelu_tanh(2.5)});
  CHECK(erf_out.at(0) != tanh_out.at(0));
}

TEST_CASE("sigmoid, silu and exp stay finite or saturate cleanly at extremes") {
  HostTensor x(DType::kF32, {4});
  x.at(0) = -100.0f;
  x.at(1) = 100.0f;
  x.at(2) = -1000.0f;
  x.at(3) = 0.0f;
  HostTensor out(DType::kF32, {4});
  REQUIRE(run_kernel(OpId::kSigmoid, {&x}, out).ok());
  check_close(out, {sigmoid_ref(-100), 1.0, 0.0, 0.5}, 1e-6, 1e-30);
  REQUIRE(run_kernel(OpId::kSilu, {&x}, out).ok());
  check_close(out, {-100 * sigmoid_ref(-100), 100.0, 0.0, 0.0}, 1e-6, 1e-30);
  REQUIRE(run_kernel(OpId::kExp, {&x}, out).ok());
  check_close(out, {std::exp(-100.0), INFINITY, 0.0, 1.0}, 1e-5, 1e-40);
}

TEST_CASE("lstm_cell: the bits of the sigmoid, tanh, mul and add operators it stands for") {
  // H = 300: a 256-column chunk and a tail; two rows; the gates over the
  // exponent's whole useful range, and NaN and infinities.
  for (int64_t hidden : {300, 5}) {
    INFO("H = " << hidden);
    HostTensor gates = random_f32({2, 4 * hidden}, 41, -12.0f, 12.0f), c = random_f32({2, hidden}, 42, -3.0f, 3.0f);
    gates.at(1) = NAN;
    gates.at(hidden + 2) = INFINITY;
    gates.at(3 * hidden + 3) = -INFINITY;
    HostTensor h_out(DType::kF32, {2, hidden}), c_out(DType::kF32, {2, hidden});
    REQUIRE(run_op(OpId::kLstmCell, {&gates, &c}, {&c_out, &h_out}).ok());
    // In place: the new c over the previous one.
    HostTensor c_in_place = c, h_in_place(DType::kF32, {2, hidden});
    REQUIRE(run_op(OpId::kLstmCell, {&gates, &c_in_place}, {&c_in_place, &h_in_place}, {}, 1).ok());
    CHECK(c_in_place.bytes == c_out.bytes);
    CHECK(h_in_place.bytes == h_out.bytes);
    // The operators one at a time, each a kernel of its own.
    auto unary = [](OpId id, const std::vector<float>& x) {
      HostTensor in(DType::kF32, {static_cast<int64_t>(x.size())}), out(DType::kF32, {static_cast<int64_t>(x.size())});
      for (size_t i = 0; i < x.size(); ++i) in.at(static_cast<int64_t>(i)) = x[i];
      REQUIRE(run_kernel(id, {&in}, out).ok());
      std::vector<float> y(x.size());
      for (size_t i = 0; i < x.size(); ++i) y[i] = out.at(static_cast<int64_t>(i));
      return y;
    };
    for (int64_t r = 0; r < 2; ++r) {
      std::vector<float> part[4], c_prev(static_cast<size_t>(hidden));
      for (int q = 0; q < 4; ++q)
        for (int64_t j = 0; j < hidden; ++j) part[q].push_back(gates.at(r * 4 * hidden + q * hidden + j));
      for (int64_t j = 0; j < hidden; ++j) c_prev[static_cast<size_t>(j)] = c.at(r * hidden + j);
      const std::vector<float> i = unary(OpId::kSigmoid, part[0]), o = unary(OpId::kSigmoid, part[1]),
                               f = unary(OpId::kSigmoid, part[2]), g = unary(OpId::kTanh, part[3]);
      std::vector<float> c_next(static_cast<size_t>(hidden));
      for (size_t j = 0; j < c_next.size(); ++j) {
        const float fc = f[j] * c_prev[j], ic = i[j] * g[j];
        c_next[j] = fc + ic;
      }
      const std::vector<float> t = unary(OpId::kTanh, c_next);
      for (int64_t j = 0; j < hidden; ++j) {
        const size_t k = static_cast<size_t>(j);
        const float h = o[k] * t[k];
        CHECK(std::bit_cast<uint32_t>(c_out.at(r * hidden + j)) == std::bit_cast<uint32_t>(c_next[k]));
        CHECK(std::bit_cast<uint32_t>(h_out.at(r * hidden + j)) == std::bit_cast<uint32_t>(h));
        // And ops::lstm_cell_of, the CUDA kernel's scalar form.
        float c_scalar = c_prev[k];
        const float h_scalar = ops::lstm_cell_of(part[0][k], part[1][k], part[2][k], part[3][k], c_scalar);
        CHECK(std::bit_cast<uint32_t>(c_scalar) == std::bit_cast<uint32_t>(c_next[k]));
        CHECK(std::bit_cast<uint32_t>(h_scalar) == std::bit_cast<uint32_t>(h));
      }
    }
  }
}

// --- in place: the output is the storage of an input ---

// Output 0 written into input `aliased`'s bytes (its type is `result`'s).
Status run_aliased(OpId id, std::vector<HostTensor*> inputs, int aliased,
                   const std::vector<int64_t>& result_dims, std::vector<int64_t> params = {}) {
  HostTensor result(DType::kF32, result_dims);
  return run_op(id, inputs, {&result}, params, aliased);
}

TEST_CASE("in place: binary output aliasing the first or second input") {
  for (const BinaryCase& c : binary_cases()) {
    for (int aliased = 0; aliased < 2; ++aliased) {
      for (const auto& other_dims : std::vector<std::vector<int64_t>>{{3, 257}, {1, 257}, {3, 1}, {}}) {
        INFO(c.name << " aliasing input " << aliased << ", other operand " << dims_string(other_dims));
        HostTensor big = random_f32({3, 257}, 3, 0.5f, 2.0f);
        HostTensor other = random_f32(other_dims, 4, 0.5f, 2.0f);
        HostTensor& a = aliased == 0 ? big : other;
        HostTensor& b = aliased == 0 ? other : big;
        const auto want = binary_reference(a, b, {3, 257}, c.ref);
        REQUIRE(run_aliased(c.id, {&a, &b}, aliased, {3, 257}).ok());
        check_close(big, want, 1e-6, 0.0);
      }
    }
  }
}

TEST_CASE("in place: x op x with every operand the same storage") {
  HostTensor x = random_f32({5, 9}, 5);
  std::vector<double> want;
  for (int64_t i = 0; i < x.count(); ++i) want.push_back(static_cast<double>(x.at(i)) * x.at(i));
  REQUIRE(run_aliased(OpId::kMul, {&x, &x}, 0, x.dims).ok());
  check_close(x, want);
}

TEST_CASE("in place: unary output aliasing its input") {
  for (const UnaryCase& c : unary_cases()) {
    INFO(c.name);
    HostTensor x = random_f32({4, 33}, 6, c.lo, c.hi);
    std::vector<double> want;
    for (int64_t i = 0; i < x.count(); ++i) want.push_back(c.ref(x.at(i)));
    REQUIRE(run_aliased(c.id, {&x}, 0, x.dims, c.params).ok());
    check_close(x, want, 2e-6, c.atol);
  }
}

TEST_CASE("kernel table: every dispatchable operator has a cpu kernel for its f32 key, views none") {
  for (int i = 0; i < ops::kOpCount; ++i) {
    const auto id = static_cast<OpId>(i);
    INFO("operator " << ops::op_def(id).name);
    const ops::KernelKey key = representative_key(id);
    CHECK((cpu::find_cpu_kernel(key) == nullptr) == ops::op_def(id).is_view);
  }
  CHECK((cpu::find_cpu_kernel({OpId::kSoftmax, DType::kI32, DType::kI32}) == nullptr));
  CHECK((cpu::find_cpu_kernel({OpId::kAdd, DType::kI32, DType::kI32}) != nullptr));
  CHECK((cpu::find_cpu_kernel({OpId::kCast, DType::kBF16, DType::kF32}) != nullptr));
  CHECK((cpu::find_cpu_kernel({OpId::kCast, DType::kI8, DType::kF32}) == nullptr));
  // f16 and bf16 through the f32 kernels (ops/widen.h).
  CHECK((cpu::find_cpu_kernel({OpId::kLayernorm, DType::kBF16, DType::kBF16}) != nullptr));
  CHECK((cpu::find_cpu_kernel({OpId::kEqual, DType::kF16, DType::kBool}) != nullptr));
  CHECK((cpu::find_cpu_kernel({OpId::kCast, DType::kI64, DType::kF16}) != nullptr));
}

// ---- unary: leaky_relu, clip, hard_sigmoid, hard_swish, erf, log, abs, reciprocal, softplus ----

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
      // log(1 + exp(x)) in long double: no cancellation to hide behind.
      {"softplus", OpId::kSoftplus, {}, [](double x) { return static_cast<double>(std::log1p(std::exp(static_cast<long double>(x)))); }},
      {"sin", OpId::kSin, {}, [](double x) { return std::sin(x); }},
      {"cos", OpId::kCos, {}, [](double x) { return std::cos(x); }},
      {"tan", OpId::kTan, {}, [](double x) { return std::tan(x); }},
      {"asin", OpId::kAsin, {}, [](double x) { return std::asin(x); }},
      {"acos", OpId::kAcos, {}, [](double x) { return std::acos(x); }},
      {"atan", OpId::kAtan, {}, [](double x) { return std::atan(x); }},
      {"sinh", OpId::kSinh, {}, [](double x) { return std::sinh(x); }},
      {"cosh", OpId::kCosh, {}, [](double x) { return std::cosh(x); }},
      {"asinh", OpId::kAsinh, {}, [](double x) { return std::asinh(x); }},
      {"acosh", OpId::kAcosh, {}, [](double x) { return std::acosh(x); }},
      {"atanh", OpId::kAtanh, {}, [](double x) { return std::atanh(x); }},
      // ONNX's definitions (its reference implementation's formulas), in double.
      {"elu 0.5", OpId::kElu, {word(0.5)}, [](double x) { return x > 0 ? x : 0.5 * std::expm1(x); }},
      {"selu", OpId::kSelu, {word(1.6732632423543772), word(1.0507009873554805)},
       [](double x) { return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * std::expm1(x)); }},
      {"celu 2", OpId::kCelu, {word(2.0)}, [](double x) { return x > 0 ? x : 2.0 * std::expm1(x / 2.0); }},
      {"mish", OpId::kMish, {},
       [](double x) { return x * std::tanh(static_cast<double>(std::log1p(std::exp(static_cast<long double>(x))))); }},
      // x / (1 + |x|): inf / inf is NaN, as ONNX's formula gives.
      {"softsign", OpId::kSoftsign, {}, [](double x) { return x / (1.0 + std::fabs(x)); }},
      {"thresholded_relu 1", OpId::kThresholdedRelu, {word(1.0)}, [](double x) { return x > 1.0 ? x : 0.0; }},
      {"thresholded_relu -0.5", OpId::kThresholdedRelu, {word(-0.5)}, [](double x) { return x > -0.5 ? x : 0.0; }},
      {"shrink 1.5 0.5", OpId::kShrink, {word(1.5), word(0.5)},
       [](double x) { return x < -1.5 ? x + 0.5 : (x > 1.5 ? x - 0.5 : 0.0); }},
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
  // softplus: inf stays inf, -inf gives 0, large x is x (exp(x) would overflow), NaN stays NaN.
  r = run1(OpId::kSoftplus, {kInfF, -kInfF, 100.0f, -100.0f, 0.0f, kNaNF}, {});
  CHECK(r[0] == kInfF);
  CHECK(r[1] == 0.0f);
  CHECK(r[2] == 100.0f);
  CHECK(r[3] >= 0.0f);  // exp(-100) is below f32's normal range
  CHECK(r[3] < 1e-37f);
  CHECK(r[4] == doctest::Approx(std::log(2.0)).epsilon(1e-6));
  CHECK(std::isnan(r[5]));
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

TEST_CASE("elu, selu, celu near 0 (expm1 without cancellation); is_inf, is_nan") {
  // Small |x|: exp(x) - 1 in floats would lose most bits; the polynomial keeps them.
  HostTensor x(DType::kF32, {6});
  const float small[] = {-1e-6f, -3e-4f, -0.01f, -0.3f, -0.35f, -0.4f};
  for (int i = 0; i < 6; ++i) x.at(i) = small[i];
  HostTensor out(DType::kF32, x.dims);
  REQUIRE(run_kernel(OpId::kElu, {&x}, out, {word(1.0)}).ok());
  std::vector<double> want;
  for (float v : small) want.push_back(std::expm1(static_cast<double>(v)));
  check_close(out, want, 4e-7, 0.0);

  HostTensor y(DType::kF32, {5});
  const float values[] = {kInfF, -kInfF, kNaNF, 0.0f, -3.0e38f};
  for (int i = 0; i < 5; ++i) y.at(i) = values[i];
  auto flags = [&](OpId id, std::vector<int64_t> params) {
    HostTensor r(DType::kBool, y.dims);
    REQUIRE(run_kernel(id, {&y}, r, params).ok());
    std::vector<int> got;
    for (uint8_t b : r.bytes) got.push_back(b);
    return got;
  };
  CHECK(flags(OpId::kIsInf, {1, 1}) == std::vector<int>{1, 1, 0, 0, 0});
  CHECK(flags(OpId::kIsInf, {1, 0}) == std::vector<int>{1, 0, 0, 0, 0});
  CHECK(flags(OpId::kIsInf, {0, 1}) == std::vector<int>{0, 1, 0, 0, 0});
  CHECK(flags(OpId::kIsInf, {0, 0}) == std::vector<int>{0, 0, 0, 0, 0});
  CHECK(flags(OpId::kIsNaN, {}) == std::vector<int>{0, 0, 1, 0, 0});
}

TEST_CASE("elu, selu, celu, softsign, thresholded_relu, shrink: the vector paths give math_of's bits") {
  // Every lane position and the scalar tail; small |x| (expm1's polynomial), its edge, specials.
  HostTensor x = random_f32({4099}, 130, -12.0f, 12.0f);
  for (int64_t i = 0; i < 1000; ++i) x.at(i) = x.at(i) * 0.03f;
  const float specials[] = {kNaNF, kInfF, -kInfF, 0.0f, -0.0f, 0.34657359f, -0.34657359f, -0.3465736f, 1.5f, -1.5f};
  for (size_t i = 0; i < std::size(specials); ++i) x.at(static_cast<int64_t>(2000 + i)) = specials[i];
  struct Case {
    OpId id;
    std::vector<int64_t> params;
    float (*scalar)(float, float, float);
  };
  const Case cases[] = {
      {OpId::kElu, {word(0.7)}, ops::math_of<ops::MathFn::kElu>},
      {OpId::kSelu, {word(1.6732632423543772), word(1.0507009873554805)}, ops::math_of<ops::MathFn::kSelu>},
      {OpId::kCelu, {word(1.5)}, ops::math_of<ops::MathFn::kCelu>},
      {OpId::kSoftsign, {}, ops::math_of<ops::MathFn::kSoftsign>},
      {OpId::kThresholdedRelu, {word(1.0)}, ops::math_of<ops::MathFn::kThresholdedRelu>},
      {OpId::kShrink, {word(1.5), word(0.5)}, ops::math_of<ops::MathFn::kShrink>},
  };
  for (const Case& c : cases) {
    CAPTURE(ops::op_def(c.id).name);
    HostTensor out(DType::kF32, x.dims);
    REQUIRE(run_kernel(c.id, {&x}, out, c.params).ok());
    const float a = c.params.size() > 0 ? static_cast<float>(std::bit_cast<double>(c.params[0])) : 0.0f;
    const float b = c.params.size() > 1 ? static_cast<float>(std::bit_cast<double>(c.params[1])) : 0.0f;
    int mismatches = 0;
    for (int64_t i = 0; i < x.count(); ++i)
      mismatches += std::bit_cast<uint32_t>(c.scalar(x.at(i), a, b)) != std::bit_cast<uint32_t>(out.at(i));
    CHECK(mismatches == 0);
  }
}

TEST_CASE("prelu: numpy broadcasting of the slope (ONNX unidirectional), NaN passes") {
  HostTensor x = unary_input(120);  // [5, 41]
  for (const std::vector<int64_t>& slope_dims : {std::vector<int64_t>{5, 41}, std::vector<int64_t>{41},
                                                 std::vector<int64_t>{5, 1}, std::vector<int64_t>{}}) {
    CAPTURE(slope_dims.size());
    HostTensor slope = random_f32(slope_dims, 121, -1.0f, 1.0f);
    HostTensor out(DType::kF32, x.dims);
    REQUIRE(run_kernel(OpId::kPRelu, {&x, &slope}, out, {}).ok());
    std::vector<double> want;
    for (int64_t i = 0; i < x.count(); ++i) {
      const int64_t row = i / 41, col = i % 41;
      const double s = slope_dims.empty() ? slope.at(0)
                       : slope_dims.size() == 1 ? slope.at(col)
                       : slope_dims[1] == 1     ? slope.at(row)
                                                : slope.at(i);
      const double v = x.at(i);
      want.push_back(v < 0 ? s * v : v);
    }
    check_close(out, want, 1e-7, 0.0);  // one float rounding of the product
  }
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

// ---- where ----------------------------------------------------------------------

HostTensor mask(const Dims& dims, uint32_t seed) {
  HostTensor m(DType::kBool, dims);
  std::mt19937 rng(seed);
  for (uint8_t& b : m.bytes) b = static_cast<uint8_t>(rng() & 1);
  return m;
}

void check_where(DType dtype, const Dims& c_dims, const Dims& x_dims, const Dims& y_dims,
                 const Dims& out_dims, uint32_t seed = 1) {
  INFO("where " << std::string(dtype_name(dtype)) << " cond " << dims_string(c_dims) << " x "
                << dims_string(x_dims) << " y " << dims_string(y_dims));
  HostTensor cond = mask(c_dims, seed);
  HostTensor x = iota_bytes(dtype, x_dims);
  HostTensor y = iota_bytes(dtype, y_dims);
  for (uint8_t& b : y.bytes) b ^= 0x5a;  // x and y differ everywhere
  for (HostTensor* t : {&cond, &x, &y})  // empty operands get readable bytes behind them
    if (t->count() == 0) fill_sentinel(*t, 0x33);
  HostTensor out(dtype, out_dims);
  fill_sentinel(out, 0xEE);
  Status status = run_op(OpId::kWhere, {&cond, &x, &y}, {&out});
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  check_untouched(out, 0xEE);
  for (int64_t i = 0; i < out.count(); ++i) {
    const Dims index = unravel(i, out_dims);
    const bool c = cond.bytes[static_cast<size_t>(broadcast_offset(index, c_dims))] != 0;
    const std::vector<uint8_t> want = c ? element_bytes(x, broadcast_offset(index, x_dims))
                                        : element_bytes(y, broadcast_offset(index, y_dims));
    INFO("element " << i);
    REQUIRE(element_bytes(out, i) == want);
  }
}

TEST_CASE("where: equal shapes, every element size") {
  check_where(DType::kF32, {4, 6}, {4, 6}, {4, 6}, {4, 6});
  check_where(DType::kU8, {37}, {37}, {37}, {37});
  check_where(DType::kF16, {3, 5}, {3, 5}, {3, 5}, {3, 5});
  check_where(DType::kI64, {2, 2, 3}, {2, 2, 3}, {2, 2, 3}, {2, 2, 3});
  check_where(DType::kBool, {9}, {9}, {9}, {9});
  check_where(DType::kI32, {}, {}, {}, {});
  check_where(DType::kF32, {1, 6}, {6}, {1, 1, 6}, {1, 1, 6});  // equal counts, different ranks
}

TEST_CASE("where: broadcasting of all three operands") {
  for (DType dtype : {DType::kF32, DType::kU8, DType::kF16, DType::kI64, DType::kBool, DType::kI32})
    check_where(dtype, {2, 1, 4}, {3, 1}, {1, 3, 4}, {2, 3, 4}, 7);
  check_where(DType::kF32, {}, {5}, {5}, {5}, 3);  // scalar condition (one seed gives true, one false)
  check_where(DType::kF32, {}, {5}, {5}, {5}, 4);
  check_where(DType::kF32, {5}, {}, {}, {5});  // scalar x and y
  check_where(DType::kF32, {5}, {}, {5}, {5});
  check_where(DType::kI64, {3, 1, 1, 2}, {1, 4, 1, 1}, {1, 1, 5, 1}, {3, 4, 5, 2});
  check_where(DType::kF16, {6, 1}, {1, 7}, {6, 7}, {6, 7});
  check_where(DType::kU8, {2, 1, 2, 1, 2, 1, 2, 1}, {1, 2, 1, 2, 1, 2, 1, 2}, {2}, {2, 2, 2, 2, 2, 2, 2, 2});
  check_where(DType::kF32, {1, 1}, {1}, {}, {1, 1});
  check_where(DType::kI32, {3, 0}, {3, 1}, {1, 0}, {3, 0});
}

TEST_CASE(
    "where: the contiguous and broadcast runs (a mask over a batch, a scalar fill) take any non-zero byte") {
  // Inner strides 0 or 1 run the branch-free blend: every combination of them.
  for (DType dtype : {DType::kF32, DType::kU8, DType::kF16, DType::kI64}) {
    check_where(dtype, {33, 40}, {4, 33, 40}, {}, {4, 33, 40}, 11);  // Trilu: mask [rows, cols], zero scalar
    check_where(dtype, {4, 33, 40}, {40}, {4, 33, 40}, {4, 33, 40}, 12);
    check_where(dtype, {4, 1}, {4, 40}, {1}, {4, 40}, 13);
    check_where(dtype, {1}, {1}, {4, 40}, {4, 40}, 14);
  }
  HostTensor cond(DType::kBool, {6});
  cond.bytes = {0, 1, 2, 0x80, 0xff, 0};
  HostTensor x = iota_bytes(DType::kF32, {3, 6}), y(DType::kF32, {});
  y.at(0) = -1.0f;
  HostTensor out(DType::kF32, {3, 6});
  REQUIRE(run_op(OpId::kWhere, {&cond, &x, &y}, {&out}).ok());
  for (int64_t i = 0; i < out.count(); ++i) {
    INFO("element " << i);
    CHECK(element_bytes(out, i) ==
          (cond.bytes[static_cast<size_t>(i % 6)] ? element_bytes(x, i) : element_bytes(y, 0)));
  }
}

TEST_CASE("where: an empty result reads and writes nothing") {
  // cond [1,3] broadcast against empty x and y [0,3]: the output has no element.
  HostTensor cond(DType::kBool, {1, 3});
  cond.bytes = {1, 0, 1};
  HostTensor x(DType::kF32, {0, 3}), y(DType::kF32, {0, 3}), out(DType::kF32, {0, 3});
  fill_sentinel(x, 0x11);
  fill_sentinel(y, 0x22);
  fill_sentinel(out, 0xEE);
  Status status = run_op(OpId::kWhere, {&cond, &x, &y}, {&out});
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  check_untouched(out, 0xEE);
  // the same with every dtype width and the condition empty too
  check_where(DType::kI32, {0, 3}, {0, 1}, {3}, {0, 3});
  check_where(DType::kU8, {0, 1}, {1, 4}, {0, 4}, {0, 4});
}

// ---- cast -----------------------------------------------------------------------

// Bytes as hex digits.
std::string hex(const std::vector<uint8_t>& bytes) {
  std::string s;
  char buf[4];
  for (uint8_t b : bytes) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    s += buf;
  }
  return s;
}

// f16 bits to their value, from the IEEE definition.
double half_value(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v;
  if (exponent == 0x1f)
    v = mantissa ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exponent == 0)
    v = std::ldexp(mantissa, -24);
  else
    v = std::ldexp(1024 + mantissa, exponent - 25);
  return (h & 0x8000) ? -v : v;
}

// A (non-NaN) value rounded to the nearest f16, ties to even, overflow to infinity.
uint16_t half_bits(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a >= 65520.0) return sign | 0x7c00;                // 65520 is the tie between 65504 and 2^16
  if (a < std::ldexp(1.0, -14)) {                        // subnormal: multiples of 2^-24
    const double m = std::nearbyint(std::ldexp(a, 24));  // 1024 is the smallest normal, 0x0400
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(m));
  }
  int e;
  const double f = std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  int exponent = e - 1;
  double m = std::nearbyint((2 * f - 1) * 1024);
  if (m == 1024) {
    m = 0;
    ++exponent;
  }
  return static_cast<uint16_t>(sign | ((exponent + 15) << 10) | static_cast<uint16_t>(m));
}

TEST_CASE("cast: the f16 reference itself agrees with known bit patterns") {
  CHECK(half_bits(1.0) == 0x3c00);
  CHECK(half_bits(-2.0) == 0xc000);
  CHECK(half_bits(65504.0) == 0x7bff);
  CHECK(half_bits(65519.0) == 0x7bff);
  CHECK(half_bits(65520.0) == 0x7c00);
  CHECK(half_bits(std::ldexp(1.0, -24)) == 0x0001);
  CHECK(half_bits(std::ldexp(1.0, -25)) == 0x0000);
  CHECK(half_bits(std::ldexp(3.0, -25)) == 0x0002);
  CHECK(half_bits(std::ldexp(1.0, -14) - std::ldexp(1.0, -24)) == 0x03ff);
  CHECK(half_bits(1.0 + std::ldexp(1.0, -11)) == 0x3c00);
  CHECK(half_bits(1.0 + std::ldexp(3.0, -11)) == 0x3c02);
  CHECK(half_bits(0.1) == 0x2e66);
  CHECK(half_bits(-0.0) == 0x8000);
  CHECK(half_value(0x3c00) == 1.0);
  CHECK(half_value(0x7bff) == 65504.0);
  CHECK(half_value(0x0001) == std::ldexp(1.0, -24));
  CHECK(half_value(0x5bf8) == 255.0);
  CHECK(std::isnan(half_value(0x7e00)));
}

// One source element: its exact value (a double for f32/f16, an integer otherwise).
struct Value {
  bool is_float;
  double f;
  int64_t i;
};

struct Source {
  HostTensor tensor;
  std::vector<Value> values;
};

Source f32_source() {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> list = {0.0,
                                    -0.0,
                                    1.0,
                                    -1.0,
                                    0.5,
                                    -0.5,
                                    1.5,
                                    -1.5,
                                    2.5,
                                    -2.5,
                                    2.7,
                                    -2.7,
                                    0.999,
                                    -0.999,
                                    0.1,
                                    -1e-3,
                                    127.9,
                                    128.0,
                                    200.5,
                                    254.99,
                                    255.0,
                                    255.5,
                                    256.0,
                                    257.0,
                                    300.0,
                                    -300.0,
                                    2049.0,
                                    2051.0,
                                    65504.0,
                                    65519.0,
                                    65520.0,
                                    -65520.0,
                                    65536.0,
                                    1e5,
                                    -1e5,
                                    2147483520.0,
                                    2147483648.0,
                                    -2147483648.0,
                                    -2147483904.0,
                                    3e9,
                                    -3e9,
                                    4294967296.0,
                                    9.2e18,
                                    9.3e18,
                                    -9.2e18,
                                    -9.3e18,
                                    1e19,
                                    1e30,
                                    -1e30,
                                    inf,
                                    -inf,
                                    nan,
                                    -nan,
                                    std::ldexp(1.0, -24),
                                    std::ldexp(1.0, -25),
                                    std::ldexp(3.0, -25),
                                    std::ldexp(1.0, -14),
                                    std::ldexp(1.0, -14) - std::ldexp(1.0, -24),
                                    1.0 + std::ldexp(1.0, -11),
                                    1.0 + std::ldexp(3.0, -11),
                                    1e-8,
                                    1e-40,
                                    1.0 / 3.0,
                                    16777217.0};
  Source s{HostTensor(DType::kF32, {static_cast<int64_t>(list.size())}), {}};
  for (size_t k = 0; k < list.size(); ++k) {
    s.tensor.at(static_cast<int64_t>(k)) = static_cast<float>(list[k]);
    s.values.push_back({true, static_cast<double>(static_cast<float>(list[k])), 0});
  }
  return s;
}

Source f16_source() {
  const std::vector<uint16_t> list = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x3800, 0xb800, 0x3e00, 0xbe00, 0x4170,
                                      0xc170, 0x3bff, 0x57ff, 0x5bf8, 0x5bfc, 0x5c00, 0x5c04, 0x5cb0, 0xdcb0,
                                      0x6400, 0x7800, 0xf800, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfe00,
                                      0x7c01, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3555, 0x2e66};
  Source s{HostTensor(DType::kF16, {static_cast<int64_t>(list.size())}), {}};
  for (size_t k = 0; k < list.size(); ++k) {
    std::memcpy(&s.tensor.bytes[2 * k], &list[k], 2);
    s.values.push_back({true, half_value(list[k]), 0});
  }
  return s;
}

Source int_source(DType dtype) {
  std::vector<int64_t> list;
  if (dtype == DType::kU8) {
    list = {0, 1, 2, 127, 128, 200, 254, 255};
  } else if (dtype == DType::kBool) {
    list = {0, 1, 1, 0, 0, 1};
  } else {
    list = {0,    1,    -1,    2,     127,   128,    255,      256,       257,     300,     -129,       -256,
            2049, 2051, 65504, 65519, 65520, -65520, 16777217, 123456789, kI32Max, kI32Min, kI32Min + 1};
    if (dtype == DType::kI64) {
      const std::vector<int64_t> wide = {int64_t{1} << 31,
                                         -(int64_t{1} << 31) - 1,
                                         int64_t{1} << 32,
                                         (int64_t{1} << 32) + 5,
                                         -(int64_t{1} << 32) - 1,
                                         4294967295,
                                         (int64_t{1} << 40) + 255,
                                         (int64_t{1} << 53) + 1,
                                         kI64Max,
                                         kI64Min,
                                         kI64Min + 1,
                                         -(int64_t{1} << 62)};
      list.insert(list.end(), wide.begin(), wide.end());
    }
  }
  Source s{HostTensor(dtype, {static_cast<int64_t>(list.size())}), {}};
  for (size_t k = 0; k < list.size(); ++k) {
    const int64_t v = list[k];
    switch (dtype) {
      case DType::kI32: {
        const int32_t x = static_cast<int32_t>(v);
        std::memcpy(&s.tensor.bytes[4 * k], &x, 4);
        break;
      }
      case DType::kI64:
        std::memcpy(&s.tensor.bytes[8 * k], &v, 8);
        break;
      default:
        s.tensor.bytes[k] = static_cast<uint8_t>(v);
        break;  // u8, bool
    }
    s.values.push_back({false, 0.0, v});
  }
  return s;
}

Source source_of(DType dtype) {
  if (dtype == DType::kF32) return f32_source();
  if (dtype == DType::kF16) return f16_source();
  return int_source(dtype);
}

// Floats to integers truncate toward zero and saturate, NaN to 0; integers wrap.
template <typename T>
T int_reference(const Value& v) {
  if (!v.is_float) return static_cast<T>(static_cast<uint64_t>(v.i));
  if (std::isnan(v.f)) return T{0};
  const double t = std::trunc(v.f);
  if (t <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (t >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(t);
}

template <typename T>
std::vector<uint8_t> as_bytes(T v) {
  std::vector<uint8_t> b(sizeof(T));
  std::memcpy(b.data(), &v, sizeof(T));
  return b;
}

// The expected bytes of `v` cast to `to`; empty when the result must be a NaN.
std::vector<uint8_t> cast_reference(const Value& v, DType to) {
  const bool nan = v.is_float && std::isnan(v.f);
  switch (to) {
    case DType::kF32:
      if (nan) return {};
      return as_bytes(v.is_float ? static_cast<float>(v.f) : static_cast<float>(v.i));
    case DType::kF16:
      if (nan) return {};
      return as_bytes(half_bits(v.is_float ? v.f : static_cast<double>(v.i)));
    case DType::kI32:
      return as_bytes(int_reference<int32_t>(v));
    case DType::kI64:
      return as_bytes(int_reference<int64_t>(v));
    case DType::kU8:
      return as_bytes(int_reference<uint8_t>(v));
    case DType::kBool:
      return {static_cast<uint8_t>(v.is_float ? v.f != 0.0 : v.i != 0)};  // NaN != 0
    default:
      FAIL("not castable");
      return {};
  }
}

bool is_nan_bytes(const std::vector<uint8_t>& b, DType dtype) {
  if (dtype == DType::kF32) {
    float f;
    std::memcpy(&f, b.data(), 4);
    return std::isnan(f);
  }
  uint16_t h;
  std::memcpy(&h, b.data(), 2);
  return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}

constexpr DType kCastable[] = {DType::kF32, DType::kF16, DType::kI32, DType::kI64, DType::kBool, DType::kU8};

TEST_CASE("cast: every pair of f32/f16/i32/i64/bool/u8 against the reference") {
  for (DType from : kCastable) {
    const Source src = source_of(from);
    for (DType to : kCastable) {
      INFO(std::string(dtype_name(from)) << " -> " << std::string(dtype_name(to)));
      HostTensor in = src.tensor;
      HostTensor out(to, src.tensor.dims);
      fill_sentinel(out, 0xCD);
      Status status = run_kernel(OpId::kCast, {&in}, out, {static_cast<int64_t>(to)});
      REQUIRE_MESSAGE(status.ok(), status.to_string());
      CHECK(in.bytes == src.tensor.bytes);
      int failures = 0;
      for (int64_t i = 0; i < out.count() && failures < 5; ++i) {
        const Value& v = src.values[static_cast<size_t>(i)];
        const std::vector<uint8_t> want = cast_reference(v, to);
        const std::vector<uint8_t> got = element_bytes(out, i);
        const bool ok = want.empty() ? is_nan_bytes(got, to) : got == want;
        if (!ok) {
          ++failures;
          INFO("element " << i << " = " << (v.is_float ? std::to_string(v.f) : std::to_string(v.i))
                          << " (source " << hex(element_bytes(src.tensor, i)) << "): got " << hex(got)
                          << ", want " << (want.empty() ? std::string("NaN") : hex(want)));
          CHECK(ok);
        }
      }
    }
  }
}

// Casts `in` to `to` and returns the result.
HostTensor cast_to(HostTensor in, DType to) {
  HostTensor out(to, in.dims);
  Status status = run_kernel(OpId::kCast, {&in}, out, {static_cast<int64_t>(to)});
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  return out;
}

HostTensor f32_tensor(const std::vector<float>& v) {
  HostTensor t(DType::kF32, {static_cast<int64_t>(v.size())});
  std::memcpy(t.bytes.data(), v.data(), v.size() * 4);
  return t;
}
template <typename T>
std::vector<T> values_of(const HostTensor& t) {
  std::vector<T> v(static_cast<size_t>(t.count()));
  std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(T));
  return v;
}

TEST_CASE("cast: spelled-out cases (truncation, saturation, NaN, wrapping, f16 bits)") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const HostTensor f =
      f32_tensor({nan, inf, -inf, 3e9f, -3e9f, 2.9f, -2.9f, -0.5f, 255.9f, 256.0f, -1.0f, 1e-40f});
  CHECK(values_of<int32_t>(cast_to(f, DType::kI32)) ==
        std::vector<int32_t>{0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 2, -2, 0, 255, 256, -1, 0});
  CHECK(values_of<int64_t>(cast_to(f, DType::kI64)) ==
        std::vector<int64_t>{0, kI64Max, kI64Min, 3000000000, -3000000000, 2, -2, 0, 255, 256, -1, 0});
  CHECK(values_of<uint8_t>(cast_to(f, DType::kU8)) ==
        std::vector<uint8_t>{0, 255, 0, 255, 0, 2, 0, 0, 255, 255, 0, 0});
  CHECK(values_of<uint8_t>(cast_to(f, DType::kBool)) ==
        std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});

  const HostTensor h =
      f32_tensor({1.0f, 65504.0f, 65520.0f, 0x1p-24f, -0.0f, 65519.0f, 0x1p-25f, 1e9f, -1e9f, 0.1f});
  CHECK(values_of<uint16_t>(cast_to(h, DType::kF16)) == std::vector<uint16_t>{0x3c00, 0x7bff, 0x7c00, 0x0001,
                                                                              0x8000, 0x7bff, 0x0000, 0x7c00,
                                                                              0xfc00, 0x2e66});
  const uint16_t h_nan = values_of<uint16_t>(cast_to(f32_tensor({nan}), DType::kF16))[0];
  CHECK((h_nan & 0x7c00) == 0x7c00);
  CHECK((h_nan & 0x3ff) != 0);

  HostTensor ints(DType::kI64, {6});
  const std::vector<int64_t> iv = {
      (int64_t{1} << 32) + 5, int64_t{1} << 31, -(int64_t{1} << 31) - 1, -1, 300, 256};
  std::memcpy(ints.bytes.data(), iv.data(), 48);
  CHECK(values_of<int32_t>(cast_to(ints, DType::kI32)) ==
        std::vector<int32_t>{5, INT32_MIN, INT32_MAX, -1, 300, 256});
  CHECK(values_of<uint8_t>(cast_to(ints, DType::kU8)) == std::vector<uint8_t>{5, 0, 255, 255, 44, 0});
  CHECK(values_of<uint8_t>(cast_to(ints, DType::kBool)) == std::vector<uint8_t>{1, 1, 1, 1, 1, 1});
  CHECK(values_of<uint16_t>(cast_to(ints, DType::kF16)) ==
        std::vector<uint16_t>{0x7c00, 0x7c00, 0xfc00, 0xbc00, 0x5cb0, 0x5c00});

  HostTensor halves(DType::kF16, {6});
  const std::vector<uint16_t> hv = {0x3e00, 0xbe00, 0x7c00, 0x7e00, 0x8000, 0x5bfc};
  std::memcpy(halves.bytes.data(), hv.data(), 12);
  CHECK(values_of<int32_t>(cast_to(halves, DType::kI32)) ==
        std::vector<int32_t>{1, -1, INT32_MAX, 0, 0, 255});
  CHECK(values_of<uint8_t>(cast_to(halves, DType::kBool)) == std::vector<uint8_t>{1, 1, 1, 1, 0, 1});
  const std::vector<float> hf = values_of<float>(cast_to(halves, DType::kF32));
  CHECK(hf[0] == 1.5f);
  CHECK(hf[2] == inf);
  CHECK(std::isnan(hf[3]));
  CHECK(std::signbit(hf[4]));
  CHECK(hf[5] == 255.5f);
}

TEST_CASE("cast: any non-zero bool byte reads as true; a shape of any rank") {
  HostTensor b(DType::kBool, {2, 3});
  b.bytes = {0, 1, 2, 0x80, 0xff, 0};
  CHECK(values_of<float>(cast_to(b, DType::kF32)) == std::vector<float>{0, 1, 1, 1, 1, 0});
  CHECK(values_of<int64_t>(cast_to(b, DType::kI64)) == std::vector<int64_t>{0, 1, 1, 1, 1, 0});
  CHECK(values_of<uint8_t>(cast_to(b, DType::kU8)) == std::vector<uint8_t>{0, 1, 1, 1, 1, 0});
  CHECK(values_of<uint8_t>(cast_to(b, DType::kBool)) == std::vector<uint8_t>{0, 1, 1, 1, 1, 0});
  CHECK(values_of<uint16_t>(cast_to(b, DType::kF16)) ==
        std::vector<uint16_t>{0, 0x3c00, 0x3c00, 0x3c00, 0x3c00, 0});
  // a scalar and an empty tensor
  HostTensor s(DType::kI32, {});
  const int32_t seven = -7;
  std::memcpy(s.bytes.data(), &seven, 4);
  CHECK(values_of<float>(cast_to(s, DType::kF32)) == std::vector<float>{-7.0f});
  HostTensor empty(DType::kF32, {0, 3}), empty_out(DType::kI64, {0, 3});
  fill_sentinel(empty_out, 0xAB);
  REQUIRE(run_kernel(OpId::kCast, {&empty}, empty_out, {static_cast<int64_t>(DType::kI64)}).ok());
  check_untouched(empty_out, 0xAB);
}

// ---- integer and boolean arithmetic, rounding -----------------------------------

// The integer references compute in __int128, where no i32 or i64 operation
// overflows, then wrap to T (two's complement): independent of the kernels'
// unsigned arithmetic and of ops/plans.h's rules.
template <typename T>
T wrap_to(__int128 v) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<unsigned __int128>(v)));
}

template <typename T>
HostTensor int_tensor(const Dims& dims, const std::vector<T>& values) {
  HostTensor t(std::is_same_v<T, int32_t> ? DType::kI32 : DType::kI64, dims);
  REQUIRE(values.size() == static_cast<size_t>(t.count()));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), values.size() * sizeof(T));
  return t;
}

// Operands with the extremes, -1, 0 and 1 in them; `nonzero`: no zero (divisors).
template <typename T>
HostTensor int_operand(const Dims& dims, uint32_t seed, bool nonzero) {
  HostTensor t = int_tensor<T>(dims, std::vector<T>(static_cast<size_t>(product(dims))));
  std::mt19937_64 rng(seed);
  const T specials[] = {std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), T(-1), T(1), T(0), T(7), T(-7)};
  for (int64_t i = 0; i < t.count(); ++i) {
    T v = rng() % 3 == 0 ? specials[rng() % 7] : static_cast<T>(static_cast<int64_t>(rng() % 41) - 20);
    if (nonzero && v == 0) v = 3;
    std::memcpy(t.bytes.data() + i * sizeof(T), &v, sizeof(T));
  }
  return t;
}

// floor division in __int128 (rounds toward -inf), for mod's fmod = 0.
__int128 floor_div(__int128 a, __int128 b) {
  __int128 q = a / b;
  if (q * b != a && ((a < 0) != (b < 0))) q -= 1;
  return q;
}

template <typename T>
void check_int_binary(OpId id, int64_t fmod, const Dims& da, const Dims& db, uint32_t seed) {
  const bool divides = id == OpId::kDiv || id == OpId::kMod;
  const HostTensor a = int_operand<T>(da, seed, false), b = int_operand<T>(db, seed + 1, divides);
  const Dims dims = broadcast(da, db);
  INFO(ops::op_def(id).name << " fmod " << fmod << " " << dtype_name(a.dtype) << dims_string(da) << " with "
                            << dims_string(db));
  HostTensor out(a.dtype, dims);
  HostTensor ac = a, bc = b;
  const std::vector<int64_t> params = id == OpId::kMod ? std::vector<int64_t>{fmod} : std::vector<int64_t>{};
  const Status s = run_kernel(id, {&ac, &bc}, out, params);
  REQUIRE_MESSAGE(s.ok(), s.to_string());
  for (int64_t i = 0; i < product(dims); ++i) {
    const Dims index = unravel(i, dims);
    const __int128 x = element<T>(a, broadcast_offset(index, da)), y = element<T>(b, broadcast_offset(index, db));
    __int128 want = 0;
    switch (id) {
      case OpId::kAdd: want = x + y; break;
      case OpId::kSub: want = x - y; break;
      case OpId::kMul: want = x * y; break;
      case OpId::kDiv: want = x / y; break;  // truncates toward zero; min / -1 wraps below
      case OpId::kMaximum: want = x > y ? x : y; break;
      case OpId::kMinimum: want = x < y ? x : y; break;
      default: want = fmod ? x - y * (x / y) : x - y * floor_div(x, y); break;
    }
    if (element<T>(out, i) != wrap_to<T>(want)) {
      INFO("element " << i << ": " << static_cast<int64_t>(x) << ", " << static_cast<int64_t>(y) << " gave "
                      << static_cast<int64_t>(element<T>(out, i)) << ", want "
                      << static_cast<int64_t>(wrap_to<T>(want)));
      CHECK(false);
      return;
    }
  }
}

TEST_CASE("integer add, sub, mul, div, maximum, minimum, mod: i32 and i64 against __int128, every broadcast") {
  const std::pair<Dims, Dims> shapes[] = {{{5, 9}, {5, 9}}, {{4, 6}, {6}},      {{}, {3, 4}},  {{7, 3}, {}},
                                          {{4, 1}, {1, 3, 1, 6}}, {{2, 1, 5}, {3, 1}}, {{0, 2}, {2}}, {{1}, {1}}};
  uint32_t seed = 700;
  for (const auto& [da, db] : shapes) {
    for (OpId id : {OpId::kAdd, OpId::kSub, OpId::kMul, OpId::kDiv, OpId::kMaximum, OpId::kMinimum}) {
      check_int_binary<int32_t>(id, 0, da, db, seed);
      check_int_binary<int64_t>(id, 0, da, db, seed + 2);
    }
    for (int64_t fmod : {0, 1}) {
      check_int_binary<int32_t>(OpId::kMod, fmod, da, db, seed + 4);
      check_int_binary<int64_t>(OpId::kMod, fmod, da, db, seed + 6);
    }
    seed += 10;
  }
}

// x ** e by e multiplications, each wrapped to T; a negative e truncates the
// real power (onnxruntime): 1 ** e = 1, (-1) ** e = +-1, anything else 0.
template <typename T>
T pow_by_steps(T x, T e) {
  if (e < 0) return x == 1 ? T(1) : x == -1 ? T(e % 2 == 0 ? 1 : -1) : T(0);
  T r = 1;
  for (T i = 0; i < e; ++i) r = wrap_to<T>(static_cast<__int128>(r) * x);
  return r;
}

TEST_CASE("integer pow: i32 and i64 against repeated multiplication, wrapping, negative exponents, broadcasts") {
  const std::pair<Dims, Dims> shapes[] = {{{5, 9}, {5, 9}}, {{4, 6}, {6}}, {{}, {3, 4}}, {{7, 3}, {}},
                                          {{4, 1}, {1, 3, 1, 6}}, {{0, 2}, {2}}};
  uint32_t seed = 900;
  auto check = [&]<typename T>(T, const Dims& da, const Dims& db) {
    const HostTensor a = int_operand<T>(da, seed++, false);
    HostTensor b = int_tensor<T>(db, std::vector<T>(static_cast<size_t>(product(db))));
    std::mt19937 rng(seed++);
    for (int64_t i = 0; i < b.count(); ++i) {
      const T e = static_cast<T>(static_cast<int>(rng() % 76) - 5);  // -5 .. 70: past every width
      std::memcpy(b.bytes.data() + i * sizeof(T), &e, sizeof(T));
    }
    INFO(dtype_name(a.dtype) << dims_string(da) << " ** " << dims_string(db));
    const Dims dims = broadcast(da, db);
    HostTensor out(a.dtype, dims), ac = a, bc = b;
    REQUIRE(run_kernel(OpId::kPow, {&ac, &bc}, out).ok());
    for (int64_t i = 0; i < product(dims); ++i) {
      const Dims index = unravel(i, dims);
      const T x = element<T>(a, broadcast_offset(index, da)), e = element<T>(b, broadcast_offset(index, db));
      INFO("element " << i << ": " << static_cast<int64_t>(x) << " ** " << static_cast<int64_t>(e));
      REQUIRE(element<T>(out, i) == pow_by_steps(x, e));
    }
  };
  for (const auto& [da, db] : shapes) {
    check(int32_t{}, da, db);
    check(int64_t{}, da, db);
  }
  // Spelled out: 3 ** 4, 2 ** 31 wraps to the lowest i32, (-2) ** 3, 0 ** 0, and negative exponents.
  HostTensor x = int_tensor<int32_t>({8}, {3, 2, -2, 0, 1, -1, -1, 2});
  HostTensor e = int_tensor<int32_t>({8}, {4, 31, 3, 0, -7, -3, -4, -1});
  HostTensor out(DType::kI32, {8});
  REQUIRE(run_kernel(OpId::kPow, {&x, &e}, out).ok());
  CHECK(values_of<int32_t>(out) ==
        std::vector<int32_t>{81, std::numeric_limits<int32_t>::min(), -8, 1, 1, -1, 1, 0});
}

TEST_CASE("integer div and mod: spelled-out signs, the lowest value by -1, and a zero divisor fails the invoke") {
  const Dims d{8};
  const int32_t lo = std::numeric_limits<int32_t>::min();
  HostTensor a = int_tensor<int32_t>(d, {7, -7, 7, -7, lo, lo, 5, 0});
  HostTensor b = int_tensor<int32_t>(d, {2, 2, -2, -2, -1, 1, 5, -3});
  HostTensor out(DType::kI32, d);
  REQUIRE(run_kernel(OpId::kDiv, {&a, &b}, out).ok());
  CHECK(values_of<int32_t>(out) == std::vector<int32_t>{3, -3, -3, 3, lo, lo, 1, 0});
  REQUIRE(run_kernel(OpId::kMod, {&a, &b}, out, {0}).ok());  // the divisor's sign (Python's %)
  CHECK(values_of<int32_t>(out) == std::vector<int32_t>{1, 1, -1, -1, 0, 0, 0, 0});
  REQUIRE(run_kernel(OpId::kMod, {&a, &b}, out, {1}).ok());  // the dividend's sign (C's %)
  CHECK(values_of<int32_t>(out) == std::vector<int32_t>{1, -1, 1, -1, 0, 0, 0, 0});

  // A zero divisor: a status naming the operator and the first result element,
  // whichever way the operands broadcast (flat, scalar, general walk).
  const int64_t lo64 = std::numeric_limits<int64_t>::min();
  HostTensor x = int_tensor<int64_t>({2, 3}, {1, 2, 3, lo64, 5, 6});
  struct ZeroCase {
    Dims dims;
    std::vector<int64_t> divisor;
    int64_t first;
  };
  const ZeroCase zero_cases[] = {{{2, 3}, {1, 1, 1, 1, 0, 0}, 4}, {{}, {0}, 0}, {{3}, {1, 0, 1}, 1},
                                 {{2, 1}, {1, 0}, 3}};
  for (const ZeroCase& z : zero_cases) {
    for (OpId id : {OpId::kDiv, OpId::kMod}) {
      HostTensor y = int_tensor<int64_t>(z.dims, z.divisor);
      HostTensor r(DType::kI64, {2, 3});
      const Status s = run_kernel(id, {&x, &y}, r, id == OpId::kMod ? std::vector<int64_t>{0} : std::vector<int64_t>{});
      INFO(s.to_string());
      CHECK(s.code() == StatusCode::kInvalidArgument);
      CHECK(s.message().find(std::string(ops::op_def(id).name) + ": integer division by zero") != std::string::npos);
      CHECK(s.message().find("result element " + std::to_string(z.first) + " ") != std::string::npos);
    }
  }
  // A large zero-free run is split over the pool; a zero deep in it is still reported first.
  HostTensor big_a = int_operand<int32_t>({300000}, 5, false), big_b = int_operand<int32_t>({300000}, 6, true);
  int32_t zero = 0;
  std::memcpy(big_b.bytes.data() + 4 * 250001, &zero, 4);
  std::memcpy(big_b.bytes.data() + 4 * 299999, &zero, 4);
  HostTensor big_out(DType::kI32, {300000});
  const Status s = run_kernel(OpId::kDiv, {&big_a, &big_b}, big_out);
  CHECK(s.message().find("result element 250001 ") != std::string::npos);
}

template <typename T>
void check_int_unary(OpId id, uint32_t seed) {
  const HostTensor x = int_operand<T>({3, 67}, seed, false);
  INFO(ops::op_def(id).name << " " << dtype_name(x.dtype));
  HostTensor out(x.dtype, x.dims);
  REQUIRE(run_kernel(id, {const_cast<HostTensor*>(&x)}, out).ok());
  for (int64_t i = 0; i < x.count(); ++i) {
    const __int128 v = element<T>(x, i);
    const __int128 want = id == OpId::kNeg ? -v : id == OpId::kAbs ? (v < 0 ? -v : v) : (v > 0) - (v < 0);
    CAPTURE(i);
    CHECK(element<T>(out, i) == wrap_to<T>(want));
  }
}

TEST_CASE("integer neg, abs, sign: i32 and i64 (the lowest value negates to itself)") {
  for (OpId id : {OpId::kNeg, OpId::kAbs, OpId::kSign}) {
    check_int_unary<int32_t>(id, 800);
    check_int_unary<int64_t>(id, 801);
  }
  HostTensor x = int_tensor<int64_t>({3}, {std::numeric_limits<int64_t>::min(), -5, 0});
  HostTensor out(DType::kI64, {3});
  REQUIRE(run_kernel(OpId::kAbs, {&x}, out).ok());
  CHECK(values_of<int64_t>(out) == std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 5, 0});
}

// ONNX Round written out: halves go to the even neighbour.
double round_half_even(double x) {
  if (std::isnan(x) || std::isinf(x)) return x;
  const double f = std::floor(x), diff = x - f;
  if (diff != 0.5) return diff < 0.5 ? f : f + 1;
  return std::fmod(f, 2.0) == 0 ? f : f + 1;
}

TEST_CASE("sign, ceil, floor, round (half to even), mod with fmod = 1 on f32") {
  HostTensor x(DType::kF32, {14});
  const float xv[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 2.4f, -2.6f, 0.0f, -0.0f, kNaNF, kInfF, -kInfF, 8388609.0f};
  std::memcpy(x.bytes.data(), xv, sizeof xv);
  HostTensor big = random_f32({3, 129}, 810, -50.0f, 50.0f);
  for (HostTensor* t : {&x, &big}) {
    for (auto entry : {std::pair<OpId, double (*)(double)>{OpId::kCeil, [](double v) { return std::ceil(v); }},
                       {OpId::kFloor, [](double v) { return std::floor(v); }},
                       {OpId::kRound, round_half_even},
                       {OpId::kSign, [](double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : v; }}}) {
      const OpId id = entry.first;  // not a structured binding: clang 14 cannot capture one in INFO
      const auto ref = entry.second;
      INFO(ops::op_def(id).name);
      HostTensor out(DType::kF32, t->dims);
      REQUIRE(run_kernel(id, {t}, out).ok());
      for (int64_t i = 0; i < t->count(); ++i) {
        const double want = ref(t->at(i));
        CAPTURE(i);
        if (std::isnan(want)) CHECK(std::isnan(out.at(i)));
        else CHECK(out.at(i) == want);
      }
    }
  }
  HostTensor r(DType::kF32, {14});
  REQUIRE(run_kernel(OpId::kRound, {&x}, r).ok());
  CHECK(std::signbit(r.at(3)));  // -0.5 rounds to -0

  HostTensor a = random_f32({4, 6}, 811, -10.0f, 10.0f), b = random_f32({6}, 812, 0.5f, 3.0f);
  b.at(1) = -b.at(1);
  b.at(2) = 0.0f;
  b.at(3) = kInfF;
  HostTensor out(DType::kF32, {4, 6});
  REQUIRE(run_kernel(OpId::kMod, {&a, &b}, out, {1}).ok());
  for (int64_t i = 0; i < 24; ++i) {
    const double x0 = a.at(i), y0 = b.at(i % 6);
    // C fmod, exact: x - y * trunc(x / y) in long double for these magnitudes.
    const double want = y0 == 0 ? NAN : std::isinf(y0) ? x0 : static_cast<double>(
        static_cast<long double>(x0) - static_cast<long double>(y0) * std::trunc(static_cast<long double>(x0) / y0));
    CAPTURE(i);
    if (std::isnan(want)) CHECK(std::isnan(out.at(i)));
    else CHECK(out.at(i) == doctest::Approx(want).epsilon(1e-6));
  }
  // f32 takes fmod = 1 only (ONNX Mod).
  CHECK(run_kernel(OpId::kMod, {&a, &b}, out, {0}).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("less_or_equal, greater_or_equal: f32 (NaN false), i32 and i64, broadcasting") {
  HostTensor a(DType::kF32, {8}), b(DType::kF32, {8});
  const float av[] = {kNaNF, kNaNF, 1.0f, kInfF, -kInfF, 0.0f, 2.0f, -1.0f};
  const float bv[] = {kNaNF, 1.0f, kNaNF, kInfF, kInfF, -0.0f, 1.0f, -1.0f};
  std::memcpy(a.bytes.data(), av, sizeof av);
  std::memcpy(b.bytes.data(), bv, sizeof bv);
  auto le = [](auto x, auto y) { return x <= y; };
  auto ge = [](auto x, auto y) { return x >= y; };
  check_compare<float>(OpId::kLessOrEqual, a, b, le);
  check_compare<float>(OpId::kGreaterOrEqual, a, b, ge);
  uint32_t seed = 820;
  for (const auto& [da, db] : {std::pair<Dims, Dims>{{4, 6}, {6}}, {{}, {3, 2}}, {{4, 1}, {1, 3, 1, 6}}}) {
    const HostTensor ia = ints(DType::kI64, da, seed++, 5), ib = ints(DType::kI64, db, seed++, 5);
    const HostTensor ja = ints(DType::kI32, da, seed++, 5), jb = ints(DType::kI32, db, seed++, 5);
    check_compare<int64_t>(OpId::kLessOrEqual, ia, ib, le);
    check_compare<int32_t>(OpId::kLessOrEqual, ja, jb, le);
    check_compare<int64_t>(OpId::kGreaterOrEqual, ia, ib, ge);
    check_compare<int32_t>(OpId::kGreaterOrEqual, ja, jb, ge);
  }
}

TEST_CASE("and, or, xor: any non-zero byte is true, results 0 or 1, broadcasting, in place") {
  for (const auto& [da, db] : {std::pair<Dims, Dims>{{4, 64}, {4, 64}}, {{4, 64}, {64}}, {{}, {5}}, {{3, 1}, {1, 7}}}) {
    HostTensor a(DType::kBool, da), b(DType::kBool, db);
    std::mt19937 rng(830);
    for (uint8_t& v : a.bytes) v = static_cast<uint8_t>(rng() % 3 == 0 ? 0 : rng());
    for (uint8_t& v : b.bytes) v = static_cast<uint8_t>(rng() % 3 == 0 ? 0 : rng());
    for (OpId id : {OpId::kAnd, OpId::kOr, OpId::kXor}) {
      const Dims dims = broadcast(da, db);
      HostTensor out(DType::kBool, dims);
      REQUIRE(run_kernel(id, {&a, &b}, out).ok());
      for (int64_t i = 0; i < product(dims); ++i) {
        const Dims index = unravel(i, dims);
        const bool x = a.bytes[static_cast<size_t>(broadcast_offset(index, da))] != 0;
        const bool y = b.bytes[static_cast<size_t>(broadcast_offset(index, db))] != 0;
        const bool want = id == OpId::kAnd ? (x && y) : id == OpId::kOr ? (x || y) : (x != y);
        CAPTURE(i);
        CHECK(out.bytes[static_cast<size_t>(i)] == static_cast<uint8_t>(want));
      }
    }
  }
  HostTensor a(DType::kBool, {4}), b(DType::kBool, {4});
  a.bytes = {0, 2, 0, 9};
  b.bytes = {0, 0, 5, 1};
  REQUIRE(run_op(OpId::kXor, {&a, &b}, {&a}, {}, 0).ok());
  CHECK(a.bytes == std::vector<uint8_t>{0, 1, 1, 0});
  HostTensor f = random_f32({4}, 1), out(DType::kBool, {4});
  CHECK(run_kernel(OpId::kAnd, {&f, &b}, out).code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hexir::hal::testing

namespace hexir::hal::testing {
namespace {

// Bytes of integer values as `dtype` (i8, u8 or i32).
HostTensor integers(DType dtype, std::vector<int64_t> dims, const std::vector<int32_t>& values) {
  HostTensor t(dtype, std::move(dims));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kI32) std::memcpy(t.bytes.data() + 4 * i, &values[i], 4);
    else t.bytes[i] = static_cast<uint8_t>(values[i]);
  }
  return t;
}
int32_t integer_at(const HostTensor& t, int64_t i) {
  if (t.dtype == DType::kI8) return static_cast<int8_t>(t.bytes[static_cast<size_t>(i)]);
  if (t.dtype == DType::kU8) return t.bytes[static_cast<size_t>(i)];
  int32_t v;
  std::memcpy(&v, t.bytes.data() + 4 * i, 4);
  return v;
}

}  // namespace

TEST_CASE("quantize_linear: round half to even of x / scale plus the zero point, saturated; per tensor and per axis") {
  // Per tensor, i8 and u8: halves round to even, both ends saturate, NaN is the zero point.
  HostTensor x(DType::kF32, {10});
  const float values[] = {0.0f, 0.25f, 0.75f, -0.25f, -0.75f, 1000.0f, -1000.0f, 12.5f, -3.0f, kNaNF};
  std::copy(std::begin(values), std::end(values), x.f32());
  HostTensor scale(DType::kF32, {}), out_i8(DType::kI8, {10}), out_u8(DType::kU8, {10});
  scale.at(0) = 0.5f;  // x / scale: 0, 0.5, 1.5, -0.5, -1.5, 2000, -2000, 25, -6, NaN
  HostTensor zero_i8 = integers(DType::kI8, {}, {-3}), zero_u8 = integers(DType::kU8, {}, {128});
  REQUIRE(run_kernel(OpId::kQuantizeLinear, {&x, &scale, &zero_i8}, out_i8, {0}).ok());
  REQUIRE(run_kernel(OpId::kQuantizeLinear, {&x, &scale, &zero_u8}, out_u8, {0}).ok());
  const int32_t want_i8[] = {-3, -3, -1, -3, -5, 127, -128, 22, -9, -3};
  const int32_t want_u8[] = {128, 128, 130, 128, 126, 255, 0, 153, 122, 128};
  for (int64_t i = 0; i < 10; ++i) {
    INFO("element " << i);
    CHECK(integer_at(out_i8, i) == want_i8[i]);
    CHECK(integer_at(out_u8, i) == want_u8[i]);
  }
  // Per axis 1 of [2, 3, 4]: channel c of element i is (i / 4) % 3; random values against a double reference.
  HostTensor y = random_f32({2, 3, 4}, 81, -4, 4), scales(DType::kF32, {3}), out(DType::kI8, {2, 3, 4});
  scales.at(0) = 0.03f, scales.at(1) = 0.1f, scales.at(2) = 1.0f;
  HostTensor zeros = integers(DType::kI8, {3}, {0, 10, -20});
  REQUIRE(run_kernel(OpId::kQuantizeLinear, {&y, &scales, &zeros}, out, {1}).ok());
  for (int64_t i = 0; i < y.count(); ++i) {
    const int64_t c = (i / 4) % 3;
    const double q = std::nearbyint(double{y.at(i) / scales.at(c)}) + integer_at(zeros, c);
    CHECK(integer_at(out, i) == static_cast<int32_t>(std::clamp(q, -128.0, 127.0)));
  }
}

TEST_CASE("dequantize_linear: (x - zero point) * scale from i8, u8 and i32, per tensor and per axis") {
  for (DType dtype : {DType::kI8, DType::kU8, DType::kI32}) {
    INFO(dtype_name(dtype));
    const bool is_u8 = dtype == DType::kU8;
    HostTensor x = integers(dtype, {2, 3}, is_u8 ? std::vector<int32_t>{0, 1, 128, 200, 255, 7}
                                                 : std::vector<int32_t>{-128, -1, 0, 5, 127, 100});
    HostTensor scale(DType::kF32, {3}), out(DType::kF32, {2, 3});
    scale.at(0) = 0.5f, scale.at(1) = 0.25f, scale.at(2) = 2.0f;
    HostTensor zero = integers(dtype, {3}, is_u8 ? std::vector<int32_t>{128, 0, 255} : std::vector<int32_t>{0, -3, 4});
    REQUIRE(run_kernel(OpId::kDequantizeLinear, {&x, &scale, &zero}, out, {1}).ok());
    for (int64_t i = 0; i < 6; ++i)
      CHECK(out.at(i) == static_cast<float>(integer_at(x, i) - integer_at(zero, i % 3)) * scale.at(i % 3));
    HostTensor one_scale(DType::kF32, {1}), one_zero = integers(dtype, {1}, {is_u8 ? 3 : -2});
    one_scale.at(0) = 0.125f;
    REQUIRE(run_kernel(OpId::kDequantizeLinear, {&x, &one_scale, &one_zero}, out, {0}).ok());
    for (int64_t i = 0; i < 6; ++i)
      CHECK(out.at(i) == static_cast<float>(integer_at(x, i) - integer_at(one_zero, 0)) * 0.125f);
  }
}

}  // namespace hexir::hal::testing
