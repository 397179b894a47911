#include "writer.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>

#include "hexir/ops/op.h"
#include "hexir/format/prelude.h"
#include "hexir/format/sections.h"
#include "hexir_generated.h"
#include "passes.h"

namespace hexir::serializer {
namespace {

namespace fb = ::hexir::fb;

constexpr const char* kProducer = "hexir-compile 0.1";
constexpr uint64_t kPreludeSize = sizeof(format::Prelude);

uint64_t round_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

fb::DType to_fb(DType dtype) { return static_cast<fb::DType>(static_cast<uint8_t>(dtype)); }

fb::StorageKind to_fb(Storage storage) {
  switch (storage) {
    case Storage::kArena:
      return fb::StorageKind::Arena;
    case Storage::kConstant:
      return fb::StorageKind::Constant;
    case Storage::kInput:
      return fb::StorageKind::Input;
    case Storage::kOutput:
      return fb::StorageKind::Output;
  }
  return fb::StorageKind::Arena;
}

Result<uint32_t> checked_u32(size_t value, const char* what) {
  if (value > UINT32_MAX) return resource_exhausted(std::string("too many ") + what + " for the file format");
  return static_cast<uint32_t>(value);
}

uint64_t rodata_size_of(const Module& module) {
  uint64_t size = 0;
  for (const Constant& c : module.constants)
    if (!c.is_fill) size = std::max(size, c.rodata_offset + c.byte_size);
  return size;
}

// How the RODATA section is stored: its absolute file offset (a fixed-size
// struct field, so its value does not change the size of the metadata), the
// stored size and the compression.
struct RodataLayout {
  uint64_t offset = 0;
  uint64_t stored_size = 0;
  fb::Compression compression = fb::Compression::None;
};

// Builds the flatbuffer metadata.
Status build_metadata(const Module& module, const WriteOptions& options, const RodataLayout& layout,
                      flatbuffers::FlatBufferBuilder& fbb) {
  const bool has_rodata = module_has_rodata(module);
  const uint64_t rodata_size = rodata_size_of(module);

  std::vector<flatbuffers::Offset<fb::Constant>> constants;
  for (const Constant& c : module.constants) {
    auto name = fbb.CreateString(c.name);
    auto shape = fbb.CreateVector(c.type.dims);
    auto pattern = fbb.CreateVector(c.fill_pattern);
    constants.push_back(fb::CreateConstant(
        fbb, name, to_fb(c.type.dtype), shape, c.byte_size,
        c.is_fill ? fb::ConstantStorage::Fill : fb::ConstantStorage::Rodata,
        /*section=*/0, c.is_fill ? 0 : c.rodata_offset, pattern, c.is_fill ? c.fill_count : 0));
  }

  // Kernels: one entry per distinct kernel, in order of first use.
  std::map<ops::OpId, uint32_t> kernel_index;
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels;
  for (const Function& fn : module.functions) {
    for (const Instruction& inst : fn.program) {
      if (kernel_index.count(inst.kernel)) continue;
      kernel_index[inst.kernel] = static_cast<uint32_t>(kernels.size());
      auto code = fb::CreateKernelCode(fbb, fbb.CreateString("builtin"), -1, 0, 0, fbb.CreateString(""));
      std::vector<flatbuffers::Offset<fb::KernelCode>> codes{code};
      kernels.push_back(fb::CreateKernel(fbb, fbb.CreateString(ops::op_def(inst.kernel).name),
                                         fbb.CreateVector(codes)));
    }
  }

  // Slots: one per value of each function; a constant has one slot shared by every function.
  std::vector<flatbuffers::Offset<fb::Slot>> slots;
  std::map<int, uint32_t> constant_slot;
  std::vector<fb::Instruction> instructions;
  std::vector<uint32_t> operand_pool;
  std::vector<int64_t> param_pool;
  std::vector<flatbuffers::Offset<fb::Function>> functions;
  std::vector<fb::WorkspaceRange> workspaces;  // per instruction, when scratch is in the arena
  for (const Function& fn : module.functions) {
    std::vector<uint32_t> slot_of(fn.values.size());
    std::vector<bool> donated_input(fn.arguments.size(), false);
    for (const Argument& arg : fn.arguments)
      donated_input[fn.values[arg.value].input_index] = arg.donated_to >= 0;
    for (size_t v = 0; v < fn.values.size(); ++v) {
      const Value& value = fn.values[v];
      if (value.storage == Storage::kConstant && value.kind == ValueKind::kConstant) {
        if (auto it = constant_slot.find(value.constant_index); it != constant_slot.end()) {
          slot_of[v] = it->second;
          continue;
        }
      }
      HEXIR_ASSIGN_OR_RETURN(slot_of[v], checked_u32(slots.size(), "slots"));
      if (value.kind == ValueKind::kConstant) constant_slot[value.constant_index] = slot_of[v];
      fb::SlotUsage usage = fb::SlotUsage::Transient;
      switch (value.storage) {
        case Storage::kArena:
          usage = fb::SlotUsage::Transient;
          break;
        case Storage::kConstant:
          usage = fb::SlotUsage::Constant;
          break;
        case Storage::kInput:
          usage = donated_input[value.storage_index] ? fb::SlotUsage::Donated : fb::SlotUsage::ExternalInput;
          break;
        case Storage::kOutput:
          usage = fb::SlotUsage::ExternalOutput;
          break;
      }
      // A view names the slot of the value it views (written before it: its root has a lower id).
      int32_t view_of = -1;
      if (value.storage_root != static_cast<int>(v)) {
        if (value.storage_root > static_cast<int>(v)) return internal_error("a view precedes its root");
        view_of = static_cast<int32_t>(slot_of[static_cast<size_t>(value.storage_root)]);
      }
      const int32_t last_use =
          value.last_use >= 0 && value.last_use <= INT32_MAX ? static_cast<int32_t>(value.last_use) : -1;
      slots.push_back(fb::CreateSlot(fbb, fbb.CreateString(value.name), to_fb(value.type.dtype),
                                     fbb.CreateVector(value.type.dims), value.byte_size, to_fb(value.storage),
                                     usage, value.storage == Storage::kArena ? value.arena_offset : 0,
                                     value.storage == Storage::kArena ? 0 : value.storage_index, view_of,
                                     last_use));
    }

    HEXIR_ASSIGN_OR_RETURN(uint32_t instruction_begin, checked_u32(instructions.size(), "instructions"));
    for (const Instruction& inst : fn.program) {
      HEXIR_ASSIGN_OR_RETURN(uint32_t operand_begin, checked_u32(operand_pool.size(), "operands"));
      HEXIR_ASSIGN_OR_RETURN(uint32_t param_begin, checked_u32(param_pool.size(), "parameters"));
      for (int input : inst.inputs) operand_pool.push_back(slot_of[input]);
      operand_pool.push_back(slot_of[inst.output]);
      param_pool.insert(param_pool.end(), inst.params.begin(), inst.params.end());
      instructions.emplace_back(
          kernel_index.at(inst.kernel), operand_begin, static_cast<uint32_t>(inst.inputs.size() + 1),
          static_cast<uint32_t>(inst.inputs.size()), param_begin, static_cast<uint32_t>(inst.params.size()),
          inst.alias_mask, fb::Opcode::Dispatch, uint8_t{0}, uint16_t{0});
      if (fn.workspace_in_arena) workspaces.emplace_back(inst.workspace_offset, inst.workspace_size);
    }
    HEXIR_RETURN_IF_ERROR(checked_u32(instructions.size(), "instructions").status());

    std::vector<flatbuffers::Offset<fb::Binding>> inputs, outputs;
    for (const Argument& arg : fn.arguments)
      inputs.push_back(fb::CreateBinding(fbb, fbb.CreateString(fn.values[arg.value].name), slot_of[arg.value],
                                         arg.donated_to));
    for (size_t i = 0; i < fn.outputs.size(); ++i)
      outputs.push_back(
          fb::CreateBinding(fbb, fbb.CreateString(std::to_string(i)), slot_of[fn.outputs[i]], -1));
    functions.push_back(fb::CreateFunction(
        fbb, fbb.CreateString(fn.name), fbb.CreateVector(inputs), fbb.CreateVector(outputs),
        instruction_begin, static_cast<uint32_t>(fn.program.size()), fn.arena_size, fn.lower_bound));
  }

  uint64_t arena_size = 0, lower_bound = 0, workspace_size = 0;
  for (const Function& fn : module.functions) {
    arena_size = std::max(arena_size, fn.arena_size);
    lower_bound = std::max(lower_bound, fn.lower_bound);
    if (!fn.workspace_in_arena) workspace_size = std::max(workspace_size, fn.workspace_size);
  }
  if (!workspaces.empty() && workspaces.size() != instructions.size())
    return internal_error("scratch placed in the arena for some functions only");
  const fb::PlanStrategy strategy = options.strategy == PlanStrategy::kNaive ? fb::PlanStrategy::Naive
                                    : options.strategy == PlanStrategy::kFreeAtLastUse
                                        ? fb::PlanStrategy::FreeAtLastUse
                                        : fb::PlanStrategy::Arena;
  auto arena = fb::CreateArenaPlan(fbb, arena_size, options.alignment, lower_bound, strategy,
                                   fbb.CreateString(options.heuristic), workspace_size);

  std::vector<fb::Section> sections;
  if (has_rodata)
    sections.emplace_back(layout.offset, layout.stored_size, rodata_size,
                          static_cast<uint32_t>(format::kPageSize), fb::SectionKind::Rodata,
                          layout.compression, uint8_t{0});
  auto module_offset = fb::CreateModule(
      fbb, fbb.CreateString(module.name), fbb.CreateString(kProducer), fbb.CreateVectorOfStructs(sections),
      fbb.CreateVector(constants), fbb.CreateVector(kernels), fbb.CreateVector(slots),
      fbb.CreateVectorOfStructs(instructions), fbb.CreateVector(operand_pool), fbb.CreateVector(param_pool),
      fbb.CreateVector(functions), arena,
      workspaces.empty() ? flatbuffers::Offset<flatbuffers::Vector<const fb::WorkspaceRange*>>()
                         : fbb.CreateVectorOfStructs(workspaces));
  fbb.Finish(module_offset, fb::ModuleIdentifier());
  return ok_status();
}

}  // namespace

Result<std::vector<uint8_t>> write_module(const Module& module, const WriteOptions& options) {
  const bool has_rodata = module_has_rodata(module);
  RodataLayout layout;
  layout.stored_size = has_rodata ? rodata_size_of(module) : 0;
  auto copy_rodata = [&](uint8_t* dst) {
    for (const Constant& c : module.constants)
      if (!c.is_fill && c.byte_size) std::memcpy(dst + c.rodata_offset, c.data.data(), c.byte_size);
  };
  // Compressed only when asked, when the section is large enough to matter
  // and when zstd actually makes it smaller (random weights may not shrink).
  std::vector<uint8_t> compressed;
  if (has_rodata && options.compression == SectionCompression::kZstd &&
      layout.stored_size >= kMinCompressedSectionSize) {
    std::vector<uint8_t> raw(layout.stored_size, 0);
    copy_rodata(raw.data());
    HEXIR_ASSIGN_OR_RETURN(compressed, format::compress_section(raw, options.compression_level));
    if (compressed.size() < raw.size()) {
      layout.stored_size = compressed.size();
      layout.compression = fb::Compression::Zstd;
    } else {
      compressed.clear();
    }
  }
  // The data section's offset is absolute and follows the metadata on a page
  // boundary: measure the metadata once, then build it with the real offset.
  flatbuffers::FlatBufferBuilder sizing(1 << 16);
  HEXIR_RETURN_IF_ERROR(build_metadata(module, options, layout, sizing));
  const uint64_t data_offset = round_up(kPreludeSize + sizing.GetSize(), format::kPageSize);
  if (has_rodata) layout.offset = data_offset;
  flatbuffers::FlatBufferBuilder fbb(sizing.GetSize() + 1024);
  HEXIR_RETURN_IF_ERROR(build_metadata(module, options, layout, fbb));
  const uint64_t metadata_size = fbb.GetSize();
  if (metadata_size != sizing.GetSize()) return internal_error("metadata size changed between writer passes");
  const uint64_t data_size = layout.stored_size;
  std::vector<uint8_t> file(data_offset + data_size, 0);
  std::memcpy(file.data() + kPreludeSize, fbb.GetBufferPointer(), metadata_size);
  if (layout.compression == fb::Compression::Zstd)
    std::memcpy(file.data() + data_offset, compressed.data(), compressed.size());
  else if (has_rodata)
    copy_rodata(file.data() + data_offset);

  format::Prelude prelude{};
  std::memcpy(prelude.magic, format::kMagic, sizeof(prelude.magic));
  prelude.format_version = format::kFormatVersion;
  prelude.flags = 0;
  prelude.metadata_offset = kPreludeSize;
  prelude.metadata_size = metadata_size;
  prelude.data_offset = data_offset;
  prelude.data_size = data_size;
  prelude.metadata_checksum =
      format::checksum64(std::span<const uint8_t>(file.data() + kPreludeSize, metadata_size));
  if (options.data_checksum) {
    prelude.flags |= format::kFlagDataChecksum;
    prelude.data_checksum =
        format::checksum64(std::span<const uint8_t>(file.data() + data_offset, data_size));
  }
  static_assert(std::endian::native == std::endian::little, "the prelude is written in host order");
  std::memcpy(file.data(), &prelude, sizeof(prelude));
  return file;
}

}  // namespace hexir::serializer
