// In place (alias bits), donation, free-at-last-use and the memory schedule:
// what the serializer emits, and that every file it writes verifies.
#include <algorithm>

#include "hexir/compiler/hxir.h"
#include "test_util.h"

namespace hexir::compiler::testing {
namespace {

using ops::OpId;

// Runs the passes in compile_source's order (without scratch planning).
Planned planned(std::string_view source, bool in_place = true, PlanStrategy plan = PlanStrategy::kArena,
                Schedule schedule = Schedule::kSource) {
  Planned p;
  p.module = parse_ok(source);
  const Function& fn = p.fn();
  assign_storage(fn, p.plan);
  if (schedule == Schedule::kMemory) schedule_for_memory(fn, p.plan);
  if (in_place) assign_in_place(fn, p.plan);
  place_donations(fn, p.plan, in_place);
  record_last_uses(fn, p.plan);
  std::string heuristic;
  Status s = plan_function_arena(fn, p.plan, plan, 64, &heuristic);
  INFO(s.to_string());
  REQUIRE(s.ok());
  return p;
}

// The alias mask of the instruction writing `name`.
uint32_t mask_of(const Planned& p, std::string_view name) {
  const int id = p.id(name);
  for (const Instruction& inst : p.plan.program)
    if (inst.outputs[0] == id) return inst.alias_mask;
  FAIL("no instruction writes " << name);
  return 0;
}

void check_compiles_and_verifies(std::string_view source, const CompileOptions& options = {}) {
  std::vector<uint8_t> bytes = compile_ok(source, options);
  Result<format::VerifiedModule> v = format::verify_executable(bytes);
  CHECK_MESSAGE(v.ok(), v.status().to_string());
}

TEST_CASE("donation: an update chain on a donated cache runs in its buffer, first link to last") {
  // The decode step's KV cache: two updates with reads of the cache between
  // them. Every update runs in the caller's buffer: no copy in, none out.
  constexpr const char* kSource = R"(
const @zero : i64[] = splat 0
const @one : i64[] = splat 1
func @f(%cache: f32[2,8] donate, %row: f32[1,8], %pos: i64[]) -> (f32[8], f32[2,8]) {
  %c1 = call @update_slice(%cache, %row, @zero, @zero) : f32[2,8]
  %s1 = call @reduce_sum(%c1) {axes = [0]} : f32[8]
  %r2 = call @mul(%row, %row) : f32[1,8]
  %c2 = call @update_slice(%c1, %r2, @one, @zero) : f32[2,8]
  %s2 = call @reduce_sum(%c2) {axes = [0]} : f32[8]
  %s = call @add(%s1, %s2) : f32[8]
  return %s, %c2
})";
  Planned p = planned(kSource);
  CHECK(mask_of(p, "c1") == 1);
  CHECK(mask_of(p, "c2") == 1);
  CHECK(buffer_head(p.plan, p.id("c2")) == p.id("cache"));
  CHECK(p.plan.values[static_cast<size_t>(p.id("c1"))].storage == Storage::kInput);
  CHECK(p.plan.donated_to[0] == 1);
  check_compiles_and_verifies(kSource);
  // Without in-place results the donation is the last update writing into
  // the caller's buffer only; the first stays an arena copy.
  Planned q = planned(kSource, /*in_place=*/false);
  CHECK(mask_of(q, "c1") == 0);
  CHECK(q.plan.values[static_cast<size_t>(q.id("c1"))].storage == Storage::kArena);
  // The original cache read after the first update: no chain from it.
  constexpr const char* kReadLater = R"(
const @zero : i64[] = splat 0
func @f(%cache: f32[2,8] donate, %row: f32[1,8]) -> (f32[2,8], f32[2,8]) {
  %c1 = call @update_slice(%cache, %row, @zero, @zero) : f32[2,8]
  %c2 = call @update_slice(%c1, %row, @zero, @zero) : f32[2,8]
  %old = call @neg(%cache) : f32[2,8]
  return %old, %c2
})";
  Planned r = planned(kReadLater);
  CHECK(mask_of(r, "c1") == 0);
  CHECK(buffer_head(r.plan, r.id("c2")) != r.id("cache"));
  check_compiles_and_verifies(kReadLater);
}

