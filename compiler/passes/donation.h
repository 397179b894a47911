// Donations asked for by name (CompileOptions::donations), and the
// cache-update idioms exporters write rewritten so a donated cache is updated
// where it lies. Graph rewrites run before planning (compile_module).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "hexir/base/status.h"
#include "hexir/compiler/graph.h"
#include "hexir/compiler/options.h"

namespace hexir::compiler {

// Marks every input a rule matches as donated to the output the rule names
// (Argument::donate_to). Errors name the rule and the function: a rule that
// matches no input of any function, a matched input whose output does not
// exist, an input two rules donate to different outputs, types that differ.
Status apply_donations(Module& module, std::span<const DonationRule> rules);

// `where(iota == p, new, cache)` (torch.where(arange(C) == pos, new, cache),
// the scatter-free static-cache write) becomes `update_slice(cache, new, 0,
// .., p, .., 0)` with out_of_range = "skip": the rows written, not the whole
// cache, and in place on a donated cache. The mask is an `equal` of a
// constant iota along one axis k (0, 1, ..., C-1, every other dim 1) and a
// one-element integer value p (either side; or the `not` of it with the
// where's branches swapped); `new` has dim 1 along k and, broadcast to the
// result, fills the rest. Same results for every p: a p outside [0, C)
// matches no row, and update_slice skips it. And scatter_elements(cache,
// expand(p), rows) (torch's index_copy_ at one position: ScatterElements
// with every index p, the rows one long along the axis) becomes
// update_slice(cache, rows, ..) with out_of_range = "fail" (a negative p
// from the end, one past the cache fails the invoke, as the scatter did),
// and the broadcast indices are never made; with constant indices s0 + the
// row (a prefill writing its L rows from s0), the window is fixed at s0.
// Returns the number rewritten.
size_t rewrite_cache_updates(Module& module);

// Whether constant `c` (i32 or i64, at most 64 MiB) holds s0 + its
// coordinate along `axis` everywhere (an iota from 0, a prefill's rows s0..
// as the exporter broadcast them), and that s0; nullopt otherwise.
std::optional<int64_t> constant_rows_from(const Module& module, const Value& c, size_t axis);
// The axis along which constant `c` is 0, 1, ..., C-1 (its one dim larger
// than 1), or nullopt.
std::optional<size_t> constant_iota_axis(const Module& module, const Value& c);

}  // namespace hexir::compiler
