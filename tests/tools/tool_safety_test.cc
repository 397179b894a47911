// Issue 9 (hardening), the tools as an attacker runs them: a FIFO or a device
// given as a file (hexir-dump, hexir-run and hexir-compile used to hang on a
// FIFO; /dev/zero as an .npy grew memory until killed), a valid executable
// with a 400 GB input (hexir-run died of std::bad_alloc), a planted symlink or
// a device as hexir-compile's output (it wrote OUT.tmp through the link and
// renamed over a FIFO), and names that broke --stats-json (a long name cut the
// document at 8 KB; quotes, backslashes and control characters).
//
// Every command runs under `timeout` and a memory limit, so a regression
// fails instead of hanging or exhausting the machine. HEXIR_TOOLS_DIR, when
// set, runs the same checks against other builds of the tools (e.g. the
// binaries before these fixes).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "hxe_test_builder.h"
#include "run_command.h"
#include "sanitizers.h"
#include "scratch_dir.h"

namespace fs = std::filesystem;

namespace {

using hexir::testing::CommandResult;
using hexir::testing::make_fifo;
using hexir::testing::read_all;
using hexir::testing::run_command;
using hexir::testing::ScratchDir;
using hexir::testing::write_all;

std::string tool(const char* built, const char* name) {
  const char* dir = std::getenv("HEXIR_TOOLS_DIR");
  return dir ? std::string(dir) + "/" + name : std::string(built);
}

const std::string kCompile = tool(HEXIR_COMPILE, "hexir-compile");
const std::string kDump = tool(HEXIR_DUMP, "hexir-dump");
const std::string kRun = tool(HEXIR_RUN, "hexir-run");
const std::string kPlan = tool(HEXIR_PLAN, "hexir-plan");
const std::string kSamples = HEXIR_SAMPLES_DIR;

// `command` with at most `seconds` of time and 2 GiB of address space;
// exit 124 means it hung, 128+N that it died of signal N (SIGABRT: 134).
// Under AddressSanitizer (scripts/test.sh's asan leg) the tools reserve
// terabytes of shadow address space at start, so an address-space limit would
// abort every one: only the time is bounded there (ASan reports an absurd
// allocation itself).
constexpr bool kAddressSanitizer = HEXIR_TEST_ASAN;

CommandResult run(const std::string& command, int seconds = 20) {
  const std::string bounded = std::string(kAddressSanitizer ? "" : "ulimit -v 2097152; ") +
                              "timeout -s KILL " + std::to_string(seconds) + " " + command;
  CommandResult result = run_command(bounded);
  if (result.exit_code == 137) result.exit_code = 124;  // killed by timeout -s KILL
  return result;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A strict RFC 8259 checker: one value, nothing after it, strings with
// escapes only from the grammar, no raw control characters, UTF-8 only.
class JsonChecker {
 public:
  explicit JsonChecker(const std::string& text) : s_(text) {}
  bool valid() {
    space();
    if (!value(0)) return false;
    space();
    return i_ == s_.size();
  }

 private:
  bool value(int depth) {
    if (depth > 256 || i_ >= s_.size()) return false;
    switch (s_[i_]) {
      case '{':
        return object(depth);
      case '[':
        return array(depth);
      case '"':
        return string();
      case 't':
        return word("true");
      case 'f':
        return word("false");
      case 'n':
        return word("null");
      default:
        return number();
    }
  }
  bool object(int depth) {
    ++i_;
    space();
    if (peek() == '}') return ++i_, true;
    while (true) {
      space();
      if (!string()) return false;
      space();
      if (peek() != ':') return false;
      ++i_;
      space();
      if (!value(depth + 1)) return false;
      space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() == '}') return ++i_, true;
      return false;
    }
  }
  bool array(int depth) {
    ++i_;
    space();
    if (peek() == ']') return ++i_, true;
    while (true) {
      space();
      if (!value(depth + 1)) return false;
      space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() == ']') return ++i_, true;
      return false;
    }
  }
  bool string() {
    if (peek() != '"') return false;
    ++i_;
    while (i_ < s_.size()) {
      const unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') return ++i_, true;
      if (c < 0x20) return false;
      if (c == '\\') {
        ++i_;
        if (i_ >= s_.size()) return false;
        const char e = s_[i_];
        if (e == 'u') {
          for (int k = 1; k <= 4; ++k)
            if (i_ + k >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_ + k]))) return false;
          i_ += 5;
          continue;
        }
        if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) return false;
        ++i_;
        continue;
      }
      if (c >= 0x80) {  // a well-formed UTF-8 sequence
        const int length = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
        if (length == 0 || c > 0xf4 || i_ + length > s_.size()) return false;
        for (int k = 1; k < length; ++k)
          if ((static_cast<unsigned char>(s_[i_ + k]) & 0xc0) != 0x80) return false;
        i_ += length;
        continue;
      }
      ++i_;
    }
    return false;
  }
  bool number() {
    const size_t start = i_;
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
    } else if (std::isdigit(static_cast<unsigned char>(peek()))) {
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++i_;
    } else {
      return false;
    }
    if (peek() == '.') {
      ++i_;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) return false;
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++i_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) return false;
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++i_;
    }
    return i_ > start;
  }
  bool word(std::string_view w) {
    if (s_.compare(i_, w.size(), w) != 0) return false;
    i_ += w.size();
    return true;
  }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }

  const std::string& s_;
  size_t i_ = 0;
};

