// Elementwise kernels against double-precision references, including every
// broadcasting shape class and outputs that alias an input.
#include <functional>
#include <limits>
#include <numbers>

#include "hal_test_util.h"

namespace hexir::hal::testing {
namespace {

using ops::OpId;

// numpy broadcast of two shapes, written out independently of the kernels.
std::vector<int64_t> broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    REQUIRE((da == db || da == 1 || db == 1));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Flat position in `t` of the element that output multi-index `index` reads.
int64_t broadcast_source(const std::vector<int64_t>& index, const std::vector<int64_t>& dims) {
  const size_t shift = index.size() - dims.size();
  int64_t flat = 0;
  for (size_t i = 0; i < dims.size(); ++i) flat = flat * dims[i] + (dims[i] == 1 ? 0 : index[i + shift]);
  return flat;
}

using BinaryRef = std::function<double(double, double)>;

std::vector<double> binary_reference(const HostTensor& a, const HostTensor& b,
                                     const std::vector<int64_t>& out_dims, const BinaryRef& op) {
  std::vector<double> out(static_cast<size_t>(product(out_dims)));
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    const auto index = unravel(i, out_dims);
    out[i] = op(a.at(broadcast_source(index, a.dims)), b.at(broadcast_source(index, b.dims)));
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

TEST_CASE("binary: non-f32 operands and wrong operand counts are rejected") {
  HostTensor a(DType::kI32, {4}), b(DType::kI32, {4}), out(DType::kI32, {4});
  CHECK(run_kernel(OpId::kAdd, {&a, &b}, out).code() == StatusCode::kInvalidArgument);
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
    const ops::KernelKey key{id, id == OpId::kWhere ? DType::kF32 : DType::kF32, DType::kF32};
    CHECK((cpu::find_cpu_kernel(key) == nullptr) == ops::op_def(id).is_view);
  }
  CHECK((cpu::find_cpu_kernel({OpId::kAdd, DType::kI32, DType::kI32}) == nullptr));
  CHECK((cpu::find_cpu_kernel({OpId::kCast, DType::kBF16, DType::kF32}) == nullptr));
  CHECK((cpu::find_cpu_kernel({OpId::kCast, DType::kI64, DType::kF16}) != nullptr));
}

}  // namespace
}  // namespace hexir::hal::testing
