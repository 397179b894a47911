// Nodes with several results (split): the text form, result types, storage
// and liveness of every output, in place over one of them, and what the
// writer emits (one instruction: its inputs, then its outputs).
#include "test_util.h"

namespace hexir::compiler::testing {
namespace {

using ops::OpId;

void check_error(std::string_view source, int line, int col, std::string_view what) {
  std::string message = parse_error(source);
  std::string where = "t.hxir:" + std::to_string(line) + ":" + std::to_string(col) + ": ";
  INFO("source:\n", source, "\nmessage: ", message);
  REQUIRE(!message.empty());
  CHECK(message.rfind(where, 0) == 0);
  CHECK(message.find(what) != std::string::npos);
}

constexpr const char* kSplit = R"(
func @f(%x: f32[2,6]) -> (f32[2,3]) {
  %a, %b = call @split(%x) {axis = 1} : f32[2,3], f32[2,3]
  %c = call @add(%a, %b) : f32[2,3]
  return %c
}
)";

TEST_CASE("split: one node, one value per result, each with its type") {
  Module m = parse_ok(kSplit);
  const Function& fn = m.functions[0];
  REQUIRE(fn.nodes.size() == 2);
  const Node& split = fn.nodes[0];
  CHECK(split.op == OpId::kSplit);
  CHECK(split.params == std::vector<int64_t>{1, 3, 3});
  REQUIRE(split.results.size() == 2);
  const Value& a = fn.values[split.results[0]];
  const Value& b = fn.values[split.results[1]];
  CHECK(a.name == "a");
  CHECK(b.name == "b");
  CHECK(a.type == TensorType{DType::kF32, {2, 3}});
  CHECK(b.type == TensorType{DType::kF32, {2, 3}});
  CHECK(a.node == 0);
  CHECK(b.node == 0);
  CHECK(a.result == 0);
  CHECK(b.result == 1);
  CHECK(a.loc.to_string() == "t.hxir:3:3");
  CHECK(b.loc.to_string() == "t.hxir:3:7");
  CHECK(fn.nodes[1].inputs == std::vector<int>{split.results[0], split.results[1]});
}

TEST_CASE("split: unequal parts from sizes, any axis, three results") {
  Module m = parse_ok(R"(
func @f(%x: i32[4,2]) -> (i32[1,2], i32[2,2], i32[1,2]) {
  %p, %q, %r = call @split(%x) {axis = 0, sizes = [1, 2, 1]} : i32[1,2], i32[2,2], i32[1,2]
  return %p, %q, %r
})");
  const Node& split = m.functions[0].nodes[0];
  CHECK(split.params == std::vector<int64_t>{0, 1, 2, 1});
  CHECK(split.results.size() == 3);
  CHECK(m.functions[0].values[split.results[1]].type == TensorType{DType::kI32, {2, 2}});
}

TEST_CASE("split: errors name the result types or names they are about") {
  // One type per name.
  check_error(
      "func @f(%x: f32[2,6]) -> (f32[2,3]) {\n  %a, %b = call @split(%x) {axis = 1} : f32[2,3]\n  return "
      "%a\n}",
      3, 3, "expected 2 result types (one per name), got 1");
  // A declared type that is not the rule's, pointing at that type.
  check_error(
      "func @f(%x: f32[2,6]) -> (f32[2,3]) {\n  %a, %b = call @split(%x) {axis = 1} : f32[2,3], f32[2,4]\n  "
      "return "
      "%a\n}",
      2, 51,
      "declared result type f32[2,4] (result 1) does not match @split's shape rule, which gives f32[2,3]");
  // The rule gives more results than are named.
  check_error(
      "func @f(%x: f32[2,6]) -> (f32[2,3]) {\n  %a, %b = call @split(%x) {axis = 1, sizes = [2, 2, 2]} : "
      "f32[2,2], "
      "f32[2,2]\n  return %a\n}",
      2, 60, "2 result type(s) declared, @split gives 3");
  // A single-result operator named twice.
  check_error("func @f(%x: f32[2]) -> (f32[2]) {\n  %a, %b = call @relu(%x) : f32[2], f32[2]\n  return %a\n}",
              2, 29, "2 result type(s) declared, @relu gives 1");
  check_error(
      "func @f(%x: f32[2,6]) -> (f32[2,3]) {\n  %a, %a = call @split(%x) {axis = 1} : f32[2,3], f32[2,3]\n  "
      "return "
      "%a\n}",
      2, 7, "redefinition of %a (first defined at 2:3)");
  check_error(
      "func @f(%x: f32[2,6]) -> (f32[2,3]) {\n  %a, %x = call @split(%x) {axis = 1} : f32[2,3], f32[2,3]\n  "
      "return "
      "%a\n}",
      2, 7, "redefinition of %x (first defined at 1:9)");
  check_error("func @f(%x: f32[2,6]) -> (f32[2,3]) {\n  %a, = call @split(%x) : f32[2,3]\n}", 2, 7,
              "expected another result name like %b after ','");
  check_error(
      "func @f(%x: f32[2,6]) -> (f32[2,3]) {\n  %a, %b = call @split(%x) {axis = 1} f32[2,3]\n  return %a\n}",
      2, 39, "expected ':' and the result types after the call");
}

Planned planned(std::string_view source, bool in_place = true, Schedule schedule = Schedule::kSource) {
  Planned p;
  p.module = parse_ok(source);
  const Function& fn = p.fn();
  assign_storage(fn, p.plan);
  if (schedule == Schedule::kMemory) schedule_for_memory(fn, p.plan);
  assign_in_place(fn, p.plan, in_place);
  place_donations(fn, p.plan);
  record_last_uses(fn, p.plan);
  record_workspaces(fn, p.plan);
  std::string heuristic;
  REQUIRE(plan_function_arena(fn, p.plan, PlanStrategy::kArena, 64, &heuristic).ok());
  return p;
}

TEST_CASE("split: one instruction with every output, each its own arena buffer") {
  Planned p = planned(kSplit);
  REQUIRE(p.plan.program.size() == 2);
  const Instruction& split = p.plan.program[0];
  CHECK(split.op == OpId::kSplit);
  CHECK(split.inputs == std::vector<int>{p.id("x")});
  CHECK(split.outputs == std::vector<int>{p.id("a"), p.id("b")});
  CHECK(split.alias_mask == 0);
  CHECK(p.at("a").storage == Storage::kArena);
  CHECK(p.at("b").storage == Storage::kArena);
  CHECK(p.at("a").storage_root == p.id("a"));
  CHECK(p.at("b").storage_root == p.id("b"));
  CHECK(p.at("a").arena_offset != p.at("b").arena_offset);
  CHECK(p.at("a").last_use == 1);
  CHECK(p.at("b").last_use == 1);
  // Both are live from the split to the add (which writes the output, so never in place over them).
  std::vector<LiveRange> ranges = compute_live_ranges(p.fn(), p.plan);
  REQUIRE(ranges.size() == 2);
  for (const LiveRange& r : ranges) {
    CHECK(r.buffer.lower == 0);
    CHECK(r.buffer.upper == 2);
    CHECK(r.buffer.size == 24);
  }
  CHECK(p.plan.lower_bound == 48);
}

TEST_CASE("split: an output nobody reads still gets a buffer for the write") {
  Planned p = planned(R"(
func @f(%x: f32[2,6]) -> (f32[2,2]) {
  %a, %unused, %c = call @split(%x) {axis = 1} : f32[2,2], f32[2,2], f32[2,2]
  %d = call @relu(%a) : f32[2,2]
  %e = call @mul(%d, %c) : f32[2,2]
  return %e
})");
  CHECK(p.at("unused").storage == Storage::kArena);
  CHECK(p.at("unused").last_use == 0);  // its writer
  std::vector<LiveRange> ranges = compute_live_ranges(p.fn(), p.plan);
  bool found = false;
  for (const LiveRange& r : ranges) {
    if (r.root != p.id("unused")) continue;
    found = true;
    CHECK(r.buffer.lower == 0);
    CHECK(r.buffer.upper == 1);
  }
  CHECK(found);
  // relu runs in place over %a (its last use, same size); the split itself never does.
  CHECK(p.plan.program[0].alias_mask == 0);
  CHECK(p.plan.program[1].alias_mask == 1);
  CHECK(buffer_head(p.plan, p.id("d")) == p.id("a"));
  // Three 16-byte outputs live at the split, then a/d and c.
  CHECK(p.plan.lower_bound == 48);
}

TEST_CASE("split: outputs returned directly are written into the caller's buffers") {
  Planned p = planned(R"(
func @f(%x: f32[4]) -> (f32[2], f32[2], f32[2]) {
  %a, %b = call @split(%x) : f32[2], f32[2]
  return %b, %a, %b
})");
  CHECK(p.ops() == std::vector<OpId>{OpId::kSplit, OpId::kCopy});
  CHECK(p.at("b").storage == Storage::kOutput);
  CHECK(p.at("b").storage_index == 0);
  CHECK(p.at("a").storage == Storage::kOutput);
  CHECK(p.at("a").storage_index == 1);
  CHECK(p.plan.program[1].inputs == std::vector<int>{p.id("b")});
  CHECK(p.plan.arena_size == 0);
}

TEST_CASE("split: the memory schedule keeps every output's readers after it") {
  constexpr const char* kSource = R"(
func @f(%x: f32[8,64]) -> (f32[]) {
  %a, %b = call @split(%x) {axis = 0} : f32[4,64], f32[4,64]
  %w = call @exp(%x) : f32[8,64]
  %sa = call @reduce_sum(%a) : f32[]
  %sb = call @reduce_sum(%b) : f32[]
  %sw = call @reduce_sum(%w) : f32[]
  %t = call @add(%sa, %sb) : f32[]
  %u = call @add(%t, %sw) : f32[]
  return %u
})";
  Planned memory = planned(kSource, true, Schedule::kMemory);
  std::vector<bool> written(memory.plan.values.size(), false);
  for (size_t v = 0; v < written.size(); ++v)
    written[v] = memory.value(static_cast<int>(v)).kind != ValueKind::kResult;
  for (const Instruction& inst : memory.plan.program) {
    for (int input : inst.inputs) CHECK(written[memory.plan.values[input].storage_root]);
    for (int output : inst.outputs) written[output] = true;
  }
  Planned source = planned(kSource);
  CHECK(memory.plan.lower_bound <= source.plan.lower_bound);
}

