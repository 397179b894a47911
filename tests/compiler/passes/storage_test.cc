// assign_storage (views, outputs, copies, donation) and compute_live_ranges.
#include "test_util.h"

namespace hexir::compiler::testing {
namespace {

Planned storage_of(std::string_view source) {
  Planned p;
  p.module = parse_ok(source);
  assign_storage(p.fn(), p.plan);
  return p;
}

using ops::OpId;

TEST_CASE("storage: inputs, constants, arena values and the output") {
  Planned p = storage_of(R"(
const @c : f32[4] = splat 1
func @f(%x: f32[4]) -> (f32[4]) {
  %a = call @add(%x, @c) : f32[4]
  %b = call @relu(%a) : f32[4]
  return %b
})");
  CHECK(p.at("x").storage == Storage::kInput);
  CHECK(p.at("x").storage_index == 0);
  CHECK(p.at("c").storage == Storage::kConstant);
  CHECK(p.at("a").storage == Storage::kArena);
  CHECK(p.at("b").storage == Storage::kOutput);
  CHECK(p.at("b").storage_index == 0);
  // The producer writes straight into the output: no copy.
  CHECK(p.ops() == std::vector<OpId>{OpId::kAdd, OpId::kRelu});
  CHECK(p.plan.outputs == std::vector<int>{p.id("b")});
}

TEST_CASE("views: reshape emits nothing and shares its input's storage") {
  Planned p = storage_of(R"(
func @f(%x: f32[2,6]) -> (f32[4,3]) {
  %a = call @relu(%x) : f32[2,6]
  %r = call @reshape(%a) : f32[3,4]
  %r2 = call @reshape(%r) : f32[12]
  %b = call @exp(%r2) : f32[12]
  %c = call @reshape(%b) : f32[4,3]
  return %c
})");
  CHECK(p.ops() == std::vector<OpId>{OpId::kRelu, OpId::kExp});
  CHECK(p.at("r").storage_root == p.id("a"));
  CHECK(p.at("r2").storage_root == p.id("a"));
  CHECK(p.at("r2").storage == Storage::kArena);
  // The returned view's producer (%b) writes into the output.
  CHECK(p.at("b").storage == Storage::kOutput);
  CHECK(p.at("c").storage == Storage::kOutput);
  CHECK(p.at("c").storage_root == p.id("b"));
  CHECK(p.plan.outputs == std::vector<int>{p.id("c")});
}

TEST_CASE("views: of an input and of a constant keep that storage") {
  Planned p = storage_of(R"(
const @k : f32[2,2] = dense [1, 2, 3, 4]
func @f(%x: f32[2,2]) -> (f32[4]) {
  %rx = call @reshape(%x) : f32[4]
  %rk = call @reshape(@k) : f32[4]
  %s = call @add(%rx, %rk) : f32[4]
  return %s
})");
  CHECK(p.at("rx").storage == Storage::kInput);
  CHECK(p.at("rx").storage_index == 0);
  CHECK(p.at("rk").storage == Storage::kConstant);
  CHECK(p.at("rk").storage_index == 0);
  CHECK(p.ops() == std::vector<OpId>{OpId::kAdd});
}

TEST_CASE("copies: returning an input") {
  Planned p = storage_of("func @f(%x: f32[3]) -> (f32[3]) { return %x }");
  REQUIRE(p.plan.program.size() == 1);
  CHECK(p.plan.program[0].op == OpId::kCopy);
  CHECK(p.plan.program[0].inputs == std::vector<int>{p.id("x")});
  const ValuePlan& out = p.plan.values[p.plan.outputs[0]];
  CHECK(out.storage == Storage::kOutput);
  CHECK(out.storage_index == 0);
  CHECK(p.value(p.plan.outputs[0]).type == TensorType{DType::kF32, {3}});
  CHECK(p.value(p.plan.outputs[0]).name == "x.out0");
  CHECK(p.fn().values.size() == 1);  // the copy is the plan's, not the graph's
  CHECK(p.at("x").storage == Storage::kInput);
}

TEST_CASE("copies: returning a donated input still copies (in place is a later pass)") {
  Planned p = storage_of("func @f(%x: f32[3] donate) -> (f32[3]) { return %x }");
  CHECK(p.ops() == std::vector<OpId>{OpId::kCopy});
}

TEST_CASE("copies: returning a constant") {
  Planned p = storage_of("const @c : f32[2] = dense [1, 2]\nfunc @f() -> (f32[2]) { return @c }");
  REQUIRE(p.plan.program.size() == 1);
  CHECK(p.plan.program[0].op == OpId::kCopy);
  CHECK(p.plan.values[p.plan.program[0].inputs[0]].storage == Storage::kConstant);
  CHECK(p.plan.values[p.plan.outputs[0]].storage == Storage::kOutput);
}

TEST_CASE("copies: one value returned twice is written once and copied once") {
  Planned p = storage_of(R"(
func @f(%x: f32[3]) -> (f32[3], f32[3]) {
  %a = call @relu(%x) : f32[3]
  return %a, %a
})");
  CHECK(p.ops() == std::vector<OpId>{OpId::kRelu, OpId::kCopy});
  CHECK(p.plan.outputs[0] == p.id("a"));
  CHECK(p.at("a").storage_index == 0);
  const ValuePlan& second = p.plan.values[p.plan.outputs[1]];
  CHECK(second.storage == Storage::kOutput);
  CHECK(second.storage_index == 1);
  CHECK(p.plan.program[1].inputs == std::vector<int>{p.id("a")});
}

TEST_CASE("copies: a value and a view of it returned together") {
  Planned p = storage_of(R"(
func @f(%x: f32[2,2]) -> (f32[2,2], f32[4]) {
  %a = call @relu(%x) : f32[2,2]
  %v = call @reshape(%a) : f32[4]
  return %a, %v
})");
  CHECK(p.ops() == std::vector<OpId>{OpId::kRelu, OpId::kCopy});
  CHECK(p.value(p.plan.outputs[1]).type == TensorType{DType::kF32, {4}});
}

TEST_CASE("copies: a view of an input returned") {
  Planned p = storage_of(R"(
func @f(%x: f32[2,2]) -> (f32[4]) {
  %v = call @reshape(%x) : f32[4]
  return %v
})");
  REQUIRE(p.ops() == std::vector<OpId>{OpId::kCopy});
  CHECK(p.plan.program[0].inputs == std::vector<int>{p.id("v")});
  CHECK(p.value(p.plan.outputs[0]).type == TensorType{DType::kF32, {4}});
}

TEST_CASE("donation: each donated input gets the first free output of its type") {
  Planned p = storage_of(R"(
func @f(%a: f32[4] donate, %b: f32[4] donate, %c: f32[4], %d: f32[2] donate) -> (f32[2,2], f32[4], f32[4]) {
  %s = call @add(%a, %b) : f32[4]
  %t = call @add(%s, %c) : f32[4]
  %r = call @reshape(%t) : f32[2,2]
  %u = call @mul(%s, %t) : f32[4]
  return %r, %s, %u
})");
  CHECK(p.plan.donated_to == std::vector<int>{1, 2, -1, -1});  // %c not donated, no f32[2] output
}

TEST_CASE("liveness: ranges run from the writer to one past the last reader") {
  Planned p = storage_of(R"(
func @f(%x: f32[4]) -> (f32[4]) {
  %a = call @relu(%x) : f32[4]
  %b = call @exp(%a) : f32[4]
  %c = call @neg(%b) : f32[4]
  %d = call @add(%a, %c) : f32[4]
  return %d
})");
  std::vector<LiveRange> ranges = compute_live_ranges(p.fn(), p.plan);
  REQUIRE(ranges.size() == 3);  // a, b, c; d is the output
  CHECK(ranges[0].root == p.id("a"));
  CHECK(ranges[0].buffer.lower == 0);
  CHECK(ranges[0].buffer.upper == 4);
  CHECK(ranges[1].buffer.lower == 1);
  CHECK(ranges[1].buffer.upper == 3);
  CHECK(ranges[2].buffer.lower == 2);
  CHECK(ranges[2].buffer.upper == 4);
  CHECK(ranges[0].buffer.size == 16);
}

TEST_CASE("liveness: a use through a view extends the root's range") {
  Planned p = storage_of(R"(
func @f(%x: f32[4]) -> (f32[4]) {
  %a = call @relu(%x) : f32[4]
  %b = call @exp(%x) : f32[4]
  %c = call @neg(%b) : f32[4]
  %v = call @reshape(%a) : f32[2,2]
  %w = call @reshape(%v) : f32[4]
  %d = call @add(%w, %c) : f32[4]
  return %d
})");
  std::vector<LiveRange> ranges = compute_live_ranges(p.fn(), p.plan);
  REQUIRE(ranges.size() == 3);
  CHECK(ranges[0].root == p.id("a"));
  CHECK(ranges[0].buffer.lower == 0);
  CHECK(ranges[0].buffer.upper == 4);  // read by %d (program index 3) through two views
}

TEST_CASE("liveness: a dead value still occupies its writing instruction") {
  Planned p = storage_of(R"(
func @f(%x: f32[4]) -> (f32[4]) {
  %dead = call @exp(%x) : f32[4]
  %a = call @relu(%x) : f32[4]
  return %a
})");
  std::vector<LiveRange> ranges = compute_live_ranges(p.fn(), p.plan);
  REQUIRE(ranges.size() == 1);
  CHECK(ranges[0].buffer.lower == 0);
  CHECK(ranges[0].buffer.upper == 1);
}

TEST_CASE("liveness: returned values live in their outputs, not the arena") {
  Planned p = storage_of(R"(
func @f(%x: f32[4]) -> (f32[4], f32[4]) {
  %a = call @relu(%x) : f32[4]
  %b = call @exp(%a) : f32[4]
  %v = call @reshape(%b) : f32[4]
  return %v, %a
})");
  // %b (through its view) is output 0 and %a output 1: nothing is left in the arena.
  CHECK(p.at("a").storage == Storage::kOutput);
  CHECK(p.at("a").storage_index == 1);
  CHECK(compute_live_ranges(p.fn(), p.plan).empty());
}

}  // namespace
}  // namespace hexir::compiler::testing
