// The decoder sample (samples/decoder/): step.hxir driven token by
// token, the KV cache donated and passed back as its own output, and
// generate.hxir (the whole generation, one invoke, a counted loop), against
// the numpy reference that samples/decoder/generate.py wrote; and the
// sample's own driver, run_steps.py, which runs step.hxir through hexir-run
// (skipped when no python3 with numpy is found).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"

namespace fs = std::filesystem;
using hexir::NpyArray;
using hexir::compiler::PlanStrategy;
using hexir::vm::Context;
using hexir::vm::Module;
using hexir::vm::Program;
using hexir::vm::TensorRef;

namespace {

const fs::path kDecoder = fs::path(HEXIR_SAMPLES_DIR) / "decoder";
constexpr double kCacheTolerance = 1e-4;  // max abs error on the final cache

NpyArray read(const std::string& name) {
  auto array = hexir::read_npy((kDecoder / name).string());
  INFO(name, ": ", array.status().to_string());
  REQUIRE(array.ok());
  return std::move(array).value();
}

template <typename T>
std::vector<T> values_of(const NpyArray& a) {
  std::vector<T> out(a.data.size() / sizeof(T));
  std::memcpy(out.data(), a.data.data(), out.size() * sizeof(T));
  return out;
}

struct FreeBytes {
  void operator()(uint8_t* p) const { std::free(p); }
};

TensorRef ref_of(NpyArray& a) { return TensorRef{a.data.data(), a.data.size(), a.type}; }

NpyArray scalar_i64(const hexir::TensorType& type, int64_t value) {
  NpyArray a;
  a.type = type;
  a.data.resize(sizeof(int64_t));
  std::memcpy(a.data.data(), &value, sizeof value);
  return a;
}

const char* plan_name(PlanStrategy plan) {
  return plan == PlanStrategy::kNaive ? "naive" : plan == PlanStrategy::kArena ? "arena" : "free-at-last-use";
}

double max_abs_error(const NpyArray& got, const NpyArray& want) {
  REQUIRE(got.type == want.type);
  std::vector<float> g = values_of<float>(got), w = values_of<float>(want);
  double worst = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    double d = std::fabs(double(g[i]) - double(w[i]));
    if (!(d <= worst)) worst = d;  // NaN wins
  }
  return worst;
}

}  // namespace

TEST_CASE("decoder sample: step.hxir, one invoke per token, matches numpy (tokens exact, cache 1e-4)") {
  const std::vector<int64_t> prompt = values_of<int64_t>(read("prompt.npy"));
  const int64_t steps = values_of<int64_t>(read("steps.npy")).at(0);
  const std::vector<int64_t> expected_tokens = values_of<int64_t>(read("expected_tokens.npy"));
  const NpyArray expected_cache = read("expected_cache.npy");
  REQUIRE(static_cast<int64_t>(expected_tokens.size()) == steps);

  for (PlanStrategy plan : {PlanStrategy::kNaive, PlanStrategy::kArena, PlanStrategy::kFreeAtLastUse}) {
    const std::string plan_text = plan_name(plan);
    CAPTURE(plan_text);
    hexir::compiler::CompileOptions options;
    options.plan = plan;
    auto hxe = hexir::compiler::compile_file(kDecoder / "step.hxir", options);
    INFO("compile step.hxir: ", hxe.status().to_string());
    REQUIRE(hxe.ok());
    // load_buffer wants 64-byte aligned data.
    std::unique_ptr<uint8_t, FreeBytes> bytes(
        static_cast<uint8_t*>(std::aligned_alloc(64, (hxe->size() + 63) / 64 * 64)));
    std::memcpy(bytes.get(), hxe->data(), hxe->size());
    auto module = Module::load_buffer({bytes.get(), hxe->size()});
    INFO("load: ", module.status().to_string());
    REQUIRE(module.ok());
    auto device = hexir::hal::create_device("cpu");
    REQUIRE(device.ok());
    auto program = Program::prepare(*module, **device);
    INFO("prepare: ", program.status().to_string());
    REQUIRE(program.ok());
    auto context = Context::create(*program);
    REQUIRE(context.ok());
    auto step = module->find_function("step");
    REQUIRE(step.ok());
    const auto& sig = module->function(*step);
    REQUIRE(sig.inputs.size() == 3);
    REQUIRE(sig.outputs.size() == 2);
    CHECK(sig.inputs[2].donated_to == 1);  // the cache comes back as output 1

    NpyArray cache = read("cache0.npy");
    REQUIRE(sig.inputs[2].type == cache.type);
    NpyArray next;
    next.type = sig.outputs[0].type;
    next.data.assign(sig.outputs[0].byte_size, 0xCD);

    std::vector<int64_t> generated;
    int64_t token = prompt.at(0);
    const int64_t positions = static_cast<int64_t>(prompt.size()) + steps - 1;
    for (int64_t pos = 0; pos < positions; ++pos) {
      if (pos < static_cast<int64_t>(prompt.size())) token = prompt[pos];
      NpyArray token_in = scalar_i64(sig.inputs[0].type, token);
      NpyArray pos_in = scalar_i64(sig.inputs[1].type, pos);
      TensorRef inputs[] = {ref_of(token_in), ref_of(pos_in), ref_of(cache)};
      TensorRef outputs[] = {ref_of(next), ref_of(cache)};  // the donated cache is its own output
      auto status = context->invoke(*step, inputs, outputs);
      INFO("invoke at position ", pos, ": ", status.to_string());
      REQUIRE(status.ok());
      token = values_of<int64_t>(next).at(0);
      if (pos >= static_cast<int64_t>(prompt.size()) - 1) generated.push_back(token);
    }
    CHECK(generated == expected_tokens);
    double err = max_abs_error(cache, expected_cache);
    MESSAGE("decoder step (", plan_text, "): ", positions, " invokes, final cache max abs error ", err,
            ", arena ", module->arena_bytes(), " B, lower bound ", module->lower_bound_bytes(), " B");
    CHECK(err <= kCacheTolerance);
    CHECK(context->invoke_count() == static_cast<uint64_t>(positions));
    CHECK(context->invoke_stats().uploads == 0);
    if (plan != PlanStrategy::kFreeAtLastUse) CHECK(context->invoke_stats().device_allocations == 0);
  }
}