TEST_CASE("split: the writer emits inputs then outputs in one instruction") {
  std::vector<uint8_t> bytes = compile_ok(kSplit);
  const fb::Module* m = module_of(bytes);
  const fb::Function* f = m->functions()->Get(0);
  REQUIRE(kernel_names(m, f) == std::vector<std::string>{"split", "add"});
  const fb::Instruction* split = m->instructions()->Get(f->instruction_begin());
  CHECK(split->input_count() == 1);
  CHECK(split->operand_count() == 3);
  CHECK(split->alias_mask() == 0);
  REQUIRE(split->param_count() == 3);
  CHECK(m->param_pool()->Get(split->param_begin()) == 1);
  CHECK(m->param_pool()->Get(split->param_begin() + 1) == 3);
  std::vector<std::string> operands;
  for (uint32_t i = 0; i < split->operand_count(); ++i)
    operands.push_back(m->slots()->Get(m->operand_pool()->Get(split->operand_begin() + i))->name()->str());
  CHECK(operands == std::vector<std::string>{"x", "a", "b"});
  const fb::Instruction* add = m->instructions()->Get(f->instruction_begin() + 1);
  CHECK(add->operand_begin() == split->operand_begin() + 3);
  CHECK(add->operand_count() == 3);
  for (const fb::Slot* s : *m->slots()) {
    if (s->name()->str() != "a" && s->name()->str() != "b") continue;
    CHECK(s->storage() == fb::StorageKind::Arena);
    CHECK(s->last_use() == 1);
  }
}

