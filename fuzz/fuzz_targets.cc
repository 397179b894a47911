#include "fuzz_targets.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "graph_gen.h"
#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/compiler/onnx.h"
#include "hexir/format/prelude.h"
#include "hexir/vm.h"

namespace hexir::fuzz {

AlignedCopy::AlignedCopy(const uint8_t* data, size_t size) : blocks_(size / 64 + 1), size_(size) {
  if (size) std::memcpy(blocks_.data(), data, size);
}

void refresh_metadata_checksum(uint8_t* file, size_t size) {
  if (size < sizeof(format::Prelude)) return;
  format::Prelude prelude;
  std::memcpy(&prelude, file, sizeof prelude);
  if (prelude.metadata_offset > size || prelude.metadata_size > size - prelude.metadata_offset) return;
  prelude.metadata_checksum = format::checksum64({file + prelude.metadata_offset, prelude.metadata_size});
  std::memcpy(file, &prelude, sizeof prelude);
}

void load_and_run_executable(const uint8_t* data, size_t size) {
  AlignedCopy aligned(data, size);
  refresh_metadata_checksum(aligned.data(), size);
  auto module = vm::Module::load_buffer({aligned.data(), size});
  if (!module.ok()) return;
  // What a context would allocate (arena, shared scratch, own outputs, host arena) and
  // the constants: a file may ask for gigabytes, which is not a finding.
  if (module->context_bytes() > (256u << 20) || module->host_arena_bytes() > (256u << 20) ||
      module->constant_bytes() > (256u << 20))
    return;
  auto device = hal::create_device("cpu");
  if (!device.ok()) return;
  auto program = vm::Program::prepare(*module, **device);
  if (!program.ok()) return;
  auto context = vm::Context::create(*program);
  if (!context.ok()) return;
  (void)context->set_max_loop_iterations(kFuzzLoopIterations);  // trip counts are data here
  for (size_t f = 0; f < module->function_count(); ++f) {
    const vm::FunctionSignature& sig = module->function(f);
    // Refuse absurd inputs: the verifier bounds sizes but a fuzzer should not allocate gigabytes.
    uint64_t total = 0;
    for (const auto& in : sig.inputs) total += in.byte_size;
    if (total > (64u << 20)) continue;
    std::vector<std::vector<uint8_t>> buffers;
    std::vector<vm::TensorRef> inputs;
    for (const auto& in : sig.inputs) buffers.emplace_back(in.byte_size, 0);
    for (size_t i = 0; i < sig.inputs.size(); ++i)
      inputs.push_back({buffers[i].data(), sig.inputs[i].byte_size, sig.inputs[i].type});
    (void)context->invoke(f, inputs);
  }
}

void parse_npy_bytes(const uint8_t* data, size_t size) {
  (void)parse_npy({data, size}, "fuzz.npy");
  // The header alone, as read_npy_header sees it: the file may be longer or
  // shorter than the bytes at hand.
  for (uint64_t file_size : {uint64_t{size}, uint64_t{size} + 64, uint64_t{size} / 2, ~uint64_t{0}})
    (void)parse_npy_header({data, size}, file_size, "fuzz.npy");
}

namespace {

namespace fs = std::filesystem;

void write_bytes(const fs::path& path, std::span<const uint8_t> bytes) {
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
}

template <typename T>
void write_array(const fs::path& path, DType dtype, std::vector<int64_t> dims, const std::vector<T>& values) {
  write_bytes(path, encode_npy({dtype, std::move(dims)}, {reinterpret_cast<const uint8_t*>(values.data()),
                                                          values.size() * sizeof(T)}));
}

void populate_scratch(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir / "sub", ec);
  std::vector<float> w(16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.5f - 3.0f;
  write_array(dir / "w.npy", DType::kF32, {4, 4}, w);
  write_array(dir / "v.npy", DType::kF32, {4}, std::vector<float>(w.begin(), w.begin() + 4));
  write_array(dir / "s.npy", DType::kF32, {}, std::vector<float>{2.5f});
  write_array(dir / "sub" / "x.npy", DType::kF32, {2, 2}, std::vector<float>{1, -2, 3, -4});
  write_array(dir / "i.npy", DType::kI64, {3}, std::vector<int64_t>{0, -1, 2});
  write_array(dir / "j.npy", DType::kI32, {2, 2}, std::vector<int32_t>{1, 0, -1, 3});
  write_array(dir / "h.npy", DType::kF16, {2}, std::vector<uint16_t>{0x3c00, 0xc000});
  write_array(dir / "b.npy", DType::kBool, {3}, std::vector<uint8_t>{1, 0, 1});
  write_array(dir / "u.npy", DType::kU8, {4}, std::vector<uint8_t>{0, 1, 254, 255});
  // A header promising more data than there is, and an empty file.
  std::vector<uint8_t> truncated = encode_npy({DType::kF32, {1000}}, std::vector<uint8_t>(4000, 0));
  truncated.resize(truncated.size() - 100);
  write_bytes(dir / "trunc.npy", truncated);
  write_bytes(dir / "empty.npy", {});
  // Things a reader must refuse without blocking or reading forever, and
  // symlinks leading out of the folder (confinement).
  ::mkfifo((dir / "fifo.npy").c_str(), 0600);
  fs::create_symlink("/etc/passwd", dir / "out.npy", ec);
  fs::create_symlink("/dev/zero", dir / "zero.npy", ec);
  fs::create_symlink("..", dir / "up", ec);
  fs::create_directory(dir / "dir.npy", ec);
#ifdef HEXIR_SAMPLES_DIR
  // The samples' weights, so the samples' own .hxir files compile as seeds.
  for (const char* sample : {"mlp", "transformer", "convnet"}) {
    fs::create_directories(dir / sample, ec);
    for (const auto& entry : fs::directory_iterator(fs::path(HEXIR_SAMPLES_DIR) / sample, ec))
      if (entry.path().extension() == ".npy" && entry.path().filename().string().rfind("expected", 0) != 0)
        fs::copy_file(entry.path(), dir / sample / entry.path().filename(), fs::copy_options::overwrite_existing, ec);
  }
#endif
}

std::string* g_owned_scratch = nullptr;

void remove_owned_scratch() {
  std::error_code ec;
  if (g_owned_scratch) fs::remove_all(*g_owned_scratch, ec);
}

}  // namespace

const std::string& hxir_scratch_dir() {
  static const std::string dir = [] {
    std::string path;
    if (const char* env = std::getenv("HEXIR_FUZZ_SCRATCH"); env && *env) {
      path = env;
    } else {
      const char* tmp = std::getenv("TMPDIR");
      std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/hexir-fuzz-XXXXXX";
      if (::mkdtemp(pattern.data())) {
        path = pattern;
        g_owned_scratch = new std::string(path);
        std::atexit(remove_owned_scratch);
      } else {
        path = "/nonexistent";
      }
    }
    populate_scratch(path);
    return path;
  }();
  return dir;
}

namespace {

// The search is deterministic counted work: keep executions short.
compiler::CompileOptions fuzz_compile_options() {
  compiler::CompileOptions options;
  options.plan_budget_ms = 2;
  return options;
}

// What the compiler wrote must verify (no limits: only the rules; a refusal
// aborts, printing `source` when it is text), then it runs.
void verify_and_run(const std::vector<uint8_t>& bytes, std::string_view source) {
  vm::LoadOptions unlimited;
  unlimited.max_decompressed_bytes = unlimited.max_fill_bytes = unlimited.max_arena_bytes = ~uint64_t{0};
  AlignedCopy aligned(bytes.data(), bytes.size());
  auto module = vm::Module::load_buffer({aligned.data(), aligned.size()}, unlimited);
  if (!module.ok()) {
    std::fprintf(stderr, "the verifier refuses what the compiler wrote: %s\n--- source ---\n%.*s\n",
                 module.status().to_string().c_str(), static_cast<int>(source.size()), source.data());
    std::abort();
  }
  load_and_run_executable(bytes.data(), bytes.size());
}

}  // namespace

void compile_hxir_text(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto bytes = compiler::compile_source(text, "fuzz.hxir", hxir_scratch_dir(), fuzz_compile_options());
  if (!bytes.ok()) return;
  verify_and_run(*bytes, text);
}

void import_onnx_bytes(const uint8_t* data, size_t size) {
  if (!compiler::onnx_supported()) return;
  // One file per process: fuzzers of several targets may share the scratch folder.
  static const fs::path model = fs::path(hxir_scratch_dir()) / ("fuzz-" + std::to_string(::getpid()) + ".onnx");
  write_bytes(model, {data, size});
  compiler::OnnxImportOptions options;
  options.fold_max_bytes = 1 << 20;  // folds are counted work too
  auto imported = compiler::import_onnx(model, options);
  if (!imported.ok()) return;
  auto bytes = compiler::compile_module(*imported, fuzz_compile_options(), "fuzz.onnx");
  if (!bytes.ok()) return;
  verify_and_run(*bytes, "(an ONNX model: the input)");
}

namespace {

struct PlanVariant {
  const char* name;
  compiler::CompileOptions options;
};

std::vector<PlanVariant> plan_variants() {
  using compiler::PlanStrategy;
  using compiler::Schedule;
  auto make = [](const char* name, PlanStrategy plan, Schedule schedule = Schedule::kSource, uint32_t align = 64,
                 bool in_place = true, bool zstd = false) {
    compiler::CompileOptions o;
    o.plan = plan;
    o.schedule = schedule;
    o.alignment = align;
    o.in_place = in_place;
    o.plan_budget_ms = 2;
    if (zstd) o.compression = compiler::SectionCompression::kZstd;
    return PlanVariant{name, o};
  };
  return {
      make("naive", PlanStrategy::kNaive),  // the reference: first
      make("arena", PlanStrategy::kArena),
      make("arena, schedule=memory", PlanStrategy::kArena, Schedule::kMemory),
      make("arena, no in-place", PlanStrategy::kArena, Schedule::kSource, 64, false),
      make("arena, align 8", PlanStrategy::kArena, Schedule::kSource, 8),  // the least an i64 value allows
      make("arena, align 256, schedule=memory", PlanStrategy::kArena, Schedule::kMemory, 256),
      make("free-at-last-use", PlanStrategy::kFreeAtLastUse),
      make("free-at-last-use, schedule=memory, no in-place", PlanStrategy::kFreeAtLastUse, Schedule::kMemory, 64,
           false),
      make("naive, schedule=memory, zstd", PlanStrategy::kNaive, Schedule::kMemory, 64, true, true),
  };
}

// Deterministic input bytes: k/8 for small k (zeros and negatives included),
// a function of the function, input and element only.
float input_value(size_t function, size_t input, size_t element) {
  uint64_t h = (function * 1000003u + input) * 0x9E3779B97F4A7C15ull + element * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 32;
  return static_cast<float>(static_cast<int>(h % 41) - 20) / 8.0f;
}

// Compiles, loads and runs `source` twice per function; `outputs` gets each
// function's outputs (of the first invoke). Returns "" or what failed.
std::string run_variant(std::string_view source, const PlanVariant& variant, hal::Device& device,
                        std::vector<std::vector<uint8_t>>& outputs) {
  auto bytes = compiler::compile_source(source, "diff.hxir", "/nonexistent", variant.options);
  if (!bytes.ok()) return "compile: " + bytes.status().to_string();
  AlignedCopy aligned(bytes->data(), bytes->size());
  auto module = vm::Module::load_buffer({aligned.data(), aligned.size()});
  if (!module.ok()) return "load: " + module.status().to_string();
  auto program = vm::Program::prepare(*module, device);
  if (!program.ok()) return "prepare: " + program.status().to_string();
  auto context = vm::Context::create(*program);
  if (!context.ok()) return "context: " + context.status().to_string();
  for (size_t f = 0; f < module->function_count(); ++f) {
    const vm::FunctionSignature& sig = module->function(f);
    for (int rep = 0; rep < 2; ++rep) {
      std::vector<std::vector<float>> buffers;  // fresh every invoke: a donated input is overwritten
      std::vector<vm::TensorRef> inputs;
      for (size_t i = 0; i < sig.inputs.size(); ++i) {
        std::vector<float> values(sig.inputs[i].byte_size / sizeof(float));
        for (size_t e = 0; e < values.size(); ++e) values[e] = input_value(f, i, e);
        buffers.push_back(std::move(values));
      }
      for (size_t i = 0; i < sig.inputs.size(); ++i)
        inputs.push_back({buffers[i].data(), sig.inputs[i].byte_size, sig.inputs[i].type});
      Status status = context->invoke(f, inputs);
      if (!status.ok()) return "invoke of '" + sig.name + "': " + status.to_string();
      for (size_t k = 0; k < sig.outputs.size(); ++k) {
        std::vector<uint8_t> out(sig.outputs[k].byte_size);
        // An output computed in a donated input lives in the caller's buffer.
        const std::vector<float>* donated = nullptr;
        for (size_t i = 0; i < sig.inputs.size(); ++i)
          if (sig.inputs[i].donated_to == static_cast<int>(k)) donated = &buffers[i];
        if (donated) {
          if (donated->size() * sizeof(float) != out.size()) return "a donated input of another size than its output";
          std::memcpy(out.data(), donated->data(), out.size());
        } else {
          status = context->read_output(f, k, out);
          if (!status.ok()) return "read_output: " + status.to_string();
        }
        if (rep == 0) {
          outputs.push_back(std::move(out));
        } else if (out != outputs[outputs.size() - sig.outputs.size() + k]) {
          return "function '" + sig.name + "' output " + std::to_string(k) + " differs between two invokes";
        }
      }
    }
  }
  return "";
}

std::string describe_difference(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got) {
  if (want.size() != got.size())
    return std::to_string(got.size()) + " bytes instead of " + std::to_string(want.size());
  for (size_t i = 0; i + 4 <= want.size(); i += 4) {
    if (std::memcmp(&want[i], &got[i], 4) == 0) continue;
    float a, b;
    std::memcpy(&a, &want[i], 4);
    std::memcpy(&b, &got[i], 4);
    char buf[128];
    std::snprintf(buf, sizeof buf, "element %zu is %.9g, naive gives %.9g", i / 4, b, a);
    return buf;
  }
  return "bytes differ";
}

hal::Device* cpu_device(int threads) {
  static std::unique_ptr<hal::Device> devices[3];
  if (!devices[threads]) {
    auto device = hal::create_device("cpu?threads=" + std::to_string(threads));
    if (!device.ok()) return nullptr;
    devices[threads] = std::move(device).value();
  }
  return devices[threads].get();
}

}  // namespace

std::string compare_plans(const uint8_t* data, size_t size) {
  const GeneratedGraph graph = generate_graph(data, size);
  hal::Device* one = cpu_device(1);
  hal::Device* two = cpu_device(2);
  if (!one || !two) return "no cpu device";
  const std::vector<PlanVariant> variants = plan_variants();
  std::vector<std::vector<uint8_t>> reference;
  std::string error = run_variant(graph.source, variants[0], *one, reference);
  // A donation no plan can honour (an output that is a view of the donated
  // input, copied after its update) is refused by the compiler, rightly:
  // nothing to compare. Refused under one variant only, it is a finding.
  if (error.find("cannot be donated") != std::string::npos) return "";
  if (!error.empty()) return std::string(variants[0].name) + ": " + error + "\n--- source ---\n" + graph.source;
  for (size_t v = 1; v < variants.size(); ++v) {
    std::vector<std::vector<uint8_t>> outputs;
    error = run_variant(graph.source, variants[v], *two, outputs);
    if (error.empty() && outputs.size() != reference.size()) error = "a different number of outputs";
    for (size_t k = 0; error.empty() && k < outputs.size(); ++k)
      if (outputs[k] != reference[k])
        error = "output " + std::to_string(k) + " (over all functions): " + describe_difference(reference[k], outputs[k]);
    if (!error.empty()) return std::string(variants[v].name) + ": " + error + "\n--- source ---\n" + graph.source;
  }
  return "";
}

}  // namespace hexir::fuzz
