// Deterministic mutation fuzzing of everything that parses untrusted bytes,
// run in the regular suite (libFuzzer explores further: see fuzz/meson.build).
// A case passes when no mutation crashes, hangs or trips a sanitizer.
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "budget_programs.h"
#include "fuzz_targets.h"
#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/compiler/onnx.h"
#include "hexir/format/prelude.h"
#include "hexir/vm.h"

using namespace hexir;

namespace {

std::vector<uint8_t> compile_sample(const char* name) {
  auto bytes = compiler::compile_file(std::string(HEXIR_SAMPLES_DIR) + "/" + name);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  return std::move(bytes).value();
}

// One of: flip a bit, set a byte to an interesting value, or overwrite 4
// bytes with a small or huge integer — the values that break index checks.
void mutate(std::vector<uint8_t>& bytes, size_t lo, size_t hi, std::mt19937_64& rng) {
  size_t pos = lo + rng() % (hi - lo);
  switch (rng() % 4) {
    case 0:
      bytes[pos] ^= uint8_t(1u << (rng() % 8));
      break;
    case 1:
      bytes[pos] = static_cast<uint8_t>(std::array<int, 6>{0, 1, 0x7f, 0x80, 0xff, 0x40}[rng() % 6]);
      break;
    case 2: {
      static constexpr uint32_t kValues[] = {0, 1, 2, 7, 64, 4096, 0x7fffffff, 0x80000000, 0xffffffff};
      uint32_t v = kValues[rng() % std::size(kValues)];
      for (int i = 0; i < 4 && pos + i < hi; ++i) bytes[pos + i] = uint8_t(v >> (8 * i));
      break;
    }
    default:
      bytes[pos] = uint8_t(rng());
      break;
  }
}

size_t metadata_end(const std::vector<uint8_t>& file) {
  format::Prelude prelude;
  std::memcpy(&prelude, file.data(), sizeof prelude);
  return prelude.metadata_offset + prelude.metadata_size;
}

// Mutates the prelude and metadata `rounds` times (1..3 mutations each) and
// loads and runs every result; returns how many the verifier accepted.
int mutate_and_run(const std::vector<uint8_t>& original, int rounds, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t end = metadata_end(original);
  int accepted = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<uint8_t> bytes = original;
    int count = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < count; ++i) mutate(bytes, 0, end, rng);
    fuzz::load_and_run_executable(bytes.data(), bytes.size());
    // Count acceptance separately so the test shows mutations reach the VM.
    fuzz::refresh_metadata_checksum(bytes.data(), bytes.size());
    fuzz::AlignedCopy aligned(bytes.data(), bytes.size());
    if (vm::Module::load_buffer({aligned.data(), aligned.size()}).ok()) ++accepted;
  }
  return accepted;
}

}  // namespace

TEST_CASE("fuzz: the unmutated samples load and run") {
  for (const char* name : {"mlp.hxir", "transformer.hxir", "convnet.hxir"}) {
    auto bytes = compile_sample(name);
    fuzz::AlignedCopy aligned(bytes.data(), bytes.size());
    auto module = vm::Module::load_buffer({aligned.data(), aligned.size()});
    CHECK_MESSAGE(module.ok(), module.status().to_string());
    fuzz::load_and_run_executable(bytes.data(), bytes.size());
  }
}

TEST_CASE("fuzz: mutated mlp executables never crash the verifier or the VM") {
  int accepted = mutate_and_run(compile_sample("mlp.hxir"), 20000, 1);
  MESSAGE("accepted after mutation: " << accepted << " of 20000");
  // Mutations of names, shapes-preserving fields and padding are legal; a
  // test where nothing got through would not exercise the VM at all.
  CHECK(accepted > 0);
}

TEST_CASE("fuzz: mutated transformer executables never crash the verifier or the VM") {
  int accepted = mutate_and_run(compile_sample("transformer.hxir"), 20000, 2);
  MESSAGE("accepted after mutation: " << accepted << " of 20000");
  CHECK(accepted > 0);
}

TEST_CASE("fuzz: mutated convnet executables (conv2d, split, cast, where, gather, slice) never crash") {
  int accepted = mutate_and_run(compile_sample("convnet.hxir"), 20000, 3);
  MESSAGE("accepted after mutation: " << accepted << " of 20000");
  CHECK(accepted > 0);
}

