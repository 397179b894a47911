// Passes: each reads the graph (graph.h), never changes it, and fills the
// plan beside it (plan.h). In the order the compiler runs them:
//   detect_splats -> dedupe_constants -> pack_constants               (module)
//   assign_storage -> [schedule_for_memory] -> assign_in_place -> place_donations
//   -> record_last_uses -> record_workspaces -> plan_function_arena   (per function)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/compiler/compiler.h"
#include "hexir/compiler/graph.h"
#include "hexir/planner/arena_planner.h"
#include "ir/plan.h"

namespace hexir::compiler {

// The offset planner (planner/) works on plain live ranges.
using planner::BufferPlan;
using planner::kDefaultPlanBudgetMs;
using planner::PlanBuffer;

// ---- constants ----------------------------------------------------------------

// Sets plan.fills: a fill for every constant written as one, and for every
// constant whose elements are all equal (bytewise; read in chunks, stopping
// at the first difference): one element as the pattern, repeated
// element-count times. Empty constants stay data.
Status detect_splats(const Module& module, ConstantPlan& plan);

// Builds the constant table (plan.stored, plan.stored_index): constants with
// equal dtype, shape and contents (or equal fills) share one entry, the first
// one's; constants no function uses get none. Contents are hashed a chunk at
// a time and compared in full on a hash match. Needs plan.fills.
Status dedupe_constants(const Module& module, ConstantPlan& plan);

// Lays the non-fill entries out in RODATA sections, each at a multiple of
// format::kConstantAlignment: the streamed ones (StoredConstant::streamed)
// in a section of their own. Returns the device section's size (0 when none).
uint64_t pack_constants(const Module& module, ConstantPlan& plan);
bool module_has_rodata(const ConstantPlan& plan);

// Bytes a program puts on the device for its constants: every stored
// constant but the streamed ones (fills are materialized there too).
uint64_t device_constant_bytes(const Module& module, const ConstantPlan& plan);

// ---- functions ----------------------------------------------------------------

// Starts `plan` for `fn`: decides where every value lives and builds the program:
//  - inputs are Input bindings, constants Constant slots, node results Arena;
//  - a view (reshape) emits nothing and shares the storage root of its input;
//  - a returned value's root becomes Output storage, so its producer writes
//    into the caller's buffer; returning an input, a constant, or a root
//    already bound to an earlier output adds an explicit copy instead;
//  - a donated input gets donated_to = the first free output of its type.
// A node with several results is one instruction with several outputs; each
// result is a value with storage of its own.
// strided_views (docs/views.md): a transpose, slice (steps > 0), expand, or
// reshape of such a view, at the top level of the function, emits nothing
// either: its result is a view with an offset and strides into the value it
// views, read in place by the kernels that take strides
// (ops::accepts_strided_input). A view that some reader needs row-major (or
// that is returned, or read inside a loop or an if) is materialized once
// where its node was: one copy instruction from the strided view, shared by
// every reader, never more bytes than the node itself moved.
// Cost rule: a permuted view (inner stride neither 1 nor 0: a transpose
// of the last dim, a step along it) read by more than one kernel is
// materialized too, unless its base is at most kPermutedViewCacheBytes.
void assign_storage(const Function& fn, FunctionPlan& plan, bool strided_views = false);

// A base of at most this many bytes is read through a permuted view by any
// number of kernels. 256 KiB is the low end of a core's L2 (256 KiB to
// 2 MiB per core on current x86 and Arm server and desktop parts), so the
// second and later column walks over such a base hit cache, where a copy
// would write all its bytes once more; over a larger base every walk misses
// about once per element (each element of a column in a line of its own).
constexpr uint64_t kPermutedViewCacheBytes = 256 * 1024;

// Bytes the instructions of `plan` move without computing: the results of
// transpose, slice, expand and copy (a loop's body counted once).
uint64_t copied_bytes(const Function& fn, const FunctionPlan& plan);

// The head of the buffer `value` lives in: its storage root, then the
// buffer_prev links (in-place results and donated destinations) followed to
// the value that owns the buffer (an arena value, an input, a constant).
// Walks the chain: O(its length). Passes that need many heads use BufferHeads.
int buffer_head(const FunctionPlan& plan, int value);

// The buffer heads of every value of a plan, in amortized near-constant time
// per query however long the chains (a chain of N in-place results would make
// N calls of buffer_head cost O(N^2)). A union-find over the links: each
// value points at a value further along its chain (its storage root, or its
// root's buffer_prev's root), and queries shorten the paths they follow.
// Stays right when a pass links a head onto another buffer with link().
class BufferHeads {
 public:
  explicit BufferHeads(const FunctionPlan& plan);
  int head(int value);
  // `value`'s buffer, whose head was `value` itself, now continues `onto`'s.
  void link(int value, int onto);

