// Rematerialization under a device memory budget (remat.h): the budget option,
// the plan meeting a budget by recomputing values, the error when it cannot,
// and what the file says about each recomputation.
#include <doctest/doctest.h>

#include <string>

#include "budget_programs.h"
#include "passes/remat.h"
#include "test_util.h"

namespace hexir::compiler::testing {
namespace {

// @held (budget_programs.h): recomputing %a or %b lowers its peak of four
// 16 KiB values to three, both to two.
constexpr const char* kHeld = hexir::testing::kHeldProgram;
constexpr uint64_t kValue = 64 * 64 * 4;

// The device budget counts the constants a program uploads too: these
// tests' constants are fills (never streamed), so a budget of `arena` bytes
// for the arena is `arena` plus their bytes.
uint64_t constant_bytes(const Module& m) {
  uint64_t bytes = 0;
  for (const Constant& c : m.constants) bytes += c.byte_size;
  return bytes;
}

Result<ModulePlan> plan_with(std::string_view source, std::optional<uint64_t> arena) {
  const Module m = parse_ok(source);
  CompileOptions options;
  if (arena) options.device_budget = *arena + constant_bytes(m);
  return plan_module(m, options, "t.hxir");
}

}  // namespace

TEST_CASE("--memory-budget: device=BYTES with KiB, MiB and GiB suffixes") {
  CompileOptions o;
  REQUIRE(parse_memory_budget("device=4096", o).ok());
  CHECK(o.device_budget == 4096u);
  for (const std::pair<const char*, uint64_t>& c : {std::pair<const char*, uint64_t>{"device=3KiB", 3u << 10},
                                    {"device=12MiB", uint64_t{12} << 20},
                                    {"device=2GiB", uint64_t{2} << 30},
                                    {"device=7B", 7},
                                    {"device=0", 0}}) {
    const std::string text = c.first;  // CAPTURE takes no structured binding (clang 14)
    CompileOptions each;
    CAPTURE(text);
    REQUIRE(parse_memory_budget(text, each).ok());
    CHECK(each.device_budget == c.second);
  }
  auto refusal = [](const char* text) {
    CompileOptions each;
    Status s = parse_memory_budget(text, each);
    REQUIRE_FALSE(s.ok());
    CHECK_FALSE(each.device_budget.has_value());
    return s.message();
  };
  CHECK(refusal("4096").find("expects SPACE=BYTES") != std::string::npos);
  CHECK(refusal("gpu=1MiB").find("unknown memory space 'gpu'") != std::string::npos);
  CHECK(refusal("device=").find("no byte count") != std::string::npos);
  CHECK(refusal("device=MiB").find("not a byte count") != std::string::npos);
  CHECK(refusal("device=1.5MiB").find("not a byte count") != std::string::npos);
  CHECK(refusal("device=-1").find("not a byte count") != std::string::npos);
  CHECK(refusal("device=1TB").find("not a byte count") != std::string::npos);
  CHECK(refusal("device=99999999999999999999").find("too large") != std::string::npos);
  CHECK(refusal("device=17179869184GiB").find("too large") != std::string::npos);
  CompileOptions twice;
  REQUIRE(parse_memory_budget("device=1KiB", twice).ok());
  CHECK(parse_memory_budget("device=2KiB", twice).message().find("given twice") != std::string::npos);
}

TEST_CASE("a budget needs the arena plan") {
  CompileOptions o;
  o.device_budget = 1024;
  o.plan = PlanStrategy::kNaive;
  CHECK(check_compile_options(o).message().find("needs the arena plan") != std::string::npos);
  o.plan = PlanStrategy::kFreeAtLastUse;
  CHECK(check_compile_options(o).message().find("free-at-last-use") != std::string::npos);
}

TEST_CASE("no budget, or one the plan meets already: nothing is recomputed") {
  auto free = plan_with(kHeld, std::nullopt);
  REQUIRE_MESSAGE(free.ok(), free.status().to_string());
  const FunctionPlan& p = free->functions[0];
  CHECK(p.arena_size == 4 * kValue);
  CHECK(count_recomputations(parse_ok(kHeld).functions[0], p).instructions == 0);
  auto roomy = plan_with(kHeld, 4 * kValue);
  REQUIRE(roomy.ok());
  CHECK(roomy->functions[0].program.size() == p.program.size());
}

TEST_CASE("a budget below the unconstrained arena is met by recomputing") {
  const Module m = parse_ok(kHeld);
  for (const std::pair<uint64_t, int>& c : {std::pair<uint64_t, int>{3 * kValue, 1}, {2 * kValue, 2}}) {
    const uint64_t budget = c.first;
    const int recomputed = c.second;
    CAPTURE(budget);
    CompileOptions options;
    options.device_budget = budget + constant_bytes(m);
    auto plan = plan_module(m, options, "t.hxir");
    REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
    const FunctionPlan& p = plan->functions[0];
    CHECK(p.arena_size <= budget);
    CHECK(p.lower_bound <= budget);
    const RecomputeCount count = count_recomputations(m.functions[0], p);
    CHECK(count.instructions == recomputed);
    // gelu and mul each cost one FLOP per element (ops/cost.h).
    CHECK(count.flops == static_cast<uint64_t>(recomputed) * 64 * 64);
  }
  CompileOptions options;
  options.device_budget = 3 * kValue + constant_bytes(m);
  auto plan = plan_module(m, options, "t.hxir");
  REQUIRE(plan.ok());
  const FunctionPlan& p = plan->functions[0];
  // The recomputation copies its original's instruction: the same node
  // (operator and parameters), the same inputs, a new arena value naming
  // its original, placed after the peak just before the add reading it.
  int seen = 0;
  for (size_t k = 1; k + 1 < p.program.size(); ++k) {
    const Instruction& inst = p.program[k];
    if (!inst.recomputed) continue;
    ++seen;
    REQUIRE(inst.outputs.size() == 1);
    const ValuePlan& out = p.values[static_cast<size_t>(inst.outputs[0])];
    REQUIRE(out.recomputes >= 0);
    const Value& original = m.functions[0].values[static_cast<size_t>(out.recomputes)];
    CHECK((original.name == "a" || original.name == "b"));
    CHECK(original.node == inst.node);
    CHECK(value_at(m.functions[0], p, inst.outputs[0]).type == original.type);
    CHECK(out.storage == Storage::kArena);
    CHECK(inst.inputs == m.functions[0].nodes[static_cast<size_t>(inst.node)].inputs);
    CHECK(p.program[k + 1].op == ops::OpId::kAdd);
    CHECK(p.program[k - 1].op == ops::OpId::kMatmul);
  }
  CHECK(seen == 1);
}

TEST_CASE("a value read only after the peak is moved there, not recomputed") {
  // %a is computed first but read only at the end: the pass moves its
  // instruction after the peak (no FLOPs added, nothing marked).
  constexpr const char* kLate = R"(module @late
func @main(%x: f32[64,64]) -> (f32[64,64]) {
  %a = call @neg(%x) : f32[64,64]
  %p = call @matmul(%x, %x) : f32[64,64]
  %r = call @matmul(%p, %p) : f32[64,64]
  %y = call @add(%r, %a) : f32[64,64]
  return %y
}
)";
  const Module m = parse_ok(kLate);
  auto free = plan_with(kLate, std::nullopt);
  REQUIRE(free.ok());
  CHECK(free->functions[0].arena_size == 3 * kValue);
  auto plan = plan_with(kLate, 2 * kValue);
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  const FunctionPlan& p = plan->functions[0];
  CHECK(p.arena_size == 2 * kValue);
  CHECK(count_recomputations(m.functions[0], p).instructions == 0);
  REQUIRE(p.program.size() == 4);
  CHECK(p.program[2].op == ops::OpId::kNeg);
  CHECK(value_at(m.functions[0], p, p.program[2].outputs[0]).name == "a");
  CHECK(p.added.size() == free->functions[0].added.size());
}

