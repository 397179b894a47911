// memory_budget_bench: sweeps hexir-compile --memory-budget device=B over a
// model, from the unconstrained device bytes (arena and constants) down to
// the smallest budget the compiler reaches (rematerialization, host offload,
// weights streaming: docs/memory-budget.md), and prints one row per budget:
// the arena in the file, the constants left on the device and those
// streamed from host memory, the device bytes and the host bytes a context
// allocates (measured by the device's allocation counters, host-visible
// memory counted apart), the bytes copied between the spaces and the
// instructions and FLOPs recomputed per invoke, the invoke time (median), and
// whether the outputs are bit-identical to the unconstrained run.
//
//   samples/longctx/generate.py DIR --seq 4096        (writes DIR/longctx.hxir, x.npy, expected.npy)
//   build/bench/memory_budget_bench DIR/longctx.hxir DIR/x.npy [--expected DIR/expected.npy]
//       [--runs N] [--steps N]
//
// Budgets: the unconstrained device bytes minus k/STEPS of the way to those
// of a budget of 0 (the smallest arena the compiler reaches and the
// constants it leaves on the device, read from its refusal), k = 0..STEPS,
// then that smallest budget itself and one byte below it (which must be refused).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/format/verifier.h"
#include "hexir/hal/device.h"
#include "hexir/inspect/function_plan.h"
#include "hexir/vm.h"

namespace fs = std::filesystem;
using hexir::compiler::CompileOptions;

namespace {

struct Row {
  uint64_t budget = 0;  // 0 with `unconstrained`
  bool unconstrained = false;
  bool met = false;
  std::string refusal;
  uint64_t arena = 0, lower_bound = 0, context_bytes = 0, workspace = 0;
  uint64_t host_arena = 0, context_host_bytes = 0, bytes_moved = 0, prefetches = 0;
  uint64_t device_constants = 0, streamed_constants = 0;
  uint64_t recomputed = 0, recomputed_flops = 0, instructions = 0;
  double compile_ms = 0, invoke_ms = 0;
  std::vector<uint8_t> output;
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

bool run_row(const fs::path& model, const hexir::NpyArray& input, int runs, Row& row) {
  CompileOptions options;
  if (!row.unconstrained) options.device_budget = row.budget;
  const auto t0 = std::chrono::steady_clock::now();
  auto bytes = hexir::compiler::compile_file(model, options);
  row.compile_ms = ms_since(t0);
  if (!bytes.ok()) {
    row.refusal = bytes.status().message();
    return true;
  }
  row.met = true;
  std::unique_ptr<uint8_t, decltype(&std::free)> aligned(
      static_cast<uint8_t*>(std::aligned_alloc(64, (bytes->size() + 63) / 64 * 64)), &std::free);
  std::memcpy(aligned.get(), bytes->data(), bytes->size());
  auto verified = hexir::format::verify_executable({aligned.get(), bytes->size()});
  if (!verified.ok()) return std::fprintf(stderr, "verify: %s\n", verified.status().to_string().c_str()), false;
  const hexir::inspect::FunctionStats stats = hexir::inspect::function_stats(*verified, 0);
  row.recomputed = stats.recomputed_instructions;
  row.recomputed_flops = stats.recomputed_flops;
  row.bytes_moved = stats.bytes_evicted + stats.bytes_prefetched;
  row.prefetches = stats.prefetches;
  row.instructions = verified->module->functions()->Get(0)->instruction_count();
  auto module = hexir::vm::Module::load_buffer({aligned.get(), bytes->size()});
  if (!module.ok()) return std::fprintf(stderr, "load: %s\n", module.status().to_string().c_str()), false;
  row.arena = module->arena_bytes();
  row.lower_bound = module->lower_bound_bytes();
  row.workspace = module->workspace_bytes();
  row.host_arena = module->host_arena_bytes();
  row.streamed_constants = module->streamed_constant_bytes();
  row.device_constants = module->constant_bytes() - row.streamed_constants;
  auto device = hexir::hal::create_device("cpu");
  if (!device.ok()) return false;
  auto program = hexir::vm::Program::prepare(*module, **device);
  if (!program.ok()) return std::fprintf(stderr, "prepare: %s\n", program.status().to_string().c_str()), false;
  const hexir::hal::DeviceCounters before = (*device)->counters();
  auto context = hexir::vm::Context::create(*program);
  if (!context.ok()) return false;
  const hexir::hal::DeviceCounters after = (*device)->counters();
  row.context_host_bytes = after.host_visible_bytes_allocated - before.host_visible_bytes_allocated;
  row.context_bytes = after.bytes_allocated - before.bytes_allocated - row.context_host_bytes;
  hexir::vm::TensorRef in{const_cast<uint8_t*>(input.data.data()), input.data.size(), input.type};
  std::vector<double> times;
  for (int r = 0; r <= runs; ++r) {
    const auto t = std::chrono::steady_clock::now();
    hexir::Status status = context->invoke(size_t{0}, {&in, 1});
    if (!status.ok()) return std::fprintf(stderr, "invoke: %s\n", status.to_string().c_str()), false;
    if (r > 0) times.push_back(ms_since(t));  // the first run warms up
  }
  if (context->invoke_stats().device_allocations != 0) return std::fprintf(stderr, "invoke allocated\n"), false;
  std::sort(times.begin(), times.end());
  row.invoke_ms = times[times.size() / 2];
  row.output.resize(module->function(0).outputs[0].byte_size);
  return context->read_output(0, 0, row.output).ok();
}

double mib(uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: memory_budget_bench MODEL.hxir INPUT.npy [--expected OUT.npy] [--runs N] [--steps N]\n");
    return 2;
  }
  const fs::path model = argv[1];
  std::string expected_path;
  int runs = 3, steps = 4;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--expected") expected_path = argv[i + 1];
    else if (flag == "--runs") runs = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--steps") steps = std::max(1, std::atoi(argv[i + 1]));
  }
  auto input = hexir::read_npy(argv[2]);
  if (!input.ok()) return std::fprintf(stderr, "%s\n", input.status().to_string().c_str()), 1;

