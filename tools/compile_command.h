// hexir-compile's command line as a library: the tool and the C compile API
// (compiler/capi, hexir/compile.h) parse options with this one code, so an
// option added to the tool is there in C and Python too.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "hexir/compiler/compiler.h"
#include "hexir/compiler/onnx.h"

namespace hexir::cli {

extern const char* const kCompileUsage;

// What one hexir-compile command asks for.
struct CompileCommand {
  std::string input, output, emit_hxir;  // emit_hxir "-": stdout
  compiler::CompileOptions options;
  compiler::OnnxImportOptions import;  // the positional .onnx model's
  // --function NAME=MODEL.onnx[,INPUT=SHAPE...]: each model with its import options.
  std::vector<std::pair<std::string, compiler::OnnxImportOptions>> functions;
  bool onnx() const;
};

// Reads hexir-compile's arguments from `args` into `command`; a wrong one
// ends with args.usage_error (args.stop() is then set, args.error() says why).
void parse_compile_command(Args& args, CompileCommand& command);

// Imports or parses the input(s), writes --emit-hxir and compiles to the
// output (none when only --emit-hxir was asked: an empty CompiledFile).
Result<compiler::CompiledFile> run_compile_command(const CompileCommand& command);

}  // namespace hexir::cli
