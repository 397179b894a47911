// Verifier benchmark: how verification time grows with hostile
// sizes, and what the arena overlap proof costs at load.
//
//   verify_bench [--base N] [--chain N] [--window W] [--reps R]
//
// 1. Scaling: files with N, 10N and 100N functions (each one instruction), and
//    with one function of N, 10N and 100N inputs; verify_executable's best
//    time and the time per function/input, which stays flat when the growth is
//    linear (or n log n). Default N = 4000, so 10x is 40,000.
// 2. Overlap proof: verify_executable with and without the proof on
//    (a) the transformer sample compiled by the serializer (static arena plan,
//        per-instruction workspaces or a shared one, whichever the compiler
//        picked), (b) a compiled chain of N/2 ops that keeps a window of values
//        live, and (c) a hand-built chain of --chain instructions (default
//        1,000,000) where every value stays live for W (default 64)
//        instructions, packed into W + 1 arena ranges.
// Files are built in memory; nothing is written to disk.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hexir/compiler/compiler.h"
#include "hexir/format/verifier.h"
#include "hexir/vm.h"
#include "hxe_test_builder.h"

namespace {

using Clock = std::chrono::steady_clock;
using hexir::testing::AlignedBytes;
using hexir::testing::ModuleSpec;
namespace fb = hexir::fb;

// The best of the runs: on a shared machine the minimum is the least noisy
// estimate of what the code itself costs.
double best(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// Best milliseconds of verify_executable over `reps` runs; exits on failure.
double time_verify(std::span<const uint8_t> bytes, int reps, bool prove = true) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    hexir::format::VerifyOptions options;
    options.prove_no_overlap = prove;
    const auto t0 = Clock::now();
    auto verified = hexir::format::verify_executable(bytes, options);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (!verified.ok()) {
      std::fprintf(stderr, "verify_bench: %s\n", verified.status().to_string().c_str());
      std::exit(1);
    }
  }
  return best(ms);
}

double time_load(std::span<const uint8_t> bytes, int reps) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    auto module = hexir::vm::Module::load_buffer(bytes);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (!module.ok()) {
      std::fprintf(stderr, "verify_bench: %s\n", module.status().to_string().c_str());
      std::exit(1);
    }
  }
  return best(ms);
}

hexir::testing::SlotSpec slot(fb::StorageKind storage, fb::SlotUsage usage, uint64_t offset = 0,
                              uint32_t index = 0) {
  return {"", fb::DType::F32, {4}, 16, storage, usage, offset, index};
}

// n functions f0..f{n-1}, each `relu(%x) -> output 0` over shared slots.
ModuleSpec many_functions(uint32_t n) {
  ModuleSpec m;
  m.kernels = {"relu"};
  m.slots = {slot(fb::StorageKind::Input, fb::SlotUsage::ExternalInput),
             slot(fb::StorageKind::Output, fb::SlotUsage::ExternalOutput)};
  m.operand_pool = {0, 1};
  m.functions.reserve(n);
  for (uint32_t f = 0; f < n; ++f) {
    m.instructions.push_back({0, 0, 2, 1, 0, 0, 0, 0});
    m.functions.push_back({"f" + std::to_string(f), {{"x", 0, -1}}, {{"0", 1, -1}}, f, 1, 0, 0});
  }
  m.arena_size = 0;
  return m;
}

// One function with n inputs x0..x{n-1}; output 0 = relu(x0).
ModuleSpec many_inputs(uint32_t n) {
  ModuleSpec m;
  m.kernels = {"relu"};
  hexir::testing::FunctionSpec fn{"main", {}, {}, 0, 1, 0, 0};
  for (uint32_t i = 0; i < n; ++i) {
    m.slots.push_back(slot(fb::StorageKind::Input, fb::SlotUsage::ExternalInput, 0, i));
    fn.inputs.push_back({"x" + std::to_string(i), i, -1});
  }
  m.slots.push_back(slot(fb::StorageKind::Output, fb::SlotUsage::ExternalOutput));
  fn.outputs.push_back({"0", n, -1});
  m.operand_pool = {0, n};
  m.instructions.push_back({0, 0, 2, 1, 0, 0, 0, 0});
  m.functions.push_back(std::move(fn));
  m.arena_size = 0;
  return m;
}

// v0 = relu(x); v_i = add(v_{i-1}, v_{max(0, i-w)}); y = relu(v_{n-1}).
// v_i lives at arena range i mod (w + 1): each stays live for w instructions,
// so w + 1 values are live at every step and the proof checks every one.
ModuleSpec window_chain(uint32_t n, uint32_t w) {
  ModuleSpec m;
  m.kernels = {"relu", "add"};
  m.slots.reserve(n + 2);
  m.slots.push_back(slot(fb::StorageKind::Input, fb::SlotUsage::ExternalInput));
  for (uint32_t i = 0; i < n; ++i)
    m.slots.push_back(slot(fb::StorageKind::Arena, fb::SlotUsage::Transient, (i % (w + 1)) * 64));
  m.slots.push_back(slot(fb::StorageKind::Output, fb::SlotUsage::ExternalOutput));
  auto value = [](uint32_t i) { return i + 1; };
  m.operand_pool = {0, value(0)};
  m.instructions.push_back({0, 0, 2, 1, 0, 0, 0, 0});
  for (uint32_t i = 1; i < n; ++i) {
    const uint32_t begin = static_cast<uint32_t>(m.operand_pool.size());
    m.operand_pool.insert(m.operand_pool.end(), {value(i - 1), value(i > w ? i - w : 0), value(i)});
    m.instructions.push_back({1, begin, 3, 2, 0, 0, 0, 0});
  }
  const uint32_t begin = static_cast<uint32_t>(m.operand_pool.size());
  m.operand_pool.insert(m.operand_pool.end(), {value(n - 1), n + 1});
  m.instructions.push_back({0, begin, 2, 1, 0, 0, 0, 0});
  m.functions.push_back({"main", {{"x", 0, -1}}, {{"0", n + 1, -1}}, 0, n + 1, (w + 1) * 64, (w + 1) * 16});
  m.arena_size = (w + 1) * 64;
  return m;
}

