// hexir/compile.h over hexir-compile's own command parsing (tools/compile_command.h).
#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "compile_command.h"
#include "hexir/compile.h"

namespace {

int finish(int code, const std::string& text, char* message, size_t message_size) {
  if (message != nullptr && message_size > 0) {
    const size_t n = std::min(text.size(), message_size - 1);
    std::memcpy(message, text.data(), n);
    message[n] = '\0';
  }
  return code;
}

int compile(const char* source, const char* output, const char* const* options, size_t option_count,
            char* message, size_t message_size) {
  namespace cli = hexir::cli;
  if (source == nullptr || output == nullptr || (options == nullptr && option_count > 0))
    return finish(static_cast<int>(hexir::StatusCode::kInvalidArgument),
                  "hexir_compile: source, output and options (when option_count > 0) must not be NULL",
                  message, message_size);
  // The output first, so that an option cannot be taken for it.
  std::vector<std::string> arguments = {"-o", output};
  for (size_t i = 0; i < option_count; ++i) {
    if (options[i] == nullptr)
      return finish(static_cast<int>(hexir::StatusCode::kInvalidArgument),
                    "hexir_compile: option " + std::to_string(i) + " is NULL", message, message_size);
    arguments.emplace_back(options[i]);
  }
  arguments.emplace_back(source);
  cli::Args args("hexir_compile", std::move(arguments));
  cli::CompileCommand command;
  cli::parse_compile_command(args, command);
  if (args.stop())
    return finish(static_cast<int>(hexir::StatusCode::kInvalidArgument), args.error(), message, message_size);
  hexir::Result<hexir::compiler::CompiledFile> compiled = cli::run_compile_command(command);
  if (!compiled.ok())
    return finish(static_cast<int>(compiled.status().code()), compiled.status().message(), message,
                  message_size);
  return finish(0, "", message, message_size);
}

}  // namespace

extern "C" {

uint32_t hexir_compile_abi_version(void) { return HEXIR_COMPILE_ABI_VERSION; }

int hexir_compile(const char* source, const char* output, const char* const* options, size_t option_count,
                  char* message, size_t message_size) {
  try {
    return compile(source, output, options, option_count, message, message_size);
  } catch (const std::bad_alloc&) {
    return finish(static_cast<int>(hexir::StatusCode::kResourceExhausted), "hexir_compile: out of memory",
                  message, message_size);
  } catch (...) {  // nothing crosses the C boundary
    return finish(static_cast<int>(hexir::StatusCode::kInternal), "hexir_compile: unexpected exception",
                  message, message_size);
  }
}

}  // extern "C"
