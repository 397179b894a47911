// Weights packed once at Program::prepare (Device::prepare_dispatch): the
// results are the unpacked kernels' bits, the packed bytes are counted as
// prepare allocations, invoking allocates nothing, and the mapped original
// a packed copy replaced (its pages handed back) is still there for a second
// Program of the same Module, whether loaded from a file or from a buffer.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "hexir/compiler/compiler.h"
#include "hexir/vm.h"

namespace hexir::vm {
namespace {

constexpr int64_t kRows = 5, kK = 96, kN = 200;  // W: 96 x 200 floats, 75 KiB: whole pages of the file

float weight(int64_t i) { return std::sin(static_cast<float>(i) * 0.37f); }

// y = relu(x @ W), W a RODATA constant (dense in the text, so in the file).
std::string source() {
  std::string w;
  for (int64_t i = 0; i < kK * kN; ++i) w += (i ? ", " : "") + std::to_string(weight(i));
  return "module @packed\nconst @w : f32[" + std::to_string(kK) + "," + std::to_string(kN) + "] = dense [" + w +
         "]\nfunc @main(%x: f32[" + std::to_string(kRows) + "," + std::to_string(kK) + "]) -> (f32[" +
         std::to_string(kRows) + "," + std::to_string(kN) + "]) {\n  %y = call @matmul(%x, @w) : f32[" +
         std::to_string(kRows) + "," + std::to_string(kN) + "]\n  %r = call @relu(%y) : f32[" +
         std::to_string(kRows) + "," + std::to_string(kN) + "]\n  return %r\n}\n";
}

std::vector<float> run(const Program& program, const std::vector<float>& x) {
  auto context = Context::create(program);
  REQUIRE_MESSAGE(context.ok(), context.status().to_string());
  std::vector<float> y(kRows * kN, -1.0f);
  const TensorRef in{const_cast<float*>(x.data()), x.size() * 4, TensorType{DType::kF32, {kRows, kK}}};
  const TensorRef out{y.data(), y.size() * 4, TensorType{DType::kF32, {kRows, kN}}};
  REQUIRE(context->invoke("main", {&in, 1}, {&out, 1}).ok());  // first invoke: warm
  const uint64_t before = hexir::testing::thread_allocation_count();
  REQUIRE(context->invoke("main", {&in, 1}, {&out, 1}).ok());
  CHECK(hexir::testing::thread_allocation_count() == before);
  return y;
}

TEST_CASE("prepared weights: counted at prepare, the reference's values, and the file's pages still readable") {
  Result<std::vector<uint8_t>> bytes = compiler::compile_source(source(), "packed.hxir", ".");
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  char path[] = "/tmp/hexir_prepared_test_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, bytes->data(), bytes->size()) == static_cast<ssize_t>(bytes->size()));
  ::close(fd);

  std::vector<float> x(kRows * kK);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(static_cast<float>(i) * 0.11f);
  std::vector<double> want(kRows * kN);
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t j = 0; j < kN; ++j) {
      double s = 0;
      for (int64_t k = 0; k < kK; ++k) s += static_cast<double>(x[i * kK + k]) * weight(k * kN + j);
      want[i * kN + j] = s > 0 ? s : 0;
    }

  auto device = hal::create_device("cpu", {.threads = 2});
  REQUIRE(device.ok());
  auto module = Module::load_file(path);
  REQUIRE_MESSAGE(module.ok(), module.status().to_string());
  const uint64_t allocated = (*device)->counters().bytes_allocated;
  auto first = Program::prepare(*module, **device);
  REQUIRE_MESSAGE(first.ok(), first.status().to_string());
  // The packed B: at least the weights' bytes, allocated through the device.
  CHECK((*device)->counters().bytes_allocated - allocated >= static_cast<uint64_t>(kK * kN * 4));
  const std::vector<float> y = run(*first, x);
  for (size_t i = 0; i < want.size(); ++i)
    REQUIRE_MESSAGE(std::abs(y[i] - want[i]) <= 1e-4 * (1 + std::abs(want[i])), "element " << i);

