// The compile pipeline on a graph, whichever front end built it: the constant
// passes, the per-function passes and arena plans, then the writer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

#include "graph.h"
#include "hexir/base/status.h"
#include "hexir/serializer/compiler.h"
#include "plan.h"

namespace hexir::serializer {

// Fails when an option is out of range (the arena alignment).
Status check_compile_options(const CompileOptions& options);

// Runs every pass and returns the plan. `display_name` prefixes planning
// errors (the source's name; empty: none).
Result<ModulePlan> plan_module(const Module& module, const CompileOptions& options,
                               std::string_view display_name = {});

// A graph to .hxe bytes, or straight into a file (see compile_file_to).
Result<std::vector<uint8_t>> compile_module(const Module& module, const CompileOptions& options = {},
                                            std::string_view display_name = {});
Result<CompiledFile> compile_module_to(const Module& module, const std::filesystem::path& out,
                                       const CompileOptions& options = {},
                                       std::string_view display_name = {});

}  // namespace hexir::serializer
