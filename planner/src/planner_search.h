// The improvement phase: a MiniMalloc-style search for plans smaller than the
// best greedy one, under a deterministic work budget.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner_problem.h"

namespace hexir::planner::internal {

// Tries to find a plan with a lower peak than `peak` (units), starting at the
// lower bound and bisecting towards `peak`. On success replaces `offsets` and
// `peak` and returns the name of what found the last improvement ("" if
// nothing did). First bottom-up (skyline) placements under several orders,
// then the exact search. Stops when the budget is spent or the lower bound is
// reached.
std::string improve(const Problem& problem, std::vector<uint64_t>& offsets, uint64_t& peak,
                    WorkBudget& budget);

}  // namespace hexir::planner::internal
