// The planner's building blocks: the lower bound, the naive and greedy plans,
// alignment and zero-size edge cases, check_buffer_plan. Every plan is checked
// by the independent validator (tests/common/plan_validator.h).
#include <doctest/doctest.h>

#include <random>

#include "hexir/planner/arena_planner.h"
#include "plan_validator.h"

namespace hexir::planner {
namespace {

std::vector<PlanBuffer> random_buffers(std::mt19937& rng, int count, int horizon) {
  std::vector<PlanBuffer> buffers;
  for (int i = 0; i < count; ++i) {
    PlanBuffer b;
    b.lower = rng() % horizon;
    b.upper = b.lower + 1 + rng() % 6;
    // A mix of tiny, odd and large sizes, some zero.
    switch (rng() % 4) {
      case 0:
        b.size = rng() % 5;
        break;
      case 1:
        b.size = 1 + rng() % 100;
        break;
      case 2:
        b.size = 64 * (1 + rng() % 16);
        break;
      default:
        b.size = 1 + rng() % 5000;
        break;
    }
    buffers.push_back(b);
  }
  return buffers;
}

TEST_CASE("lower bound: the largest sum live at one instant") {
  std::vector<PlanBuffer> buffers = {{100, 0, 2}, {50, 1, 3}, {70, 2, 4}, {10, 3, 4}};
  // t=0:100  t=1:150  t=2:120  t=3:80
  CHECK(live_lower_bound(buffers) == 150);
  CHECK(live_lower_bound({}) == 0);
  // Half-open: a range ending at t does not meet one starting at t.
  CHECK(live_lower_bound(std::vector<PlanBuffer>{{100, 0, 1}, {100, 1, 2}}) == 100);
}

TEST_CASE("naive plan: end to end, aligned, nothing reused") {
  std::vector<PlanBuffer> buffers = {{10, 0, 1}, {100, 1, 2}, {64, 2, 3}};
  Result<BufferPlan> plan = plan_naive(buffers, 64);
  REQUIRE(plan.ok());
  CHECK(plan->offsets == std::vector<uint64_t>{0, 64, 192});
  CHECK(plan->size == 256);
  CHECK(plan->heuristic == "naive");
}

TEST_CASE("greedy plan: a chain reuses two buffers") {
  std::vector<PlanBuffer> buffers = {{256, 0, 2}, {256, 1, 3}, {256, 2, 4}, {256, 3, 5}};
  Result<BufferPlan> plan = plan_greedy_by_size(buffers, 64);
  REQUIRE(plan.ok());
  CHECK(plan->size == 512);
  CHECK(validate(buffers, *plan, 64, false) == "");
  CHECK(plan->heuristic == "greedy-by-size");
}

TEST_CASE("greedy plan: best fit takes the smallest gap that fits") {
  // Placed first (largest): A [0,1000) and B at 1000.. both live over [0,10).
  // Then a hole is created by a buffer that ends early... build a known gap:
  std::vector<PlanBuffer> buffers = {
      {1000, 0, 10},  // 0: offset 0
      {300, 0, 5},    // 1: offset 1024 (above 0)
      {200, 0, 10},   // 2: offset 1344 (above 1)
      {100, 6, 10},   // 3: 1 is dead by then: fits in the 300-byte gap at 1024
  };
  Result<BufferPlan> plan = plan_greedy_by_size(buffers, 64);
  REQUIRE(plan.ok());
  CHECK(plan->offsets[0] == 0);
  CHECK(plan->offsets[1] == 1024);
  CHECK(plan->offsets[2] == 1344);
  CHECK(plan->offsets[3] == 1024);
  CHECK(validate(buffers, *plan, 64, false) == "");
}

TEST_CASE("planners reject an alignment that is not a power of two") {
  std::vector<PlanBuffer> buffers = {{10, 0, 1}};
  CHECK(plan_naive(buffers, 48).status().code() == StatusCode::kInvalidArgument);
  CHECK(plan_greedy_by_size(buffers, 0).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("planners: zero-size buffers and no buffers") {
  Result<BufferPlan> empty = plan_greedy_by_size({}, 64);
  REQUIRE(empty.ok());
  CHECK(empty->size == 0);
  std::vector<PlanBuffer> zeros = {{0, 0, 3}, {0, 1, 2}, {8, 0, 3}};
  Result<BufferPlan> plan = plan_greedy_by_size(zeros, 64);
  REQUIRE(plan.ok());
  CHECK(plan->size == 64);
  CHECK(validate(zeros, *plan, 64, false) == "");
}

TEST_CASE("planners: random buffers give valid plans between the bound and naive") {
  std::mt19937 rng(42);
  for (uint64_t alignment : {1u, 8u, 64u, 256u}) {
    for (int round = 0; round < 150; ++round) {
      std::vector<PlanBuffer> buffers = random_buffers(rng, 1 + round % 40, 1 + round % 30);
      Result<BufferPlan> naive = plan_naive(buffers, alignment);
      Result<BufferPlan> greedy = plan_greedy_by_size(buffers, alignment);
      REQUIRE(naive.ok());
      REQUIRE(greedy.ok());
      uint64_t bound = live_lower_bound(buffers);
      INFO("alignment ", alignment, " round ", round);
      CHECK(validate(buffers, *naive, alignment, false) == "");
      CHECK(validate(buffers, *greedy, alignment, false) == "");
      CHECK(check_buffer_plan(buffers, *greedy, alignment).ok());
      CHECK(greedy->size <= naive->size);
      CHECK(greedy->size >= bound);
      CHECK(greedy->size % alignment == 0);
    }
  }
}

TEST_CASE("check_buffer_plan catches overlaps and misalignment") {
  std::vector<PlanBuffer> buffers = {{100, 0, 2}, {100, 1, 3}};
  BufferPlan overlapping{{0, 50}, 192, "test"};
  CHECK(!check_buffer_plan(buffers, overlapping, 1).ok());
  BufferPlan misaligned{{0, 100}, 256, "test"};
  CHECK(!check_buffer_plan(buffers, misaligned, 64).ok());
  BufferPlan good{{0, 128}, 256, "test"};
  CHECK(check_buffer_plan(buffers, good, 64).ok());
}

}  // namespace
}  // namespace hexir::planner
