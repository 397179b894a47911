// Constants (module passes, run first and in this order): detect_splats ->
// dedupe_constants -> pack_constants. They read the module's constants and
// fill the ConstantPlan (plan.h): fills, the constant table, RODATA offsets.
#pragma once

#include <cstdint>

#include "hexir/base/status.h"
#include "hexir/compiler/graph.h"
#include "ir/plan.h"

namespace hexir::compiler {

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

}  // namespace hexir::compiler
