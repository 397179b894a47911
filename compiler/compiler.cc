#include "hexir/compiler/compiler.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "hexir/base/file_io.h"
#include "hexir/compiler/hxir.h"
#include "hexir/serializer/writer.h"
#include "ir/constant_data.h"
#include "passes/arena.h"
#include "passes/constants.h"
#include "passes/fusion.h"
#include "passes/layout.h"
#include "passes/offload.h"
#include "passes/remat.h"
#include "passes/schedule.h"
#include "passes/storage.h"
#include "pipeline.h"

namespace hexir::compiler {

Status check_compile_options(const CompileOptions& options) {
  if (options.alignment == 0 || (options.alignment & (options.alignment - 1)) != 0 ||
      options.alignment > 4096)
    return invalid_argument("arena alignment " + std::to_string(options.alignment) +
                            " must be a power of two between 1 and 4096");
  if ((options.device_budget || options.host_budget) && options.plan != PlanStrategy::kArena)
    return invalid_argument("a memory budget needs the arena plan (--plan=arena), not --plan=" +
                            std::string(options.plan == PlanStrategy::kNaive ? "naive" : "free-at-last-use"));
  return ok_status();
}

Status parse_memory_budget(std::string_view text, CompileOptions& options) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos)
    return invalid_argument("--memory-budget expects SPACE=BYTES (e.g. device=512MiB), got '" + std::string(text) + "'");
  const std::string_view space = text.substr(0, eq);
  std::string_view size = text.substr(eq + 1);
  if (space != "device" && space != "host")
    return invalid_argument("--memory-budget: unknown memory space '" + std::string(space) +
                            "' (the memory spaces are 'device' and 'host')");
  std::optional<uint64_t>& budget = space == "device" ? options.device_budget : options.host_budget;
  if (budget) return invalid_argument("--memory-budget: " + std::string(space) + " is given twice");
  uint64_t unit = 1;
  for (const auto& [suffix, factor] : {std::pair<std::string_view, uint64_t>{"KiB", uint64_t{1} << 10},
                                       {"MiB", uint64_t{1} << 20}, {"GiB", uint64_t{1} << 30}, {"B", 1}}) {
    if (size.size() > suffix.size() && size.ends_with(suffix)) {
      unit = factor;
      size.remove_suffix(suffix.size());
      break;
    }
  }
  uint64_t value = 0;
  if (size.empty()) return invalid_argument("--memory-budget: no byte count in '" + std::string(text) + "'");
  for (char c : size) {
    if (c < '0' || c > '9')
      return invalid_argument("--memory-budget: '" + std::string(text.substr(eq + 1)) +
                              "' is not a byte count (digits with an optional KiB, MiB or GiB suffix)");
    if (value > (UINT64_MAX - static_cast<uint64_t>(c - '0')) / 10)
      return invalid_argument("--memory-budget: '" + std::string(text.substr(eq + 1)) + "' is too large");
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  if (value > UINT64_MAX / unit)
    return invalid_argument("--memory-budget: '" + std::string(text.substr(eq + 1)) + "' is too large");
  budget = value * unit;
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
  const bool in_place = options.in_place && options.plan != PlanStrategy::kNaive;
  // Per function, the plan before the in-place passes: rematerialization
  // adds to it, and every attempt at a budget finishes a copy.
  std::vector<FunctionPlan> stored(module.functions.size());
  for (size_t f = 0; f < module.functions.size(); ++f) {
    assign_storage(module.functions[f], stored[f], options.strided_views);
    if (options.schedule == Schedule::kMemory) schedule_for_memory(module.functions[f], stored[f]);
  }
  auto finish_all = [&] {
    for (size_t f = 0; f < module.functions.size(); ++f)
      // Naive gives every value its own range: only donations run in place there.
      plan.functions[f] = finish_storage(module.functions[f], stored[f], in_place);
  };
  finish_all();
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
  // The context's device bytes: the arena (shared by every function) and,
  // when scratch is not planned in it, the shared workspace past it.
  auto plan_scratch = [&](uint64_t* total) -> Status {
    uint64_t shared_total = 0;
    HEXIR_RETURN_IF_ERROR(plan_all(plan.functions, false, &shared_total, &plan.heuristic));
    *total = shared_total;
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
        *total = in_arena_total;
      }
    }
    return ok_status();
  };
  uint64_t total = 0;
  HEXIR_RETURN_IF_ERROR(plan_scratch(&total));
  // The host arena (offloaded values) under its budget.
  auto host_checked = [&]() -> Result<ModulePlan> {
    uint64_t host = 0;
    for (const FunctionPlan& p : plan.functions) host = std::max(host, p.host_arena_size);
    if (!options.host_budget || host <= *options.host_budget) return std::move(plan);
    Status failed = invalid_argument("memory budget host=" + std::to_string(*options.host_budget) +
                                     " bytes cannot be met: the device budget needs a host arena of " +
                                     std::to_string(host) + " bytes for the values offloaded there");
    return display_name.empty() ? failed : failed.annotate(display_name);
  };
  if (!options.device_budget) return host_checked();

  // A budget for the device: the arena (with scratch) and the constants the
  // program uploads. First the weights stay on the device and a pass
  // (recomputation, then host offload) is asked to lower the functions over
  // what they leave until the placed plan fits. The live peak is what the
  // passes lower; the placed size can sit above it (fragmentation, scratch
  // past the arena), so a function still over is asked for a lower peak by
  // that difference, up to 16 rounds. `step(f, target)` runs the pass on
  // function f and says whether it changed anything.
  const uint64_t budget = *options.device_budget;
  const uint64_t unconstrained = total;
  uint64_t resident = device_constant_bytes(module, plan.constants);
  if (total <= budget && resident <= budget - total) return host_checked();
  uint64_t arena_budget = budget > resident ? budget - resident : 0;
  auto fit = [&](auto&& step) -> Status {
    std::vector<uint64_t> target(module.functions.size(), arena_budget);
    for (int attempt = 0; attempt < 16 && total > arena_budget; ++attempt) {
      bool progress = false;
      for (size_t f = 0; f < module.functions.size(); ++f) {
        const FunctionPlan& placed = plan.functions[f];
        const uint64_t used = placed.workspace_in_arena || placed.workspace_size == 0
                                  ? placed.arena_size
                                  : (placed.arena_size + 63) / 64 * 64 + placed.workspace_size;
        if (used <= arena_budget) continue;
        if (attempt > 0) {
          const uint64_t peak = live_peak(module.functions[f], placed).bytes;
          const uint64_t over = used - arena_budget;
          target[f] = std::min(target[f], peak > over ? peak - over : 0);
        }
        if (step(f, target[f])) progress = true;
      }
      if (!progress) break;
      finish_all();
      HEXIR_RETURN_IF_ERROR(plan_scratch(&total));
    }
    return ok_status();
  };
  auto remat_step = [&](size_t f, uint64_t target) {
    RematOptions remat;
    remat.in_place = in_place;
    return rematerialize(module.functions[f], stored[f], target, remat).instructions > 0;
  };
  // Then host offload: values live across the peak wait in the host arena.
  int offloaded = 0;
  auto offload_step = [&](size_t f, uint64_t target) {
    OffloadOptions offload_options;
    offload_options.in_place = in_place;
    offload_options.host_budget = options.host_budget;
    const int values = offload(module.functions[f], stored[f], target, offload_options).values;
    offloaded += values;
    return values > 0;
  };
  auto fit_arena = [&]() -> Status {
    HEXIR_RETURN_IF_ERROR(fit(remat_step));
    if (total > arena_budget) HEXIR_RETURN_IF_ERROR(fit(offload_step));
    return ok_status();
  };
  const std::vector<FunctionPlan> unstreamed = stored;
  if (resident < budget) {
    HEXIR_RETURN_IF_ERROR(fit_arena());
    if (total <= arena_budget) return host_checked();
  }

  // Weights streaming: the largest streamable weights leave the device, as
  // few as fit, and the arena gets their double-buffered copies; what is
  // still over is fit as above, from the plans without recomputations.
  // A stored constant streams when every graph constant stored as it does.
  const std::vector<bool> streamable = streamable_constants(module, unstreamed);
  std::vector<bool> stored_streamable(plan.constants.stored.size(), true);
  for (size_t g = 0; g < module.constants.size(); ++g)
    if (plan.constants.stored_index[g] >= 0 && !streamable[g])
      stored_streamable[static_cast<size_t>(plan.constants.stored_index[g])] = false;
  std::vector<int> candidates;  // stored constants, largest first
  for (size_t i = 0; i < plan.constants.stored.size(); ++i) {
    const StoredConstant& c = plan.constants.stored[i];
    if (c.fill || module.constants[static_cast<size_t>(c.constant)].byte_size == 0 || !stored_streamable[i]) continue;
    candidates.push_back(static_cast<int>(i));
  }
  auto constant_bytes = [&](int i) {
    return module.constants[static_cast<size_t>(plan.constants.stored[static_cast<size_t>(i)].constant)].byte_size;
  };
  std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return constant_bytes(a) > constant_bytes(b); });
  int streamed_count = 0;
  // Streams the first n candidates (from the plans without any pass's work),
  // each prefetched `ahead` streamed reads before its reader.
  auto stream_first = [&](size_t n, int ahead) -> Status {
    std::vector<bool> streamed(module.constants.size(), false);
    for (size_t i = 0; i < candidates.size(); ++i)
      plan.constants.stored[static_cast<size_t>(candidates[i])].streamed = i < n;
    for (size_t g = 0; g < module.constants.size(); ++g)
      if (plan.constants.stored_index[g] >= 0)
        streamed[g] = plan.constants.stored[static_cast<size_t>(plan.constants.stored_index[g])].streamed;
    stored = unstreamed;
    offloaded = 0;
    for (size_t f = 0; f < module.functions.size(); ++f)
      stream_weights(module.functions[f], stored[f], streamed, ahead);
    resident = device_constant_bytes(module, plan.constants);
    arena_budget = budget > resident ? budget - resident : 0;
    streamed_count = static_cast<int>(n);
    finish_all();
    return plan_scratch(&total);
  };
  auto fits = [&] { return resident <= budget && total <= budget - resident; };
  // The fewest weights that fit, each prefetched `ahead` streamed reads
  // early: bisect on how many (streaming more frees device bytes but adds
  // copy slots to the arena; the last call leaves the plan it tried).
  auto fewest = [&](int ahead) -> Result<bool> {
    size_t lo = 1, hi = candidates.size();
    HEXIR_RETURN_IF_ERROR(stream_first(hi, ahead));
    if (!fits()) return false;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      HEXIR_RETURN_IF_ERROR(stream_first(mid, ahead));
      if (fits()) hi = mid; else lo = mid + 1;
    }
    HEXIR_RETURN_IF_ERROR(stream_first(hi, ahead));
    return true;
  };
  if (!candidates.empty()) {
    // A read ahead first: the copy for layer i+1 overlaps layer i (two
    // copies live at once), worth streaming a weight more; where nothing
    // fits that way, each copy right before its reader (one at a time).
    HEXIR_ASSIGN_OR_RETURN(const bool ahead_fits, fewest(1));
    if (!ahead_fits) HEXIR_RETURN_IF_ERROR(fewest(0).status());
    // Still over (or over with the weights alone): the arena as low as the
    // passes take it, so that a refusal states the least reached.
    if (!fits()) HEXIR_RETURN_IF_ERROR(fit_arena());
    if (fits()) {
      pack_constants(module, plan.constants);
      return host_checked();
    }
  }
  // The function that needs the most says why.
  size_t worst = 0;
  for (size_t f = 1; f < module.functions.size(); ++f)
    if (plan.functions[f].arena_size > plan.functions[worst].arena_size) worst = f;
  std::string message = "memory budget device=" + std::to_string(budget) + " bytes cannot be met: the smallest "
                        "device arena reached is " + std::to_string(total) + " bytes (" +
                        std::to_string(unconstrained) + " without a budget, lower bound " +
                        std::to_string(plan.functions[worst].lower_bound) + ", " +
                        std::to_string(offloaded) + " values offloaded to host memory" +
                        (options.host_budget ? " under host=" + std::to_string(*options.host_budget) : "") +
                        "), beside " + std::to_string(resident) + " bytes of constants on the device (" +
                        std::to_string(streamed_count) + " of " + std::to_string(candidates.size()) +
                        " streamable weights streamed from host memory); " +
                        explain_peak(module.functions[worst], stored[worst], in_place);
  Status failed = invalid_argument(message);
  return display_name.empty() ? failed : failed.annotate(display_name);
}

