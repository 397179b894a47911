// Host offload (after XLA's memory-space assignment): lowers the peak of
// live device arena bytes of a function by moving values to the host arena
// while they are not needed. A value live across the peak without being read
// there is copied to host memory right after its writer (an Evict, which
// overlaps the reads before the peak on a device with a copy stream) and
// copied back into a new device slot (a Prefetch) before its first read
// after the peak; the readers from there on read that copy. A value that is
// itself a prefetched copy is prefetched again from the host copy it came
// from: no second eviction.
//
// Like rematerialization (remat.h) the pass works on the plan after
// assign_storage, before assign_in_place, and judges every trial by the peak
// of the finished plan. Greedy: at each step the candidate (a value and where
// its prefetch goes) that lowers the peak most per byte moved is applied,
// until the peak is at or below the target or nothing lowers it. Host values
// are Storage::kHost: every device pass leaves them alone, and
// plan_function_arena places them in their own arena. Functions with loops
// or ifs are left as they are.
#pragma once

#include <cstdint>
#include <optional>

#include "hexir/compiler/graph.h"
#include "ir/plan.h"
#include "passes/remat.h"

namespace hexir::compiler {

struct OffloadOptions {
  bool in_place = true;  // what the later passes will do (assign_in_place's arena_values)
  int max_steps = 4096;  // values offloaded at most, per call
  // Live host bytes at most (the host budget); none: unlimited.
  std::optional<uint64_t> host_budget;
};

// The copies between memory spaces in a plan, per invoke.
struct TransferCount {
  int evictions = 0;
  int prefetches = 0;
  uint64_t bytes_evicted = 0;
  uint64_t bytes_prefetched = 0;
};
TransferCount count_transfers(const Function& fn, const FunctionPlan& plan);

struct OffloadResult {
  LivePeak before;  // of the plan as it came in
  LivePeak after;   // of the plan left in `plan`
  int values = 0;   // values offloaded by this call (a prefetch each)
  bool control_flow = false;  // the function has loops or ifs: left as it was
};

// Adds evictions and prefetches to `plan` (after assign_storage, before
// assign_in_place) until the live device peak of the finished plan is at
// most `target` bytes, or no offload lowers it.
OffloadResult offload(const Function& fn, FunctionPlan& plan, uint64_t target, const OffloadOptions& options = {});

// Largest sum of live host arena bytes at one instruction.
uint64_t host_live_peak(const Function& fn, const FunctionPlan& plan);

// ---- weights streaming ---------------------------------------------------------
// A weight that does not fit beside the arena stays in host memory (a RODATA
// section in the Host space: the mapped file on the CPU, a pinned copy on
// CUDA) and is copied into a device arena slot before each instruction that
// reads it, by a Prefetch placed before the instruction reading the previous
// streamed weight: the copy for layer i+1 runs while layer i computes, and
// the arena planner's reuse of those slots is the double buffer.

// Per graph constant: whether it can be streamed in every function of
// `module` under `plans` (after assign_storage): each read is a kernel's
// (not a control instruction's) of the constant's value itself (not of a
// view of it), in a function without loops or ifs, and no function returns
// it. One pass over every function's values and program.
std::vector<bool> streamable_constants(const Module& module, const std::vector<FunctionPlan>& plans);

// Adds the prefetches of the graph constants marked in `streamed` (indexed
// by graph constant) to `plan` (after assign_storage, before
// assign_in_place): one device copy per reading instruction, prefetched
// `ahead` streamed reads before it (0: right before it). Returns the number
// of prefetches added.
int stream_weights(const Function& fn, FunctionPlan& plan, const std::vector<bool>& streamed, int ahead = 1);

}  // namespace hexir::compiler