TEST_CASE("fuzz: mutated executables with host-space slots (Evict, Prefetch) never crash") {
  compiler::CompileOptions options;
  options.device_budget = 32u << 10;  // %a goes to the host arena
  auto bytes = compiler::compile_source(testing::kFarProgram, "far.hxir", ".", options);  // budget_programs.h
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  fuzz::AlignedCopy aligned(bytes->data(), bytes->size());
  auto module = vm::Module::load_buffer({aligned.data(), aligned.size()});
  REQUIRE_MESSAGE(module.ok(), module.status().to_string());
  REQUIRE(module->host_arena_bytes() > 0);
  int accepted = mutate_and_run(*bytes, 20000, 4);
  MESSAGE("accepted after mutation: " << accepted << " of 20000");
  CHECK(accepted > 0);
}

TEST_CASE("fuzz: mutated executables with streamed weights (a Host RODATA section) never crash") {
  compiler::CompileOptions options;
  options.device_budget = 200u << 10;  // the mlp's two 128 KiB weights stay in host memory
  auto bytes = compiler::compile_file(std::string(HEXIR_SAMPLES_DIR) + "/mlp.hxir", options);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  fuzz::AlignedCopy aligned(bytes->data(), bytes->size());
  auto module = vm::Module::load_buffer({aligned.data(), aligned.size()});
  REQUIRE_MESSAGE(module.ok(), module.status().to_string());
  REQUIRE(module->streamed_constant_bytes() > 0);
  int accepted = mutate_and_run(*bytes, 10000, 7);
  MESSAGE("accepted after mutation: " << accepted << " of 10000");
  CHECK(accepted > 0);
}

TEST_CASE("fuzz: mutated executables with strided views never crash (offsets, strides, views of inputs)") {
  auto bytes = compiler::compile_file(std::string(HEXIR_FUZZ_SEEDS_DIR) + "/programs/views.hxir");
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  fuzz::load_and_run_executable(bytes->data(), bytes->size());
  int accepted = mutate_and_run(*bytes, 20000, 6);
  MESSAGE("accepted after mutation: " << accepted << " of 20000");
  CHECK(accepted > 0);
}

TEST_CASE("fuzz: mutated zstd payloads never crash the loader or the VM") {
  compiler::CompileOptions options;
  options.compression = compiler::SectionCompression::kZstd;
  for (const char* name : {"mlp.hxir", "transformer.hxir"}) {
    auto original = compiler::compile_file(std::string(HEXIR_SAMPLES_DIR) + "/" + name, options);
    REQUIRE_MESSAGE(original.ok(), original.status().to_string());
    format::Prelude prelude;
    std::memcpy(&prelude, original->data(), sizeof prelude);
    const size_t lo = prelude.data_offset, hi = lo + prelude.data_size;
    REQUIRE(hi > lo + 64);
    std::mt19937_64 rng(5);
    int rejected = 0;
    for (int round = 0; round < 1000; ++round) {
      std::vector<uint8_t> bytes = *original;
      const int count = 1 + static_cast<int>(rng() % 3);
      // Half of the mutations hit the frame and block headers at the start.
      for (int i = 0; i < count; ++i) mutate(bytes, lo, rng() % 2 ? lo + 32 : hi, rng);
      fuzz::load_and_run_executable(bytes.data(), bytes.size());
      fuzz::AlignedCopy aligned(bytes.data(), bytes.size());
      if (!vm::Module::load_buffer({aligned.data(), aligned.size()}).ok()) ++rejected;
    }
    MESSAGE(std::string(name) << ": rejected after payload mutation: " << rejected << " of 1000");
    CHECK(rejected > 900);  // zstd's content checksum catches nearly every change
  }
}

TEST_CASE("fuzz: truncations at every length are rejected") {
  auto bytes = compile_sample("mlp.hxir");
  const size_t end = metadata_end(bytes);
  for (size_t len = 0; len < end; len += 1 + len / 64) {
    fuzz::AlignedCopy aligned(bytes.data(), len);
    auto module = vm::Module::load_buffer({aligned.data(), len});
    CHECK_FALSE(module.ok());
  }
}

