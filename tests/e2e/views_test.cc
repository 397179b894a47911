// Strided views end to end (docs/views.md): every sample, and a graph made
// of views of inputs, constants and results, compiled with and without views
// runs to the same bits under every plan and at 1 and 2 threads; the bytes
// moved per invoke never grow, and the transformer's are recorded.
#include <doctest/doctest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"
#include "loaded.h"

namespace fs = std::filesystem;

namespace hexir::testing {
namespace {

const fs::path kSamples = HEXIR_SAMPLES_DIR;

struct Run {
  std::vector<std::vector<uint8_t>> outputs;
  uint64_t copied_bytes = 0;  // outputs of transpose, slice, expand and copy instructions
  size_t instructions = 0;
};

Run run_compiled(const std::vector<uint8_t>& compiled, const std::vector<std::vector<uint8_t>>& inputs,
                 int threads) {
  auto loaded = load_compiled(compiled, threads);
  const vm::Module* module = loaded->module.get();
  auto context = vm::Context::create(*loaded->program);
  REQUIRE(context.ok());
  const vm::FunctionSignature& sig = module->function(0);
  REQUIRE(sig.inputs.size() == inputs.size());
  std::vector<vm::TensorRef> refs;
  for (size_t i = 0; i < inputs.size(); ++i)
    refs.push_back({const_cast<uint8_t*>(inputs[i].data()), inputs[i].size(), sig.inputs[i].type});
  Status status = context->invoke(sig.name, refs);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  Run run;
  for (size_t j = 0; j < sig.outputs.size(); ++j) {
    std::vector<uint8_t> bytes(sig.outputs[j].byte_size);
    REQUIRE(context->read_output(0, j, bytes).ok());
    run.outputs.push_back(std::move(bytes));
  }
  for (const vm::InstructionInfo& info : module->instructions(0)) {
    ++run.instructions;
    if (info.op == "transpose" || info.op == "slice" || info.op == "expand" || info.op == "copy")
      run.copied_bytes += *byte_size(info.type);
  }
  return run;
}

std::vector<uint8_t> compile(const std::string& source_or_sample, bool views, compiler::PlanStrategy plan,
                             bool is_sample) {
  compiler::CompileOptions options;
  options.strided_views = views;
  options.plan = plan;
  auto bytes = is_sample ? compiler::compile_file((kSamples / (source_or_sample + ".hxir")).string(), options)
                         : compiler::compile_source(source_or_sample, "views.hxir", "/nonexistent", options);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  return std::move(bytes).value();
}

std::vector<uint8_t> random_bytes(size_t floats, uint32_t seed) {
  std::vector<uint8_t> out(floats * 4);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (size_t i = 0; i < floats; ++i) {
    const float v = dist(rng);
    std::memcpy(&out[i * 4], &v, 4);
  }
  return out;
}

constexpr compiler::PlanStrategy kPlans[] = {compiler::PlanStrategy::kArena, compiler::PlanStrategy::kNaive,
                                               compiler::PlanStrategy::kFreeAtLastUse};

TEST_CASE("views: every sample gives the same bits with and without views, never more bytes copied") {
  for (const char* sample : {"mlp", "convnet", "transformer"}) {
    auto input = read_npy((kSamples / sample / "input_x.npy").string());
    REQUIRE(input.ok());
    const std::vector<std::vector<uint8_t>> inputs = {input->data};
    for (compiler::PlanStrategy plan : kPlans) {
      for (int threads : {1, 2}) {
        INFO(sample << " plan " << static_cast<int>(plan) << " at " << threads << " threads");
        const Run before = run_compiled(compile(sample, false, plan, true), inputs, threads);
        const Run after = run_compiled(compile(sample, true, plan, true), inputs, threads);
        CHECK(after.outputs == before.outputs);
        CHECK(after.copied_bytes <= before.copied_bytes);
        if (std::string(sample) == "transformer" && plan == compiler::PlanStrategy::kArena && threads == 1)
          MESSAGE("transformer: bytes copied per invoke " << before.copied_bytes << " without views, "
                                                          << after.copied_bytes << " with");
      }
    }
  }
}

// Views of an input (read at an offset through the bound pointer), of a
// constant and of results, read strided by elementwise kernels and
// reductions, contiguous at an offset by matmul, and materialized for
// softmax and a returned transpose.
constexpr const char* kViewsGraph = R"(
module @views
const @w : f32[6,5] = dense [0.1, -0.2, 0.3, -0.4, 0.5, 0.6, -0.7, 0.8, -0.9, 1.0,
                             -1.1, 1.2, -1.3, 1.4, -1.5, 1.6, -1.7, 1.8, -1.9, 2.0,
                             0.25, -0.5, 0.75, -1.0, 1.25, -1.5, 1.75, -2.0, 2.25, -2.5]
const @row : f32[1,5] = dense [1.0, 2.0, 3.0, 4.0, 5.0]
func @main(%x: f32[8,6], %y: f32[6,8]) -> (f32[6,8], f32[3,5], f32[8,3], f32[4,3], f32[6,8], f32[3,8], f32[8]) {
  %xt = call @transpose(%x) {perm = [1, 0]} : f32[6,8]
  %s0 = call @add(%xt, %y) : f32[6,8]
  %rows = call @slice(%x) {starts = [2], ends = [5], axes = [0]} : f32[3,6]
  %m = call @matmul(%rows, @w) : f32[3,5]
  %e = call @expand(@row) {shape = [3, 5]} : f32[3,5]
  %me = call @mul(%m, %e) : f32[3,5]
  %wt = call @transpose(@w) {perm = [1, 0]} : f32[5,6]
  %ws = call @slice(%wt) {starts = [1, 0], ends = [5, 6], steps = [1, 2]} : f32[4,3]
  %g = call @gelu(%ws) {approximate = "tanh"} : f32[4,3]
  %a = call @relu(%s0) : f32[6,8]
  %at = call @transpose(%a) {perm = [1, 0]} : f32[8,6]
  %ast = call @slice(%at) {starts = [0, 1], ends = [8, 6], steps = [1, 2]} : f32[8,3]
  %ex = call @exp(%ast) : f32[8,3]
  %p = call @softmax(%xt) {axis = -1} : f32[6,8]
  %yt = call @transpose(%y) {perm = [1, 0]} : f32[8,6]
  %yts = call @slice(%yt) {starts = [0, 0], ends = [8, 6], steps = [1, 2]} : f32[8,3]
  %r = call @transpose(%yts) {perm = [1, 0]} : f32[3,8]
  %sum = call @reduce_sum(%at) {axes = [1], keepdims = 0} : f32[8]
  return %s0, %me, %ex, %g, %p, %r, %sum
})";

TEST_CASE("views: views of inputs, constants and results give the bits of the copies, under every plan") {
  const std::vector<std::vector<uint8_t>> inputs = {random_bytes(48, 1), random_bytes(48, 2)};
  for (compiler::PlanStrategy plan : kPlans) {
    for (int threads : {1, 2}) {
      INFO("plan " << static_cast<int>(plan) << " at " << threads << " threads");
      const Run before = run_compiled(compile(kViewsGraph, false, plan, false), inputs, threads);
      const Run after = run_compiled(compile(kViewsGraph, true, plan, false), inputs, threads);
      REQUIRE(after.outputs.size() == before.outputs.size());
      for (size_t j = 0; j < before.outputs.size(); ++j) {
        INFO("output " << j);
        if (j + 1 == before.outputs.size()) {  // a sum in another order: within rounding
          for (size_t i = 0; i < before.outputs[j].size(); i += 4) {
            float b, a;
            std::memcpy(&b, &before.outputs[j][i], 4);
            std::memcpy(&a, &after.outputs[j][i], 4);
            CHECK(a == doctest::Approx(b).epsilon(1e-5));
          }
        } else {
          CHECK(after.outputs[j] == before.outputs[j]);
        }
      }
      // Copies left: softmax's row-major operand (xt) and the returned r.
      CHECK(after.copied_bytes == 6 * 8 * 4 + 3 * 8 * 4);
      CHECK(after.copied_bytes < before.copied_bytes);
    }
  }
}

// The cost rule (docs/views.md): the 1 MiB x^T read by relu and reduce_sum
// is copied once (both read the copy, as without views), the transpose read
// by exp alone, the step slice and the expand stay views; the results are
// the bits of the program compiled with --no-views.
constexpr const char* kCostGraph = R"(
module @cost
func @main(%x: f32[512,512], %r: f32[1,512]) -> (f32[512,512], f32[256,512], f32[512,512], f32[512], f32[512,512]) {
  %t = call @transpose(%x) {perm = [1, 0]} : f32[512,512]
  %a = call @relu(%t) : f32[512,512]
  %h = call @slice(%x) {starts = [0], ends = [512], axes = [0], steps = [2]} : f32[256,512]
  %e = call @exp(%h) : f32[256,512]
  %b = call @expand(%r) {shape = [512, 512]} : f32[512,512]
  %c = call @add(%b, %x) : f32[512,512]
  %s = call @reduce_sum(%t) {axes = [1], keepdims = 0} : f32[512]
  %u = call @transpose(%c) {perm = [1, 0]} : f32[512,512]
  %n = call @neg(%u) : f32[512,512]
  return %a, %e, %c, %s, %n
})";

TEST_CASE("views: a permuted view read by two kernels is copied once and gives the bits of --no-views") {
  const std::vector<std::vector<uint8_t>> inputs = {random_bytes(512 * 512, 3), random_bytes(512, 4)};
  for (compiler::PlanStrategy plan : kPlans) {
    for (int threads : {1, 2}) {
      INFO("plan " << static_cast<int>(plan) << " at " << threads << " threads");
      const Run before = run_compiled(compile(kCostGraph, false, plan, false), inputs, threads);
      const Run after = run_compiled(compile(kCostGraph, true, plan, false), inputs, threads);
      REQUIRE(after.outputs.size() == before.outputs.size());
      for (size_t j = 0; j < before.outputs.size(); ++j) {
        INFO("output " << j);
        CHECK(after.outputs[j] == before.outputs[j]);
      }
      // Without views: both transposes, the slice and the expand (3 x 1 MiB +
      // 512 KiB); with: the copy of t only (u has one reader).
      CHECK(before.copied_bytes == 3 * (1u << 20) + (1u << 19));
      CHECK(after.copied_bytes == (1u << 20));
    }
  }
}

}  // namespace
}  // namespace hexir::testing