bool valid_json(const std::string& text) { return JsonChecker(text).valid(); }

// A .hxir name in quotes: `"` and `\` escaped, other bytes as \xNN when not printable.
std::string quoted(const std::string& name) {
  std::string out = "\"";
  for (unsigned char c : name) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

TEST_CASE("tool safety: the JSON checker itself") {
  CHECK(valid_json(R"({"a":[1,-2.5,3e4,true,false,null,"x\"\\\n\u0001"],"b":{}})"));
  CHECK_FALSE(valid_json(R"({"a":"cut)"));
  CHECK_FALSE(valid_json("{\"a\":\"\x01\"}"));
  CHECK_FALSE(valid_json(R"({"a":"\q"})"));
  CHECK_FALSE(valid_json("{\"a\":\"\xff\"}"));
  CHECK_FALSE(valid_json(R"({"a":1}{)"));
  CHECK_FALSE(valid_json(R"({"a":01})"));
}

TEST_CASE("tool safety: a FIFO given as the input file is refused, not waited on") {
  ScratchDir dir;
  const std::string fifo = make_fifo(dir, "model.hxe");
  auto dump = run(kDump + " " + fifo);
  CHECK_MESSAGE(dump.exit_code == 1, dump.output);
  CHECK_MESSAGE(contains(dump.output, "is not a regular file (a FIFO)"), dump.output);
  auto run_fifo = run(kRun + " " + fifo);
  CHECK_MESSAGE(run_fifo.exit_code == 1, run_fifo.output);
  CHECK_MESSAGE(contains(run_fifo.output, "is not a regular file (a FIFO)"), run_fifo.output);
  const std::string source = make_fifo(dir, "model.hxir");
  auto compile = run(kCompile + " " + source + " -o " + dir / "out.hxe");
  CHECK_MESSAGE(compile.exit_code == 1, compile.output);
  CHECK_MESSAGE(contains(compile.output, "is not a regular file (a FIFO)"), compile.output);
  CHECK_FALSE(fs::exists(dir / "out.hxe"));
  const std::string csv = make_fifo(dir, "plan.csv");
  auto plan = run(kPlan + " " + csv, 10);
  CHECK_MESSAGE(plan.exit_code == 1, plan.output);
  CHECK_MESSAGE(contains(plan.output, "is not a regular file (a FIFO)"), plan.output);
}

TEST_CASE("tool safety: a FIFO or /dev/zero as an --input .npy is refused") {
  ScratchDir dir;
  REQUIRE(run(kCompile + " " + kSamples + "/mlp.hxir -o " + dir / "mlp.hxe").exit_code == 0);
  auto zero = run(kRun + " " + dir / "mlp.hxe --input x=/dev/zero");
  CHECK_MESSAGE(zero.exit_code == 1, zero.output);
  CHECK_MESSAGE(contains(zero.output, "'/dev/zero' is not a regular file (a character device)"), zero.output);
  const std::string fifo = make_fifo(dir, "x.npy");
  auto from_fifo = run(kRun + " " + dir / "mlp.hxe --input x=" + fifo);
  CHECK_MESSAGE(from_fifo.exit_code == 1, from_fifo.output);
  CHECK_MESSAGE(contains(from_fifo.output, "(a FIFO)"), from_fifo.output);
}

TEST_CASE("tool safety: hexir-run refuses a huge input or output instead of dying of bad_alloc") {
  ScratchDir dir;
  write_all(dir / "big.hxir", R"(module @big
func @main(%x: f32[100000000000]) -> (f32[4]) {
  %y = call @slice(%x) {starts = [0], ends = [4]} : f32[4]
  return %y
}
)");
  auto compiled = run(kCompile + " " + dir / "big.hxir -o " + dir / "big.hxe");
  REQUIRE_MESSAGE(compiled.exit_code == 0, compiled.output);
  auto r = run(kRun + " " + dir / "big.hxe");
  CHECK_MESSAGE(r.exit_code == 1, r.output);
  CHECK_MESSAGE(contains(r.output,
                         "input 'x' of function 'main' is f32[100000000000] (400000000000 bytes), "
                         "more than --max-tensor-bytes 4294967296"),
                r.output);
  // The limit is a flag: lowered, it refuses the small sample too.
  REQUIRE(run(kCompile + " " + kSamples + "/mlp.hxir -o " + dir / "mlp.hxe").exit_code == 0);
  auto small = run(kRun + " " + dir / "mlp.hxe --max-tensor-bytes 1000");
  CHECK_MESSAGE(small.exit_code == 1, small.output);
  CHECK_MESSAGE(contains(small.output, "(4096 bytes), more than --max-tensor-bytes 1000"), small.output);
  auto enough = run(kRun + " " + dir / "mlp.hxe --max-tensor-bytes 4096");
  CHECK_MESSAGE(enough.exit_code == 0, enough.output);
  // An .npy over the limit is refused before its data is read.
  auto npy = run(kRun + " " + dir / "mlp.hxe --max-tensor-bytes 4096 --input x=" + kSamples + "/mlp/w1.npy");
  CHECK_MESSAGE(npy.exit_code == 1, npy.output);
  CHECK_MESSAGE(contains(npy.output, "more than the .npy data limit of 4096 bytes"), npy.output);
}

TEST_CASE(
    "tool safety: --threads past what the address space can start is an error, not an abort or a hang") {
  if (kAddressSanitizer) return;  // no address-space limit there (see run)
  ScratchDir dir;
  REQUIRE(run(kCompile + " " + kSamples + "/mlp.hxir -o " + dir / "mlp.hxe").exit_code == 0);
  // 1023 worker stacks of 8 MiB (or glibc's 2 MiB and more) do not fit in run's 2 GiB.
  auto r = run(kRun + " " + dir / "mlp.hxe --threads 1024");
  CHECK_MESSAGE(r.exit_code == 1, r.output);
  CHECK_MESSAGE(contains(r.output, "cpu thread pool: started "), r.output);
  CHECK_MESSAGE(contains(r.output, " of the 1023 worker threads asked for (threads=1024"), r.output);
}

TEST_CASE("tool safety: hexir-compile -o never writes through a planted symlink") {
  ScratchDir dir;
  const std::string victim = dir / "victim.txt";
  write_all(victim, "precious");
  const std::string out = dir / "out.hxe";
  fs::create_symlink(victim, out + ".tmp");
  auto c = run(kCompile + " " + kSamples + "/mlp.hxir -o " + out);
  REQUIRE_MESSAGE(c.exit_code == 0, c.output);
  CHECK(read_all(victim) == "precious");
  CHECK(fs::is_regular_file(fs::symlink_status(out)));
  CHECK(fs::is_symlink(out + ".tmp"));
  CHECK(read_all(out).substr(0, 7) == "HEXIRXE");
  // Nothing else is left in the directory: the temporary was renamed.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++entries;
  CHECK(entries == 3);
}

TEST_CASE("tool safety: hexir-compile -o a FIFO writes through it; a directory is refused") {
  ScratchDir dir;
  REQUIRE(run(kCompile + " " + kSamples + "/mlp.hxir -o " + dir / "reference.hxe").exit_code == 0);
  const std::string fifo = make_fifo(dir, "out.fifo");
  const std::string expected = read_all(dir / "reference.hxe");
  // Held open read-write, the FIFO never blocks its opener; the reader gives
  // up after 20 s without data (the old writer renamed over it and never wrote).
  const int fd = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);
  REQUIRE(fd >= 0);
  std::string received;
  std::thread reader([&] {
    pollfd p{fd, POLLIN, 0};
    char buffer[1 << 16];
    while (received.size() < expected.size() && ::poll(&p, 1, 20000) > 0) {
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n > 0) received.append(buffer, static_cast<size_t>(n));
      if (n < 0 && errno != EAGAIN && errno != EINTR) break;
    }
  });
  auto c = run(kCompile + " " + kSamples + "/mlp.hxir -o " + fifo);
  reader.join();
  ::close(fd);
  CHECK_MESSAGE(c.exit_code == 0, c.output);
  CHECK(fs::is_fifo(fs::symlink_status(fifo)));
  CHECK(received == expected);
  auto to_dir = run(kCompile + " " + kSamples + "/mlp.hxir -o " + dir.path.string());
  CHECK_MESSAGE(to_dir.exit_code == 1, to_dir.output);
  CHECK_MESSAGE(contains(to_dir.output, "is a directory"), to_dir.output);
  CHECK(fs::is_directory(dir.path));
}

