// A format change is a deliberate act. tests/data/golden holds .hxe files
// of the current format version (each a few KB: matmul in each parameter
// form, conv2d, pools, norms and elementwise maps, gather, loops, ifs, fills,
// several functions), with inputs and the results they gave when written.
// Each runs here and must give those results again. When this fails after a
// change, a field or an operator's parameter words no longer mean what they
// meant when the file was written, so files users compiled would run
// differently: either keep reading the old meaning, or bump kFormatVersion
// (format/include/hexir/format/prelude.h) and run
// tests/data/golden/regenerate.py (docs/design-notes.md, "The format
// version"). Never regenerate to make this pass without bumping.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "sample_util.h"

namespace hexir::format {
namespace {

namespace fs = std::filesystem;

const fs::path kGoldenDir = HEXIR_GOLDEN_DIR;

std::vector<fs::path> golden_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kGoldenDir))
    if (entry.path().extension() == ".hxe") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

uint32_t version_of(const fs::path& hxe) {
  const std::string bytes = testing::read_text(hxe.string());
  Prelude prelude{};
  REQUIRE(bytes.size() >= sizeof(prelude));
  std::memcpy(&prelude, bytes.data(), sizeof(prelude));
  return prelude.format_version;
}

// f32 results within a tolerance (kernels may change their order of
// summation, a meaning change moves results far more); others exactly.
void check_result(const vm::TensorRef& got, const NpyArray& want) {
  REQUIRE(want.type == got.type);
  REQUIRE(want.data.size() == got.byte_size);
  const auto* bytes = static_cast<const uint8_t*>(got.data);
  if (got.type.dtype != DType::kF32) {
    CHECK(std::memcmp(bytes, want.data.data(), got.byte_size) == 0);
    return;
  }
  for (size_t i = 0; i < got.byte_size / 4; ++i) {
    float a, b;
    std::memcpy(&a, bytes + 4 * i, 4);
    std::memcpy(&b, want.data.data() + 4 * i, 4);
    if (!(std::fabs(a - b) <= 1e-4f + 1e-4f * std::fabs(b)))
      FAIL_CHECK("element ", i, " is ", a, ", the golden result ", b);
  }
}

// Runs every function of one golden file with its inputs and compares each
// result with NAME/FUNCTION/expected_N.npy.
void run_golden(const fs::path& hxe) {
  auto module = vm::Module::load_file(hxe.string());
  REQUIRE_MESSAGE(module.ok(), module.status().to_string());
  auto device = hal::create_device("cpu");
  REQUIRE(device.ok());
  auto program = vm::Program::prepare(*module, **device);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  auto context = vm::Context::create(*program);
  REQUIRE_MESSAGE(context.ok(), context.status().to_string());
  for (size_t f = 0; f < module->function_count(); ++f) {
    const vm::FunctionSignature& sig = module->function(f);
    const fs::path folder = kGoldenDir / hxe.stem() / sig.name;
    INFO("function ", sig.name, " (", folder.string(), ")");
    std::vector<NpyArray> inputs;
    for (const vm::TensorSignature& input : sig.inputs) {
      auto npy = read_npy((folder / ("input_" + input.name + ".npy")).string());
      REQUIRE_MESSAGE(npy.ok(), npy.status().to_string());
      inputs.push_back(std::move(npy).value());
    }
    std::vector<std::vector<uint8_t>> results;
    for (const vm::TensorSignature& output : sig.outputs) results.emplace_back(output.byte_size);
    std::vector<vm::TensorRef> in, out;
    for (NpyArray& npy : inputs) in.push_back({npy.data.data(), npy.data.size(), npy.type});
    for (size_t j = 0; j < results.size(); ++j) out.push_back({results[j].data(), results[j].size(), sig.outputs[j].type});
    // A donated input is passed as its own output.
    for (size_t i = 0; i < sig.inputs.size(); ++i)
      if (sig.inputs[i].donated_to >= 0) out[sig.inputs[i].donated_to].data = in[i].data;
    const Status status = context->invoke(f, in, out);
    REQUIRE_MESSAGE(status.ok(), status.to_string());
    for (size_t j = 0; j < results.size(); ++j) {
      INFO("result ", j);
      auto want = read_npy((folder / ("expected_" + std::to_string(j) + ".npy")).string());
      REQUIRE_MESSAGE(want.ok(), want.status().to_string());
      check_result(out[j], *want);
    }
  }
}

TEST_CASE("golden files of the current format version run and give the results they gave when written") {
  const std::vector<fs::path> files = golden_files();
  CHECK(files.size() >= 4);
  for (const fs::path& hxe : files) {
    INFO(hxe.string());
    CHECK_MESSAGE(version_of(hxe) == kFormatVersion,
                  "a golden file of another version than kFormatVersion: run tests/data/golden/regenerate.py");
    run_golden(hxe);
  }
}

TEST_CASE("a golden file marked as format version 1 is refused naming the file: recompile") {
  const fs::path golden = kGoldenDir / "matmul.hxe";
  std::string bytes = testing::read_text(golden.string());
  REQUIRE(bytes.size() > sizeof(Prelude));
  const uint32_t old_version = 1;
  std::memcpy(bytes.data() + offsetof(Prelude, format_version), &old_version, sizeof(old_version));
  testing::ScratchDir dir;
  const std::string path = dir / "old.hxe";
  testing::write_file(path, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  auto module = vm::Module::load_file(path);
  REQUIRE_FALSE(module.ok());
  CHECK(module.status().message() == path + ": compiled for format version 1; this runtime reads " +
                                         std::to_string(kMinReadableFormatVersion) + ".." +
                                         std::to_string(kFormatVersion) + "; recompile");
}

// The schema pinned to the format version: a cheaper tripwire than the
// goldens for a change of the file's fields. Comments and whitespace do not
// count. The operator table is not pinned: files name operators by string
// and adding one changes no old file, while what its parameter words mean
// lives in code (its lowering and result-type rule), which only running
// files checks, as the goldens do.
constexpr uint32_t kPinnedFormatVersion = 2;
constexpr uint64_t kPinnedSchemaFingerprint = 0xa72c3b2ce873af0f;

uint64_t schema_fingerprint() {
  const std::string schema = testing::read_text(HEXIR_SCHEMA_PATH);
  REQUIRE(!schema.empty());
  std::string tokens;
  for (size_t i = 0; i < schema.size(); ++i) {
    if (schema.compare(i, 2, "//") == 0) {
      i = schema.find('\n', i);
      if (i == std::string::npos) break;
    } else if (!std::isspace(static_cast<unsigned char>(schema[i]))) {
      tokens += schema[i];
    }
  }
  return checksum64({reinterpret_cast<const uint8_t*>(tokens.data()), tokens.size()});
}

TEST_CASE("the schema is the one pinned to the format version") {
  const uint64_t fingerprint = schema_fingerprint();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fingerprint));
  CHECK_MESSAGE((kFormatVersion == kPinnedFormatVersion && fingerprint == kPinnedSchemaFingerprint),
                "the schema (format/hexir.fbs) or kFormatVersion changed: if the meaning of a field changed bump "
                "kFormatVersion and regenerate tests/data/golden, otherwise update the fingerprint in "
                "tests/format/golden_test.cc: version ",
                kFormatVersion, ", fingerprint 0x", hex);
}

}  // namespace
}  // namespace hexir::format
