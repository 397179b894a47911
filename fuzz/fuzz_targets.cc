#include "fuzz_targets.h"

#include <cstring>
#include <string_view>
#include <vector>

#include "hexir/base/npy.h"
#include "hexir/format/prelude.h"
#include "hexir/serializer/compiler.h"
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
  if (module->arena_bytes() > (256u << 20) || module->constant_bytes() > (256u << 20)) return;
  auto device = hal::create_device("cpu");
  if (!device.ok()) return;
  auto program = vm::Program::prepare(*module, **device);
  if (!program.ok()) return;
  auto context = vm::Context::create(*program);
  if (!context.ok()) return;
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

void parse_npy_bytes(const uint8_t* data, size_t size) { (void)parse_npy({data, size}, "fuzz.npy"); }

void compile_hxir_text(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)serializer::compile_source(text, "fuzz.hxir", "/nonexistent");
}

}  // namespace hexir::fuzz
