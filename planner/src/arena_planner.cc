#include "hexir/planner/arena_planner.h"

#include <algorithm>
#include <iterator>
#include <numeric>
#include <queue>
#include <set>
#include <utility>

#include "planner_greedy.h"
#include "planner_problem.h"
#include "planner_search.h"

namespace hexir::planner {
namespace {

using internal::kArenaLimit;

bool is_power_of_two(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

Result<uint64_t> aligned(uint64_t value, uint64_t alignment) {
  if (value > kArenaLimit) return resource_exhausted("arena plan exceeds 2^62 bytes");
  return (value + alignment - 1) & ~(alignment - 1);
}

Status check_inputs(std::span<const PlanBuffer> buffers, uint64_t alignment) {
  if (!is_power_of_two(alignment))
    return invalid_argument("arena alignment " + std::to_string(alignment) + " is not a power of two");
  for (const PlanBuffer& b : buffers) {
    if (b.size > kArenaLimit)
      return resource_exhausted("buffer of " + std::to_string(b.size) + " bytes is too large");
    if (b.upper < b.lower) return invalid_argument("buffer live range ends before it starts");
  }
  return ok_status();
}

// Offsets in units (one per problem buffer) to a plan in bytes (one offset per
// caller buffer; buffers that occupy nothing sit at 0).
Result<BufferPlan> to_buffer_plan(size_t count, const internal::Problem& problem,
                                  const std::vector<uint64_t>& units, uint64_t alignment,
                                  std::string heuristic) {
  BufferPlan plan;
  plan.heuristic = std::move(heuristic);
  plan.offsets.assign(count, 0);
  uint64_t peak = 0;
  for (size_t b = 0; b < problem.count(); ++b) {
    if (units[b] > problem.limit - problem.size[b])
      return resource_exhausted("arena plan exceeds 2^62 bytes");
    plan.offsets[problem.original[b]] = units[b] * alignment;
    peak = std::max(peak, units[b] + problem.size[b]);
  }
  plan.size = peak * alignment;
  return plan;
}

}  // namespace

uint64_t live_lower_bound(std::span<const PlanBuffer> buffers) {
  // Sweep: +size at lower, -size at upper; at equal times the ends come
  // first because ranges are half-open.
  std::vector<std::pair<std::pair<int64_t, int>, uint64_t>> sweep;  // ((time, 0 end | 1 start), size)
  sweep.reserve(buffers.size() * 2);
  for (const PlanBuffer& b : buffers) {
    if (b.size == 0 || b.upper <= b.lower) continue;
    sweep.push_back({{b.lower, 1}, b.size});
    sweep.push_back({{b.upper, 0}, b.size});
  }
  std::sort(sweep.begin(), sweep.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  uint64_t live = 0, peak = 0;
  for (const auto& [key, size] : sweep) {
    if (key.second == 1) {
      live += size;
      peak = std::max(peak, live);
    } else {
      live -= size;
    }
  }
  return peak;
}

Result<BufferPlan> plan_naive(std::span<const PlanBuffer> buffers, uint64_t alignment) {
  HEXIR_RETURN_IF_ERROR(check_inputs(buffers, alignment));
  BufferPlan plan;
  plan.heuristic = "naive";
  uint64_t next = 0;
  for (const PlanBuffer& b : buffers) {
    plan.offsets.push_back(next);
    HEXIR_ASSIGN_OR_RETURN(next, aligned(next + b.size, alignment));
  }
  plan.size = next;
  return plan;
}

Result<BufferPlan> plan_greedy_by_size(std::span<const PlanBuffer> buffers, uint64_t alignment) {
  HEXIR_RETURN_IF_ERROR(check_inputs(buffers, alignment));
  internal::Problem problem = internal::make_problem(buffers, alignment);
  if (problem.lower_bound > problem.limit) return resource_exhausted("arena plan exceeds 2^62 bytes");
  std::vector<uint64_t> units = internal::place_in_order(
      problem, internal::make_order(problem, internal::Order::kSize), internal::Fit::kBest);
  if (units.size() != problem.count()) return resource_exhausted("arena plan exceeds 2^62 bytes");
  return to_buffer_plan(buffers.size(), problem, units, alignment, "greedy-by-size");
}

Result<BufferPlan> plan_arena(std::span<const PlanBuffer> buffers, const PlanOptions& options,
                              PlanReport* report) {
  const uint64_t alignment = options.alignment;
  HEXIR_RETURN_IF_ERROR(check_inputs(buffers, alignment));
  internal::Problem problem = internal::make_problem(buffers, alignment);
  if (problem.lower_bound > problem.limit)
    return resource_exhausted("arena plan exceeds 2^62 bytes: the lower bound alone is larger");

  PlanReport local;
  PlanReport& r = report ? *report : local;
  r = PlanReport{};
  r.lower_bound = live_lower_bound(buffers);
  r.aligned_lower_bound = problem.lower_bound * alignment;

  std::vector<internal::GreedyResult> greedy = internal::run_greedy_heuristics(problem, &r.greedy_stopped_early);
  if (greedy.empty()) return resource_exhausted("arena plan exceeds 2^62 bytes");
  size_t winner = 0;
  for (size_t i = 0; i < greedy.size(); ++i) {
    r.greedy.push_back({greedy[i].name, greedy[i].peak * alignment, greedy[i].capped});
    r.greedy_capped += greedy[i].capped ? 1 : 0;
    if (greedy[i].peak < greedy[winner].peak) winner = i;
  }
  std::vector<uint64_t> units = std::move(greedy[winner].offsets);
  uint64_t peak = greedy[winner].peak;
  std::string heuristic = greedy[winner].name;
  r.greedy_winner = heuristic;
  r.greedy_size = peak * alignment;

  internal::WorkBudget budget;
  budget.limit = options.budget_ms > UINT64_MAX / internal::kWorkPerMs
                     ? UINT64_MAX
                     : options.budget_ms * internal::kWorkPerMs;
  if (peak > problem.lower_bound && budget.limit > 0) {
    std::string improved_by = internal::improve(problem, units, peak, budget);
    if (!improved_by.empty()) heuristic = improved_by;
  }
  r.work_limit = budget.limit;
  r.work_used = budget.used;
  r.reached_lower_bound = peak == problem.lower_bound;

  HEXIR_ASSIGN_OR_RETURN(BufferPlan plan,
                         to_buffer_plan(buffers.size(), problem, units, alignment, heuristic));
  // A wrong plan corrupts results silently: never hand one out.
  HEXIR_RETURN_IF_ERROR(
      check_buffer_plan(buffers, plan, alignment).annotate("planner produced an invalid plan"));
  return plan;
}

Status check_buffer_plan(std::span<const PlanBuffer> buffers, const BufferPlan& plan, uint64_t alignment) {
  if (plan.offsets.size() != buffers.size())
    return internal_error("plan has " + std::to_string(plan.offsets.size()) + " offsets for " +
                          std::to_string(buffers.size()) + " buffers");
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (alignment && plan.offsets[i] % alignment != 0)
      return internal_error("buffer " + std::to_string(i) + " offset " + std::to_string(plan.offsets[i]) +
                            " is not a multiple of " + std::to_string(alignment));
    if (buffers[i].upper <= buffers[i].lower) continue;  // never live: occupies nothing
    if (plan.offsets[i] > plan.size || buffers[i].size > plan.size - plan.offsets[i])
      return internal_error("buffer " + std::to_string(i) + " ends past the arena size " +
                            std::to_string(plan.size));
  }
  // Sweep in time. The buffers live at one instant are pairwise disjoint in
  // memory (checked as each arrives), so a newcomer need only be compared with
  // its neighbours in offset order.
  std::vector<size_t> order;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].size > 0 && buffers[i].lower < buffers[i].upper) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return buffers[a].lower != buffers[b].lower ? buffers[a].lower < buffers[b].lower : a < b;
  });
  using Ending = std::pair<int64_t, size_t>;  // (upper, buffer)
  std::priority_queue<Ending, std::vector<Ending>, std::greater<Ending>> endings;
  std::set<std::pair<uint64_t, size_t>> live;  // (offset, buffer)
  auto conflict = [&](size_t a, size_t b) {
    return internal_error("buffers " + std::to_string(std::min(a, b)) + " and " +
                          std::to_string(std::max(a, b)) +
                          " are live at the same time and overlap in the arena");
  };
  for (size_t i : order) {
    while (!endings.empty() && endings.top().first <= buffers[i].lower) {
      live.erase({plan.offsets[endings.top().second], endings.top().second});
      endings.pop();
    }
    auto it = live.insert({plan.offsets[i], i}).first;
    if (it != live.begin()) {
      size_t prev = std::prev(it)->second;
      if (plan.offsets[prev] + buffers[prev].size > plan.offsets[i]) return conflict(prev, i);
    }
    if (auto next = std::next(it); next != live.end()) {
      if (plan.offsets[i] + buffers[i].size > plan.offsets[next->second]) return conflict(i, next->second);
    }
    endings.push({buffers[i].upper, i});
  }
  return ok_status();
}

}  // namespace hexir::planner
