// The .hxir text front end (see DESIGN.md "Text IR"): parses the text and
// builds the graph through GraphBuilder (graph.h), which checks every node
// (operand counts, attributes, declared result types against the operator's
// rule) and the returns against the signature. The parser itself checks only
// what is textual: syntax, names, constant literals, and .npy headers (a
// `file` constant's bytes stay in its file). Every error reads
// "FILE:LINE:COL: what was expected".
//
//   %y = call @relu(%x) : f32[4]
//   %a, %b = call @split(%x) {axis = 1} : f32[2,3], f32[2,3]   // one name and type per result
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

#include "constant_data.h"
#include "graph.h"
#include "hexir/base/half.h"
#include "hexir/base/status.h"

namespace hexir::serializer {

struct ParseOptions {
  // `file "x.npy"` paths are confined to `base_dir` (the source's folder) by
  // default: no absolute path, nothing outside it after `..` and symlinks are
  // resolved (realpath). True: any path the process can read.
  bool allow_external_files = false;
  // A `dense` or `file` constant larger than this is refused at its
  // declaration, naming the limit (constant_data.h).
  uint64_t max_constant_bytes = kDefaultMaxConstantBytes;
};

// `display_name` names the source in errors; `base_dir` resolves `file "x.npy"` paths.
Result<Module> parse_module(std::string_view source, std::string_view display_name,
                            const std::filesystem::path& base_dir, const ParseOptions& options = {});

// Element conversions of splat/dense values of f16 and bf16 constants: the
// literal's double rounded once (never through f32 first).
using hexir::double_to_bfloat16_bits;
using hexir::double_to_half_bits;
using hexir::float_to_bfloat16_bits;
using hexir::float_to_half_bits;

}  // namespace hexir::serializer
