// The greedy phase: several placement orders and fits, each a pass over the
// buffers with an indexed overlap query, run side by side.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner_problem.h"

namespace hexir::planner::internal {

enum class Fit {
  kBest,   // the smallest gap between live buffers that fits (TFLite, XLA)
  kFirst,  // the lowest gap that fits
};

struct GreedyResult {
  std::string name;
  std::vector<uint64_t> offsets;  // units, one per problem buffer
  uint64_t peak = 0;              // units
  bool capped = false;            // ran out of its work allowance (see place_in_order)
  uint64_t work = 0;              // work units it used
};

// Work allowance of one greedy placement over n buffers: kGreedyWorkFloor +
// kGreedyWorkPerBuffer * n * ceil(log2(n + 1)) units, one unit per span an
// overlap query merges or an insertion moves. The gap lists a query merges
// can hold O(n) spans each (long-lived buffers at scattered offsets), which
// makes best and first fit O(n^2) on hostile inputs (random live ranges);
// the allowance keeps every placement O(n log n). No instance of the public
// planning benchmarks comes near it (docs/planning.md).
constexpr uint64_t kGreedyWorkFloor = 150'000'000;
constexpr uint64_t kGreedyWorkPerBuffer = 4;
uint64_t greedy_work_allowance(size_t buffers);
// The whole phase: a round starts only if the rounds so far plus one more of
// the last round's cost stay within kGreedyPhaseFloor + kGreedyWorkPerBuffer
// * n * ceil(log2(n + 1)) units, so a million well-behaved buffers (each
// placement inside its allowance, but each a quarter of a billion units) run
// one round, not six.
constexpr uint64_t kGreedyPhaseFloor = 4 * kGreedyWorkFloor;
uint64_t greedy_phase_allowance(size_t buffers);

// What one placement did.
struct PlacementStats {
  bool capped = false;  // ran out of its allowance: the rest went on top
  uint64_t work = 0;    // units used
};

// Places the buffers one by one in `order` (indices into the problem), each
// into a gap left by the already-placed buffers that are live at the same
// time, chosen by `fit`, or on top of them when none fits. Once the work
// allowance is spent (`work_allowance`; 0: greedy_work_allowance of the
// problem's size), the buffers left each go on top of everything placed that
// they meet (a range maximum, O(log T)) and `stats->capped` is set. Returns
// no offsets when a buffer would end above problem.limit.
std::vector<uint64_t> place_in_order(const Problem& problem, const std::vector<uint32_t>& order, Fit fit,
                                     PlacementStats* stats = nullptr, uint64_t work_allowance = 0);

// Bottom-up placement: repeatedly the unplaced buffer that can sit lowest
// (on top of everything placed that it meets), ties by `rank` (lower first).
// Returns no offsets when a buffer would end above problem.limit.
// With a budget, every queue step is charged to it and an exhausted budget
// also gives no offsets.
std::vector<uint64_t> place_skyline(const Problem& problem, const std::vector<uint32_t>& rank,
                                    WorkBudget* budget = nullptr);

// Every greedy heuristic, in a fixed order, in rounds of two; the phase ends
// after a round that reaches the lower bound, in which a heuristic ran out of
// its work allowance, or after which the phase's allowance is spent
// (`*stopped_early` tells the last; `phase_allowance` 0: greedy_phase_allowance
// of the problem's size). Each result is a valid plan; heuristics that would
// pass problem.limit are left out.
std::vector<GreedyResult> run_greedy_heuristics(const Problem& problem, bool* stopped_early = nullptr,
                                                uint64_t phase_allowance = 0);

// Orders used by the heuristics and by the search (buffer indices, first
// placed first). All ties are broken by index, so orders are deterministic.
enum class Order { kSize, kDuration, kArea, kBreadth, kConflict, kStart };
std::vector<uint32_t> make_order(const Problem& problem, Order order);
const char* order_name(Order order);

}  // namespace hexir::planner::internal
