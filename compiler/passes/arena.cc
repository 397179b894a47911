#include "passes/arena.h"

#include <vector>

#include "passes/liveness.h"
#include "passes/storage.h"

namespace hexir::compiler {

namespace {

// Every arena offset is a multiple of the alignment; below an element's
// size a value could start at an address its loads cannot use (a fault on
// GPUs, misaligned vector loads on CPUs). Refused, naming the value.
Status check_alignment_fits_elements(const Function& fn, const FunctionPlan& plan, uint32_t alignment) {
  for (size_t v = 0; v < plan.values.size(); ++v) {
    if (plan.values[v].storage != Storage::kArena && plan.values[v].storage != Storage::kHost) continue;
    const Value& value = value_at(fn, plan, static_cast<int>(v));
    const uint32_t element = dtype_size(value.type.dtype);
    if (alignment >= element || value.byte_size == 0) continue;
    return error_at(value.loc,
                    "arena alignment " + std::to_string(alignment) + " is below the " +
                        std::to_string(element) + "-byte elements of %" + value.name + " (" +
                        value.type.to_string() + ") in @" + fn.name +
                        ": its offset could be misaligned for its type; use an alignment of at least " +
                        std::to_string(element));
  }
  return ok_status();
}

// Offsets for `buffers` with the chosen strategy, checked: a wrong plan
// corrupts results silently. `arena` names the arena in errors.
Result<BufferPlan> place_buffers(const Function& fn, const std::vector<PlanBuffer>& buffers,
                                 PlanStrategy strategy, uint32_t alignment, uint64_t plan_budget_ms,
                                 const std::string& arena) {
  Result<BufferPlan> placed = strategy == PlanStrategy::kNaive
                                  ? plan_naive(buffers, alignment)
                                  : plan_arena(buffers, {alignment, plan_budget_ms});
  if (!placed.ok()) return placed.status().annotate("planning the " + arena + " of @" + fn.name);
  HEXIR_RETURN_IF_ERROR(
      check_buffer_plan(buffers, *placed, alignment).annotate(arena + " plan of @" + fn.name));
  return placed;
}

// The host arena (offloaded values): the same planner over its values alone.
Status plan_host_arena(const Function& fn, FunctionPlan& plan, PlanStrategy strategy, uint32_t alignment,
                       uint64_t plan_budget_ms) {
  plan.host_arena_size = plan.host_lower_bound = 0;
  const std::vector<LiveRange> host = compute_live_ranges(fn, plan, Storage::kHost);
  if (host.empty()) return ok_status();
  std::vector<PlanBuffer> host_buffers;
  for (const LiveRange& r : host) host_buffers.push_back(r.buffer);
  HEXIR_ASSIGN_OR_RETURN(BufferPlan host_placed,
                         place_buffers(fn, host_buffers, strategy, alignment, plan_budget_ms, "host arena"));
  for (size_t i = 0; i < host.size(); ++i)
    plan.values[static_cast<size_t>(host[i].root)].arena_offset = host_placed.offsets[i];
  plan.host_arena_size = host_placed.size;
  plan.host_lower_bound = live_lower_bound(host_buffers);
  return ok_status();
}

}  // namespace

Status plan_function_arena(const Function& fn, FunctionPlan& plan, PlanStrategy strategy, uint32_t alignment,
                           std::string* heuristic, uint64_t plan_budget_ms) {
  HEXIR_RETURN_IF_ERROR(check_alignment_fits_elements(fn, plan, alignment));
  // Kernel scratch holds doubles: it goes into the arena only at offsets
  // that keep them aligned (else the shared workspace, aligned past the arena).
  if (alignment < kScratchAlignment) plan.workspace_in_arena = false;
  std::vector<LiveRange> ranges = compute_live_ranges(fn, plan);
  std::vector<PlanBuffer> buffers;
  buffers.reserve(ranges.size());
  for (const LiveRange& r : ranges) buffers.push_back(r.buffer);
  // Scratch in the arena: one buffer per instruction that needs some, live
  // only while it runs; they follow the value buffers in `buffers`.
  std::vector<size_t> scratch_of;
  if (plan.workspace_in_arena && strategy != PlanStrategy::kFreeAtLastUse) {
    for (size_t k = 0; k < plan.program.size(); ++k) {
      if (plan.program[k].workspace_size == 0) continue;
      scratch_of.push_back(k);
      buffers.push_back(
          {plan.program[k].workspace_size, static_cast<int64_t>(k), static_cast<int64_t>(k) + 1});
    }
  }
  if (strategy == PlanStrategy::kFreeAtLastUse) {
    // No static plan: the VM allocates at run time; offsets stay 0.
    for (ValuePlan& value : plan.values) value.arena_offset = 0;
    plan.arena_size = 0;
    plan.lower_bound = live_lower_bound(buffers);
    if (heuristic) *heuristic = "free-at-last-use";
    return ok_status();
  }
  HEXIR_ASSIGN_OR_RETURN(BufferPlan placed,
                         place_buffers(fn, buffers, strategy, alignment, plan_budget_ms, "arena"));
  for (size_t i = 0; i < ranges.size(); ++i)
    plan.values[static_cast<size_t>(ranges[i].root)].arena_offset = placed.offsets[i];
  for (size_t j = 0; j < scratch_of.size(); ++j)
    plan.program[scratch_of[j]].workspace_offset = placed.offsets[ranges.size() + j];
  BufferHeads heads(plan);
  for (size_t v = 0; v < plan.values.size(); ++v)
    plan.values[v].arena_offset =
        plan.values[static_cast<size_t>(heads.head(static_cast<int>(v)))].arena_offset;
  plan.arena_size = placed.size;
  plan.lower_bound = live_lower_bound(buffers);
  if (heuristic) *heuristic = placed.heuristic;
  return plan_host_arena(fn, plan, strategy, alignment, plan_budget_ms);
}

}  // namespace hexir::compiler