TEST_CASE("tool safety: --stats-json and --json stay valid JSON whatever the names") {
  ScratchDir dir;
  const std::string long_name(10 * 1024, 'n');
  const std::string nasty = "q\"uo\"te \\back\\slash \x01\x02\x1f\x7f tab\t nl\n \xc3\xa9 \xff\xfe end";
  const std::string function = "f" + long_name + nasty;
  const std::string input = "x" + nasty + long_name;
  write_all(dir / "names.hxir", "module @" + quoted(nasty) + "\nfunc @" + quoted(function) + "(%" +
                                    quoted(input) + ": f32[4]) -> (f32[4]) {\n  %" + quoted(nasty) +
                                    " = call @relu(%" + quoted(input) + ") : f32[4]\n  return %" +
                                    quoted(nasty) + "\n}\n");
  auto c = run(kCompile + " " + dir / "names.hxir -o " + dir / "names.hxe");
  REQUIRE_MESSAGE(c.exit_code == 0, c.output);
  auto r = run(kRun + " " + dir / "names.hxe --stats-json " + dir / "stats.json");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output.substr(0, 500));
  const std::string stats = read_all(dir / "stats.json");
  const std::string excerpt =
      stats.substr(0, 200) + " ... " + stats.substr(stats.size() - std::min<size_t>(stats.size(), 200));
  CHECK_MESSAGE(valid_json(stats), excerpt);
  CHECK(stats.size() > long_name.size());
  CHECK(contains(stats, "\"ms_median\":"));
  CHECK(contains(stats,
                 "q\\\"uo\\\"te \\\\back\\\\slash \\u0001\\u0002\\u001f\\u007f tab\\t nl\\n \xc3\xa9 "
                 "\\u00ff\\u00fe end"));
  auto d = run(kDump + " " + dir / "names.hxe --json > " + dir / "dump.json");
  REQUIRE_MESSAGE(d.exit_code == 0, d.output);
  const std::string dump = read_all(dir / "dump.json");
  CHECK_MESSAGE(valid_json(dump), dump.substr(0, 200));
  CHECK(contains(dump, long_name));
  // hexir-plan's summary line goes through the same writer.
  write_all(dir / "p.csv", "id,lower,upper,size\na,0,2,8\nb,1,3,8\n");
  auto p = run(kPlan + " " + dir / "p.csv --budget-ms 10");
  REQUIRE_MESSAGE(p.exit_code == 0, p.output);
  CHECK_MESSAGE(valid_json(p.output), p.output);
  CHECK(contains(p.output, "\"buffers\": 2"));
}