TEST_CASE("split: built without text, names made up per result") {
  GraphBuilder b;
  REQUIRE(b.begin_function("f").ok());
  const int x = *b.add_input("x", TensorType{DType::kF32, {6}});
  ops::AttrMap attrs;
  attrs["sizes"] = ops::AttrValue{std::vector<ops::AttrValue>{{int64_t{1}}, {int64_t{5}}}};
  Result<std::vector<int>> parts = b.add_node(OpId::kSplit, {x}, attrs);
  REQUIRE(parts.ok());
  REQUIRE(parts->size() == 2);
  CHECK(b.value((*parts)[0]).name == "split_0.0");
  CHECK(b.value((*parts)[1]).name == "split_0.1");
  CHECK(b.value((*parts)[1]).type == TensorType{DType::kF32, {5}});
  // Equal parts need the result count: from declared types.
  Result<std::vector<int>> halves =
      b.add_node(OpId::kSplit, {x}, {}, {TensorType{DType::kF32, {3}}, TensorType{DType::kF32, {3}}});
  REQUIRE(halves.ok());
  CHECK(halves->size() == 2);
  Status no_count = b.add_node(OpId::kSplit, {x}).status();
  CHECK(no_count.message().find("needs attribute 'sizes' or stated result types") != std::string::npos);
  REQUIRE(b.set_outputs({(*parts)[1], (*halves)[0]}).ok());
  REQUIRE(b.end_function().ok());
  Result<Module> m = b.finish();
  REQUIRE(m.ok());
  CHECK(compile_module(*m).ok());
}

}  // namespace
}  // namespace hexir::compiler::testing
