// Issue 11: the verifier on control instructions. A compiled loop is patched
// in place (one defect each, the metadata resealed) and must be refused with
// a message naming the instruction and the rule, before anything runs.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "hexir/format/verifier.h"
#include "hexir/inspect/function_plan.h"
#include "hexir/inspect/plan_svg.h"
#include "sample_util.h"

namespace hexir::testing {
namespace {

// The loop body reads the carried value %a and the input %x; %t is a value
// of the body; after the loop, %z reads the loop's result %r (a carried
// value in the arena: the function returns a reduction of it).
constexpr const char* kLoop = R"(module @loop
func @main(%x: f32[4], %n: i64[]) -> f32[] {
  %r = for %i = 0 to %n iter(%a = %x) {
    %t = call @mul(%a, %x) : f32[4]
    %a2 = call @sub(%t, %a) : f32[4]
    yield %a2
  }
  %z = call @reduce_sum(%r) {axes = [0]} : f32[]
  return %z
}
)";

// Field offsets inside the 32-byte Instruction struct (hexir.fbs).
constexpr size_t kParamCountField = 20;
constexpr size_t kOpcodeField = 28;

struct Patched : PatchedExecutable {
  explicit Patched(const char* source = kLoop) : PatchedExecutable(source) {}
  // Function-relative index of the first instruction running `name`.
  uint32_t find(const std::string& name) {
    auto verified = format::verify_executable(file.span());
    REQUIRE_MESSAGE(verified.ok(), verified.status().to_string());
    for (uint32_t k = 0; k < m().instructions()->size(); ++k)
      if (format::instruction_name(*verified, *m().instructions()->Get(k)) == name) return k;
    FAIL("no ", name);
    return 0;
  }
  uint8_t* instruction(uint32_t k) { return writable(m().instructions()->Get(k)); }
};


TEST_CASE("the unpatched loop verifies and lists its control instructions") {
  Patched p;
  auto verified = format::verify_executable(p.file.span(), {.prove_no_overlap = true});
  REQUIRE_MESSAGE(verified.ok(), verified.status().to_string());
  REQUIRE(verified->loops.size() == 1);
  REQUIRE(verified->loops[0].size() == 1);
  const auto [begin, next] = verified->loops[0][0];
  CHECK(format::instruction_name(*verified, *p.m().instructions()->Get(begin)) == std::string("loop_begin"));
  CHECK(format::instruction_name(*verified, *p.m().instructions()->Get(next)) == std::string("loop_next"));
}

TEST_CASE("the plan picture draws the loop body and live ranges through it") {
  Patched p;
  auto verified = format::verify_executable(p.file.span());
  REQUIRE(verified.ok());
  const auto [begin, next] = verified->loops[0][0];
  const inspect::PlanSvgInput picture = inspect::function_plan_picture(*verified, 0);
  REQUIRE(picture.spans.size() == 1);
  CHECK(picture.spans[0].lower == begin);
  CHECK(picture.spans[0].upper == next + 1);
  // The carried value %a lives through the whole loop; the body's %t only inside it.
  for (const inspect::StorageValue& value : inspect::function_storage_values(*verified, 0)) {
    if (value.name == "%a") CHECK(value.last >= static_cast<int64_t>(next));
    if (value.name == "%t") {
      CHECK(value.first > static_cast<int64_t>(begin));
      CHECK(value.last < static_cast<int64_t>(next));
    }
  }
  const std::string svg = inspect::render_plan_svg(picture);
  CHECK(has(svg, "class=\"loop\""));
  CHECK(has(svg, "loop body (once per iteration)"));
}

TEST_CASE("verifier: LoopNext that does not go back to one past its LoopBegin") {
  Patched p;
  const uint32_t next = p.find("loop_next");
  p.set_param(next, 0, 0);
  const std::string e = p.refusal();
  CHECK_MESSAGE(has(e, "LoopNext continues at 0, not at"), e);
}

TEST_CASE("verifier: LoopBegin whose exit is not one past its LoopNext") {
  Patched p;
  const uint32_t begin = p.find("loop_begin");
  p.set_param(begin, 0, 1000);
  const std::string e = p.refusal();
  CHECK_MESSAGE(has(e, "LoopBegin exits to 1000"), e);
}

TEST_CASE("verifier: a LoopBegin never closed") {
  Patched p;
  const uint32_t next = p.find("loop_next");
  p.instruction(next)[kOpcodeField] = static_cast<uint8_t>(fb::Opcode::LoopBegin);
  const uint32_t one = 1;
  std::memcpy(p.instruction(next) + kParamCountField, &one, 4);
  const std::string e = p.refusal();
  CHECK_MESSAGE((has(e, "LoopBegin exits to") || has(e, "LoopBegin without a LoopNext")), e);
}

TEST_CASE("verifier: a LoopNext without a LoopBegin") {
  Patched p;
  const uint32_t begin = p.find("loop_begin");
  const uint32_t next = p.find("loop_next");
  // The begin becomes the same LoopNext (its counter and trip in LoopNext's order).
  p.instruction(begin)[kOpcodeField] = static_cast<uint8_t>(fb::Opcode::LoopNext);
  const fb::Instruction* n = p.m().instructions()->Get(next);
  std::memcpy(p.instruction(begin), n, 32);
  const std::string e = p.refusal();
  CHECK_MESSAGE(has(e, "LoopNext without a LoopBegin"), e);
}

TEST_CASE("verifier: a counter that is not i64[], or not an arena value") {
  {
    Patched p;
    p.set_operand(p.find("loop_begin"), 2, p.slot_named("t"));
    const std::string e = p.refusal();
    CHECK_MESSAGE(has(e, "is f32[4]; loop bounds and counters are i64[]"), e);
  }
  {
    Patched p;
    p.set_operand(p.find("loop_begin"), 2, p.slot_named("n"));
    const std::string e = p.refusal();
    CHECK_MESSAGE(has(e, "must be an arena value"), e);
  }
}

TEST_CASE("verifier: a step that is not positive, an unknown opcode") {
  {
    Patched p;
    p.set_param(p.find("loop_next"), 1, 0);
    const std::string e = p.refusal();
    CHECK_MESSAGE(has(e, "LoopNext step 0 is not positive"), e);
  }
  {
    Patched p;
    p.instruction(p.find("loop_next"))[kOpcodeField] = 9;
    const std::string e = p.refusal();
    CHECK_MESSAGE(has(e, "unknown opcode 9"), e);
  }
}

TEST_CASE("verifier: a value read after the loop that only the loop body writes") {
  // %z reads %t instead of %r: with a zero trip count %t was never written.
  Patched p;
  p.set_operand(p.find("reduce_sum"), 0, p.slot_named("t"));
  const std::string e = p.refusal();
  CHECK_MESSAGE(has(e, "is read where it may not have been written"), e);
}

TEST_CASE("verifier: a body value placed over a value the next iteration still reads") {
  // %t at the carried value %a's offset: %a lives through the whole loop.
  Patched p;
  const fb::Slot* a = p.m().slots()->Get(p.slot_named("a"));
  const fb::Slot* t = p.m().slots()->Get(p.slot_named("t"));
  REQUIRE(a->storage() == fb::StorageKind::Arena);
  REQUIRE(a->arena_offset() != t->arena_offset());
  const uint64_t offset = a->arena_offset();
  // fb::Slot is a flatbuffers::Table (privately): the same one-pointer layout.
  auto* table = reinterpret_cast<flatbuffers::Table*>(const_cast<fb::Slot*>(t));
  REQUIRE(table->SetField<uint64_t>(fb::Slot::VT_ARENA_OFFSET, offset, 0));
  const std::string e = p.refusal();
  CHECK_MESSAGE(has(e, "overlaps"), e);
}

// An if: %t only in the then-branch, %u only in the else-branch, %y both.
constexpr const char* kBranch = R"(module @branch
func @main(%x: f32[4], %c: bool[], %k: f32[]) -> f32[] {
  %y = if %c -> (f32[4]) {
    %t = call @mul(%x, %x) : f32[4]
    %t2 = call @add(%t, %x) : f32[4]
    yield %t2
  } else {
    %u = call @neg(%x) : f32[4]
    yield %u
  }
  %z = call @reduce_sum(%y) {axes = [0]} : f32[]
  return %z
}
)";

