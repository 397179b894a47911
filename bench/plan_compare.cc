// plan_compare: compiles every sample under the three memory plans and prints
// side by side what each needs: the naive arena, the free-at-last-use peak
// (measured at run time: the most bytes of values held at once during an
// invoke), the arena plan, and the lower bound (largest sum of bytes live at
// one instruction) with and without in-place aliasing. Each schedule is a row.
//
//   build/bench/plan_compare [SAMPLES_DIR]     (default: the source tree's samples/)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/vm.h"

namespace fs = std::filesystem;
using hexir::compiler::CompileOptions;
using hexir::compiler::PlanStrategy;
using hexir::compiler::Schedule;

namespace {

struct Measured {
  uint64_t arena = 0;
  uint64_t lower_bound = 0;
  uint64_t peak = 0;         // free-at-last-use: measured
  uint64_t allocations = 0;  // device allocations of one invoke
  std::vector<std::vector<uint8_t>> outputs;
};

bool fail(const std::string& what, const hexir::Status& status) {
  std::fprintf(stderr, "plan_compare: %s: %s\n", what.c_str(), status.message().c_str());
  return false;
}

bool measure(const fs::path& sample, const CompileOptions& options, Measured* out) {
  auto bytes = hexir::compiler::compile_file(sample, options);
  if (!bytes.ok()) return fail(sample.string(), bytes.status());
  // load_buffer wants 64-byte aligned memory.
  std::unique_ptr<uint8_t, decltype(&std::free)> aligned(
      static_cast<uint8_t*>(std::aligned_alloc(64, (bytes->size() + 63) / 64 * 64)), &std::free);
  std::memcpy(aligned.get(), bytes->data(), bytes->size());
  auto module = hexir::vm::Module::load_buffer({aligned.get(), bytes->size()});
  if (!module.ok()) return fail(sample.string(), module.status());
  auto device = hexir::hal::create_device("cpu");
  if (!device.ok()) return fail("cpu", device.status());
  auto program = hexir::vm::Program::prepare(*module, **device);
  if (!program.ok()) return fail(sample.string(), program.status());
  auto context = hexir::vm::Context::create(*program);
  if (!context.ok()) return fail(sample.string(), context.status());
  const auto& sig = module->function(0);
  std::vector<hexir::NpyArray> inputs;
  std::vector<hexir::vm::TensorRef> refs;
  for (const auto& in : sig.inputs) {
    auto array =
        hexir::read_npy((sample.parent_path() / sample.stem() / ("input_" + in.name + ".npy")).string());
    if (!array.ok()) return fail(sample.string(), array.status());
    inputs.push_back(std::move(array).value());
  }
  for (auto& array : inputs) refs.push_back({array.data.data(), array.data.size(), array.type});
  hexir::Status status = context->invoke(0, refs);
  if (!status.ok()) return fail(sample.string(), status);
  out->arena = module->arena_bytes();
  out->lower_bound = module->lower_bound_bytes();
  out->peak = context->invoke_stats().peak_live_bytes;
  out->allocations = context->invoke_stats().device_allocations;
  for (size_t j = 0; j < sig.outputs.size(); ++j) {
    std::vector<uint8_t> result(sig.outputs[j].byte_size);
    status = context->read_output(0, j, result);
    if (!status.ok()) return fail(sample.string(), status);
    out->outputs.push_back(std::move(result));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path samples = argc > 1 ? fs::path(argv[1]) : fs::path(HEXIR_SAMPLES_DIR);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(samples))
    if (entry.path().extension() == ".hxir") files.push_back(entry.path());
  std::sort(files.begin(), files.end());

  std::printf(
      "| sample | schedule | naive | free-at-last-use peak (allocs/invoke) | arena | lower bound | "
      "lower bound, no aliasing | arena, no aliasing |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
  bool identical = true;
  for (const fs::path& file : files) {
    for (Schedule schedule : {Schedule::kSource, Schedule::kMemory}) {
      Measured naive, dynamic, arena, plain;
      CompileOptions o;
      o.schedule = schedule;
      o.plan = PlanStrategy::kNaive;
      if (!measure(file, o, &naive)) return 1;
      o.plan = PlanStrategy::kFreeAtLastUse;
      if (!measure(file, o, &dynamic)) return 1;
      o.plan = PlanStrategy::kArena;
      if (!measure(file, o, &arena)) return 1;
      o.in_place = false;
      if (!measure(file, o, &plain)) return 1;
      identical = identical && naive.outputs == dynamic.outputs && naive.outputs == arena.outputs &&
                  naive.outputs == plain.outputs;
      std::printf("| %s | %s | %llu | %llu (%llu) | %llu | %llu | %llu | %llu |\n", file.stem().c_str(),
                  schedule == Schedule::kSource ? "source" : "memory", (unsigned long long)naive.arena,
                  (unsigned long long)dynamic.peak, (unsigned long long)dynamic.allocations,
                  (unsigned long long)arena.arena, (unsigned long long)arena.lower_bound,
                  (unsigned long long)plain.lower_bound, (unsigned long long)plain.arena);
    }
  }
  std::printf("\noutputs bit-identical across plans: %s\n", identical ? "yes" : "NO");
  return identical ? 0 : 1;
}
