// Helpers for the format tests that start from compiled samples (zstd
// sections, dump statistics, plan pictures): compile, patch, load, run, and
// run hexir-dump as a user does.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/format/prelude.h"
#include "hexir/format/verifier.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"
#include "hexir_generated.h"
#include "hxe_test_builder.h"
#include "run_command.h"  // run_command, for the tool tests

namespace hexir::testing {

inline const std::string kSamplesDir = HEXIR_SAMPLES_DIR;
inline const std::string kDumpTool = HEXIR_DUMP;

inline std::vector<uint8_t> compile_sample(const std::string& name,
                                           const compiler::CompileOptions& options = {}) {
  auto bytes = compiler::compile_file(kSamplesDir + "/" + name, options);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  return std::move(bytes).value();
}

inline std::vector<uint8_t> compile_text(const std::string& source,
                                         const compiler::CompileOptions& options = {}) {
  auto bytes = compiler::compile_source(source, "test.hxir", "/nonexistent", options);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  return std::move(bytes).value();
}

inline AlignedBytes aligned(const std::vector<uint8_t>& bytes) {
  AlignedBytes out(bytes.size());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

inline format::Prelude read_prelude(const AlignedBytes& file) {
  format::Prelude p;
  std::memcpy(&p, file.data(), sizeof p);
  return p;
}

inline const fb::Module& module_of(const AlignedBytes& file) {
  return *fb::GetModule(file.data() + read_prelude(file).metadata_offset);
}

// Writable view of section `index` of the metadata (tests patch it, then reseal_metadata).
inline uint8_t* section_bytes(AlignedBytes& file, uint32_t index) {
  const fb::Section* s = module_of(file).sections()->Get(index);
  return file.data() + (reinterpret_cast<const uint8_t*>(s) - file.data());
}

// Field offsets inside the 32-byte Section struct (hexir.fbs).
inline constexpr size_t kSectionSizeField = 8;
inline constexpr size_t kSectionRawSizeField = 16;

inline void patch_u64(uint8_t* at, uint64_t value) { std::memcpy(at, &value, sizeof value); }

// Recomputes the data checksum (for files written with --data-checksum).
inline void reseal_data(AlignedBytes& file) {
  format::Prelude p = read_prelude(file);
  p.data_checksum = format::checksum64({file.data() + p.data_offset, p.data_size});
  std::memcpy(file.data(), &p, sizeof p);
}

// Loads, prepares on the cpu and invokes function 0 once with the sample's
// input; returns every output's bytes. Fails the test on any error.
inline std::vector<std::vector<uint8_t>> run_sample(const AlignedBytes& file, const std::string& input_npy) {
  auto module = vm::Module::load_buffer(file.span());
  REQUIRE_MESSAGE(module.ok(), module.status().to_string());
  auto device = hal::create_device("cpu");
  REQUIRE_MESSAGE(device.ok(), device.status().to_string());
  auto program = vm::Program::prepare(*module, **device);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  auto context = vm::Context::create(*program);
  REQUIRE_MESSAGE(context.ok(), context.status().to_string());
  auto x = read_npy(input_npy);
  REQUIRE_MESSAGE(x.ok(), x.status().to_string());
  vm::TensorRef input{x->data.data(), x->data.size(), x->type};
  Status status = context->invoke(0, {&input, 1});
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  std::vector<std::vector<uint8_t>> outputs;
  for (size_t j = 0; j < module->function(0).outputs.size(); ++j) {
    std::vector<uint8_t> out(module->function(0).outputs[j].byte_size);
    REQUIRE(context->read_output(0, j, out).ok());
    outputs.push_back(std::move(out));
  }
  return outputs;
}

// A scratch directory per use, removed afterwards.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("hexir-format-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  REQUIRE(out.good());
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A compiled file the verifier tests patch in place, one defect each, and
// reseal: refusal() then names what the verifier said.
struct PatchedExecutable {
  AlignedBytes file;
  explicit PatchedExecutable(const std::string& source, const compiler::CompileOptions& options = {})
      : file(aligned(compile_text(source, options))) {}
  const fb::Module& m() { return module_of(file); }
  uint8_t* writable(const void* p) { return file.data() + (static_cast<const uint8_t*>(p) - file.data()); }
  uint32_t slot_named(const std::string& name) {
    for (uint32_t s = 0; s < m().slots()->size(); ++s)
      if (m().slots()->Get(s)->name()->str() == name) return s;
    FAIL("no slot ", name);
    return 0;
  }
  void set_operand(uint32_t k, uint32_t o, uint32_t slot) {
    const fb::Instruction* in = m().instructions()->Get(k);
    std::memcpy(writable(m().operand_pool()->Data() + 4 * (in->operand_begin() + o)), &slot, 4);
  }
  void set_param(uint32_t k, uint32_t p, int64_t value) {
    const fb::Instruction* in = m().instructions()->Get(k);
    std::memcpy(writable(m().param_pool()->Data() + 8 * (in->param_begin() + p)), &value, 8);
  }
  // A scalar field a table stores (it is not the default).
  template <typename T>
  void set_field(const void* table, uint16_t field_offset, T value) {
    // A generated table derives privately from flatbuffers::Table, at the same address.
    const uint8_t* field = reinterpret_cast<const flatbuffers::Table*>(table)->GetAddressOf(field_offset);
    REQUIRE(field != nullptr);
    std::memcpy(writable(field), &value, sizeof value);
  }
  std::string refusal() {
    reseal_metadata(file);
    auto verified = format::verify_executable(file.span(), {.prove_no_overlap = true});
    REQUIRE_MESSAGE(!verified.ok(), "the patched file was accepted");
    return verified.status().message();
  }
};

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace hexir::testing