  Row base;
  base.unconstrained = true;
  if (!run_row(model, *input, runs, base) || !base.met) return 1;
  // The smallest arena reached: from the refusal of a budget of 0.
  Row zero;
  zero.budget = 0;
  if (!run_row(model, *input, runs, zero)) return 1;
  uint64_t smallest = 0;
  if (!zero.met) {
    const std::string key = "the smallest device arena reached is ", beside = "beside ";
    const size_t at = zero.refusal.find(key), constants = zero.refusal.find(beside);
    if (at == std::string::npos || constants == std::string::npos)
      return std::fprintf(stderr, "%s\n", zero.refusal.c_str()), 1;
    smallest = std::strtoull(zero.refusal.c_str() + at + key.size(), nullptr, 10) +
               std::strtoull(zero.refusal.c_str() + constants + beside.size(), nullptr, 10);
  }
  const uint64_t total = (base.workspace == 0 ? base.arena : (base.arena + 63) / 64 * 64 + base.workspace) +
                         base.device_constants;
  std::vector<Row> rows = {base};
  for (int k = 1; k <= steps; ++k) {
    Row r;
    r.budget = total - (total - smallest) * static_cast<uint64_t>(k) / static_cast<uint64_t>(steps + 1);
    rows.push_back(r);
  }
  Row at_smallest, below;
  at_smallest.budget = smallest;
  below.budget = smallest > 0 ? smallest - 1 : 0;
  rows.push_back(at_smallest);
  if (smallest > 0) rows.push_back(below);
  for (size_t i = 1; i < rows.size(); ++i)
    if (!run_row(model, *input, runs, rows[i])) return 1;

  double max_error = -1;
  if (!expected_path.empty()) {
    auto expected = hexir::read_npy(expected_path);
    if (!expected.ok() || expected->data.size() != base.output.size()) return 1;
    const float* got = reinterpret_cast<const float*>(base.output.data());
    const float* want = reinterpret_cast<const float*>(expected->data.data());
    max_error = 0;
    for (size_t e = 0; e < base.output.size() / 4; ++e)
      max_error = std::max(max_error, static_cast<double>(std::fabs(got[e] - want[e])));
  }
  std::printf("model %s: %llu instructions unconstrained; unconstrained output vs numpy reference: max |error| %g\n",
              model.filename().c_str(), static_cast<unsigned long long>(base.instructions), max_error);
  std::printf("| budget (MiB) | arena (MiB) | lower bound (MiB) | constants on device (MiB) | weights streamed (MiB) | "
              "context device bytes (MiB, measured) | "
              "context host bytes (MiB, measured) | prefetches | moved MiB/invoke | "
              "recomputed instructions | recomputed GFLOP/invoke | invoke ms (median of %d) | compile ms | "
              "output vs unconstrained |\n",
              runs);
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  bool identical = true;
  for (const Row& r : rows) {
    const std::string budget = r.unconstrained ? std::string("none") : std::to_string(mib(r.budget)).substr(0, 7);
    if (!r.met) {
      const std::string key = "the smallest device arena reached is ";
      const size_t at = r.refusal.find(key);
      std::printf("| %s | refused | | | | | | | | | | | %.0f | (smallest arena reached %s bytes) |\n", budget.c_str(), r.compile_ms,
                  at == std::string::npos ? "?" : r.refusal.substr(at + key.size(), r.refusal.find(' ', at + key.size()) - at - key.size()).c_str());
      continue;
    }
    const bool same = r.output == base.output;
    identical = identical && same;
    std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %llu | %.2f | %llu | %.4f | %.1f | %.0f | %s |\n",
                budget.c_str(), mib(r.arena), mib(r.lower_bound), mib(r.device_constants), mib(r.streamed_constants),
                mib(r.context_bytes), mib(r.context_host_bytes),
                static_cast<unsigned long long>(r.prefetches), mib(r.bytes_moved),
                static_cast<unsigned long long>(r.recomputed),
                static_cast<double>(r.recomputed_flops) / 1e9, r.invoke_ms, r.compile_ms,
                same ? "bit-identical" : "DIFFERENT");
  }
  return identical ? 0 : 1;
}