namespace {

serializer::WriteOptions write_options_for(const CompileOptions& options, const ModulePlan& plan) {
  serializer::WriteOptions write_options;
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
  if (!options.fuse_epilogues && !options.channels_last) return module;
  storage = module;
  if (options.fuse_epilogues) fuse(*storage);
  // After the folds and fusions: they read channels at dim 1 (NCHW).
  if (options.channels_last) choose_channels_last(*storage);
  // The depthwise -> 1x1 pairs left NCHW.
  if (options.fuse_epilogues) fuse_separable(*storage);
  return *storage;
}

Result<std::vector<uint8_t>> compile_module(const Module& source, const CompileOptions& options,
                                            std::string_view display_name) {
  std::optional<Module> storage;
  const Module& module = rewritten(source, options, storage);
  HEXIR_ASSIGN_OR_RETURN(ModulePlan plan, plan_module(module, options, display_name));
  return serializer::write_module(module, plan, write_options_for(options, plan));
}

Result<CompiledFile> compile_module_to(const Module& source, const std::filesystem::path& out,
                                       const CompileOptions& options, std::string_view display_name) {
  std::optional<Module> storage;
  const Module& module = rewritten(source, options, storage);
  HEXIR_ASSIGN_OR_RETURN(ModulePlan plan, plan_module(module, options, display_name));
  HEXIR_ASSIGN_OR_RETURN(std::unique_ptr<serializer::FileSink> sink, serializer::FileSink::create(out));
  CompiledFile compiled;
  HEXIR_RETURN_IF_ERROR(serializer::write_module(module, plan, write_options_for(options, plan), *sink, &compiled.head));
  compiled.size = sink->size();
  HEXIR_RETURN_IF_ERROR(sink->commit());
  return compiled;
}

Result<std::vector<uint8_t>> compile_source(std::string_view source, std::string_view display_name,
                                            const std::filesystem::path& base_dir,
                                            const CompileOptions& options) {
  HEXIR_RETURN_IF_ERROR(check_compile_options(options));
  HEXIR_ASSIGN_OR_RETURN(Module module,
                         parse_hxir(source, display_name, base_dir, {options.allow_external_files, options.max_constant_bytes}));
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
  HEXIR_ASSIGN_OR_RETURN(Module module, parse_hxir(text, path.string(), path.parent_path(),
                                                     {options.allow_external_files, options.max_constant_bytes}));
  return compile_module_to(module, out, options, path.string());
}

Status write_binary_file(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
  HEXIR_ASSIGN_OR_RETURN(std::unique_ptr<serializer::FileSink> sink, serializer::FileSink::create(path));
  HEXIR_RETURN_IF_ERROR(sink->append(bytes));
  return sink->commit();
}

}  // namespace hexir::compiler