TEST_CASE("tool safety: hexir-compile refuses constants over its limit, naming it") {
  ScratchDir dir;
  // A 400 GB dense literal of one element: refused at its declaration.
  write_all(dir / "dense.hxir", R"(module @big
const @c : f32[100000000000] = dense 1.0
func @main(%x: f32[4]) -> (f32[4]) {
  %y = call @add(%x, %x) : f32[4]
  return %y
}
)");
  auto dense = run(kCompile + " " + dir / "dense.hxir -o " + dir / "dense.hxe");
  CHECK_MESSAGE(dense.exit_code == 1, dense.output);
  CHECK_MESSAGE(contains(dense.output,
                         "dense.hxir:2:7: constant @c is f32[100000000000] (400000000000 bytes), "
                         "more than the limit of 17179869184 bytes of constants "
                         "(hexir-compile --max-constant-bytes)"),
                dense.output);
  // A 400 GB .npy (sparse: nothing on disk): refused before a byte of it is read.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000,), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string npy = "\x93NUMPY\x01";
  npy += '\0';
  npy += static_cast<char>(header.size() & 0xff);
  npy += static_cast<char>(header.size() >> 8);
  npy += header + std::string("\x00\x00\x80\x3f", 4);  // 1.0, then zeros: not a splat
  write_all(dir / "big.npy", npy);
  fs::resize_file(dir / "big.npy", npy.size() - 4 + 400000000000ull);
  write_all(dir / "file.hxir", R"(module @big
const @w : f32[100000000000] = file "big.npy"
func @main(%x: f32[100000000000]) -> (f32[100000000000]) {
  %y = call @add(%x, @w) : f32[100000000000]
  return %y
}
)");
  for (const char* compress : {"", " --compress=zstd"}) {
    auto file = run(kCompile + " " + dir / "file.hxir -o " + dir / "file.hxe" + compress);
    CHECK_MESSAGE(file.exit_code == 1, file.output);
    CHECK_MESSAGE(contains(file.output,
                           "constant @w is f32[100000000000] (400000000000 bytes), more than the limit "
                           "of 17179869184 bytes of constants"),
                  file.output);
    CHECK_FALSE(fs::exists(dir / "file.hxe"));
  }
  // The limit is a flag, for the total of stored constants.
  auto small = run(kCompile + " " + kSamples + "/mlp.hxir -o " + dir / "mlp.hxe --max-constant-bytes 1000");
  CHECK_MESSAGE(small.exit_code == 1, small.output);
  CHECK_MESSAGE(contains(small.output, "more than the limit of 1000 bytes of constants"), small.output);
  auto enough =
      run(kCompile + " " + kSamples + "/mlp.hxir -o " + dir / "mlp.hxe --max-constant-bytes 1000000");
  CHECK_MESSAGE(enough.exit_code == 0, enough.output);
}

