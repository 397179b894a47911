// tools/cli.h, the argument helper every tool's main uses: both value forms,
// integers and choices with clear errors, one input file, --help, exit codes.
#include "cli.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

namespace hexir::cli {
namespace {

// argv for Args, from a list (argv[0] is the tool).
struct Argv {
  std::vector<std::string> strings;
  std::vector<char*> pointers;
  explicit Argv(std::initializer_list<const char*> args) : strings{"tool"} {
    strings.insert(strings.end(), args.begin(), args.end());
    for (std::string& s : strings) pointers.push_back(s.data());
  }
  int argc() { return static_cast<int>(pointers.size()); }
  char** argv() { return pointers.data(); }
};

struct Parsed {
  std::optional<int> rc;
  std::string input, out;
  uint32_t align = 64;
  uint64_t count = 1, runs = 1;
  size_t mode = 0;
  bool quiet = false;
};

Parsed parse(std::initializer_list<const char*> list) {
  Argv a(list);
  Parsed p;
  Args args("tool", "usage: tool IN\n", a.argc(), a.argv());
  while (args.next()) {
    if (args.flag("--quiet")) {
      p.quiet = true;
    } else if (!args.value("-o", &p.out) && !args.number("--align", &p.align) &&
               !args.number("--count", &p.count, uint64_t{1}, uint64_t{10}) &&
               !args.number("--runs", &p.runs, uint64_t{1}) &&
               !args.choice("--mode", {"fast", "small", "exact"}, &p.mode)) {
      args.input(&p.input);
    }
  }
  p.rc = args.stop();
  return p;
}

// What `fn` prints on stderr.
template <typename F>
std::string stderr_of(F&& fn) {
  std::fflush(stderr);
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture);
  const int saved = dup(2);
  dup2(fileno(capture), 2);
  fn();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::rewind(capture);
  std::string text;
  char buffer[512];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, capture)) > 0;) text.append(buffer, n);
  std::fclose(capture);
  return text;
}

TEST_CASE("cli: parse_uint") {
  CHECK(parse_uint("0") == 0u);
  CHECK(parse_uint("18446744073709551615") == UINT64_MAX);
  CHECK_FALSE(parse_uint("18446744073709551616"));
  CHECK_FALSE(parse_uint(""));
  CHECK_FALSE(parse_uint("-1"));
  CHECK_FALSE(parse_uint("+1"));
  CHECK_FALSE(parse_uint(" 1"));
  CHECK_FALSE(parse_uint("1x"));
  CHECK(parse_uint("22", 22) == 22u);
  CHECK_FALSE(parse_uint("23", 22));
}

TEST_CASE("cli: --name value and --name=value, flags, choices, the input file") {
  Parsed p = parse({"in.txt", "-o", "out.bin", "--align=128", "--count", "3", "--mode=exact", "--quiet"});
  CHECK_FALSE(p.rc);
  CHECK(p.input == "in.txt");
  CHECK(p.out == "out.bin");
  CHECK(p.align == 128);
  CHECK(p.count == 3);
  CHECK(p.mode == 2);
  CHECK(p.quiet);
  p = parse({"--align", "256", "--mode", "small", "-"});
  CHECK_FALSE(p.rc);
  CHECK(p.align == 256);
  CHECK(p.mode == 1);
  CHECK(p.input == "-");
}

TEST_CASE("cli: usage errors exit 2, --help exits 0") {
  std::optional<int> help;
  CHECK(stderr_of([&] { help = parse({"--help"}).rc; }).empty());  // usage goes to stdout
  CHECK(help == kExitOk);
  CHECK(parse({"in", "-h", "--bogus"}).rc == kExitOk);  // help wins; nothing after it is read
  for (auto args : {std::initializer_list<const char*>{"in", "--bogus"},
                    {"a", "b"},
                    {"in", "-o"},
                    {"in", "--align="},
                    {"in", "--align", "x"},
                    {"in", "--align", "4294967296"},
                    {"in", "--count", "0"},
                    {"in", "--count=11"},
                    {"in", "--mode", "slow"},
                    {"in", "--quiet=1"}}) {
    INFO(*(args.begin() + 1));
    std::optional<int> rc;
    CHECK_FALSE(stderr_of([&] { rc = parse(args).rc; }).empty());
    CHECK(rc == kExitUsage);
  }
  // A prefix of an option is not that option.
  std::optional<int> rc;
  CHECK(stderr_of([&] {
          rc = parse({"in", "--align-x=3"}).rc;
        }).starts_with("tool: unknown option '--align-x=3'"));
  CHECK(rc == kExitUsage);
}