 private:
  std::vector<int> up_;
};

// Per storage root: program index of the last instruction reading it or any
// view of it (-1: none), and of its writer (-1: not written by an instruction).
struct Uses {
  std::vector<int64_t> last_read;
  std::vector<int64_t> def;
};
Uses compute_uses(const FunctionPlan& plan);

// In place: an instruction whose operator may run in place writes output 0
// into the buffer of one input when that input's value (with its views) is
// read by no later instruction, has the result's byte size and dtype, and
// lives in the arena. A result bound to output j may instead take over the
// donated input whose donated_to is j. Never a constant, a non-donated input,
// or a value bound to an output. Sets buffer_prev and the instruction's
// alias_mask (every input operand that is that value). Storage is updated by
// place_donations. arena_values false: only results onto donated inputs (a
// donation is the caller's request; naive plans and --no-in-place keep every
// value apart).
void assign_in_place(const Function& fn, FunctionPlan& plan, bool arena_values = true);

// Donation: output j of a donated input a (donated_to = j) is computed in a's
// buffer: either an in-place chain already leads there; or (in_place_chains,
// a straight-line program) the chain ending at output j can be extended back
// to a — each earlier value written in place on the one before it, the first
// on a itself (a KV cache updated layer after layer: no copy in or out); or
// its writer writes straight into a's buffer when a is read by no
// instruction at or after it. Otherwise the donation is dropped
// (donated_to = -1, the input stays read-only and the output gets its own
// buffer). Then every value takes the storage of its buffer's head.
void place_donations(const Function& fn, FunctionPlan& plan, bool in_place_chains = false);

// Sets ValuePlan::last_use on every arena storage root.
void record_last_uses(const Function& fn, FunctionPlan& plan);

// Sets each instruction's workspace_size (ops::workspace_bytes) and
// plan.workspace_size, their maximum. Where the scratch goes is the plan's
// choice: shared past the arena, or (plan.workspace_in_arena) one arena range
// per instruction, live only while it runs (plan_function_arena places them).
void record_workspaces(const Function& fn, FunctionPlan& plan);

// Reorders plan.program (after assign_storage, before any other pass) to
// lower the peak of live bytes: a greedy list scheduler that, among the ready
// instructions, picks the one whose results minus the bytes it frees are
// smallest (ties: source order). Dependencies are kept, so results are
// unchanged; values bound to outputs are not counted (they are not arena).
void schedule_for_memory(const Function& fn, FunctionPlan& plan);

// One live range per arena buffer (its head value), in program indices: from
// the instruction that writes it to one past the last that reads it, any view
// of it, or any value that took its buffer over in place. A result nothing
// reads still occupies its writing instruction.
struct LiveRange {
  int root = -1;  // value id
  PlanBuffer buffer;
};
// `space`: the device arena (kArena) or the host arena (kHost).
std::vector<LiveRange> compute_live_ranges(const Function& fn, const FunctionPlan& plan,
                                           Storage space = Storage::kArena);

// Kernel scratch (workspaces) is only placed in the arena when the arena
// alignment is at least this (it holds doubles).
constexpr uint32_t kScratchAlignment = 8;

// Assigns arena offsets to every arena value with the chosen strategy, and
// refuses an alignment below the element size of any arena value (naming it);
// below kScratchAlignment, scratch stays in the shared workspace. Sets
// plan.arena_size and plan.lower_bound. `heuristic` receives the name of
// the placement used. `plan_budget_ms` bounds the planner's improvement
// search (a deterministic work budget, see plan_arena).
Status plan_function_arena(const Function& fn, FunctionPlan& plan, PlanStrategy strategy, uint32_t alignment,
                           std::string* heuristic, uint64_t plan_budget_ms = kDefaultPlanBudgetMs);

}  // namespace hexir::compiler
