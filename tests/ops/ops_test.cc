// Shape rules and attribute lowering of the kernel catalog.
#include <doctest/doctest.h>

#include <bit>

#include "hexir/ops/op.h"

using namespace hexir;
using namespace hexir::ops;

namespace {
TensorType f32(std::vector<int64_t> dims) { return {DType::kF32, std::move(dims)}; }
AttrValue i(int64_t v) { return {v}; }
AttrValue str(const char* v) {
  AttrValue a;
  a.value = std::string(v);
  return a;
}
AttrValue list(std::vector<int64_t> v) {
  std::vector<AttrValue> out;
  out.reserve(v.size());
  for (int64_t x : v) out.emplace_back().value = x;
  return {out};
}

// Lowers attributes and infers the result in one step, as the serializer does.
Result<TensorType> infer(OpId id, std::vector<TensorType> in, AttrMap attrs = {}, TensorType declared = {}) {
  auto params = lower_attributes(id, in, attrs, std::span(&declared, 1));
  if (!params.ok()) return params.status();
  return infer_result_type(id, in, *params);
}
}  // namespace

TEST_CASE("catalog: every kernel is found by its name and ids are ordered") {
  for (int k = 0; k < kOpCount; ++k) {
    const OpDef& info = op_def(static_cast<OpId>(k));
    CHECK(static_cast<int>(info.id) == k);
    auto found = find_op(info.name);
    REQUIRE(found.has_value());
    CHECK(*found == info.id);
  }
  CHECK_FALSE(find_op("conv3d").has_value());
  CHECK(op_def(OpId::kReshape).is_view);
  CHECK(op_def(OpId::kAdd).may_run_in_place);
  CHECK_FALSE(op_def(OpId::kMatmul).may_run_in_place);
}

TEST_CASE("catalog: broadcasting follows numpy") {
  CHECK(*broadcast_shapes(std::vector<int64_t>{3, 1}, std::vector<int64_t>{1, 4}) == std::vector<int64_t>{3, 4});
  CHECK(*broadcast_shapes(std::vector<int64_t>{}, std::vector<int64_t>{2, 5}) == std::vector<int64_t>{2, 5});
  CHECK(*broadcast_shapes(std::vector<int64_t>{2, 1, 5}, std::vector<int64_t>{4, 1}) == std::vector<int64_t>{2, 4, 5});
  CHECK(*broadcast_shapes(std::vector<int64_t>{0, 4}, std::vector<int64_t>{1, 4}) == std::vector<int64_t>{0, 4});
  CHECK_FALSE(broadcast_shapes(std::vector<int64_t>{3}, std::vector<int64_t>{4}).has_value());
  auto r = infer(OpId::kAdd, {f32({2, 3}), f32({4, 3})});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("do not broadcast") != std::string::npos);
}

TEST_CASE("catalog: elementwise kernels need f32 and keep the shape") {
  CHECK(infer(OpId::kRelu, {f32({2, 3})})->dims == std::vector<int64_t>{2, 3});
  CHECK_FALSE(infer(OpId::kRelu, {TensorType{DType::kI32, {2}}}).ok());
  CHECK_FALSE(infer(OpId::kAdd, {f32({2})}).ok());  // operand count
  CHECK_FALSE(infer(OpId::kRelu, {f32({2})}, {{"axis", i(0)}}).ok());  // no attributes
}

TEST_CASE("catalog: gelu approximate attribute") {
  auto p = lower_attributes(OpId::kGelu, std::vector{f32({4})}, {{"approximate", str("tanh")}}, {});
  REQUIRE(p.ok());
  CHECK(*p == std::vector<int64_t>{1});
  CHECK(*lower_attributes(OpId::kGelu, std::vector{f32({4})}, {}, {}) == std::vector<int64_t>{0});
  CHECK_FALSE(lower_attributes(OpId::kGelu, std::vector{f32({4})}, {{"approximate", str("fast")}}, {}).ok());
  CHECK_FALSE(infer_result_type(OpId::kGelu, std::vector{f32({4})}, std::vector<int64_t>{7}).ok());
}

TEST_CASE("catalog: matmul follows numpy.matmul") {
  CHECK(infer(OpId::kMatmul, {f32({2, 3}), f32({3, 4})})->dims == std::vector<int64_t>{2, 4});
  CHECK(infer(OpId::kMatmul, {f32({3}), f32({3, 4})})->dims == std::vector<int64_t>{4});
  CHECK(infer(OpId::kMatmul, {f32({2, 3}), f32({3})})->dims == std::vector<int64_t>{2});
  CHECK(infer(OpId::kMatmul, {f32({3}), f32({3})})->dims.empty());
  CHECK(infer(OpId::kMatmul, {f32({5, 1, 2, 3}), f32({4, 3, 6})})->dims == std::vector<int64_t>{5, 4, 2, 6});
  CHECK_FALSE(infer(OpId::kMatmul, {f32({2, 3}), f32({4, 5})}).ok());
  CHECK_FALSE(infer(OpId::kMatmul, {f32({2, 2, 3}), f32({3, 3, 4})}).ok());
  CHECK_FALSE(infer(OpId::kMatmul, {f32({}), f32({3})}).ok());
}

