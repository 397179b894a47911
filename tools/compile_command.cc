#include "compile_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "hexir/base/file_io.h"
#include "hexir/compiler/hxir.h"

namespace hexir::cli {

const char* const kCompileUsage =
    "usage: hexir-compile IN.hxir -o OUT.hxe [--plan=naive|arena|free-at-last-use] [--align N] "
    "[--data-checksum]\n"
    "       [--schedule=source|memory] [--no-in-place] [--no-fuse] [--no-views]\n"
    "       [--channels-last|--no-channels-last] [--winograd|--no-winograd]\n"
    "       [--compress=none|zstd[:LEVEL]] [--plan-budget-ms N] [--allow-external-files] "
    "\n"
    "       [--max-constant-bytes N] [--max-instructions N] [--memory-budget device=BYTES]\n"
    "       [--memory-budget host=BYTES] [--weights=f32|int8|int4[:group=G]] [--weights-for PATTERN=FORMAT ...]\n"
    "       hexir-compile MODEL.onnx -o OUT.hxe [--input-shape NAME=AxBxC ...] [--bind NAME=VALUE ...]\n"
    "       [--dim-bound NAME=N ...]\n"
    "       (either input) [--emit-hxir OUT.hxir|-]: also print the graph as .hxir text\n"
    "       (either input) [--donate INPUT=OUTPUT ...]: the caller's INPUT buffer is written as OUTPUT\n"
    "       (either input, or none) [--function NAME=MODEL.onnx[,INPUT=SHAPE...] ...]: one more function\n"
    "  --align N               arena offset alignment, a power of two from 1 to 4096 (default 64),\n"
    "                          at least the element size of every value in the arena\n"
    "  --donate IN=OUT         donate input IN to output OUT (names, or one '*' on each side matching the\n"
    "                          same text: 'past.*=present.*'); the output is computed in the input's buffer\n"
    "                          (a KV cache updated in place), or compiling fails saying why\n"
    "  --function NAME=MODEL.onnx[,INPUT=AxB...]  import MODEL as function NAME at the input shapes given\n"
    "                          (several ONNX files, or one at several shapes, in one executable; identical\n"
    "                          weights stored once; the input's --input-shape/--bind do not apply to it)\n"
    "  --weights int8          store matmul weights int8 per output channel (quantized_matmul reads them,\n"
    "                          dequantized in registers); prints each weight's bytes and largest error\n"
    "  --weights int4[:group=G]  matmul weights 4-bit with an f16 scale per G weights of a row (default 32,\n"
    "                          a multiple of 32; int4_matmul reads them)\n"
    "  --weights-for PATTERN=FORMAT  weights whose constant name matches PATTERN ('*' any text) stored as\n"
    "                          FORMAT (f32, int8, int4[:group=G]) instead; the last match wins\n"
    "  --dim-bound NAME=N      plan the data-dependent dim of NonZero/NonMaxSuppression/Compress output\n"
    "                          NAME at N rows (below its derived bound); more at run time fail the invoke\n"
    "  --allow-external-files  .hxir `file` constants may name files outside the source's folder\n"
    "  --max-constant-bytes N  bytes of dense and file constants, each and together (default 16 GiB)\n"
    "  --max-instructions N    instructions of the module with every call inlined, all functions\n"
    "                          together (default 1048576, at most 2^30)\n"
    "  --no-views              transpose, slice and expand copy their results (no strided views)\n"
    "  --fuse, --in-place, --views  the defaults that --no-fuse, --no-in-place and --no-views turn off\n"
    "  --channels-last         dense convolutions larger than 1x1, and what lies between them, in NHWC;\n"
    "                          conversions at the region edges (docs/layout.md); --no-channels-last: NCHW\n"
    "  --winograd              channels-last 3x3s at stride 1 (32-256 channels, maps of 100+ pixels) by\n"
    "                          Winograd's F(4x4, 3x3) (maps of 400+ pixels) or F(2x2, 3x3) (docs/layout.md);\n"
    "                          --no-winograd: the direct window\n"
    "  --memory-budget device=BYTES  fit a context's device memory (arena and scratch) in BYTES\n"
    "                          (KiB/MiB/GiB suffixes) by recomputing values and offloading them to host\n"
    "                          memory, or fail saying how close it got\n"
    "  --memory-budget host=BYTES  cap the host arena that offloaded values take\n";

namespace {

// The graph of an .onnx model (with its options) or of .hxir text.
Result<compiler::Module> load_graph(const std::string& input, bool onnx,
                                    const compiler::OnnxImportOptions& import,
                                    const compiler::CompileOptions& options) {
  if (onnx) return compiler::import_onnx(input, import);
  // A regular file only, read without blocking and no larger than the limit (hexir/base/file_io.h).
  constexpr uint64_t kMaxSourceBytes = uint64_t{2} << 30;
  HEXIR_ASSIGN_OR_RETURN(std::string text, read_file_limited(input, kMaxSourceBytes, ".hxir source limit"));
  return compiler::parse_hxir(text, input, std::filesystem::path(input).parent_path(),
                              compiler::parse_options_for(options));
}

}  // namespace

bool CompileCommand::onnx() const { return std::filesystem::path(input).extension() == ".onnx"; }

void parse_compile_command(Args& args, CompileCommand& command) {
  compiler::CompileOptions& options = command.options;
  std::string compress, option;
  std::vector<std::string> input_shapes, binds, budgets, dim_bounds, donations, functions;
  size_t plan = 1, schedule = 0;
  while (args.next()) {
    if (args.value("--input-shape", &option)) {
      input_shapes.push_back(option);
      continue;
    }
    if (args.value("--bind", &option)) {
      binds.push_back(option);
      continue;
    }
    if (args.value("--function", &option)) {
      functions.push_back(option);
      continue;
    }
    if (args.value("--weights", &option)) {
      if (Status s = compiler::parse_weight_format(option, options.weights); !s.ok())
        return (void)args.usage_error(s.message());
      continue;
    }
    if (args.value("--weights-for", &option)) {
      if (Status s = compiler::parse_weight_override(option, options); !s.ok())
        return (void)args.usage_error(s.message());
      continue;
    }
    if (args.value("--donate", &option)) {
      donations.push_back(option);
      continue;
    }
    if (args.value("--dim-bound", &option)) {
      dim_bounds.push_back(option);
      continue;
    }
    if (args.value("--emit-hxir", &command.emit_hxir)) continue;
    if (args.value("--memory-budget", &option)) {
      budgets.push_back(option);
      continue;
    }
    if (args.value("-o", &command.output) ||
        args.choice("--plan", {"naive", "arena", "free-at-last-use"}, &plan) ||
        args.choice("--schedule", {"source", "memory"}, &schedule) ||
        args.number("--align", &options.alignment) ||
        args.number("--plan-budget-ms", &options.plan_budget_ms) || args.value("--compress", &compress) ||
        args.number("--max-constant-bytes", &options.max_constant_bytes) ||
        args.number("--max-instructions", &options.max_instructions, uint64_t{1},
                    compiler::kMaxInstructionsLimit))
      continue;
    // --in-place, --fuse and --views are the defaults, named so that every flag can be said both ways.
    if (args.flag("--no-in-place") || args.flag("--in-place"))
      options.in_place = args.arg() == "--in-place";
    else if (args.flag("--no-fuse") || args.flag("--fuse"))
      options.fuse_epilogues = args.arg() == "--fuse";
    else if (args.flag("--no-views") || args.flag("--views"))
      options.strided_views = args.arg() == "--views";
    else if (args.flag("--channels-last"))
      options.channels_last = true;
    else if (args.flag("--no-channels-last"))
      options.channels_last = false;
    else if (args.flag("--winograd") || args.flag("--no-winograd"))
      options.winograd = args.arg() == "--winograd";
    else if (args.flag("--data-checksum"))
      options.data_checksum = true;
    else if (args.flag("--allow-external-files"))
      options.allow_external_files = true;
    else
      args.input(&command.input);
  }
  if (args.stop()) return;
  if (command.input.empty() && functions.empty()) return (void)args.usage_error("no input file");
  if (command.output.empty() && command.emit_hxir.empty())
    return (void)args.usage_error("no output file (-o OUT.hxe)");
  compiler::OnnxImportOptions& import = command.import;
  if (!command.input.empty() && !command.onnx() &&
      !(input_shapes.empty() && binds.empty() && dim_bounds.empty()))
    return (void)args.usage_error("--input-shape, --bind and --dim-bound apply to .onnx models");
  for (const std::string& text : input_shapes)
    if (Status s = compiler::parse_input_shape_option(text, import); !s.ok())
      return (void)args.usage_error(s.message());
  for (const std::string& text : binds)
    if (Status s = compiler::parse_bind_option(text, import); !s.ok())
      return (void)args.usage_error(s.message());
  for (const std::string& text : dim_bounds)
    if (Status s = compiler::parse_dim_bound_option(text, import); !s.ok())
      return (void)args.usage_error(s.message());
  for (const std::string& text : donations)
    if (Status s = compiler::parse_donation_option(text, options); !s.ok())
      return (void)args.usage_error(s.message());
  for (const std::string& text : budgets)
    if (Status s = compiler::parse_memory_budget(text, options); !s.ok())
      return (void)args.usage_error(s.message());
  constexpr compiler::PlanStrategy kPlans[] = {compiler::PlanStrategy::kNaive, compiler::PlanStrategy::kArena,
                                               compiler::PlanStrategy::kFreeAtLastUse};
  options.plan = kPlans[plan];
  options.schedule = schedule == 0 ? compiler::Schedule::kSource : compiler::Schedule::kMemory;
  if (compress == "zstd" || compress.starts_with("zstd:")) {
    options.compression = compiler::SectionCompression::kZstd;
    if (compress != "zstd") {
      const std::optional<uint64_t> level = parse_uint(compress.substr(5), 22);
      if (!level || *level < 1)
        return (void)args.usage_error("--compress=zstd:LEVEL expects a level 1..22, got '" +
                                      compress.substr(5) + "'");
      options.compression_level = static_cast<int>(*level);
    }
  } else if (!compress.empty() && compress != "none") {
    return (void)args.usage_error("--compress expects none, zstd or zstd:LEVEL, got '" + compress + "'");
  }
  // --function NAME=MODEL.onnx[,INPUT=SHAPE...]: more functions, each an imported model at its own shapes.
  for (const std::string& text : functions) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
      return (void)args.usage_error("--function '" + text + "': expected NAME=MODEL.onnx[,INPUT=SHAPE...]");
    compiler::OnnxImportOptions function_import;
    function_import.function_name = text.substr(0, eq);
    std::string path;
    for (size_t at = eq + 1; at <= text.size();) {
      const size_t comma = std::min(text.find(',', at), text.size());
      const std::string item = text.substr(at, comma - at);
      if (path.empty()) {
        path = item;
      } else if (Status s = compiler::parse_input_shape_option(item, function_import); !s.ok()) {
        return (void)args.usage_error("--function '" + text + "': " + s.message());
      }
      at = comma + 1;
    }
    if (std::filesystem::path(path).extension() != ".onnx")
      return (void)args.usage_error("--function '" + text +
                                    "': expected an .onnx model (an .hxir file holds its own functions)");
    command.functions.emplace_back(path, std::move(function_import));
  }
}

