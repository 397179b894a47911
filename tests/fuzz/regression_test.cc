// Replays every input kept under tests/fuzz/regressions/<target>/ (what a
// libFuzzer run of scripts/test.sh found, see README.md there) through the
// same target body the fuzzer ran. A case passes when nothing crashes, hangs
// or trips a sanitizer; plan_diff inputs must also give identical outputs
// under every plan.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_targets.h"

namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> read_all(const fs::path& path) {
  std::vector<uint8_t> bytes;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    uint8_t chunk[4096];
    size_t got;
    while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0) bytes.insert(bytes.end(), chunk, chunk + got);
    std::fclose(f);
  }
  return bytes;
}

// The inputs kept for one target, in name order (README.md is not one).
std::vector<fs::path> inputs_of(const char* target) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(HEXIR_FUZZ_REGRESSIONS_DIR) / target, ec))
    if (entry.is_regular_file() && entry.path().extension() != ".md") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("fuzz regressions: executable inputs load, verify and run without a finding") {
  for (const fs::path& path : inputs_of("executable")) {
    INFO(path.string());
    const auto bytes = read_all(path);
    hexir::fuzz::load_and_run_executable(bytes.data(), bytes.size());
  }
}

TEST_CASE("fuzz regressions: hxir inputs compile (and what compiles verifies) without a finding") {
  for (const fs::path& path : inputs_of("hxir")) {
    INFO(path.string());
    const auto bytes = read_all(path);
    hexir::fuzz::compile_hxir_text(bytes.data(), bytes.size());
  }
}

TEST_CASE("fuzz regressions: npy inputs parse without a finding") {
  for (const fs::path& path : inputs_of("npy")) {
    INFO(path.string());
    const auto bytes = read_all(path);
    hexir::fuzz::parse_npy_bytes(bytes.data(), bytes.size());
  }
}

TEST_CASE("fuzz regressions: plan_diff inputs give identical outputs under every plan") {
  for (const fs::path& path : inputs_of("plan_diff")) {
    INFO(path.string());
    const auto bytes = read_all(path);
    CHECK(hexir::fuzz::compare_plans(bytes.data(), bytes.size()) == "");
  }
}

TEST_CASE("fuzz regressions: onnx inputs import (and what compiles verifies) without a finding") {
  for (const fs::path& path : inputs_of("onnx")) {
    INFO(path.string());
    const auto bytes = read_all(path);
    hexir::fuzz::import_onnx_bytes(bytes.data(), bytes.size());
  }
}