TEST_CASE("a budget below what any recomputation reaches fails naming the smallest arena and why") {
  auto plan = plan_with(kHeld, kValue);
  REQUIRE_FALSE(plan.ok());
  const std::string message = plan.status().message();
  CAPTURE(message);
  CHECK(message.starts_with("t.hxir: memory budget device=32768 bytes cannot be met"));  // the arena's 16 KiB and @c's
  CHECK(message.find("the smallest device arena reached is 32768 bytes (65536 without a budget, lower bound 32768, "
                     "0 values offloaded to host memory)") != std::string::npos);
  // Where the peak is and what is live there, each with its reason.
  CHECK(message.find("@main peaks at 32768 live bytes at instruction 1 (mul writing %b)") != std::string::npos);
  CHECK(message.find("%b (16384 bytes, written here)") != std::string::npos);
  CHECK(message.find("%a (16384 bytes, neither recomputing nor offloading it lowers the peak)") != std::string::npos);
}

TEST_CASE("a chain is recomputed when its inputs are dead at the later use") {
  // %v = tanh(layernorm(%x)) is read by %w and after the peak. %h is dead
  // after %w (which runs in place on it), so recomputing %v alone would keep
  // %h alive across the peak; recomputing %h too needs only %x, an input.
  constexpr const char* kChain = R"(module @chain
const @g : f32[64] = splat 1.0
const @z : f32[64] = splat 0.0
func @main(%x: f32[64,64]) -> (f32[64,64]) {
  %h = call @layernorm(%x, @g, @z) {axis = -1, epsilon = 1e-5} : f32[64,64]
  %v = call @tanh(%h) : f32[64,64]
  %w = call @mul(%h, %v) : f32[64,64]
  %p = call @matmul(%w, %w) : f32[64,64]
  %r = call @matmul(%p, %p) : f32[64,64]
  %y = call @add(%r, %v) : f32[64,64]
  return %y
}
)";
  const Module m = parse_ok(kChain);
  auto free = plan_with(kChain, std::nullopt);
  REQUIRE(free.ok());
  auto plan = plan_with(kChain, free->functions[0].arena_size - kValue);
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  const RecomputeCount count = count_recomputations(m.functions[0], plan->functions[0]);
  CHECK(count.instructions == 2);
  CHECK(plan->functions[0].arena_size <= free->functions[0].arena_size - kValue);
}

