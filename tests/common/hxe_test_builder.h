// Builds .hxe bytes by hand for the format and VM tests (independent of the
// serializer). A ModuleSpec is plain data that a test mutates to produce one
// specific defect; write_hxe() lays it out like the real writer does.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hexir/format/prelude.h"
#include "hexir_generated.h"

namespace hexir::testing {

// Page-aligned owned bytes (load_buffer needs 64, the verifier 8).
class AlignedBytes {
 public:
  AlignedBytes() = default;
  explicit AlignedBytes(size_t size)
      : data_(static_cast<uint8_t*>(std::aligned_alloc(4096, (size + 4095) / 4096 * 4096 + 4096)),
              &std::free),
        size_(size) {
    std::memset(data_.get(), 0, (size + 4095) / 4096 * 4096 + 4096);
  }
  AlignedBytes copy() const {
    AlignedBytes out(size_);
    std::memcpy(out.data(), data(), size_);
    return out;
  }
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  std::span<const uint8_t> span() const { return {data(), size_}; }
  std::span<const uint8_t> prefix(size_t n) const { return {data(), n}; }

 private:
  std::unique_ptr<uint8_t, decltype(&std::free)> data_{nullptr, &std::free};
  size_t size_ = 0;
};

struct SectionSpec {
  fb::SectionKind kind = fb::SectionKind::Rodata;
  std::vector<uint8_t> bytes;
  uint32_t alignment = 4096;
  fb::Compression compression = fb::Compression::None;
  std::optional<uint64_t> offset;    // override the laid-out file offset
  std::optional<uint64_t> size;      // override the stored size
  std::optional<uint64_t> raw_size;  // override raw_size
  fb::MemorySpace memory_space = fb::MemorySpace::Device;
};

struct ConstantSpec {
  std::string name;
  fb::DType dtype = fb::DType::F32;
  std::vector<int64_t> shape;
  uint64_t byte_size = 0;
  fb::ConstantStorage storage = fb::ConstantStorage::Rodata;
  uint32_t section = 0;
  uint64_t offset = 0;
  std::vector<uint8_t> fill_pattern;
  uint64_t fill_count = 0;
};

struct SlotSpec {
  std::string name;
  fb::DType dtype = fb::DType::F32;
  std::vector<int64_t> shape;
  uint64_t byte_size = 0;
  fb::StorageKind storage = fb::StorageKind::Arena;
  fb::SlotUsage usage = fb::SlotUsage::Transient;
  uint64_t arena_offset = 0;
  uint32_t index = 0;
  int32_t view_of = -1;   // a view: the slot of the value it views
  int32_t last_use = -1;  // arena values: last instruction (function-relative) that reads them
  int64_t view_offset = 0;        // a strided view: its first element in the slot it views
  std::vector<int64_t> strides = {};  // a strided view: its element strides (empty: row-major)
  int32_t bounded_dim = -1;  // a bounded dynamic shape: the dim, and the slot of its extent
  int32_t extent = -1;
};

struct InstructionSpec {
  uint32_t kernel = 0;
  uint32_t operand_begin = 0;
  uint32_t operand_count = 0;
  uint32_t input_count = 0;
  uint32_t param_begin = 0;
  uint32_t param_count = 0;
  uint32_t alias_mask = 0;
  uint8_t opcode = 0;
};

struct BindingSpec {
  std::string name;
  uint32_t slot = 0;
  int32_t donated_to = -1;
};

struct FunctionSpec {
  std::string name;
  std::vector<BindingSpec> inputs;
  std::vector<BindingSpec> outputs;
  uint32_t instruction_begin = 0;
  uint32_t instruction_count = 0;
  uint64_t arena_size = 0;
  uint64_t lower_bound = 0;
};

struct ModuleSpec {
  std::string name = "test";
  std::vector<SectionSpec> sections;
  std::vector<ConstantSpec> constants;
  std::vector<std::string> kernels;
  std::vector<SlotSpec> slots;
  std::vector<InstructionSpec> instructions;
  std::vector<uint32_t> operand_pool;
  std::vector<int64_t> param_pool;
  std::vector<FunctionSpec> functions;
  bool has_arena = true;
  uint64_t arena_size = 0;
  uint32_t arena_alignment = 64;
  uint64_t arena_lower_bound = 0;
  uint8_t arena_strategy = 1;
  uint64_t workspace_size = 0;
  std::vector<fb::WorkspaceRange> workspaces;  // empty, or one per instruction
  bool data_checksum = false;
  uint32_t extent_count = 0;  // entries of the extent table (bounded dynamic shapes)
};

inline uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

inline std::vector<uint8_t> build_metadata(const ModuleSpec& spec,
                                           const std::vector<uint64_t>& section_offsets) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<fb::Section> sections;
  for (size_t i = 0; i < spec.sections.size(); ++i) {
    const SectionSpec& s = spec.sections[i];
    const uint64_t size = s.size.value_or(s.bytes.size());
    sections.emplace_back(s.offset.value_or(section_offsets[i]), size, s.raw_size.value_or(size), s.alignment,
                          s.kind, s.compression, s.memory_space);
  }
  std::vector<flatbuffers::Offset<fb::Constant>> constants;
  for (const ConstantSpec& c : spec.constants) {
    auto name = b.CreateString(c.name);
    auto shape = b.CreateVector(c.shape);
    auto pattern = b.CreateVector(c.fill_pattern);
    constants.push_back(fb::CreateConstant(b, name, c.dtype, shape, c.byte_size, c.storage, c.section,
                                           c.offset, pattern, c.fill_count));
  }
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels;
  for (const std::string& k : spec.kernels) kernels.push_back(fb::CreateKernel(b, b.CreateString(k)));
  std::vector<flatbuffers::Offset<fb::Slot>> slots;
  for (const SlotSpec& s : spec.slots) {
    auto name = b.CreateString(s.name);
    auto shape = b.CreateVector(s.shape);
    auto strides = s.strides.empty() ? flatbuffers::Offset<flatbuffers::Vector<int64_t>>() : b.CreateVector(s.strides);
    slots.push_back(fb::CreateSlot(b, name, s.dtype, shape, s.byte_size, s.storage, s.usage, s.arena_offset,
                                   s.index, s.view_of, s.last_use, -1, fb::MemorySpace::Device, -1, s.view_offset,
                                   strides, s.bounded_dim, s.extent));
  }
  std::vector<fb::Instruction> instructions;
  for (const InstructionSpec& i : spec.instructions)
    instructions.emplace_back(i.kernel, i.operand_begin, i.operand_count, i.input_count, i.param_begin,
                              i.param_count, i.alias_mask, static_cast<fb::Opcode>(i.opcode), 0, 0);
  auto bindings = [&](const std::vector<BindingSpec>& list) {
    std::vector<flatbuffers::Offset<fb::Binding>> out;
    for (const BindingSpec& x : list)
      out.push_back(fb::CreateBinding(b, b.CreateString(x.name), x.slot, x.donated_to));
    return b.CreateVector(out);
  };
  std::vector<flatbuffers::Offset<fb::Function>> functions;
  for (const FunctionSpec& f : spec.functions) {
    auto name = b.CreateString(f.name);
    auto inputs = bindings(f.inputs);
    auto outputs = bindings(f.outputs);
    functions.push_back(fb::CreateFunction(b, name, inputs, outputs, f.instruction_begin, f.instruction_count,
                                           f.arena_size, f.lower_bound));
  }
  flatbuffers::Offset<fb::ArenaPlan> arena;
  if (spec.has_arena)
    arena = fb::CreateArenaPlan(b, spec.arena_size, spec.arena_alignment, spec.arena_lower_bound,
                                static_cast<fb::PlanStrategy>(spec.arena_strategy),
                                b.CreateString("greedy-by-size"), spec.workspace_size);
  auto module = fb::CreateModule(
      b, b.CreateString(spec.name), b.CreateString("hand-built test"), b.CreateVectorOfStructs(sections),
      b.CreateVector(constants), b.CreateVector(kernels), b.CreateVector(slots),
      b.CreateVectorOfStructs(instructions), b.CreateVector(spec.operand_pool),
      b.CreateVector(spec.param_pool), b.CreateVector(functions), arena,
      spec.workspaces.empty() ? flatbuffers::Offset<flatbuffers::Vector<const fb::WorkspaceRange*>>()
                              : b.CreateVectorOfStructs(spec.workspaces),
      0, spec.extent_count);
  fb::FinishModuleBuffer(b, module);
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

// Prelude, metadata at 64, then each section on its own page; the file ends
// exactly at the end of the last section (data_size covers no padding).
inline AlignedBytes write_hxe(const ModuleSpec& spec) {
  std::vector<uint64_t> offsets(spec.sections.size(), 0);
  std::vector<uint8_t> metadata = build_metadata(spec, offsets);  // sizes don't depend on offset values
  const uint64_t data_offset = round_up(64 + metadata.size(), format::kPageSize);
  uint64_t end = data_offset;
  for (size_t i = 0; i < spec.sections.size(); ++i) {
    offsets[i] = round_up(end, format::kPageSize);
    end = offsets[i] + spec.sections[i].bytes.size();
  }
  metadata = build_metadata(spec, offsets);
  AlignedBytes file(end);
  for (size_t i = 0; i < spec.sections.size(); ++i)
    std::memcpy(file.data() + offsets[i], spec.sections[i].bytes.data(), spec.sections[i].bytes.size());
  std::memcpy(file.data() + 64, metadata.data(), metadata.size());
  format::Prelude prelude{};
  std::memcpy(prelude.magic, format::kMagic, sizeof(format::kMagic));
  prelude.format_version = format::kFormatVersion;
  prelude.metadata_offset = 64;
  prelude.metadata_size = metadata.size();
  prelude.data_offset = data_offset;
  prelude.data_size = end - data_offset;
  prelude.metadata_checksum = format::checksum64(metadata);
  if (spec.data_checksum) {
    prelude.flags |= format::kFlagDataChecksum;
    prelude.data_checksum = format::checksum64({file.data() + data_offset, end - data_offset});
  }
  std::memcpy(file.data(), &prelude, sizeof(prelude));
  return file;
}

// Recomputes the metadata checksum after a test edited metadata bytes in place.
inline void reseal_metadata(AlignedBytes& file) {
  format::Prelude prelude;
  std::memcpy(&prelude, file.data(), sizeof(prelude));
  prelude.metadata_checksum =
      format::checksum64({file.data() + prelude.metadata_offset, prelude.metadata_size});
  std::memcpy(file.data(), &prelude, sizeof(prelude));
}

inline std::vector<uint8_t> f32_bytes(std::initializer_list<float> values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

// The tiny model the tests share:
//   func @main(%x: f32[1,4]) -> (f32[1,4]) {
//     %h  = add(%x, @b)        // @b: f32[4] in RODATA = [1, -2, 3, -4]
//     %h2 = mul(%h, @s)        // @s: f32[1,4] = splat 0.5 (a fill); in place over %h (alias bit 0)
//     %y  = relu(%h2)          // written straight into output 0
//   }
// Expected: y = max((x + b) * 0.5, 0).
inline ModuleSpec tiny_module_spec() {
  ModuleSpec m;
  m.name = "tiny";
  SectionSpec rodata;
  rodata.bytes = f32_bytes({1.0f, -2.0f, 3.0f, -4.0f});
  m.sections.push_back(rodata);
  const float half = 0.5f;
  std::vector<uint8_t> pattern(4);
  std::memcpy(pattern.data(), &half, 4);
  m.constants.push_back({"b", fb::DType::F32, {4}, 16, fb::ConstantStorage::Rodata, 0, 0, {}, 0});
  m.constants.push_back({"s", fb::DType::F32, {1, 4}, 16, fb::ConstantStorage::Fill, 0, 0, pattern, 4});
  m.kernels = {"add", "mul", "relu"};
  m.slots = {
      {"x", fb::DType::F32, {1, 4}, 16, fb::StorageKind::Input, fb::SlotUsage::ExternalInput, 0, 0},
      {"b", fb::DType::F32, {4}, 16, fb::StorageKind::Constant, fb::SlotUsage::Constant, 0, 0},
      {"s", fb::DType::F32, {1, 4}, 16, fb::StorageKind::Constant, fb::SlotUsage::Constant, 0, 1},
      {"h", fb::DType::F32, {1, 4}, 16, fb::StorageKind::Arena, fb::SlotUsage::Transient, 0, 0},
      {"h2", fb::DType::F32, {1, 4}, 16, fb::StorageKind::Arena, fb::SlotUsage::Transient, 0, 0},
      {"y", fb::DType::F32, {1, 4}, 16, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0},
  };
  m.operand_pool = {0, 1, 3, 3, 2, 4, 4, 5};
  m.instructions = {
      {0, 0, 3, 2, 0, 0, 0, 0},
      {1, 3, 3, 2, 0, 0, 0b1, 0},
      {2, 6, 2, 1, 0, 0, 0, 0},
  };
  m.functions.push_back({"main", {{"x", 0, -1}}, {{"0", 5, -1}}, 0, 3, 64, 16});
  m.arena_size = 64;
  m.arena_lower_bound = 16;
  return m;
}

inline float tiny_expected(float x, size_t i) {
  const float b[4] = {1.0f, -2.0f, 3.0f, -4.0f};
  const float v = (x + b[i]) * 0.5f;
  return v > 0 ? v : 0.0f;
}

}  // namespace hexir::testing
