// The compile pipeline's planning half, for the compiler's own tests and
// benchmarks: every pass on a graph, up to (not including) the writer.
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
