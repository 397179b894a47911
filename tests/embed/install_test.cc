// The installed library and the Python package, each run as a
// child process and checked here: install_check.sh (meson install into a
// temporary prefix; the C and C++ samples built against its hexir.pc, shared
// and static, each checked against the mlp reference), python_test.py
// (python/hexir over the C API, every sample against its .npy references),
// python_context_test.py (a Context on two threads, cancel and bounds),
// python_generator_test.py (the generation runner over samples/decoder/lm.hxir)
// and python_compile_test.py (hexir.compile over libhexir_compile);
// exports_check.sh (libhexir_vm.so exports its public API only).
// Each skips ("HEXIR_SKIP: reason", counted as skipped) when what it needs
// is missing: pkg-config, nm, Debian's python3 with numpy, or a build without
// sanitizers (an instrumented library needs its sanitizer runtime first in
// the process, which neither the samples nor python have).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

namespace {

struct Run {
  int exit_code = -1;
  std::string output;
};

Run run(const std::string& command) {
  Run r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string quote(const std::string& s) { return "'" + s + "'"; }

// True when the test should not run; prints the reason as a counted skip.
bool skipped(const Run& r) {
  if (r.exit_code != 77) return false;
  const size_t at = r.output.find("HEXIR_SKIP:");
  std::printf("%s\n", at == std::string::npos ? "HEXIR_SKIP: (no reason given)" : r.output.substr(at).c_str());
  return true;
}

bool sanitized() {
  if (std::string(HEXIR_SANITIZE) == "none") return false;
  std::printf("HEXIR_SKIP: built with -fsanitize=%s: the samples and python would need its runtime first\n",
              HEXIR_SANITIZE);
  return true;
}

}  // namespace

TEST_CASE("install: C and C++ samples built against the installed hexir.pc run the mlp sample") {
  if (sanitized()) return;
  const Run r = run("CC=" + quote(HEXIR_CC) + " CXX=" + quote(HEXIR_CXX) + " PYTHON=" + quote(HEXIR_PYTHON) + " " +
                    quote(std::string(HEXIR_SOURCE_ROOT) + "/tests/embed/install_check.sh") + " " +
                    quote(HEXIR_BUILD_ROOT) + " " + quote(HEXIR_SOURCE_ROOT));
  if (skipped(r)) return;
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(has(r.output, "ok: headers and tools installed"));
  CHECK(has(r.output, "ok: libhexir_vm.so needs"));
  for (const char* sample : {"ok: C sample, shared: matches", "ok: C++ sample, shared: matches",
                             "ok: C++ sample, static: matches"})
    CHECK_MESSAGE(has(r.output, sample), sample);
  CHECK(has(r.output, "install: all checks passed"));
  if (!has(r.output, "ok: Python over the installed library: matches"))
    std::printf("HEXIR_SKIP: python over the installed library: %s has no numpy\n", HEXIR_PYTHON);
}

TEST_CASE("exports: libhexir_vm.so exports the public C and C++ API and nothing of its internals") {
  const Run r = run(quote(std::string(HEXIR_SOURCE_ROOT) + "/tests/embed/exports_check.sh") + " " +
                    quote(HEXIR_VM_SHARED) + " " + quote(HEXIR_SOURCE_ROOT));
  if (skipped(r)) return;
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(has(r.output, "ok: libhexir_vm.so exports "));
}

// Runs tests/embed/SCRIPT over the library under test with the compiler, the
// samples and a scratch folder; nullopt when it should not run (printed as a
// counted skip).
std::optional<Run> run_python(const char* script) {
  if (sanitized()) return std::nullopt;
  if (!std::filesystem::exists(HEXIR_PYTHON)) {
    std::printf("HEXIR_SKIP: no %s\n", HEXIR_PYTHON);
    return std::nullopt;
  }
  const std::string scratch =
      (std::filesystem::temp_directory_path() / ("hexir_python_" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(scratch);
  const Run r = run("PYTHONDONTWRITEBYTECODE=1 HEXIR_LIBRARY=" + quote(HEXIR_VM_SHARED) +
                    " HEXIR_COMPILE_LIBRARY=" + quote(HEXIR_COMPILE_SHARED) + " " + quote(HEXIR_PYTHON) + " " +
                    quote(std::string(HEXIR_SOURCE_ROOT) + "/tests/embed/" + script) + " " + quote(HEXIR_COMPILE) +
                    " " + quote(std::string(HEXIR_SOURCE_ROOT) + "/samples") + " " + quote(scratch));
  std::filesystem::remove_all(scratch);
  if (skipped(r)) return std::nullopt;
  return r;
}

TEST_CASE("python: the hexir package runs every sample against its references") {
  const std::optional<Run> r = run_python("python_test.py");
  if (!r) return;
  INFO(r->output);
  CHECK(r->exit_code == 0);
  CHECK(has(r->output, "ok: transformer run 1: output 1 'pool' float32[64] matches expected_1.npy"));
  CHECK(has(r->output, "ok: wrong shape: INVALID_ARGUMENT input 'x' of function 'main': expected f32[8,128]"));
  CHECK(has(r->output, " 0 failed"));
  CHECK_FALSE(has(r->output, "FAILED: "));
}

TEST_CASE("python: one context on two threads is refused; cancel, a deadline and the loop limit bound a call") {
  const std::optional<Run> r = run_python("python_context_test.py");
  if (!r) return;
  INFO(r->output);
  CHECK(r->exit_code == 0);
  CHECK(has(r->output, "ok: two threads on one context: no wrong answer"));
  CHECK(has(r->output, "python context: "));
  CHECK(has(r->output, " 0 failed"));
  CHECK_FALSE(has(r->output, "FAILED: "));
}

TEST_CASE("python: the generation runner and function_for over the decoder sample's language model") {
  const std::optional<Run> r = run_python("python_generator_test.py");
  if (!r) return;
  INFO(r->output);
  CHECK(r->exit_code == 0);
  CHECK(has(r->output, "ok: greedy through prefill_8 = expected_tokens.npy"));
  CHECK(has(r->output, "ok: prompt of 5: every step's logits = decode step by step"));
  CHECK(has(r->output, "python generator: "));
  CHECK(has(r->output, " 0 failed"));
  CHECK_FALSE(has(r->output, "FAILED: "));
}

TEST_CASE("python: hexir.compile compiles the mlp sample and an ONNX model with the tool's options") {
  const std::optional<Run> r = run_python("python_compile_test.py");
  if (!r) return;
  INFO(r->output);
  CHECK(r->exit_code == 0);
  CHECK(has(r->output, "ok: mlp compiled from python matches expected_0.npy"));
  CHECK(has(r->output, "ok: an unknown option: unknown option '--bogus=1'"));
  if (!has(r->output, "ok: the ONNX model compiled from python matches numpy's reference")) {
    const size_t at = r->output.find("skipped: ONNX: ");
    REQUIRE_MESSAGE(at != std::string::npos, "neither the ONNX check nor its reason for skipping");
    std::printf("HEXIR_SKIP: python compile, %s\n", r->output.substr(at + 9, r->output.find('\n', at) - at - 9).c_str());
  }
  CHECK(has(r->output, "python compile: "));
  CHECK(has(r->output, " 0 failed"));
  CHECK_FALSE(has(r->output, "FAILED: "));
}
