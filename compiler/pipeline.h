// The compile pipeline's planning half, for the compiler's own tests and
// benchmarks: every pass on a graph, up to (not including) the writer.
// Each pass reads the graph (graph.h), never changes it, and fills the plan
// beside it (plan.h). In the order plan_module runs them (passes/*.h):
//   detect_splats -> dedupe_constants -> pack_constants     (module, constants.h)
//   assign_storage (storage.h, views.h) -> [schedule_for_memory (schedule.h)]
//   -> assign_in_place -> place_donations (in_place.h) -> record_last_uses
//   -> record_workspaces (liveness.h) -> plan_function_arena (arena.h)
//                                                            (per function)
// Under a memory budget, rematerialization (remat.h), host offload and
// weights streaming (offload.h) rework the plan before in-place.
#pragma once

#include <string_view>

#include "hexir/base/status.h"
#include "hexir/compiler/compiler.h"
#include "ir/plan.h"

namespace hexir::compiler {

// Runs every pass and returns the plan. `display_name` prefixes planning
// errors (the source's name; empty: none).
Result<ModulePlan> plan_module(const Module& module, const CompileOptions& options,
                               std::string_view display_name = {});

}  // namespace hexir::compiler