TEST_CASE("in place: a chain of elementwise results shares one buffer") {
  constexpr const char* kSource = R"(
func @f(%x: f32[64]) -> (f32[64]) {
  %a = call @relu(%x) : f32[64]
  %b = call @exp(%a) : f32[64]
  %c = call @neg(%b) : f32[64]
  %d = call @sqrt(%c) : f32[64]
  return %d
})";
  Planned p = planned(kSource);
  CHECK(mask_of(p, "a") == 0);  // never the (not donated) input
  CHECK(mask_of(p, "b") == 1);
  CHECK(mask_of(p, "c") == 1);
  CHECK(mask_of(p, "d") == 0);  // bound to the output: its own buffer
  CHECK(buffer_head(p.plan, p.id("c")) == p.id("a"));
  CHECK(p.at("c").arena_offset == p.at("a").arena_offset);
  CHECK(p.plan.arena_size == 256);
  CHECK(p.plan.lower_bound == 256);
  Planned without = planned(kSource, /*in_place=*/false);
  CHECK(without.plan.lower_bound == 512);  // a value and its successor overlap at the instruction
  CHECK(without.plan.arena_size == 512);
  check_compiles_and_verifies(kSource);
}

TEST_CASE("in place: never a constant or a non-donated input") {
  constexpr const char* kSource = R"(
const @c : f32[8] = dense [1, 2, 3, 4, 5, 6, 7, 8]
func @f(%x: f32[8]) -> (f32[8]) {
  %a = call @add(@c, %x) : f32[8]
  %b = call @mul(%a, %a) : f32[8]
  return %b
})";
  Planned p = planned(kSource);
  CHECK(mask_of(p, "a") == 0);
  CHECK(p.at("a").buffer_prev == -1);
  check_compiles_and_verifies(kSource);
}

TEST_CASE("in place: not over a value read later, directly or through a view") {
  constexpr const char* kSource = R"(
func @f(%x: f32[16]) -> (f32[16]) {
  %a = call @relu(%x) : f32[16]
  %v = call @reshape(%a) : f32[4,4]
  %b = call @exp(%a) : f32[16]
  %w = call @reshape(%b) : f32[4,4]
  %c = call @add(%v, %w) : f32[4,4]
  %r = call @reshape(%c) : f32[16]
  %d = call @neg(%r) : f32[16]
  %e = call @add(%d, %x) : f32[16]
  return %e
})";
  Planned p = planned(kSource);
  CHECK(mask_of(p, "b") == 0);  // %a is still read through %v
  // %c may take either operand's buffer: both are last uses of the same size.
  CHECK(mask_of(p, "c") == 1);
  CHECK(mask_of(p, "d") == 1);  // over %c, through its view %r
  CHECK(mask_of(p, "e") == 0);  // bound to the output
  check_compiles_and_verifies(kSource);
}

TEST_CASE("in place: the same value as two operands sets both bits") {
  Planned p = planned(R"(
func @f(%x: f32[16]) -> (f32[16]) {
  %a = call @relu(%x) : f32[16]
  %b = call @mul(%a, %a) : f32[16]
  %c = call @neg(%b) : f32[16]
  return %c
})");
  CHECK(mask_of(p, "b") == 0b11);
}

TEST_CASE("in place: never into an input of another size (broadcast)") {
  constexpr const char* kSource = R"(
func @f(%x: f32[4], %y: f32[3,4]) -> (f32[3,4]) {
  %a = call @relu(%x) : f32[4]
  %s = call @exp(%y) : f32[3,4]
  %b = call @add(%a, %s) : f32[3,4]
  %c = call @neg(%b) : f32[3,4]
  return %c
})";
  Planned p = planned(kSource);
  CHECK(mask_of(p, "b") == 0b10);  // %s has the result's size; %a (16 bytes) does not
  check_compiles_and_verifies(kSource);
}

TEST_CASE("in place: only kernels that may run in place") {
  Planned p = planned(R"(
func @f(%x: f32[4,4]) -> (f32[4,4]) {
  %a = call @relu(%x) : f32[4,4]
  %t = call @transpose(%a) : f32[4,4]
  %m = call @matmul(%t, %t) : f32[4,4]
  %s = call @softmax(%m) : f32[4,4]
  %c = call @neg(%s) : f32[4,4]
  return %c
})");
  CHECK(mask_of(p, "t") == 0);
  CHECK(mask_of(p, "m") == 0);
  CHECK(mask_of(p, "s") == 1);
}

