// Shape rules and attribute lowering of the kernel catalog.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <set>
#include <string_view>

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
  CHECK(*broadcast_shapes(std::vector<int64_t>{3, 1}, std::vector<int64_t>{1, 4}) ==
        std::vector<int64_t>{3, 4});
  CHECK(*broadcast_shapes(std::vector<int64_t>{}, std::vector<int64_t>{2, 5}) == std::vector<int64_t>{2, 5});
  CHECK(*broadcast_shapes(std::vector<int64_t>{2, 1, 5}, std::vector<int64_t>{4, 1}) ==
        std::vector<int64_t>{2, 4, 5});
  CHECK(*broadcast_shapes(std::vector<int64_t>{0, 4}, std::vector<int64_t>{1, 4}) ==
        std::vector<int64_t>{0, 4});
  CHECK_FALSE(broadcast_shapes(std::vector<int64_t>{3}, std::vector<int64_t>{4}).has_value());
  auto r = infer(OpId::kAdd, {f32({2, 3}), f32({4, 3})});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("do not broadcast") != std::string::npos);
}

TEST_CASE("catalog: elementwise kernels need f32 and keep the shape") {
  CHECK(infer(OpId::kRelu, {f32({2, 3})})->dims == std::vector<int64_t>{2, 3});
  CHECK_FALSE(infer(OpId::kRelu, {TensorType{DType::kI32, {2}}}).ok());
  CHECK_FALSE(infer(OpId::kAdd, {f32({2})}).ok());                     // operand count
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
  auto p =
      lower_attributes(OpId::kLayernorm, std::vector{f32({2, 3, 4}), f32({3, 4}), f32({3, 4})}, attrs, {});
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
  CHECK(infer(OpId::kTranspose, {f32({2, 3, 4})}, {{"perm", list({1, 0, 2})}})->dims ==
        std::vector<int64_t>{3, 2, 4});
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
  CHECK(infer(OpId::kReduceSum, {f32({2, 3, 4})}, {{"axes", list({-1, 0})}})->dims ==
        std::vector<int64_t>{3});
  CHECK(infer(OpId::kReduceMean, {f32({2, 3, 4})}, {{"axes", list({1})}, {"keepdims", i(1)}})->dims ==
        std::vector<int64_t>{2, 1, 4});
  CHECK(infer(OpId::kReduceSum, {f32({2, 3})})->dims.empty());
  CHECK_FALSE(infer(OpId::kReduceSum, {f32({2, 3})}, {{"axes", list({1, -1})}}).ok());  // duplicate
  CHECK_FALSE(
      infer_result_type(OpId::kReduceSum, std::vector{f32({2, 3})}, std::vector<int64_t>{0, 1, 0}).ok());
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

// ---- the new operators: split, cast, where, gather, slice, conv2d ----------------

namespace {
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

TensorType tt(DType dtype, std::vector<int64_t> dims) { return {dtype, std::move(dims)}; }
using Dims = std::vector<int64_t>;
using Params = std::vector<int64_t>;

bool mentions(const std::string& message, std::string_view what) {
  INFO("message: " << message);
  return message.find(what) != std::string::npos;
}
bool mentions(const Status& s, std::string_view what) { return mentions(s.message(), what); }

Result<std::vector<int64_t>> lower(OpId id, std::vector<TensorType> in, AttrMap attrs,
                                   std::vector<TensorType> declared = {}) {
  return lower_attributes(id, in, attrs, declared);
}
Result<std::vector<TensorType>> rule(OpId id, std::vector<TensorType> in, Params params) {
  return infer_result_types(id, in, params);
}
// The result-type rule rejects `params`; returns its message.
std::string rejected(OpId id, std::vector<TensorType> in, Params params) {
  auto r = infer_result_types(id, in, params);
  std::string operands;
  for (const TensorType& t : in) operands += t.to_string() + " ";
  std::string words;
  for (int64_t w : params) words += std::to_string(w) + " ";
  INFO("@" << std::string(op_def(id).name) << " operands " << operands << "params [ " << words << "]");
  CHECK_FALSE(r.ok());
  if (r.ok()) return {};
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message().rfind(std::string("@") + op_def(id).name + ": ", 0) == 0);
  return r.status().message();
}
// Plans with the rule's own result types.
OpPlan plan_of(OpId id, std::vector<TensorType> in, Params params) {
  auto out = infer_result_types(id, in, params);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  auto plan = plan_op(id, in, *out, params);
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  REQUIRE_FALSE(plan->empty());
  return std::move(*plan);
}
}  // namespace

TEST_CASE("catalog: every OpId has one definition whose name round-trips through find_op") {
  std::set<std::string> names;
  for (int k = 0; k < kOpCount; ++k) {
    const OpId id = static_cast<OpId>(k);
    const OpDef& def = op_def(id);
    INFO("op id " << k);
    CHECK(def.id == id);
    REQUIRE(def.name != nullptr);
    CHECK(std::string_view(def.name).size() > 0);
    CHECK(names.insert(def.name).second);  // unique names
    auto found = find_op(def.name);
    REQUIRE(found.has_value());
    CHECK(*found == id);
    const bool has_lower = def.lower != nullptr, has_infer = def.infer != nullptr,
               has_plan = def.plan != nullptr;
    CHECK(has_lower);
    CHECK(has_infer);
    CHECK(has_plan != def.is_view);
    CHECK(def.min_inputs >= 1);
    CHECK((def.max_inputs < 0 || def.max_inputs >= def.min_inputs));
    CHECK(def.min_outputs >= 1);
    CHECK(def.key_input >= 0);
    CHECK((def.max_inputs < 0 || def.key_input < def.max_inputs));
  }
  CHECK(names.size() == static_cast<size_t>(kOpCount));
  const std::pair<const char*, OpId> fresh[] = {{"split", OpId::kSplit}, {"cast", OpId::kCast},
                                                {"where", OpId::kWhere}, {"gather", OpId::kGather},
                                                {"slice", OpId::kSlice}, {"conv2d", OpId::kConv2d}};
  for (auto [name, id] : fresh) {
    CHECK(find_op(name) == std::optional<OpId>(id));
    CHECK(std::string_view(op_def(id).name) == name);
  }
  CHECK_FALSE(find_op("").has_value());
  CHECK_FALSE(find_op("Split").has_value());
  CHECK_FALSE(find_op("conv2d ").has_value());
  CHECK(op_def(OpId::kSplit).max_outputs == -1);
  CHECK(op_def(OpId::kConv2d).min_inputs == 2);
  CHECK(op_def(OpId::kConv2d).max_inputs == 4);  // x, w, bias, residual
  CHECK(op_def(OpId::kConv2d).f32_only);
  CHECK_FALSE(op_def(OpId::kWhere).may_run_in_place);
  CHECK(op_def(OpId::kWhere).key_input == 1);
}

// ---- split ----------------------------------------------------------------------

