// The decoder sample (samples/decoder) two ways, in one run:
//  - generate.hxir: the prompt and every decode step in ONE invoke (a `for`
//    loop run by the VM's program counter, the KV cache carried in place);
//  - step.hxir: one invoke per position, driven from here (the host loop a
//    runtime without control flow needs: token in, token out, cache donated).
// Prints tokens per second (median over rounds), device allocations and
// uploads per token, and the arena of each against its lower bound; checks
// both generate the numpy reference's tokens.
//
//   decoder_bench [--rounds R] [--threads T] [--plan arena|free-at-last-use]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using hexir::NpyArray;
using hexir::vm::TensorRef;
using hexir::compiler::PlanStrategy;

const fs::path kDecoder = fs::path(HEXIR_SAMPLES_DIR) / "decoder";

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "decoder_bench: %s\n", what.c_str());
  std::exit(1);
}

NpyArray read(const std::string& name) {
  auto array = hexir::read_npy((kDecoder / name).string());
  if (!array.ok()) die(name + ": " + array.status().to_string());
  return std::move(array).value();
}

template <typename T>
std::vector<T> values_of(const NpyArray& a) {
  std::vector<T> out(a.data.size() / sizeof(T));
  std::memcpy(out.data(), a.data.data(), out.size() * sizeof(T));
  return out;
}

TensorRef ref_of(NpyArray& a) { return TensorRef{a.data.data(), a.data.size(), a.type}; }

struct Loaded {
  std::unique_ptr<uint8_t, decltype(&std::free)> bytes{nullptr, &std::free};
  std::optional<hexir::vm::Module> module;
  std::optional<hexir::vm::Program> program;
  std::optional<hexir::vm::Context> context;
  size_t function = 0;
};

