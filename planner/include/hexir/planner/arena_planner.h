// Offset assignment for the arena, independent of the IR: buffers with a
// half-open live range [lower, upper) in instruction indices and a byte size
// go in, offsets come out. Two buffers whose ranges intersect never share
// bytes; every offset is a multiple of the alignment.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hexir/base/status.h"

namespace hexir::planner {

struct PlanBuffer {
  uint64_t size = 0;
  int64_t lower = 0;  // first instruction that writes it
  int64_t upper = 0;  // one past the last instruction that reads it
};

struct BufferPlan {
  std::vector<uint64_t> offsets;  // one per buffer, in input order
  uint64_t size = 0;              // arena bytes, a multiple of the alignment
  std::string heuristic;          // which placement produced it
};

inline bool live_ranges_intersect(const PlanBuffer& a, const PlanBuffer& b) {
  return a.lower < b.upper && b.lower < a.upper;
}

// Largest sum of sizes live at one instant (ignoring alignment): no plan can
// be smaller. Zero for no buffers.
uint64_t live_lower_bound(std::span<const PlanBuffer> buffers);

// The baseline: buffers laid end to end in input order, nothing reused.
// `alignment` must be a power of two.
Result<BufferPlan> plan_naive(std::span<const PlanBuffer> buffers, uint64_t alignment);

// Largest buffer first; each goes into the smallest gap left by the
// already-placed buffers that are live at the same time (best fit), or above
// them all when no gap fits.
Result<BufferPlan> plan_greedy_by_size(std::span<const PlanBuffer> buffers, uint64_t alignment);

// Checks a plan independently of how it was made: alignment, and no two
// buffers live at the same time share a byte. Returns the first conflict.
// O(n log n + overlapping pairs met in a sweep), so it can run on every compile.
Status check_buffer_plan(std::span<const PlanBuffer> buffers, const BufferPlan& plan, uint64_t alignment);

// ---- The planner: several heuristics, the smallest kept, then a search. ----

// Default improvement budget for compiles (small: most graphs hit the lower
// bound in the greedy phase already).
constexpr uint64_t kDefaultPlanBudgetMs = 200;

struct PlanOptions {
  uint64_t alignment = 64;  // power of two; every offset is a multiple of it
  // Improvement-phase budget in milliseconds. It is turned into a fixed
  // amount of counted work (planner::kWorkPerMs units per ms), never read
  // from a clock: the same input and budget give the same offsets on any
  // machine; only the wall time varies. 0: greedy heuristics only.
  uint64_t budget_ms = kDefaultPlanBudgetMs;
};

// What plan_arena did, for tools and benchmarks. Sizes in bytes.
struct PlanReport {
  uint64_t lower_bound = 0;          // live_lower_bound(buffers): no plan is smaller
  uint64_t aligned_lower_bound = 0;  // the same with sizes rounded up to the alignment
  struct Heuristic {
    std::string name;
    uint64_t size = 0;    // arena bytes of its plan
    bool capped = false;  // ran out of its work allowance: the rest went on top (planner_greedy.h)
  };
  std::vector<Heuristic> greedy;  // every greedy heuristic tried, in the order run
  std::string greedy_winner;      // the smallest of them (first in that order on ties)
  uint64_t greedy_size = 0;
  size_t greedy_capped = 0;  // how many of them ran out of their work allowance (hostile sizes only)
  bool greedy_stopped_early = false;  // the phase's work allowance ended it before every heuristic ran
  uint64_t work_limit = 0, work_used = 0;  // improvement phase, in work units
  bool reached_lower_bound = false;        // size == aligned_lower_bound: provably optimal
};

// The best static plan we can build: every greedy heuristic (orders by size,
// duration, area, breadth of the live peak over the lifetime, conflicts,
// start time; best fit, first fit, bottom-up skyline), the smallest kept; then,
// unless it already meets the lower bound, a search for smaller plans within
// the budget (a MiniMalloc-style canonical search under capacity targets,
// split at time cut-lines, pruned by the per-slot lower bound). Deterministic.
// plan.heuristic names what produced the plan ("size-best-fit", ...,
// "canonical-search"). The plan is checked before it is returned.
Result<BufferPlan> plan_arena(std::span<const PlanBuffer> buffers, const PlanOptions& options,
                              PlanReport* report = nullptr);

}  // namespace hexir::planner
