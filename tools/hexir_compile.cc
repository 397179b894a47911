// hexir-compile IN.hxir -o OUT.hxe [--plan=naive|arena|free-at-last-use] [--align N] [--data-checksum]
//               [--schedule=source|memory] [--no-in-place]
//               [--compress=none|zstd[:LEVEL]] [--plan-budget-ms N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "hexir/format/prelude.h"
#include "hexir/format/verifier.h"
#include "hexir/serializer/compiler.h"
#include "hexir_generated.h"

namespace {

constexpr const char* kUsage =
    "usage: hexir-compile IN.hxir -o OUT.hxe [--plan=naive|arena|free-at-last-use] [--align N] "
    "[--data-checksum]\n"
    "       [--schedule=source|memory] [--no-in-place]\n"
    "       [--compress=none|zstd[:LEVEL]] [--plan-budget-ms N]\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "hexir-compile: %s\n%s", message.c_str(), kUsage);
  return 2;
}

bool parse_alignment(std::string_view text, uint32_t* out) {
  if (text.empty() || text.size() > 9) return false;
  uint32_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  *out = value;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  hexir::serializer::CompileOptions options;
  std::string input, output;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "-o") {
      if (++i >= argc) return usage_error("-o needs a file name");
      output = argv[i];
    } else if (arg == "--plan=naive") {
      options.plan = hexir::serializer::PlanStrategy::kNaive;
    } else if (arg == "--plan=arena") {
      options.plan = hexir::serializer::PlanStrategy::kArena;
    } else if (arg == "--plan=free-at-last-use") {
      options.plan = hexir::serializer::PlanStrategy::kFreeAtLastUse;
    } else if (arg.starts_with("--plan=")) {
      return usage_error("unknown plan '" + std::string(arg.substr(7)) +
                         "' (expected naive, arena or free-at-last-use)");
    } else if (arg == "--schedule=source") {
      options.schedule = hexir::serializer::Schedule::kSource;
    } else if (arg == "--schedule=memory") {
      options.schedule = hexir::serializer::Schedule::kMemory;
    } else if (arg.starts_with("--schedule")) {
      return usage_error("unknown schedule '" + std::string(arg) + "' (expected --schedule=source|memory)");
    } else if (arg == "--no-in-place") {
      options.in_place = false;
    } else if (arg == "--align" || arg.starts_with("--align=")) {
      std::string_view value;
      if (arg == "--align") {
        if (++i >= argc) return usage_error("--align needs a number");
        value = argv[i];
      } else {
        value = arg.substr(8);
      }
      if (!parse_alignment(value, &options.alignment))
        return usage_error("--align expects a number, got '" + std::string(value) + "'");
    } else if (arg == "--plan-budget-ms" || arg.starts_with("--plan-budget-ms=")) {
      std::string_view value;
      if (arg == "--plan-budget-ms") {
        if (++i >= argc) return usage_error("--plan-budget-ms needs a number");
        value = argv[i];
      } else {
        value = arg.substr(17);
      }
      uint32_t budget = 0;
      if (!parse_alignment(value, &budget))
        return usage_error("--plan-budget-ms expects a number, got '" + std::string(value) + "'");
      options.plan_budget_ms = budget;
    } else if (arg == "--data-checksum") {
      options.data_checksum = true;
    } else if (arg == "--compress=none") {
      options.compression = hexir::serializer::SectionCompression::kNone;
    } else if (arg == "--compress=zstd" || arg.starts_with("--compress=zstd:")) {
      options.compression = hexir::serializer::SectionCompression::kZstd;
      uint32_t level = 3;
      if (arg != "--compress=zstd" && (!parse_alignment(arg.substr(16), &level) || level < 1 || level > 22))
        return usage_error("--compress=zstd:LEVEL expects a level 1..22, got '" +
                           std::string(arg.substr(16)) + "'");
      options.compression_level = static_cast<int>(level);
    } else if (arg.starts_with("--compress")) {
      return usage_error("unknown compression '" + std::string(arg) +
                         "' (expected --compress=none|zstd[:LEVEL])");
    } else if (arg.starts_with("-")) {
      return usage_error("unknown option '" + std::string(arg) + "'");
    } else if (input.empty()) {
      input = arg;
    } else {
      return usage_error("more than one input file");
    }
  }
  if (input.empty()) return usage_error("no input file");
  if (output.empty()) return usage_error("no output file (-o OUT.hxe)");

  auto bytes = hexir::serializer::compile_file(input, options);
  if (!bytes.ok()) {
    std::fprintf(stderr, "hexir-compile: %s\n", bytes.status().message().c_str());
    return 1;
  }
  if (auto status = hexir::serializer::write_binary_file(output, *bytes); !status.ok()) {
    std::fprintf(stderr, "hexir-compile: %s\n", status.message().c_str());
    return 1;
  }

  // Summary read back from the metadata just written.
  const auto* module = hexir::fb::GetModule(bytes->data() + sizeof(hexir::format::Prelude));
  uint64_t constant_bytes = 0;
  size_t constant_count = module->constants() ? module->constants()->size() : 0;
  if (module->constants())
    for (const auto* c : *module->constants()) constant_bytes += c->byte_size();
  const auto* arena = module->arena();
  std::printf("%s: %zu bytes; arena %llu bytes (%s), lower bound %llu; %zu constants, %llu bytes\n",
              output.c_str(), bytes->size(), static_cast<unsigned long long>(arena ? arena->size() : 0),
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