TEST_CASE("decoder sample: run_steps.py drives step.hxir through hexir-run and matches numpy") {
  // Debian's interpreter first (python3-numpy), then whatever python3 is on PATH.
  std::string python;
  for (const char* candidate : {"/usr/bin/python3", "python3"}) {
    std::string probe = std::string(candidate) + " -c 'import numpy' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) {
      python = candidate;
      break;
    }
  }
  if (python.empty()) {
    std::printf("HEXIR_SKIP: no python3 with numpy (python3-numpy): samples/decoder/run_steps.py not run\n");
    return;
  }
#ifdef HEXIR_CROSS_BUILD
  // Run under an emulator (meson's exe_wrapper): the host's python3 starts
  // hexir-run itself, which works only where the kernel hands foreign
  // binaries to the emulator (binfmt_misc).
  const std::string probe = python +
                            " -c 'import subprocess, sys; subprocess.run([sys.argv[1], \"--list-devices\"], "
                            "capture_output=True, check=True)' '" +
                            HEXIR_RUN + "' >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) {
    std::printf("HEXIR_SKIP: the host cannot start %s (a cross build without binfmt_misc for its emulator): "
                "samples/decoder/run_steps.py not run\n",
                HEXIR_RUN);
    return;
  }
#endif
  std::string command = python + " '" + (kDecoder / "run_steps.py").string() + "' --hexir-run '" + HEXIR_RUN +
                        "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  int rc = ::pclose(pipe);
  INFO(command, "\n", output);
  CHECK(rc == 0);
  CHECK(output.find("\nmatch\n") != std::string::npos);
}

