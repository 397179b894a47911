// Internal state behind the public vm.h handles. Tests include this to look
// at prepared tables (e.g. that RODATA is used in place); applications don't.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hexir/format/sections.h"
#include "hexir/format/verifier.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"

namespace hexir::vm {

// An address in the device's address space, as kernels receive it.
inline void* device_address(const hal::Buffer& buffer, uint64_t offset = 0) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(buffer.device_ptr + offset));
}

class ModuleImpl {
 public:
  ModuleImpl() = default;
  ModuleImpl(const ModuleImpl&) = delete;
  ModuleImpl& operator=(const ModuleImpl&) = delete;
  ~ModuleImpl();

  const fb::Module& fb() const { return *verified.module; }

  void* mapping = nullptr;  // mmap of load_file, unmapped on destruction
  size_t mapping_size = 0;
  format::VerifiedModule verified;
  // Decompressed zstd sections (64-byte aligned); verified.sections points into them.
  std::vector<format::SectionBuffer> owned_sections;
  std::string name;
  std::vector<FunctionSignature> functions;
  uint64_t arena_bytes = 0;
  uint64_t lower_bound_bytes = 0;
  uint64_t constant_bytes = 0;
};

class ProgramImpl {
 public:
  ProgramImpl() = default;
  ProgramImpl(const ProgramImpl&) = delete;
  ProgramImpl& operator=(const ProgramImpl&) = delete;
  ~ProgramImpl();

  const Module* module = nullptr;
  const ModuleImpl* module_impl = nullptr;
  hal::Device* device = nullptr;
  std::vector<hal::Buffer> buffers;       // imported or allocated; released on destruction
  std::vector<void*> constant_data;       // per constant: its device address
  std::vector<uintptr_t> kernel_handles;  // per kernel table entry (0 for views)
  PhaseStats prepare_stats;
};

// One function's prebuilt dispatch table inside a context.
struct FunctionTable {
  std::vector<hal::TensorArg> args;           // operands of every instruction, flattened
  std::vector<hal::DispatchArgs> dispatches;  // one per instruction, pointing into args
  // args entries each binding patches at invoke: inputs first, then outputs (CSR).
  std::vector<uint32_t> patch_begin;
  std::vector<uint32_t> patch_args;
  std::vector<hal::Buffer> own_outputs;  // context-owned result buffers
  std::vector<int32_t> output_in_input;  // per output: donated input holding it, or -1
  std::vector<void*> last_output_data;   // where each result of the last invoke landed
  bool has_own_results = false;          // last invoke used own_outputs

  // Free-at-last-use only. Arena values are numbered locally; each has a size
  // and the args entries (its slot's and its views') patched with its buffer.
  std::vector<uint64_t> value_size;
  std::vector<uint32_t> value_patch_begin;  // CSR into value_patch_args
  std::vector<uint32_t> value_patch_args;
  std::vector<int32_t> step_write;        // per instruction: value written, or -1 (not arena)
  std::vector<int32_t> step_inherit;      // per instruction: value whose buffer it takes over in place, or -1
  std::vector<uint64_t> step_workspace;   // per instruction: scratch bytes allocated around it
  std::vector<uint32_t> step_free_begin;  // CSR into step_free: values released after each instruction
  std::vector<uint32_t> step_free;
  std::vector<hal::Buffer> value_buffer;  // held during an invoke
};

class ContextImpl {
 public:
  ContextImpl() = default;
  ContextImpl(const ContextImpl&) = delete;
  ContextImpl& operator=(const ContextImpl&) = delete;
  ~ContextImpl();

  Status invoke(size_t function, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs);

  const ProgramImpl* program = nullptr;
  const ModuleImpl* module = nullptr;
  std::unique_ptr<hal::Queue> queue;
  hal::Buffer arena;  // arena, then workspace, in one allocation
  std::vector<FunctionTable> functions;
  PhaseStats create_stats;
  PhaseStats invoke_stats;  // allocations and uploads stay 0 (static plans): invoke never asks for either
  uint64_t invoke_count = 0;
  // Free-at-last-use: values are allocated and released per invoke.
  bool dynamic = false;
  uint64_t live_bytes = 0;

 private:
  Status run_dynamic(FunctionTable& t, size_t* failed);
  void release_values(FunctionTable& t);
};

}  // namespace hexir::vm
