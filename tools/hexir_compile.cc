// hexir-compile IN.hxir -o OUT.hxe [--plan=naive|arena|free-at-last-use] [--align N] [--data-checksum]
//               [--schedule=source|memory] [--no-in-place]
//               [--compress=none|zstd[:LEVEL]] [--plan-budget-ms N]
#include <cstdio>
#include <optional>
#include <string>

#include "cli.h"
#include "hexir/format/prelude.h"
#include "hexir/format/verifier.h"
#include "hexir/serializer/compiler.h"
#include "hexir_generated.h"

namespace {

namespace cli = hexir::cli;

constexpr const char* kUsage =
    "usage: hexir-compile IN.hxir -o OUT.hxe [--plan=naive|arena|free-at-last-use] [--align N] "
    "[--data-checksum]\n"
    "       [--schedule=source|memory] [--no-in-place]\n"
    "       [--compress=none|zstd[:LEVEL]] [--plan-budget-ms N]\n";

}  // namespace

int main(int argc, char** argv) {
  namespace serializer = hexir::serializer;
  serializer::CompileOptions options;
  std::string input, output, compress;
  size_t plan = 1, schedule = 0;
  cli::Args args("hexir-compile", kUsage, argc, argv);
  while (args.next()) {
    if (args.value("-o", &output) || args.choice("--plan", {"naive", "arena", "free-at-last-use"}, &plan) ||
        args.choice("--schedule", {"source", "memory"}, &schedule) ||
        args.number("--align", &options.alignment) ||
        args.number("--plan-budget-ms", &options.plan_budget_ms) || args.value("--compress", &compress))
      continue;
    if (args.flag("--no-in-place"))
      options.in_place = false;
    else if (args.flag("--data-checksum"))
      options.data_checksum = true;
    else
      args.input(&input);
  }
  if (std::optional<int> rc = args.stop()) return *rc;
  if (input.empty()) return args.usage_error("no input file");
  if (output.empty()) return args.usage_error("no output file (-o OUT.hxe)");
  constexpr serializer::PlanStrategy kPlans[] = {serializer::PlanStrategy::kNaive,
                                                 serializer::PlanStrategy::kArena,
                                                 serializer::PlanStrategy::kFreeAtLastUse};
  options.plan = kPlans[plan];
  options.schedule = schedule == 0 ? serializer::Schedule::kSource : serializer::Schedule::kMemory;
  if (compress == "zstd" || compress.starts_with("zstd:")) {
    options.compression = serializer::SectionCompression::kZstd;
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

  // Weights stream from their .npy files into the output; never all in memory.
  auto compiled = hexir::serializer::compile_file_to(input, output, options);
  if (!compiled.ok()) return args.fail(compiled.status().message());

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
  if (module->sections())
    for (const auto* s : *module->sections())
      if (s->compression() == hexir::fb::Compression::Zstd)
        std::printf("  %s section: %llu bytes stored (zstd), %llu raw\n",
                    hexir::format::section_kind_name(s->kind()), static_cast<unsigned long long>(s->size()),
                    static_cast<unsigned long long>(s->raw_size()));
  return 0;
}
