// Issue 9: the greedy phase is O(n log n) on hostile inputs. Random live
// ranges over the whole horizon give overlap queries O(n) gaps each, which
// made best and first fit quadratic (20,000 rows: minutes); each placement
// now has a work allowance, after which the buffers left go on top.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "hexir/planner/arena_planner.h"
#include "plan_validator.h"
#include "planner_greedy.h"
#include "planner_problem.h"

namespace hexir::planner {
namespace {

// Both ends uniform over the horizon: long, heavily overlapping ranges.
std::vector<PlanBuffer> hostile_rows(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<PlanBuffer> buffers(count);
  for (PlanBuffer& b : buffers) {
    int64_t x = static_cast<int64_t>(rng() % count), y = static_cast<int64_t>(rng() % count);
    if (x > y) std::swap(x, y);
    b = {1 + rng() % (1 << 20), x, y + 1};
  }
  return buffers;
}

TEST_CASE("greedy placement: past its work allowance the rest goes on top, still valid") {
  std::vector<PlanBuffer> buffers = hostile_rows(1500, 1);
  internal::Problem problem = internal::make_problem(buffers, 1);
  for (internal::Order order : {internal::Order::kSize, internal::Order::kStart}) {
    for (internal::Fit fit : {internal::Fit::kBest, internal::Fit::kFirst}) {
      std::vector<uint32_t> sequence = internal::make_order(problem, order);
      internal::PlacementStats stats;
      stats.capped = true;
      CHECK(internal::place_in_order(problem, sequence, fit, &stats).size() == problem.count());
      CHECK(!stats.capped);  // 1,500 buffers: far inside the allowance
      CHECK(stats.work > 0);
      for (uint64_t allowance : {uint64_t{1}, uint64_t{5000}, uint64_t{200000}}) {
        std::vector<uint64_t> units = internal::place_in_order(problem, sequence, fit, &stats, allowance);
        CHECK(stats.capped);
        CHECK(stats.work >= allowance);
        REQUIRE(units.size() == problem.count());
        BufferPlan plan;
        plan.offsets.assign(buffers.size(), 0);
        for (size_t b = 0; b < problem.count(); ++b) plan.offsets[problem.original[b]] = units[b];
        plan.size = internal::peak_of(problem, units);
        CHECK(check_buffer_plan(buffers, plan, 1).ok());
        CHECK(validate(buffers, plan, 1).empty());
      }
    }
  }
  CHECK(internal::greedy_work_allowance(0) == internal::kGreedyWorkFloor);
  CHECK(internal::greedy_phase_allowance(0) == internal::kGreedyPhaseFloor);
  CHECK(internal::greedy_work_allowance(1000) ==
        internal::kGreedyWorkFloor + internal::kGreedyWorkPerBuffer * 1000 * 10);
  CHECK(internal::greedy_phase_allowance(1000) ==
        internal::kGreedyPhaseFloor + internal::kGreedyWorkPerBuffer * 1000 * 10);
}

TEST_CASE("greedy phase: no round starts once the phase's allowance is spent") {
  // Short live ranges: every placement stays inside its own allowance.
  std::mt19937_64 rng(3);
  std::vector<PlanBuffer> buffers(3000);
  for (size_t i = 0; i < buffers.size(); ++i) {
    const int64_t lower = static_cast<int64_t>(rng() % buffers.size());
    buffers[i] = {1 + rng() % 4096, lower, lower + 1 + static_cast<int64_t>(rng() % 50)};
  }
  internal::Problem problem = internal::make_problem(buffers, 1);
  bool stopped = true;
  std::vector<internal::GreedyResult> all = internal::run_greedy_heuristics(problem, &stopped);
  CHECK(!stopped);
  CHECK(all.size() == 12);
  uint64_t first_round = all[0].work + all[1].work;
  for (const internal::GreedyResult& r : all) CHECK(!r.capped);
  // A round starts only if the rounds so far plus one more of the last one's cost fit.
  auto rounds_within = [&](uint64_t allowance) {
    uint64_t spent = 0;
    for (size_t k = 0; k < all.size(); k += 2) {
      const uint64_t round = all[k].work + all[k + 1].work;
      spent += round;
      if (k + 2 < all.size() && spent + round > allowance) return k / 2 + 1;
    }
    return all.size() / 2;
  };
  for (uint64_t allowance : {2 * first_round - 1, 2 * first_round, 3 * first_round, 5 * first_round}) {
    std::vector<internal::GreedyResult> few = internal::run_greedy_heuristics(problem, &stopped, allowance);
    const size_t rounds = rounds_within(allowance);
    CHECK(few.size() == 2 * rounds);
    CHECK(stopped == (rounds < 6));
    CHECK(few[0].offsets == all[0].offsets);  // the rounds that ran are the same
  }
  CHECK(rounds_within(2 * first_round - 1) == 1);
}

TEST_CASE("plan_arena: 30,000 hostile rows plan in O(n log n) greedy work") {
  // With quadratic best fit this took minutes per heuristic (20,000: 223 s
  // for the twelve); now the first round runs out of allowance, the phase
  // ends there, and the search (budget 0 here) is not run.
  std::vector<PlanBuffer> buffers = hostile_rows(30000, 2);
  PlanReport report;
  const auto start = std::chrono::steady_clock::now();
  Result<BufferPlan> plan = plan_arena(buffers, {1, 0}, &report);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(plan.ok());
  MESSAGE("30,000 hostile rows, greedy phase: ", seconds, " s, ", report.greedy.size(), " heuristic(s), ",
          report.greedy_capped, " capped, peak ", plan->size, " (lower bound ", report.lower_bound, ")");
  CHECK(validate(buffers, *plan, 1).empty());
  CHECK(report.greedy_capped > 0);
  CHECK(report.greedy.size() == 2);  // the capped first round ends the phase
  CHECK(plan->size < report.lower_bound * 3);
}

}  // namespace
}  // namespace hexir::planner
