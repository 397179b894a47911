// Constant folding through the operators (passes/fold.h): one operator on
// host bytes by its CPU kernel, the limits, and a kernel's failure.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "passes/fold.h"

namespace hexir::compiler {
namespace {

using ops::OpId;

std::vector<uint8_t> bytes_of(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> floats_of(const std::vector<uint8_t>& b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

TEST_CASE("evaluate_on_cpu: reduce_max by its kernel, in the operator's dtype") {
  const std::vector<uint8_t> x = bytes_of({0.5f, 2.25f, -1.f, 3.5f, 1.f, 0.f});
  const HostOperand in{TensorType{DType::kF32, {2, 3}}, x};
  const std::vector<int64_t> params = {0, 1};  // keepdims 0, axes [1]
  auto r = evaluate_on_cpu(OpId::kReduceMax, params, {&in, 1}, 1 << 20);
  REQUIRE(r.ok());
  REQUIRE(r->has_value());
  REQUIRE((*r)->size() == 1);
  CHECK((**r)[0].type == TensorType{DType::kF32, {2}});
  CHECK(floats_of((**r)[0].bytes) == std::vector<float>{2.25f, 3.5f});
}

TEST_CASE("evaluate_on_cpu: the byte limit counts the results; operands the rules refuse do not fold") {
  const std::vector<uint8_t> a = bytes_of({1, 2, 3, 4}), b = bytes_of({10, 20, 30, 40});
  const HostOperand ins[] = {{TensorType{DType::kF32, {4, 1}}, a}, {TensorType{DType::kF32, {1, 4}}, b}};
  auto fits = evaluate_on_cpu(OpId::kAdd, {}, ins, 64);  // f32[4,4]: 64 bytes
  REQUIRE(fits.ok());
  REQUIRE(fits->has_value());
  CHECK(floats_of((**fits)[0].bytes)[5] == 22.f);
  auto over = evaluate_on_cpu(OpId::kAdd, {}, ins, 63);
  REQUIRE(over.ok());
  CHECK(!over->has_value());
  // Bytes that do not match the stated type, and shapes that do not broadcast.
  const HostOperand short_bytes[] = {{TensorType{DType::kF32, {4, 2}}, a}, ins[1]};
  CHECK(!evaluate_on_cpu(OpId::kAdd, {}, short_bytes, 1 << 20)->has_value());
  const HostOperand mismatched[] = {{TensorType{DType::kF32, {4}}, a}, {TensorType{DType::kF32, {2, 2}}, b}};
  auto refused = evaluate_on_cpu(OpId::kAdd, {}, mismatched, 1 << 20);
  REQUIRE(refused.ok());
  CHECK(!refused->has_value());
}

TEST_CASE("evaluate_on_cpu: a view folds to its input's bytes; a kernel's run-time error is an error") {
  const std::vector<uint8_t> x = bytes_of({1, 2, 3, 4, 5, 6});
  const HostOperand in{TensorType{DType::kF32, {2, 3}}, x};
  auto reshaped = evaluate_on_cpu(OpId::kReshape, std::vector<int64_t>{3, 2}, {&in, 1}, 1 << 20);
  REQUIRE(reshaped.ok());
  REQUIRE(reshaped->has_value());
  CHECK((**reshaped)[0].type == TensorType{DType::kF32, {3, 2}});
  CHECK((**reshaped)[0].bytes == x);

  const int64_t index = 7;  // rows 0..1
  std::vector<uint8_t> ix(8);
  std::memcpy(ix.data(), &index, 8);
  const HostOperand gather_in[] = {in, {TensorType{DType::kI64, {1}}, ix}};
  auto failed = evaluate_on_cpu(OpId::kGather, std::vector<int64_t>{0}, gather_in, 1 << 20);
  CHECK(!failed.ok());
}

}  // namespace
}  // namespace hexir::compiler
