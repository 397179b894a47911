// Verification time grows with the file, not its square: many
// functions, many inputs. Duplicate names are still found, and the pair
// reported is the one a scan from the start meets first.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "hexir/format/verifier.h"
#include "hxe_test_builder.h"
#include "verify_expect.h"

namespace hexir::format {
namespace {

using testing::AlignedBytes;
using testing::ModuleSpec;
using testing::SlotSpec;
using testing::write_hxe;
using testing::verify_spec;

SlotSpec io_slot(fb::StorageKind storage, uint32_t index = 0) {
  return {"",
          fb::DType::F32,
          {4},
          16,
          storage,
          storage == fb::StorageKind::Input ? fb::SlotUsage::ExternalInput : fb::SlotUsage::ExternalOutput,
          0,
          index};
}

// Functions named `names`, each `relu(%x) -> output 0`.
ModuleSpec functions_named(const std::vector<std::string>& names) {
  ModuleSpec m;
  m.kernels = {"relu"};
  m.slots = {io_slot(fb::StorageKind::Input), io_slot(fb::StorageKind::Output)};
  m.operand_pool = {0, 1};
  for (uint32_t f = 0; f < names.size(); ++f) {
    m.instructions.push_back({0, 0, 2, 1, 0, 0, 0, 0});
    m.functions.push_back({names[f], {{"x", 0, -1}}, {{"0", 1, -1}}, f, 1, 0, 0});
  }
  return m;
}

// One function whose inputs are named `names`; output 0 = relu(input 0).
ModuleSpec inputs_named(const std::vector<std::string>& names) {
  ModuleSpec m;
  m.kernels = {"relu"};
  testing::FunctionSpec fn{"main", {}, {}, 0, 1, 0, 0};
  const auto n = static_cast<uint32_t>(names.size());
  for (uint32_t i = 0; i < n; ++i) {
    m.slots.push_back(io_slot(fb::StorageKind::Input, i));
    fn.inputs.push_back({names[i], i, -1});
  }
  m.slots.push_back(io_slot(fb::StorageKind::Output));
  fn.outputs.push_back({"0", n, -1});
  m.operand_pool = {0, n};
  m.instructions.push_back({0, 0, 2, 1, 0, 0, 0, 0});
  m.functions.push_back(fn);
  return m;
}

std::vector<std::string> numbered(const char* prefix, uint32_t n) {
  std::vector<std::string> names;
  for (uint32_t i = 0; i < n; ++i) names.push_back(prefix + std::to_string(i));
  return names;
}

void expect_verifies(const ModuleSpec& spec) {
  AlignedBytes file = write_hxe(spec);
  Status status = verify_executable(file.span()).status();
  CHECK_MESSAGE(status.ok(), status.to_string());
}

// How the time grows is bench/verify_bench's to report (times per function and
// per input at N, 10N and 100N); a test asserts no time. Quadratic name checks
// took 17 s and 20 s here, linear ones ~0.1 s, so a regression shows as a
// suite timeout, not as a flaky bound.
TEST_CASE("scaling: 40,000 functions and 40,000 inputs verify") {
  expect_verifies(functions_named(numbered("f", 40000)));
  expect_verifies(inputs_named(numbered("x", 40000)));
}

TEST_CASE("scaling: duplicate names are reported as a scan from the start meets them") {
  auto expect = [](const ModuleSpec& spec, const std::string& needle) {
    Status status = verify_spec(spec);
    REQUIRE_FALSE(status.ok());
    INFO("message: " << status.message());
    CHECK(status.message().find(needle) != std::string::npos);
  };
  expect(functions_named({"a", "b", "a", "b"}), "functions 0 and 2 are both named 'a'");
  expect(functions_named({"b", "a", "a", "b"}), "functions 1 and 2 are both named 'a'");
  expect(functions_named({"c", "a", "b", "c", "a", "b", "c"}), "functions 0 and 3 are both named 'c'");
  expect(inputs_named({"p", "q", "r", "q", "p"}), "function 'main': inputs 1 and 3 are both named 'q'");
  std::vector<std::string> many = numbered("x", 1000);
  many.push_back("x500");
  expect(inputs_named(many), "inputs 500 and 1000 are both named 'x500'");
  CHECK(verify_spec(inputs_named({"p", "q"})).ok());
}

}  // namespace
}  // namespace hexir::format
