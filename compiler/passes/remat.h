// Rematerialization (after XLA's HloRematerialization): lowers the peak of
// live arena bytes of a function by recomputing values instead of keeping
// them. A value that is live across the peak without being read there is
// dropped after its earlier reads and computed again just before its first
// read after the peak, by a copy of the instruction that wrote it (same
// operator, same parameters, same inputs, so the same bits). An input of that
// instruction that is no longer live there is either kept alive longer or
// recomputed itself (a chain of up to RematOptions::max_chain instructions:
// a layernorm and the projection reading it, an elementwise chain).
//
// The pass works on the plan after assign_storage (and the memory
// schedule), before assign_in_place: every trial runs the in-place,
// donation and scratch passes on a copy and measures the peak of the live
// ranges the arena planner will place (values and per-instruction scratch),
// so a choice is judged by what the plan really does. Greedy: at each step
// the candidate (a value, and whether its inputs are recomputed or kept)
// that lowers the peak most per FLOP recomputed (ops/cost.h) is applied,
// until the peak is at or below the target or nothing lowers it.
// Functions with loops or ifs are left as they are (their values live
// around back edges and across branches).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hexir/compiler/graph.h"
#include "ir/plan.h"

namespace hexir::compiler {

struct RematOptions {
  // What the later passes will do (assign_in_place's arena_values).
  bool in_place = true;
  // Instructions recomputed together for one value (it and the inputs it needs).
  int max_chain = 4;
  // Steps (values recomputed) at most, per call.
  int max_steps = 4096;
};

// Live arena bytes at the highest instant of a plan, as the planner sees them.
struct LivePeak {
  uint64_t bytes = 0;
  int64_t at = -1;      // first program index at that height
  int64_t count = 0;    // program indices at that height
};

struct RematResult {
  LivePeak before;       // of the plan as it came in
  LivePeak after;        // of the plan left in `plan`
  int instructions = 0;  // recomputations added by this call
  uint64_t flops = 0;    // their FLOPs per invoke (ops::flop_estimate)
  bool control_flow = false;  // the function has loops or ifs: left as it was
};

// The plan's reads, per storage root: the program indices reading it (or a
// view of it), in order; whether a view of it is read; its writer (-1: none).
// Shared by rematerialization and host offload.
struct Reads {
  std::vector<std::vector<int64_t>> at;
  std::vector<bool> through_view;
  std::vector<int64_t> def;
};
Reads reads_of(const FunctionPlan& plan);

// The peak of a plan after the in-place and donation passes (`finished`,
// with record_workspaces run): its live ranges plus each instruction's scratch.
LivePeak live_peak(const Function& fn, const FunctionPlan& finished);
// Live device arena bytes at each program index of a finished plan (values
// and scratch), one past the end too.
std::vector<uint64_t> live_profile(const Function& fn, const FunctionPlan& finished);

// Runs assign_in_place, place_donations, record_last_uses and
// record_workspaces on a copy of `plan` (after assign_storage).
FunctionPlan finish_storage(const Function& fn, FunctionPlan plan, bool in_place);

// Adds recomputations to `plan` (after assign_storage, before
// assign_in_place) until the live peak of the finished plan is at most
// `target` bytes, or no recomputation lowers it.
RematResult rematerialize(const Function& fn, FunctionPlan& plan, uint64_t target, const RematOptions& options = {});

// Why the peak of `plan` (after assign_storage) stays where it is, for an
// infeasible budget: the instruction at the peak and the largest values live
// there, each with the reason it is not recomputed.
std::string explain_peak(const Function& fn, const FunctionPlan& plan, bool in_place);

// Recomputations in a plan, and their FLOPs.
struct RecomputeCount {
  int instructions = 0;
  uint64_t flops = 0;
};
RecomputeCount count_recomputations(const Function& fn, const FunctionPlan& plan);

}  // namespace hexir::compiler
