// hexir-compile IN.hxir -o OUT.hxe [--plan=naive|arena|free-at-last-use] [--align N] [--data-checksum]
//               [--schedule=source|memory] [--no-in-place] [--no-fuse] [--no-views]
//               [--compress=none|zstd[:LEVEL]] [--plan-budget-ms N] [--allow-external-files]
//               [--max-constant-bytes N] [--max-instructions N] [--memory-budget device=BYTES]
//               [--memory-budget host=BYTES]
// hexir-compile MODEL.onnx -o OUT.hxe [--input-shape NAME=AxBxC ...] [--bind NAME=VALUE ...]
//               [--emit-hxir OUT.hxir|-]   (docs/onnx.md)
// either input: [--donate INPUT=OUTPUT ...] [--function NAME=MODEL.onnx[,INPUT=SHAPE...] ...]
#include <cstdio>
#include <algorithm>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "hexir/base/file_io.h"
#include "hexir/compiler/compiler.h"
#include "hexir/compiler/hxir.h"
#include "hexir/compiler/onnx.h"
#include "hexir/format/prelude.h"
#include "hexir/format/verifier.h"
#include "hexir_generated.h"

namespace {

namespace cli = hexir::cli;

constexpr const char* kUsage =
    "usage: hexir-compile IN.hxir -o OUT.hxe [--plan=naive|arena|free-at-last-use] [--align N] "
    "[--data-checksum]\n"
    "       [--schedule=source|memory] [--no-in-place] [--no-fuse] [--no-views]\n"
    "       [--channels-last|--no-channels-last]\n"
    "       [--compress=none|zstd[:LEVEL]] [--plan-budget-ms N] [--allow-external-files]\n"
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
    "                          a multiple of 32; int4_matmul reads them); embeddings stored int8\n"
    "  --weights-for PATTERN=FORMAT  weights whose constant name matches PATTERN ('*' any text) stored as\n"
    "                          FORMAT (f32, int8, int4[:group=G]) instead; the last match wins\n"
    "  --dim-bound NAME=N      plan the data-dependent dim of NonZero/NonMaxSuppression/Compress output\n"
    "                          NAME at N rows (below its derived bound); more at run time fail the invoke\n"
    "  --allow-external-files  .hxir `file` constants may name files outside the source's folder\n"
    "  --max-constant-bytes N  bytes of dense and file constants, each and together (default 16 GiB)\n"
    "  --max-instructions N    instructions of the module with every call inlined, all functions\n"
    "                          together (default 1048576, at most 2^30)\n"
    "  --no-views              transpose, slice and expand copy their results (no strided views)\n"
    "  --channels-last         dense convolutions larger than 1x1, and what lies between them, in NHWC;\n"
    "                          conversions at the region edges (docs/layout.md); --no-channels-last: NCHW\n"
    "  --memory-budget device=BYTES  fit a context's device memory (arena and scratch) in BYTES\n"
    "                          (KiB/MiB/GiB suffixes) by recomputing values and offloading them to host\n"
    "                          memory, or fail saying how close it got\n"
    "  --memory-budget host=BYTES  cap the host arena that offloaded values take\n";

// The graph of an .onnx model (with its options) or of .hxir text.
hexir::Result<hexir::compiler::Module> load_graph(const std::string& input, bool onnx,
                                                    const hexir::compiler::OnnxImportOptions& import,
                                                    const hexir::compiler::CompileOptions& options) {
  if (onnx) return hexir::compiler::import_onnx(input, import);
  // A regular file only, read without blocking and no larger than the limit (hexir/base/file_io.h).
  constexpr uint64_t kMaxSourceBytes = uint64_t{2} << 30;
  HEXIR_ASSIGN_OR_RETURN(std::string text,
                         hexir::read_file_limited(input, kMaxSourceBytes, ".hxir source limit"));
  return hexir::compiler::parse_hxir(text, input, std::filesystem::path(input).parent_path(),
                                         hexir::compiler::parse_options_for(options));
}

}  // namespace