TEST_CASE("cli: error messages say what was expected") {
  Argv a({"--count", "0", "in"});
  Args args("tool", "usage: tool IN\n", a.argc(), a.argv());
  uint64_t count = 0;
  std::string input;
  const std::string text = stderr_of([&] {
    while (args.next())
      if (!args.number("--count", &count, uint64_t{1}, uint64_t{10})) args.input(&input);
  });
  CHECK(args.stop() == kExitUsage);
  CHECK(text == "tool: --count expects an integer from 1 to 10, got '0'\nusage: tool IN\n");
  CHECK(input.empty());  // nothing is read after an error
  CHECK(count == 0);

  auto message = [](std::initializer_list<const char*> list) { return stderr_of([&] { parse(list); }); };
  CHECK(message({"in", "--align", "-3"})
            .starts_with("tool: --align expects a non-negative integer, got '-3'\n"));
  CHECK(
      message({"in", "--align", "4294967296"})
          .starts_with("tool: --align expects a non-negative integer up to 4294967295, got '4294967296'\n"));
  CHECK(message({"in", "--mode", "slow"})
            .starts_with("tool: --mode expects fast, small or exact, got 'slow'\n"));
  CHECK(message({"in", "-o"}).starts_with("tool: -o needs a value\n"));
  CHECK(message({"in", "--count=0"}).starts_with("tool: --count expects an integer from 1 to 10, got '0'\n"));
  CHECK(message({"in", "--runs=0"}).starts_with("tool: --runs expects a positive integer, got '0'\n"));
  CHECK(message({"in", "-x"}).starts_with("tool: unknown option '-x'\n"));
  CHECK(message({"a", "b"}).starts_with("tool: more than one input file ('a' and 'b')\n"));
  CHECK(message({"in"}).empty());
}

TEST_CASE("cli: write_file and json_string") {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("hexir-cli-w-" + std::to_string(getpid()))).string();
  REQUIRE(write_file(path, std::string("a\0b", 3)).ok());
  std::stringstream text;
  text << std::ifstream(path, std::ios::binary).rdbuf();
  CHECK(text.str() == std::string("a\0b", 3));
  std::filesystem::remove(path);
  Status bad = write_file("/nonexistent/dir/x.svg", "x");
  CHECK(bad.message() == "cannot write '/nonexistent/dir/x.svg': No such file or directory");
  CHECK(json_string("a\"b\\c\n\x01\xc3\xa9") == "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\"");
}

TEST_CASE("cli: Args over a list prints nothing and keeps the usage error") {
  std::optional<int> rc;
  std::string error;
  CHECK(stderr_of([&] {
          Args args("tool", {"--align", "x"});
          uint32_t align = 0;
          std::string input;
          while (args.next())
            if (!args.number("--align", &align)) args.input(&input);
          rc = args.stop();
          error = args.error();
        }).empty());
  CHECK(rc == kExitUsage);
  CHECK(error == "--align expects a non-negative integer, got 'x'");
  // --help is no option there: the caller has no usage to print.
  Args help("tool", {"--help"});
  std::string input;
  while (help.next()) help.input(&input);
  CHECK(help.stop() == kExitUsage);
  CHECK(help.error() == "unknown option '--help'");
}

TEST_CASE("cli: output_file_name escapes what is not a plain file name") {
  CHECK(output_file_name("p", 0) == "p.npy");
  CHECK(output_file_name("logits.0_x-y", 0) == "logits.0_x-y.npy");
  CHECK(output_file_name("logits:0", 0) == "logits%3A0.npy");
  CHECK(output_file_name("../x", 0) == "%2E.%2Fx.npy");  // never out of the folder
  CHECK(output_file_name(".", 0) == "%2E.npy");
  CHECK(output_file_name(".hidden", 0) == "%2Ehidden.npy");
  CHECK(output_file_name("a b%", 0) == "a%20b%25.npy");  // '%' itself too: the escaping is reversible
  CHECK(output_file_name("\xc3\xa9", 0) == "%C3%A9.npy");  // UTF-8 byte by byte
  CHECK(output_file_name(std::string("a\0b", 3), 0) == "a%00b.npy");
  CHECK(output_file_name("", 3) == "3.npy");
}

}  // namespace
}  // namespace hexir::cli