  // A second Program of the same Module reads the weights again (from the
  // file: the first one handed their pages back) and packs the same values.
  auto second = Program::prepare(*module, **device);
  REQUIRE(second.ok());
  CHECK(run(*second, x) == y);
  // Loaded from a buffer (nothing is handed back there): the same bits.
  std::unique_ptr<uint8_t, decltype(&std::free)> copy(
      static_cast<uint8_t*>(std::aligned_alloc(64, (bytes->size() + 63) / 64 * 64)), &std::free);
  std::memcpy(copy.get(), bytes->data(), bytes->size());
  auto from_buffer = Module::load_buffer({copy.get(), bytes->size()});
  REQUIRE_MESSAGE(from_buffer.ok(), from_buffer.status().to_string());
  auto third = Program::prepare(*from_buffer, **device);
  REQUIRE(third.ok());
  CHECK(run(*third, x) == y);
  std::remove(path);
}

// Three matmuls read the same weights: two of the same geometry (an unrolled
// recurrence's steps) and one with fewer rows (another plan, the same packed B).
std::string shared_source() {
  std::string w;
  for (int64_t i = 0; i < kK * kN; ++i) w += (i ? ", " : "") + std::to_string(weight(i));
  const std::string k = std::to_string(kK), n = std::to_string(kN), rows = std::to_string(kRows);
  return "module @shared\nconst @w : f32[" + k + "," + n + "] = dense [" + w + "]\nfunc @main(%x: f32[" + rows +
         "," + k + "], %x2: f32[" + rows + "," + k + "], %x3: f32[2," + k + "]) -> (f32[" + rows + "," + n +
         "], f32[" + rows + "," + n + "], f32[2," + n + "]) {\n  %a = call @matmul(%x, @w) : f32[" + rows + "," + n +
         "]\n  %b = call @matmul(%x2, @w) : f32[" + rows + "," + n + "]\n  %c = call @matmul(%x3, @w) : f32[2," + n +
         "]\n  return %a, %b, %c\n}\n";
}

TEST_CASE("prepared weights are shared: one copy per constant and packing, however many read it") {
  Result<std::vector<uint8_t>> bytes = compiler::compile_source(shared_source(), "shared.hxir", ".");
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  auto module = Module::load_buffer({bytes->data(), bytes->size()}, {.copy_weights = true});
  REQUIRE_MESSAGE(module.ok(), module.status().to_string());
  auto device = hal::create_device("cpu", {.threads = 1});
  REQUIRE(device.ok());
  auto program = Program::prepare(*module, **device);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  // One packed copy of W for 5 rows and 2 (the packing reads B's geometry only), not three.
  CHECK(program->prepare_stats().device_allocations == 1);

  std::vector<std::vector<float>> x;
  for (int64_t rows : {kRows, kRows, int64_t{2}}) {
    x.emplace_back(static_cast<size_t>(rows * kK));
    for (size_t i = 0; i < x.back().size(); ++i) x.back()[i] = std::cos(static_cast<float>(i + x.size()) * 0.11f);
  }
  std::vector<std::vector<float>> y{std::vector<float>(kRows * kN), std::vector<float>(kRows * kN),
                                    std::vector<float>(2 * kN)};
  std::vector<TensorRef> in, out;
  for (size_t t = 0; t < 3; ++t) {
    const int64_t rows = static_cast<int64_t>(x[t].size()) / kK;
    in.push_back({x[t].data(), x[t].size() * 4, TensorType{DType::kF32, {rows, kK}}});
    out.push_back({y[t].data(), y[t].size() * 4, TensorType{DType::kF32, {rows, kN}}});
  }
  auto context = Context::create(*program);
  REQUIRE_MESSAGE(context.ok(), context.status().to_string());
  const Status invoked = context->invoke("main", in, out);
  REQUIRE_MESSAGE(invoked.ok(), invoked.to_string());
  for (size_t t = 0; t < 3; ++t) {
    const int64_t rows = static_cast<int64_t>(x[t].size()) / kK;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < kN; ++j) {
        double s = 0;
        for (int64_t k = 0; k < kK; ++k) s += static_cast<double>(x[t][i * kK + k]) * weight(k * kN + j);
        REQUIRE_MESSAGE(std::abs(y[t][i * kN + j] - s) <= 1e-4 * (1 + std::abs(s)), "output " << t << " element " << i);
      }
  }
}

// A language model's prefill and decode functions read the same weights with
// 8 rows and with 1: the packed form depends on the weights' geometry only,
// so the program keeps one copy for both functions.
std::string two_functions_source(bool with_decode) {
  std::string w;
  for (int64_t i = 0; i < kK * kN; ++i) w += (i ? ", " : "") + std::to_string(weight(i));
  const std::string k = std::to_string(kK), n = std::to_string(kN);
  std::string text = "module @lm\nconst @w : f32[" + k + "," + n + "] = dense [" + w + "]\n" +
                     "func @prefill_8(%x: f32[8," + k + "]) -> (f32[8," + n +
                     "]) {\n  %y = call @matmul(%x, @w) : f32[8," + n + "]\n  return %y\n}\n";
  if (with_decode)
    text += "func @decode(%x: f32[1," + k + "]) -> (f32[1," + n +
            "]) {\n  %y = call @matmul(%x, @w) : f32[1," + n + "]\n  return %y\n}\n";
  return text;
}

