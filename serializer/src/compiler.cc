#include "hexir/serializer/compiler.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "hexir/base/file_io.h"
#include "constant_data.h"
#include "parser.h"
#include "fusion.h"
#include "passes.h"
#include "pipeline.h"
#include "writer.h"

namespace hexir::serializer {

Status check_compile_options(const CompileOptions& options) {
  if (options.alignment == 0 || (options.alignment & (options.alignment - 1)) != 0 ||
      options.alignment > 4096)
    return invalid_argument("arena alignment " + std::to_string(options.alignment) +
                            " must be a power of two between 1 and 4096");
  return ok_status();
}

Result<ModulePlan> plan_module(const Module& module, const CompileOptions& options,
                               std::string_view display_name) {
  HEXIR_RETURN_IF_ERROR(check_compile_options(options));
  // Before any pass reads a constant's bytes (any front end's module).
  HEXIR_RETURN_IF_ERROR(check_constant_bytes(module, options.max_constant_bytes));
  ModulePlan plan;
  HEXIR_RETURN_IF_ERROR(detect_splats(module, plan.constants));
  HEXIR_RETURN_IF_ERROR(dedupe_constants(module, plan.constants));
  pack_constants(module, plan.constants);

  plan.heuristic = options.plan == PlanStrategy::kNaive ? "naive" : "greedy-by-size";
  plan.functions.resize(module.functions.size());
  for (size_t f = 0; f < module.functions.size(); ++f) {
    const Function& fn = module.functions[f];
    FunctionPlan& fn_plan = plan.functions[f];
    assign_storage(fn, fn_plan);
    if (options.schedule == Schedule::kMemory) schedule_for_memory(fn, fn_plan);
    // Naive gives every value its own range: only donations run in place there.
    assign_in_place(fn, fn_plan, options.in_place && options.plan != PlanStrategy::kNaive);
    place_donations(fn, fn_plan);
    record_last_uses(fn, fn_plan);
    record_workspaces(fn, fn_plan);
  }
  // Scratch: one shared workspace past the arena, or short-lived arena ranges,
  // whichever makes the context's one allocation smaller (the arena is shared
  // by every function: its size is the largest function's). The file names the
  // placement that produced the largest function's plan in the trial kept.
  auto plan_all = [&](std::vector<FunctionPlan>& plans, bool in_arena, uint64_t* total,
                      std::string* heuristic) -> Status {
    uint64_t arena = 0, workspace = 0;
    for (size_t f = 0; f < module.functions.size(); ++f) {
      FunctionPlan& fn_plan = plans[f];
      fn_plan.workspace_in_arena = in_arena;
      std::string used;
      Status planned = plan_function_arena(module.functions[f], fn_plan, options.plan, options.alignment,
                                           &used, options.plan_budget_ms);
      // Errors with a source position already name the file.
      if (!planned.ok())
        return display_name.empty() || planned.message().starts_with(std::string(display_name) + ":")
                   ? planned
                   : planned.annotate(display_name);
      if (f == 0 || fn_plan.arena_size > arena) *heuristic = used;
      arena = std::max(arena, fn_plan.arena_size);
      if (!in_arena) workspace = std::max(workspace, fn_plan.workspace_size);
    }
    *total = workspace == 0 ? arena : (arena + 63) / 64 * 64 + workspace;
    return ok_status();
  };
  uint64_t shared_total = 0;
  HEXIR_RETURN_IF_ERROR(plan_all(plan.functions, false, &shared_total, &plan.heuristic));
  const bool has_scratch = std::any_of(plan.functions.begin(), plan.functions.end(),
                                       [](const FunctionPlan& p) { return p.workspace_size > 0; });
  if (has_scratch && options.plan != PlanStrategy::kFreeAtLastUse) {
    std::vector<FunctionPlan> in_arena = plan.functions;
    uint64_t in_arena_total = 0;
    std::string in_arena_heuristic;
    HEXIR_RETURN_IF_ERROR(plan_all(in_arena, true, &in_arena_total, &in_arena_heuristic));
    if (in_arena_total < shared_total) {
      plan.functions = std::move(in_arena);
      plan.heuristic = std::move(in_arena_heuristic);
    }
  }
  return plan;
}

namespace {

WriteOptions write_options_for(const CompileOptions& options, const ModulePlan& plan) {
  WriteOptions write_options;
  write_options.strategy = options.plan;
  write_options.alignment = options.alignment;
  write_options.data_checksum = options.data_checksum;
  write_options.compression = options.compression;
  write_options.compression_level = options.compression_level;
  write_options.heuristic = plan.heuristic;
  return write_options;
}

// .hxir text: a regular file only (a FIFO would hang the read, /dev/zero
// never end), and at most kMaxSourceBytes of it (large weights belong in
// `file` constants, which are streamed, not in the text).
constexpr uint64_t kMaxSourceBytes = uint64_t{2} << 30;

Result<std::string> read_text(const std::filesystem::path& path) {
  return read_file_limited(path.string(), kMaxSourceBytes, ".hxir source limit");
}

}  // namespace

// The graph the passes plan: the front end's, or a copy with the rewrites of
// fusion.h applied (constants are cheap to copy: large ones are file ranges).
static const Module& rewritten(const Module& module, const CompileOptions& options, std::optional<Module>& storage) {
  if (!options.fuse_epilogues) return module;
  storage = module;
  fuse(*storage);
  return *storage;
}

Result<std::vector<uint8_t>> compile_module(const Module& source, const CompileOptions& options,
                                            std::string_view display_name) {
  std::optional<Module> storage;
  const Module& module = rewritten(source, options, storage);
  HEXIR_ASSIGN_OR_RETURN(ModulePlan plan, plan_module(module, options, display_name));
  return write_module(module, plan, write_options_for(options, plan));
}

Result<CompiledFile> compile_module_to(const Module& source, const std::filesystem::path& out,
                                       const CompileOptions& options, std::string_view display_name) {
  std::optional<Module> storage;
  const Module& module = rewritten(source, options, storage);
  HEXIR_ASSIGN_OR_RETURN(ModulePlan plan, plan_module(module, options, display_name));
  HEXIR_ASSIGN_OR_RETURN(std::unique_ptr<FileSink> sink, FileSink::create(out));
  CompiledFile compiled;
  HEXIR_RETURN_IF_ERROR(write_module(module, plan, write_options_for(options, plan), *sink, &compiled.head));
  compiled.size = sink->size();
  HEXIR_RETURN_IF_ERROR(sink->commit());
  return compiled;
}

Result<std::vector<uint8_t>> compile_source(std::string_view source, std::string_view display_name,
                                            const std::filesystem::path& base_dir,
                                            const CompileOptions& options) {
  HEXIR_RETURN_IF_ERROR(check_compile_options(options));
  HEXIR_ASSIGN_OR_RETURN(Module module,
                         parse_module(source, display_name, base_dir, {options.allow_external_files, options.max_constant_bytes}));
  return compile_module(module, options, display_name);
}

Result<std::vector<uint8_t>> compile_file(const std::filesystem::path& path, const CompileOptions& options) {
  HEXIR_ASSIGN_OR_RETURN(std::string text, read_text(path));
  return compile_source(text, path.string(), path.parent_path(), options);
}

Result<CompiledFile> compile_file_to(const std::filesystem::path& path, const std::filesystem::path& out,
                                     const CompileOptions& options) {
  HEXIR_RETURN_IF_ERROR(check_compile_options(options));
  HEXIR_ASSIGN_OR_RETURN(std::string text, read_text(path));
  HEXIR_ASSIGN_OR_RETURN(Module module, parse_module(text, path.string(), path.parent_path(),
                                                     {options.allow_external_files, options.max_constant_bytes}));
  return compile_module_to(module, out, options, path.string());
}

Status write_binary_file(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
  HEXIR_ASSIGN_OR_RETURN(std::unique_ptr<FileSink> sink, FileSink::create(path));
  HEXIR_RETURN_IF_ERROR(sink->append(bytes));
  return sink->commit();
}

}  // namespace hexir::serializer
