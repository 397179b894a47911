// The C compile API (hexir/compile.h, libhexir_compile): hexir-compile's
// options through one C function, its result run by the VM against the
// sample's reference, and every refusal as a status code with a message.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hexir/base/npy.h"
#include "hexir/compile.h"
#include "hexir/hexir.h"
#include "hexir/vm.h"
#include "scratch_dir.h"

namespace {

const std::string kSamples = HEXIR_SAMPLES_DIR;

struct Compiled {
  int code = -1;
  std::string message;
};

Compiled compile(const std::string& source, const std::string& output,
                 std::vector<const char*> options = {}) {
  char message[1024];
  std::memset(message, 'x', sizeof message);
  Compiled c;
  c.code =
      hexir_compile(source.c_str(), output.c_str(), options.data(), options.size(), message, sizeof message);
  c.message = message;
  return c;
}

std::vector<float> floats(const hexir::NpyArray& a) {
  std::vector<float> v(a.data.size() / sizeof(float));
  std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

// The mlp sample's output from `hxe`, run on the cpu, against expected_0.npy.
void check_mlp(const std::string& hxe) {
  auto module = hexir::vm::Module::load_file(hxe);
  REQUIRE_MESSAGE(module.ok(), module.status().to_string());
  auto device = hexir::hal::create_device("cpu");
  REQUIRE(device.ok());
  auto program = hexir::vm::Program::prepare(*module, **device);
  REQUIRE(program.ok());
  auto context = hexir::vm::Context::create(*program);
  REQUIRE(context.ok());
  auto input = hexir::read_npy(kSamples + "/mlp/input_x.npy");
  auto expected = hexir::read_npy(kSamples + "/mlp/expected_0.npy");
  REQUIRE((input.ok() && expected.ok()));
  std::vector<float> x = floats(*input), want = floats(*expected), y(want.size());
  hexir::vm::TensorRef in{x.data(), x.size() * 4, {hexir::DType::kF32, {8, 128}}};
  hexir::vm::TensorRef out{y.data(), y.size() * 4, {hexir::DType::kF32, {8, 10}}};
  hexir::Status s = context->invoke("main", {&in, 1}, {&out, 1});
  REQUIRE_MESSAGE(s.ok(), s.to_string());
  for (size_t i = 0; i < y.size(); ++i)
    CHECK(std::fabs(y[i] - want[i]) <= 1e-5f + 1e-4f * std::fabs(want[i]));
}

}  // namespace

TEST_CASE("compile API: the mlp sample with hexir-compile's options, run against its reference") {
  hexir::testing::ScratchDir dir;
  CHECK(hexir_compile_abi_version() == HEXIR_COMPILE_ABI_VERSION);
  const Compiled plain = compile(kSamples + "/mlp.hxir", dir / "mlp.hxe");
  REQUIRE_MESSAGE(plain.code == 0, plain.message);
  CHECK(plain.message.empty());
  check_mlp(dir / "mlp.hxe");
  // --name=value, a flag, and --name with its value in the next element.
  const Compiled options = compile(kSamples + "/mlp.hxir", dir / "mlp-options.hxe",
                                   {"--plan=naive", "--no-fuse", "--align", "256", "--weights=f32"});
  REQUIRE_MESSAGE(options.code == 0, options.message);
  check_mlp(dir / "mlp-options.hxe");
  auto module = hexir::vm::Module::load_file(dir / "mlp-options.hxe");
  REQUIRE(module.ok());
  auto naive = hexir::vm::Module::load_file(dir / "mlp.hxe");
  REQUIRE(naive.ok());
  CHECK(module->arena_bytes() > naive->arena_bytes());  // naive reuses nothing
}

TEST_CASE("compile API: refusals are status codes with the parser's or compiler's message") {
  hexir::testing::ScratchDir dir;
  const std::string mlp = kSamples + "/mlp.hxir";
  const Compiled unknown = compile(mlp, dir / "a.hxe", {"--nope"});
  CHECK(unknown.code == HEXIR_STATUS_INVALID_ARGUMENT);
  CHECK(unknown.message == "unknown option '--nope'");
  const Compiled help = compile(mlp, dir / "a.hxe", {"--help"});  // nothing printed: an unknown option
  CHECK(help.code == HEXIR_STATUS_INVALID_ARGUMENT);
  const Compiled plan = compile(mlp, dir / "a.hxe", {"--plan=bogus"});
  CHECK(plan.code == HEXIR_STATUS_INVALID_ARGUMENT);
  CHECK(plan.message == "--plan expects naive, arena or free-at-last-use, got 'bogus'");
  const Compiled shape = compile(mlp, dir / "a.hxe", {"--input-shape=x=1x2"});
  CHECK(shape.code == HEXIR_STATUS_INVALID_ARGUMENT);
  CHECK(shape.message == "--input-shape, --bind and --dim-bound apply to .onnx models");
  const Compiled align = compile(mlp, dir / "a.hxe", {"--align=3"});
  CHECK(align.code == HEXIR_STATUS_INVALID_ARGUMENT);
  CHECK(align.message.find("align") != std::string::npos);
  const Compiled missing = compile(dir / "absent.hxir", dir / "a.hxe");
  CHECK(missing.code != 0);
  CHECK(missing.message.find("absent.hxir") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "a.hxe"));
  // A syntax error: the parser's file:line:col.
  { std::ofstream(dir / "bad.hxir") << "module @m\nfunc @main(%x: f32[2]) -> (f32[2]) {\n  return %y\n}\n"; }
  const Compiled bad = compile(dir / "bad.hxir", dir / "a.hxe");
  CHECK(bad.code == HEXIR_STATUS_INVALID_ARGUMENT);
  CHECK(bad.message.find("bad.hxir:3:") != std::string::npos);
  // NULL arguments, a NULL option, a short message buffer (truncated, terminated), no buffer at all.
  char message[8];
  CHECK(hexir_compile(nullptr, "a.hxe", nullptr, 0, message, sizeof message) ==
        HEXIR_STATUS_INVALID_ARGUMENT);
  CHECK(std::strlen(message) == 7);
  const char* null_option[] = {nullptr};
  CHECK(hexir_compile(mlp.c_str(), "a.hxe", null_option, 1, nullptr, 0) == HEXIR_STATUS_INVALID_ARGUMENT);
  CHECK(hexir_compile(mlp.c_str(), "a.hxe", nullptr, 1, nullptr, 0) == HEXIR_STATUS_INVALID_ARGUMENT);
}