Result<compiler::CompiledFile> run_compile_command(const CompileCommand& command) {
  HEXIR_RETURN_IF_ERROR(compiler::check_compile_options(command.options));
  const std::string& input = command.input;
  if (!command.onnx() && command.emit_hxir.empty() && command.functions.empty())
    // Weights stream from their .npy files into the output; never all in memory.
    return compiler::compile_file_to(input, command.output, command.options);
  // An imported graph's weights stay in the model file (or its external data) until they are written.
  std::vector<compiler::Module> parts;
  if (!input.empty()) {
    HEXIR_ASSIGN_OR_RETURN(compiler::Module main_module,
                           load_graph(input, command.onnx(), command.import, command.options));
    parts.push_back(std::move(main_module));
  }
  for (const auto& [path, function_import] : command.functions) {
    HEXIR_ASSIGN_OR_RETURN(compiler::Module part, compiler::import_onnx(path, function_import));
    parts.push_back(std::move(part));
  }
  HEXIR_ASSIGN_OR_RETURN(compiler::Module module, parts.size() == 1
                                                      ? Result<compiler::Module>(std::move(parts.front()))
                                                      : compiler::merge_modules(std::move(parts)));
  if (!command.emit_hxir.empty()) {
    compiler::HxirPrintOptions print;
    if (command.emit_hxir != "-") {  // large constants as .npy files in OUT.data/ next to OUT.hxir
      const std::filesystem::path text_path(command.emit_hxir);
      print.data_ref = text_path.stem().string() + ".data";
      print.data_dir = text_path.parent_path() / print.data_ref;
    }
    HEXIR_ASSIGN_OR_RETURN(std::string text, compiler::print_hxir(module, print));
    if (command.emit_hxir == "-")
      std::fwrite(text.data(), 1, text.size(), stdout);
    else
      HEXIR_RETURN_IF_ERROR(write_file(command.emit_hxir, text));
  }
  if (command.output.empty()) return compiler::CompiledFile{};
  const std::string& display_name = input.empty() ? command.functions.front().first : input;
  return compiler::compile_module_to(module, command.output, command.options, display_name);
}

}  // namespace hexir::cli