TEST_CASE("views: chains of views of an input, a constant and an output keep that storage") {
  constexpr const char* kSource = R"(
const @c : f32[2,6] = splat 2
func @f(%x: f32[2,6]) -> (f32[3,4], f32[12]) {
  %xv = call @reshape(%x) : f32[3,4]
  %xw = call @reshape(%xv) : f32[12]
  %cv = call @reshape(@c) : f32[12]
  %cw = call @reshape(%cv) : f32[4,3]
  %s = call @add(%xw, %cv) : f32[12]
  %sv = call @reshape(%s) : f32[2,6]
  %t = call @mul(%sv, %x) : f32[2,6]
  %o = call @reshape(%t) : f32[6,2]
  %p = call @reshape(%o) : f32[3,4]
  %q = call @reshape(%cw) : f32[12]
  %r = call @add(%q, %s) : f32[12]
  return %p, %r
})";
  Planned p = planned(kSource);
  CHECK(p.at("xw").storage == Storage::kInput);
  CHECK(p.at("xw").storage_root == p.id("x"));
  CHECK(p.at("q").storage == Storage::kConstant);
  CHECK(p.at("q").storage_root == p.id("c"));
  CHECK(p.at("p").storage == Storage::kOutput);
  CHECK(p.at("p").storage_root == p.id("t"));
  // %t is an output: %s stays alive (read by %r) so nothing runs in place over it.
  CHECK(mask_of(p, "t") == 0);
  check_compiles_and_verifies(kSource);
  // The views are slots of their own that name their root.
  std::vector<uint8_t> bytes = compile_ok(kSource);
  const fb::Module* m = module_of(bytes);
  int views = 0;
  for (const fb::Slot* s : *m->slots()) {
    if (s->view_of() < 0) continue;
    ++views;
    const fb::Slot* root = m->slots()->Get(static_cast<uint32_t>(s->view_of()));
    CHECK(root->view_of() == -1);
    CHECK(root->storage() == s->storage());
  }
  CHECK(views == 8);
}

constexpr const char* kStep = R"(
func @step(%cache: f32[64,128] donate, %row: f32[1,128]) -> (f32[64,128]) {
  %c = call @add(%cache, %row) : f32[64,128]
  return %c
})";

TEST_CASE("donation: an in-place add writes the caller's cache") {
  Planned p = planned(kStep);
  CHECK(p.plan.donated_to[0] == 0);
  CHECK(mask_of(p, "c") == 1);
  CHECK(p.at("c").storage == Storage::kInput);
  CHECK(p.at("c").storage_index == 0);
  CHECK(p.plan.arena_size == 0);

  std::vector<uint8_t> bytes = compile_ok(kStep);
  const fb::Module* m = module_of(bytes);
  const fb::Function* step = function_named(m, "step");
  CHECK(step->inputs()->Get(0)->donated_to() == 0);
  const fb::Slot* out = m->slots()->Get(step->outputs()->Get(0)->slot());
  CHECK(out->storage() == fb::StorageKind::Input);
  CHECK(out->usage() == fb::SlotUsage::Donated);
  CHECK(m->instructions()->Get(step->instruction_begin())->alias_mask() == 1);
  CHECK(format::verify_executable(bytes).ok());
}

TEST_CASE("donation: a result written straight into the donated buffer after its last read") {
  constexpr const char* kSource = R"(
func @f(%cache: f32[4,4] donate, %x: f32[4,4]) -> (f32[4,4]) {
  %a = call @matmul(%cache, %x) : f32[4,4]
  %b = call @transpose(%a) : f32[4,4]
  return %b
})";
  Planned p = planned(kSource);
  CHECK(p.plan.donated_to[0] == 0);
  CHECK(mask_of(p, "b") == 0);
  CHECK(p.at("b").storage == Storage::kInput);
  check_compiles_and_verifies(kSource);
}