TEST_CASE("split: attribute lowering") {
  const std::vector<TensorType> x{tt(DType::kI64, {4, 6, 5})};
  // sizes given, axis negative
  auto p = lower(OpId::kSplit, x, {{"axis", i(-2)}, {"sizes", list({1, 2, 3})}});
  REQUIRE(p.ok());
  CHECK(*p == Params{1, 1, 2, 3});
  // a single integer for sizes
  p = lower(OpId::kSplit, x, {{"axis", i(2)}, {"sizes", i(5)}});
  REQUIRE(p.ok());
  CHECK(*p == Params{2, 5});
  // default axis 0, equal parts from the stated results
  p = lower(OpId::kSplit, x, {}, {tt(DType::kI64, {2, 6, 5}), tt(DType::kI64, {2, 6, 5})});
  REQUIRE(p.ok());
  CHECK(*p == Params{0, 2, 2});
  p = lower(OpId::kSplit, x, {{"axis", i(1)}}, std::vector<TensorType>(3, tt(DType::kI64, {4, 2, 5})));
  REQUIRE(p.ok());
  CHECK(*p == Params{1, 2, 2, 2});
  // errors name what is wrong
  auto e = lower(OpId::kSplit, x, {});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'sizes'"));
  e = lower(OpId::kSplit, x, {{"axis", i(1)}}, std::vector<TensorType>(4, tt(DType::kI64, {4, 1, 5})));
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "equal parts"));
  e = lower(OpId::kSplit, x, {{"axis", i(3)}, {"sizes", list({4})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "axis 3"));
  e = lower(OpId::kSplit, x, {{"axis", i(-4)}, {"sizes", list({4})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "axis -4"));
  e = lower(OpId::kSplit, x, {{"axis", str("1")}, {"sizes", list({4})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'axis'"));
  e = lower(OpId::kSplit, x, {{"sizes", str("2,2")}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'sizes'"));
  e = lower(OpId::kSplit, x, {{"sizes", list({2, 2})}, {"split", list({2, 2})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'split'"));
  // the rule checks what lowering passes through
  p = lower(OpId::kSplit, x, {{"sizes", list({1, 1})}});
  REQUIRE(p.ok());
  CHECK_FALSE(rule(OpId::kSplit, x, *p).ok());
  CHECK(mentions(lower(OpId::kSplit, {tt(DType::kF32, {})}, {{"sizes", list({1})}}).status(), "axis"));
}

TEST_CASE("split: result types") {
  const TensorType x = tt(DType::kF16, {4, 6, 5});
  auto r = rule(OpId::kSplit, {x}, {1, 2, 3, 1});
  REQUIRE(r.ok());
  REQUIRE(r->size() == 3);
  CHECK((*r)[0] == tt(DType::kF16, {4, 2, 5}));
  CHECK((*r)[1] == tt(DType::kF16, {4, 3, 5}));
  CHECK((*r)[2] == tt(DType::kF16, {4, 1, 5}));
  // empty parts and a single part
  r = rule(OpId::kSplit, {x}, {2, 0, 5, 0});
  REQUIRE(r.ok());
  REQUIRE(r->size() == 3);
  CHECK((*r)[0].dims == Dims{4, 6, 0});
  CHECK((*r)[1].dims == Dims{4, 6, 5});
  auto one_part = infer_result_type(OpId::kSplit, std::vector{x}, Params{0, 4});
  REQUIRE(one_part.ok());
  CHECK(*one_part == x);
  // several results through the single-result shorthand fail
  CHECK_FALSE(infer_result_type(OpId::kSplit, std::vector{x}, Params{0, 2, 2}).ok());
  // an empty axis splits into empty parts
  r = rule(OpId::kSplit, {tt(DType::kU8, {0, 3})}, {0, 0, 0});
  REQUIRE(r.ok());
  CHECK(r->size() == 2);

  // hostile parameter words
  CHECK(mentions(rejected(OpId::kSplit, {x}, {}), "at least one size"));
  CHECK(mentions(rejected(OpId::kSplit, {x}, {1}), "at least one size"));
  CHECK(mentions(rejected(OpId::kSplit, {x}, {3, 4}), "axis parameter 3"));
  CHECK(mentions(rejected(OpId::kSplit, {x}, {-1, 5}), "axis parameter -1"));
  rejected(OpId::kSplit, {x}, {kI64Max, 4});
  rejected(OpId::kSplit, {x}, {kI64Min, 4});
  rejected(OpId::kSplit, {tt(DType::kF32, {})}, {0, 1});
  CHECK(mentions(rejected(OpId::kSplit, {x}, {1, 2, 3}), "add up to 5"));       // too few
  CHECK(mentions(rejected(OpId::kSplit, {x}, {1, 2, 3, 2}), "do not add up"));  // too many
  rejected(OpId::kSplit, {x}, {1, -1, 7});                                      // negative part
  rejected(OpId::kSplit, {x}, {1, 7, -1});
  rejected(OpId::kSplit, {x}, {1, kI64Max, kI64Max, 2});  // sum overflows
  rejected(OpId::kSplit, {x}, {1, kI64Max, 7});
  rejected(OpId::kSplit, {x}, {1, kI64Min, 6});
  rejected(OpId::kSplit, {x}, {1, 6, kI64Min});
  rejected(OpId::kSplit, {x}, {1, 1ll << 62, 1ll << 62, 6});
}

TEST_CASE("split: plan") {
  const TensorType x = tt(DType::kI32, {2, 6, 5});
  OpPlan plan = plan_of(OpId::kSplit, {x}, {1, 1, 2, 3});
  const SplitPlan& p = plan.as<SplitPlan>();
  CHECK(p.outer == 2);
  CHECK(p.in_row_bytes == 6 * 5 * 4);
  CHECK(p.output_count == 3);
  const int64_t* rows = plan_tail(&p);
  CHECK(rows[0] == 1 * 5 * 4);
  CHECK(rows[1] == 2 * 5 * 4);
  CHECK(rows[2] == 3 * 5 * 4);
  CHECK(plan.words().size() == (sizeof(SplitPlan) + 7) / 8 + 3);

  OpPlan first = plan_of(OpId::kSplit, {tt(DType::kI64, {6, 3})}, {0, 4, 0, 2});
  const SplitPlan& q = first.as<SplitPlan>();
  CHECK(q.outer == 1);
  CHECK(q.in_row_bytes == 6 * 3 * 8);
  CHECK(q.output_count == 3);
  CHECK(plan_tail(&q)[0] == 4 * 3 * 8);
  CHECK(plan_tail(&q)[1] == 0);
  CHECK(plan_tail(&q)[2] == 2 * 3 * 8);

  OpPlan last = plan_of(OpId::kSplit, {tt(DType::kU8, {3, 2, 7})}, {2, 7, 0});
  const SplitPlan& l = last.as<SplitPlan>();
  CHECK(l.outer == 6);
  CHECK(l.in_row_bytes == 7);
  CHECK(plan_tail(&l)[0] == 7);
  CHECK(plan_tail(&l)[1] == 0);

  // plan_op checks the outputs it is given against the rule
  const std::vector<TensorType> in{x};
  const std::vector<TensorType> two{tt(DType::kI32, {2, 3, 5}), tt(DType::kI32, {2, 3, 5})};
  CHECK(plan_op(OpId::kSplit, in, two, Params{1, 3, 3}).ok());
  auto wrong_count = plan_op(OpId::kSplit, in, two, Params{1, 2, 2, 2});
  REQUIRE_FALSE(wrong_count.ok());
  CHECK(mentions(wrong_count.status(), "3 results, 2 outputs"));
  auto wrong_type = plan_op(OpId::kSplit, in, two, Params{1, 2, 4});
  REQUIRE_FALSE(wrong_type.ok());
  CHECK(mentions(wrong_type.status(), "result 0"));
  CHECK(workspace_bytes(OpId::kSplit, in, Params{1, 3, 3}) == 0);
}

// ---- cast -----------------------------------------------------------------------

TEST_CASE("cast: attribute lowering") {
  const std::vector<TensorType> x{tt(DType::kF32, {3})};
  auto p = lower(OpId::kCast, x, {{"to", str("f16")}});
  REQUIRE(p.ok());
  CHECK(*p == Params{static_cast<int64_t>(DType::kF16)});
  CHECK(*lower(OpId::kCast, x, {{"to", str("i64")}}) == Params{static_cast<int64_t>(DType::kI64)});
  CHECK(*lower(OpId::kCast, x, {{"to", str("bool")}}) == Params{static_cast<int64_t>(DType::kBool)});
  CHECK(*lower(OpId::kCast, x, {{"to", str("u8")}}) == Params{static_cast<int64_t>(DType::kU8)});
  // no attribute: the stated result type says it; the attribute wins over it
  p = lower(OpId::kCast, x, {}, {tt(DType::kI32, {3})});
  REQUIRE(p.ok());
  CHECK(*p == Params{static_cast<int64_t>(DType::kI32)});
  p = lower(OpId::kCast, x, {{"to", str("u8")}}, {tt(DType::kI32, {3})});
  REQUIRE(p.ok());
  CHECK(*p == Params{static_cast<int64_t>(DType::kU8)});
  // errors name the attribute
  auto e = lower(OpId::kCast, x, {});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'to'"));
  e = lower(OpId::kCast, x, {{"to", str("float")}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'to'"));
  e = lower(OpId::kCast, x, {{"to", i(3)}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'to'"));
  e = lower(OpId::kCast, x, {{"to", str("f16")}, {"saturate", i(1)}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'saturate'"));
  // a dtype name that lowers but that cast does not support is the rule's to reject
  p = lower(OpId::kCast, x, {{"to", str("i8")}});
  if (p.ok()) CHECK_FALSE(rule(OpId::kCast, x, *p).ok());
}

TEST_CASE("cast: result types") {
  const DType castable[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32,
                            DType::kI64, DType::kBool, DType::kU8};
  for (DType from : castable)
    for (DType to : castable) {
      INFO(dtype_name(from) << " -> " << dtype_name(to));
      auto r =
          infer_result_type(OpId::kCast, std::vector{tt(from, {2, 0, 3})}, Params{static_cast<int64_t>(to)});
      REQUIRE(r.ok());
      CHECK(*r == tt(to, {2, 0, 3}));
    }
  auto scalar = infer_result_type(OpId::kCast, std::vector{tt(DType::kI64, {})}, Params{0});
  REQUIRE(scalar.ok());
  CHECK(*scalar == tt(DType::kF32, {}));
  const TensorType x = tt(DType::kF32, {4});
  CHECK(mentions(rejected(OpId::kCast, {x}, {static_cast<int64_t>(DType::kI8)}), "target dtype 5"));
  CHECK(mentions(rejected(OpId::kCast, {x}, {-1}), "target dtype -1"));
  CHECK(mentions(rejected(OpId::kCast, {x}, {kDTypeCount}), "target dtype"));
  rejected(OpId::kCast, {x}, {256});
  rejected(OpId::kCast, {x}, {kI64Max});
  rejected(OpId::kCast, {x}, {kI64Min});
  rejected(OpId::kCast, {x}, {(int64_t{1} << 32) + 0});  // f32 in the low bits, not a dtype
  rejected(OpId::kCast, {x}, {});
  rejected(OpId::kCast, {x}, {0, 0});
  CHECK(mentions(rejected(OpId::kCast, {tt(DType::kI8, {4})}, {0}), "operand"));
  rejected(OpId::kCast, {x, x}, {0});
}

TEST_CASE("cast: plan and kernel key") {
  OpPlan plan = plan_of(OpId::kCast, {tt(DType::kF16, {3, 5})}, {static_cast<int64_t>(DType::kI64)});
  const CastPlan& p = plan.as<CastPlan>();
  CHECK(p.n == 15);
  CHECK(p.from == static_cast<int32_t>(DType::kF16));
  CHECK(p.to == static_cast<int32_t>(DType::kI64));
  OpPlan back = plan_of(OpId::kCast, {tt(DType::kBool, {7})}, {static_cast<int64_t>(DType::kU8)});
  CHECK(back.as<CastPlan>().n == 7);
  CHECK(back.as<CastPlan>().from == static_cast<int32_t>(DType::kBool));
  CHECK(back.as<CastPlan>().to == static_cast<int32_t>(DType::kU8));
  CHECK(plan_of(OpId::kCast, {tt(DType::kI32, {0, 4})}, {0}).as<CastPlan>().n == 0);
  const std::vector<TensorType> in{tt(DType::kU8, {2})}, out{tt(DType::kF16, {2})};
  const KernelKey key = kernel_key(OpId::kCast, in, out);
  CHECK(key.op == OpId::kCast);
  CHECK(key.input == DType::kU8);
  CHECK(key.output == DType::kF16);
  // the stated output must be the target dtype
  CHECK_FALSE(plan_op(OpId::kCast, in, std::vector{tt(DType::kF32, {2})}, Params{1}).ok());
}

// ---- where ----------------------------------------------------------------------

TEST_CASE("where: attribute lowering") {
  const std::vector<TensorType> in{tt(DType::kBool, {3}), tt(DType::kF32, {3}), tt(DType::kF32, {3})};
  auto p = lower(OpId::kWhere, in, {});
  REQUIRE(p.ok());
  CHECK(p->empty());
  auto e = lower(OpId::kWhere, in, {{"axis", i(0)}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'axis'"));
  CHECK_FALSE(lower(OpId::kWhere, {in[0], in[1]}, {}).ok());
}

TEST_CASE("where: result types broadcast all three") {
  auto r = infer_result_type(
      OpId::kWhere,
      std::vector{tt(DType::kBool, {2, 1, 1}), tt(DType::kI64, {1, 3, 1}), tt(DType::kI64, {4})}, Params{});
  REQUIRE(r.ok());
  CHECK(*r == tt(DType::kI64, {2, 3, 4}));
  // the condition alone can widen the result
  r = infer_result_type(OpId::kWhere,
                        std::vector{tt(DType::kBool, {5, 1, 3}), tt(DType::kU8, {}), tt(DType::kU8, {3})},
                        Params{});
  REQUIRE(r.ok());
  CHECK(*r == tt(DType::kU8, {5, 1, 3}));
  r = infer_result_type(
      OpId::kWhere, std::vector{tt(DType::kBool, {}), tt(DType::kF16, {}), tt(DType::kF16, {})}, Params{});
  REQUIRE(r.ok());
  CHECK(*r == tt(DType::kF16, {}));
  r = infer_result_type(
      OpId::kWhere, std::vector{tt(DType::kBool, {0, 1}), tt(DType::kBool, {1, 3}), tt(DType::kBool, {1})},
      Params{});
  REQUIRE(r.ok());
  CHECK(*r == tt(DType::kBool, {0, 3}));

  CHECK(
      mentions(rejected(OpId::kWhere, {tt(DType::kF32, {3}), tt(DType::kF32, {3}), tt(DType::kF32, {3})}, {}),
               "expected bool"));
  rejected(OpId::kWhere, {tt(DType::kU8, {3}), tt(DType::kF32, {3}), tt(DType::kF32, {3})}, {});
  CHECK(mentions(
      rejected(OpId::kWhere, {tt(DType::kBool, {3}), tt(DType::kF32, {3}), tt(DType::kF16, {3})}, {}),
      "one dtype"));
  CHECK(mentions(
      rejected(OpId::kWhere, {tt(DType::kBool, {3}), tt(DType::kF32, {2, 3}), tt(DType::kF32, {4, 3})}, {}),
      "do not broadcast"));
  // x and y broadcast, the condition does not
  rejected(OpId::kWhere, {tt(DType::kBool, {4}), tt(DType::kF32, {2, 3}), tt(DType::kF32, {1, 3})}, {});
  rejected(OpId::kWhere, {tt(DType::kBool, {3}), tt(DType::kF32, {3}), tt(DType::kF32, {3})}, {0});
}

TEST_CASE("where: plan") {
  // equal shapes: rank 0, one flat loop
  OpPlan flat =
      plan_of(OpId::kWhere, {tt(DType::kBool, {4, 6}), tt(DType::kF32, {4, 6}), tt(DType::kF32, {4, 6})}, {});
  CHECK(flat.as<WherePlan>().rank == 0);
  CHECK(flat.as<WherePlan>().n == 24);
  CHECK(flat.as<WherePlan>().element_size == 4);
  OpPlan flat_i64 =
      plan_of(OpId::kWhere, {tt(DType::kBool, {5}), tt(DType::kI64, {5}), tt(DType::kI64, {5})}, {});
  CHECK(flat_i64.as<WherePlan>().rank == 0);
  CHECK(flat_i64.as<WherePlan>().element_size == 8);

  // cond [2,1], x [2,3], y [3] (f16): out [2,3]
  OpPlan plan =
      plan_of(OpId::kWhere, {tt(DType::kBool, {2, 1}), tt(DType::kF16, {2, 3}), tt(DType::kF16, {3})}, {});
  const WherePlan& p = plan.as<WherePlan>();
  CHECK(p.n == 6);
  CHECK(p.element_size == 2);
  REQUIRE(p.rank == 2);
  CHECK(p.dims[0] == 2);
  CHECK(p.dims[1] == 3);
  CHECK(p.stride_c[0] == 1);
  CHECK(p.stride_c[1] == 0);
  CHECK(p.stride_x[0] == 3);
  CHECK(p.stride_x[1] == 1);
  CHECK(p.stride_y[0] == 0);
  CHECK(p.stride_y[1] == 1);

  // each element the plan addresses must be the one numpy broadcasting picks:
  // cond [2,1,4], x [3,1], y [1,3,4] (u8) -> out [2,3,4]
  const std::vector<TensorType> in{tt(DType::kBool, {2, 1, 4}), tt(DType::kU8, {3, 1}),
                                   tt(DType::kU8, {1, 3, 4})};
  OpPlan g = plan_of(OpId::kWhere, in, {});
  const WherePlan& w = g.as<WherePlan>();
  CHECK(w.n == 24);
  CHECK(w.element_size == 1);
  REQUIRE(w.rank >= 1);
  REQUIRE(w.rank <= 3);
  int64_t count = 1;
  for (int d = 0; d < w.rank; ++d) count *= w.dims[d];
  REQUIRE(count == 24);
  int64_t index[kMaxRank] = {};
  for (int64_t flat_i = 0; flat_i < 24; ++flat_i) {
    int64_t rem = flat_i;
    for (int d = w.rank; d-- > 0;) {
      index[d] = rem % w.dims[d];
      rem /= w.dims[d];
    }
    int64_t oc = 0, ox = 0, oy = 0;
    for (int d = 0; d < w.rank; ++d) {
      oc += index[d] * w.stride_c[d];
      ox += index[d] * w.stride_x[d];
      oy += index[d] * w.stride_y[d];
    }
    const int64_t a = flat_i / 12, b = (flat_i / 4) % 3, c = flat_i % 4;
    INFO("element " << flat_i);
    CHECK(oc == a * 4 + c);
    CHECK(ox == b);
    CHECK(oy == b * 4 + c);
  }
  CHECK(kernel_key(OpId::kWhere, in, std::vector{tt(DType::kU8, {2, 3, 4})}).input == DType::kU8);
}

// ---- gather ---------------------------------------------------------------------

TEST_CASE("gather: attribute lowering") {
  const std::vector<TensorType> in{tt(DType::kF32, {5, 4, 3}), tt(DType::kI32, {2})};
  CHECK(*lower(OpId::kGather, in, {}) == Params{0});
  CHECK(*lower(OpId::kGather, in, {{"axis", i(-1)}}) == Params{2});
  CHECK(*lower(OpId::kGather, in, {{"axis", i(1)}}) == Params{1});
  auto e = lower(OpId::kGather, in, {{"axis", i(3)}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "axis 3"));
  e = lower(OpId::kGather, in, {{"axis", i(-4)}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "axis -4"));
  e = lower(OpId::kGather, in, {{"axis", list({0, 1})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'axis'"));
  e = lower(OpId::kGather, in, {{"dim", i(0)}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'dim'"));
  CHECK_FALSE(lower(OpId::kGather, {tt(DType::kF32, {}), tt(DType::kI32, {})}, {}).ok());  // rank 0 data
}

TEST_CASE("gather: result types") {
  const TensorType data = tt(DType::kF16, {5, 4, 3});
  auto r = infer_result_type(OpId::kGather, std::vector{data, tt(DType::kI64, {2, 6})}, Params{1});
  REQUIRE(r.ok());
  CHECK(*r == tt(DType::kF16, {5, 2, 6, 3}));
  r = infer_result_type(OpId::kGather, std::vector{data, tt(DType::kI32, {})}, Params{0});
  REQUIRE(r.ok());
  CHECK(*r == tt(DType::kF16, {4, 3}));
  r = infer_result_type(OpId::kGather, std::vector{data, tt(DType::kI32, {7})}, Params{2});
  REQUIRE(r.ok());
  CHECK(*r == tt(DType::kF16, {5, 4, 7}));
  r = infer_result_type(OpId::kGather, std::vector{data, tt(DType::kI32, {0})}, Params{0});
  REQUIRE(r.ok());
  CHECK(*r == tt(DType::kF16, {0, 4, 3}));
  // gathering nothing from an empty axis is fine
  r = infer_result_type(OpId::kGather, std::vector{tt(DType::kU8, {2, 0}), tt(DType::kI32, {0})}, Params{1});
  REQUIRE(r.ok());
  CHECK(*r == tt(DType::kU8, {2, 0}));

  CHECK(mentions(rejected(OpId::kGather, {tt(DType::kF32, {3, 0, 2}), tt(DType::kI64, {1})}, {1}),
                 "empty axis"));
  rejected(OpId::kGather, {tt(DType::kF32, {0}), tt(DType::kI32, {})}, {0});  // a scalar index is one index
  CHECK(mentions(rejected(OpId::kGather, {data, tt(DType::kF32, {2})}, {0}), "i32 or i64"));
  rejected(OpId::kGather, {data, tt(DType::kU8, {2})}, {0});
  rejected(OpId::kGather, {data, tt(DType::kBool, {2})}, {0});
  rejected(OpId::kGather, {data, tt(DType::kI32, {2})}, {-1});
  rejected(OpId::kGather, {data, tt(DType::kI32, {2})}, {3});
  rejected(OpId::kGather, {data, tt(DType::kI32, {2})}, {kI64Max});
  rejected(OpId::kGather, {data, tt(DType::kI32, {2})}, {kI64Min});
  rejected(OpId::kGather, {data, tt(DType::kI32, {2})}, {});
  rejected(OpId::kGather, {data, tt(DType::kI32, {2})}, {0, 1});
  rejected(OpId::kGather, {tt(DType::kF32, {}), tt(DType::kI32, {})}, {0});
  // result rank past kMaxRank
  rejected(OpId::kGather, {tt(DType::kF32, {2, 1, 1, 1, 1, 1, 1, 1}), tt(DType::kI32, {1, 1})}, {0});
  // a result too large to address
  rejected(OpId::kGather, {tt(DType::kF32, {4, 1ll << 30}), tt(DType::kI32, {1ll << 20, 1ll << 20})}, {0});
}

TEST_CASE("gather: plan") {
  OpPlan plan = plan_of(OpId::kGather, {tt(DType::kF16, {5, 4, 3}), tt(DType::kI64, {2, 6})}, {1});
  const GatherPlan& p = plan.as<GatherPlan>();
  CHECK(p.outer == 5);
  CHECK(p.axis_dim == 4);
  CHECK(p.inner_bytes == 3 * 2);
  CHECK(p.index_count == 12);
  CHECK(p.index_i64 == 1);
  OpPlan rows = plan_of(OpId::kGather, {tt(DType::kF32, {10, 8}), tt(DType::kI32, {3})}, {0});
  CHECK(rows.as<GatherPlan>().outer == 1);
  CHECK(rows.as<GatherPlan>().axis_dim == 10);
  CHECK(rows.as<GatherPlan>().inner_bytes == 32);
  CHECK(rows.as<GatherPlan>().index_count == 3);
  CHECK(rows.as<GatherPlan>().index_i64 == 0);
  OpPlan last = plan_of(OpId::kGather, {tt(DType::kI64, {2, 3, 7}), tt(DType::kI32, {})}, {2});
  CHECK(last.as<GatherPlan>().outer == 6);
  CHECK(last.as<GatherPlan>().axis_dim == 7);
  CHECK(last.as<GatherPlan>().inner_bytes == 8);
  CHECK(last.as<GatherPlan>().index_count == 1);
}

// ---- slice ----------------------------------------------------------------------

TEST_CASE("slice: attribute lowering follows ONNX Slice") {
  const std::vector<TensorType> x{tt(DType::kF32, {10, 8})};
  // defaults: axes 0.., steps 1, untouched dims whole
  CHECK(*lower(OpId::kSlice, x, {{"starts", list({2})}, {"ends", list({7})}}) == Params{2, 1, 5, 0, 1, 8});
  CHECK(*lower(OpId::kSlice, x, {}) == Params{0, 1, 10, 0, 1, 8});
  // negative starts and ends count from the end; a negative axis
  CHECK(*lower(OpId::kSlice, x, {{"starts", list({-3})}, {"ends", list({-1})}, {"axes", list({-1})}}) ==
        Params{0, 1, 10, 5, 1, 2});
  // ends past the dim are clamped (INT64_MAX: to the end)
  CHECK(*lower(OpId::kSlice, x,
               {{"starts", list({1, 3})}, {"ends", list({kI64Max, 100})}, {"steps", list({3, 2})}}) ==
        Params{1, 3, 3, 3, 2, 3});
  // negative step from the end to the very start (ends INT64_MIN)
  CHECK(*lower(OpId::kSlice, x, {{"starts", list({-1})}, {"ends", list({kI64Min})}, {"steps", list({-1})}}) ==
        Params{9, -1, 10, 0, 1, 8});
  // negative step with a start past the end is clamped to dim - 1
  CHECK(*lower(
            OpId::kSlice, x,
            {{"starts", list({kI64Max})}, {"ends", list({2})}, {"axes", list({1})}, {"steps", list({-2})}}) ==
        Params{0, 1, 10, 7, -2, 3});
  // ONNX clamps a negative-step start to [0, dim-1]: -100 becomes 0 and yields element 0
  CHECK(*lower(OpId::kSlice, x, {{"starts", list({-100})}, {"ends", list({-100})}, {"steps", list({-1})}}) ==
        Params{0, -1, 1, 0, 1, 8});
  // empty results: start 0 size 0
  CHECK(*lower(OpId::kSlice, x, {{"starts", list({5})}, {"ends", list({2})}}) == Params{0, 1, 0, 0, 1, 8});
  CHECK(*lower(OpId::kSlice, x, {{"starts", list({2})}, {"ends", list({5})}, {"steps", list({-1})}}) ==
        Params{0, -1, 0, 0, 1, 8});
  CHECK(*lower(OpId::kSlice, x, {{"starts", list({100})}, {"ends", list({200})}}) ==
        Params{0, 1, 0, 0, 1, 8});
  // a huge step takes one element
  CHECK(*lower(OpId::kSlice, x,
               {{"starts", list({4})}, {"ends", list({kI64Max})}, {"steps", list({1ll << 62})}}) ==
        Params{4, 1ll << 62, 1, 0, 1, 8});
  // every lowering above is accepted by the rule
  for (const Params& p :
       {Params{2, 1, 5, 0, 1, 8}, Params{9, -1, 10, 0, 1, 8}, Params{0, 1, 10, 7, -2, 3},
        Params{0, -1, 1, 0, 1, 8}, Params{4, 1ll << 62, 1, 0, 1, 8}, Params{0, -1, 0, 0, 1, 8}})
    CHECK(rule(OpId::kSlice, x, p).ok());

  // errors name the attribute
  auto e = lower(OpId::kSlice, x, {{"starts", list({1, 2})}, {"ends", list({3})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'starts'"));
  e = lower(OpId::kSlice, x, {{"starts", list({1})}, {"ends", list({3})}, {"steps", list({0})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "step 0"));
  e = lower(OpId::kSlice, x, {{"starts", list({1})}, {"ends", list({3})}, {"steps", list({kI64Min})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "step"));
  e = lower(OpId::kSlice, x, {{"starts", list({1})}, {"ends", list({3})}, {"steps", list({kI64Max})}});
  REQUIRE_FALSE(e.ok());
  e = lower(OpId::kSlice, x,
            {{"starts", list({1})}, {"ends", list({3})}, {"steps", list({(1ll << 62) + 1})}});
  REQUIRE_FALSE(e.ok());
  e = lower(OpId::kSlice, x, {{"starts", list({1, 1})}, {"ends", list({3, 3})}, {"axes", list({1, -1})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "twice"));
  e = lower(OpId::kSlice, x, {{"starts", list({1})}, {"ends", list({3})}, {"axes", list({2})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "axis 2"));
  e = lower(OpId::kSlice, x, {{"starts", list({1})}, {"ends", list({3})}, {"axes", list({0, 1})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "one length"));
  e = lower(OpId::kSlice, x, {{"starts", list({1})}, {"ends", list({3})}, {"steps", list({1, 1})}});
  REQUIRE_FALSE(e.ok());
  e = lower(OpId::kSlice, x, {{"starts", str("1")}, {"ends", list({3})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'starts'"));
  e = lower(OpId::kSlice, x, {{"starts", list({1})}, {"ends", list({3})}, {"stride", list({1})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'stride'"));
  // more starts than the rank
  CHECK_FALSE(lower(OpId::kSlice, x, {{"starts", list({0, 0, 0})}, {"ends", list({1, 1, 1})}}).ok());
}

TEST_CASE("slice: an empty dim sliced backwards lowers to an empty result") {
  const std::vector<TensorType> x{tt(DType::kI32, {0, 4})};
  for (int64_t start : {int64_t{0}, int64_t{-1}, int64_t{5}, kI64Max, kI64Min}) {
    INFO("start " << start);
    auto p =
        lower(OpId::kSlice, x, {{"starts", list({start})}, {"ends", list({kI64Min})}, {"steps", list({-1})}});
    REQUIRE(p.ok());
    CHECK((*p)[2] == 0);
    auto r = infer_result_type(OpId::kSlice, x, *p);
    REQUIRE(r.ok());
    CHECK(r->dims == Dims{0, 4});
  }
}

TEST_CASE("slice: result types reject every word that reaches out of range") {
  const TensorType x = tt(DType::kU8, {8, 5});
  auto r = infer_result_type(OpId::kSlice, std::vector{x}, Params{1, 3, 3, 4, -2, 3});
  REQUIRE(r.ok());
  CHECK(*r == tt(DType::kU8, {3, 3}));
  r = infer_result_type(OpId::kSlice, std::vector{x}, Params{0, 1, 0, 0, 1, 5});
  REQUIRE(r.ok());
  CHECK(r->dims == Dims{0, 5});
  r = infer_result_type(OpId::kSlice, std::vector{tt(DType::kF32, {})}, Params{});
  REQUIRE(r.ok());
  CHECK(r->dims.empty());
  // the last index exactly at the edge
  CHECK(rule(OpId::kSlice, {x}, {1, 3, 3, 0, 1, 5}).ok());    // 1, 4, 7
  CHECK(rule(OpId::kSlice, {x}, {7, -1, 8, 4, -4, 2}).ok());  // 7..0; 4, 0

  CHECK(mentions(rejected(OpId::kSlice, {x}, {0, 1, 8}), "parameter word"));  // count
  rejected(OpId::kSlice, {x}, {0, 1, 8, 0, 1, 5, 0});
  rejected(OpId::kSlice, {x}, {});
  CHECK(mentions(rejected(OpId::kSlice, {x}, {0, 0, 1, 0, 1, 5}), "step 0"));
  rejected(OpId::kSlice, {x}, {0, 0, 0, 0, 1, 5});        // zero step, even for size 0
  rejected(OpId::kSlice, {x}, {7, kI64Min, 1, 0, 1, 5});  // INT64_MIN step
  rejected(OpId::kSlice, {x}, {7, kI64Min, 0, 0, 1, 5});
  rejected(OpId::kSlice, {x}, {0, kI64Max, 1, 0, 1, 5});
  rejected(OpId::kSlice, {x}, {0, 1, -1, 0, 1, 5});  // negative size
  rejected(OpId::kSlice, {x}, {0, 1, kI64Min, 0, 1, 5});
  rejected(OpId::kSlice, {x}, {0, 1, 9, 0, 1, 5});  // size past the dim
  rejected(OpId::kSlice, {x}, {0, 1, kI64Max, 0, 1, 5});
  rejected(OpId::kSlice, {x}, {8, 1, 1, 0, 1, 5});   // start == dim
  rejected(OpId::kSlice, {x}, {-1, 1, 1, 0, 1, 5});  // negative start
  rejected(OpId::kSlice, {x}, {kI64Min, 1, 1, 0, 1, 5});
  rejected(OpId::kSlice, {x}, {kI64Max, -1, 1, 0, 1, 5});
  rejected(OpId::kSlice, {x}, {2, 3, 3, 0, 1, 5});          // 2, 5, 8: last out of range
  rejected(OpId::kSlice, {x}, {2, -1, 4, 0, 1, 5});         // 2, 1, 0, -1
  rejected(OpId::kSlice, {x}, {0, 1ll << 62, 2, 0, 1, 5});  // 2^62 past the end
  rejected(OpId::kSlice, {x}, {7, -(1ll << 62), 2, 0, 1, 5});
  rejected(OpId::kSlice, {x}, {0, 1, 8, 4, 2, 3});   // second dim: 4, 6, 8
  rejected(OpId::kSlice, {x}, {0, 1, 8, 1, -1, 3});  // second dim: 1, 0, -1
  // an empty slice still has its start in range (the plan multiplies it by the dim's stride)
  rejected(OpId::kSlice, {x}, {kI64Max, 1, 0, 0, 1, 5});
  rejected(OpId::kSlice, {x}, {kI64Min, -1, 0, 0, 1, 5});
  rejected(OpId::kSlice, {x}, {0, 1, 8, -(1ll << 62), 1, 0});
  // an empty dim takes no elements at all
  rejected(OpId::kSlice, {tt(DType::kU8, {0})}, {0, 1, 1});
  CHECK(rule(OpId::kSlice, {tt(DType::kU8, {0})}, {0, 1, 0}).ok());
}

TEST_CASE("slice: plan of a negative-step slice") {
  // x i32 [4, 6]: rows 3, 2, 1, 0 and columns 5, 3, 1
  OpPlan plan = plan_of(OpId::kSlice, {tt(DType::kI32, {4, 6})}, {3, -1, 4, 5, -2, 3});
  const StridedPlan& p = plan.as<StridedPlan>();
  CHECK(p.n == 12);
  CHECK(p.rank == 2);
  CHECK(p.element_size == 4);
  CHECK(p.offset == 3 * 6 + 5);
  CHECK(p.out_dims[0] == 4);
  CHECK(p.out_dims[1] == 3);
  CHECK(p.in_stride[0] == -6);
  CHECK(p.in_stride[1] == -2);
  // a 3-D forward slice of f16
  OpPlan fwd = plan_of(OpId::kSlice, {tt(DType::kF16, {3, 4, 5})}, {1, 1, 2, 0, 3, 2, 4, 1, 1});
  const StridedPlan& q = fwd.as<StridedPlan>();
  CHECK(q.n == 4);
  CHECK(q.rank == 3);
  CHECK(q.element_size == 2);
  CHECK(q.offset == 1 * 20 + 0 * 5 + 4);
  CHECK(q.in_stride[0] == 20);
  CHECK(q.in_stride[1] == 15);
  CHECK(q.in_stride[2] == 0);  // one element taken: its step never matters (and cannot overflow)
  CHECK(q.out_dims[0] == 2);
  CHECK(q.out_dims[1] == 2);
  CHECK(q.out_dims[2] == 1);
  CHECK(workspace_bytes(OpId::kSlice, std::vector{tt(DType::kI32, {4, 6})}, Params{3, -1, 4, 5, -2, 3}) == 0);
}

// ---- conv2d ---------------------------------------------------------------------

TEST_CASE("conv2d: attribute lowering") {
  const std::vector<TensorType> in{f32({1, 4, 8, 8}), f32({6, 2, 3, 3})};
  // param order: stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right, dilation_h, dilation_w, groups
  CHECK(*lower(OpId::kConv2d, in, {}) == Params{1, 1, 0, 0, 0, 0, 1, 1, 1});
  CHECK(
      *lower(OpId::kConv2d, in, {{"strides", i(2)}, {"pads", i(1)}, {"dilations", i(3)}, {"groups", i(2)}}) ==
      Params{2, 2, 1, 1, 1, 1, 3, 3, 2});
  CHECK(*lower(OpId::kConv2d, in,
               {{"strides", list({2, 3})}, {"pads", list({1, 2})}, {"dilations", list({1, 2})}}) ==
        Params{2, 3, 1, 2, 1, 2, 1, 2, 1});
  CHECK(*lower(OpId::kConv2d, in, {{"pads", list({1, 2, 3, 4})}}) == Params{1, 1, 1, 2, 3, 4, 1, 1, 1});
  auto e = lower(OpId::kConv2d, in, {{"pads", list({1, 2, 3})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'pads'"));
  e = lower(OpId::kConv2d, in, {{"pads", list({1, 2, 3, 4, 5})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'pads'"));
  e = lower(OpId::kConv2d, in, {{"strides", list({1, 2, 3})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'strides'"));
  e = lower(OpId::kConv2d, in, {{"dilations", list({1, 1, 1})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'dilations'"));
  e = lower(OpId::kConv2d, in, {{"groups", str("2")}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'groups'"));
  e = lower(OpId::kConv2d, in, {{"strides", str("2")}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'strides'"));
  e = lower(OpId::kConv2d, in, {{"kernel_shape", list({3, 3})}});
  REQUIRE_FALSE(e.ok());
  CHECK(mentions(e.status(), "'kernel_shape'"));
  CHECK_FALSE(lower(OpId::kConv2d, {f32({1, 4, 8, 8})}, {}).ok());  // operand count
  // Float operands of one dtype (f16 and bf16 run through the f32 kernels, ops/widen.h).
  CHECK(lower(OpId::kConv2d, {tt(DType::kF16, {1, 4, 8, 8}), tt(DType::kF16, {6, 2, 3, 3})}, {}).ok());
  CHECK_FALSE(lower(OpId::kConv2d, {tt(DType::kF16, {1, 4, 8, 8}), f32({6, 2, 3, 3})}, {}).ok());
  CHECK_FALSE(lower(OpId::kConv2d, {tt(DType::kI32, {1, 4, 8, 8}), tt(DType::kI32, {6, 2, 3, 3})}, {}).ok());
}

TEST_CASE("conv2d: result types") {
  auto shape = [](std::vector<TensorType> in, Params p) -> Dims {
    auto r = infer_result_type(OpId::kConv2d, in, p);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    CHECK(r->dtype == DType::kF32);
    return r->dims;
  };
  CHECK(shape({f32({2, 3, 8, 8}), f32({4, 3, 3, 3})}, {1, 1, 1, 1, 1, 1, 1, 1, 1}) == Dims{2, 4, 8, 8});
  CHECK(shape({f32({2, 3, 8, 8}), f32({4, 3, 3, 3})}, {1, 1, 0, 0, 0, 0, 1, 1, 1}) == Dims{2, 4, 6, 6});
  // stride 2x3 with asymmetric pads: h (9+1+2-3)/2+1 = 5, w (7+0+1-3)/3+1 = 2
  CHECK(shape({f32({1, 2, 9, 7}), f32({3, 2, 3, 3})}, {2, 3, 1, 0, 2, 1, 1, 1, 1}) == Dims{1, 3, 5, 2});
  // dilation 2: a 5-wide window
  CHECK(shape({f32({1, 2, 10, 10}), f32({2, 2, 3, 3})}, {1, 1, 0, 0, 0, 0, 2, 2, 1}) == Dims{1, 2, 6, 6});
  // groups and depthwise, with a bias
  CHECK(shape({f32({2, 4, 6, 6}), f32({6, 2, 3, 3}), f32({6})}, {1, 1, 1, 1, 1, 1, 1, 1, 2}) ==
        Dims{2, 6, 6, 6});
  CHECK(shape({f32({1, 5, 7, 7}), f32({5, 1, 3, 3}), f32({5})}, {1, 1, 1, 1, 1, 1, 1, 1, 5}) ==
        Dims{1, 5, 7, 7});
  // the window exactly fits; padding alone makes room
  CHECK(shape({f32({1, 1, 3, 3}), f32({1, 1, 3, 3})}, {1, 1, 0, 0, 0, 0, 1, 1, 1}) == Dims{1, 1, 1, 1});
  CHECK(shape({f32({1, 1, 1, 1}), f32({1, 1, 3, 3})}, {1, 1, 1, 1, 1, 1, 1, 1, 1}) == Dims{1, 1, 1, 1});
  CHECK(shape({f32({0, 2, 4, 4}), f32({3, 2, 1, 1})}, {1, 1, 0, 0, 0, 0, 1, 1, 1}) == Dims{0, 3, 4, 4});

  const std::vector<TensorType> in{f32({1, 4, 8, 8}), f32({6, 2, 3, 3})};
  const Params ok_params{1, 1, 0, 0, 0, 0, 1, 1, 2};
  CHECK(rule(OpId::kConv2d, in, ok_params).ok());
  auto with = [&](int word, int64_t value) {
    Params p = ok_params;
    p[static_cast<size_t>(word)] = value;
    return p;
  };
  // strides and dilations 1..2^30, pads 0..2^30
  for (int word : {0, 1, 6, 7})
    for (int64_t bad : {int64_t{0}, int64_t{-1}, (int64_t{1} << 30) + 1, kI64Max, kI64Min}) {
      INFO("word " << word << " = " << bad);
      CHECK(mentions(rejected(OpId::kConv2d, in, with(word, bad)), "strides and dilations"));
    }
  for (int word : {2, 3, 4, 5})
    for (int64_t bad : {int64_t{-1}, (int64_t{1} << 30) + 1, kI64Max, kI64Min}) {
      INFO("word " << word << " = " << bad);
      CHECK(mentions(rejected(OpId::kConv2d, in, with(word, bad)), "pads"));
    }
  // groups that do not divide, or do not match the weights
  for (int64_t bad : {int64_t{0}, int64_t{-2}, int64_t{3}, int64_t{4}, int64_t{1}, kI64Max, kI64Min}) {
    INFO("groups " << bad);
    rejected(OpId::kConv2d, in, with(8, bad));
  }
  CHECK(mentions(rejected(OpId::kConv2d, in, with(8, 3)), "groups 3"));
  CHECK(mentions(rejected(OpId::kConv2d, in, with(8, 1)), "channels per group"));
  // groups divides the input channels but not the output channels
  rejected(OpId::kConv2d, {f32({1, 4, 8, 8}), f32({5, 1, 3, 3})}, with(8, 4));
  rejected(OpId::kConv2d, {f32({1, 0, 4, 4}), f32({0, 2, 1, 1})}, {1, 1, 0, 0, 0, 0, 1, 1, kI64Max});
}

TEST_CASE("conv2d: hostile groups on an input without channels are rejected") {
  // No channels divide by any groups; the rule must still check that the
  // weights' channels per group times groups is the input's channel count
  // (4 * 2^62 wraps to 0 in int64) and that groups is not beyond the channels
  // (the cpu kernel loops once per group).
  rejected(OpId::kConv2d, {f32({1, 0, 4, 4}), f32({0, 4, 1, 1})}, {1, 1, 0, 0, 0, 0, 1, 1, 1ll << 62});
  rejected(OpId::kConv2d, {f32({1, 0, 4, 4}), f32({0, 1ll << 32, 1, 1})},
           {1, 1, 0, 0, 0, 0, 1, 1, 1ll << 32});
  rejected(OpId::kConv2d, {f32({1, 0, 4, 4}), f32({0, 0, 1, 1})}, {1, 1, 0, 0, 0, 0, 1, 1, kI64Max});
  // groups up to the channel count stay valid
  CHECK(rule(OpId::kConv2d, {f32({1, 4, 4, 4}), f32({4, 1, 1, 1})}, {1, 1, 0, 0, 0, 0, 1, 1, 4}).ok());
}

TEST_CASE("conv2d: channels-last (the layout word) and a residual input") {
  auto shape = [](std::vector<TensorType> in, Params p) -> Dims {
    auto r = infer_result_type(OpId::kConv2d, in, p);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    return r->dims;
  };
  // x [N,H,W,C] -> [N,OH,OW,K]; the word after the 9, or after the epilogue's 3.
  CHECK(shape({f32({2, 9, 7, 3}), f32({4, 3, 3, 3})}, {2, 3, 1, 0, 2, 1, 1, 1, 1, 1}) == Dims{2, 5, 2, 4});
  CHECK(shape({f32({1, 8, 8, 6}), f32({6, 1, 3, 3}), f32({6})},
              {1, 1, 1, 1, 1, 1, 1, 1, 6, static_cast<int64_t>(Activation::kRelu), 0, 0, 1}) == Dims{1, 8, 8, 6});
  CHECK(conv2d_channels_last(Params{1, 1, 0, 0, 0, 0, 1, 1, 1, 1}));
  CHECK_FALSE(conv2d_channels_last(Params{1, 1, 0, 0, 0, 0, 1, 1, 1}));
  CHECK_FALSE(conv2d_channels_last(Params{1, 1, 0, 0, 0, 0, 1, 1, 1, static_cast<int64_t>(Activation::kRelu), 0, 0}));
  // Layout word 2: channels-last by Winograd's F(2x2, 3x3), only for a 3x3 at stride 1, dilation 1, one group.
  CHECK(conv2d_winograd(Params{1, 1, 1, 1, 1, 1, 1, 1, 1, 2}));
  CHECK(conv2d_channels_last(Params{1, 1, 1, 1, 1, 1, 1, 1, 1, 2}));
  CHECK_FALSE(conv2d_winograd(Params{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
  CHECK(shape({f32({1, 8, 6, 4}), f32({5, 4, 3, 3})}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 2}) == Dims{1, 8, 6, 5});
  CHECK(conv2d_winograd_tile(Params{1, 1, 1, 1, 1, 1, 1, 1, 1, 2}) == 2);
  // Layout word 3: by F(4x4, 3x3), under the same conditions.
  CHECK(conv2d_winograd(Params{1, 1, 1, 1, 1, 1, 1, 1, 1, 3}));
  CHECK(conv2d_winograd_tile(Params{1, 1, 1, 1, 1, 1, 1, 1, 1, 3}) == 4);
  CHECK(conv2d_winograd_tile(Params{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}) == 0);
  CHECK(shape({f32({1, 9, 6, 4}), f32({5, 4, 3, 3})}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 3}) == Dims{1, 9, 6, 5});
  for (const Params& p : {Params{2, 2, 1, 1, 1, 1, 1, 1, 1, 2}, Params{1, 1, 2, 2, 2, 2, 2, 2, 1, 2},
                          Params{1, 1, 1, 1, 1, 1, 1, 1, 2, 2}, Params{2, 2, 1, 1, 1, 1, 1, 1, 1, 3},
                          Params{1, 1, 1, 1, 1, 1, 1, 1, 2, 3}}) {
    const auto r = rule(OpId::kConv2d, {f32({1, 8, 8, 4}), f32({4, 4 / p[8], 3, 3})}, p);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("winograd") != std::string::npos);
  }
  CHECK_FALSE(rule(OpId::kConv2d, {f32({1, 8, 8, 3}), f32({4, 3, 5, 5})}, {1, 1, 2, 2, 2, 2, 1, 1, 1, 2}).ok());
  // A layout word other than 1, 2 or 3, channels that do not match, 11 words: refused.
  CHECK_FALSE(rule(OpId::kConv2d, {f32({1, 8, 8, 3}), f32({4, 3, 3, 3})}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 4}).ok());
  CHECK_FALSE(rule(OpId::kConv2d, {f32({1, 3, 8, 8}), f32({4, 3, 3, 3})}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}).ok());
  CHECK_FALSE(rule(OpId::kConv2d, {f32({1, 8, 8, 3}), f32({4, 3, 3, 3})}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1}).ok());
  // The residual has the result's type, in either layout.
  CHECK(rule(OpId::kConv2d, {f32({1, 3, 8, 8}), f32({4, 3, 3, 3}), f32({4}), f32({1, 4, 8, 8})},
             {1, 1, 1, 1, 1, 1, 1, 1, 1})
            .ok());
  CHECK(rule(OpId::kConv2d, {f32({1, 8, 8, 3}), f32({4, 3, 3, 3}), f32({4}), f32({1, 8, 8, 4})},
             {1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
            .ok());
  CHECK_FALSE(rule(OpId::kConv2d, {f32({1, 3, 8, 8}), f32({4, 3, 3, 3}), f32({4}), f32({1, 4, 8, 7})},
                   {1, 1, 1, 1, 1, 1, 1, 1, 1})
                  .ok());
  CHECK_FALSE(rule(OpId::kConv2d, {f32({1, 3, 8, 8}), f32({4, 3, 3, 3}), f32({4}), f32({1, 8, 8, 4})},
                   {1, 1, 1, 1, 1, 1, 1, 1, 1})
                  .ok());
}

TEST_CASE("conv2d: a dilated window that wraps int64 does not fit a small input") {
  // 2^30 * (KH - 1) = 2^64 wraps to 0: the window would look 1 wide.
  rejected(OpId::kConv2d, {f32({1, 1, 1, 1}), f32({1, 1, (1ll << 34) + 1, 1})},
           {1, 1, 0, 0, 0, 0, 1ll << 30, 1, 1});
  rejected(OpId::kConv2d, {f32({1, 1, 1, 1}), f32({1, 1, 1, (1ll << 34) + 1})},
           {1, 1, 0, 0, 0, 0, 1, 1ll << 30, 1});
  CHECK(workspace_bytes(OpId::kConv2d, std::vector{f32({1, 1, 1, 1}), f32({1, 1, (1ll << 34) + 1, 1})},
                        Params{1, 1, 0, 0, 0, 0, 1ll << 30, 1, 1}) == 0);
}

TEST_CASE("conv2d: result types, continued") {
  const std::vector<TensorType> in{f32({1, 4, 8, 8}), f32({6, 2, 3, 3})};
  // the window does not fit the padded input
  CHECK(mentions(rejected(OpId::kConv2d, {f32({1, 1, 2, 8}), f32({1, 1, 3, 3})}, {1, 1, 0, 0, 0, 0, 1, 1, 1}),
                 "does not fit"));
  rejected(OpId::kConv2d, {f32({1, 1, 8, 8}), f32({1, 1, 3, 3})},
           {1, 1, 0, 0, 0, 0, 4, 1, 1});  // dilated: 9 > 8
  rejected(OpId::kConv2d, {f32({1, 1, 8, 8}), f32({1, 1, 3, 0})}, {1, 1, 0, 0, 0, 0, 1, 1, 1});  // zero-wide
  rejected(OpId::kConv2d, {f32({1, 1, 0, 8}), f32({1, 1, 1, 1})},
           {1, 1, 0, 0, 0, 0, 1, 1, 1});  // empty image
  // huge dilation times a huge kernel must not overflow into a fit
  rejected(OpId::kConv2d, {f32({1, 1, 4, 4}), f32({1, 1, 1ll << 40, 1})},
           {1, 1, 0, 0, 0, 0, 1ll << 30, 1, 1});
  // operands
  CHECK(mentions(rejected(OpId::kConv2d, {f32({4, 8, 8}), f32({6, 4, 3, 3})}, {1, 1, 0, 0, 0, 0, 1, 1, 1}),
                 "[N,C,H,W]"));
  rejected(OpId::kConv2d, {f32({1, 4, 8, 8}), f32({6, 4, 3})}, {1, 1, 0, 0, 0, 0, 1, 1, 1});
  CHECK(mentions(
      rejected(OpId::kConv2d, {f32({1, 4, 8, 8}), f32({6, 4, 3, 3}), f32({5})}, {1, 1, 0, 0, 0, 0, 1, 1, 1}),
      "bias"));
  rejected(OpId::kConv2d, {f32({1, 4, 8, 8}), f32({6, 4, 3, 3}), f32({6, 1})}, {1, 1, 0, 0, 0, 0, 1, 1, 1});
  rejected(OpId::kConv2d, {f32({1, 4, 8, 8}), f32({6, 4, 3, 3}), f32({})}, {1, 1, 0, 0, 0, 0, 1, 1, 1});
  rejected(OpId::kConv2d, {f32({1, 4, 8, 8}), tt(DType::kI32, {6, 4, 3, 3})}, {1, 1, 0, 0, 0, 0, 1, 1, 1});
  // parameter count
  rejected(OpId::kConv2d, in, {1, 1, 0, 0, 0, 0, 1, 1});
  rejected(OpId::kConv2d, in, {1, 1, 0, 0, 0, 0, 1, 1, 2, 0});
  rejected(OpId::kConv2d, in, {});
  // a patch matrix too large to address (C/g * KH * KW * OH * OW past 2^60)
  rejected(OpId::kConv2d, {f32({1, 1ll << 20, 1ll << 10, 1ll << 10}), f32({1, 1ll << 20, 1, 1})},
           {1, 1, 1ll << 30, 1ll << 30, 1ll << 30, 1ll << 30, 1, 1, 1});
}

TEST_CASE("conv2d: plan, no workspace; plain-GEMM and depthwise forms") {
  auto conv_plan = [](std::vector<TensorType> in, Params params) {
    OpPlan plan = plan_of(OpId::kConv2d, in, params);
    const Conv2dPlan p = plan.as<Conv2dPlan>();
    CHECK(workspace_bytes(OpId::kConv2d, in, params) == 0);  // patches are packed from the image
    return p;
  };
  // 3x3, stride 2x1, asymmetric pads, dilation, groups 2, bias
  const Conv2dPlan p =
      conv_plan({f32({2, 4, 9, 8}), f32({6, 2, 3, 3}), f32({6})}, {2, 1, 1, 2, 0, 1, 1, 2, 2});
  CHECK(p.n == 2);
  CHECK(p.c == 4);
  CHECK(p.h == 9);
  CHECK(p.w == 8);
  CHECK(p.k == 6);
  CHECK(p.kh == 3);
  CHECK(p.kw == 3);
  CHECK(p.oh == (9 + 1 + 0 - 3) / 2 + 1);
  CHECK(p.ow == (8 + 2 + 1 - 5) / 1 + 1);
  CHECK(p.stride_h == 2);
  CHECK(p.stride_w == 1);
  CHECK(p.pad_top == 1);
  CHECK(p.pad_left == 2);
  CHECK(p.dilation_h == 1);
  CHECK(p.dilation_w == 2);
  CHECK(p.groups == 2);
  CHECK(p.c_per_group == 2);
  CHECK(p.k_per_group == 3);
  CHECK(p.has_bias == 1);
  CHECK_FALSE(conv2d_is_plain_gemm(p));
  CHECK_FALSE(conv2d_is_depthwise(p));

  // 1x1, stride 1, unpadded: a plain GEMM, no scratch (with or without groups, bias, dilation)
  const Conv2dPlan gemm = conv_plan({f32({3, 8, 5, 7}), f32({4, 8, 1, 1})}, {1, 1, 0, 0, 0, 0, 1, 1, 1});
  CHECK(conv2d_is_plain_gemm(gemm));
  CHECK(gemm.has_bias == 0);
  CHECK(gemm.oh == 5);
  CHECK(gemm.ow == 7);
  CHECK(conv2d_is_plain_gemm(conv_plan({f32({1, 8, 5, 7}), f32({4, 4, 1, 1}), f32({4})}, {1, 1, 0, 0, 0, 0, 1, 1, 2})));
  CHECK(conv2d_is_plain_gemm(conv_plan({f32({1, 8, 5, 7}), f32({4, 8, 1, 1})}, {1, 1, 0, 0, 0, 0, 3, 2, 1})));
  // 1x1 otherwise: patches packed from the image
  const Conv2dPlan strided = conv_plan({f32({1, 8, 5, 7}), f32({4, 8, 1, 1})}, {2, 1, 0, 0, 0, 0, 1, 1, 1});
  CHECK(strided.oh == 3);
  CHECK_FALSE(conv2d_is_plain_gemm(strided));
  CHECK_FALSE(conv2d_is_plain_gemm(conv_plan({f32({1, 8, 5, 7}), f32({4, 8, 1, 1})}, {1, 2, 0, 0, 0, 0, 1, 1, 1})));
  CHECK_FALSE(conv2d_is_plain_gemm(conv_plan({f32({1, 8, 5, 7}), f32({4, 8, 1, 1})}, {1, 1, 1, 0, 0, 0, 1, 1, 1})));
  CHECK_FALSE(conv2d_is_plain_gemm(conv_plan({f32({1, 8, 5, 7}), f32({4, 8, 1, 1})}, {1, 1, 0, 1, 0, 0, 1, 1, 1})));
  // only trailing pads: the output grows, so the image alone is not the patch matrix
  CHECK_FALSE(conv2d_is_plain_gemm(conv_plan({f32({1, 8, 5, 7}), f32({4, 8, 1, 1})}, {1, 1, 0, 0, 1, 0, 1, 1, 1})));
  CHECK_FALSE(conv2d_is_plain_gemm(conv_plan({f32({1, 8, 5, 7}), f32({4, 8, 1, 1})}, {1, 1, 0, 0, 0, 2, 1, 1, 1})));
  // 3x3 unpadded stride 1 still needs the patch matrix
  CHECK_FALSE(conv2d_is_plain_gemm(conv_plan({f32({1, 2, 5, 5}), f32({3, 2, 3, 3})}, {1, 1, 0, 0, 0, 0, 1, 1, 1})));
  // depthwise
  const Conv2dPlan dw =
      conv_plan({f32({1, 5, 7, 7}), f32({5, 1, 3, 3}), f32({5})}, {1, 1, 1, 1, 1, 1, 1, 1, 5});
  CHECK(dw.c_per_group == 1);
  CHECK(dw.k_per_group == 1);
  CHECK(conv2d_is_depthwise(dw));
  // workspace_bytes of a malformed call is 0, not a crash
  CHECK(workspace_bytes(OpId::kConv2d, std::vector{f32({1, 8, 5, 7}), f32({4, 8, 9, 9})},
                        Params{1, 1, 0, 0, 0, 0, 1, 1, 1}) == 0);
  CHECK(workspace_bytes(OpId::kConv2d, std::vector{f32({1, 8, 5, 7}), f32({4, 8, 1, 1})}, Params{}) == 0);
}

// ---- the ONNX importer's operators -----------------------------------

namespace {
AttrValue num(double v) { return {v}; }
int64_t fw(double v) { return std::bit_cast<int64_t>(v); }
double fp(int64_t w) { return std::bit_cast<double>(w); }
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

TEST_CASE("onnx unary: attribute lowering with float parameters as double bits") {
  const std::vector<TensorType> x{f32({2, 3})};
  auto leaky = lower(OpId::kLeakyRelu, x, {});
  REQUIRE(leaky.ok());
  REQUIRE(leaky->size() == 1);
  CHECK(fp((*leaky)[0]) == 0.01);
  CHECK(fp((*lower(OpId::kLeakyRelu, x, {{"alpha", num(0.25)}}))[0]) == 0.25);
  CHECK(fp((*lower(OpId::kLeakyRelu, x, {{"alpha", i(2)}}))[0]) == 2.0);  // an integer is its value
  CHECK(mentions(lower(OpId::kLeakyRelu, x, {{"alpha", num(kNaN)}}).status(), "alpha"));
  CHECK_FALSE(lower(OpId::kLeakyRelu, x, {{"alpha", num(kInf)}}).ok());
  CHECK_FALSE(lower(OpId::kLeakyRelu, x, {{"alpha", str("x")}}).ok());
  CHECK_FALSE(lower(OpId::kLeakyRelu, x, {{"beta", num(1)}}).ok());

  auto clip = lower(OpId::kClip, x, {});
  REQUIRE(clip.ok());
  CHECK(*clip == Params{fw(-kInf), fw(kInf)});
  CHECK(*lower(OpId::kClip, x, {{"min", num(-1)}, {"max", num(6)}}) == Params{fw(-1.0), fw(6.0)});
  CHECK(*lower(OpId::kClip, x, {{"max", num(6)}}) == Params{fw(-kInf), fw(6.0)});
  CHECK(*lower(OpId::kClip, x, {{"min", num(2)}, {"max", num(1)}}) == Params{fw(2.0), fw(1.0)});  // allowed
  CHECK_FALSE(lower(OpId::kClip, x, {{"min", num(kNaN)}}).ok());

  CHECK(*lower(OpId::kHardSigmoid, x, {}) == Params{fw(0.2), fw(0.5)});
  CHECK(*lower(OpId::kHardSigmoid, x, {{"alpha", num(1.0 / 6)}, {"beta", num(0.5)}}) ==
        Params{fw(1.0 / 6), fw(0.5)});
  CHECK_FALSE(lower(OpId::kHardSigmoid, x, {{"beta", num(-kInf)}}).ok());

  for (OpId id : {OpId::kHardSwish, OpId::kErf, OpId::kLog, OpId::kAbs, OpId::kReciprocal}) {
    CAPTURE(op_def(id).name);
    CHECK(lower(id, x, {})->empty());
    CHECK_FALSE(lower(id, x, {{"alpha", num(1)}}).ok());
  }
}

TEST_CASE("onnx unary: result types, hostile words, plans") {
  const std::vector<TensorType> x{f32({2, 3})};
  for (OpId id : {OpId::kLeakyRelu, OpId::kClip, OpId::kHardSigmoid, OpId::kHardSwish, OpId::kErf, OpId::kLog,
                  OpId::kReciprocal}) {
    CAPTURE(op_def(id).name);
    CHECK(op_def(id).f32_only);
    CHECK(op_def(id).may_run_in_place);
    CHECK_FALSE(rule(id, {tt(DType::kI64, {2})}, {}).ok());
  }
  CHECK(rule(OpId::kLeakyRelu, x, {fw(0.1)})->at(0) == f32({2, 3}));
  rejected(OpId::kLeakyRelu, x, {});
  rejected(OpId::kLeakyRelu, x, {fw(0.1), fw(0.1)});
  CHECK(mentions(rejected(OpId::kLeakyRelu, x, {fw(kNaN)}), "finite"));
  rejected(OpId::kLeakyRelu, x, {fw(kInf)});
  CHECK(rule(OpId::kClip, x, {fw(-kInf), fw(kInf)}).ok());
  rejected(OpId::kClip, x, {fw(kNaN), fw(1)});
  rejected(OpId::kClip, x, {fw(0), fw(-kNaN)});
  rejected(OpId::kClip, x, {fw(0)});
  rejected(OpId::kHardSigmoid, x, {fw(0.2), fw(kInf)});
  rejected(OpId::kHardSigmoid, x, {fw(0.2)});
  rejected(OpId::kHardSwish, x, {0});
  rejected(OpId::kErf, x, {1});

  const OpPlan clip_plan = plan_of(OpId::kClip, x, {fw(-1.5), fw(kInf)});
  const UnaryPlan& clip = clip_plan.as<UnaryPlan>();
  CHECK(clip.n == 6);
  CHECK(clip.a == -1.5);
  CHECK(clip.b == kInf);
  const OpPlan hs_plan = plan_of(OpId::kHardSigmoid, {f32({7})}, {fw(0.2), fw(0.5)});
  const UnaryPlan& hs = hs_plan.as<UnaryPlan>();
  CHECK(hs.n == 7);
  CHECK(hs.a == 0.2);
  CHECK(hs.b == 0.5);
  const OpPlan leaky_plan = plan_of(OpId::kLeakyRelu, {f32({})}, {fw(0.01)});
  const UnaryPlan& leaky = leaky_plan.as<UnaryPlan>();
  CHECK(leaky.n == 1);
  CHECK(leaky.a == 0.01);
  const OpPlan log_plan = plan_of(OpId::kLog, {f32({0, 3})}, {});
  const UnaryPlan& log = log_plan.as<UnaryPlan>();
  CHECK(log.n == 0);
  CHECK(log.a == 0.0);
}

TEST_CASE("pow, equal, less, greater, not: rules, kernel keys and plans") {
  CHECK(infer(OpId::kPow, {f32({4, 1}), f32({3})})->dims == Dims{4, 3});
  CHECK_FALSE(infer(OpId::kPow, {f32({2}), f32({3})}).ok());
  CHECK(infer(OpId::kPow, {tt(DType::kI64, {2}), tt(DType::kI64, {2})})->dtype == DType::kI64);
  CHECK(infer(OpId::kPow, {tt(DType::kI32, {2, 1}), tt(DType::kI32, {3})})->dims == Dims{2, 3});
  CHECK_FALSE(infer(OpId::kPow, {tt(DType::kI32, {2}), tt(DType::kI64, {2})}).ok());
  CHECK_FALSE(infer(OpId::kPow, {f32({2}), tt(DType::kI32, {2})}).ok());
  CHECK(op_def(OpId::kPow).may_run_in_place);

  for (OpId id : {OpId::kEqual, OpId::kLess, OpId::kGreater}) {
    CAPTURE(op_def(id).name);
    CHECK_FALSE(op_def(id).f32_only);
    CHECK_FALSE(op_def(id).may_run_in_place);
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64}) {
      auto r = rule(id, {tt(t, {2, 1, 4}), tt(t, {3, 1})}, {});
      REQUIRE(r.ok());
      CHECK(r->at(0) == tt(DType::kBool, {2, 3, 4}));
      CHECK(kernel_key(id, std::vector{tt(t, {2}), tt(t, {2})}, std::vector{tt(DType::kBool, {2})}).input ==
            t);
    }
    CHECK(mentions(rejected(id, {f32({2}), tt(DType::kI64, {2})}, {}), "one dtype"));
    rejected(id, {tt(DType::kBool, {2}), tt(DType::kBool, {2})}, {});
    CHECK(mentions(rejected(id, {tt(DType::kF16, {2}), tt(DType::kBF16, {2})}, {}), "one dtype"));
    CHECK(mentions(rejected(id, {f32({2}), f32({3})}, {}), "do not broadcast"));
    rejected(id, {f32({2}), f32({2})}, {0});
    CHECK_FALSE(lower(id, {f32({2}), f32({2})}, {{"axis", i(0)}}).ok());
    const OpPlan plan = plan_of(id, {tt(DType::kI64, {4, 1}), tt(DType::kI64, {1, 3, 1, 8})}, {});
    const BinaryPlan& p = plan.as<BinaryPlan>();
    CHECK(p.n == 96);
    CHECK(p.mode == 3);
    const OpPlan flat = plan_of(id, {f32({5}), f32({})}, {});
    CHECK(flat.as<BinaryPlan>().mode == 1);
  }

  CHECK(rule(OpId::kNot, {tt(DType::kBool, {3, 2})}, {})->at(0) == tt(DType::kBool, {3, 2}));
  CHECK(mentions(rejected(OpId::kNot, {f32({2})}, {}), "bool"));
  rejected(OpId::kNot, {tt(DType::kU8, {2})}, {});
  rejected(OpId::kNot, {tt(DType::kBool, {2})}, {1});
  CHECK(op_def(OpId::kNot).may_run_in_place);
  const OpPlan not_plan = plan_of(OpId::kNot, {tt(DType::kBool, {3, 5})}, {});
  CHECK(not_plan.as<UnaryPlan>().n == 15);
  for (const char* name : {"leaky_relu", "clip", "hard_sigmoid", "hard_swish", "erf", "log", "abs",
                           "reciprocal", "pow", "equal", "less", "greater", "not"})
    CHECK(find_op(name).has_value());
}

TEST_CASE("unary math and the ONNX activations: lowering, rules and plans") {
  const std::vector<TensorType> x{f32({2, 3})};
  for (OpId id : {OpId::kSin, OpId::kCos, OpId::kTan, OpId::kAsin, OpId::kAcos, OpId::kAtan, OpId::kSinh,
                  OpId::kCosh, OpId::kAsinh, OpId::kAcosh, OpId::kAtanh, OpId::kMish, OpId::kSoftsign}) {
    CAPTURE(op_def(id).name);
    CHECK(op_def(id).f32_only);
    CHECK(op_def(id).may_run_in_place);
    CHECK(elementwise_map_arity(id) == 1);
    CHECK(lower(id, x, {})->empty());
    CHECK_FALSE(lower(id, x, {{"alpha", num(1)}}).ok());
    CHECK(rule(id, x, {})->at(0) == f32({2, 3}));
    rejected(id, x, {0});
    CHECK_FALSE(rule(id, {tt(DType::kI64, {2})}, {}).ok());
  }
  // The ONNX defaults; float attributes as double bits; finite only.
  CHECK(*lower(OpId::kElu, x, {}) == Params{fw(1.0)});
  CHECK(*lower(OpId::kCelu, x, {}) == Params{fw(1.0)});
  CHECK(*lower(OpId::kThresholdedRelu, x, {}) == Params{fw(1.0)});
  CHECK(*lower(OpId::kShrink, x, {}) == Params{fw(0.5), fw(0.0)});
  CHECK(*lower(OpId::kSelu, x, {{"gamma", num(2)}}) == Params{fw(1.67326319217681884765625), fw(2.0)});
  CHECK(*lower(OpId::kShrink, x, {{"bias", num(1)}, {"lambd", num(2)}}) == Params{fw(2.0), fw(1.0)});
  CHECK(mentions(lower(OpId::kElu, x, {{"beta", num(1)}}).status(), "beta"));
  CHECK_FALSE(lower(OpId::kSelu, x, {{"alpha", num(kInf)}}).ok());
  CHECK_FALSE(lower(OpId::kShrink, x, {{"lambd", num(kNaN)}}).ok());
  rejected(OpId::kElu, x, {});
  rejected(OpId::kSelu, x, {fw(1.0)});
  rejected(OpId::kShrink, x, {fw(1.0), fw(kInf)});
  CHECK(mentions(rejected(OpId::kCelu, x, {fw(0.0)}), "alpha"));
  const OpPlan selu = plan_of(OpId::kSelu, x, {fw(1.5), fw(2.0)});
  CHECK(selu.as<UnaryPlan>().n == 6);
  CHECK(selu.as<UnaryPlan>().a == 1.5);
  CHECK(selu.as<UnaryPlan>().b == 2.0);

  // is_inf, is_nan: bool results, never in place; is_inf's flags in the plan's a, b.
  CHECK(*lower(OpId::kIsInf, x, {}) == Params{1, 1});
  CHECK(*lower(OpId::kIsInf, x, {{"detect_negative", i(0)}}) == Params{1, 0});
  CHECK(rule(OpId::kIsInf, x, {0, 1})->at(0) == tt(DType::kBool, {2, 3}));
  CHECK(rule(OpId::kIsNaN, x, {})->at(0) == tt(DType::kBool, {2, 3}));
  CHECK(mentions(rejected(OpId::kIsInf, x, {2, 0}), "0 or 1"));
  rejected(OpId::kIsInf, x, {1});
  rejected(OpId::kIsNaN, x, {1});
  CHECK_FALSE(op_def(OpId::kIsInf).may_run_in_place);
  CHECK_FALSE(op_def(OpId::kIsNaN).may_run_in_place);
  const OpPlan inf = plan_of(OpId::kIsInf, x, {0, 1});
  CHECK(inf.as<UnaryPlan>().a == 0.0);
  CHECK(inf.as<UnaryPlan>().b == 1.0);

  // prelu: numpy broadcasting, f32 only.
  CHECK(rule(OpId::kPRelu, {f32({2, 3, 4}), f32({3, 1})}, {})->at(0) == f32({2, 3, 4}));
  CHECK_FALSE(rule(OpId::kPRelu, {f32({2, 3}), f32({2})}, {}).ok());
  CHECK(elementwise_map_arity(OpId::kPRelu) == 2);
  CHECK(plan_of(OpId::kPRelu, {f32({2, 3}), f32({})}, {}).as<BinaryPlan>().mode == 1);
}

TEST_CASE("group_norm: groups divide the channels; scale and bias per channel; the plan's rows") {
  const std::vector<TensorType> in{f32({2, 6, 3, 4}), f32({6}), f32({6})};
  auto p = lower(OpId::kGroupNorm, in, {{"groups", i(3)}, {"epsilon", num(1e-3)}});
  REQUIRE(p.ok());
  CHECK(*p == Params{3, fw(1e-3)});
  CHECK(*lower(OpId::kGroupNorm, in, {}) == Params{1, fw(1e-5)});
  CHECK(rule(OpId::kGroupNorm, in, {3, fw(1e-3)})->at(0) == f32({2, 6, 3, 4}));
  CHECK(mentions(rejected(OpId::kGroupNorm, in, {4, fw(1e-3)}), "does not divide"));
  rejected(OpId::kGroupNorm, in, {0, fw(1e-3)});
  rejected(OpId::kGroupNorm, in, {3, fw(-1.0)});
  rejected(OpId::kGroupNorm, in, {3});
  CHECK(mentions(rejected(OpId::kGroupNorm, {f32({2, 6, 3, 4}), f32({3}), f32({6})}, {3, fw(1e-3)}), "scale"));
  rejected(OpId::kGroupNorm, {f32({6}), f32({6}), f32({6})}, {3, fw(1e-3)});
  const OpPlan plan = plan_of(OpId::kGroupNorm, in, {3, fw(1e-3)});
  const GroupNormPlan& g = plan.as<GroupNormPlan>();
  CHECK(g.rows == 6);
  CHECK(g.width == 24);
  CHECK(g.spatial == 12);
  CHECK(g.groups == 3);
  CHECK(g.epsilon == 1e-3);
}

TEST_CASE("integer and boolean arithmetic: rules, kernel keys and plans") {
  // The arithmetic operators take f32, i32 or i64, both operands of one dtype.
  for (OpId id : {OpId::kAdd, OpId::kSub, OpId::kMul, OpId::kDiv, OpId::kMaximum, OpId::kMinimum}) {
    CAPTURE(op_def(id).name);
    CHECK_FALSE(op_def(id).f32_only);
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64}) {
      auto r = rule(id, {tt(t, {2, 1}), tt(t, {3})}, {});
      REQUIRE(r.ok());
      CHECK(r->at(0) == tt(t, {2, 3}));
      CHECK(kernel_key(id, std::vector{tt(t, {2}), tt(t, {2})}, std::vector{tt(t, {2})}).input == t);
    }
    CHECK(mentions(rejected(id, {tt(DType::kI64, {1}), tt(DType::kI32, {1})}, {}), "one dtype"));
    CHECK(mentions(rejected(id, {tt(DType::kU8, {1}), tt(DType::kU8, {1})}, {}), "f32, f16, bf16, i32 or i64"));
    rejected(id, {tt(DType::kF16, {1}), tt(DType::kF32, {1})}, {});
    rejected(id, {tt(DType::kBool, {1}), tt(DType::kBool, {1})}, {});
  }
  // A fused epilogue is for f32 only.
  rejected(OpId::kAdd, {tt(DType::kI64, {2}), tt(DType::kI64, {2})}, {1, 0, 0});
  CHECK(rule(OpId::kAdd, {f32({2}), f32({2})}, {1, 0, 0}).ok());
  for (OpId id : {OpId::kNeg, OpId::kAbs, OpId::kSign}) {
    CAPTURE(op_def(id).name);
    CHECK_FALSE(op_def(id).f32_only);
    CHECK(op_def(id).may_run_in_place);
    for (DType t : {DType::kF32, DType::kI32, DType::kI64}) CHECK(rule(id, {tt(t, {2})}, {})->at(0) == tt(t, {2}));
    rejected(id, {tt(DType::kBool, {2})}, {});
    rejected(id, {tt(DType::kI32, {2})}, {0});
  }
  for (OpId id : {OpId::kCeil, OpId::kFloor, OpId::kRound}) {
    CAPTURE(op_def(id).name);
    CHECK(op_def(id).f32_only);
    CHECK_FALSE(rule(id, {tt(DType::kI64, {2})}, {}).ok());
  }

  // mod: [fmod]; fmod 0 on integers only.
  CHECK(*lower(OpId::kMod, {tt(DType::kI64, {2}), tt(DType::kI64, {2})}, {}) == Params{0});
  CHECK(*lower(OpId::kMod, {f32({2}), f32({2})}, {{"fmod", i(1)}}) == Params{1});
  CHECK_FALSE(lower(OpId::kMod, {f32({2}), f32({2})}, {{"axis", i(1)}}).ok());
  CHECK(rule(OpId::kMod, {tt(DType::kI32, {4, 1}), tt(DType::kI32, {3})}, {0})->at(0) == tt(DType::kI32, {4, 3}));
  CHECK(rule(OpId::kMod, {tt(DType::kI64, {2}), tt(DType::kI64, {2})}, {1}).ok());
  CHECK(rule(OpId::kMod, {f32({2}), f32({2})}, {1}).ok());
  CHECK(mentions(rejected(OpId::kMod, {f32({2}), f32({2})}, {0}), "fmod = 1"));
  rejected(OpId::kMod, {tt(DType::kI64, {2}), tt(DType::kI64, {2})}, {2});
  rejected(OpId::kMod, {tt(DType::kI64, {2}), tt(DType::kI64, {2})}, {});
  rejected(OpId::kMod, {tt(DType::kI64, {2}), tt(DType::kI32, {2})}, {0});
  CHECK(plan_of(OpId::kMod, {tt(DType::kI64, {4, 1}), tt(DType::kI64, {3})}, {1}).as<BinaryPlan>().variant == 1);
  CHECK(plan_of(OpId::kMod, {tt(DType::kI64, {4, 1}), tt(DType::kI64, {3})}, {0}).as<BinaryPlan>().variant == 0);
  CHECK(plan_of(OpId::kAdd, {tt(DType::kI64, {5}), tt(DType::kI64, {})}, {}).as<BinaryPlan>().mode == 1);

  for (OpId id : {OpId::kLessOrEqual, OpId::kGreaterOrEqual}) {
    CAPTURE(op_def(id).name);
    CHECK_FALSE(op_def(id).may_run_in_place);
    for (DType t : {DType::kF32, DType::kI32, DType::kI64})
      CHECK(rule(id, {tt(t, {2, 1}), tt(t, {3})}, {})->at(0) == tt(DType::kBool, {2, 3}));
    rejected(id, {tt(DType::kBool, {2}), tt(DType::kBool, {2})}, {});
  }
  for (OpId id : {OpId::kAnd, OpId::kOr, OpId::kXor}) {
    CAPTURE(op_def(id).name);
    CHECK(rule(id, {tt(DType::kBool, {2, 1}), tt(DType::kBool, {3})}, {})->at(0) == tt(DType::kBool, {2, 3}));
    CHECK(mentions(rejected(id, {tt(DType::kU8, {2}), tt(DType::kBool, {2})}, {}), "bool"));
    rejected(id, {tt(DType::kBool, {2}), tt(DType::kBool, {3})}, {});
    rejected(id, {tt(DType::kBool, {2}), tt(DType::kBool, {2})}, {0});
  }
  for (const char* name : {"mod", "less_or_equal", "greater_or_equal", "and", "or", "xor", "sign", "ceil", "floor",
                           "round"})
    CHECK(find_op(name).has_value());
}

TEST_CASE("reduce_max: rules and plan like reduce_sum, with the max flag") {
  CHECK(infer(OpId::kReduceMax, {f32({2, 3, 4})}, {{"axes", list({-1, 0})}})->dims == Dims{3});
  CHECK(infer(OpId::kReduceMax, {f32({2, 3, 4})}, {{"axes", list({2, 3})}}).status().message().find("axis") !=
        std::string::npos);
  CHECK(infer(OpId::kReduceMax, {f32({1, 3, 5, 5})}, {{"axes", list({2, 3})}, {"keepdims", i(1)}})->dims ==
        Dims{1, 3, 1, 1});
  rejected(OpId::kReduceMax, {f32({2, 3})}, {});
  rejected(OpId::kReduceMax, {f32({2, 3})}, {2});
  rejected(OpId::kReduceMax, {f32({2, 3})}, {0, 1, 1});
  CHECK(mentions(rejected(OpId::kReduceMax, {tt(DType::kBool, {2, 3})}, {0}), "must be f32, i32 or i64"));
  CHECK(rule(OpId::kReduceMax, {tt(DType::kI64, {2, 3})}, {0})->at(0) == tt(DType::kI64, {}));
  const OpPlan plan = plan_of(OpId::kReduceMax, {f32({2, 3, 4})}, {0, 1});
  const ReducePlan& p = plan.as<ReducePlan>();
  CHECK(p.kind == ReduceKind::kMax);
  CHECK(p.out_count == 8);
  CHECK(p.red_count == 3);
  const OpPlan sum = plan_of(OpId::kReduceSum, {f32({2, 3, 4})}, {0, 1});
  CHECK(sum.as<ReducePlan>().kind == ReduceKind::kSum);
}

TEST_CASE(
    "reduce_min and the rest of reduce_sum's family: reduce_sum's rule, their kind, integers where ONNX has "
    "them") {
  const struct {
    OpId id;
    ReduceKind kind;
    bool integers;
  } family[] = {{OpId::kReduceMin, ReduceKind::kMin, true},
                {OpId::kReduceProd, ReduceKind::kProd, true},
                {OpId::kReduceL1, ReduceKind::kL1, true},
                {OpId::kReduceL2, ReduceKind::kL2, false},
                {OpId::kReduceLogSumExp, ReduceKind::kLogSumExp, false},
                {OpId::kReduceSumSquare, ReduceKind::kSumSquare, true},
                {OpId::kReduceLogSum, ReduceKind::kLogSum, false},
                {OpId::kReduceMean, ReduceKind::kMean, false}};
  for (const auto& f : family) {
    CAPTURE(std::string(op_def(f.id).name));
    CHECK(infer(f.id, {f32({2, 3, 4})}, {{"axes", list({-1, 0})}})->dims == Dims{3});
    CHECK(infer(f.id, {f32({2, 3, 4})}, {{"axes", list({1})}, {"keepdims", i(1)}})->dims == Dims{2, 1, 4});
    rejected(f.id, {f32({2, 3})}, {});
    rejected(f.id, {f32({2, 3})}, {0, 1, 1});
    CHECK(plan_of(f.id, {f32({2, 3, 4})}, {0, 1}).as<ReducePlan>().kind == f.kind);
    for (DType t : {DType::kI32, DType::kI64}) {
      if (f.integers)
        CHECK(rule(f.id, {tt(t, {2, 3})}, {0, 1})->at(0) == tt(t, {2}));
      else
        CHECK(mentions(rejected(f.id, {tt(t, {2, 3})}, {0, 1}), "only f32"));
    }
    CHECK(mentions(rejected(f.id, {tt(DType::kBool, {2})}, {0}),
                   f.integers ? "must be f32, i32 or i64" : "only f32"));
  }
}

TEST_CASE("argmin, log_softmax, hardmax: argmax's and softmax's rules") {
  const std::vector<TensorType> x{f32({2, 3, 4})};
  CHECK(*lower(OpId::kArgMin, x, {{"axis", i(-1)}, {"keepdims", i(0)}}) == Params{2, 0, 0});
  CHECK(*rule(OpId::kArgMin, {tt(DType::kI32, {2, 3})}, {1, 1, 0}) ==
        std::vector<TensorType>{tt(DType::kI64, {2, 1})});
  CHECK(*rule(OpId::kArgMax, {tt(DType::kI64, {2, 3})}, {0, 0, 1}) ==
        std::vector<TensorType>{tt(DType::kI64, {3})});
  CHECK(mentions(rejected(OpId::kArgMin, {tt(DType::kU8, {2})}, {0, 1, 0}), "must be f32, i32 or i64"));
  CHECK(plan_of(OpId::kArgMin, x, {1, 1, 1}).as<ArgmaxPlan>().smallest == 1);
  CHECK(plan_of(OpId::kArgMax, x, {1, 1, 1}).as<ArgmaxPlan>().smallest == 0);
  for (OpId id : {OpId::kLogSoftmax, OpId::kHardmax}) {
    CAPTURE(op_def(id).name);
    CHECK(*lower(id, x, {}) == Params{2});
    CHECK(*rule(id, x, {1}) == x);
    rejected(id, x, {3});
    rejected(id, {tt(DType::kI32, {2})}, {0});
  }
  const OpPlan hardmax = plan_of(OpId::kHardmax, x, {1});
  const ArgmaxPlan& h = hardmax.as<ArgmaxPlan>();
  CHECK((h.outer == 2 && h.length == 3 && h.inner == 4 && h.select_last == 0 && h.smallest == 0));
  const OpPlan log_softmax = plan_of(OpId::kLogSoftmax, x, {0});
  const SoftmaxPlan& l = log_softmax.as<SoftmaxPlan>();
  CHECK((l.outer == 1 && l.length == 2 && l.inner == 12));
}

TEST_CASE("top_k: two results (values, i64 indices), k within the axis") {
  const std::vector<TensorType> x{f32({3, 5})};
  CHECK(*lower(OpId::kTopK, x, {{"k", i(2)}}) == Params{1, 2, 1, 1});
  CHECK(*lower(OpId::kTopK, x, {{"k", i(2)}, {"axis", i(0)}, {"largest", i(0)}, {"sorted", i(0)}}) ==
        Params{0, 2, 0, 0});
  CHECK(mentions(lower(OpId::kTopK, x, {}).status(), "'k'"));
  CHECK(*rule(OpId::kTopK, x, {1, 2, 1, 1}) == std::vector<TensorType>{f32({3, 2}), tt(DType::kI64, {3, 2})});
  CHECK(*rule(OpId::kTopK, {tt(DType::kI32, {4})}, {0, 0, 0, 1}) ==
        std::vector<TensorType>{tt(DType::kI32, {0}), tt(DType::kI64, {0})});
  CHECK(mentions(rejected(OpId::kTopK, x, {1, 6, 1, 1}), "k 6"));
  rejected(OpId::kTopK, x, {1, -1, 1, 1});
  rejected(OpId::kTopK, x, {2, 1, 1, 1});
  rejected(OpId::kTopK, x, {1, 1, 2, 1});
  rejected(OpId::kTopK, x, {1, 1, 1});
  rejected(OpId::kTopK, {tt(DType::kBool, {4})}, {0, 1, 1, 1});
  const OpPlan plan = plan_of(OpId::kTopK, {f32({2, 7, 3})}, {1, 4, 0, 1});
  const TopKPlan& p = plan.as<TopKPlan>();
  CHECK((p.outer == 2 && p.length == 7 && p.inner == 3 && p.k == 4 && p.largest == 0));
  const std::vector<TensorType> in{f32({2, 7, 3})};
  const Params words{1, 4, 0, 1};
  CHECK(op_def(OpId::kTopK).workspace(PlanInput{in, {}, words}) == 7 * sizeof(int64_t));  // one row's indices
}

TEST_CASE("max_pool, average_pool: attribute lowering (ONNX attributes, auto_pad)") {
  const std::vector<TensorType> x{f32({1, 3, 5, 5})};
  auto p = lower(OpId::kMaxPool, x, {{"kernel_shape", list({3, 3})}});
  REQUIRE(p.ok());
  CHECK(*p == Params{3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0});
  CHECK(*lower(OpId::kAveragePool, x,
               {{"kernel_shape", list({2, 3})},
                {"strides", list({2, 1})},
                {"pads", list({1, 0, 0, 2})},
                {"ceil_mode", i(1)},
                {"count_include_pad", i(1)}}) == Params{2, 3, 2, 1, 1, 0, 0, 2, 1, 1, 1, 1});
  CHECK(*lower(OpId::kMaxPool, x, {{"kernel_shape", i(2)}, {"pads", i(1)}, {"dilations", list({2, 3})}}) ==
        Params{2, 2, 1, 1, 1, 1, 1, 1, 2, 3, 0, 0});
  CHECK(mentions(lower(OpId::kMaxPool, x, {}).status(), "kernel_shape"));
  CHECK_FALSE(lower(OpId::kMaxPool, x, {{"kernel_shape", list({2, 2})}, {"count_include_pad", i(1)}}).ok());
  CHECK_FALSE(lower(OpId::kMaxPool, x, {{"kernel_shape", list({2, 2, 2})}}).ok());
  CHECK_FALSE(lower(OpId::kAveragePool, x, {{"kernel_shape", list({2, 2})}, {"ceil_mode", i(2)}}).ok());
  CHECK_FALSE(lower(OpId::kAveragePool, x, {{"kernel_shape", list({2, 2})}, {"pads", list({1, 1, 1})}}).ok());
  CHECK_FALSE(lower(OpId::kMaxPool, x, {{"kernel_shape", list({2, 2})}, {"storage_order", i(1)}}).ok());
  // auto_pad: SAME_UPPER puts the odd pad at the end, SAME_LOWER at the beginning.
  CHECK(*lower(OpId::kMaxPool, x, {{"kernel_shape", list({3, 2})}, {"auto_pad", str("SAME_UPPER")}}) ==
        Params{3, 2, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0});
  CHECK(*lower(OpId::kMaxPool, x, {{"kernel_shape", list({3, 2})}, {"auto_pad", str("SAME_LOWER")}}) ==
        Params{3, 2, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0});
  CHECK(*lower(OpId::kAveragePool, x,
               {{"kernel_shape", list({3, 3})}, {"strides", i(2)}, {"auto_pad", str("SAME_UPPER")}}) ==
        Params{3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0});
  CHECK(*lower(OpId::kMaxPool, x, {{"kernel_shape", list({3, 3})}, {"auto_pad", str("VALID")}}) ==
        Params{3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0});
  CHECK_FALSE(lower(OpId::kMaxPool, x, {{"kernel_shape", list({3, 3})}, {"auto_pad", str("SAME")}}).ok());
  CHECK_FALSE(
      lower(OpId::kMaxPool, x,
            {{"kernel_shape", list({3, 3})}, {"auto_pad", str("VALID")}, {"pads", list({1, 1, 1, 1})}})
          .ok());
  CHECK(infer(OpId::kMaxPool, x,
              {{"kernel_shape", list({3, 3})}, {"strides", i(2)}, {"auto_pad", str("SAME_UPPER")}})
            ->dims == Dims{1, 3, 3, 3});
}

TEST_CASE("max_pool, average_pool: result shapes (floor, ceil_mode and its last-window rule)") {
  auto out = [](Dims x, Params p) {
    auto r = rule(OpId::kAveragePool, {f32(std::move(x))}, p);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    return r->at(0).dims;
  };
  CHECK(out({1, 3, 8, 8}, {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0}) == Dims{1, 3, 4, 4});
  CHECK(out({2, 1, 7, 6}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}) == Dims{2, 1, 7, 6});
  CHECK(out({1, 1, 8, 7}, {3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0}) == Dims{1, 1, 3, 3});
  CHECK(out({1, 1, 8, 7}, {3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0}) == Dims{1, 1, 4, 3});
  CHECK(out({1, 1, 4, 4}, {3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0}) == Dims{1, 1, 2, 2});  // ONNX maxpool_2d_ceil
  // ceil would give 4, but the 4th window would start at 6 >= 5 + 1: dropped (PyTorch, onnxruntime).
  CHECK(out({1, 1, 5, 5}, {2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0}) == Dims{1, 1, 3, 3});
  CHECK(out({1, 1, 9, 9}, {2, 3, 1, 2, 1, 0, 1, 2, 2, 2, 0, 0}) == Dims{1, 1, 9, 4});  // dilated windows 3, 5
  CHECK(out({1, 1, 2, 2}, {2, 2, 1, 1, 1, 1, 1, 1, 3, 3, 0, 0}) == Dims{1, 1, 1, 1});
  CHECK(out({0, 4, 3, 3}, {3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0}) == Dims{0, 4, 1, 1});
}

TEST_CASE("max_pool, average_pool: hostile words are rejected") {
  const std::vector<TensorType> x{f32({1, 1, 5, 5})};
  const Params good{3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
  CHECK(rule(OpId::kMaxPool, x, good).ok());
  for (size_t i = 0; i < good.size(); ++i) {
    for (int64_t bad : {int64_t{-1}, kI64Min, kI64Max, int64_t{1} << 31}) {
      Params p = good;
      p[i] = bad;
      CAPTURE(i);
      CAPTURE(bad);
      rejected(OpId::kMaxPool, x, p);
      rejected(OpId::kAveragePool, x, p);
    }
  }
  rejected(OpId::kMaxPool, x, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0});
  rejected(OpId::kMaxPool, x, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0});
  CHECK(mentions(rejected(OpId::kMaxPool, x, {3, 3, 1, 1, 3, 0, 0, 0, 1, 1, 0, 0}), "pad"));  // pad >= kernel
  CHECK(mentions(rejected(OpId::kMaxPool, x, {3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1}), "count_include_pad"));
  CHECK(rule(OpId::kAveragePool, x, {3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1}).ok());
  CHECK(mentions(rejected(OpId::kMaxPool, x, {6, 3, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0}), "does not fit"));
  CHECK(mentions(rejected(OpId::kMaxPool, x, {3, 3, 1, 1, 0, 0, 0, 0, 3, 1, 0, 0}), "does not fit"));
  // A huge dilated kernel on a tiny input: rejected, never looped over.
  rejected(OpId::kMaxPool, x, {1 << 30, 1 << 30, 1, 1, 0, 0, 0, 0, 1 << 30, 1 << 30, 0, 0});
  rejected(OpId::kMaxPool, {f32({1, 5, 5})}, good);
  rejected(OpId::kMaxPool, {tt(DType::kI64, {1, 1, 5, 5})}, good);
  // The largest legal window on a large extent stays within int64.
  CHECK(rule(OpId::kMaxPool, {f32({1, 1, int64_t{1} << 31, 1})},
             {2, 1, 1 << 30, 1, 1, 0, 1, 0, 1 << 30, 1, 1, 0})
            .ok());
}

TEST_CASE("max_pool, average_pool: channels-last (a 13th word, 1)") {
  // x [N,H,W,C] -> [N,OH,OW,C]: the NCHW rule on the same dims.
  auto r = rule(OpId::kMaxPool, {f32({2, 8, 7, 5})}, {3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0, 1});
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK(r->at(0).dims == Dims{2, 4, 3, 5});
  CHECK(pool2d_channels_last(Params{3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0, 1}));
  CHECK_FALSE(pool2d_channels_last(Params{3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0}));
  CHECK(mentions(rejected(OpId::kMaxPool, {f32({1, 5, 5, 2})}, {3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 2}), "layout"));
  // The window is checked against H and W, not against C.
  CHECK(mentions(rejected(OpId::kMaxPool, {f32({1, 2, 9, 9})}, {3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1}), "does not fit"));
  const OpPlan plan = plan_of(OpId::kAveragePool, {f32({2, 10, 9, 3})}, {2, 3, 3, 2, 1, 2, 0, 1, 1, 1, 0, 1, 1});
  const Pool2dPlan& p = plan.as<Pool2dPlan>();
  CHECK(p.channels_last == 1);
  CHECK(p.n == 2);
  CHECK(p.h == 10);
  CHECK(p.w == 9);
  CHECK(p.c == 3);
  CHECK(p.oh == 4);
  CHECK(p.ow == 5);
}

TEST_CASE("max_pool, average_pool: plan") {
  const OpPlan plan = plan_of(OpId::kAveragePool, {f32({2, 3, 10, 9})}, {2, 3, 3, 2, 1, 2, 0, 1, 1, 1, 0, 1});
  const Pool2dPlan& p = plan.as<Pool2dPlan>();
  CHECK(p.n == 2);
  CHECK(p.c == 3);
  CHECK(p.h == 10);
  CHECK(p.w == 9);
  CHECK(p.oh == 4);
  CHECK(p.ow == 5);
  CHECK(p.kh == 2);
  CHECK(p.kw == 3);
  CHECK(p.stride_h == 3);
  CHECK(p.stride_w == 2);
  CHECK(p.pad_top == 1);
  CHECK(p.pad_left == 2);
  CHECK(p.pad_bottom == 0);
  CHECK(p.pad_right == 1);
  CHECK(p.dilation_h == 1);
  CHECK(p.count_include_pad == 1);
  CHECK(p.is_max == 0);
  const OpPlan mp = plan_of(OpId::kMaxPool, {f32({1, 1, 4, 4})}, {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0});
  CHECK(mp.as<Pool2dPlan>().is_max == 1);
  // The shared tap range: taps start + k * d inside [lo, hi).
  int64_t first = -1, last = -1;
  pool_tap_range(-1, 3, 2, 0, 2, &first, &last);  // taps -1, 2: none inside [0, 2)
  CHECK(first == last);
  pool_tap_range(-2, 1, 3, 0, 5, &first, &last);  // taps -2, -1, 0
  CHECK(first == 2);
  CHECK(last == 3);
  pool_tap_range(3, 2, 4, 0, 6, &first, &last);  // taps 3, 5, 7, 9
  CHECK(first == 0);
  CHECK(last == 2);
  pool_tap_range(8, 1, 2, 0, 6, &first, &last);  // past the end
  CHECK(first == last);
}

TEST_CASE("pad: result types and hostile words") {
  const std::vector<TensorType> x{tt(DType::kU8, {4, 5})};
  CHECK(rule(OpId::kPad, x, {0, 7, 1, 2, 3, 4})->at(0) == tt(DType::kU8, {8, 11}));
  CHECK(rule(OpId::kPad, x, {1, 0, 3, 4, 3, 4})->at(0) == tt(DType::kU8, {10, 13}));
  CHECK(rule(OpId::kPad, x, {0, 0, -4, 0, 0, -5})->at(0) == tt(DType::kU8, {0, 0}));
  CHECK(rule(OpId::kPad, x, {3, 0, -1, -1, 9, 9})->at(0) == tt(DType::kU8, {12, 13}));
  CHECK(rule(OpId::kPad, {f32({})}, {0, 0})->at(0) == f32({}));
  CHECK(rule(OpId::kPad, {tt(DType::kI64, {2})}, {0, -1, 1, 1}).ok());  // any i64 word
  rejected(OpId::kPad, x, {0, 0, 1, 2, 3});                             // count
  rejected(OpId::kPad, x, {4, 0, 0, 0, 0, 0});                          // mode
  rejected(OpId::kPad, x, {-1, 0, 0, 0, 0, 0});
  rejected(OpId::kPad, x, {0, 256, 0, 0, 0, 0});  // not a u8
  rejected(OpId::kPad, x, {0, -1, 0, 0, 0, 0});
  rejected(OpId::kPad, x, {1, 1, 0, 0, 0, 0});  // a value with reflect
  rejected(OpId::kPad, {tt(DType::kBool, {2})}, {0, 2, 0, 0});
  rejected(OpId::kPad, {f32({2})}, {0, int64_t{1} << 32, 0, 0});
  CHECK(mentions(rejected(OpId::kPad, x, {0, 0, -3, 0, -2, 0}), "cannot lose"));
  CHECK(mentions(rejected(OpId::kPad, x, {1, 0, -4, 0, 1, 0}), "no elements"));  // reflect of nothing
  rejected(OpId::kPad, x, {2, 0, 0, -5, 0, 2});
  CHECK(rule(OpId::kPad, x, {1, 0, -2, 0, -2, 1}).ok());  // cropped to nothing: nothing to reflect
  rejected(OpId::kPad, {f32({0})}, {2, 0, 1, 0});
  CHECK(rule(OpId::kPad, {f32({0})}, {0, 0, 1, 0}).ok());
  CHECK(rule(OpId::kPad, {f32({0, 2})}, {1, 0, 0, 1, 0, 1}).ok());  // nothing to write
  for (int64_t bad : {kI64Max, kI64Min, (int64_t{1} << 48) + 1, -(int64_t{1} << 48) - 1}) {
    CAPTURE(bad);
    rejected(OpId::kPad, x, {0, 0, bad, 0, 0, 0});
    rejected(OpId::kPad, x, {0, 0, 0, 0, 0, bad});
  }
  // Large but legal pads: the result size check rejects them, without overflow.
  rejected(OpId::kPad, x, {0, 0, int64_t{1} << 48, int64_t{1} << 48, 0, 0});

  const OpPlan plan = plan_of(OpId::kPad, {tt(DType::kF16, {5, 6})}, {1, 0, -1, 3, 2, -2});
  const PadPlan& p = plan.as<PadPlan>();
  CHECK(p.n == 6 * 7);
  CHECK(p.rank == 2);
  CHECK(p.element_size == 2);
  CHECK(p.mode == 1);
  CHECK(p.out_dims[0] == 6);
  CHECK(p.out_dims[1] == 7);
  CHECK(p.in_stride[0] == 6);
  CHECK(p.in_stride[1] == 1);
  CHECK(p.begin[0] == -1);
  CHECK(p.lo[0] == 1);
  CHECK(p.hi[0] == 5);
  CHECK(p.begin[1] == 3);
  CHECK(p.lo[1] == 0);
  CHECK(p.hi[1] == 4);
  CHECK(pad_source_index(p, 0, 0) == 1);  // reflect inside the kept rows [1, 5)
  CHECK(pad_source_index(p, 0, 3) == 4);
  CHECK(pad_source_index(p, 0, 4) == 3);
  CHECK(pad_source_index(p, 0, 5) == 2);
  CHECK(pad_source_index(p, 1, 0) == 3);  // -3 reflects to 3
  CHECK(pad_source_index(p, 1, 6) == 3);
}

TEST_CASE("expand: lowering, result types, plan") {
  CHECK(*lower(OpId::kExpand, {f32({3, 1})}, {{"shape", list({2, 1, 6})}}) == Dims{2, 3, 6});
  CHECK(*lower(OpId::kExpand, {f32({3, 1})}, {}, {f32({3, 4})}) == Dims{3, 4});
  CHECK_FALSE(lower(OpId::kExpand, {f32({3, 1})}, {}).ok());
  CHECK_FALSE(lower(OpId::kExpand, {f32({3, 1})}, {{"shape", list({2, 4})}}).ok());
  CHECK_FALSE(lower(OpId::kExpand, {f32({3, 1})}, {{"shape", list({-1, 4})}}).ok());
  CHECK(rule(OpId::kExpand, {tt(DType::kI64, {3, 1})}, {2, 3, 4})->at(0) == tt(DType::kI64, {2, 3, 4}));
  CHECK(rule(OpId::kExpand, {f32({})}, {})->at(0) == f32({}));
  CHECK(rule(OpId::kExpand, {f32({1, 3})}, {0, 3})->at(0) == f32({0, 3}));
  rejected(OpId::kExpand, {f32({3, 1})}, {3});     // rank below x's
  rejected(OpId::kExpand, {f32({3, 1})}, {1, 4});  // 3 does not become 1
  rejected(OpId::kExpand, {f32({3, 1})}, {3, -4});
  rejected(OpId::kExpand, {f32({0, 1})}, {1, 1});  // 0 does not become 1
  rejected(OpId::kExpand, {f32({1})}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  rejected(OpId::kExpand, {f32({1})}, {int64_t{1} << 40, int64_t{1} << 40});  // too many bytes
  const OpPlan plan = plan_of(OpId::kExpand, {tt(DType::kU8, {3, 1})}, {2, 3, 4});
  const StridedPlan& p = plan.as<StridedPlan>();
  CHECK(p.n == 24);
  CHECK(p.rank == 3);
  CHECK(p.element_size == 1);
  CHECK(p.offset == 0);
  CHECK(p.out_dims[0] == 2);
  CHECK(p.in_stride[0] == 0);
  CHECK(p.in_stride[1] == 1);
  CHECK(p.in_stride[2] == 0);
  CHECK_FALSE(op_def(OpId::kExpand).may_run_in_place);
  CHECK_FALSE(op_def(OpId::kPad).f32_only);
}

TEST_CASE("resize: lowering, result types, hostile words, plan") {
  const std::vector<TensorType> x{f32({2, 3, 4, 5})};
  CHECK(*lower(OpId::kResize, x, {{"sizes", list({2, 3, 8, 10})}}) == Params{0, 0, 0, 8, 10});
  CHECK(*lower(OpId::kResize, x, {{"sizes", list({7, 9})}}) == Params{0, 0, 0, 7, 9});
  CHECK(*lower(OpId::kResize, x, {}, {f32({2, 3, 2, 2})}) == Params{0, 0, 0, 2, 2});
  CHECK(*lower(OpId::kResize, x,
               {{"sizes", list({2, 3, 8, 10})},
                {"mode", str("linear")},
                {"coordinate_transformation_mode", str("align_corners")},
                {"nearest_mode", str("ceil")}}) == Params{1, 1, 0, 8, 10});  // nearest_mode unused
  CHECK(*lower(OpId::kResize, x,
               {{"sizes", list({2, 3, 8, 10})},
                {"coordinate_transformation_mode", str("tf_half_pixel_for_nn")},
                {"nearest_mode", str("round_prefer_ceil")}}) == Params{0, 4, 1, 8, 10});
  AttrValue scales;
  scales.value = std::vector<AttrValue>{num(1), num(1), num(2.5), num(0.5)};
  // 5 * 0.5 = 2.5 rows become 2: the stated scales are kept (ONNX maps coordinates with them).
  CHECK(*lower(OpId::kResize, x, {{"scales", scales}}) ==
        Params{0, 0, 0, 10, 2, std::bit_cast<int64_t>(2.5), std::bit_cast<int64_t>(0.5)});
  scales.value = std::vector<AttrValue>{num(1), num(1), num(2.5), num(2)};
  CHECK(*lower(OpId::kResize, x, {{"scales", scales}}) == Params{0, 0, 0, 10, 10});  // exact: out / in is the scale
  scales.value = std::vector<AttrValue>{num(2), num(1), num(2), num(2)};
  CHECK_FALSE(lower(OpId::kResize, x, {{"scales", scales}}).ok());  // N is not resized
  scales.value = std::vector<AttrValue>{num(1), num(1), num(-2), num(2)};
  CHECK_FALSE(lower(OpId::kResize, x, {{"scales", scales}}).ok());
  CHECK_FALSE(lower(OpId::kResize, x, {{"sizes", list({2, 4, 8, 10})}}).ok());
  CHECK_FALSE(lower(OpId::kResize, x, {{"sizes", list({8})}}).ok());
  CHECK_FALSE(lower(OpId::kResize, x, {}).ok());
  CHECK_FALSE(lower(OpId::kResize, x, {{"sizes", list({4, 4})}, {"mode", str("cubic")}}).ok());
  CHECK_FALSE(lower(OpId::kResize, x, {{"sizes", list({4, 4})}, {"antialias", i(1)}}).ok());
  CHECK_FALSE(lower(OpId::kResize, x,
                    {{"sizes", list({4, 4})}, {"coordinate_transformation_mode", str("tf_crop_and_resize")}})
                  .ok());
  CHECK_FALSE(lower(OpId::kResize, {f32({3, 4, 5})}, {{"sizes", list({4, 4})}}).ok());

  CHECK(rule(OpId::kResize, x, {1, 3, 0, 1, 9})->at(0) == f32({2, 3, 1, 9}));
  CHECK(rule(OpId::kResize, x, {0, 0, 0, 0, 0})->at(0) == f32({2, 3, 0, 0}));
  CHECK(rule(OpId::kResize, {f32({1, 1, 0, 3})}, {0, 0, 0, 0, 6}).ok());
  CHECK(mentions(rejected(OpId::kResize, {f32({1, 1, 0, 3})}, {0, 0, 0, 2, 6}), "empty"));
  rejected(OpId::kResize, x, {2, 0, 0, 4, 4});
  rejected(OpId::kResize, x, {0, 5, 0, 4, 4});
  rejected(OpId::kResize, x, {0, 0, 4, 4, 4});
  rejected(OpId::kResize, x, {1, 0, 1, 4, 4});  // a nearest mode with linear
  rejected(OpId::kResize, x, {0, 0, 0, -1, 4});
  rejected(OpId::kResize, x, {0, 0, 0, 4, (int64_t{1} << 40) + 1});
  rejected(OpId::kResize, x, {0, 0, 0, int64_t{1} << 40, int64_t{1} << 40});  // too many bytes
  rejected(OpId::kResize, x, {0, 0, 0, 4});
  rejected(OpId::kResize, {f32({4, 5})}, {0, 0, 0, 4, 4});

  const OpPlan plan = plan_of(OpId::kResize, x, {1, 2, 0, 8, 3});
  const ResizePlan& p = plan.as<ResizePlan>();
  CHECK(p.n == 2);
  CHECK(p.c == 3);
  CHECK(p.oh == 8);
  CHECK(p.ow == 3);
  CHECK(p.mode == 1);
  CHECK(p.coordinate_mode == 2);
  CHECK(p.scale_h == 2.0);
  CHECK(p.scale_w == 0.6);
  // The shared index helpers.
  CHECK(resize_nearest(0, 1.5, 9) == 1);  // ties down
  CHECK(resize_nearest(1, 1.5, 9) == 2);  // ties up
  CHECK(resize_nearest(0, -0.5, 9) == 0);
  CHECK(resize_nearest(0, 1.6, 9) == 2);
  CHECK(resize_nearest(2, 1.9, 9) == 1);
  CHECK(resize_nearest(3, 1.1, 9) == 2);
  CHECK(resize_nearest(3, 8.5, 9) == 8);  // clamped
  CHECK(resize_nearest(2, -0.25, 9) == 0);
  CHECK(resize_source(0, 0, 2.0, 4, 8) == -0.25);
  CHECK(resize_source(1, 7, 2.0, 4, 8) == 3.0);
  CHECK(resize_source(3, 0, 2.0, 4, 1) == 0.0);
  int64_t i0, i1;
  double frac;
  resize_linear_taps(-0.25, 4, &i0, &i1, &frac);
  CHECK(i0 == 0);
  CHECK(i1 == 1);
  CHECK(frac == 0.0);
  resize_linear_taps(3.25, 4, &i0, &i1, &frac);
  CHECK(i0 == 3);
  CHECK(i1 == 3);
  resize_linear_taps(1.75, 4, &i0, &i1, &frac);
  CHECK(i0 == 1);
  CHECK(i1 == 2);
  CHECK(frac == 0.75);
}

TEST_CASE("conv_transpose: lowering, result types, hostile words, plan") {
  const std::vector<TensorType> xw{f32({1, 4, 5, 5}), f32({4, 3, 3, 3})};
  CHECK(*lower(OpId::kConvTranspose, xw, {}) == Params{1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0});
  CHECK(*lower(OpId::kConvTranspose, xw,
               {{"strides", i(2)},
                {"pads", list({1, 1})},
                {"output_padding", list({1, 0})},
                {"dilations", i(2)}}) == Params{2, 2, 1, 1, 1, 1, 2, 2, 1, 1, 0});
  CHECK(*lower(OpId::kConvTranspose, xw, {{"kernel_shape", list({3, 3})}}) ==
        Params{1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0});
  CHECK_FALSE(lower(OpId::kConvTranspose, xw, {{"kernel_shape", list({2, 3})}}).ok());
  // output_shape: pads from the stated size (ONNX: the larger half first unless SAME_UPPER).
  CHECK(*lower(OpId::kConvTranspose, xw, {{"strides", i(2)}, {"output_shape", list({10, 8})}}) ==
        Params{2, 2, 1, 2, 0, 1, 1, 1, 1, 0, 0});
  CHECK(*lower(OpId::kConvTranspose, xw,
               {{"strides", i(2)}, {"output_shape", list({10, 8})}, {"auto_pad", str("SAME_UPPER")}}) ==
        Params{2, 2, 0, 1, 1, 2, 1, 1, 1, 0, 0});
  CHECK(*lower(OpId::kConvTranspose, xw, {{"strides", i(2)}, {"auto_pad", str("SAME_UPPER")}}) ==
        Params{2, 2, 0, 0, 1, 1, 1, 1, 1, 0, 0});  // output 10 = 5 * 2: total 1
  CHECK(*lower(OpId::kConvTranspose, xw, {{"strides", i(2)}, {"output_shape", list({1, 4, 12, 11})}}) ==
        Params{2, 2, 0, 0, 0, 0, 1, 1, 1, 1, 0});  // one more than the natural 11: output padding
  CHECK_FALSE(lower(OpId::kConvTranspose, xw, {{"output_shape", list({10, 8, 7})}}).ok());
  CHECK_FALSE(lower(OpId::kConvTranspose, xw, {{"pads", list({1, 1, 1})}}).ok());

  auto out = [](std::vector<TensorType> in, Params p) {
    auto r = rule(OpId::kConvTranspose, in, p);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    return r->at(0);
  };
  CHECK(out(xw, {2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1}) == f32({1, 3, 10, 10}));
  CHECK(out({f32({2, 4, 5, 4}), f32({4, 3, 2, 3}), f32({6})}, {2, 1, 0, 1, 1, 0, 2, 2, 2, 1, 0}) ==
        f32({2, 6, 11, 7}));
  CHECK(out({f32({0, 3, 4, 3}), f32({3, 1, 4, 4})}, {3, 2, 2, 0, 1, 3, 1, 1, 3, 2, 1}) == f32({0, 3, 12, 6}));
  const Params good{1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0};
  for (size_t k = 0; k < good.size(); ++k) {
    for (int64_t bad : {int64_t{-1}, kI64Min, kI64Max, (int64_t{1} << 30) + 1}) {
      Params p = good;
      p[k] = bad;
      CAPTURE(k);
      CAPTURE(bad);
      rejected(OpId::kConvTranspose, xw, p);
    }
  }
  CHECK(mentions(rejected(OpId::kConvTranspose, xw, {2, 2, 0, 0, 0, 0, 1, 1, 1, 2, 0}), "output_padding"));
  CHECK(out(xw, {1, 1, 3, 0, 3, 0, 1, 1, 1, 0, 0}) == f32({1, 3, 1, 7}));
  CHECK(mentions(rejected(OpId::kConvTranspose, xw, {1, 1, 4, 0, 3, 0, 1, 1, 1, 0, 0}), "output dim"));
  CHECK(mentions(rejected(OpId::kConvTranspose, xw, {1, 1, 0, 0, 0, 0, 1, 1, 3, 0, 0}), "groups"));
  CHECK(mentions(rejected(OpId::kConvTranspose, {f32({1, 4, 5, 5}), f32({3, 3, 3, 3})}, good),
                 "input channels"));
  CHECK(mentions(rejected(OpId::kConvTranspose, {f32({1, 4, 5, 5}), f32({4, 3, 3, 3}), f32({4})}, good),
                 "bias"));
  CHECK(mentions(rejected(OpId::kConvTranspose, {f32({1, 4, 0, 5}), f32({4, 3, 3, 3})}, good), "at least 1"));
  rejected(OpId::kConvTranspose, {f32({1, 4, 5}), f32({4, 3, 3, 3})}, good);
  // Big strides on a long input: no overflow, the size check answers.
  rejected(OpId::kConvTranspose, {f32({1, 1, int64_t{1} << 40, 1}), f32({1, 1, 1, 1})},
           {1 << 30, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0});

  const OpPlan plan = plan_of(OpId::kConvTranspose, {f32({2, 4, 5, 4}), f32({4, 3, 2, 3}), f32({6})},
                              {2, 1, 0, 1, 1, 0, 2, 2, 2, 1, 0});
  const ConvTransposePlan& p = plan.as<ConvTransposePlan>();
  CHECK(p.n == 2);
  CHECK(p.c == 4);
  CHECK(p.k == 6);
  CHECK(p.oh == 11);
  CHECK(p.ow == 7);
  CHECK(p.kh == 2);
  CHECK(p.kw == 3);
  CHECK(p.stride_h == 2);
  CHECK(p.pad_top == 0);
  CHECK(p.pad_left == 1);
  CHECK(p.dilation_w == 2);
  CHECK(p.groups == 2);
  CHECK(p.c_per_group == 2);
  CHECK(p.k_per_group == 3);
  CHECK(p.has_bias == 1);
}

TEST_CASE("argmax: lowering (ONNX defaults), result types, hostile words, plan") {
  const std::vector<TensorType> x{f32({2, 3, 4})};
  CHECK(*lower(OpId::kArgMax, x, {}) == Params{0, 1, 0});
  CHECK(*lower(OpId::kArgMax, x, {{"axis", i(-1)}, {"keepdims", i(0)}, {"select_last_index", i(1)}}) ==
        Params{2, 0, 1});
  CHECK(mentions(lower(OpId::kArgMax, x, {{"axis", i(3)}}).status(), "out of range"));
  CHECK(mentions(lower(OpId::kArgMax, x, {{"keepdims", i(2)}}).status(), "'keepdims' must be 0 or 1"));
  CHECK(
      mentions(lower(OpId::kArgMax, x, {{"select_last_index", str("yes")}}).status(), "must be an integer"));
  CHECK(mentions(lower(OpId::kArgMax, x, {{"axes", i(0)}}).status(), "unknown attribute"));
  CHECK(mentions(lower(OpId::kArgMax, {f32({})}, {}).status(), "out of range for rank 0"));

  CHECK(*rule(OpId::kArgMax, x, {1, 1, 0}) == std::vector<TensorType>{tt(DType::kI64, {2, 1, 4})});
  CHECK(*rule(OpId::kArgMax, x, {1, 0, 1}) == std::vector<TensorType>{tt(DType::kI64, {2, 4})});
  CHECK(*rule(OpId::kArgMax, {f32({5})}, {0, 0, 0}) == std::vector<TensorType>{tt(DType::kI64, {})});
  // An empty axis has no argmax, unless the result is empty too (numpy).
  CHECK(mentions(rejected(OpId::kArgMax, {f32({3, 0})}, {1, 0, 0}), "is empty"));
  CHECK(*rule(OpId::kArgMax, {f32({0, 0})}, {1, 0, 0}) == std::vector<TensorType>{tt(DType::kI64, {0})});
  rejected(OpId::kArgMax, x, {});
  rejected(OpId::kArgMax, x, {0, 1});
  rejected(OpId::kArgMax, x, {0, 1, 0, 0});
  rejected(OpId::kArgMax, x, {3, 1, 0});
  rejected(OpId::kArgMax, x, {-1, 1, 0});
  rejected(OpId::kArgMax, x, {0, 2, 0});
  rejected(OpId::kArgMax, x, {0, 1, -1});
  rejected(OpId::kArgMax, {tt(DType::kU8, {3})}, {0, 1, 0});  // f32, i32, i64 only
  rejected(OpId::kArgMax, {f32({})}, {0, 1, 0});

  const OpPlan plan = plan_of(OpId::kArgMax, x, {1, 0, 1});
  const ArgmaxPlan& p = plan.as<ArgmaxPlan>();
  CHECK(p.outer == 2);
  CHECK(p.length == 3);
  CHECK(p.inner == 4);
  CHECK(p.select_last == 1);
  const std::vector<TensorType> result{tt(DType::kI64, {2, 4})};
  CHECK(kernel_key(OpId::kArgMax, x, result).output == DType::kI64);
  CHECK_FALSE(op_def(OpId::kArgMax).may_run_in_place);
}

TEST_CASE("argmax_of: ties, NaN (numpy: the first NaN wins), select_last_index") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float a[] = {1, 3, 2, 3, -inf};
  CHECK(argmax_of(a, 5, 1, 0) == 1);
  CHECK(argmax_of(a, 5, 1, 1) == 3);
  const float b[] = {1, nan, inf, nan, 0};
  CHECK(argmax_of(b, 5, 1, 0) == 1);
  CHECK(argmax_of(b, 5, 1, 1) == 3);
  const float c[] = {-inf, -inf};
  CHECK(argmax_of(c, 2, 1, 0) == 0);
  CHECK(argmax_of(c, 2, 1, 1) == 1);
  const float strided[] = {0, 9, 5, 9, 7, 9};  // every other element: 0, 5, 7
  CHECK(argmax_of(strided, 3, 2, 0) == 2);
}

namespace {
TensorType i64s() { return tt(DType::kI64, {}); }
}  // namespace

TEST_CASE("dynamic_slice: lowering, result types, hostile words, plan") {
  const TensorType x = tt(DType::kF16, {5, 6});
  CHECK(*lower(OpId::kDynamicSlice, {x, i64s(), i64s()}, {{"sizes", list({2, 3})}}) == Params{2, 3});
  CHECK(*lower(OpId::kDynamicSlice, {x, i64s(), i64s()}, {}, {tt(DType::kF16, {1, 6})}) == Params{1, 6});
  CHECK(mentions(lower(OpId::kDynamicSlice, {x, i64s(), i64s()}, {}).status(), "needs attribute 'sizes'"));
  CHECK(mentions(lower(OpId::kDynamicSlice, {x, i64s(), i64s()}, {{"size", i(1)}}).status(), "unknown"));

  CHECK(*rule(OpId::kDynamicSlice, {x, i64s(), i64s()}, {2, 3}) ==
        std::vector<TensorType>{tt(DType::kF16, {2, 3})});
  CHECK(*rule(OpId::kDynamicSlice, {x, i64s(), i64s()}, {0, 6}) ==
        std::vector<TensorType>{tt(DType::kF16, {0, 6})});
  CHECK(*rule(OpId::kDynamicSlice, {tt(DType::kBool, {})}, {}) ==
        std::vector<TensorType>{tt(DType::kBool, {})});
  CHECK(mentions(rejected(OpId::kDynamicSlice, {x, i64s()}, {2, 3}), "one i64[] per dim"));
  CHECK(mentions(rejected(OpId::kDynamicSlice, {x, i64s(), i64s(), i64s()}, {2, 3}), "one i64[] per dim"));
  CHECK(mentions(rejected(OpId::kDynamicSlice, {x, i64s(), tt(DType::kI32, {})}, {2, 3}),
                 "start index 1 is i32[], expected i64[]"));
  CHECK(mentions(rejected(OpId::kDynamicSlice, {x, tt(DType::kI64, {1}), i64s()}, {2, 3}),
                 "start index 0 is i64[1]"));
  CHECK(mentions(rejected(OpId::kDynamicSlice, {x, i64s(), i64s()}, {6, 3}), "do not fit"));
  rejected(OpId::kDynamicSlice, {x, i64s(), i64s()}, {-1, 3});
  rejected(OpId::kDynamicSlice, {x, i64s(), i64s()}, {2});
  rejected(OpId::kDynamicSlice, {x, i64s(), i64s()}, {2, 3, 1});
  rejected(OpId::kDynamicSlice, {x, i64s(), i64s()}, {INT64_MIN, INT64_MAX});

  const OpPlan plan = plan_of(OpId::kDynamicSlice, {x, i64s(), i64s()}, {2, 3});
  const WindowPlan& p = plan.as<WindowPlan>();
  CHECK(p.n == 6);
  CHECK(p.rank == 2);
  CHECK(p.element_size == 2);
  CHECK(p.x_bytes == 60);
  CHECK(p.dims[0] == 5);
  CHECK(p.window[1] == 3);
  CHECK(p.stride[0] == 6);
  CHECK(p.stride[1] == 1);
  CHECK_FALSE(op_def(OpId::kDynamicSlice).may_run_in_place);
  CHECK_FALSE(op_def(OpId::kDynamicSlice).f32_only);
}

TEST_CASE("update_slice: result types, hostile operands, plan, in place on x only") {
  const TensorType cache = f32({8, 4});
  const TensorType row = f32({1, 4});
  CHECK(*lower(OpId::kUpdateSlice, {cache, row, i64s(), i64s()}, {}) == Params{});
  CHECK(mentions(lower(OpId::kUpdateSlice, {cache, row, i64s(), i64s()}, {{"axis", i(0)}}).status(),
                 "unknown attribute"));
  CHECK(*rule(OpId::kUpdateSlice, {cache, row, i64s(), i64s()}, {}) == std::vector<TensorType>{cache});
  CHECK(*rule(OpId::kUpdateSlice, {cache, f32({0, 4}), i64s(), i64s()}, {}) ==
        std::vector<TensorType>{cache});
  CHECK(*rule(OpId::kUpdateSlice, {tt(DType::kU8, {}), tt(DType::kU8, {})}, {}) ==
        std::vector<TensorType>{tt(DType::kU8, {})});
  CHECK(mentions(rejected(OpId::kUpdateSlice, {cache, f32({9, 4}), i64s(), i64s()}, {}), "does not fit"));
  CHECK(mentions(rejected(OpId::kUpdateSlice, {cache, f32({4}), i64s(), i64s()}, {}), "does not fit"));
  CHECK(mentions(rejected(OpId::kUpdateSlice, {cache, tt(DType::kF16, {1, 4}), i64s(), i64s()}, {}),
                 "does not fit"));
  CHECK(mentions(rejected(OpId::kUpdateSlice, {cache, row, i64s()}, {}), "one i64[] per dim"));
  CHECK(mentions(rejected(OpId::kUpdateSlice, {cache, row, i64s(), tt(DType::kI32, {})}, {}),
                 "start index 1 is i32[]"));
  CHECK(mentions(rejected(OpId::kUpdateSlice, {cache, row, i64s(), f32({})}, {}), "start index 1 is f32[]"));
  rejected(OpId::kUpdateSlice, {cache, row, i64s(), i64s()}, {0});
  CHECK_FALSE(rule(OpId::kUpdateSlice, {cache}, {}).ok());  // fewer than 2 operands
  // out_of_range: clamp (no word), skip (1), fail (2); raised back for the text IR.
  const std::vector<TensorType> operands = {cache, row, i64s(), i64s()};
  CHECK(*lower(OpId::kUpdateSlice, operands, {{"out_of_range", str("clamp")}}) == Params{});
  CHECK(*lower(OpId::kUpdateSlice, operands, {{"out_of_range", str("skip")}}) == Params{kWindowSkip});
  CHECK(*lower(OpId::kUpdateSlice, operands, {{"out_of_range", str("fail")}}) == Params{kWindowFail});
  CHECK(mentions(lower(OpId::kUpdateSlice, operands, {{"out_of_range", str("wrap")}}).status(),
                 "'out_of_range' must be \"clamp\", \"skip\" or \"fail\""));
  CHECK(*rule(OpId::kUpdateSlice, operands, {kWindowFail}) == std::vector<TensorType>{cache});
  rejected(OpId::kUpdateSlice, operands, {3});
  const AttrMap raised = raise_attributes(OpId::kUpdateSlice, operands, std::vector<int64_t>{kWindowSkip});
  REQUIRE(raised.count("out_of_range") == 1);
  CHECK(std::get<std::string>(raised.at("out_of_range").value) == "skip");
  CHECK(raise_attributes(OpId::kUpdateSlice, operands, std::vector<int64_t>{}).empty());
  CHECK(plan_of(OpId::kUpdateSlice, operands, {kWindowFail}).as<WindowPlan>().out_of_range == kWindowFail);
  CHECK(window_start_unclamped(-1, 8, kWindowFail) == 7);
  CHECK(window_start_unclamped(-1, 8, kWindowSkip) == -1);
  CHECK_FALSE(window_inside(8, 8, 1));
  CHECK(window_inside(7, 8, 1));

  const OpPlan plan = plan_of(OpId::kUpdateSlice, {cache, row, i64s(), i64s()}, {});
  const WindowPlan& p = plan.as<WindowPlan>();
  CHECK(p.n == 4);
  CHECK(p.x_bytes == 128);
  CHECK(p.window[0] == 1);
  CHECK(p.window[1] == 4);
  CHECK(p.element_size == 4);

  const OpDef& def = op_def(OpId::kUpdateSlice);
  CHECK(def.may_run_in_place);
  CHECK(def.in_place_inputs == 1u);  // x only: update and the starts are read while writing
  CHECK(op_def(OpId::kAdd).in_place_inputs == ~0u);
}

TEST_CASE("scatter_nd: result types, reductions by dtype, hostile operands, plan, in place on data only") {
  const TensorType data = f32({4, 3, 2});
  const TensorType rows = tt(DType::kI64, {2, 1});
  CHECK(*lower(OpId::kScatterND, {data, rows, f32({2, 3, 2})}, {}) == Params{kScatterNone});
  CHECK(*lower(OpId::kScatterND, {data, rows, f32({2, 3, 2})}, {{"reduction", str("min")}}) ==
        Params{kScatterMin});
  CHECK(mentions(lower(OpId::kScatterND, {data, rows, f32({2, 3, 2})}, {{"reduction", str("sum")}}).status(),
                 "'reduction' must be"));
  CHECK(*rule(OpId::kScatterND, {data, rows, f32({2, 3, 2})}, {kScatterAdd}) ==
        std::vector<TensorType>{data});
  // Full tuples: one element each; i32 indices and any dtype with none.
  CHECK(*rule(OpId::kScatterND, {tt(DType::kU8, {4, 3}), tt(DType::kI32, {5, 2}), tt(DType::kU8, {5})},
              {kScatterNone}) == std::vector<TensorType>{tt(DType::kU8, {4, 3})});
  CHECK(mentions(
      rejected(OpId::kScatterND, {tt(DType::kU8, {4, 3}), tt(DType::kI32, {5, 2}), tt(DType::kU8, {5})},
               {kScatterAdd}),
      "only none moves any dtype"));
  CHECK(mentions(rejected(OpId::kScatterND, {data, rows, f32({2, 3})}, {0}), "expected f32[2,3,2]"));
  CHECK(mentions(rejected(OpId::kScatterND, {data, rows, tt(DType::kI32, {2, 3, 2})}, {0}), "updates are"));
  CHECK(mentions(rejected(OpId::kScatterND, {data, tt(DType::kI64, {2, 4}), f32({2})}, {0}), "must be 1..3"));
  CHECK(mentions(rejected(OpId::kScatterND, {data, tt(DType::kI64, {}), f32({2})}, {0}), "must be 1..3"));
  CHECK(
      mentions(rejected(OpId::kScatterND, {data, f32({2, 1}), f32({2, 3, 2})}, {0}), "expected i32 or i64"));
  CHECK(mentions(rejected(OpId::kScatterND, {data, rows, f32({2, 3, 2})}, {5}), "is not 0..4"));
  rejected(OpId::kScatterND, {data, rows, f32({2, 3, 2})}, {});

  const OpPlan plan = plan_of(OpId::kScatterND, {data, tt(DType::kI32, {5, 2}), f32({5, 2})}, {kScatterMul});
  const ScatterPlan& p = plan.as<ScatterPlan>();
  CHECK(p.depth == 2);
  CHECK(p.tuples == 5);
  CHECK(p.slice == 2);
  CHECK(p.n == 10);
  CHECK(p.data_bytes == 96);
  CHECK(p.index_i64 == 0);
  CHECK(p.reduction == kScatterMul);
  CHECK(p.data_stride[0] == 6);
  CHECK(p.data_dims[1] == 3);

  CHECK(op_def(OpId::kScatterND).may_run_in_place);
  CHECK(op_def(OpId::kScatterND).in_place_inputs ==
        1u);  // data only: indices and updates are read while writing
  CHECK(op_def(OpId::kScatterND).read_while_writing == 6u);
  CHECK(op_def(OpId::kUpdateSlice).read_while_writing == 0u);
}

TEST_CASE("scatter_elements: result types, axis, hostile operands, plan") {
  const TensorType cache = f32({2, 8, 4});
  const TensorType at = tt(DType::kI64, {2, 1, 4});
  CHECK(*lower(OpId::kScatterElements, {cache, at, f32({2, 1, 4})}, {{"axis", i(-2)}}) ==
        Params{1, kScatterNone});
  CHECK(*lower(OpId::kScatterElements, {cache, at, f32({2, 1, 4})}, {{"reduction", str("add")}}) ==
        Params{0, kScatterAdd});
  CHECK_FALSE(lower(OpId::kScatterElements, {cache, at, f32({2, 1, 4})}, {{"axis", i(3)}}).ok());
  CHECK(*rule(OpId::kScatterElements, {cache, at, f32({2, 1, 4})}, {1, kScatterMax}) ==
        std::vector<TensorType>{cache});
  // Along the axis the indices may be longer than data (duplicates); elsewhere not.
  CHECK(rule(OpId::kScatterElements, {f32({2, 3}), tt(DType::kI32, {2, 5}), f32({2, 5})}, {1, 0}).ok());
  CHECK(
      mentions(rejected(OpId::kScatterElements, {f32({2, 3}), tt(DType::kI32, {3, 1}), f32({3, 1})}, {1, 0}),
               "do not fit"));
  CHECK(mentions(rejected(OpId::kScatterElements, {f32({2, 3}), tt(DType::kI32, {2}), f32({2})}, {1, 0}),
                 "do not fit"));
  CHECK(
      mentions(rejected(OpId::kScatterElements, {f32({2, 3}), tt(DType::kI32, {2, 1}), f32({2, 2})}, {1, 0}),
               "updates are"));
  CHECK(
      mentions(rejected(OpId::kScatterElements, {f32({2, 0}), tt(DType::kI32, {2, 1}), f32({2, 1})}, {1, 0}),
               "empty axis"));
  CHECK(mentions(rejected(OpId::kScatterElements,
                          {tt(DType::kBool, {2, 3}), tt(DType::kI32, {2, 1}), tt(DType::kBool, {2, 1})},
                          {1, kScatterMin}),
                 "only none moves any dtype"));
  rejected(OpId::kScatterElements, {f32({2, 3}), tt(DType::kI32, {2, 1}), f32({2, 1})}, {2, 0});
  rejected(OpId::kScatterElements, {f32({2, 3}), tt(DType::kI32, {2, 1}), f32({2, 1})}, {1});

  const OpPlan plan = plan_of(OpId::kScatterElements, {cache, at, f32({2, 1, 4})}, {1, kScatterNone});
  const ScatterPlan& p = plan.as<ScatterPlan>();
  CHECK(p.depth == 0);
  CHECK(p.axis == 1);
  CHECK(p.n == 8);
  CHECK(p.index_i64 == 1);
  CHECK(p.index_dims[1] == 1);
  CHECK(p.data_stride[1] == 4);
  CHECK(scatter_elements_offset(p, 5, 6) == 32 + 6 * 4 + 1);  // update (1, 0, 1) at axis coordinate 6
  CHECK(op_def(OpId::kScatterElements).in_place_inputs == 1u);
}

TEST_CASE("scatter: indices wrap once from the end; the reductions' arithmetic") {
  CHECK(scatter_index(-1, 4) == 3);
  CHECK(scatter_index(-4, 4) == 0);
  CHECK(scatter_index(-5, 4) == -1);
  CHECK(scatter_index(4, 4) == -1);
  CHECK(scatter_index(INT64_MIN, 4) == -1);
  CHECK(scatter_combine(2.0f, 3.0f, kScatterNone) == 3.0f);
  CHECK(scatter_combine(2.0f, 3.0f, kScatterMul) == 6.0f);
  CHECK(scatter_combine(2.0f, 3.0f, kScatterMin) == 2.0f);
  CHECK(std::isnan(scatter_combine(2.0f, NAN, kScatterMax)));
  CHECK(std::isnan(scatter_combine(NAN, 2.0f, kScatterMin)));
  CHECK(scatter_combine<int32_t>(INT32_MAX, 1, kScatterAdd) == INT32_MIN);  // wraps, no UB
  CHECK(scatter_combine<int64_t>(INT64_MIN, -1, kScatterMul) == INT64_MIN);
}

TEST_CASE("gather_elements: result types, hostile operands, plan (the scatters' plan)") {
  const TensorType data = f32({3, 4});
  CHECK(*lower(OpId::kGatherElements, {data, tt(DType::kI64, {3, 2})}, {{"axis", i(-1)}}) == Params{1});
  CHECK(*rule(OpId::kGatherElements, {data, tt(DType::kI64, {3, 6})}, {1}) ==
        std::vector<TensorType>{f32({3, 6})});  // longer along the axis
  CHECK(*rule(OpId::kGatherElements, {tt(DType::kU8, {3, 4}), tt(DType::kI32, {2, 4})}, {0}) ==
        std::vector<TensorType>{tt(DType::kU8, {2, 4})});
  CHECK(mentions(rejected(OpId::kGatherElements, {data, tt(DType::kI64, {4, 1})}, {1}), "do not fit"));
  CHECK(mentions(rejected(OpId::kGatherElements, {data, tt(DType::kI64, {3})}, {1}), "do not fit"));
  CHECK(mentions(rejected(OpId::kGatherElements, {data, f32({3, 1})}, {1}), "expected i32 or i64"));
  CHECK(mentions(rejected(OpId::kGatherElements, {f32({3, 0}), tt(DType::kI64, {3, 1})}, {1}), "empty axis"));
  rejected(OpId::kGatherElements, {data, tt(DType::kI64, {3, 1})}, {2});
  rejected(OpId::kGatherElements, {data, tt(DType::kI64, {3, 1})}, {});

  const OpPlan plan = plan_of(OpId::kGatherElements, {data, tt(DType::kI32, {2, 5})}, {1});
  const ScatterPlan& p = plan.as<ScatterPlan>();
  CHECK(p.depth == 0);
  CHECK(p.axis == 1);
  CHECK(p.n == 10);
  CHECK(p.index_i64 == 0);
  CHECK(p.index_dims[1] == 5);
  CHECK(p.data_stride[0] == 4);
  CHECK(scatter_elements_offset(p, 6, 3) == 4 + 3);  // result (1, 1) reads data (1, 3)
}

TEST_CASE("gather_nd: result types, batch_dims, hostile operands, plan") {
  const TensorType data = f32({2, 3, 4});
  CHECK(*lower(OpId::kGatherND, {data, tt(DType::kI64, {5, 2})}, {}) == Params{0});
  CHECK(*lower(OpId::kGatherND, {data, tt(DType::kI64, {2, 2})}, {{"batch_dims", i(1)}}) == Params{1});
  CHECK(*rule(OpId::kGatherND, {data, tt(DType::kI64, {5, 2})}, {0}) == std::vector<TensorType>{f32({5, 4})});
  CHECK(*rule(OpId::kGatherND, {data, tt(DType::kI64, {5, 3})}, {0}) == std::vector<TensorType>{f32({5})});
  CHECK(*rule(OpId::kGatherND, {data, tt(DType::kI32, {2, 7, 1})}, {1}) ==
        std::vector<TensorType>{f32({2, 7, 4})});
  CHECK(*rule(OpId::kGatherND, {data, tt(DType::kI32, {2, 3, 1})}, {2}) ==
        std::vector<TensorType>{f32({2, 3})});
  CHECK(mentions(rejected(OpId::kGatherND, {data, tt(DType::kI64, {5, 4})}, {0}), "must be 1..3"));
  CHECK(mentions(rejected(OpId::kGatherND, {data, tt(DType::kI64, {2, 3})}, {1}), "must be 1..2"));
  CHECK(mentions(rejected(OpId::kGatherND, {data, tt(DType::kI64, {3, 1})}, {1}), "batch dims"));
  CHECK(mentions(rejected(OpId::kGatherND, {data, tt(DType::kI64, {2, 1})}, {2}), "batch_dims 2"));
  CHECK(mentions(rejected(OpId::kGatherND, {data, tt(DType::kI64, {})}, {0}), "batch_dims 0"));
  CHECK(mentions(rejected(OpId::kGatherND, {data, tt(DType::kI64, {2, 1})}, {-1}), "batch_dims -1"));
  CHECK(mentions(rejected(OpId::kGatherND, {data, f32({2, 1})}, {0}), "expected i32 or i64"));
  rejected(OpId::kGatherND, {data, tt(DType::kI64, {2, 1})}, {});

  const OpPlan plan = plan_of(OpId::kGatherND, {data, tt(DType::kI64, {2, 5, 1})}, {1});
  const ScatterPlan& p = plan.as<ScatterPlan>();
  CHECK(p.depth == 1);
  CHECK(p.tuples == 10);
  CHECK(p.slice == 4);
  CHECK(p.n == 40);
  CHECK(p.batch_tuples == 5);
  CHECK(p.batch_stride == 12);
  CHECK(p.data_dims[0] == 3);  // the dims after the batch dim
  CHECK(p.data_stride[0] == 4);
  const int64_t tuple_indices[10] = {0, 1, 2, -1, 0, 2, 1, 0, 3, 1};
  CHECK(nd_tuple_offset(p, tuple_indices, 6) == 12 + 1 * 4);  // batch 1, row 1
  CHECK(nd_tuple_offset(p, tuple_indices, 3) == 2 * 4);       // -1 wraps to row 2
  CHECK(nd_tuple_offset(p, tuple_indices, 8) == -1);          // 3 is outside
  // Without batch dims the tuples index data's own dims.
  const OpPlan plain = plan_of(OpId::kGatherND, {data, tt(DType::kI64, {3, 2})}, {0});
  const ScatterPlan& q = plain.as<ScatterPlan>();
  CHECK(q.batch_tuples == 0);
  CHECK(q.data_stride[0] == 12);
  const int64_t pairs[2] = {1, 2};
  CHECK(nd_tuple_offset(q, pairs, 0) == 12 + 8);
}

TEST_CASE("cumsum: result types, flags, dtypes, plan") {
  CHECK(*lower(OpId::kCumSum, {f32({2, 3})}, {}) == Params{0, 0, 0});
  CHECK(*lower(OpId::kCumSum, {f32({2, 3})}, {{"axis", i(-1)}, {"exclusive", i(1)}, {"reverse", i(1)}}) ==
        Params{1, 1, 1});
  CHECK(mentions(lower(OpId::kCumSum, {f32({2, 3})}, {{"reverse", i(2)}}).status(), "must be 0 or 1"));
  CHECK(*rule(OpId::kCumSum, {tt(DType::kI32, {4})}, {0, 0, 0}) ==
        std::vector<TensorType>{tt(DType::kI32, {4})});
  CHECK(*rule(OpId::kCumSum, {tt(DType::kF16, {4})}, {0, 0, 0}) == std::vector<TensorType>{tt(DType::kF16, {4})});
  CHECK(mentions(rejected(OpId::kCumSum, {tt(DType::kU8, {4})}, {0, 0, 0}),
                 "expected f32 (or f16, bf16), i32 or i64"));
  CHECK(mentions(rejected(OpId::kCumSum, {f32({4})}, {0, 2, 0}), "must be 0 or 1"));
  rejected(OpId::kCumSum, {f32({4})}, {1, 0, 0});
  rejected(OpId::kCumSum, {f32({4})}, {0, 0});
  const OpPlan plan = plan_of(OpId::kCumSum, {f32({2, 3, 4})}, {1, 1, 0});
  const CumSumPlan& p = plan.as<CumSumPlan>();
  CHECK(p.outer == 2);
  CHECK(p.length == 3);
  CHECK(p.inner == 4);
  CHECK(p.exclusive == 1);
  CHECK(p.reverse == 0);
}

TEST_CASE("window_start clamps like XLA's dynamic slices") {
  CHECK(window_start(-5, 8, 3) == 0);
  CHECK(window_start(2, 8, 3) == 2);
  CHECK(window_start(6, 8, 3) == 5);
  CHECK(window_start(INT64_MAX, 8, 3) == 5);
  CHECK(window_start(INT64_MIN, 8, 8) == 0);
  CHECK(window_start(7, 8, 0) == 7);
  CHECK(window_start(9, 8, 0) == 8);
}

namespace hexir::ops {
namespace {
// A batch over one shared b, a's batch elements back to back: rows of one
// GEMM (ViT's [197, 1, 768] x [768, 2304]); a b per batch element, or a
// repeated a, keeps the batch.
TEST_CASE("matmul plan: a batch over one b is rows of one GEMM") {
  const OpPlan folded = plan_of(OpId::kMatmul, {tt(DType::kF32, {197, 1, 48}), tt(DType::kF32, {48, 20})}, {});
  const MatmulPlan& f = folded.as<MatmulPlan>();
  CHECK(f.m == 197);
  CHECK(f.batch_count == 1);
  CHECK(f.batch_rank == 0);
  const OpPlan per_b = plan_of(OpId::kMatmul, {tt(DType::kF32, {3, 2, 48}), tt(DType::kF32, {3, 48, 20})}, {});
  CHECK(per_b.as<MatmulPlan>().m == 2);
  CHECK(per_b.as<MatmulPlan>().batch_count == 3);
  const OpPlan repeated_a = plan_of(OpId::kMatmul, {tt(DType::kF32, {1, 2, 48}), tt(DType::kF32, {3, 48, 20})}, {});
  CHECK(repeated_a.as<MatmulPlan>().batch_count == 3);
}
}  // namespace
}  // namespace hexir::ops

TEST_CASE("lstm_cell: gates [B, 4H] and c [B, H] give h and c of c's type; anything else is refused") {
  auto out = rule(OpId::kLstmCell, {f32({2, 12}), f32({2, 3})}, {});
  REQUIRE(out.ok());
  CHECK(*out == std::vector<TensorType>{f32({2, 3}), f32({2, 3})});
  const OpPlan plan = plan_of(OpId::kLstmCell, {f32({2, 12}), f32({2, 3})}, {});
  CHECK(plan.as<LstmCellPlan>().rows == 2);
  CHECK(plan.as<LstmCellPlan>().hidden == 3);
  CHECK(mentions(rejected(OpId::kLstmCell, {f32({2, 11}), f32({2, 3})}, {}), "[B, 4H]"));
  rejected(OpId::kLstmCell, {f32({3, 12}), f32({2, 3})}, {});
  rejected(OpId::kLstmCell, {f32({12}), f32({3})}, {});
  CHECK_FALSE(rule(OpId::kLstmCell, {f32({1, 4}), f32({1, int64_t{1} << 62})}, {}).ok());  // 4 H would overflow
  rejected(OpId::kLstmCell, {f32({2, 12}), f32({2, 3})}, {1});
  CHECK_FALSE(rule(OpId::kLstmCell, {tt(DType::kI32, {2, 12}), tt(DType::kI32, {2, 3})}, {}).ok());
}