void load(Loaded& l, const fs::path& source, PlanStrategy plan, hexir::hal::Device& device,
          const char* function) {
  hexir::compiler::CompileOptions options;
  options.plan = plan;
  auto hxe = hexir::compiler::compile_file(source, options);
  if (!hxe.ok()) die("compiling " + source.string() + ": " + hxe.status().to_string());
  l.bytes.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (hxe->size() + 63) / 64 * 64)));
  std::memcpy(l.bytes.get(), hxe->data(), hxe->size());
  auto module = hexir::vm::Module::load_buffer({l.bytes.get(), hxe->size()});
  if (!module.ok()) die("loading: " + module.status().to_string());
  l.module.emplace(std::move(module).value());
  auto program = hexir::vm::Program::prepare(*l.module, device);
  if (!program.ok()) die("prepare: " + program.status().to_string());
  l.program.emplace(std::move(program).value());
  auto context = hexir::vm::Context::create(*l.program);
  if (!context.ok()) die("context: " + context.status().to_string());
  l.context.emplace(std::move(context).value());
  auto f = l.module->find_function(function);
  if (!f.ok()) die(f.status().to_string());
  l.function = *f;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 200, threads = 1;
  PlanStrategy plan = PlanStrategy::kArena;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--plan" && i + 1 < argc) {
      const std::string p = argv[++i];
      if (p == "arena") plan = PlanStrategy::kArena;
      else if (p == "free-at-last-use") plan = PlanStrategy::kFreeAtLastUse;
      else die("--plan: arena or free-at-last-use, got " + p);
    } else {
      die("usage: decoder_bench [--rounds R] [--threads T] [--plan arena|free-at-last-use]");
    }
  }
  if (!fs::exists(kDecoder / "generate.hxir")) die("no samples/decoder (expected at " + kDecoder.string() + ")");
  const std::vector<int64_t> prompt = values_of<int64_t>(read("prompt.npy"));
  NpyArray prompt_in = read("prompt.npy"), steps_in = read("steps.npy"), cache0 = read("cache0.npy");
  const int64_t steps = values_of<int64_t>(steps_in).at(0);
  const std::vector<int64_t> expected = values_of<int64_t>(read("expected_tokens.npy"));
  const int64_t positions = static_cast<int64_t>(prompt.size()) + steps - 1;

  auto device = hexir::hal::create_device("cpu?threads=" + std::to_string(threads));
  if (!device.ok()) die(device.status().to_string());
  Loaded gen, step;
  load(gen, kDecoder / "generate.hxir", plan, **device, "generate");
  load(step, kDecoder / "step.hxir", plan, **device, "step");

  // One invoke: the whole generation.
  NpyArray cache = cache0, tokens;
  tokens.type = gen.module->function(gen.function).outputs[0].type;
  tokens.data.assign(gen.module->function(gen.function).outputs[0].byte_size, 0);
  std::vector<double> gen_ms;
  hexir::hal::DeviceCounters before = (*device)->counters();
  for (int r = 0; r < rounds; ++r) {
    cache = cache0;  // the cache is donated: written in place
    TensorRef inputs[] = {ref_of(prompt_in), ref_of(cache), ref_of(steps_in)};
    TensorRef outputs[] = {ref_of(tokens), ref_of(cache)};
    const auto t0 = Clock::now();
    auto s = gen.context->invoke(gen.function, inputs, outputs);
    gen_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (!s.ok()) die("generate: " + s.to_string());
  }
  hexir::hal::DeviceCounters after = (*device)->counters();
  const double gen_allocs = double(after.allocations - before.allocations) / (double(rounds) * double(steps));
  const double gen_uploads = double(after.uploads - before.uploads) / (double(rounds) * double(steps));
  const bool gen_ok = values_of<int64_t>(tokens) == expected;

  // One invoke per position, driven from the host.
  NpyArray next;
  next.type = step.module->function(step.function).outputs[0].type;
  next.data.assign(step.module->function(step.function).outputs[0].byte_size, 0);
  NpyArray token_in = next, pos_in = steps_in;
  std::vector<double> step_ms;
  std::vector<int64_t> generated;
  before = (*device)->counters();
  for (int r = 0; r < rounds; ++r) {
    cache = cache0;
    generated.clear();
    int64_t token = prompt[0];
    const auto t0 = Clock::now();
    for (int64_t pos = 0; pos < positions; ++pos) {
      if (pos < static_cast<int64_t>(prompt.size())) token = prompt[static_cast<size_t>(pos)];
      std::memcpy(token_in.data.data(), &token, sizeof token);
      std::memcpy(pos_in.data.data(), &pos, sizeof pos);
      TensorRef inputs[] = {ref_of(token_in), ref_of(pos_in), ref_of(cache)};
      TensorRef outputs[] = {ref_of(next), ref_of(cache)};
      auto s = step.context->invoke(step.function, inputs, outputs);
      if (!s.ok()) die("step: " + s.to_string());
      std::memcpy(&token, next.data.data(), sizeof token);
      if (pos >= static_cast<int64_t>(prompt.size()) - 1) generated.push_back(token);
    }
    step_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  after = (*device)->counters();
  const double step_allocs = double(after.allocations - before.allocations) / (double(rounds) * double(steps));
  const double step_uploads = double(after.uploads - before.uploads) / (double(rounds) * double(steps));
  const bool step_ok = generated == expected;

  const double g = median(gen_ms), s = median(step_ms);
  std::printf("decoder sample: prompt %zu, %lld tokens (%lld positions), %d rounds, %d thread(s), plan %s\n",
              prompt.size(), static_cast<long long>(steps), static_cast<long long>(positions), rounds, threads,
              plan == PlanStrategy::kArena ? "arena" : "free-at-last-use");
  std::printf("| driver | median ms per generation | tokens/s | allocations per token | uploads per token | arena B | lower bound B | tokens |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---|\n");
  std::printf("| generate.hxir: one invoke, `for` loop | %.3f | %.0f | %.2f | %.2f | %llu | %llu | %s |\n", g,
              double(steps) / (g / 1e3), gen_allocs, gen_uploads,
              static_cast<unsigned long long>(gen.module->arena_bytes()),
              static_cast<unsigned long long>(gen.module->lower_bound_bytes()), gen_ok ? "match" : "DIFFER");
  std::printf("| step.hxir: one invoke per position | %.3f | %.0f | %.2f | %.2f | %llu | %llu | %s |\n", s,
              double(steps) / (s / 1e3), step_allocs, step_uploads,
              static_cast<unsigned long long>(step.module->arena_bytes()),
              static_cast<unsigned long long>(step.module->lower_bound_bytes()), step_ok ? "match" : "DIFFER");
  std::printf("step-by-step / one invoke: %.2fx the time\n", s / g);
  return gen_ok && step_ok ? 0 : 1;
}