TEST_CASE("donation: refused with the input, the output and why when the input is read where its output is written") {
  constexpr const char* kSource = R"(
func @f(%cache: f32[4,4] donate, %x: f32[4,4]) -> (f32[4,4]) {
  %a = call @matmul(%cache, %x) : f32[4,4]
  return %a
})";
  Planned p = planned(kSource);
  CHECK(p.plan.donated_to[0] == -1);
  CHECK(p.plan.donation_refused[0] ==
        " to output 0 'a': the input is read by `matmul` (instruction 0) while it writes the output (an operator "
        "that cannot run in place)");
  auto bytes = compile_source(kSource, "t.hxir", ".");
  REQUIRE_FALSE(bytes.ok());
  CHECK(bytes.status().message() ==
        "t.hxir: function @f: input %cache cannot be donated to output 0 'a': the input is read by `matmul` "
        "(instruction 0) while it writes the output (an operator that cannot run in place)");
}

TEST_CASE("donation: refused when the input is read after its output is written, or no output fits") {
  constexpr const char* kReadAfter = R"(
func @f(%cache: f32[4] donate, %x: f32[4]) -> (f32[4], f32[4]) {
  %a = call @relu(%x) : f32[4]
  %b = call @add(%cache, %x) : f32[4]
  return %a, %b
})";
  // Implicitly the output whose writer reads the input: b (output 1), not a.
  Planned p = planned(kReadAfter);
  CHECK(p.plan.donated_to[0] == 1);
  CHECK(p.plan.donation_refused[0].empty());
  constexpr const char* kExplicit = R"(
func @f(%cache: f32[4] donate(0), %x: f32[4]) -> (f32[4], f32[4]) {
  %a = call @relu(%x) : f32[4]
  %b = call @add(%cache, %x) : f32[4]
  return %a, %b
})";
  auto refused = compile_source(kExplicit, "t.hxir", ".");
  REQUIRE_FALSE(refused.ok());
  CHECK_MESSAGE(refused.status().message().find("input %cache cannot be donated to output 0 'a': the input is "
                                                "still read by `add` (instruction 1) when `relu` (instruction 0) "
                                                "writes the output") != std::string::npos,
                refused.status().message());
  constexpr const char* kNoOutput = R"(
func @f(%cache: f32[4] donate, %x: f32[2]) -> (f32[2]) {
  %a = call @relu(%x) : f32[2]
  return %a
})";
  auto none = compile_source(kNoOutput, "t.hxir", ".");
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message() ==
        "t.hxir: function @f: input %cache cannot be donated: no output of type f32[4] is left for it");
  constexpr const char* kWrongType = R"(
func @f(%cache: f32[4] donate(0), %x: f32[2]) -> (f32[2]) {
  %a = call @relu(%x) : f32[2]
  return %a
})";
  auto wrong = compile_source(kWrongType, "t.hxir", ".");
  REQUIRE_FALSE(wrong.ok());
  CHECK_MESSAGE(wrong.status().message().find("input %cache (f32[4]) donated to output 0 'a' (f32[2]): a donated "
                                              "buffer holds an output of its own type") != std::string::npos,
                wrong.status().message());
  constexpr const char* kPastEnd = R"(
func @f(%cache: f32[4] donate(3)) -> (f32[4]) {
  %a = call @relu(%cache) : f32[4]
  return %a
})";
  auto past = compile_source(kPastEnd, "t.hxir", ".");
  REQUIRE_FALSE(past.ok());
  CHECK_MESSAGE(past.status().message().find("donated to output 3: the function has 1 output(s)") !=
                    std::string::npos,
                past.status().message());
}

TEST_CASE("donation: an arena value never takes a donated buffer that is not its output's") {
  Planned p = planned(R"(
func @f(%cache: f32[8] donate, %x: f32[8]) -> (f32[8]) {
  %a = call @mul(%cache, %x) : f32[8]
  %b = call @exp(%a) : f32[8]
  return %b
})");
  // assign_in_place alone keeps %a in the arena (the cache is not %a's output's
  // buffer); the donation then extends %b's chain back to the cache: %a and
  // %b both run in the caller's buffer, the arena holds nothing.
  CHECK(mask_of(p, "a") == 1);
  CHECK(mask_of(p, "b") == 1);
  CHECK(p.at("a").storage == Storage::kInput);
  CHECK(p.at("b").storage == Storage::kInput);
  Planned q = planned(R"(
func @f(%cache: f32[8] donate, %x: f32[8]) -> (f32[8]) {
  %a = call @mul(%cache, %x) : f32[8]
  %b = call @exp(%a) : f32[8]
  return %b
})", /*in_place=*/false);
  CHECK(mask_of(q, "a") == 0);
  CHECK(q.at("a").storage == Storage::kArena);
  CHECK(q.at("b").storage == Storage::kInput);  // written after the cache's last read
  CHECK(mask_of(q, "b") == 0);
}