TEST_CASE("verifier: malformed ifs") {
  auto patched = [] { return Patched(kBranch); };
  {
    Patched p = patched();
    auto verified = format::verify_executable(p.file.span());
    REQUIRE_MESSAGE(verified.ok(), verified.status().to_string());
    REQUIRE(verified->branches[0].size() == 1);
  }
  {  // the branch skips to the middle of the then-branch (no Jump before it)
    Patched p = patched();
    p.set_param(p.find("branch_if_zero"), 0, p.find("branch_if_zero") + 2);
    const std::string e = p.refusal();
    CHECK_MESSAGE(has(e, "is not an else-branch after its then-branch's Jump"), e);
  }
  {  // the Jump lands before the else-branch
    Patched p = patched();
    p.set_param(p.find("jump"), 0, 0);
    const std::string e = p.refusal();
    CHECK_MESSAGE(has(e, "does not end its if inside the enclosing region"), e);
  }
  {  // the condition is not bool[]
    Patched p = patched();
    p.set_operand(p.find("branch_if_zero"), 0, p.slot_named("k"));
    const std::string e = p.refusal();
    CHECK_MESSAGE(has(e, "is f32[]; a condition is bool[]"), e);
  }
  {  // after the if, a value only the then-branch writes
    Patched p = patched();
    p.set_operand(p.find("reduce_sum"), 0, p.slot_named("t"));
    const std::string e = p.refusal();
    CHECK_MESSAGE(has(e, "is read where it may not have been written"), e);
  }
}

