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
#include "passes/donation.h"
#include "passes/weights.h"
#include "passes/layout.h"
#include "passes/offload.h"
#include "passes/quantized.h"
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
  if (options.max_instructions == 0 || options.max_instructions > kMaxInstructionsLimit)
    return invalid_argument("the instruction limit " + std::to_string(options.max_instructions) +
                            " must be between 1 and " + std::to_string(kMaxInstructionsLimit));
  return ok_status();
}

Status parse_donation_option(std::string_view text, CompileOptions& options) {
  const size_t eq = text.find('=');
  const std::string what = "--donate '" + std::string(text) + "'";
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
    return invalid_argument(what + ": expected INPUT=OUTPUT (names, or patterns like 'past.*=present.*')");
  DonationRule rule{std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
  const auto stars = [](const std::string& side) { return std::count(side.begin(), side.end(), '*'); };
  if (stars(rule.input) > 1 || stars(rule.input) != stars(rule.output))
    return invalid_argument(what + ": a pattern has one '*' on each side, or none");
  options.donations.push_back(std::move(rule));
  return ok_status();
}

std::string WeightFormat::to_string() const {
  switch (kind) {
    case Kind::kInt8: return "int8";
    case Kind::kInt4: return "int4:group=" + std::to_string(group);
    default: return "f32";
  }
}

Status parse_weight_format(std::string_view text, WeightFormat& out) {
  const std::string what = "weight format '" + std::string(text) + "'";
  if (text == "f32" || text == "int8") {
    out.kind = text == "f32" ? WeightFormat::Kind::kAsGiven : WeightFormat::Kind::kInt8;
    return ok_status();
  }
  if (text != "int4" && !text.starts_with("int4:group="))
    return invalid_argument(what + ": expected f32, int8, int4 or int4:group=G");
  int64_t group = 32;
  if (text != "int4") {
    const std::string_view digits = text.substr(11);
    group = 0;
    for (char c : digits) {
      if (c < '0' || c > '9' || group > (int64_t{1} << 40)) return invalid_argument(what + ": G is not a number");
      group = group * 10 + (c - '0');
    }
    if (digits.empty() || group <= 0 || group % 32 != 0)
      return invalid_argument(what + ": the group G must be a positive multiple of 32");
  }
  out.kind = WeightFormat::Kind::kInt4;
  out.group = group;
  return ok_status();
}

Status parse_weight_override(std::string_view text, CompileOptions& options) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return invalid_argument("--weights-for '" + std::string(text) + "': expected PATTERN=FORMAT (e.g. 'lm_head*=int8')");
  WeightOverride rule{std::string(text.substr(0, eq)), {}};
  HEXIR_RETURN_IF_ERROR(parse_weight_format(text.substr(eq + 1), rule.format));
  options.weight_overrides.push_back(std::move(rule));
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

namespace {

// The context's device bytes for an arena and a shared workspace placed past
// it (64-byte aligned; none when the scratch is planned in the arena: 0).
uint64_t arena_and_workspace_bytes(uint64_t arena, uint64_t workspace) {
  return workspace == 0 ? arena : (arena + 63) / 64 * 64 + workspace;
}

// plan_module's steps and the state they share: the constants, each
// function's storage, the arena plans with their scratch, and, under a
// device budget, the passes that lower the arena and the weights streamed
// from host memory until the plan fits.
class ModulePlanner {
 public:
  ModulePlanner(const Module& module, const CompileOptions& options, std::string_view display_name)
      : module_(module),
        options_(options),
        display_name_(display_name),
        // Naive gives every value its own range: only donations run in place there.
        in_place_(options.in_place && options.plan != PlanStrategy::kNaive),
        stored_(module.functions.size()) {}

  Result<ModulePlan> run() {
    HEXIR_RETURN_IF_ERROR(detect_splats(module_, plan_.constants));
    HEXIR_RETURN_IF_ERROR(dedupe_constants(module_, plan_.constants));
    pack_constants(module_, plan_.constants);
    plan_.heuristic = options_.plan == PlanStrategy::kNaive ? "naive" : "greedy-by-size";
    plan_.functions.resize(module_.functions.size());
    for (size_t f = 0; f < module_.functions.size(); ++f) {
      assign_storage(module_.functions[f], stored_[f], options_.strided_views);
      if (options_.schedule == Schedule::kMemory) schedule_for_memory(module_.functions[f], stored_[f]);
    }
    finish_all();
    HEXIR_RETURN_IF_ERROR(check_donations_honoured());
    HEXIR_RETURN_IF_ERROR(plan_scratch());
    if (!options_.device_budget) return host_checked();
    return fit_device_budget();
  }

 private:
  // `status` with the source's name in front (when there is one).
  Status named(Status status) const {
    return display_name_.empty() ? status : status.annotate(display_name_);
  }

  // A donation is the caller's request: one the plan cannot honour is an
  // error naming the function, the input, the output and why, never dropped.
  Status check_donations_honoured() const {
    for (size_t f = 0; f < module_.functions.size(); ++f) {
      const Function& fn = module_.functions[f];
      const FunctionPlan& p = plan_.functions[f];
      for (size_t a = 0; a < fn.arguments.size() && a < p.donation_refused.size(); ++a) {
        if (p.donation_refused[a].empty()) continue;
        const Value& input = fn.values[static_cast<size_t>(fn.arguments[a].value)];
        return named(invalid_argument("function @" + fn.name + ": input %" + input.name + " cannot be donated" +
                                      p.donation_refused[a]));
      }
    }
    return ok_status();
  }

  // Each function's plan from its stored one (stored_: the plan before the
  // in-place passes, which rematerialization and offload add to, so every
  // attempt at a budget finishes a copy).
  void finish_all() {
    for (size_t f = 0; f < module_.functions.size(); ++f)
      plan_.functions[f] = finish_storage(module_.functions[f], stored_[f], in_place_);
  }

  // Places every function's arena, the scratch shared past it or (in_arena)
  // in it; `total` receives the context's device bytes (the arena is shared
  // by every function: its size is the largest function's), `heuristic` the
  // placement of the largest function's plan.
  Status plan_all(std::vector<FunctionPlan>& plans, bool in_arena, uint64_t* total, std::string* heuristic) {
    uint64_t arena = 0, workspace = 0;
    for (size_t f = 0; f < module_.functions.size(); ++f) {
      FunctionPlan& fn_plan = plans[f];
      fn_plan.workspace_in_arena = in_arena;
      std::string used;
      Status planned = plan_function_arena(module_.functions[f], fn_plan, options_.plan, options_.alignment,
                                           &used, options_.plan_budget_ms);
      // Errors with a source position already name the file.
      if (!planned.ok())
        return planned.message().starts_with(std::string(display_name_) + ":") ? planned : named(planned);
      if (f == 0 || fn_plan.arena_size > arena) *heuristic = used;
      arena = std::max(arena, fn_plan.arena_size);
      if (!in_arena) workspace = std::max(workspace, fn_plan.workspace_size);
    }
    *total = arena_and_workspace_bytes(arena, workspace);
    return ok_status();
  }

  // Scratch: one shared workspace past the arena, or short-lived arena
  // ranges, whichever makes the context's one allocation (total_) smaller.
  // The file names the placement of the trial kept.
  Status plan_scratch() {
    uint64_t shared_total = 0;
    HEXIR_RETURN_IF_ERROR(plan_all(plan_.functions, false, &shared_total, &plan_.heuristic));
    total_ = shared_total;
    const bool has_scratch = std::any_of(plan_.functions.begin(), plan_.functions.end(),
                                         [](const FunctionPlan& p) { return p.workspace_size > 0; });
    if (has_scratch && options_.plan != PlanStrategy::kFreeAtLastUse) {
      std::vector<FunctionPlan> in_arena = plan_.functions;
      uint64_t in_arena_total = 0;
      std::string in_arena_heuristic;
      HEXIR_RETURN_IF_ERROR(plan_all(in_arena, true, &in_arena_total, &in_arena_heuristic));
      if (in_arena_total < shared_total) {
        plan_.functions = std::move(in_arena);
        plan_.heuristic = std::move(in_arena_heuristic);
        total_ = in_arena_total;
      }
    }
    return ok_status();
  }

  // The plan, when the host arena (offloaded values) is under its budget.
  Result<ModulePlan> host_checked() {
    uint64_t host = 0;
    for (const FunctionPlan& p : plan_.functions) host = std::max(host, p.host_arena_size);
    if (!options_.host_budget || host <= *options_.host_budget) return std::move(plan_);
    return named(invalid_argument("memory budget host=" + std::to_string(*options_.host_budget) +
                                  " bytes cannot be met: the device budget needs a host arena of " +
                                  std::to_string(host) + " bytes for the values offloaded there"));
  }

  // A budget for the device: the arena (with scratch) and the constants the
  // program uploads. First the weights stay on the device and the arena is
  // lowered (fit_arena); then the fewest weights that fit are streamed.
  Result<ModulePlan> fit_device_budget() {
    budget_ = *options_.device_budget;
    unconstrained_ = total_;
    resident_ = device_constant_bytes(module_, plan_.constants);
    if (fits()) return host_checked();
    arena_budget_ = budget_ > resident_ ? budget_ - resident_ : 0;
    unstreamed_ = stored_;
    if (resident_ < budget_) {
      HEXIR_RETURN_IF_ERROR(fit_arena());
      if (total_ <= arena_budget_) return host_checked();
    }
    choose_streaming_candidates();
    if (!candidates_.empty()) {
      HEXIR_RETURN_IF_ERROR(stream_fewest_weights());
      if (fits()) {
        pack_constants(module_, plan_.constants);
        return host_checked();
      }
    }
    return budget_refusal();
  }

  bool fits() const { return resident_ <= budget_ && total_ <= budget_ - resident_; }

  // A pass (recomputation, then host offload) is asked to lower the functions
  // over the arena budget until the placed plan fits. The live peak is what
  // the passes lower; the placed size can sit above it (fragmentation,
  // scratch past the arena), so a function still over is asked for a lower
  // peak by that difference, up to 16 rounds. `step(f, target)` runs the
  // pass on function f and says whether it changed anything.
  template <typename Step>
  Status fit(Step&& step) {
    std::vector<uint64_t> target(module_.functions.size(), arena_budget_);
    for (int attempt = 0; attempt < 16 && total_ > arena_budget_; ++attempt) {
      bool progress = false;
      for (size_t f = 0; f < module_.functions.size(); ++f) {
        const FunctionPlan& placed = plan_.functions[f];
        const uint64_t used = arena_and_workspace_bytes(
            placed.arena_size, placed.workspace_in_arena ? 0 : placed.workspace_size);
        if (used <= arena_budget_) continue;
        if (attempt > 0) {
          const uint64_t peak = live_peak(module_.functions[f], placed).bytes;
          const uint64_t over = used - arena_budget_;
          target[f] = std::min(target[f], peak > over ? peak - over : 0);
        }
        if (step(f, target[f])) progress = true;
      }
      if (!progress) break;
      finish_all();
      HEXIR_RETURN_IF_ERROR(plan_scratch());
    }
    return ok_status();
  }

  // Recomputation first; then host offload: values live across the peak
  // wait in the host arena.
  Status fit_arena() {
    HEXIR_RETURN_IF_ERROR(fit([&](size_t f, uint64_t target) {
      RematOptions remat;
      remat.in_place = in_place_;
      return rematerialize(module_.functions[f], stored_[f], target, remat).instructions > 0;
    }));
    if (total_ <= arena_budget_) return ok_status();
    return fit([&](size_t f, uint64_t target) {
      OffloadOptions offload_options;
      offload_options.in_place = in_place_;
      offload_options.host_budget = options_.host_budget;
      const int values = offload(module_.functions[f], stored_[f], target, offload_options).values;
      offloaded_ += values;
      return values > 0;
    });
  }

  // The weights that may stream, largest first: a stored constant streams
  // when every graph constant stored as it does.
  void choose_streaming_candidates() {
    const std::vector<bool> streamable = streamable_constants(module_, unstreamed_);
    std::vector<bool> stored_streamable(plan_.constants.stored.size(), true);
    for (size_t g = 0; g < module_.constants.size(); ++g)
      if (plan_.constants.stored_index[g] >= 0 && !streamable[g])
        stored_streamable[static_cast<size_t>(plan_.constants.stored_index[g])] = false;
    for (size_t i = 0; i < plan_.constants.stored.size(); ++i) {
      const StoredConstant& c = plan_.constants.stored[i];
      if (c.fill || module_.constants[static_cast<size_t>(c.constant)].byte_size == 0 ||
          !stored_streamable[i])
        continue;
      candidates_.push_back(static_cast<int>(i));
    }
    auto constant_bytes = [&](int i) {
      return module_.constants[static_cast<size_t>(plan_.constants.stored[static_cast<size_t>(i)].constant)]
          .byte_size;
    };
    std::stable_sort(candidates_.begin(), candidates_.end(),
                     [&](int a, int b) { return constant_bytes(a) > constant_bytes(b); });
  }

  // Weights streaming: the largest streamable weights leave the device, as
  // few as fit, and the arena gets their double-buffered copies. A read
  // ahead first: the copy for layer i+1 overlaps layer i (two copies live
  // at once), worth streaming a weight more; where nothing fits that way,
  // each copy right before its reader (one at a time). Still over (or over
  // with the weights alone): the arena as low as the passes take it (from
  // the plans without recomputations), so that a refusal states the least
  // reached.
  Status stream_fewest_weights() {
    HEXIR_ASSIGN_OR_RETURN(const bool ahead_fits, stream_fewest(1));
    if (!ahead_fits) HEXIR_RETURN_IF_ERROR(stream_fewest(0).status());
    if (!fits()) HEXIR_RETURN_IF_ERROR(fit_arena());
    return ok_status();
  }

  // The fewest candidates that fit, each prefetched `ahead` streamed reads
  // early: a bisection on how many (streaming more frees device bytes but
  // adds copy slots to the arena; the last call leaves the plan it tried).
  Result<bool> stream_fewest(int ahead) {
    size_t lo = 1, hi = candidates_.size();
    HEXIR_RETURN_IF_ERROR(stream_first(hi, ahead));
    if (!fits()) return false;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      HEXIR_RETURN_IF_ERROR(stream_first(mid, ahead));
      if (fits()) hi = mid; else lo = mid + 1;
    }
    HEXIR_RETURN_IF_ERROR(stream_first(hi, ahead));
    return true;
  }

  // Streams the first n candidates (from the plans without any pass's work),
  // each prefetched `ahead` streamed reads before its reader.
  Status stream_first(size_t n, int ahead) {
    std::vector<bool> streamed(module_.constants.size(), false);
    for (size_t i = 0; i < candidates_.size(); ++i)
      plan_.constants.stored[static_cast<size_t>(candidates_[i])].streamed = i < n;
    for (size_t g = 0; g < module_.constants.size(); ++g)
      if (plan_.constants.stored_index[g] >= 0)
        streamed[g] = plan_.constants.stored[static_cast<size_t>(plan_.constants.stored_index[g])].streamed;
    stored_ = unstreamed_;
    offloaded_ = 0;
    for (size_t f = 0; f < module_.functions.size(); ++f)
      stream_weights(module_.functions[f], stored_[f], streamed, ahead);
    resident_ = device_constant_bytes(module_, plan_.constants);
    arena_budget_ = budget_ > resident_ ? budget_ - resident_ : 0;
    streamed_count_ = static_cast<int>(n);
    finish_all();
    return plan_scratch();
  }

  // The device budget cannot be met: the function that needs the most says why.
  Status budget_refusal() const {
    size_t worst = 0;
    for (size_t f = 1; f < module_.functions.size(); ++f)
      if (plan_.functions[f].arena_size > plan_.functions[worst].arena_size) worst = f;
    std::string message =
        "memory budget device=" + std::to_string(budget_) +
        " bytes cannot be met: the smallest device arena reached is " + std::to_string(total_) + " bytes (" +
        std::to_string(unconstrained_) + " without a budget, lower bound " +
        std::to_string(plan_.functions[worst].lower_bound) + ", " + std::to_string(offloaded_) +
        " values offloaded to host memory" +
        (options_.host_budget ? " under host=" + std::to_string(*options_.host_budget) : "") + "), beside " +
        std::to_string(resident_) + " bytes of constants on the device (" + std::to_string(streamed_count_) +
        " of " + std::to_string(candidates_.size()) + " streamable weights streamed from host memory); " +
        explain_peak(module_.functions[worst], stored_[worst], in_place_);
    return named(invalid_argument(message));
  }

  const Module& module_;
  const CompileOptions& options_;
  const std::string_view display_name_;
  const bool in_place_;
  ModulePlan plan_;
  std::vector<FunctionPlan> stored_;  // per function, the plan before the in-place passes
  uint64_t total_ = 0;                // the context's device bytes (plan_scratch)
  // Under a device budget:
  uint64_t budget_ = 0, unconstrained_ = 0;
  uint64_t resident_ = 0;                 // constants on the device
  uint64_t arena_budget_ = 0;             // what the constants leave of the budget
  int offloaded_ = 0;                     // values offloaded to host memory
  std::vector<FunctionPlan> unstreamed_;  // stored_ before any pass lowered the arena
  std::vector<int> candidates_;           // streamable stored constants, largest first
  int streamed_count_ = 0;
};

}  // namespace

