// Arena planning: offsets for every arena value and scratch range of a
// function, from its live ranges (liveness.h), by the offset planner.
#pragma once

#include <cstdint>
#include <string>

#include "hexir/base/status.h"
#include "hexir/compiler/graph.h"
#include "hexir/compiler/options.h"
#include "hexir/planner/arena_planner.h"
#include "ir/plan.h"

namespace hexir::compiler {

using planner::BufferPlan;
using planner::kDefaultPlanBudgetMs;

// Kernel scratch (workspaces) is only placed in the arena when the arena
// alignment is at least this (it holds doubles).
constexpr uint32_t kScratchAlignment = 8;

// Assigns arena offsets to every arena value with the chosen strategy, and
// refuses an alignment below the element size of any arena value (naming it);
// below kScratchAlignment, scratch stays in the shared workspace. Sets
// plan.arena_size and plan.lower_bound. `heuristic` receives the name of
// the placement used. `plan_budget_ms` bounds the planner's improvement
// search (a deterministic work budget, see plan_arena).
Status plan_function_arena(const Function& fn, FunctionPlan& plan, PlanStrategy strategy, uint32_t alignment,
                           std::string* heuristic, uint64_t plan_budget_ms = kDefaultPlanBudgetMs);

}  // namespace hexir::compiler
