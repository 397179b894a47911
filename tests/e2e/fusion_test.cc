// Fused epilogues end to end: every sample compiled with and without fusion
// runs to the same bits on the cpu (1 and 2 threads), with fewer
// instructions and an arena no larger, and the fused file's profile names
// only the instructions that remain.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"
#include "loaded.h"

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

// `source` compiled with --weights `format`, loaded, and its instructions' operators.
struct CompressedCompile {
  std::vector<uint8_t> bytes;
  std::unique_ptr<hexir::testing::Loaded> loaded;
  std::vector<std::string> ops;
  bool int4 = false;
};
CompressedCompile compile_with_weights(const std::string& source, const char* format) {
  hexir::compiler::CompileOptions options;
  REQUIRE(hexir::compiler::parse_weight_format(format, options.weights).ok());
  auto bytes = hexir::compiler::compile_source(source, "m.hxir", ".", options);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  CompressedCompile c;
  c.int4 = options.weights.kind == hexir::compiler::WeightFormat::Kind::kInt4;
  c.bytes = std::move(*bytes);
  c.loaded = hexir::testing::load_compiled(c.bytes, 1);
  REQUIRE(c.loaded);
  for (const auto& info : c.loaded->module->instructions(0)) c.ops.emplace_back(info.op);
  return c;
}

}  // namespace

TEST_CASE("--weights int8 / int4: constant matmul weights stored per output channel or per group, read by quantized_matmul / int4_matmul") {
  // x [2, 64] @ w [64, 96] and x @ v^T (transpose_b, v [96, 64]), each weight 6144 elements.
  auto dense = [](int64_t rows, int64_t cols, float step) {
    std::string text = "dense [";
    for (int64_t r = 0; r < rows; ++r) {
      text += r ? ", [" : "[";
      for (int64_t c = 0; c < cols; ++c)
        text += (c ? ", " : "") + std::to_string(step * static_cast<float>((r * 31 + c * 17) % 41 - 20));
      text += "]";
    }
    return text + "]";
  };
  const std::string source = "module @m\nconst @w : f32[64,96] = " + dense(64, 96, 0.01f) +
                             "\nconst @v : f32[96,64] = " + dense(96, 64, 0.02f) + R"(
func @main(%x: f32[2,64]) -> (f32[2,96], f32[2,96]) {
  %y = call @matmul(%x, @w) : f32[2,96]
  %z = call @matmul(%x, @v) {transpose_b = 1} : f32[2,96]
  return %y, %z
}
)";
  using hexir::compiler::CompileOptions;
  auto plain_bytes = hexir::compiler::compile_source(source, "m.hxir", ".", CompileOptions{});
  REQUIRE(plain_bytes.ok());
  auto plain = hexir::testing::load_compiled(*plain_bytes, 1);
  std::vector<float> x(128);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.05f * static_cast<float>(static_cast<int>(i % 13) - 6);
  auto run = [&](const hexir::testing::Loaded& l) {
    auto context = hexir::vm::Context::create(*l.program);
    REQUIRE(context.ok());
    std::vector<float> y(192), z(192);
    hexir::vm::TensorRef in[] = {{x.data(), 512, {hexir::DType::kF32, {2, 64}}}};
    hexir::vm::TensorRef out[] = {{y.data(), 768, {hexir::DType::kF32, {2, 96}}},
                                  {z.data(), 768, {hexir::DType::kF32, {2, 96}}}};
    REQUIRE(context->invoke(0, in, out).ok());
    y.insert(y.end(), z.begin(), z.end());
    return y;
  };
  const std::vector<float> want = run(*plain);
  for (const char* format : {"int8", "int4", "int4:group=64"}) {
    INFO(format);
    const CompressedCompile c = compile_with_weights(source, format);
    const bool int4 = c.int4;
    const std::vector<std::string>& ops = c.ops;
    // 4 bytes a weight became 1 (int8) or 1/2 (int4), and the scales.
    CHECK(c.bytes.size() + (int4 ? 3 * 6144 + 6144 : 3 * 6144) < plain_bytes->size());
    const hexir::testing::Loaded& quantized = *c.loaded;
    const std::string op = int4 ? "int4_matmul" : "quantized_matmul";
    CHECK(ops == std::vector<std::string>{op, op});
    const std::vector<float> got = run(quantized);
    // Per output, the error is at most sum |x| times a weight's: half a step
    // of (largest |w| of the row) / 127 for int8; for int4 a whole step of
    // (largest |w| of the group) / 8 (its extreme is -8 steps: the opposite
    // sign clamps at 7). Largest |w|: 0.2 for w, 0.4 for v.
    for (size_t i = 0; i < want.size(); ++i) {
      const float largest_w = i < 192 ? 0.2f : 0.4f;
      double sum_abs_x = 0.0;
      for (int k = 0; k < 64; ++k) sum_abs_x += std::fabs(x[static_cast<size_t>((i % 192) / 96 * 64 + k)]);
      const double bound = sum_abs_x * largest_w / (int4 ? 8.0 : 254.0) * 1.001 + 1e-5;
      CHECK(std::fabs(got[i] - want[i]) <= bound);
    }
  }
}

