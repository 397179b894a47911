// Host offload under a device memory budget (offload.h): a value that
// recomputation cannot bring back cheaply waits in the host arena across the
// peak; the host budget; the error when neither reaches the budget; what the
// file says about each copy.
#include <doctest/doctest.h>

#include <string>

#include "budget_programs.h"
#include "passes/offload.h"
#include "test_util.h"

namespace hexir::compiler::testing {
namespace {

// @far (budget_programs.h): offloading %a lowers its peak from three 16 KiB
// values to two; its prefetch goes before the add reading it.
const std::string& kFar = hexir::testing::kFarProgram;
constexpr uint64_t kValue = 64 * 64 * 4;

Result<ModulePlan> plan_with(std::string_view source, std::optional<uint64_t> device,
                             std::optional<uint64_t> host = std::nullopt) {
  CompileOptions options;
  options.device_budget = device;
  options.host_budget = host;
  return plan_module(parse_ok(source), options, "t.hxir");
}

}  // namespace

TEST_CASE("--memory-budget: host=BYTES is the host arena's budget") {
  CompileOptions o;
  REQUIRE(parse_memory_budget("host=2MiB", o).ok());
  CHECK(o.host_budget == uint64_t{2} << 20);
  CHECK_FALSE(o.device_budget.has_value());
  REQUIRE(parse_memory_budget("device=1MiB", o).ok());
  CHECK(o.device_budget == uint64_t{1} << 20);
  CHECK(parse_memory_budget("host=1KiB", o).message().find("host is given twice") != std::string::npos);
  CHECK(parse_memory_budget("pinned=1KiB", o).message().find("the memory spaces are 'device' and 'host'") !=
        std::string::npos);
  CompileOptions naive;
  naive.host_budget = 1024;
  naive.plan = PlanStrategy::kNaive;
  CHECK(check_compile_options(naive).message().find("needs the arena plan") != std::string::npos);
}

TEST_CASE("offload: a value rematerialization cannot reach waits in the host arena across the peak") {
  const Module m = parse_ok(kFar);
  auto free = plan_with(kFar, std::nullopt);
  REQUIRE_MESSAGE(free.ok(), free.status().to_string());
  CHECK(free->functions[0].arena_size == 3 * kValue);
  CHECK(free->functions[0].host_arena_size == 0);
  CHECK(count_transfers(m.functions[0], free->functions[0]).evictions == 0);

  auto plan = plan_with(kFar, 2 * kValue);
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  const FunctionPlan& p = plan->functions[0];
  CHECK(p.arena_size == 2 * kValue);
  CHECK(count_recomputations(m.functions[0], p).instructions == 0);
  const TransferCount moved = count_transfers(m.functions[0], p);
  CHECK(moved.evictions == 1);
  CHECK(moved.prefetches == 1);
  CHECK(moved.bytes_evicted == kValue);
  CHECK(moved.bytes_prefetched == kValue);
  CHECK(p.host_arena_size == kValue);
  CHECK(p.host_lower_bound == kValue);
  // The eviction right after %a's writer, the prefetch just before the add;
  // the add reads the prefetched copy, which names %a.
  int evict_at = -1, prefetch_at = -1;
  for (size_t k = 0; k < p.program.size(); ++k) {
    if (p.program[k].control == Control::kEvict) evict_at = static_cast<int>(k);
    if (p.program[k].control == Control::kPrefetch) prefetch_at = static_cast<int>(k);
  }
  REQUIRE(evict_at > 0);
  REQUIRE(prefetch_at > evict_at);
  const Instruction& writer = p.program[static_cast<size_t>(evict_at - 1)];
  CHECK(writer.op == ops::OpId::kTanh);
  const int a = writer.outputs[0];
  CHECK(value_at(m.functions[0], p, a).name == "a");
  const Instruction& evict = p.program[static_cast<size_t>(evict_at)];
  const Instruction& prefetch = p.program[static_cast<size_t>(prefetch_at)];
  CHECK(evict.inputs == std::vector<int>{a});
  const int host = evict.outputs[0];
  CHECK(p.values[static_cast<size_t>(host)].storage == Storage::kHost);
  CHECK(p.values[static_cast<size_t>(host)].copy_of == a);
  CHECK(value_at(m.functions[0], p, host).name == "a.host1");
  CHECK(prefetch.inputs == std::vector<int>{host});
  const int copy = prefetch.outputs[0];
  CHECK(p.values[static_cast<size_t>(copy)].storage == Storage::kArena);
  CHECK(p.values[static_cast<size_t>(copy)].copy_of == a);
  const Instruction& add = p.program[static_cast<size_t>(prefetch_at + 1)];
  CHECK(add.op == ops::OpId::kAdd);
  CHECK(add.inputs[1] == copy);
}

TEST_CASE("offload: the host budget caps the host arena; over it the device budget is refused") {
  auto fits = plan_with(kFar, 2 * kValue, kValue);
  REQUIRE_MESSAGE(fits.ok(), fits.status().to_string());
  CHECK(fits->functions[0].host_arena_size <= kValue);
  auto refused = plan_with(kFar, 2 * kValue, kValue - 1);
  REQUIRE_FALSE(refused.ok());
  const std::string message = refused.status().message();
  CAPTURE(message);
  CHECK(message.starts_with("t.hxir: memory budget device=32768 bytes cannot be met"));
  CHECK(message.find("0 values offloaded to host memory under host=16383") != std::string::npos);
}

TEST_CASE("offload: a budget below what offload reaches fails naming the smallest arena and why") {
  auto plan = plan_with(kFar, kValue);
  REQUIRE_FALSE(plan.ok());
  const std::string message = plan.status().message();
  CAPTURE(message);
  CHECK(message.starts_with("t.hxir: memory budget device=16384 bytes cannot be met"));
  CHECK(message.find("the smallest device arena reached is 32768 bytes (49152 without a budget") !=
        std::string::npos);
  CHECK(message.find("values offloaded to host memory") != std::string::npos);
  CHECK(message.find("@main peaks at 32768 live bytes") != std::string::npos);
}

TEST_CASE("offload: the written file marks every copy and the verifier accepts it") {
  CompileOptions options;
  options.device_budget = 2 * kValue;
  auto bytes = compile_source(kFar, "t.hxir", data_dir(), options);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  auto verified = format::verify_executable(*bytes);
  REQUIRE_MESSAGE(verified.ok(), verified.status().to_string());
  const fb::Module& fm = *verified->module;
  CHECK(fm.arena()->size() <= 2 * kValue);
  CHECK(fm.arena()->host_size() == kValue);
  CHECK(fm.arena()->host_lower_bound() == kValue);
  CHECK(fm.functions()->Get(0)->host_arena_size() == kValue);
  int host = 0, copies = 0, evicts = 0, prefetches = 0;
  for (uint32_t s = 0; s < fm.slots()->size(); ++s) {
    const fb::Slot& slot = *fm.slots()->Get(s);
    if (slot.memory_space() == fb::MemorySpace::Host) ++host;
    if (slot.copy_of() < 0) continue;
    ++copies;
    CHECK(fm.slots()->Get(static_cast<uint32_t>(slot.copy_of()))->name()->str() == "a");
  }
  for (const fb::Instruction* in : *fm.instructions()) {
    evicts += in->opcode() == fb::Opcode::Evict ? 1 : 0;
    prefetches += in->opcode() == fb::Opcode::Prefetch ? 1 : 0;
  }
  CHECK(host == 1);
  CHECK(copies == 2);
  CHECK(evicts == 1);
  CHECK(prefetches == 1);
}

}  // namespace hexir::compiler::testing
