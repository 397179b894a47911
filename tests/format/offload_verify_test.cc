// Memory spaces (host offload under a memory budget): a compiled file with
// an Evict and a Prefetch verifies and hexir-dump's statistics count them;
// each defect patched into the file (the metadata resealed) is refused
// naming the slot or instruction and the rule, before anything runs: a
// kernel reading or writing host memory, a copy between other types or
// spaces, a copy naming another value, a host slot outside the host arena.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "budget_programs.h"
#include "hexir/format/verifier.h"
#include "hexir/inspect/function_plan.h"
#include "sample_util.h"

namespace hexir::testing {
namespace {

// @far (budget_programs.h): under a budget of two 16 KiB values %a is
// offloaded. %z (f32[64,32]), computed first and returned too, is a value of
// another type.
const std::string kFar =
    "module @far\nfunc @main(%x: f32[64,64], %w: f32[64,32]) -> (f32[64,64], f32[64,32]) {\n"
    "  %z = call @neg(%w) : f32[64,32]\n"
    "  %z2 = call @tanh(%z) : f32[64,32]\n" +
    std::string(kFarSteps) + "  return %y, %z2\n}\n";
constexpr uint64_t kValue = 64 * 64 * 4;

compiler::CompileOptions budget_options() {
  compiler::CompileOptions o;
  o.device_budget = 2 * kValue;
  return o;
}

struct Patched : PatchedExecutable {
  Patched() : PatchedExecutable(kFar, budget_options()) {}
  uint32_t instruction(fb::Opcode opcode) {
    for (uint32_t k = 0; k < m().instructions()->size(); ++k)
      if (m().instructions()->Get(k)->opcode() == opcode) return k;
    FAIL("no instruction with opcode ", static_cast<int>(opcode));
    return 0;
  }
  uint32_t operand(uint32_t k, uint32_t o) {
    return m().operand_pool()->Get(m().instructions()->Get(k)->operand_begin() + o);
  }
  uint32_t writer(uint32_t slot) {
    for (uint32_t k = 0; k < m().instructions()->size(); ++k) {
      const fb::Instruction* in = m().instructions()->Get(k);
      for (uint32_t o = in->input_count(); o < in->operand_count(); ++o)
        if (operand(k, o) == slot) return k;
    }
    FAIL("nobody writes slot ", slot);
    return 0;
  }
};

}  // namespace

TEST_CASE("compiled host offload verifies, and hexir-dump's statistics count the copies") {
  Patched p;
  auto verified = format::verify_executable(p.file.span(), {.prove_no_overlap = true});
  REQUIRE_MESSAGE(verified.ok(), verified.status().to_string());
  const uint32_t evict = p.instruction(fb::Opcode::Evict);
  const uint32_t prefetch = p.instruction(fb::Opcode::Prefetch);
  CHECK(evict < prefetch);
  const uint32_t a = p.slot_named("a");
  const uint32_t host = p.operand(evict, 1);
  CHECK(p.operand(evict, 0) == a);
  CHECK(p.operand(prefetch, 0) == host);
  CHECK(p.m().slots()->Get(host)->memory_space() == fb::MemorySpace::Host);
  CHECK(p.m().slots()->Get(host)->copy_of() == static_cast<int32_t>(a));
  CHECK(p.m().slots()->Get(p.operand(prefetch, 1))->copy_of() == static_cast<int32_t>(a));
  CHECK(std::string(format::instruction_name(*verified, *p.m().instructions()->Get(evict))) == "evict");
  CHECK(std::string(format::instruction_name(*verified, *p.m().instructions()->Get(prefetch))) == "prefetch");
  const inspect::FunctionStats st = inspect::function_stats(*verified, 0);
  CHECK(st.host_arena_size == kValue);
  CHECK(st.host_lower_bound == kValue);
  CHECK(st.evictions == 1);
  CHECK(st.prefetches == 1);
  CHECK(st.bytes_evicted == kValue);
  CHECK(st.bytes_prefetched == kValue);
  // The plan picture draws the host arena above the device arena.
  const inspect::PlanSvgInput picture = inspect::function_plan_picture(*verified, 0);
  CHECK(picture.host_size == kValue);
  CHECK(picture.host_base >= picture.arena_size);
  int host_rects = 0, copy_rects = 0;
  for (const inspect::PlanSvgRect& r : picture.rects) {
    if (r.flags & inspect::kPlanSvgHost) {
      ++host_rects;
      CHECK(r.offset == picture.host_base);
    }
    copy_rects += (r.flags & inspect::kPlanSvgCopy) ? 1 : 0;
  }
  CHECK(host_rects == 1);
  CHECK(copy_rects == 1);
  const std::string svg = inspect::render_plan_svg(picture);
  CHECK(has(svg, "host arena"));
  CHECK(has(svg, "class=\"host-arena\""));
}

TEST_CASE("verifier: a kernel never reads or writes a host-space slot") {
  {
    Patched p;
    const uint32_t prefetch = p.instruction(fb::Opcode::Prefetch);
    const uint32_t host = p.operand(prefetch, 0);
    // The add after the prefetch reads the host copy instead of the prefetched one.
    p.set_operand(prefetch + 1, 1, host);
    const std::string message = p.refusal();
    CAPTURE(message);
    CHECK(has(message, "'add' reads slot " + std::to_string(host) + " ('a.host1'), a host-space slot"));
  }
  {
    Patched p;
    const uint32_t evict = p.instruction(fb::Opcode::Evict);
    const uint32_t host = p.operand(evict, 1);
    p.set_operand(p.writer(p.slot_named("a")), 1, host);
    CHECK(has(p.refusal(), "'tanh' writes slot " + std::to_string(host) + " ('a.host1'), a host-space slot"));
  }
}

TEST_CASE("verifier: a copy between other types or the wrong spaces is refused") {
  {
    Patched p;
    const uint32_t evict = p.instruction(fb::Opcode::Evict);
    p.set_operand(evict, 0, p.slot_named("z"));
    CHECK(has(p.refusal(), "Evict copies slot " + std::to_string(p.slot_named("z")) +
                               " ('z') (f32[64,32]) into slot " + std::to_string(p.operand(evict, 1)) +
                               " ('a.host1') (f32[64,64]): the types differ"));
  }
  {
    Patched p;
    const uint32_t evict = p.instruction(fb::Opcode::Evict);
    p.set_operand(evict, 1, p.slot_named("a1"));
    CHECK(has(p.refusal(), "Evict writes slot " + std::to_string(p.slot_named("a1")) +
                               " ('a1'), which is not a host arena value"));
  }
  {
    Patched p;
    const uint32_t prefetch = p.instruction(fb::Opcode::Prefetch);
    p.set_operand(prefetch, 0, p.slot_named("a"));
    CHECK(has(p.refusal(), "Prefetch reads slot " + std::to_string(p.slot_named("a")) +
                               " ('a'), which is not a host arena value"));
  }
}

TEST_CASE("verifier: copy_of must name the value the copy's source holds") {
  Patched p;
  const uint32_t prefetch = p.instruction(fb::Opcode::Prefetch);
  const uint32_t copy = p.operand(prefetch, 1);
  const uint32_t other = p.slot_named("a1");  // a device value of the same type
  p.set_field(p.m().slots()->Get(copy), fb::Slot::VT_COPY_OF, static_cast<int32_t>(other));
  CHECK(has(p.refusal(), "whose copy_of is " + std::to_string(other) + ", but slot " +
                             std::to_string(p.operand(prefetch, 0)) + " ('a.host1') holds the value of slot " +
                             std::to_string(p.slot_named("a"))));
  Patched q;
  const uint32_t host = q.operand(q.instruction(fb::Opcode::Evict), 1);
  q.set_field(q.m().slots()->Get(host), fb::Slot::VT_COPY_OF, static_cast<int32_t>(host));
  CHECK(has(q.refusal(), "copy_of " + std::to_string(host) + ", which is not another slot"));
  Patched r;
  const uint32_t host_r = r.operand(r.instruction(fb::Opcode::Evict), 1);
  r.set_field(r.m().slots()->Get(host_r), fb::Slot::VT_COPY_OF, static_cast<int32_t>(r.slot_named("x")));
  CHECK(has(r.refusal(), "which is not a device arena value or a streamed constant (a copy names the original)"));
}

TEST_CASE("verifier: host slots lie inside the host arena, in a known memory space") {
  {
    Patched p;
    p.set_field(p.m().arena(), fb::ArenaPlan::VT_HOST_SIZE, kValue - 64);
    CHECK(has(p.refusal(), "('a.host1'): host arena bytes [0, +16384) exceed the host arena size 16320"));
  }
  {
    Patched p;
    const uint32_t host = p.operand(p.instruction(fb::Opcode::Evict), 1);
    p.set_field(p.m().slots()->Get(host), fb::Slot::VT_MEMORY_SPACE, uint8_t{2});
    CHECK(has(p.refusal(), "('a.host1'): unknown memory space 2"));
  }
  {
    Patched p;
    p.set_field(p.m().functions()->Get(0), fb::Function::VT_HOST_ARENA_SIZE, 2 * kValue);
    CHECK(has(p.refusal(), "host_arena_size 32768 exceeds the host arena size 16384"));
  }
}

}  // namespace hexir::testing
