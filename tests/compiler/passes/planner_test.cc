// Arena plans of compiled functions, checked by the shared independent
// validator (tests/common/plan_validator.h).
#include <random>

#include "hexir/planner/arena_planner.h"
#include "plan_validator.h"
#include "test_util.h"

namespace hexir::compiler::testing {
namespace {

using namespace hexir::planner;

// A function with a wide middle: several values live at once, then a tail
// where earlier storage can be reused.
constexpr const char* kDiamond = R"(
const @w : f32[64,64] = file "f32_64x64.npy"
func @f(%x: f32[8,64]) -> (f32[8,64]) {
  %a = call @matmul(%x, @w) : f32[8,64]
  %b = call @relu(%a) : f32[8,64]
  %c = call @exp(%a) : f32[8,64]
  %d = call @neg(%a) : f32[8,64]
  %e = call @add(%b, %c) : f32[8,64]
  %f = call @add(%e, %d) : f32[8,64]
  %g = call @tanh(%f) : f32[8,64]
  %h = call @sigmoid(%g) : f32[8,64]
  %i = call @sqrt(%h) : f32[8,64]
  %j = call @mul(%i, %h) : f32[8,64]
  return %j
}
)";

Lowered lowered_with_weights(std::string_view source, PlanStrategy plan, uint32_t alignment) {
  TempDir dir;
  std::vector<uint8_t> w(64 * 64 * 4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>(i * 31 + 7);
  REQUIRE(write_npy((dir.path() / "f32_64x64.npy").string(), {DType::kF32, {64, 64}}, w).ok());
  return lower(source, plan, alignment, dir.path());
}

void check_function_plan(const Function& fn, const FunctionPlan& plan, uint32_t alignment) {
  std::vector<LiveRange> ranges = compute_live_ranges(fn, plan);
  std::vector<PlanBuffer> buffers;
  std::vector<uint64_t> offsets;
  for (const LiveRange& r : ranges) {
    buffers.push_back(r.buffer);
    offsets.push_back(plan.values[r.root].arena_offset);
  }
  CHECK(validate(buffers, BufferPlan{offsets, plan.arena_size, ""}, alignment, false) == "");
  // Views sit exactly where their roots are.
  for (const ValuePlan& v : plan.values)
    if (v.storage == Storage::kArena) CHECK(v.arena_offset == plan.values[v.storage_root].arena_offset);
}

TEST_CASE("function plans: arena beats naive, respects the bound, never overlaps") {
  for (uint32_t alignment : {16u, 64u, 512u}) {
    Lowered naive = lowered_with_weights(kDiamond, PlanStrategy::kNaive, alignment);
    Lowered arena = lowered_with_weights(kDiamond, PlanStrategy::kArena, alignment);
    const FunctionPlan& n = naive.plan.functions[0];
    const FunctionPlan& a = arena.plan.functions[0];
    check_function_plan(naive.module.functions[0], n, alignment);
    check_function_plan(arena.module.functions[0], a, alignment);
    // 9 arena values of 2 KiB (j is the output): naive keeps all of them.
    CHECK(n.arena_size == 9 * 2048);
    CHECK(a.arena_size < n.arena_size);
    CHECK(a.arena_size >= a.lower_bound);
    CHECK(a.lower_bound == n.lower_bound);
    CHECK(a.lower_bound == 4 * 2048);  // at %e: a, b, c, d... a dies at %d: b, c, d, e live
    CHECK(a.arena_size == a.lower_bound);
  }
}

TEST_CASE("function plans: the lower bound counts raw bytes, the plan aligned ones") {
  Lowered m = lower(R"(
func @f(%x: f32[3]) -> (f32[3]) {
  %a = call @relu(%x) : f32[3]
  %b = call @exp(%x) : f32[3]
  %c = call @add(%a, %b) : f32[3]
  return %c
})");
  const FunctionPlan& fn = m.plan.functions[0];
  CHECK(fn.lower_bound == 24);
  CHECK(fn.arena_size == 128);
  check_function_plan(m.module.functions[0], fn, 64);
}

TEST_CASE("function plans: a view keeps its root alive in the plan") {
  Lowered m = lower(R"(
func @f(%x: f32[16]) -> (f32[16]) {
  %a = call @relu(%x) : f32[16]
  %v = call @reshape(%a) : f32[4,4]
  %b = call @exp(%x) : f32[16]
  %c = call @neg(%b) : f32[16]
  %w = call @reshape(%v) : f32[16]
  %d = call @add(%w, %c) : f32[16]
  return %d
})");
  const FunctionPlan& fn = m.plan.functions[0];
  check_function_plan(m.module.functions[0], fn, 64);
  CHECK(fn.lower_bound == 3 * 64);  // a, b, c all live at %c
}

}  // namespace
}  // namespace hexir::compiler::testing