TEST_CASE("fuzz: mutated .npy files never crash the parser") {
  std::vector<float> values(12, 1.5f);
  auto original = encode_npy({DType::kF32, {3, 4}}, {reinterpret_cast<uint8_t*>(values.data()), 48});
  std::mt19937_64 rng(3);
  int accepted = 0;
  for (int round = 0; round < 5000; ++round) {
    auto bytes = original;
    mutate(bytes, 0, 128 < bytes.size() ? 128 : bytes.size(), rng);
    if (rng() % 8 == 0) bytes.resize(rng() % bytes.size());
    if (parse_npy(bytes, "m.npy").ok()) ++accepted;
  }
  MESSAGE("accepted after mutation: " << accepted << " of 5000");
}

TEST_CASE("fuzz: mutated .hxir text never crashes the compiler") {
  const std::string source = R"(module @m
const @w : f32[4,4] = dense [[1,2,3,4],[5,6,7,8],[9,10,11,12],[13,14,15,16]]
const @b : f32[4] = splat 0.5
func @main(%x: f32[2,4], %c: f32[2,4] donate(1)) -> (f32[2,4], f32[2,4]) {
  %h = call @matmul(%x, @w) : f32[2,4]
  %r = call @add(%h, @b) : f32[2,4]
  %s = call @softmax(%r) {axis = -1} : f32[2,4]
  %t = call @reshape(%s) : f32[4,2]
  %u = call @transpose(%t) {perm = [1, 0]} : f32[2,4]
  %m = call @reduce_mean(%u) {axes = [1], keepdims = 1} : f32[2,1]
  %y = call @sub(%c, %m) : f32[2,4]
  return %u, %y
}
)";
  std::mt19937_64 rng(4);
  static constexpr char kTokens[] = "@%:=[](){},.-0123456789 \n\"/fxe";
  for (int round = 0; round < 3000; ++round) {
    std::string text = source;
    int count = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < count; ++i) {
      size_t pos = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text[pos] = kTokens[rng() % (sizeof kTokens - 1)];
          break;
        case 1:
          text = text.substr(0, pos) + text.substr(std::min(text.size(), pos + 1 + rng() % 8));
          break;
        default:
          text = text.substr(0, pos) + kTokens[rng() % (sizeof kTokens - 1)] + text.substr(pos);
          break;
      }
      if (text.empty()) text = "x";
    }
    fuzz::compile_hxir_text(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  }
  // The unmutated program compiles: the mutations start from valid input.
  CHECK(compiler::compile_source(source, "m.hxir", "/nonexistent").ok());
}

TEST_CASE("fuzz: mutated ONNX models (tests/fuzz/seeds/onnx) never crash the importer") {
  if (!compiler::onnx_supported()) {
    MESSAGE("skipped: this build has no ONNX front end");
    return;
  }
  const std::string seeds = std::string(HEXIR_FUZZ_SEEDS_DIR) + "/onnx/";
  // The plain models import as they are: the mutations start from valid input.
  for (const char* name : {"mlp.onnx", "control.onnx"}) {
    auto imported = compiler::import_onnx(seeds + name);
    INFO(name, ": ", imported.status().to_string());
    CHECK(imported.ok());
  }
  std::mt19937_64 rng(5);
  for (const char* name : {"mlp.onnx", "control.onnx", "external.onnx", "graph_twice.onnx", "nested_if_40.onnx"}) {
    std::vector<uint8_t> original;
    if (std::FILE* f = std::fopen((seeds + name).c_str(), "rb")) {
      uint8_t chunk[4096];
      for (size_t got; (got = std::fread(chunk, 1, sizeof chunk, f)) > 0;) original.insert(original.end(), chunk, chunk + got);
      std::fclose(f);
    }
    REQUIRE_MESSAGE(!original.empty(), std::string(seeds + name));
    fuzz::import_onnx_bytes(original.data(), original.size());
    for (int round = 0; round < 300; ++round) {
      std::vector<uint8_t> bytes = original;
      const int count = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < count; ++i) mutate(bytes, 0, bytes.size(), rng);
      if (rng() % 8 == 0) bytes.resize(rng() % bytes.size());
      fuzz::import_onnx_bytes(bytes.data(), bytes.size());
    }
  }
}