Result<ModulePlan> plan_module(const Module& module, const CompileOptions& options,
                               std::string_view display_name) {
  HEXIR_RETURN_IF_ERROR(check_compile_options(options));
  // Before any pass reads a constant's bytes (any front end's module).
  HEXIR_RETURN_IF_ERROR(check_constant_bytes(module, options.max_constant_bytes));
  return ModulePlanner(module, options, display_name).run();
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

// The graph the passes plan: the front end's, or a copy with the donations
// asked for by name (donation.h) and the rewrites of donation.h, fusion.h
// and layout.h applied (constants are cheap to copy: large ones are file ranges).
static Result<const Module*> rewritten(const Module& module, const CompileOptions& options,
                                       std::optional<Module>& storage,
                                       std::vector<CompressedWeight>* compressed = nullptr) {
  const bool donates = !options.donations.empty() ||
                       std::any_of(module.functions.begin(), module.functions.end(), [](const Function& fn) {
                         return std::any_of(fn.arguments.begin(), fn.arguments.end(),
                                            [](const Argument& a) { return a.donate; });
                       });
  const bool compresses = options.weights.kind != WeightFormat::Kind::kAsGiven ||
                          std::any_of(options.weight_overrides.begin(), options.weight_overrides.end(),
                                      [](const WeightOverride& o) { return o.format.kind != WeightFormat::Kind::kAsGiven; });
  if (!options.fuse_epilogues && !options.channels_last && !donates && !compresses) return &module;
  storage = module;
  HEXIR_RETURN_IF_ERROR(apply_donations(*storage, options.donations));
  // A donated cache written by where(iota == pos, new, cache): rows, in place.
  if (donates) rewrite_cache_updates(*storage);
  // Before the fusions: a quantized_matmul takes no bias or epilogue (yet).
  if (compresses) {
    std::vector<CompressedWeight> report = compress_weights(*storage, options.weights, options.weight_overrides);
    if (compressed) *compressed = std::move(report);
  }
  if (options.fuse_epilogues) {
    use_integer_kernels(*storage);  // DQ -> Conv -> Q: quantized_conv2d
    use_integer_matmul(*storage);       // MatMulInteger with symmetric int8 weights: integer sums
    use_dequantized_weights(*storage);  // a QDQ model's int8 matmul weights, read as int8
    fuse(*storage);
  }
  // After the folds and fusions: they read channels at dim 1 (NCHW).
  if (options.channels_last) choose_channels_last(*storage);
  if (options.channels_last && options.winograd) choose_winograd(*storage);
  // The depthwise -> 1x1 pairs left NCHW.
  if (options.fuse_epilogues) fuse_separable(*storage);
  return &*storage;
}

Result<std::vector<uint8_t>> compile_module(const Module& source, const CompileOptions& options,
                                            std::string_view display_name) {
  std::optional<Module> storage;
  HEXIR_ASSIGN_OR_RETURN(const Module* rewritten_module, rewritten(source, options, storage));
  const Module& module = *rewritten_module;
  HEXIR_ASSIGN_OR_RETURN(ModulePlan plan, plan_module(module, options, display_name));
  return serializer::write_module(module, plan, write_options_for(options, plan));
}

Result<CompiledFile> compile_module_to(const Module& source, const std::filesystem::path& out,
                                       const CompileOptions& options, std::string_view display_name) {
  std::optional<Module> storage;
  CompiledFile compiled;
  HEXIR_ASSIGN_OR_RETURN(const Module* rewritten_module, rewritten(source, options, storage, &compiled.compressed));
  const Module& module = *rewritten_module;
  HEXIR_ASSIGN_OR_RETURN(ModulePlan plan, plan_module(module, options, display_name));
  HEXIR_ASSIGN_OR_RETURN(std::unique_ptr<serializer::FileSink> sink, serializer::FileSink::create(out));
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
                         parse_hxir(source, display_name, base_dir, parse_options_for(options)));
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
                                                     parse_options_for(options)));
  return compile_module_to(module, out, options, path.string());
}

Status write_binary_file(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
  HEXIR_ASSIGN_OR_RETURN(std::unique_ptr<serializer::FileSink> sink, serializer::FileSink::create(path));
  HEXIR_RETURN_IF_ERROR(sink->append(bytes));
  return sink->commit();
}

}  // namespace hexir::compiler
