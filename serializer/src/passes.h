// Passes over the serializer IR, in the order compile_source runs them:
//   detect_splats -> dedupe_constants -> pack_constants        (module)
//   assign_storage -> [schedule_for_memory] -> [assign_in_place] -> place_donations
//   -> record_last_uses -> plan_function_arena -> plan_workspaces  (per function)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/planner/arena_planner.h"
#include "hexir/serializer/compiler.h"
#include "ir.h"

namespace hexir::serializer {

// A constant whose elements are all equal (bytewise) becomes a fill: one
// element as the pattern, repeated element-count times. Empty constants stay.
void detect_splats(Module& module);

// Constants with equal dtype, shape and contents (or equal fill descriptors)
// become one; constants no function uses are dropped. Function values are
// remapped to the surviving indices.
void dedupe_constants(Module& module);

// Lays the non-fill constants out in one RODATA section, each at a multiple
// of format::kConstantAlignment. Returns the section size (0 when none).
uint64_t pack_constants(Module& module);
bool module_has_rodata(const Module& module);

// Decides where every value of `fn` lives and builds fn.program:
//  - inputs are Input bindings, constants Constant slots, call results Arena;
//  - a view (reshape) emits nothing and shares the storage root of its input;
//  - a returned value's root becomes Output storage, so its producer writes
//    into the caller's buffer; returning an input, a constant, or a root
//    already bound to an earlier output inserts an explicit copy instead;
//  - a donated input gets donated_to = the first free output of its type.
void assign_storage(Function& fn);

// The head of the buffer `value` lives in: its storage root, then the
// buffer_prev links (in-place results and donated destinations) followed to
// the value that owns the buffer (an arena value, an input, a constant).
int buffer_head(const Function& fn, int value);

// Per storage root: program index of the last instruction reading it or any
// view of it (-1: none), and of its writer (-1: not written by an instruction).
struct Uses {
  std::vector<int64_t> last_read;
  std::vector<int64_t> def;
};
Uses compute_uses(const Function& fn);

// In place: an instruction whose kernel may run in place takes over the
// buffer of one input when that input's value (with its views) is read by no
// later instruction, has the result's byte size and dtype, and lives in the
// arena. A result bound to output j may instead take over the donated input
// whose donated_to is j. Never a constant, a non-donated input, or a value
// bound to an output. Sets buffer_prev and the instruction's alias_mask (every
// input operand that is that value). Storage is updated by place_donations.
// arena_values false: only results onto donated inputs (a donation is the
// caller's request; naive plans and --no-in-place keep every value apart).
void assign_in_place(Function& fn, bool arena_values = true);

// Donation: output j of a donated input a (donated_to = j) is computed in a's
// buffer: either an in-place chain already leads there, or its writer writes
// straight into a's buffer when a is read by no instruction at or after it.
// Otherwise the donation is dropped (donated_to = -1, the input stays
// read-only and the output gets its own buffer). Then every value takes the
// storage of its buffer's head.
void place_donations(Function& fn);

// Sets Value::last_use on every arena storage root.
void record_last_uses(Function& fn);

// Sets each instruction's workspace_size (ops::workspace_bytes)
// and fn.workspace_size, their maximum. Where the scratch goes is the plan's
// choice: shared past the arena, or (fn.workspace_in_arena) one arena range
// per instruction, live only while it runs (plan_function_arena places them).
void record_workspaces(Function& fn);

// Reorders fn.program (after assign_storage, before any other pass) to lower
// the peak of live bytes: a greedy list scheduler that, among the ready
// instructions, picks the one whose result minus the bytes it frees is
// smallest (ties: source order). Dependencies are kept, so results are
// unchanged; values bound to outputs are not counted (they are not arena).
void schedule_for_memory(Function& fn);

// One live range per arena buffer (its head value), in fn.program indices:
// from the instruction that writes it to one past the last that reads it, any
// view of it, or any value that took its buffer over in place.
struct LiveRange {
  int root = -1;  // value id
  PlanBuffer buffer;
};
std::vector<LiveRange> compute_live_ranges(const Function& fn);

// Assigns arena offsets to every arena value of `fn` with the chosen
// strategy, and sets fn.arena_size and fn.lower_bound. `heuristic` receives
// the name of the placement used. `plan_budget_ms` bounds the planner's
// improvement search (a deterministic work budget, see plan_arena).
Status plan_function_arena(Function& fn, PlanStrategy strategy, uint32_t alignment, std::string* heuristic,
                           uint64_t plan_budget_ms = kDefaultPlanBudgetMs);

}  // namespace hexir::serializer
