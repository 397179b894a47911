// Results written into the buffer of an input they read last
// (assign_in_place), and donated inputs' buffers given to their outputs
// (place_donations). Both run after assign_storage (and the memory schedule).
#pragma once

#include "hexir/compiler/graph.h"
#include "ir/plan.h"

namespace hexir::compiler {

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

}  // namespace hexir::compiler
