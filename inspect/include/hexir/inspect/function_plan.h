// What a verified executable says about one function's memory, recomputed
// from its instruction stream: statistics (hexir-dump prints them per
// function), its arena values with their live ranges, and its plan picture.
// Tools-side: the runtime (libhexir_vm) never links it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hexir/format/verifier.h"
#include "hexir/inspect/plan_svg.h"

namespace hexir::inspect {

struct FunctionStats {
  uint64_t arena_size = 0;             // Function.arena_size
  uint64_t lower_bound = 0;            // Function.lower_bound
  double percent_over = 0;             // arena_size over lower_bound, in percent (0 when the bound is 0)
  uint64_t in_place_aliases = 0;       // instructions with alias_mask != 0
  uint64_t view_aliases = 0;           // slots sharing another slot's storage without an instruction (views)
  uint64_t constant_bytes_stored = 0;  // RODATA bytes (raw) of the constants the function reads
  uint64_t constant_bytes_filled = 0;  // bytes of the fill constants the function reads
  // Instructions writing a recomputed slot (Slot.recomputes, rematerialization)
  // and their FLOPs per invoke (ops::flop_estimate).
  uint64_t recomputed_instructions = 0;
  uint64_t recomputed_flops = 0;
  // The host memory space (host offload): Function.host_arena_size and
  // host_lower_bound, and the Evict / Prefetch copies per invoke.
  uint64_t host_arena_size = 0;
  uint64_t host_lower_bound = 0;
  uint64_t evictions = 0;
  uint64_t prefetches = 0;
  uint64_t bytes_evicted = 0;
  uint64_t bytes_prefetched = 0;
  // Of the prefetches: those of streamed weights (from a Host constant, not
  // the host arena), and the streamed constants' bytes the function reads.
  uint64_t weight_prefetches = 0;
  uint64_t bytes_weights_prefetched = 0;
  uint64_t constant_bytes_streamed = 0;
  // Bytes the function moves per invoke without computing: the outputs of
  // its transpose, slice, expand and copy instructions (a loop's body once).
  // Compare a file compiled with and without --no-views (docs/views.md).
  uint64_t copied_bytes = 0;
  // Views with an offset or strides of their own (Slot.view_offset,
  // Slot.strides) the function reads: values no instruction copied.
  uint64_t strided_views = 0;
  // conv2d instructions that run channels-last (docs/layout.md); the
  // conversions at their regions' edges are among the copies above.
  uint64_t channels_last_convolutions = 0;
  // Of those, the ones by Winograd (layout words 2 and 3), and of these
  // the ones by F(4x4, 3x3) (word 3; the rest F(2x2, 3x3)).
  uint64_t winograd_convolutions = 0;
  uint64_t winograd4_convolutions = 0;
};

// A value that occupies storage the function writes: an arena value, or a
// value written into a donated input's buffer. Times are instruction indices
// relative to the function; the value lives over [first, last].
struct StorageValue {
  uint32_t slot = 0;    // the slot written (its views are folded in)
  std::string name;     // "%h1", or "%s7" when unnamed
  int64_t first = 0;    // the instruction that writes it
  int64_t last = 0;     // the last instruction reading it or a view of it (first when none)
  uint64_t offset = 0;  // arena offset (donated: the input's index in `input`)
  uint64_t size = 0;
  bool in_place = false;  // written with an alias bit over one of its inputs
  bool donated = false;   // storage is a donated input's buffer, not the arena
  bool host = false;      // in the host arena (offset is a host arena offset)
  bool prefetched = false;  // a device copy a Prefetch wrote
  uint32_t input = 0;     // donated: the input binding index
  uint32_t views = 0;     // view slots folded into this value
};

// "%h1" for values, "@b1" for constants, "%s7" when unnamed. `slot` must be
// a valid slot index of the module.
std::string slot_name(const fb::Module& module, uint32_t slot);

// How far `size` is over `lower_bound`, in percent (0 when the bound is 0).
double percent_over(uint64_t size, uint64_t lower_bound);

// `function` must be < the module's function count.
FunctionStats function_stats(const format::VerifiedModule& module, size_t function);

// Arena values first (in order of their writer), then donated-buffer
// values, then host arena values.
std::vector<StorageValue> function_storage_values(const format::VerifiedModule& module, size_t function);

// The picture of one function's arena: one rectangle per storage value,
// donated-buffer values stacked above the arena, then the host arena above
// those (its own offsets, from its base line), the lower bound line.
PlanSvgInput function_plan_picture(const format::VerifiedModule& module, size_t function);

// A weight stored in fewer bits than f32 (hexir-compile --weights, or a
// QDQ model's int8 matmul weights): the constants of its values and scales,
// how they are stored, and what reads them.
struct CompressedWeight {
  uint32_t weight = 0, scale = 0;  // constant indices
  std::string format;              // "int8 per row", "int4 group 32"
  int64_t rows = 0, columns = 0;   // as f32 [rows, columns]
  uint64_t stored_bytes = 0;       // values and scales
  bool matmul = false, gather = false;  // read by a quantized matmul, gathered (an embedding)
};

// Module-wide, in constant order: the w and scale operands of
// quantized_matmul and int4_matmul, and the constants two gathers by the
// same indices pick rows of (an i8/u8 table and its f32/f16 scales).
std::vector<CompressedWeight> compressed_weights(const format::VerifiedModule& module);

}  // namespace hexir::inspect