TEST_CASE("catalog: softmax and concat normalize negative axes") {
  auto p = lower_attributes(OpId::kSoftmax, std::vector{f32({2, 3})}, {{"axis", i(-1)}}, {});
  REQUIRE(p.ok());
  CHECK(*p == std::vector<int64_t>{1});
  CHECK_FALSE(lower_attributes(OpId::kSoftmax, std::vector{f32({2, 3})}, {{"axis", i(2)}}, {}).ok());
  CHECK_FALSE(infer_result_type(OpId::kSoftmax, std::vector{f32({2, 3})}, std::vector<int64_t>{-1}).ok());
  auto c = infer(OpId::kConcat, {f32({2, 3}), f32({2, 5}), f32({2, 1})}, {{"axis", i(1)}});
  REQUIRE(c.ok());
  CHECK(c->dims == std::vector<int64_t>{2, 9});
  CHECK_FALSE(infer(OpId::kConcat, {f32({2, 3}), f32({3, 3})}, {{"axis", i(1)}}).ok());
  CHECK_FALSE(infer(OpId::kConcat, {f32({2, 3}), TensorType{DType::kI32, {2, 3}}}, {{"axis", i(0)}}).ok());
}

TEST_CASE("catalog: layernorm checks gamma and beta against the normalized dims") {
  AttrMap attrs{{"axis", i(1)}, {"epsilon", {1e-3}}};
  auto p = lower_attributes(OpId::kLayernorm, std::vector{f32({2, 3, 4}), f32({3, 4}), f32({3, 4})}, attrs, {});
  REQUIRE(p.ok());
  CHECK((*p)[0] == 1);
  CHECK(std::bit_cast<double>((*p)[1]) == doctest::Approx(1e-3));
  CHECK(infer(OpId::kLayernorm, {f32({2, 3, 4}), f32({3, 4}), f32({3, 4})}, attrs).ok());
  auto bad = infer(OpId::kLayernorm, {f32({2, 3, 4}), f32({4}), f32({3, 4})}, attrs);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("gamma") != std::string::npos);
  CHECK_FALSE(infer_result_type(OpId::kLayernorm, std::vector{f32({4}), f32({4}), f32({4})},
                                std::vector<int64_t>{0, std::bit_cast<int64_t>(-1.0)})
                  .ok());
}

TEST_CASE("catalog: transpose perm") {
  CHECK(infer(OpId::kTranspose, {f32({2, 3, 4})}, {{"perm", list({1, 0, 2})}})->dims == std::vector<int64_t>{3, 2, 4});
  CHECK(infer(OpId::kTranspose, {f32({2, 3, 4})})->dims == std::vector<int64_t>{4, 3, 2});
  CHECK(infer(OpId::kTranspose, {TensorType{DType::kU8, {2, 3}}})->dtype == DType::kU8);
  CHECK_FALSE(infer(OpId::kTranspose, {f32({2, 3})}, {{"perm", list({0, 0})}}).ok());
  CHECK_FALSE(infer(OpId::kTranspose, {f32({2, 3})}, {{"perm", list({0})}}).ok());
  CHECK_FALSE(infer_result_type(OpId::kTranspose, std::vector{f32({2, 3})}, std::vector<int64_t>{1, 5}).ok());
}

TEST_CASE("catalog: reshape takes the declared shape and keeps the element count") {
  CHECK(infer(OpId::kReshape, {f32({2, 6})}, {}, f32({3, 4}))->dims == std::vector<int64_t>{3, 4});
  auto bad = infer(OpId::kReshape, {f32({2, 6})}, {}, f32({5}));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("cannot reshape") != std::string::npos);
  CHECK_FALSE(infer_result_type(OpId::kReshape, std::vector{f32({2})}, std::vector<int64_t>{-1, -2}).ok());
}

TEST_CASE("catalog: reductions") {
  CHECK(infer(OpId::kReduceSum, {f32({2, 3, 4})}, {{"axes", list({-1, 0})}})->dims == std::vector<int64_t>{3});
  CHECK(infer(OpId::kReduceMean, {f32({2, 3, 4})}, {{"axes", list({1})}, {"keepdims", i(1)}})->dims ==
        std::vector<int64_t>{2, 1, 4});
  CHECK(infer(OpId::kReduceSum, {f32({2, 3})})->dims.empty());
  CHECK_FALSE(infer(OpId::kReduceSum, {f32({2, 3})}, {{"axes", list({1, -1})}}).ok());  // duplicate
  CHECK_FALSE(infer_result_type(OpId::kReduceSum, std::vector{f32({2, 3})}, std::vector<int64_t>{0, 1, 0}).ok());
  CHECK_FALSE(infer_result_type(OpId::kReduceSum, std::vector{f32({2, 3})}, std::vector<int64_t>{}).ok());
}

TEST_CASE("catalog: hostile parameters and shapes are rejected, not trusted") {
  CHECK_FALSE(infer_result_type(OpId::kAdd, std::vector{f32({2}), f32({2})}, std::vector<int64_t>{1}).ok());
  CHECK_FALSE(infer_result_type(OpId::kRelu, std::vector{f32({-1})}, {}).ok());
  CHECK_FALSE(infer_result_type(OpId::kRelu, std::vector{f32({1ll << 40, 1ll << 40})}, {}).ok());
  CHECK_FALSE(infer_result_type(OpId::kRelu, std::vector{f32({1, 1, 1, 1, 1, 1, 1, 1, 1})}, {}).ok());
  CHECK_FALSE(infer_result_type(OpId::kConcat, std::vector{f32({2})}, std::vector<int64_t>{1}).ok());
  CHECK_FALSE(infer_result_type(OpId::kCount, std::vector{f32({2})}, {}).ok());
}