static int run(int argc, char** argv) {
  namespace compiler = hexir::compiler;
  compiler::CompileOptions options;
  std::string input, output, compress, emit_hxir, option;
  std::vector<std::string> input_shapes, binds, budgets, dim_bounds, donations, functions;
  size_t plan = 1, schedule = 0;
  cli::Args args("hexir-compile", kUsage, argc, argv);
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
      if (hexir::Status st = compiler::parse_weight_format(option, options.weights); !st.ok())
        return args.usage_error(st.message());
      continue;
    }
    if (args.value("--weights-for", &option)) {
      if (hexir::Status st = compiler::parse_weight_override(option, options); !st.ok())
        return args.usage_error(st.message());
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
    if (args.value("--emit-hxir", &emit_hxir)) continue;
    if (args.value("--memory-budget", &option)) {
      budgets.push_back(option);
      continue;
    }
    if (args.value("-o", &output) || args.choice("--plan", {"naive", "arena", "free-at-last-use"}, &plan) ||
        args.choice("--schedule", {"source", "memory"}, &schedule) ||
        args.number("--align", &options.alignment) ||
        args.number("--plan-budget-ms", &options.plan_budget_ms) || args.value("--compress", &compress) ||
        args.number("--max-constant-bytes", &options.max_constant_bytes) ||
        args.number("--max-instructions", &options.max_instructions, uint64_t{1},
                    hexir::compiler::kMaxInstructionsLimit))
      continue;
    if (args.flag("--no-in-place"))
      options.in_place = false;
    else if (args.flag("--no-fuse"))
      options.fuse_epilogues = false;
    else if (args.flag("--no-views"))
      options.strided_views = false;
    else if (args.flag("--channels-last"))
      options.channels_last = true;
    else if (args.flag("--no-channels-last"))
      options.channels_last = false;
    else if (args.flag("--data-checksum"))
      options.data_checksum = true;
    else if (args.flag("--allow-external-files"))
      options.allow_external_files = true;
    else
      args.input(&input);
  }
  if (std::optional<int> rc = args.stop()) return *rc;
  if (input.empty() && functions.empty()) return args.usage_error("no input file");
  if (output.empty() && emit_hxir.empty()) return args.usage_error("no output file (-o OUT.hxe)");
  const bool onnx = std::filesystem::path(input).extension() == ".onnx";
  compiler::OnnxImportOptions import;
  if (!input.empty() && !onnx && !(input_shapes.empty() && binds.empty() && dim_bounds.empty()))
    return args.usage_error("--input-shape, --bind and --dim-bound apply to .onnx models");
  for (const std::string& text : input_shapes)
    if (hexir::Status s = compiler::parse_input_shape_option(text, import); !s.ok())
      return args.usage_error(s.message());
  for (const std::string& text : binds)
    if (hexir::Status s = compiler::parse_bind_option(text, import); !s.ok()) return args.usage_error(s.message());
  for (const std::string& text : dim_bounds)
    if (hexir::Status s = compiler::parse_dim_bound_option(text, import); !s.ok())
      return args.usage_error(s.message());
  for (const std::string& text : donations)
    if (hexir::Status s = compiler::parse_donation_option(text, options); !s.ok()) return args.usage_error(s.message());
  for (const std::string& text : budgets)
    if (hexir::Status s = compiler::parse_memory_budget(text, options); !s.ok()) return args.usage_error(s.message());
  constexpr compiler::PlanStrategy kPlans[] = {compiler::PlanStrategy::kNaive,
                                                 compiler::PlanStrategy::kArena,
                                                 compiler::PlanStrategy::kFreeAtLastUse};
  options.plan = kPlans[plan];
  options.schedule = schedule == 0 ? compiler::Schedule::kSource : compiler::Schedule::kMemory;
  if (compress == "zstd" || compress.starts_with("zstd:")) {
    options.compression = compiler::SectionCompression::kZstd;
    if (compress != "zstd") {
      const std::optional<uint64_t> level = cli::parse_uint(compress.substr(5), 22);
      if (!level || *level < 1)
        return args.usage_error("--compress=zstd:LEVEL expects a level 1..22, got '" + compress.substr(5) +
                                "'");
      options.compression_level = static_cast<int>(*level);
    }
  } else if (!compress.empty() && compress != "none") {
    return args.usage_error("--compress expects none, zstd or zstd:LEVEL, got '" + compress + "'");
  }

  if (hexir::Status s = compiler::check_compile_options(options); !s.ok()) return args.fail(s.message());
  hexir::Result<compiler::CompiledFile> compiled = hexir::invalid_argument("nothing compiled");
  // --function NAME=MODEL.onnx[,INPUT=SHAPE...]: more functions, each an imported model at its own shapes.
  std::vector<std::pair<std::string, compiler::OnnxImportOptions>> imports;
  for (const std::string& text : functions) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
      return args.usage_error("--function '" + text + "': expected NAME=MODEL.onnx[,INPUT=SHAPE...]");
    compiler::OnnxImportOptions function_import;
    function_import.function_name = text.substr(0, eq);
    std::string path;
    for (size_t at = eq + 1; at <= text.size();) {
      const size_t comma = std::min(text.find(',', at), text.size());
      const std::string item = text.substr(at, comma - at);
      if (path.empty()) {
        path = item;
      } else if (hexir::Status s = compiler::parse_input_shape_option(item, function_import); !s.ok()) {
        return args.usage_error("--function '" + text + "': " + s.message());
      }
      at = comma + 1;
    }
    if (std::filesystem::path(path).extension() != ".onnx")
      return args.usage_error("--function '" + text + "': expected an .onnx model (an .hxir file holds its own functions)");
    imports.emplace_back(path, std::move(function_import));
  }
  const std::string display_name = input.empty() ? imports.front().first : input;
  if (onnx || !emit_hxir.empty() || !imports.empty()) {
    // An imported graph's weights stay in the model file (or its external data) until they are written.
    std::vector<compiler::Module> parts;
    if (!input.empty()) {
      auto main_module = load_graph(input, onnx, import, options);
      if (!main_module.ok()) return args.fail(main_module.status().message());
      parts.push_back(std::move(main_module).value());
    }
    for (const auto& [path, function_import] : imports) {
      auto part = compiler::import_onnx(path, function_import);
      if (!part.ok()) return args.fail(part.status().message());
      parts.push_back(std::move(part).value());
    }
    auto module = parts.size() == 1 ? hexir::Result<compiler::Module>(std::move(parts.front()))
                                    : compiler::merge_modules(std::move(parts));
    if (!module.ok()) return args.fail(module.status().message());
    if (!emit_hxir.empty()) {
      compiler::HxirPrintOptions print;
      if (emit_hxir != "-") {  // large constants as .npy files in OUT.data/ next to OUT.hxir
        const std::filesystem::path text_path(emit_hxir);
        print.data_ref = text_path.stem().string() + ".data";
        print.data_dir = text_path.parent_path() / print.data_ref;
      }
      auto text = compiler::print_hxir(*module, print);
      if (!text.ok()) return args.fail(text.status().message());
      if (emit_hxir == "-")
        std::fwrite(text->data(), 1, text->size(), stdout);
      else if (hexir::Status s = cli::write_file(emit_hxir, *text); !s.ok())
        return args.fail(s.message());
    }
    if (output.empty()) return 0;
    compiled = compiler::compile_module_to(*module, output, options, display_name);
  } else {
    // Weights stream from their .npy files into the output; never all in memory.
    compiled = compiler::compile_file_to(input, output, options);
  }
  if (!compiled.ok()) return args.fail(compiled.status().message());
  if (!compiled->compressed.empty()) {
    uint64_t before = 0, after = 0;
    double worst = 0.0;
    for (const compiler::CompressedWeight& w : compiled->compressed) {
      std::printf("weight %s [%lld, %lld]: %llu -> %llu bytes (%s), largest error %.3g of its largest |w|\n",
                  w.name.c_str(), static_cast<long long>(w.rows), static_cast<long long>(w.columns),
                  static_cast<unsigned long long>(w.bytes_before), static_cast<unsigned long long>(w.bytes_after),
                  w.format.to_string().c_str(), w.max_relative_error);
      before += w.bytes_before;
      after += w.bytes_after;
      worst = std::max(worst, w.max_relative_error);
    }
    std::printf("weights: %zu stored smaller, %llu -> %llu bytes; largest error %.3g\n", compiled->compressed.size(),
                static_cast<unsigned long long>(before), static_cast<unsigned long long>(after), worst);
  }

  // Summary read back from the metadata just written.
  const auto* module = hexir::fb::GetModule(compiled->head.data() + sizeof(hexir::format::Prelude));
  uint64_t constant_bytes = 0;
  size_t constant_count = module->constants() ? module->constants()->size() : 0;
  if (module->constants())
    for (const auto* c : *module->constants()) constant_bytes += c->byte_size();
  const auto* arena = module->arena();
  std::printf("%s: %zu bytes; arena %llu bytes (%s), lower bound %llu; %zu constants, %llu bytes\n",
              output.c_str(), static_cast<size_t>(compiled->size),
              static_cast<unsigned long long>(arena ? arena->size() : 0),
              arena && arena->heuristic() ? arena->heuristic()->c_str() : "?",
              static_cast<unsigned long long>(arena ? arena->lower_bound() : 0), constant_count,
              static_cast<unsigned long long>(constant_bytes));
  if (options.device_budget) {
    uint64_t recomputed = 0, prefetched = 0, streamed = 0, streamed_bytes = 0;
    if (module->constants())
      for (const auto* c : *module->constants())
        if (c->storage() == hexir::fb::ConstantStorage::Rodata &&
            module->sections()->Get(c->section())->memory_space() == hexir::fb::MemorySpace::Host) {
          ++streamed;
          streamed_bytes += c->byte_size();
        }
    if (module->slots())
      for (const auto* s : *module->slots()) {
        recomputed += s->recomputes() >= 0 ? 1 : 0;
        prefetched += s->copy_of() >= 0 && s->memory_space() == hexir::fb::MemorySpace::Device ? 1 : 0;
      }
    std::printf("  memory budget device=%llu bytes: met, %llu instructions recomputed, %llu prefetches; "
                "host arena %llu bytes; %llu weights streamed from host memory (%llu bytes)\n",
                static_cast<unsigned long long>(*options.device_budget), static_cast<unsigned long long>(recomputed),
                static_cast<unsigned long long>(prefetched),
                static_cast<unsigned long long>(arena ? arena->host_size() : 0),
                static_cast<unsigned long long>(streamed), static_cast<unsigned long long>(streamed_bytes));
  }
  if (module->sections())
    for (const auto* s : *module->sections())
      if (s->compression() == hexir::fb::Compression::Zstd)
        std::printf("  %s section: %llu bytes stored (zstd), %llu raw\n",
                    hexir::format::section_kind_name(s->kind()), static_cast<unsigned long long>(s->size()),
                    static_cast<unsigned long long>(s->raw_size()));
  return 0;
}

int main(int argc, char** argv) {
  // Sizes are checked against limits where they are read; this is the last line of defence.
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fputs("hexir-compile: out of memory\n", stderr);
    return cli::kExitFailure;
  }
}