namespace {

// One zstd frame of `blocks` RLE blocks of 128 KiB (4 stored bytes each)
// that records its content size: a few KB declaring blocks x 128 KiB
// (the same frame as tests/vm/hardening_test.cc's).
std::vector<uint8_t> rle_frame(uint64_t blocks) {
  std::vector<uint8_t> f = {0x28, 0xb5, 0x2f, 0xfd, 0xe0};  // magic; 8-byte content size, single segment
  const uint64_t content = blocks << 17;
  for (int i = 0; i < 8; ++i) f.push_back(static_cast<uint8_t>(content >> (8 * i)));
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint32_t header = (b + 1 == blocks ? 1u : 0u) | (1u << 1) | (uint32_t{1} << 17 << 3);
    f.push_back(static_cast<uint8_t>(header));
    f.push_back(static_cast<uint8_t>(header >> 8));
    f.push_back(static_cast<uint8_t>(header >> 16));
    f.push_back(0x3c);  // the byte repeated
  }
  return f;
}

// The tests' tiny model with a zstd section of `blocks` x 128 KiB, as a file.
void write_zstd_model(const std::string& path, uint64_t blocks) {
  hexir::testing::ModuleSpec m = hexir::testing::tiny_module_spec();
  hexir::testing::SectionSpec s;
  s.bytes = rle_frame(blocks);
  s.compression = hexir::fb::Compression::Zstd;
  s.raw_size = blocks << 17;
  m.sections.push_back(s);
  const hexir::testing::AlignedBytes file = hexir::testing::write_hxe(m);
  write_all(path, std::string(reinterpret_cast<const char*>(file.data()), file.size()));
}