TEST_CASE("free-at-last-use: no offsets, last uses recorded, lower bound kept") {
  constexpr const char* kSource = R"(
func @f(%x: f32[16]) -> (f32[16]) {
  %a = call @relu(%x) : f32[16]
  %b = call @exp(%x) : f32[16]
  %c = call @add(%a, %b) : f32[16]
  %d = call @neg(%c) : f32[16]
  return %d
})";
  Planned p = planned(kSource, true, PlanStrategy::kFreeAtLastUse);
  CHECK(p.plan.arena_size == 0);
  CHECK(p.plan.lower_bound == 128);
  CHECK(p.at("a").last_use == 2);
  CHECK(p.at("b").last_use == 2);
  CHECK(p.at("c").last_use == 3);
  CHECK(p.at("d").last_use == -1);  // an output, not arena
  for (const ValuePlan& v : p.plan.values) CHECK(v.arena_offset == 0);
  CompileOptions options;
  options.plan = PlanStrategy::kFreeAtLastUse;
  std::vector<uint8_t> bytes = compile_ok(kSource, options);
  const fb::Module* m = module_of(bytes);
  CHECK(m->arena()->strategy() == fb::PlanStrategy::FreeAtLastUse);
  CHECK(m->arena()->size() == 0);
  CHECK(format::verify_executable(bytes).ok());
}

TEST_CASE("schedule=memory: keeps dependencies and lowers the peak") {
  // Written breadth-first: four wide values live at once. Depth-first needs two.
  constexpr const char* kSource = R"(
func @f(%x: f32[256]) -> (f32[256]) {
  %a1 = call @relu(%x) : f32[256]
  %a2 = call @exp(%x) : f32[256]
  %a3 = call @neg(%x) : f32[256]
  %a4 = call @sqrt(%x) : f32[256]
  %b1 = call @reduce_sum(%a1) : f32[]
  %b2 = call @reduce_sum(%a2) : f32[]
  %b3 = call @reduce_sum(%a3) : f32[]
  %b4 = call @reduce_sum(%a4) : f32[]
  %c1 = call @add(%b1, %b2) : f32[]
  %c2 = call @add(%b3, %b4) : f32[]
  %c3 = call @add(%c1, %c2) : f32[]
  %y = call @add(%x, %c3) : f32[256]
  return %y
})";
  Planned source = planned(kSource, true, PlanStrategy::kArena, Schedule::kSource);
  Planned memory = planned(kSource, true, PlanStrategy::kArena, Schedule::kMemory);
  CHECK(memory.plan.program.size() == source.plan.program.size());
  CHECK(memory.plan.lower_bound < source.plan.lower_bound);
  CHECK(memory.plan.arena_size < source.plan.arena_size);
  // Every operand is written before it is read.
  std::vector<bool> written(memory.plan.values.size(), false);
  for (size_t v = 0; v < written.size(); ++v)
    written[v] = memory.value(static_cast<int>(v)).kind != ValueKind::kResult;
  for (const Instruction& inst : memory.plan.program) {
    for (int input : inst.inputs) CHECK(written[memory.plan.values[input].storage_root]);
    for (int output : inst.outputs) written[output] = true;
  }
  CompileOptions options;
  options.schedule = Schedule::kMemory;
  check_compiles_and_verifies(kSource, options);
}

