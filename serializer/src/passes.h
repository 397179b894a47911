// Passes over the serializer IR, in the order compile_source runs them:
//   detect_splats -> dedupe_constants -> pack_constants        (module)
//   assign_storage -> compute_live_ranges -> plan_function_arena (per function)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arena_planner.h"
#include "hexir/base/status.h"
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

// One live range per arena storage root, in fn.program indices: from the
// instruction that writes it to one past the last that reads it (or any view of it).
struct LiveRange {
  int root = -1;  // value id
  PlanBuffer buffer;
};
std::vector<LiveRange> compute_live_ranges(const Function& fn);

// Assigns arena offsets to every arena value of `fn` with the chosen
// strategy, and sets fn.arena_size and fn.lower_bound. `heuristic` receives
// the name of the placement used.
Status plan_function_arena(Function& fn, PlanStrategy strategy, uint32_t alignment, std::string* heuristic);

}  // namespace hexir::serializer
