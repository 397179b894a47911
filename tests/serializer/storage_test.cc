// assign_storage (views, outputs, copies, donation) and compute_live_ranges.
#include "test_util.h"

namespace hexir::serializer::testing {
namespace {

const Value& value_named(const Function& fn, std::string_view name) {
  for (const Value& v : fn.values)
    if (v.name == name) return v;
  FAIL("no value " << name);
  return fn.values.front();
}

int id_of(const Function& fn, std::string_view name) {
  return static_cast<int>(&value_named(fn, name) - fn.values.data());
}

Function storage_of(std::string_view source) {
  Module m = parse_ok(source);
  assign_storage(m.functions[0]);
  return std::move(m.functions[0]);
}

std::vector<ops::OpId> program_kernels(const Function& fn) {
  std::vector<ops::OpId> out;
  for (const Instruction& inst : fn.program) out.push_back(inst.kernel);
  return out;
}

using ops::OpId;

TEST_CASE("storage: inputs, constants, arena values and the output") {
  Function fn = storage_of(R"(
const @c : f32[4] = splat 1
func @f(%x: f32[4]) -> (f32[4]) {
  %a = call @add(%x, @c) : f32[4]
  %b = call @relu(%a) : f32[4]
  return %b
})");
  CHECK(value_named(fn, "x").storage == Storage::kInput);
  CHECK(value_named(fn, "x").storage_index == 0);
  CHECK(value_named(fn, "c").storage == Storage::kConstant);
  CHECK(value_named(fn, "a").storage == Storage::kArena);
  CHECK(value_named(fn, "b").storage == Storage::kOutput);
  CHECK(value_named(fn, "b").storage_index == 0);
  // The producer writes straight into the output: no copy.
  CHECK(program_kernels(fn) == std::vector<OpId>{OpId::kAdd, OpId::kRelu});
  CHECK(fn.outputs == std::vector<int>{id_of(fn, "b")});
}

TEST_CASE("views: reshape emits nothing and shares its input's storage") {
  Function fn = storage_of(R"(
func @f(%x: f32[2,6]) -> (f32[4,3]) {
  %a = call @relu(%x) : f32[2,6]
  %r = call @reshape(%a) : f32[3,4]
  %r2 = call @reshape(%r) : f32[12]
  %b = call @exp(%r2) : f32[12]
  %c = call @reshape(%b) : f32[4,3]
  return %c
})");
  CHECK(program_kernels(fn) == std::vector<OpId>{OpId::kRelu, OpId::kExp});
  CHECK(value_named(fn, "r").storage_root == id_of(fn, "a"));
  CHECK(value_named(fn, "r2").storage_root == id_of(fn, "a"));
  CHECK(value_named(fn, "r2").storage == Storage::kArena);
  // The returned view's producer (%b) writes into the output.
  CHECK(value_named(fn, "b").storage == Storage::kOutput);
  CHECK(value_named(fn, "c").storage == Storage::kOutput);
  CHECK(value_named(fn, "c").storage_root == id_of(fn, "b"));
  CHECK(fn.outputs == std::vector<int>{id_of(fn, "c")});
}

TEST_CASE("views: of an input and of a constant keep that storage") {
  Function fn = storage_of(R"(
const @k : f32[2,2] = dense [1, 2, 3, 4]
func @f(%x: f32[2,2]) -> (f32[4]) {
  %rx = call @reshape(%x) : f32[4]
  %rk = call @reshape(@k) : f32[4]
  %s = call @add(%rx, %rk) : f32[4]
  return %s
})");
  CHECK(value_named(fn, "rx").storage == Storage::kInput);
  CHECK(value_named(fn, "rx").storage_index == 0);
  CHECK(value_named(fn, "rk").storage == Storage::kConstant);
  CHECK(value_named(fn, "rk").storage_index == 0);
  CHECK(program_kernels(fn) == std::vector<OpId>{OpId::kAdd});
}

TEST_CASE("copies: returning an input") {
  Function fn = storage_of("func @f(%x: f32[3]) -> (f32[3]) { return %x }");
  REQUIRE(fn.program.size() == 1);
  CHECK(fn.program[0].kernel == OpId::kCopy);
  CHECK(fn.program[0].inputs == std::vector<int>{id_of(fn, "x")});
  const Value& out = fn.values[fn.outputs[0]];
  CHECK(out.storage == Storage::kOutput);
  CHECK(out.storage_index == 0);
  CHECK(out.type == TensorType{DType::kF32, {3}});
  CHECK(value_named(fn, "x").storage == Storage::kInput);
}

TEST_CASE("copies: returning a donated input still copies (in place is a later pass)") {
  Function fn = storage_of("func @f(%x: f32[3] donate) -> (f32[3]) { return %x }");
  CHECK(program_kernels(fn) == std::vector<OpId>{OpId::kCopy});
}

TEST_CASE("copies: returning a constant") {
  Function fn = storage_of("const @c : f32[2] = dense [1, 2]\nfunc @f() -> (f32[2]) { return @c }");
  REQUIRE(fn.program.size() == 1);
  CHECK(fn.program[0].kernel == OpId::kCopy);
  CHECK(fn.values[fn.program[0].inputs[0]].storage == Storage::kConstant);
  CHECK(fn.values[fn.outputs[0]].storage == Storage::kOutput);
}

TEST_CASE("copies: one value returned twice is written once and copied once") {
  Function fn = storage_of(R"(
func @f(%x: f32[3]) -> (f32[3], f32[3]) {
  %a = call @relu(%x) : f32[3]
  return %a, %a
})");
  CHECK(program_kernels(fn) == std::vector<OpId>{OpId::kRelu, OpId::kCopy});
  CHECK(fn.outputs[0] == id_of(fn, "a"));
  CHECK(value_named(fn, "a").storage_index == 0);
  const Value& second = fn.values[fn.outputs[1]];
  CHECK(second.storage == Storage::kOutput);
  CHECK(second.storage_index == 1);
  CHECK(fn.program[1].inputs == std::vector<int>{id_of(fn, "a")});
}

TEST_CASE("copies: a value and a view of it returned together") {
  Function fn = storage_of(R"(
func @f(%x: f32[2,2]) -> (f32[2,2], f32[4]) {
  %a = call @relu(%x) : f32[2,2]
  %v = call @reshape(%a) : f32[4]
  return %a, %v
})");
  CHECK(program_kernels(fn) == std::vector<OpId>{OpId::kRelu, OpId::kCopy});
  CHECK(fn.values[fn.outputs[1]].type == TensorType{DType::kF32, {4}});
}

TEST_CASE("copies: a view of an input returned") {
  Function fn = storage_of(R"(
func @f(%x: f32[2,2]) -> (f32[4]) {
  %v = call @reshape(%x) : f32[4]
  return %v
})");
  REQUIRE(program_kernels(fn) == std::vector<OpId>{OpId::kCopy});
  CHECK(fn.program[0].inputs == std::vector<int>{id_of(fn, "v")});
  CHECK(fn.values[fn.outputs[0]].type == TensorType{DType::kF32, {4}});
}

TEST_CASE("donation: each donated input gets the first free output of its type") {
  Module m = parse_ok(R"(
func @f(%a: f32[4] donate, %b: f32[4] donate, %c: f32[4], %d: f32[2] donate) -> (f32[2,2], f32[4], f32[4]) {
  %s = call @add(%a, %b) : f32[4]
  %t = call @add(%s, %c) : f32[4]
  %r = call @reshape(%t) : f32[2,2]
  %u = call @mul(%s, %t) : f32[4]
  return %r, %s, %u
})");
  Function& fn = m.functions[0];
  assign_storage(fn);
  CHECK(fn.arguments[0].donated_to == 1);
  CHECK(fn.arguments[1].donated_to == 2);
  CHECK(fn.arguments[2].donated_to == -1);  // not donated
  CHECK(fn.arguments[3].donated_to == -1);  // no f32[2] output
}

TEST_CASE("liveness: ranges run from the writer to one past the last reader") {
  Function fn = storage_of(R"(
func @f(%x: f32[4]) -> (f32[4]) {
  %a = call @relu(%x) : f32[4]
  %b = call @exp(%a) : f32[4]
  %c = call @neg(%b) : f32[4]
  %d = call @add(%a, %c) : f32[4]
  return %d
})");
  std::vector<LiveRange> ranges = compute_live_ranges(fn);
  REQUIRE(ranges.size() == 3);  // a, b, c; d is the output
  CHECK(ranges[0].root == id_of(fn, "a"));
  CHECK(ranges[0].buffer.lower == 0);
  CHECK(ranges[0].buffer.upper == 4);
  CHECK(ranges[1].buffer.lower == 1);
  CHECK(ranges[1].buffer.upper == 3);
  CHECK(ranges[2].buffer.lower == 2);
  CHECK(ranges[2].buffer.upper == 4);
  CHECK(ranges[0].buffer.size == 16);
}

TEST_CASE("liveness: a use through a view extends the root's range") {
  Function fn = storage_of(R"(
func @f(%x: f32[4]) -> (f32[4]) {
  %a = call @relu(%x) : f32[4]
  %b = call @exp(%x) : f32[4]
  %c = call @neg(%b) : f32[4]
  %v = call @reshape(%a) : f32[2,2]
  %w = call @reshape(%v) : f32[4]
  %d = call @add(%w, %c) : f32[4]
  return %d
})");
  std::vector<LiveRange> ranges = compute_live_ranges(fn);
  REQUIRE(ranges.size() == 3);
  CHECK(ranges[0].root == id_of(fn, "a"));
  CHECK(ranges[0].buffer.lower == 0);
  CHECK(ranges[0].buffer.upper == 4);  // read by %d (program index 3) through two views
}

TEST_CASE("liveness: a dead value still occupies its writing instruction") {
  Function fn = storage_of(R"(
func @f(%x: f32[4]) -> (f32[4]) {
  %dead = call @exp(%x) : f32[4]
  %a = call @relu(%x) : f32[4]
  return %a
})");
  std::vector<LiveRange> ranges = compute_live_ranges(fn);
  REQUIRE(ranges.size() == 1);
  CHECK(ranges[0].buffer.lower == 0);
  CHECK(ranges[0].buffer.upper == 1);
}

TEST_CASE("liveness: returned values live in their outputs, not the arena") {
  Function fn = storage_of(R"(
func @f(%x: f32[4]) -> (f32[4], f32[4]) {
  %a = call @relu(%x) : f32[4]
  %b = call @exp(%a) : f32[4]
  %v = call @reshape(%b) : f32[4]
  return %v, %a
})");
  // %b (through its view) is output 0 and %a output 1: nothing is left in the arena.
  CHECK(value_named(fn, "a").storage == Storage::kOutput);
  CHECK(value_named(fn, "a").storage_index == 1);
  CHECK(compute_live_ranges(fn).empty());
}

}  // namespace
}  // namespace hexir::serializer::testing