TEST_CASE("--weights int8 / int4: an embedding gathers the stored rows and their scales; a tied head shares the one copy") {
  using hexir::compiler::CompileOptions;
  std::string table = "dense [";
  for (int r = 0; r < 128; ++r) {
    table += r ? ", [" : "[";
    for (int c = 0; c < 64; ++c) table += (c ? ", " : "") + std::to_string(0.01 * ((r * 13 + c * 5) % 37 - 18));
    table += "]";
  }
  const std::string source = "module @m\nconst @wte : f32[128,64] = " + table + "]\n" + R"(func @main(%ids: i64[1,3]) -> (f32[1,3,64], f32[1,3,128]) {
  %e = call @gather(@wte, %ids) {axis = 0} : f32[1,3,64]
  %logits = call @matmul(%e, @wte) {transpose_b = 1} : f32[1,3,128]
  return %e, %logits
}
)";
  auto plain_bytes = hexir::compiler::compile_source(source, "m.hxir", ".", CompileOptions{});
  REQUIRE(plain_bytes.ok());
  auto plain = hexir::testing::load_compiled(*plain_bytes, 1);
  auto run = [](const hexir::testing::Loaded& l, std::vector<int64_t> ids) {
    auto context = hexir::vm::Context::create(*l.program);
    REQUIRE(context.ok());
    std::vector<float> e(192), logits(384);
    hexir::vm::TensorRef in[] = {{ids.data(), 24, {hexir::DType::kI64, {1, 3}}}};
    hexir::vm::TensorRef out[] = {{e.data(), 768, {hexir::DType::kF32, {1, 3, 64}}},
                                  {logits.data(), 1536, {hexir::DType::kF32, {1, 3, 128}}}};
    const hexir::Status status = context->invoke(0, in, out);
    REQUIRE_MESSAGE(status.ok(), status.to_string());
    e.insert(e.end(), logits.begin(), logits.end());
    return e;
  };
  for (const char* format : {"int8", "int4"}) {
    INFO(format);
    const CompressedCompile c = compile_with_weights(source, format);
    const bool int4 = c.int4;
    const std::vector<std::string>& ops = c.ops;
    // One copy (int8: 8 KiB and 128 scales; int4: 4 KiB and 256 f16 scales) instead of the 32 KiB f32 table.
    CHECK(c.bytes.size() + (int4 ? 24000 : 20000) < plain_bytes->size());
    const hexir::testing::Loaded& quantized = *c.loaded;
    if (int4) CHECK(ops == std::vector<std::string>{"gather", "gather", "dequantize_int4", "int4_matmul"});
    // int8: half a step of a row (its largest |w| 0.18 / 127); int4: a step of a group (0.18 / 8:
    // its extreme is -8 steps, so +0.18 clamps to 7). The logits sum 64 products of a quantized e
    // and w: at most 64 (|e| dw + de |w|).
    const float error = int4 ? 0.18f / 8.0f : 0.18f / 254.0f;
    for (const std::vector<int64_t>& ids : {std::vector<int64_t>{0, 127, 5}, std::vector<int64_t>{-1, 64, 3}}) {
      const std::vector<float> want = run(*plain, ids), got = run(quantized, ids);
      for (size_t i = 0; i < 192; ++i) CHECK(std::fabs(got[i] - want[i]) <= error + 1e-6f);
      for (size_t i = 192; i < want.size(); ++i) CHECK(std::fabs(got[i] - want[i]) <= 64 * 0.37f * error + 1e-5f);
    }
  }
}

