// What every tool's main shares: one pass over the arguments (flags as
// `--name value` or `--name=value`, integers with clear errors, one input
// file), the exit codes, usage text, writing files, and JSON (json.h).
//
//   cli::Args args("hexir-plan", kUsage, argc, argv);
//   while (args.next()) {
//     if (args.value("--svg", &svg)) continue;
//     if (args.number("--budget-ms", &budget_ms)) continue;
//     args.input(&input);  // the input file, or "unknown option '-x'"
//   }
//   if (std::optional<int> rc = args.stop()) return *rc;  // --help or a usage error
//   if (input.empty()) return args.usage_error("no input file");
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hexir/base/status.h"
#include "json.h"  // json_string, JsonWriter

namespace hexir::cli {

constexpr int kExitOk = 0;       // done (also -h/--help)
constexpr int kExitFailure = 1;  // the work failed: a bad file, a failed run
constexpr int kExitUsage = 2;    // the command line is wrong

// A decimal integer: digits only (no sign, no spaces), at most `max`.
std::optional<uint64_t> parse_uint(std::string_view text, uint64_t max = UINT64_MAX);

// Usage lines of Args::load_limit's flags (defaults: format::LoadLimits).
inline constexpr const char* kLoadLimitsUsage =
    "  --max-decompressed-bytes N  raw bytes of the zstd sections, decompressed at load (default 256 MiB)\n"
    "  --max-fill-bytes N    bytes of the fill constants together, made at prepare (default 256 MiB)\n"
    "  --max-arena-bytes N   arena, workspace and host arena of a context (default 16 GiB)\n";

class Args {
 public:
  // `tool` starts every message ("hexir-plan: ..."); `usage` (ending in a
  // newline) follows usage errors on stderr and answers -h/--help on stdout.
  Args(std::string tool, std::string usage, int argc, char** argv);
  // The same over `args` (no program name) for a library that parses a
  // tool's command line (compile_command.h): nothing is printed, a usage
  // error is kept for error(), and -h/--help is an unknown option.
  Args(std::string tool, std::vector<std::string> args);

  // Moves to the next argument. False at the end, after -h/--help (usage
  // printed) and after a usage error.
  bool next();
  std::string_view arg() const { return arg_; }

  // Matchers of the current argument: each returns true when it is that
  // option (consumed, with its value), also when its value is wrong (then
  // the error is printed and next() returns false).
  bool flag(std::string_view name);  // --name, no value
  // --name V or --name=V; a missing or empty V is an error.
  bool value(std::string_view name, std::string* out);
  // --name N: an integer in [min, max].
  template <std::unsigned_integral T>
  bool number(std::string_view name, T* out, T min = 0, T max = std::numeric_limits<T>::max()) {
    uint64_t v = 0;
    if (!number_u64(name, &v, min, max, max == std::numeric_limits<T>::max())) return false;
    if (!failed()) *out = static_cast<T>(v);
    return true;
  }
  // The VM's load limits as flags, the same in every tool that reads an
  // executable (kLoadLimitsUsage): --max-decompressed-bytes N,
  // --max-fill-bytes N, --max-arena-bytes N into the fields of that name of
  // `limits` (vm::LoadOptions, format::LoadLimits).
  template <typename Limits>
  bool load_limit(Limits* limits) {
    return number("--max-decompressed-bytes", &limits->max_decompressed_bytes) ||
           number("--max-fill-bytes", &limits->max_fill_bytes) ||
           number("--max-arena-bytes", &limits->max_arena_bytes);
  }
  // --name C with C one of `choices`: *out is its index.
  bool choice(std::string_view name, std::initializer_list<std::string_view> choices, size_t* out);
  // Any other argument: the input file ("-" included), or an error (an
  // unknown option, a second input file).
  void input(std::string* path);

  // After the loop: the exit code to return now (kExitOk after --help,
  // kExitUsage after a usage error), or nothing when the tool goes on.
  std::optional<int> stop() const;
  // The last usage error's message ("--align expects ..."); empty when none.
  const std::string& error() const { return error_; }

  // Prints "tool: message" and the usage to stderr and ends the loop;
  // returns kExitUsage.
  int usage_error(const std::string& message);
  // Prints "tool: message" to stderr; returns kExitFailure.
  int fail(const std::string& message) const;

 private:
  enum class State { kGoing, kHelp, kError };
  bool failed() const { return state_ == State::kError; }
  // The value of option `name` when the current argument is it: nullopt when
  // it is not; an empty string after a usage error (missing value).
  std::optional<std::string> take(std::string_view name);
  bool number_u64(std::string_view name, uint64_t* out, uint64_t min, uint64_t max, bool unbounded);

  std::string tool_, usage_;
  std::vector<std::string> args_;  // argv[1..]
  size_t next_ = 0;
  std::string arg_;
  State state_ = State::kGoing;
  bool quiet_ = false;
  std::string error_;
};

// The file hexir-run writes an output named `name` to: NAME.npy, with every
// byte outside [A-Za-z0-9._-] and a leading '.' written as %XX (two
// uppercase hex digits), so any name is one plain file in the folder
// ("logits:0" -> "logits%3A0.npy", "../x" -> "%2E.%2Fx.npy"); an empty name
// is the output's index ("2.npy").
std::string output_file_name(std::string_view name, size_t index);

// Writes `bytes` to `path` the careful way of hexir/base/file_io.h: a new
// temporary beside it (never a planted link) renamed over it, or the bytes
// written through to a device or FIFO (never replaced). The error names the
// path and the reason: "cannot write 'x.svg': No such file or directory".
Status write_file(const std::string& path, std::string_view bytes);

}  // namespace hexir::cli