Result<Program> prepare_source(const std::string& text, hal::Device& device, std::optional<Module>& module) {
  Result<std::vector<uint8_t>> bytes = compiler::compile_source(text, "lm.hxir", ".");
  if (!bytes.ok()) return bytes.status();
  HEXIR_ASSIGN_OR_RETURN(Module loaded,
                         Module::load_buffer({bytes->data(), bytes->size()}, {.copy_weights = true}));
  module.emplace(std::move(loaded));
  return Program::prepare(*module, device);
}

TEST_CASE("prepared weights across functions: a prefill's 8 rows and a decode's 1 share one copy") {
  auto device = hal::create_device("cpu", {.threads = 1});
  REQUIRE(device.ok());
  std::optional<Module> alone_module, both_module;
  auto alone = prepare_source(two_functions_source(false), **device, alone_module);
  REQUIRE_MESSAGE(alone.ok(), alone.status().to_string());
  auto both = prepare_source(two_functions_source(true), **device, both_module);
  REQUIRE_MESSAGE(both.ok(), both.status().to_string());
  // One packed copy of W (at least its 96 x 200 floats), not one per function.
  CHECK(alone->prepared_bytes() >= static_cast<uint64_t>(kK * kN * 4));
  CHECK(both->prepared_bytes() == alone->prepared_bytes());
  MESSAGE("prepared bytes: prefill alone ", alone->prepared_bytes(), ", prefill and decode ",
          both->prepared_bytes());
  CHECK(both->prepare_stats().device_allocations == alone->prepare_stats().device_allocations);

  auto context = Context::create(*both);
  REQUIRE_MESSAGE(context.ok(), context.status().to_string());
  for (const int64_t rows : {int64_t{8}, int64_t{1}}) {
    std::vector<float> x(static_cast<size_t>(rows * kK)), y(static_cast<size_t>(rows * kN), -1.0f);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = std::cos(static_cast<float>(i) * 0.07f + static_cast<float>(rows));
    const TensorRef in{x.data(), x.size() * 4, TensorType{DType::kF32, {rows, kK}}};
    const TensorRef out{y.data(), y.size() * 4, TensorType{DType::kF32, {rows, kN}}};
    const Status invoked = context->invoke(rows == 8 ? "prefill_8" : "decode", {&in, 1}, {&out, 1});
    REQUIRE_MESSAGE(invoked.ok(), invoked.to_string());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < kN; ++j) {
        double s = 0;
        for (int64_t k = 0; k < kK; ++k) s += static_cast<double>(x[i * kK + k]) * weight(k * kN + j);
        REQUIRE_MESSAGE(std::abs(y[i * kN + j] - s) <= 1e-4 * (1 + std::abs(s)),
                        rows << " rows, element " << i);
      }
  }
}

TEST_CASE("prepared weights across functions: a convolution over two image sizes packs once") {
  auto device = hal::create_device("cpu", {.threads = 1});
  REQUIRE(device.ok());
  // w: 16 x 8 x 3 x 3, over 8 x 8 and 16 x 16 images (neither a stem nor a few pixels).
  std::string w;
  for (int i = 0; i < 16 * 8 * 9; ++i) w += (i ? ", " : "") + std::to_string(weight(i));
  const std::string head = "module @convs\nconst @w : f32[16,8,3,3] = dense [" + w + "]\n";
  const std::string small =
      "func @small(%x: f32[1,8,8,8]) -> (f32[1,16,8,8]) {\n  %y = call @conv2d(%x, @w) {pads = [1, 1, 1, 1]} "
      ": f32[1,16,8,8]\n  return %y\n}\n";
  const std::string large =
      "func @large(%x: f32[1,8,16,16]) -> (f32[1,16,16,16]) {\n  %y = call @conv2d(%x, @w) {pads = [1, 1, 1, "
      "1]} : f32[1,16,16,16]\n  return %y\n}\n";
  std::optional<Module> one_module, two_module;
  auto one = prepare_source(head + small, **device, one_module);
  REQUIRE_MESSAGE(one.ok(), one.status().to_string());
  auto two = prepare_source(head + small + large, **device, two_module);
  REQUIRE_MESSAGE(two.ok(), two.status().to_string());
  CHECK(one->prepared_bytes() > 0);
  CHECK(two->prepared_bytes() == one->prepared_bytes());
}

}  // namespace
}  // namespace hexir::vm