// An if whose else-branch fails: %t and %y are written on every path that
// reaches the end of the if (the then-branch's).
constexpr const char* kFailBranch = R"(module @fail
func @main(%x: f32[4], %c: bool[]) -> f32[] {
  %y = if %c -> (f32[4]) {
    %t = call @mul(%x, %x) : f32[4]
    %t2 = call @add(%t, %x) : f32[4]
    yield %t2
  } else {
    fail "no else"
  }
  %z = call @reduce_sum(%y) {axes = [0]} : f32[]
  return %z
}
)";

TEST_CASE("verifier: a branch ending in Fail, and malformed Fails") {
  auto patched = [](const char* source) { return Patched(source); };
  {  // %y, written only by the then-branch, is read after the if
    Patched p = patched(kFailBranch);
    auto verified = format::verify_executable(p.file.span(), {.prove_no_overlap = true});
    REQUIRE_MESSAGE(verified.ok(), verified.status().to_string());
    REQUIRE(p.m().messages() != nullptr);
    CHECK(p.m().messages()->Get(0)->str() == "no else");
  }
  {  // a Fail inside a loop does not end the path (the loop may run no iteration)
    Patched p = patched(R"(module @fail
func @main(%x: f32[4], %c: bool[], %n: i64[]) -> f32[] {
  %y = if %c -> (f32[4]) {
    %t = call @mul(%x, %x) : f32[4]
    %t2 = call @add(%t, %x) : f32[4]
    yield %t2
  } else {
    %r = for %i = 0 to %n iter(%a = %x) {
      fail "in the loop"
      yield %a
    }
    yield %r
  }
  %z = call @reduce_sum(%y) {axes = [0]} : f32[]
  return %z
}
)");
    p.set_operand(p.find("reduce_sum"), 0, p.slot_named("t"));
    const std::string e = p.refusal();
    CHECK_MESSAGE(has(e, "is read where it may not have been written"), e);
  }
  {  // a message index out of range
    Patched p = patched(kFailBranch);
    p.set_param(p.find("fail"), 0, 7);
    const std::string e = p.refusal();
    CHECK_MESSAGE(has(e, "Fail message 7 out of range (the module has 1 messages)"), e);
  }
  {  // operands on a Fail
    Patched p = patched(kFailBranch);
    const uint32_t one = 1, fail = p.find("fail");
    std::memcpy(p.instruction(fail) + 8, &one, 4);   // operand_count
    std::memcpy(p.instruction(fail) + 12, &one, 4);  // input_count
    const std::string e = p.refusal();
    CHECK_MESSAGE(has(e, "Fail has 1 operands; it takes none"), e);
  }
}

}  // namespace
}  // namespace hexir::testing