TEST_CASE("trim_dead_taps: atrous windows whose edge taps only fall on the padding run as their live taps, same values") {
  // DeepLabV3's ASPP shape, small: a 3x3 at dilation 6 on a 5 x 5 map (pads 6)
  // reads only its centre tap (a 1x1); at dilation 2 on 5 x 5 every tap is
  // live; a 1x5 at dilation 3 with pads 6 on 5 columns keeps its 3 middle taps;
  // a 3x3 at stride 2, dilation 5, pads 5 reads only its centre.
  auto dense = [](int64_t count, float step) {
    std::string text = "dense [";
    for (int64_t i = 0; i < count; ++i)
      text += (i ? ", " : "") + std::to_string(step * static_cast<float>((i * 37) % 23 - 11));
    return text + "]";
  };
  const std::string source =
      "module @m\nconst @w1 : f32[4,3,3,3] = " + dense(108, 0.05f) + "\nconst @w2 : f32[4,3,3,3] = " +
      dense(108, 0.03f) + "\nconst @w3 : f32[4,3,1,5] = " + dense(60, 0.04f) + "\nconst @w4 : f32[4,3,3,3] = " +
      dense(108, 0.02f) + "\nconst @b : f32[4] = dense [0.1, -0.2, 0.3, 0.0]" + R"(
func @main(%x: f32[1,3,5,5]) -> (f32[1,4,5,5], f32[1,4,5,5], f32[1,4,5,5], f32[1,4,3,3]) {
  %a = call @conv2d(%x, @w1, @b) {pads = [6, 6, 6, 6], dilations = [6, 6], activation = "relu"} : f32[1,4,5,5]
  %c = call @conv2d(%x, @w2) {pads = [2, 2, 2, 2], dilations = [2, 2]} : f32[1,4,5,5]
  %d = call @conv2d(%x, @w3) {pads = [0, 6, 0, 6], dilations = [1, 3]} : f32[1,4,5,5]
  %e = call @conv2d(%x, @w4) {pads = [5, 5, 5, 5], dilations = [5, 5], strides = [2, 2]} : f32[1,4,3,3]
  return %a, %c, %d, %e
}
)";
  using hexir::compiler::CompileOptions;
  CompileOptions plain_options;
  plain_options.fuse_epilogues = false;
  auto plain_bytes = hexir::compiler::compile_source(source, "m.hxir", ".", plain_options);
  auto trimmed_bytes = hexir::compiler::compile_source(source, "m.hxir", ".", CompileOptions{});
  REQUIRE(plain_bytes.ok());
  REQUIRE(trimmed_bytes.ok());
  // The cut weights: 8 of w1's 9 taps, 2 of w3's 5, 8 of w4's 9 (x 12 floats each).
  CHECK(plain_bytes->size() >= trimmed_bytes->size() + (8 + 2 + 8) * 12 * 4 - 256);  // less alignment padding
  std::vector<float> x(75);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(static_cast<int>(i * 7 % 19) - 9);
  for (int threads : {1, 2}) {
    auto plain = hexir::testing::load_compiled(*plain_bytes, threads);
    auto trimmed = hexir::testing::load_compiled(*trimmed_bytes, threads);
    auto run = [&](const hexir::testing::Loaded& l) {
      auto context = hexir::vm::Context::create(*l.program);
      REQUIRE(context.ok());
      std::vector<float> y(100 * 3 + 36);
      hexir::vm::TensorRef in[] = {{x.data(), 300, {hexir::DType::kF32, {1, 3, 5, 5}}}};
      hexir::vm::TensorRef out[] = {{y.data(), 400, {hexir::DType::kF32, {1, 4, 5, 5}}},
                                    {y.data() + 100, 400, {hexir::DType::kF32, {1, 4, 5, 5}}},
                                    {y.data() + 200, 400, {hexir::DType::kF32, {1, 4, 5, 5}}},
                                    {y.data() + 300, 144, {hexir::DType::kF32, {1, 4, 3, 3}}}};
      REQUIRE(context->invoke(0, in, out).ok());
      return y;
    };
    const std::vector<float> want = run(*plain), got = run(*trimmed);
    // Equal values (only an exact zero's sign may differ: the dropped products were zeros).
    for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == want[i]);
    // Not all zeros: the windows read the image.
    CHECK(std::count(want.begin(), want.end(), 0.0f) < 100);
  }
}
