// The .hxir text front end and its inverse.
//
// parse_hxir parses the text (the design card's "Text IR") and builds the
// graph through GraphBuilder (graph.h), which checks every node (operand
// counts, attributes, declared result types against the operator's rule) and
// the returns against the signature. The parser itself checks only what is
// textual: syntax, names, constant literals, and .npy headers (a `file`
// constant's bytes stay in its file). Every error reads
// "FILE:LINE:COL: what was expected".
//
//   %y = call @relu(%x) : f32[4]
//   %a, %b = call @split(%x) {axis = 1} : f32[2,3], f32[2,3]   // one name and type per result
//
// print_hxir writes a graph back as .hxir text that parses into the same
// graph: the same constants in the same order, the same values and nodes, so
// it compiles to the same executable, byte for byte. hexir-compile
// --emit-hxir uses it to show what an importer built. Names that are not
// identifiers ([A-Za-z0-9_.$]+) are quoted: %"input:0", @"w/1" (escapes \"
// \\ \n \t \xNN). Attributes are recovered from each node's parameter words
// by the operator's definition (OpDef) and checked: they must lower back to
// the same words, else printing fails naming the node. A fill pattern prints
// as `splat V`; inline bytes up to dense_max_bytes as `dense [...]`; anything
// larger, and every constant read from a file, is written as an .npy file
// into data_dir and printed as `file "DATA_REF/NAME.npy"` (when data_dir is
// empty, everything is dense).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "hexir/base/status.h"
#include "hexir/compiler/graph.h"
#include "hexir/compiler/options.h"

namespace hexir::compiler {

struct ParseOptions {
  // `file "x.npy"` paths are confined to `base_dir` (the source's folder) by
  // default: no absolute path, nothing outside it after `..` and symlinks are
  // resolved (realpath). True: any path the process can read.
  bool allow_external_files = false;
  // A `dense` or `file` constant larger than this is refused at its
  // declaration, naming the limit.
  uint64_t max_constant_bytes = kDefaultMaxConstantBytes;
  // Instructions the module may hold, calls inlined (GraphBuilder::set_max_nodes).
  uint64_t max_instructions = kDefaultMaxInstructions;
};

// The parse options a compile with `options` uses.
ParseOptions parse_options_for(const CompileOptions& options);

// `display_name` names the source in errors; `base_dir` resolves `file "x.npy"` paths.
Result<Module> parse_hxir(std::string_view source, std::string_view display_name,
                          const std::filesystem::path& base_dir, const ParseOptions& options = {});

struct HxirPrintOptions {
  std::filesystem::path data_dir;  // where .npy files are written (created); empty: all constants dense
  std::string data_ref;            // data_dir as the text names it (relative to the .hxir file)
  uint64_t dense_max_bytes = 256;  // inline constants up to this size print as dense lists
};

Result<std::string> print_hxir(const Module& module, const HxirPrintOptions& options = {});

// `name` with its sigil ('%' or '@'), quoted when it is not an identifier.
std::string hxir_name(char sigil, std::string_view name);

}  // namespace hexir::compiler