TEST_CASE("tool safety: hexir-dump applies the VM's load limits, with hexir-run's flags") {
  // 36 KB declaring 1 GiB: hexir-run refused it, hexir-dump decompressed it
  // (9 s, 1.05 GB).
  ScratchDir dir;
  write_zstd_model(dir / "bomb.hxe", 8192);
  CHECK(fs::file_size(dir / "bomb.hxe") < 48 * 1024);
  for (const std::string& tool_path : {kDump, kRun}) {
    auto refused = run(tool_path + " " + dir / "bomb.hxe");
    CHECK_MESSAGE(refused.exit_code == 1, refused.output);
    CHECK_MESSAGE(contains(refused.output, "zstd sections decompress to 1073741824 bytes, more than the limit"),
                  refused.output);
    CHECK_MESSAGE(contains(refused.output, "--max-decompressed-bytes"), refused.output);
  }
  // The flags lower (or raise) each limit, the same in both tools.
  write_zstd_model(dir / "small.hxe", 2);  // 256 KiB
  CHECK(run(kDump + " " + dir / "small.hxe").exit_code == 0);
  auto tight = run(kDump + " " + dir / "small.hxe --max-decompressed-bytes 131072");
  CHECK(tight.exit_code == 1);
  CHECK_MESSAGE(contains(tight.output, "more than the limit --max-decompressed-bytes 131072"), tight.output);
  auto fills = run(kDump + " " + dir / "small.hxe --max-fill-bytes 8");
  CHECK_MESSAGE(contains(fills.output, "fill constants make 16 bytes, more than the limit --max-fill-bytes 8"),
                fills.output);
  auto arena = run(kDump + " " + dir / "small.hxe --max-arena-bytes 8");
  CHECK_MESSAGE(contains(arena.output, "more than the limit --max-arena-bytes 8"), arena.output);
  for (const char* flag : {"--max-decompressed-bytes 131072", "--max-fill-bytes 8", "--max-arena-bytes 8"}) {
    auto run_tight = run(kRun + " " + dir / "small.hxe " + flag);
    CHECK_MESSAGE(run_tight.exit_code == 1, run_tight.output);
    CHECK_MESSAGE(contains(run_tight.output, "more than the limit LoadOptions.max_"), run_tight.output);
  }
  auto run_ok = run(kRun + " " + dir / "small.hxe --copy-weights --verify-data-checksum");
  CHECK_MESSAGE(run_ok.exit_code == 0, run_ok.output);
}

TEST_CASE("tool safety: hexir-run bounds loop iterations by default (0: no limit)") {
  // A loop whose trip count is data ran until killed; now 2^32 iterations
  // by default. Counted here with a smaller explicit limit, and the default
  // is named by --help.
  ScratchDir dir;
  write_all(dir / "loop.hxir",
            "module @m\nfunc @main(%x: f32[4]) -> f32[4] {\n"
            "  %r = for %i = 0 to 1000 iter(%a = %x) {\n    %a2 = call @add(%a, %x) : f32[4]\n    yield %a2\n  }\n"
            "  return %r\n}\n");
  REQUIRE(run(kCompile + " " + dir / "loop.hxir -o " + dir / "loop.hxe").exit_code == 0);
  CHECK(run(kRun + " " + dir / "loop.hxe").exit_code == 0);
  CHECK(run(kRun + " " + dir / "loop.hxe --max-loop-iterations 0").exit_code == 0);
  auto limited = run(kRun + " " + dir / "loop.hxe --max-loop-iterations 999");
  CHECK_MESSAGE(limited.exit_code == 1, limited.output);
  CHECK_MESSAGE(contains(limited.output, "ran 999 loop iterations"), limited.output);
  auto help = run(kRun + " --help");
  CHECK_MESSAGE(contains(help.output, "2^32 = 4294967296; 0: no limit"), help.output);
}

}  // namespace
