#include "hexir/serializer/compiler.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "parser.h"
#include "passes.h"
#include "writer.h"

namespace hexir::serializer {

Result<std::vector<uint8_t>> compile_source(std::string_view source, std::string_view display_name,
                                            const std::filesystem::path& base_dir,
                                            const CompileOptions& options) {
  if (options.alignment == 0 || (options.alignment & (options.alignment - 1)) != 0 ||
      options.alignment > 4096)
    return invalid_argument("arena alignment " + std::to_string(options.alignment) +
                            " must be a power of two between 1 and 4096");
  HEXIR_ASSIGN_OR_RETURN(Module module, parse_module(source, display_name, base_dir));

  detect_splats(module);
  dedupe_constants(module);
  pack_constants(module);

  WriteOptions write_options;
  write_options.strategy = options.plan;
  write_options.alignment = options.alignment;
  write_options.data_checksum = options.data_checksum;
  write_options.compression = options.compression;
  write_options.compression_level = options.compression_level;
  write_options.heuristic = options.plan == PlanStrategy::kNaive ? "naive" : "greedy-by-size";
  for (Function& fn : module.functions) {
    assign_storage(fn);
    if (options.schedule == Schedule::kMemory) schedule_for_memory(fn);
    // Naive gives every value its own range: only donations run in place there.
    assign_in_place(fn, options.in_place && options.plan != PlanStrategy::kNaive);
    place_donations(fn);
    record_last_uses(fn);
    record_workspaces(fn);
  }
  // Scratch: one shared workspace past the arena, or short-lived arena ranges,
  // whichever makes the context's one allocation smaller (the arena is shared
  // by every function: its size is the largest function's).
  auto plan_all = [&](std::vector<Function>& functions, bool in_arena, uint64_t* total) -> Status {
    uint64_t arena = 0, workspace = 0;
    for (Function& fn : functions) {
      fn.workspace_in_arena = in_arena;
      HEXIR_RETURN_IF_ERROR(plan_function_arena(fn, options.plan, options.alignment, &write_options.heuristic,
                                                options.plan_budget_ms)
                                .annotate(std::string(display_name)));
      arena = std::max(arena, fn.arena_size);
      if (!in_arena) workspace = std::max(workspace, fn.workspace_size);
    }
    *total = workspace == 0 ? arena : (arena + 63) / 64 * 64 + workspace;
    return ok_status();
  };
  uint64_t shared_total = 0;
  HEXIR_RETURN_IF_ERROR(plan_all(module.functions, false, &shared_total));
  const bool has_scratch = std::any_of(module.functions.begin(), module.functions.end(),
                                       [](const Function& fn) { return fn.workspace_size > 0; });
  if (has_scratch && options.plan != PlanStrategy::kFreeAtLastUse) {
    std::vector<Function> in_arena = module.functions;
    uint64_t in_arena_total = 0;
    HEXIR_RETURN_IF_ERROR(plan_all(in_arena, true, &in_arena_total));
    if (in_arena_total < shared_total) module.functions = std::move(in_arena);
  }
  return write_module(module, write_options);
}

Result<std::vector<uint8_t>> compile_file(const std::filesystem::path& path, const CompileOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open '" + path.string() + "': " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return data_loss("error reading '" + path.string() + "'");
  return compile_source(text.str(), path.string(), path.parent_path(), options);
}

Status write_binary_file(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
  // Write next to the target and rename, so a failed write never leaves a half file behind.
  std::filesystem::path temp = path;
  temp += ".tmp";
  std::FILE* file = std::fopen(temp.string().c_str(), "wb");
  if (!file) return not_found("cannot create '" + temp.string() + "': " + std::strerror(errno));
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  ok = (std::fclose(file) == 0) && ok;
  if (!ok) {
    std::remove(temp.string().c_str());
    return data_loss("error writing '" + temp.string() + "'");
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::remove(temp.string().c_str());
    return data_loss("cannot rename '" + temp.string() + "' to '" + path.string() + "': " + ec.message());
  }
  return ok_status();
}

}  // namespace hexir::serializer
