#include "hexir/serializer/compiler.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "parser.h"
#include "passes.h"
#include "writer.h"

namespace hexir::serializer {

Result<std::vector<uint8_t>> compile_source(std::string_view source, std::string_view display_name,
                                            const std::filesystem::path& base_dir,
                                            const CompileOptions& options) {
  if (options.alignment == 0 || (options.alignment & (options.alignment - 1)) != 0 ||
      options.alignment > 4096)
    return invalid_argument("arena alignment " + std::to_string(options.alignment) +
                            " must be a power of two between 1 and 4096");
  HEXIR_ASSIGN_OR_RETURN(Module module, parse_module(source, display_name, base_dir));

  detect_splats(module);
  dedupe_constants(module);
  pack_constants(module);

  WriteOptions write_options;
  write_options.strategy = options.plan;
  write_options.alignment = options.alignment;
  write_options.data_checksum = options.data_checksum;
  write_options.compression = options.compression;
  write_options.compression_level = options.compression_level;
  write_options.heuristic = options.plan == PlanStrategy::kNaive ? "naive" : "greedy-by-size";
  for (Function& fn : module.functions) {
    assign_storage(fn);
    HEXIR_RETURN_IF_ERROR(plan_function_arena(fn, options.plan, options.alignment, &write_options.heuristic)
                              .annotate(std::string(display_name)));
  }
  return write_module(module, write_options);
}

Result<std::vector<uint8_t>> compile_file(const std::filesystem::path& path, const CompileOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open '" + path.string() + "': " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return data_loss("error reading '" + path.string() + "'");
  return compile_source(text.str(), path.string(), path.parent_path(), options);
}

Status write_binary_file(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
  // Write next to the target and rename, so a failed write never leaves a half file behind.
  std::filesystem::path temp = path;
  temp += ".tmp";
  std::FILE* file = std::fopen(temp.string().c_str(), "wb");
  if (!file) return not_found("cannot create '" + temp.string() + "': " + std::strerror(errno));
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  ok = (std::fclose(file) == 0) && ok;
  if (!ok) {
    std::remove(temp.string().c_str());
    return data_loss("error writing '" + temp.string() + "'");
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::remove(temp.string().c_str());
    return data_loss("cannot rename '" + temp.string() + "' to '" + path.string() + "': " + ec.message());
  }
  return ok_status();
}

}  // namespace hexir::serializer
