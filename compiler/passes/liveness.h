// Liveness: when each buffer is written and last read, on the finished
// program: last uses and scratch sizes recorded in the plan, and the live
// ranges the arena planner places (arena.h).
#pragma once

#include <cstdint>
#include <vector>

#include "hexir/compiler/graph.h"
#include "hexir/planner/arena_planner.h"
#include "ir/plan.h"

namespace hexir::compiler {

// The offset planner (planner/) works on plain live ranges.
using planner::PlanBuffer;

// Per storage root: program index of the last instruction reading it or any
// view of it (-1: none), and of its writer (-1: not written by an instruction).
struct Uses {
  std::vector<int64_t> last_read;
  std::vector<int64_t> def;
};
Uses compute_uses(const FunctionPlan& plan);

// Sets ValuePlan::last_use on every arena storage root.
void record_last_uses(const Function& fn, FunctionPlan& plan);

// Sets each instruction's workspace_size (ops::workspace_bytes) and
// plan.workspace_size, their maximum. Where the scratch goes is the plan's
// choice: shared past the arena, or (plan.workspace_in_arena) one arena range
// per instruction, live only while it runs (plan_function_arena places them).
void record_workspaces(const Function& fn, FunctionPlan& plan);

// One live range per arena buffer (its head value), in program indices: from
// the instruction that writes it to one past the last that reads it, any view
// of it, or any value that took its buffer over in place. A result nothing
// reads still occupies its writing instruction.
struct LiveRange {
  int root = -1;  // value id
  PlanBuffer buffer;
};
// `space`: the device arena (kArena) or the host arena (kHost).
std::vector<LiveRange> compute_live_ranges(const Function& fn, const FunctionPlan& plan,
                                           Storage space = Storage::kArena);

}  // namespace hexir::compiler
