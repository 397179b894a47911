// The compiler as a library: a graph (graph.h, built by a front end: hxir.h,
// onnx.h, or by hand through GraphBuilder) or .hxir text in, an .hxe out (as
// bytes, or written to a file with the weights streamed from their sources).
// The pipeline runs the constant passes, the per-function passes and arena
// plans (compiler/passes), then the writer (serializer/).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/compiler/graph.h"
#include "hexir/compiler/options.h"

namespace hexir::compiler {

// Fails when an option is out of range (the arena alignment).
Status check_compile_options(const CompileOptions& options);

// A graph to .hxe bytes, or straight into a file (see compile_file_to).
// `display_name` prefixes planning errors (the source's name; empty: none).
Result<std::vector<uint8_t>> compile_module(const Module& module, const CompileOptions& options = {},
                                            std::string_view display_name = {});

// What compile_file_to and compile_module_to wrote.
// A weight stored in fewer bits than its type (CompileOptions::weights):
// its constant's name, how it is stored, [rows (output channels),
// columns], bytes before and after (scales included), and the largest |w -
// dequantized w| over the largest |w| of the weight.
struct CompressedWeight {
  std::string name;
  WeightFormat format;
  int64_t rows = 0, columns = 0;
  uint64_t bytes_before = 0, bytes_after = 0;
  double max_relative_error = 0.0;
};

struct CompiledFile {
  uint64_t size = 0;          // bytes in the file
  std::vector<uint8_t> head;  // its prelude and metadata (no data sections): enough for a summary
  std::vector<CompressedWeight> compressed;  // CompileOptions::weights: what was stored smaller
};

Result<CompiledFile> compile_module_to(const Module& module, const std::filesystem::path& out,
                                       const CompileOptions& options = {},
                                       std::string_view display_name = {});

// .hxir text to .hxe bytes. `display_name` is used in error messages
// (file:line:col); `base_dir` resolves `file "x.npy"` paths.
Result<std::vector<uint8_t>> compile_source(std::string_view source, std::string_view display_name,
                                            const std::filesystem::path& base_dir,
                                            const CompileOptions& options = {});
Result<std::vector<uint8_t>> compile_file(const std::filesystem::path& path,
                                          const CompileOptions& options = {});

// Compiles the .hxir file `path` into `out`. Constant bytes go from their
// .npy files to the output a chunk at a time, so a model's weights are never
// held in memory (unless the data section is compressed: then once). Writes
// OUT.tmp and renames it, so a failed compile leaves no half file.
Result<CompiledFile> compile_file_to(const std::filesystem::path& path, const std::filesystem::path& out,
                                     const CompileOptions& options = {});

Status write_binary_file(const std::filesystem::path& path, std::span<const uint8_t> bytes);

}  // namespace hexir::compiler
