// hexir-compile IN.hxir -o OUT.hxe [--plan=naive|arena|free-at-last-use] [--align N] [--data-checksum]
//               [--schedule=source|memory] [--no-in-place] [--no-fuse] [--no-views]
//               [--compress=none|zstd[:LEVEL]] [--plan-budget-ms N] [--allow-external-files]
//               [--max-constant-bytes N] [--max-instructions N] [--memory-budget device=BYTES]
//               [--memory-budget host=BYTES] [--weights=f32|int8|int4[:group=G]] [--weights-for PATTERN=FORMAT]
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

#include "compile_command.h"
#include "hexir/format/prelude.h"
#include "hexir/format/verifier.h"
#include "hexir_generated.h"

static int run(int argc, char** argv) {
  namespace cli = hexir::cli;
  namespace compiler = hexir::compiler;
  cli::Args args("hexir-compile", cli::kCompileUsage, argc, argv);
  cli::CompileCommand command;
  cli::parse_compile_command(args, command);
  if (std::optional<int> rc = args.stop()) return *rc;
  const compiler::CompileOptions& options = command.options;
  hexir::Result<compiler::CompiledFile> compiled = cli::run_compile_command(command);
  if (!compiled.ok()) return args.fail(compiled.status().message());
  if (command.output.empty()) return 0;
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
              command.output.c_str(), static_cast<size_t>(compiled->size),
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
    return hexir::cli::kExitFailure;
  }
}
