// Fused epilogues end to end: every sample compiled with and without fusion
// runs to the same bits on the cpu (1 and 2 threads), with fewer
// instructions and an arena no larger, and the fused file's profile names
// only the instructions that remain.
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"

namespace fs = std::filesystem;

namespace {

const fs::path kSamples = HEXIR_SAMPLES_DIR;

struct Run {
  std::vector<std::vector<uint8_t>> outputs;
  size_t instructions = 0;
  uint64_t arena = 0;
};

Run compile_and_run(const std::string& sample, bool fuse, int threads) {
  const fs::path out = fs::temp_directory_path() / ("hexir_fusion_" + std::to_string(::getpid()) + "_" + sample +
                                                    (fuse ? "_fused" : "_plain") + ".hxe");
  hexir::compiler::CompileOptions options;
  options.fuse_epilogues = fuse;
  auto compiled = hexir::compiler::compile_file_to(kSamples / (sample + ".hxir"), out, options);
  REQUIRE_MESSAGE(compiled.ok(), compiled.status().to_string());
  auto module = hexir::vm::Module::load_file(out.string());
  REQUIRE_MESSAGE(module.ok(), module.status().to_string());
  fs::remove(out);
  auto device = hexir::hal::create_device("cpu", {.threads = threads});
  REQUIRE(device.ok());
  auto program = hexir::vm::Program::prepare(*module, **device);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  auto context = hexir::vm::Context::create(*program);
  REQUIRE(context.ok());
  auto input = hexir::read_npy((kSamples / sample / "input_x.npy").string());
  REQUIRE_MESSAGE(input.ok(), input.status().to_string());
  hexir::vm::TensorRef in{input->data.data(), input->data.size(), input->type};
  hexir::Status status = context->invoke("main", std::span(&in, 1));
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  Run run;
  const hexir::vm::FunctionSignature& sig = module->function(0);
  for (size_t j = 0; j < sig.outputs.size(); ++j) {
    std::vector<uint8_t> bytes(sig.outputs[j].byte_size);
    REQUIRE(context->read_output(0, j, bytes).ok());
    run.outputs.push_back(std::move(bytes));
  }
  run.instructions = module->instructions(0).size();
  run.arena = module->arena_bytes();
  return run;
}

TEST_CASE("fusion: every sample gives the same bits fused and unfused, with fewer instructions") {
  for (const char* sample : {"mlp", "convnet", "transformer"}) {
    for (int threads : {1, 2}) {
      INFO(sample << " at " << threads << " threads");
      const Run plain = compile_and_run(sample, false, threads);
      const Run fused = compile_and_run(sample, true, threads);
      CHECK(fused.outputs == plain.outputs);
      CHECK(fused.instructions < plain.instructions);
      CHECK(fused.arena <= plain.arena);
    }
  }
}

TEST_CASE("profile: per-instruction times for every instruction, summed over profiled invokes") {
  const fs::path out = fs::temp_directory_path() / ("hexir_profile_" + std::to_string(::getpid()) + ".hxe");
  auto compiled = hexir::compiler::compile_file_to(kSamples / "mlp.hxir", out, {});
  REQUIRE(compiled.ok());
  auto module = hexir::vm::Module::load_file(out.string());
  REQUIRE(module.ok());
  fs::remove(out);
  const std::vector<hexir::vm::InstructionInfo> info = module->instructions(0);
  REQUIRE(info.size() == 4);  // three matmuls with fused epilogues, the softmax
  CHECK(info[0].op == "matmul");
  CHECK(info[0].result == "a1");
  CHECK(info[3].op == "softmax");
  CHECK(info[3].type.to_string() == "f32[8,10]");
  CHECK(module->instructions(7).empty());
  auto device = hexir::hal::create_device("cpu", {.threads = 1});
  REQUIRE(device.ok());
  auto program = hexir::vm::Program::prepare(*module, **device);
  REQUIRE(program.ok());
  auto context = hexir::vm::Context::create(*program);
  REQUIRE(context.ok());
  CHECK(context->instruction_nanoseconds(0).empty());  // not profiled yet
  auto input = hexir::read_npy((kSamples / "mlp" / "input_x.npy").string());
  REQUIRE(input.ok());
  hexir::vm::TensorRef in{input->data.data(), input->data.size(), input->type};
  REQUIRE(context->invoke(0, std::span(&in, 1)).ok());
  std::vector<uint8_t> unprofiled(module->function(0).outputs[0].byte_size), profiled(unprofiled.size());
  REQUIRE(context->read_output(0, 0, unprofiled).ok());
  REQUIRE(context->set_profiling(true).ok());
  for (int i = 0; i < 3; ++i) REQUIRE(context->invoke(0, std::span(&in, 1)).ok());
  REQUIRE(context->read_output(0, 0, profiled).ok());
  CHECK(profiled == unprofiled);
  std::span<const uint64_t> ns = context->instruction_nanoseconds(0);
  REQUIRE(ns.size() == info.size());
  for (uint64_t t : ns) CHECK(t > 0);
  CHECK(context->invoke_stats().device_allocations == 0);
  REQUIRE(context->set_profiling(false).ok());
  const std::vector<uint64_t> before(ns.begin(), ns.end());
  REQUIRE(context->invoke(0, std::span(&in, 1)).ok());
  CHECK(std::vector<uint64_t>(ns.begin(), ns.end()) == before);  // off: nothing added
}

}  // namespace