TEST_CASE("scratch: softmax over a non-last axis gets a workspace, shared or in the arena") {
  constexpr const char* kSource = R"(
func @f(%x: f32[8,32]) -> (f32[8,32]) {
  %a = call @relu(%x) : f32[8,32]
  %s = call @softmax(%a) {axis = 0} : f32[8,32]
  %t = call @softmax(%s) {axis = -1} : f32[8,32]
  return %t
})";
  for (PlanStrategy plan : {PlanStrategy::kNaive, PlanStrategy::kArena, PlanStrategy::kFreeAtLastUse}) {
    CompileOptions options;
    options.plan = plan;
    std::vector<uint8_t> bytes = compile_ok(kSource, options);
    const fb::Module* m = module_of(bytes);
    Result<format::VerifiedModule> v = format::verify_executable(bytes);
    REQUIRE_MESSAGE(v.ok(), v.status().to_string());
    const uint64_t need = 32 * 12;
    if (m->workspaces() && m->workspaces()->size() > 0) {
      CHECK(m->workspaces()->Get(1)->size() == need);
      CHECK(m->workspaces()->Get(0)->size() == 0);
      CHECK(m->arena()->workspace_size() == 0);
    } else {
      CHECK(m->arena()->workspace_size() == need);
    }
  }
}

// The KV-cache write of a decoder step: update_slice on a donated cache runs in
// place (output 0 in the caller's buffer), then reads a row back and picks tokens.
constexpr const char* kKvStep = R"(
const @zero : i64[] = dense [0]

func @step(%cache: f32[8,4] donate, %row: f32[1,4], %i: i64[], %logits: f32[2,5]) -> (f32[8,4], f32[1,4], i64[2]) {
  %y = call @update_slice(%cache, %row, %i, @zero) : f32[8,4]
  %r = call @dynamic_slice(%y, %i, @zero) {sizes = [1, 4]} : f32[1,4]
  %t = call @argmax(%logits) {axis = -1, keepdims = 0} : i64[2]
  return %y, %r, %t
})";

TEST_CASE("update_slice: the KV-cache write runs in place on the donated cache; .hxir prints back") {
  Planned p = planned(kKvStep);
  CHECK(p.plan.donated_to[0] == 0);
  CHECK(mask_of(p, "y") == 1);  // x (the cache) only
  CHECK(p.at("y").storage == Storage::kInput);
  CHECK(p.at("y").storage_index == 0);
  const Function& fn = p.fn();
  REQUIRE(fn.nodes.size() == 3);
  CHECK(fn.nodes[1].params == std::vector<int64_t>{1, 4});
  CHECK(fn.nodes[2].params == std::vector<int64_t>{1, 0, 0});
  check_compiles_and_verifies(kKvStep);

  auto text = print_hxir(p.module);
  REQUIRE_MESSAGE(text.ok(), text.status().to_string());
  CHECK(text->find("call @update_slice(%cache, %row, %i, @zero) : f32[8,4]") != std::string::npos);
  CHECK(text->find("call @dynamic_slice(%y, %i, @zero) {sizes = [1, 4]} : f32[1,4]") != std::string::npos);
  CHECK(text->find("call @argmax(%logits) {axis = 1, keepdims = 0, select_last_index = 0} : i64[2]") !=
        std::string::npos);
  Module again = parse_ok(*text);
  REQUIRE(again.functions[0].nodes.size() == 3);
  for (size_t k = 0; k < 3; ++k) CHECK(again.functions[0].nodes[k].params == fn.nodes[k].params);
}

TEST_CASE("scatter: in place on data only, and not when data is also its updates or indices") {
  constexpr const char* kSource = R"(
func @f(%a: f32[4,3], %i: i64[4,3], %b: i64[4,3]) -> (f32[4,3], f32[4,3], i64[4,3]) {
  %x = call @neg(%a) : f32[4,3]
  %y = call @scatter_elements(%x, %i, %a) : f32[4,3]
  %z = call @exp(%a) : f32[4,3]
  %w = call @scatter_elements(%z, %i, %z) : f32[4,3]
  %j = call @copy(%b) : i64[4,3]
  %k = call @scatter_elements(%j, %j, %b) : i64[4,3]
  %y2 = call @neg(%y) : f32[4,3]
  %w2 = call @neg(%w) : f32[4,3]
  %k2 = call @copy(%k) : i64[4,3]
  return %y2, %w2, %k2
}
)";
  Planned p = planned(kSource);
  CHECK(mask_of(p, "y") == 1);  // %x dies here: its buffer
  CHECK(mask_of(p, "w") == 0);  // %z is also the updates, read while the result is written
  CHECK(mask_of(p, "k") == 0);  // %j is also the indices
  check_compiles_and_verifies(kSource);
}

