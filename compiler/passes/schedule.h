// Scheduling: the order of a function's instructions (--schedule=memory).
#pragma once

#include "hexir/compiler/graph.h"
#include "ir/plan.h"

namespace hexir::compiler {

// Reorders plan.program (after assign_storage, before any other pass) to
// lower the peak of live bytes: a greedy list scheduler that, among the ready
// instructions, picks the one whose results minus the bytes it frees are
// smallest (ties: source order). Dependencies are kept, so results are
// unchanged; values bound to outputs are not counted (they are not arena).
// A donated input and the values in-place capable ops make of it keep their
// last reader last, so the donation stays what the source order allows.
void schedule_for_memory(const Function& fn, FunctionPlan& plan);

}  // namespace hexir::compiler