TEST_CASE("two moved projections share one recomputed input") {
  // Head 1's projections %k1 and %q1 are computed with head 0's but read
  // after head 0's large scores: both move after them. %h, read by head 0,
  // is dead there: the first move recomputes it and the second reads that
  // copy instead of computing %h a third time (the long-context sample's
  // pattern, docs/memory-budget.md).
  constexpr const char* kHeads = R"(module @shared
const @g : f32[64] = splat 1.0
const @z : f32[64] = splat 0.0
const @wk : f32[64,64] = splat 0.5
const @wq : f32[64,64] = splat 0.25
func @main(%x: f32[256,64]) -> (f32[256,64]) {
  %h = call @layernorm(%x, @g, @z) {axis = -1, epsilon = 1e-5} : f32[256,64]
  %k0 = call @matmul(%h, @wk) : f32[256,64]
  %q0 = call @matmul(%h, @wq) : f32[256,64]
  %k1 = call @matmul(%h, @wk) : f32[256,64]
  %q1 = call @matmul(%h, @wq) : f32[256,64]
  %kt0 = call @transpose(%k0) {perm = [1, 0]} : f32[64,256]
  %s0 = call @matmul(%q0, %kt0) : f32[256,256]
  %t0 = call @tanh(%s0) : f32[256,256]
  %a0 = call @add(%t0, %s0) : f32[256,256]
  %o0 = call @matmul(%a0, %x) : f32[256,64]
  %kt1 = call @transpose(%k1) {perm = [1, 0]} : f32[64,256]
  %s1 = call @matmul(%q1, %kt1) : f32[256,256]
  %a1 = call @softmax(%s1) {axis = -1} : f32[256,256]
  %o1 = call @matmul(%a1, %x) : f32[256,64]
  %y = call @add(%o0, %o1) : f32[256,64]
  return %y
}
)";
  const Module m = parse_ok(kHeads);
  auto free = plan_with(kHeads, std::nullopt);
  REQUIRE(free.ok());
  CHECK(free->functions[0].arena_size == 640 * 1024);
  auto plan = plan_with(kHeads, 512 * 1024);
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  const FunctionPlan& p = plan->functions[0];
  CHECK(p.arena_size == 512 * 1024);
  CHECK(count_recomputations(m.functions[0], p).instructions == 1);
  // Both projections read the one recomputation.
  int remat = -1, readers = 0;
  for (const Instruction& inst : p.program)
    if (inst.recomputed) remat = inst.outputs[0];
  REQUIRE(remat >= 0);
  CHECK(value_at(m.functions[0], p, remat).name == "h.remat1");
  for (const Instruction& inst : p.program)
    for (int in : inst.inputs)
      if (in == remat) ++readers;
  CHECK(readers == 2);
}

TEST_CASE("functions with loops are left as they are, and the error says so") {
  constexpr const char* kLoop = R"(module @loop
func @main(%x: f32[64,64], %n: i64[]) -> (f32[64,64]) {
  %a = call @neg(%x) : f32[64,64]
  %r = for %i = 0 to %n iter(%c = %x) {
    %t = call @matmul(%c, %c) : f32[64,64]
    yield %t
  }
  %y = call @add(%r, %a) : f32[64,64]
  return %y
}
)";
  auto plan = plan_with(kLoop, 1024);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().message().find("does not reach into functions with loops or ifs") != std::string::npos);
}

TEST_CASE("the written file marks every recomputation and the verifier accepts it") {
  CompileOptions options;
  options.device_budget = 3 * kValue + constant_bytes(parse_ok(kHeld));
  auto bytes = compile_source(kHeld, "t.hxir", data_dir(), options);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  auto verified = format::verify_executable(*bytes);
  REQUIRE_MESSAGE(verified.ok(), verified.status().to_string());
  const fb::Module& fm = *verified->module;
  CHECK(fm.arena()->size() <= 3 * kValue);
  int recomputed = 0;
  for (uint32_t s = 0; s < fm.slots()->size(); ++s) {
    const fb::Slot& slot = *fm.slots()->Get(s);
    if (slot.recomputes() < 0) continue;
    ++recomputed;
    const fb::Slot& original = *fm.slots()->Get(static_cast<uint32_t>(slot.recomputes()));
    CHECK(slot.name()->str() == original.name()->str() + ".remat1");
    CHECK(static_cast<uint32_t>(slot.recomputes()) < s);
  }
  CHECK(recomputed == 1);
}

}  // namespace hexir::compiler::testing