// The same window chain as .hxir text for the compiler.
std::string window_chain_source(uint32_t n, uint32_t w) {
  std::string s = "module @chain\nfunc @main(%x: f32[64]) -> (f32[64]) {\n  %v0 = call @relu(%x) : f32[64]\n";
  for (uint32_t i = 1; i < n; ++i)
    s += "  %v" + std::to_string(i) + " = call @add(%v" + std::to_string(i - 1) + ", %v" +
         std::to_string(i > w ? i - w : 0) + ") : f32[64]\n";
  s += "  %y = call @relu(%v" + std::to_string(n - 1) + ") : f32[64]\n  return %y\n}\n";
  return s;
}

void report_proof(const char* what, std::span<const uint8_t> bytes, uint64_t instructions, int reps) {
  // Interleaved, so both see the same machine load.
  std::vector<double> with_ms, without_ms;
  for (int r = 0; r < reps; ++r) {
    without_ms.push_back(time_verify(bytes, 1, false));
    with_ms.push_back(time_verify(bytes, 1, true));
  }
  const double with = best(with_ms), without = best(without_ms);
  std::printf("  %-44s %9llu instr %9.2f MiB  %10.3f ms  %10.3f ms  %+8.3f ms (%+.0f%%)\n", what,
              static_cast<unsigned long long>(instructions), static_cast<double>(bytes.size()) / (1 << 20),
              without, with, with - without, without > 0 ? 100.0 * (with - without) / without : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t base = 4000, chain = 1000000, window = 64;
  int reps = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::strtoul(argv[++i], nullptr, 10) : 0ul; };
    if (arg == "--base")
      base = static_cast<uint32_t>(next());
    else if (arg == "--chain")
      chain = static_cast<uint32_t>(next());
    else if (arg == "--window")
      window = static_cast<uint32_t>(next());
    else if (arg == "--reps")
      reps = static_cast<int>(next());
    else {
      std::fprintf(stderr, "usage: %s [--base N] [--chain N] [--window W] [--reps R]\n", argv[0]);
      return 2;
    }
  }
  if (base < 1 || chain < 2 || window < 1 || reps < 1) {
    std::fprintf(stderr, "verify_bench: sizes and reps must be positive\n");
    return 2;
  }

  std::printf("verify_bench: verify_executable, best of %d (Module::load_buffer adds signatures)\n", reps);
  std::printf("  %-10s %10s %10s %12s %12s %14s\n", "case", "scale", "n", "verify ms", "load ms",
              "verify us/n");
  for (int kind = 0; kind < 2; ++kind) {
    for (uint32_t scale : {1u, 10u, 100u}) {
      const uint32_t n = base * scale;
      const AlignedBytes file = hexir::testing::write_hxe(kind == 0 ? many_functions(n) : many_inputs(n));
      const double verify = time_verify(file.span(), reps);
      const double load = time_load(file.span(), reps);
      std::printf("  %-10s %9ux %10u %12.3f %12.3f %14.3f\n", kind == 0 ? "functions" : "inputs", scale, n,
                  verify, load, 1000.0 * verify / n);
    }
  }

  std::printf("\noverlap proof: verify_executable without / with it, best of %d\n", reps);
  std::printf("  %-44s %15s %14s  %13s  %13s  %s\n", "executable", "", "metadata", "no proof", "proof",
              "cost");
  {
    auto hxe = hexir::compiler::compile_file(HEXIR_SAMPLES_DIR "/transformer.hxir");
    if (!hxe.ok()) {
      std::fprintf(stderr, "verify_bench: %s\n", hxe.status().to_string().c_str());
      return 1;
    }
    AlignedBytes bytes(hxe->size());
    std::memcpy(bytes.data(), hxe->data(), hxe->size());
    auto v = hexir::format::verify_executable(bytes.span());
    report_proof("samples/transformer.hxir (compiled)", bytes.span(), v->module->instructions()->size(),
                 reps);
  }
  {
    const uint32_t n = std::max<uint32_t>(2, base / 2);
    auto hxe = hexir::compiler::compile_source(window_chain_source(n, window), "chain.hxir", ".");
    if (!hxe.ok()) {
      std::fprintf(stderr, "verify_bench: %s\n", hxe.status().to_string().c_str());
      return 1;
    }
    AlignedBytes bytes(hxe->size());
    std::memcpy(bytes.data(), hxe->data(), hxe->size());
    auto v = hexir::format::verify_executable(bytes.span());
    const std::string what = "compiled window chain (" + std::to_string(n) + " ops)";
    report_proof(what.c_str(), bytes.span(), v->module->instructions()->size(), reps);
  }
  {
    const AlignedBytes bytes = hexir::testing::write_hxe(window_chain(chain, window));
    const std::string what = "hand-built chain, window " + std::to_string(window);
    report_proof(what.c_str(), bytes.span(), chain + 1, reps);
  }
  return 0;
}
