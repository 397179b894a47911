// Plan results, kept beside the graph (graph.h) they describe: which entry of
// the file's constant table each constant became and where its bytes go; per
// function, where every value lives, the instructions actually dispatched
// (views dropped, copies added, possibly reordered), buffer sharing, arena
// offsets and scratch. The passes (passes/, in order in pipeline.h) fill a
// plan from a const graph; the writer reads the two together.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hexir/compiler/graph.h"

namespace hexir::compiler {

// ---- constants ----------------------------------------------------------------

// A constant stored as a fill: `pattern` (one element) repeated `count` times.
struct Fill {
  std::vector<uint8_t> pattern;
  uint64_t count = 0;
};

// One entry of the file's constant table.
struct StoredConstant {
  int constant = -1;           // the graph constant it is (the first of equal ones): name, type, bytes
  std::optional<Fill> fill;    // stored as a fill descriptor; else packed into RODATA
  uint64_t rodata_offset = 0;  // set by pack_constants, for non-fills: inside its section
  // A streamed weight (weights streaming, stream_weights in remat.h): kept in
  // a RODATA section of its own in the Host memory space, never uploaded;
  // every read is a Prefetch into a device arena slot. Never a fill.
  bool streamed = false;
};

struct ConstantPlan {
  // Per graph constant: its fill, when it was written as one or all its
  // elements are equal (detect_splats).
  std::vector<std::optional<Fill>> fills;
  // Per graph constant: its entry in `stored`, -1 when no function uses it (dedupe_constants).
  std::vector<int> stored_index;
  std::vector<StoredConstant> stored;  // the file's constant table, in order
  uint64_t rodata_size = 0;            // end of the last packed constant (pack_constants)
  uint64_t streamed_rodata_size = 0;   // the same for the streamed constants' section
};

// ---- functions ----------------------------------------------------------------

// kArena: the device arena. kHost: the host arena (host offload, offload.h),
// which only kEvict and kPrefetch copies touch; every pass that works on the
// device arena (in place, live ranges, the peak) leaves host values alone.
// kExtent: an entry of the context's extent table, the run-time extent of
// some value's bounded dim (Value::extent; docs/design-notes.md), never
// reused, so it stays readable after the invoke for the results' shapes.
enum class Storage : uint8_t { kArena, kConstant, kInput, kOutput, kHost, kExtent };

// Where one value lives.
struct ValuePlan {
  // The value whose storage this one uses: itself unless it is a view.
  int storage_root = -1;
  Storage storage = Storage::kArena;
  // kConstant: the graph constant (Module::constants); kInput/kOutput: the binding index.
  uint32_t storage_index = 0;
  uint64_t arena_offset = 0;  // kArena, set by the arena plan
  // Set on storage roots by assign_in_place / place_donations: the root whose
  // buffer this value takes over when it is written (-1: a buffer of its
  // own). Following it from any root ends at the buffer's head, whose storage
  // every value of the chain shares (buffer_head in passes/storage.h).
  int buffer_prev = -1;
  // Storage roots in arena storage: program index of the last instruction
  // that reads the value or a view of it (its writer when nothing does). The
  // VM frees the value there under free-at-last-use.
  int64_t last_use = -1;
  // A value the rematerialization pass (remat.h) added: the value it
  // recomputes (the first computation, never itself a recomputation). -1:
  // none. Only on storage roots.
  int recomputes = -1;
  // A copy the offload pass (offload.h) added: the value it holds (never
  // itself a copy). Set on the host copy an eviction writes and on the device
  // copy a prefetch writes. -1: none.
  int copy_of = -1;
  // A view with a layout of its own (docs/views.md): its elements lie at
  // view_offset + sum i_d * view_strides[d] in its storage root (row-major
  // from view_offset when view_strides is empty). partial_view: it has an
  // offset, strides or fewer bytes than its root, so it is never written and
  // no result takes its root's buffer over through it (in place).
  int64_t view_offset = 0;
  std::vector<int64_t> view_strides;
  bool partial_view = false;
};

// Control instructions the VM runs itself (docs/control-flow.md). A loop is
// [kLoopBegin, body..., kLoopNext]:
//  - kLoopBegin: inputs {start, trip}, outputs {counter}: counter = start;
//    when !(counter < trip), continue at `target` (one past the kLoopNext);
//  - kLoopNext: inputs {trip, counter}, outputs {counter}: counter += step;
//    while counter < trip, continue at `target` (one past the kLoopBegin).
// An if is [kBranchIfZero, then..., kJump, else...]:
//  - kBranchIfZero: inputs {condition (bool[])}: when it is false, continue
//    at `target` (the else-branch's first instruction);
//  - kJump: continue at `target` (one past the else-branch).
// Host offload (offload.h) adds copies that do not branch:
//  - kEvict: inputs {a device arena value}, outputs {its host copy};
//  - kPrefetch: inputs {a host copy}, outputs {a device copy}.
enum class Control : uint8_t { kNone, kLoopBegin, kLoopNext, kBranchIfZero, kJump, kFail, kEvict, kPrefetch };

// A copy between memory spaces: straight-line code, not control flow.
inline bool is_transfer(Control c) { return c == Control::kEvict || c == Control::kPrefetch; }
// Changes where the program continues, or may (loops, ifs, Fail).
inline bool is_branching(Control c) { return c != Control::kNone && !is_transfer(c); }

// One dispatched instruction: a graph node, a copy the plan added, or a
// control instruction.
struct Instruction {
  Control control = Control::kNone;
  int64_t target = -1;  // control: program index to continue at
  int64_t step = 0;     // kLoopNext
  std::string message;  // kFail: the error the invoke stops with
  // Writes a loop-carried value in place of a copy at the yield (an output
  // is the carried value; output 0 may also be an input, updated in place).
  // Its alias bits are fixed by assign_storage, not assign_in_place.
  bool writes_carried = false;
  // Recomputes a value an earlier instruction wrote (remat.h): its one
  // output's ValuePlan::recomputes names that value.
  bool recomputed = false;
  ops::OpId op = ops::OpId::kCopy;
  int node = -1;             // graph node it runs; -1: a copy added by assign_storage (no parameters)
  std::vector<int> inputs;   // value ids
  std::vector<int> outputs;  // value ids, one per result of the operator
  // Bit i: output 0 is written into the storage of inputs[i] (in place).
  uint32_t alias_mask = 0;
  // Scratch bytes the kernel needs (ops::workspace_bytes) and, when the plan
  // puts scratch in the arena, its offset there.
  uint64_t workspace_size = 0;
  uint64_t workspace_offset = 0;
};

struct FunctionPlan {
  // Values the plan adds (copies into outputs): their ids follow the graph's.
  std::vector<Value> added;
  std::vector<ValuePlan> values;  // per value id: the graph's, then `added`
  std::vector<int> donated_to;    // per argument: the output written in its buffer, -1: none
  // Per argument: why its donation cannot be honoured, to follow "input %x
  // cannot be donated" (" to output 0 'y': ..." or ": ..."); empty: honoured,
  // or not donated. plan_module turns the first into a compile error.
  std::vector<std::string> donation_refused;
  // The instructions dispatched, in order (views dropped, copies added).
  // Liveness and planning count in this list.
  std::vector<Instruction> program;
  std::vector<int> outputs;  // value id bound to each output binding
  // Each loop of the program as [its kLoopBegin, its kLoopNext] indices,
  // inner loops first. A value live into a loop lives to its kLoopNext.
  std::vector<std::pair<int64_t, int64_t>> loops;
  uint64_t arena_size = 0;
  uint64_t lower_bound = 0;
  uint64_t host_arena_size = 0;     // the host arena (Storage::kHost values), planned apart
  uint64_t host_lower_bound = 0;
  // Bytes the program moves per invoke without computing (transpose, slice,
  // expand and copy instructions; a loop's body counted once), as
  // assign_storage built it, and what the same function moved before
  // transpose, slice and expand became views (docs/views.md).
  uint64_t copied_bytes = 0;
  uint64_t copied_bytes_without_views = 0;
  uint64_t workspace_size = 0;      // largest scratch of one instruction
  bool workspace_in_arena = false;  // scratch planned as arena ranges (else shared, past the arena)
};

struct ModulePlan {
  ConstantPlan constants;
  std::vector<FunctionPlan> functions;  // one per Module::functions entry
  std::string heuristic;                // the arena placement that produced the plans
};

// Value `id` of a function under its plan: a graph value or one the plan added.
inline const Value& value_at(const Function& fn, const FunctionPlan& plan, int id) {
  const size_t graph_values = fn.values.size();
  const size_t i = static_cast<size_t>(id);
  return i < graph_values ? fn.values[i] : plan.added[i - graph_values];
}
inline int value_count(const Function& fn, const FunctionPlan& plan) {
  return static_cast<int>(fn.values.size() + plan.added.size());
}
inline std::span<const int64_t> params_of(const Function& fn, const Instruction& inst) {
  if (inst.node < 0) return {};
  return fn.nodes[static_cast<size_t>(inst.node)].params;
}

}  // namespace hexir::compiler