TEST_CASE("update_slice: never in place on its update or start indices, even when they are free") {
  // %x is read again later, so only %u (update, same type) could give its buffer: refused.
  constexpr const char* kSource = R"(
func @f(%a: f32[4], %b: f32[4], %i: i64[]) -> (f32[4]) {
  %x = call @neg(%a) : f32[4]
  %u = call @exp(%b) : f32[4]
  %y = call @update_slice(%x, %u, %i) : f32[4]
  %z = call @add(%y, %x) : f32[4]
  return %z
})";
  Planned p = planned(kSource);
  CHECK(mask_of(p, "y") == 0);
  check_compiles_and_verifies(kSource);
  // x free after it: in place on x.
  constexpr const char* kFree = R"(
func @f(%a: f32[4], %b: f32[4], %i: i64[]) -> (f32[4]) {
  %x = call @neg(%a) : f32[4]
  %u = call @exp(%b) : f32[4]
  %y = call @update_slice(%x, %u, %i) : f32[4]
  %z = call @relu(%y) : f32[4]
  return %z
})";
  Planned q = planned(kFree);
  CHECK(mask_of(q, "y") == 1);
  check_compiles_and_verifies(kFree);
}

TEST_CASE("update_slice: x and update one value carry both alias bits, and verify") {
  constexpr const char* kSame = R"(
func @f(%a: i64[1], %i: i64[]) -> (i64[1]) {
  %x = call @copy(%a) : i64[1]
  %y = call @update_slice(%x, %x, %i) : i64[1]
  %z = call @copy(%y) : i64[1]
  return %z
})";
  Planned p = planned(kSame);
  CHECK(mask_of(p, "y") == 3);
  check_compiles_and_verifies(kSame);
}

TEST_CASE("loops and ifs print back as .hxir that parses to the same regions") {
  const char* source = R"(module @regions
func @main(%x: f32[4], %c: bool[], %n: i64[]) -> (f32[4], f32[4]) {
  %r:2 = for %i = 0 to %n step 2 iter(%a = %x, %b = %x) {
    %s = call @add(%a, %b) : f32[4]
    %y = if %c -> (f32[4]) {
      %m = call @mul(%s, %s) : f32[4]
      yield %m
    } else {
      yield %s
    }
    yield %b, %y
  }
  return %r#0, %r#1
}
)";
  Module m = parse_ok(source);
  auto text = print_hxir(m);
  REQUIRE_MESSAGE(text.ok(), text.status().to_string());
  CHECK(text->find("= for %i = @i64.0 to %n step 2 iter(%a = %x, %b = %x) {") != std::string::npos);
  CHECK(text->find("%y = if %c -> (f32[4]) {") != std::string::npos);
  CHECK(text->find("} else {") != std::string::npos);
  Module again = parse_ok(*text);
  const Function& f = m.functions[0];
  const Function& g = again.functions[0];
  REQUIRE(g.nodes.size() == f.nodes.size());
  for (size_t k = 0; k < f.nodes.size(); ++k) {
    CHECK(g.nodes[k].kind == f.nodes[k].kind);
    CHECK(g.nodes[k].params == f.nodes[k].params);
    CHECK(g.nodes[k].inputs.size() == f.nodes[k].inputs.size());
  }
}

TEST_CASE("printer: a branch ending in fail prints without a yield and parses back") {
  const char* source = R"(module @f
func @main(%x: f32[4], %c: bool[]) -> f32[4] {
  %y = if %c -> (f32[4]) {
    fail "then: \"quoted\" text"
  } else {
    %n = call @neg(%x) : f32[4]
    yield %n
  }
  return %y
}
)";
  Module m = parse_ok(source);
  auto text = print_hxir(m);
  REQUIRE_MESSAGE(text.ok(), text.status().to_string());
  CHECK_MESSAGE(text->find("    fail \"then: \\\"quoted\\\" text\"\n  } else {") != std::string::npos, *text);
  Module again = parse_ok(*text);
  const Function& g = again.functions[0];
  REQUIRE(g.nodes.size() == m.functions[0].nodes.size());
  CHECK(g.nodes[1].kind == NodeKind::kFail);
  CHECK(g.nodes[1].message == "then: \"quoted\" text");
  CHECK(g.nodes[2].inputs.empty());  // the then-branch yields nothing
}

}  // namespace
}  // namespace hexir::compiler::testing
