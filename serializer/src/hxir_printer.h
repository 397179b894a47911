// A graph (graph.h) back to .hxir text that parses into the same graph:
// the same constants in the same order, the same values and nodes, so it
// compiles to the same executable, byte for byte. hexir-compile
// --emit-hxir uses it to show what an importer built.
//
// Names that are not identifiers ([A-Za-z0-9_.$]+) are quoted:
// %"input:0", @"w/1" (escapes \" \\ \n \t \xNN). Attributes are recovered
// from each node's parameter words and checked: they must lower back to the
// same words, else printing fails naming the node.
//
// Constants: a fill pattern prints as `splat V`; inline bytes up to
// dense_max_bytes as `dense [...]`; anything larger, and every constant read
// from a file, is written as an .npy file into data_dir and printed as
// `file "DATA_REF/NAME.npy"` (when data_dir is empty, everything is dense).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "graph.h"
#include "hexir/base/status.h"

namespace hexir::serializer {

struct HxirPrintOptions {
  std::filesystem::path data_dir;  // where .npy files are written (created); empty: all constants dense
  std::string data_ref;            // data_dir as the text names it (relative to the .hxir file)
  uint64_t dense_max_bytes = 256;  // inline constants up to this size print as dense lists
};

Result<std::string> print_hxir(const Module& module, const HxirPrintOptions& options = {});

// `name` with its sigil ('%' or '@'), quoted when it is not an identifier.
std::string hxir_name(char sigil, std::string_view name);

}  // namespace hexir::serializer