TEST_CASE("decoder sample: generate.hxir, the whole generation in one invoke, matches numpy") {
  const std::vector<int64_t> expected_tokens = values_of<int64_t>(read("expected_tokens.npy"));
  const NpyArray expected_cache = read("expected_cache.npy");
  for (PlanStrategy plan : {PlanStrategy::kNaive, PlanStrategy::kArena, PlanStrategy::kFreeAtLastUse}) {
    const std::string plan_text = plan_name(plan);
    CAPTURE(plan_text);
    hexir::compiler::CompileOptions options;
    options.plan = plan;
    auto hxe = hexir::compiler::compile_file(kDecoder / "generate.hxir", options);
    INFO("compile generate.hxir: ", hxe.status().to_string());
    REQUIRE(hxe.ok());
    std::unique_ptr<uint8_t, FreeBytes> bytes(
        static_cast<uint8_t*>(std::aligned_alloc(64, (hxe->size() + 63) / 64 * 64)));
    std::memcpy(bytes.get(), hxe->data(), hxe->size());
    auto module = Module::load_buffer({bytes.get(), hxe->size()});
    INFO("load: ", module.status().to_string());
    REQUIRE(module.ok());
    auto device = hexir::hal::create_device("cpu");
    REQUIRE(device.ok());
    auto program = Program::prepare(*module, **device);
    INFO("prepare: ", program.status().to_string());
    REQUIRE(program.ok());
    auto context = Context::create(*program);
    REQUIRE(context.ok());
    auto generate = module->find_function("generate");
    REQUIRE(generate.ok());
    const auto& sig = module->function(*generate);
    REQUIRE(sig.inputs.size() == 3);
    REQUIRE(sig.outputs.size() == 2);

    NpyArray prompt = read("prompt.npy");
    NpyArray cache = read("cache0.npy");
    NpyArray steps = read("steps.npy");
    NpyArray tokens;
    tokens.type = sig.outputs[0].type;
    tokens.data.assign(sig.outputs[0].byte_size, 0xCD);
    NpyArray cache_out;
    cache_out.type = sig.outputs[1].type;
    cache_out.data.assign(sig.outputs[1].byte_size, 0xCD);
    const bool donated = sig.inputs[1].donated_to == 1;
    CHECK(donated);  // the loop carries the cache in the caller's buffer
    TensorRef inputs[] = {ref_of(prompt), ref_of(cache), ref_of(steps)};
    TensorRef outputs[] = {ref_of(tokens), donated ? ref_of(cache) : ref_of(cache_out)};
    auto status = context->invoke(*generate, inputs, outputs);
    INFO("invoke: ", status.to_string());
    REQUIRE(status.ok());
    CHECK(values_of<int64_t>(tokens) == expected_tokens);
    double err = max_abs_error(donated ? cache : cache_out, expected_cache);
    MESSAGE("decoder generate (", plan_text, "): one invoke, the cache ",
            std::string(donated ? "donated" : "not donated (copied, not written in place)"),
            ", final cache max abs error ", err, ", arena ", module->arena_bytes(), " B, lower bound ",
            module->lower_bound_bytes(), " B");
    CHECK(err <= kCacheTolerance);
    CHECK(context->invoke_stats().uploads == 0);
    if (plan != PlanStrategy::kFreeAtLastUse) CHECK(context->invoke_stats().device_allocations == 0);
  }
}

namespace {

std::vector<std::string> lines_of(const fs::path& path) {
  FILE* f = std::fopen(path.string().c_str(), "r");
  REQUIRE_MESSAGE(f != nullptr, "cannot open ", path.string());
  std::vector<std::string> lines;
  std::string line;
  for (int c; (c = std::fgetc(f)) != EOF;) {
    if (c != '\n') {
      line += static_cast<char>(c);
      continue;
    }
    lines.push_back(line);
    line.clear();
  }
  if (!line.empty()) lines.push_back(line);
  std::fclose(f);
  return lines;
}

// A line without its indentation, its trailing comment and spaces before it.
std::string code_of(std::string line) {
  if (size_t c = line.find("//"); c != std::string::npos) line.erase(c);
  size_t b = line.find_first_not_of(' '), e = line.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : line.substr(b, e - b + 1);
}

}  // namespace

// The loop body of generate.hxir stays step.hxir's body, line for line, so
// the two programs cannot drift apart.
TEST_CASE("decoder sample: generate.hxir's loop body is step.hxir's body, with the same constants") {
  const std::vector<std::string> step = lines_of(kDecoder / "step.hxir");
  const std::vector<std::string> generate = lines_of(kDecoder / "generate.hxir");

  std::vector<std::string> step_body, loop_body;
  bool inside = false;
  for (const std::string& line : step) {
    if (line.rfind("func @step(", 0) == 0) {
      inside = true;
    } else if (inside && code_of(line).rfind("return ", 0) == 0) {
      break;
    } else if (inside && !code_of(line).empty()) {
      step_body.push_back(code_of(line));
    }
  }
  inside = false;
  for (const std::string& line : generate) {
    if (line.find("// ==== one step") != std::string::npos) {
      inside = true;
    } else if (line.find("// ==== end of the step") != std::string::npos) {
      break;
    } else if (inside && !code_of(line).empty()) {
      std::string code = code_of(line);
      // The carried cache is %kv in the loop, %cache in step.hxir.
      for (size_t at; (at = code.find("%kv,")) != std::string::npos;) code.replace(at, 3, "%cache");
      loop_body.push_back(code);
    }
  }
  REQUIRE(step_body.size() > 50);
  REQUIRE(loop_body.size() == step_body.size());
  for (size_t i = 0; i < step_body.size(); ++i) {
    CAPTURE(i);
    CHECK(loop_body[i] == step_body[i]);
  }

  // Every constant of step.hxir is declared in generate.hxir the same way.
  for (const std::string& line : step) {
    if (line.rfind("const @", 0) != 0) continue;
    CAPTURE(line);
    bool found = false;
    for (const std::string& g : generate) found = found || code_of(g) == code_of(line);
    CHECK(found);
  }
}
