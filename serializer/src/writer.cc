#include "hexir/serializer/writer.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <map>
#include <new>
#include <stdexcept>

#include "hexir/format/prelude.h"
#include "hexir/format/sections.h"
#include "hexir/ops/op.h"
#include "hexir_generated.h"
#include "ir/constant_data.h"
#include "ir/plan.h"

namespace hexir::serializer {

using namespace compiler;  // the graph and plan types the writer reads

// ---- sinks --------------------------------------------------------------------

Status ByteSink::append_zeros(uint64_t count) {
  static const uint8_t kZeros[4096] = {};
  while (count > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(count, sizeof(kZeros)));
    HEXIR_RETURN_IF_ERROR(append(std::span<const uint8_t>(kZeros, n)));
    count -= n;
  }
  return ok_status();
}

Status VectorSink::append(std::span<const uint8_t> bytes) {
  try {
    bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  } catch (const std::bad_alloc&) {  // bounded by CompileOptions::max_constant_bytes; memory may be less
    return resource_exhausted("cannot hold " + std::to_string(bytes_.size() + bytes.size()) +
                              " bytes of the executable in memory");
  }
  return ok_status();
}

void VectorSink::reserve(uint64_t size) {
  try {
    bytes_.reserve(static_cast<size_t>(size));
  } catch (const std::bad_alloc&) {  // a hint only: append reports what cannot be held
  } catch (const std::length_error&) {
  }
}

Status VectorSink::overwrite(uint64_t offset, std::span<const uint8_t> bytes) {
  if (offset > bytes_.size() || bytes.size() > bytes_.size() - offset)
    return internal_error("overwrite past the end of the written bytes");
  std::copy(bytes.begin(), bytes.end(), bytes_.begin() + static_cast<std::ptrdiff_t>(offset));
  return ok_status();
}

Result<std::unique_ptr<FileSink>> FileSink::create(const std::filesystem::path& path) {
  HEXIR_ASSIGN_OR_RETURN(OutputFile file, OutputFile::create(path.string()));
  return std::unique_ptr<FileSink>(new FileSink(std::move(file)));
}

FileSink::~FileSink() = default;  // not committed: OutputFile removes the temporary

Status FileSink::write_error() const {
  return data_loss("error writing '" + file_.temp_path() + "' (for '" + file_.path() + "')");
}

Status FileSink::append(std::span<const uint8_t> bytes) {
  if (committed_ || !file_.stream()) return failed_precondition("'" + file_.path() + "' is closed");
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_.stream()) != bytes.size()) return write_error();
  size_ += bytes.size();
  return ok_status();
}

Status FileSink::overwrite(uint64_t offset, std::span<const uint8_t> bytes) {
  if (committed_ || !file_.stream()) return failed_precondition("'" + file_.path() + "' is closed");
  if (offset > size_ || bytes.size() > size_ - offset)
    return internal_error("overwrite past the end of the written bytes");
  std::FILE* f = file_.stream();  // the temporary: always a regular, seekable file
  if (::fseeko(f, static_cast<off_t>(offset), SEEK_SET) != 0 ||
      std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || ::fseeko(f, 0, SEEK_END) != 0)
    return write_error();
  return ok_status();
}

Status FileSink::commit() {
  if (committed_) return failed_precondition("'" + file_.path() + "' is closed");
  committed_ = true;
  return file_.commit();
}

// ---- the file -----------------------------------------------------------------

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
    case Storage::kHost:  // an arena slot in the Host memory space
      return fb::StorageKind::Arena;
    case Storage::kConstant:
      return fb::StorageKind::Constant;
    case Storage::kInput:
      return fb::StorageKind::Input;
    case Storage::kOutput:
      return fb::StorageKind::Output;
    case Storage::kExtent:
      return fb::StorageKind::Extent;
  }
  return fb::StorageKind::Arena;
}

Result<uint32_t> checked_u32(size_t value, const char* what) {
  if (value > UINT32_MAX) return resource_exhausted(std::string("too many ") + what + " for the file format");
  return static_cast<uint32_t>(value);
}

const Constant& graph_constant(const Module& module, const StoredConstant& stored) {
  return module.constants[static_cast<size_t>(stored.constant)];
}

// The file's RODATA sections: the device constants' (uploaded by a program)
// and the streamed ones' (Host), in that order, each only when it has bytes.
struct RodataSection {
  bool streamed = false;
  uint64_t raw_size = 0;
  // How it is stored: its absolute file offset (a fixed-size struct field,
  // so its value does not change the size of the metadata), the stored size
  // and the compression; `compressed` holds the bytes when compressed.
  uint64_t offset = 0;
  uint64_t stored_size = 0;
  fb::Compression compression = fb::Compression::None;
  std::vector<uint8_t> compressed;
};

std::vector<RodataSection> rodata_sections(const Module& module, const ConstantPlan& constants) {
  std::vector<RodataSection> sections;
  for (bool streamed : {false, true}) {
    RodataSection section;
    section.streamed = streamed;
    bool any = false;
    for (const StoredConstant& c : constants.stored) {
      if (c.fill || c.streamed != streamed) continue;
      any = true;
      section.raw_size = std::max(section.raw_size, c.rodata_offset + graph_constant(module, c).byte_size);
    }
    section.stored_size = section.raw_size;
    if (any) sections.push_back(std::move(section));
  }
  return sections;
}

// The section index of a stored RODATA constant.
uint32_t section_of(const std::vector<RodataSection>& sections, const StoredConstant& c) {
  for (size_t i = 0; i < sections.size(); ++i)
    if (sections[i].streamed == c.streamed) return static_cast<uint32_t>(i);
  return 0;
}

// Streams one RODATA section: each of its constants at its offset, zeros between.
Status stream_rodata(const Module& module, const ConstantPlan& constants, bool streamed,
                     const std::function<Status(std::span<const uint8_t>)>& out) {
  static const uint8_t kZeros[format::kConstantAlignment] = {};
  // Packing lays entries out in table order, so offsets only grow.
  uint64_t written = 0;
  for (const StoredConstant& c : constants.stored) {
    if (c.fill || c.streamed != streamed) continue;
    if (c.rodata_offset < written) return internal_error("RODATA entries out of order");
    while (written < c.rodata_offset) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(c.rodata_offset - written, sizeof(kZeros)));
      HEXIR_RETURN_IF_ERROR(out(std::span<const uint8_t>(kZeros, n)));
      written += n;
    }
    HEXIR_RETURN_IF_ERROR(for_each_chunk(graph_constant(module, c), out));
    written += graph_constant(module, c).byte_size;
  }
  return ok_status();
}

// The flatbuffer metadata, built table by table: constants, kernels, then per
// function its slots, instructions and bindings, then the arena plan and the
// module. The order of the builder's calls is the layout of the bytes.
class MetadataBuilder {
 public:
  MetadataBuilder(const Module& module, const ModulePlan& plan, const WriteOptions& options,
                  const std::vector<RodataSection>& rodata, flatbuffers::FlatBufferBuilder& fbb)
      : module_(module),
        plan_(plan),
        constant_plan_(plan.constants),
        options_(options),
        rodata_(rodata),
        fbb_(fbb) {}

  Status build() {
    if (plan_.functions.size() != module_.functions.size()) return internal_error("a function has no plan");
    add_constants();
    add_kernels();
    for (size_t f = 0; f < module_.functions.size(); ++f) HEXIR_RETURN_IF_ERROR(add_function(f));
    if (!workspaces_.empty() && workspaces_.size() != instructions_.size())
      return internal_error("scratch placed in the arena for some functions only");
    finish_module(add_arena_plan());
    return ok_status();
  }

 private:
  // One entry per stored constant.
  void add_constants() {
    for (const StoredConstant& stored : constant_plan_.stored) {
      const Constant& c = graph_constant(module_, stored);
      auto name = fbb_.CreateString(c.name);
      auto shape = fbb_.CreateVector(c.type.dims);
      auto pattern = fbb_.CreateVector(stored.fill ? stored.fill->pattern : std::vector<uint8_t>());
      constants_.push_back(fb::CreateConstant(
          fbb_, name, to_fb(c.type.dtype), shape, c.byte_size,
          stored.fill ? fb::ConstantStorage::Fill : fb::ConstantStorage::Rodata,
          stored.fill ? 0 : section_of(rodata_, stored), stored.fill ? 0 : stored.rodata_offset, pattern,
          stored.fill ? stored.fill->count : 0));
    }
  }

  // Kernels: one entry per distinct operator, in order of first use.
  void add_kernels() {
    for (const FunctionPlan& fn_plan : plan_.functions) {
      for (const Instruction& inst : fn_plan.program) {
        if (inst.control != Control::kNone || kernel_index_.count(inst.op)) continue;
        kernel_index_[inst.op] = static_cast<uint32_t>(kernels_.size());
        auto code = fb::CreateKernelCode(fbb_, fbb_.CreateString("builtin"), -1, 0, 0, fbb_.CreateString(""));
        std::vector<flatbuffers::Offset<fb::KernelCode>> codes{code};
        kernels_.push_back(
            fb::CreateKernel(fbb_, fbb_.CreateString(ops::op_def(inst.op).name), fbb_.CreateVector(codes)));
      }
    }
  }

  // A function's slots, instructions and bindings.
  Status add_function(size_t f) {
    const Function& fn = module_.functions[f];
    const FunctionPlan& fn_plan = plan_.functions[f];
    const int values = value_count(fn, fn_plan);
    std::vector<uint32_t> slot_of(static_cast<size_t>(values));
    std::vector<bool> donated_input(fn.arguments.size(), false);
    for (size_t a = 0; a < fn.arguments.size(); ++a)
      donated_input[static_cast<size_t>(fn.values[static_cast<size_t>(fn.arguments[a].value)].input_index)] =
          fn_plan.donated_to[a] >= 0;
    // Slots in value order, except that a view whose root comes later (an
    // if's branch value written straight into the if's result) follows it.
    std::vector<int> order;
    order.reserve(static_cast<size_t>(values));
    std::vector<int> deferred;
    for (int v = 0; v < values; ++v)
      (fn_plan.values[static_cast<size_t>(v)].storage_root > v ? deferred : order).push_back(v);
    order.insert(order.end(), deferred.begin(), deferred.end());
    // A bounded value names its extent's slot, so the extent's slot comes
    // first (and, where the extent is a view, the slot it views before it).
    std::vector<bool> added(static_cast<size_t>(values), false);
    auto add = [&](int v) -> Status {
      if (added[static_cast<size_t>(v)]) return ok_status();
      added[static_cast<size_t>(v)] = true;
      return add_slot(fn, fn_plan, v, donated_input, slot_of);
    };
    for (int v : order) {
      const int e = value_at(fn, fn_plan, v).extent;
      if (e >= 0) {
        HEXIR_RETURN_IF_ERROR(add(fn_plan.values[static_cast<size_t>(e)].storage_root));
        HEXIR_RETURN_IF_ERROR(add(e));
      }
      HEXIR_RETURN_IF_ERROR(add(v));
    }

    HEXIR_ASSIGN_OR_RETURN(uint32_t instruction_begin, checked_u32(instructions_.size(), "instructions"));
    for (const Instruction& inst : fn_plan.program)
      HEXIR_RETURN_IF_ERROR(add_instruction(fn, fn_plan, inst, slot_of));
    HEXIR_RETURN_IF_ERROR(checked_u32(instructions_.size(), "instructions").status());
    add_bindings(fn, fn_plan, slot_of, instruction_begin);
    return ok_status();
  }

  // The slot of value `v` (a stored constant has one slot shared by every
  // function): its type, storage, usage, and the slots it refers to.
  Status add_slot(const Function& fn, const FunctionPlan& fn_plan, int v,
                  const std::vector<bool>& donated_input, std::vector<uint32_t>& slot_of) {
    const Value& value = value_at(fn, fn_plan, v);
    const ValuePlan& where = fn_plan.values[static_cast<size_t>(v)];
    int stored_constant = -1;
    if (value.kind == ValueKind::kConstant)
      stored_constant = constant_plan_.stored_index[static_cast<size_t>(value.constant)];
    if (where.storage == Storage::kConstant && value.kind == ValueKind::kConstant) {
      if (auto it = constant_slot_.find(stored_constant); it != constant_slot_.end()) {
        slot_of[static_cast<size_t>(v)] = it->second;
        return ok_status();
      }
    }
    HEXIR_ASSIGN_OR_RETURN(slot_of[static_cast<size_t>(v)], checked_u32(slots_.size(), "slots"));
    if (value.kind == ValueKind::kConstant) constant_slot_[stored_constant] = slot_of[static_cast<size_t>(v)];
    fb::SlotUsage usage = fb::SlotUsage::Transient;
    uint32_t storage_index = where.storage_index;
    switch (where.storage) {
      case Storage::kArena:
      case Storage::kHost:
        usage = fb::SlotUsage::Transient;
        break;
      case Storage::kConstant:
        usage = fb::SlotUsage::Constant;
        // The plan names the graph constant; the file, its table entry.
        storage_index = static_cast<uint32_t>(constant_plan_.stored_index[where.storage_index]);
        break;
      case Storage::kInput:
        usage = donated_input[where.storage_index] ? fb::SlotUsage::Donated : fb::SlotUsage::ExternalInput;
        break;
      case Storage::kOutput:
        usage = fb::SlotUsage::ExternalOutput;
        break;
      case Storage::kExtent:  // one table entry per root, across functions
        usage = fb::SlotUsage::Transient;
        {  // numbered at the first of the root and its views written (a view may come first)
          const auto [entry, added] = extent_index_.try_emplace({&fn, where.storage_root}, extent_count_);
          if (added) ++extent_count_;
          storage_index = entry->second;
        }
        break;
    }
    // A bounded dim names the slot of its extent (added before this one).
    int32_t extent = -1;
    if (value.type.has_bound()) {
      if (value.extent < 0)
        return invalid_argument("%" + value.name + " is " + value.type.to_string() +
                                " with no run-time extent (a bounded value through a loop or an if is not "
                                "supported)");
      extent = static_cast<int32_t>(slot_of[static_cast<size_t>(value.extent)]);
    }
    // A view names the slot of the value it views (written before it: its root has a lower id).
    int32_t view_of = -1;
    if (where.storage_root != v) {
      const int root = where.storage_root;
      if (fn_plan.values[static_cast<size_t>(root)].storage_root != root)
        return internal_error("a view of a view");
      view_of = static_cast<int32_t>(slot_of[static_cast<size_t>(root)]);
    }
    // A recomputation names the slot of the value it computes again (written before it: a lower id).
    int32_t recomputes = -1;
    if (where.recomputes >= 0)
      recomputes = static_cast<int32_t>(slot_of[static_cast<size_t>(where.recomputes)]);
    // A copy (host offload) names the value it holds (written before it: a lower id).
    int32_t copy_of = -1;
    if (where.copy_of >= 0) copy_of = static_cast<int32_t>(slot_of[static_cast<size_t>(where.copy_of)]);
    const int32_t last_use =
        where.last_use >= 0 && where.last_use <= INT32_MAX ? static_cast<int32_t>(where.last_use) : -1;
    const bool arena = where.storage == Storage::kArena || where.storage == Storage::kHost;
    // Host: the host arena's values and the streamed weights (and views of them).
    const bool host = where.storage == Storage::kHost ||
                      (where.storage == Storage::kConstant &&
                       constant_plan_.stored[constant_plan_.stored_index[where.storage_index]].streamed);
    // A strided view's layout in the slot it views (docs/views.md); nothing for the others.
    const bool layout_view = view_of >= 0 && (where.view_offset != 0 || !where.view_strides.empty());
    slots_.push_back(fb::CreateSlot(
        fbb_, fbb_.CreateString(value.name), to_fb(value.type.dtype), fbb_.CreateVector(value.type.dims),
        value.byte_size, to_fb(where.storage), usage, arena ? where.arena_offset : 0,
        arena ? 0 : storage_index, view_of, last_use, recomputes,
        host ? fb::MemorySpace::Host : fb::MemorySpace::Device, copy_of, layout_view ? where.view_offset : 0,
        layout_view && !where.view_strides.empty() ? fbb_.CreateVector(where.view_strides)
                                                   : flatbuffers::Offset<flatbuffers::Vector<int64_t>>(),
        value.type.bounded, extent));
    return ok_status();
  }

  // One instruction: its operands (inputs, then one per output) and
  // parameters in the pools; a control instruction's parameters are its
  // target and step (a Fail's, its message's index). Its scratch range when
  // the function's scratch is in the arena.
  Status add_instruction(const Function& fn, const FunctionPlan& fn_plan, const Instruction& inst,
                         const std::vector<uint32_t>& slot_of) {
    HEXIR_ASSIGN_OR_RETURN(uint32_t operand_begin, checked_u32(operand_pool_.size(), "operands"));
    HEXIR_ASSIGN_OR_RETURN(uint32_t param_begin, checked_u32(param_pool_.size(), "parameters"));
    for (int input : inst.inputs) operand_pool_.push_back(slot_of[static_cast<size_t>(input)]);
    for (int output : inst.outputs) operand_pool_.push_back(slot_of[static_cast<size_t>(output)]);
    std::span<const int64_t> params = params_of(fn, inst);
    int64_t control_params[2] = {inst.target, inst.step};
    fb::Opcode opcode = fb::Opcode::Dispatch;
    uint32_t kernel = 0;
    switch (inst.control) {
      case Control::kNone:
        kernel = kernel_index_.at(inst.op);
        break;
      case Control::kLoopBegin:
        opcode = fb::Opcode::LoopBegin;
        params = {control_params, 1};
        break;
      case Control::kLoopNext:
        opcode = fb::Opcode::LoopNext;
        params = {control_params, 2};
        break;
      case Control::kBranchIfZero:
        opcode = fb::Opcode::BranchIfZero;
        params = {control_params, 1};
        break;
      case Control::kJump:
        opcode = fb::Opcode::Jump;
        params = {control_params, 1};
        break;
      case Control::kFail:
        opcode = fb::Opcode::Fail;
        control_params[0] = static_cast<int64_t>(messages_.size());
        messages_.push_back(fbb_.CreateString(inst.message));
        params = {control_params, 1};
        break;
      case Control::kEvict:
        opcode = fb::Opcode::Evict;
        params = {};
        break;
      case Control::kPrefetch:
        opcode = fb::Opcode::Prefetch;
        params = {};
        break;
    }
    param_pool_.insert(param_pool_.end(), params.begin(), params.end());
    instructions_.emplace_back(
        kernel, operand_begin, static_cast<uint32_t>(inst.inputs.size() + inst.outputs.size()),
        static_cast<uint32_t>(inst.inputs.size()), param_begin, static_cast<uint32_t>(params.size()),
        inst.alias_mask, opcode, uint8_t{0}, uint16_t{0});
    if (fn_plan.workspace_in_arena) workspaces_.emplace_back(inst.workspace_offset, inst.workspace_size);
    return ok_status();
  }

  // The function's entry: its input and output bindings, its instruction
  // range and its arena sizes.
  void add_bindings(const Function& fn, const FunctionPlan& fn_plan, const std::vector<uint32_t>& slot_of,
                    uint32_t instruction_begin) {
    std::vector<flatbuffers::Offset<fb::Binding>> inputs, outputs;
    for (size_t a = 0; a < fn.arguments.size(); ++a) {
      const int arg_value = fn.arguments[a].value;
      inputs.push_back(fb::CreateBinding(fbb_,
                                         fbb_.CreateString(fn.values[static_cast<size_t>(arg_value)].name),
                                         slot_of[static_cast<size_t>(arg_value)], fn_plan.donated_to[a]));
    }
    for (size_t i = 0; i < fn_plan.outputs.size(); ++i)
      outputs.push_back(fb::CreateBinding(
          fbb_, fbb_.CreateString(i < fn.output_names.size() ? fn.output_names[i] : std::to_string(i)),
          slot_of[static_cast<size_t>(fn_plan.outputs[i])], -1));
    functions_.push_back(fb::CreateFunction(
        fbb_, fbb_.CreateString(fn.name), fbb_.CreateVector(inputs), fbb_.CreateVector(outputs),
        instruction_begin, static_cast<uint32_t>(fn_plan.program.size()), fn_plan.arena_size,
        fn_plan.lower_bound, fn_plan.host_arena_size, fn_plan.host_lower_bound));
  }

  // The module's arena: the largest function's, with the shared workspace
  // of the functions whose scratch is not in it.
  flatbuffers::Offset<fb::ArenaPlan> add_arena_plan() {
    uint64_t arena_size = 0, lower_bound = 0, workspace_size = 0, host_size = 0, host_lower_bound = 0;
    for (const FunctionPlan& fn_plan : plan_.functions) {
      arena_size = std::max(arena_size, fn_plan.arena_size);
      host_size = std::max(host_size, fn_plan.host_arena_size);
      host_lower_bound = std::max(host_lower_bound, fn_plan.host_lower_bound);
      lower_bound = std::max(lower_bound, fn_plan.lower_bound);
      if (!fn_plan.workspace_in_arena) workspace_size = std::max(workspace_size, fn_plan.workspace_size);
    }
    const fb::PlanStrategy strategy = options_.strategy == PlanStrategy::kNaive ? fb::PlanStrategy::Naive
                                      : options_.strategy == PlanStrategy::kFreeAtLastUse
                                          ? fb::PlanStrategy::FreeAtLastUse
                                          : fb::PlanStrategy::Arena;
    return fb::CreateArenaPlan(fbb_, arena_size, options_.alignment, lower_bound, strategy,
                               fbb_.CreateString(options_.heuristic), workspace_size, host_size,
                               host_lower_bound);
  }

  void finish_module(flatbuffers::Offset<fb::ArenaPlan> arena) {
    std::vector<fb::Section> sections;
    for (const RodataSection& r : rodata_)
      sections.emplace_back(r.offset, r.stored_size, r.raw_size, static_cast<uint32_t>(format::kPageSize),
                            fb::SectionKind::Rodata, r.compression,
                            r.streamed ? fb::MemorySpace::Host : fb::MemorySpace::Device);
    auto module_offset = fb::CreateModule(
        fbb_, fbb_.CreateString(module_.name), fbb_.CreateString(kProducer),
        fbb_.CreateVectorOfStructs(sections), fbb_.CreateVector(constants_), fbb_.CreateVector(kernels_),
        fbb_.CreateVector(slots_), fbb_.CreateVectorOfStructs(instructions_),
        fbb_.CreateVector(operand_pool_), fbb_.CreateVector(param_pool_), fbb_.CreateVector(functions_),
        arena,
        workspaces_.empty() ? flatbuffers::Offset<flatbuffers::Vector<const fb::WorkspaceRange*>>()
                            : fbb_.CreateVectorOfStructs(workspaces_),
        messages_.empty()
            ? flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>>()
            : fbb_.CreateVector(messages_),
        extent_count_);
    fbb_.Finish(module_offset, fb::ModuleIdentifier());
  }

  const Module& module_;
  const ModulePlan& plan_;
  const ConstantPlan& constant_plan_;
  const WriteOptions& options_;
  const std::vector<RodataSection>& rodata_;
  flatbuffers::FlatBufferBuilder& fbb_;
  std::vector<flatbuffers::Offset<fb::Constant>> constants_;
  std::map<ops::OpId, uint32_t> kernel_index_;
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels_;
  std::vector<flatbuffers::Offset<fb::Slot>> slots_;
  std::map<int, uint32_t> constant_slot_;  // stored constant index -> slot
  std::vector<fb::Instruction> instructions_;
  std::vector<uint32_t> operand_pool_;
  std::vector<int64_t> param_pool_;
  std::vector<flatbuffers::Offset<fb::Function>> functions_;
  std::vector<fb::WorkspaceRange> workspaces_;  // per instruction, when scratch is in the arena
  std::vector<flatbuffers::Offset<flatbuffers::String>> messages_;  // the Fail instructions' errors
  // Extent table entries (Storage::kExtent roots), numbered across functions.
  std::map<std::pair<const Function*, int>, uint32_t> extent_index_;
  uint32_t extent_count_ = 0;
};

// Builds the flatbuffer metadata.
Status build_metadata(const Module& module, const ModulePlan& plan, const WriteOptions& options,
                      const std::vector<RodataSection>& rodata, flatbuffers::FlatBufferBuilder& fbb) {
  return MetadataBuilder(module, plan, options, rodata, fbb).build();
}

}  // namespace

Status write_module(const Module& module, const ModulePlan& plan, const WriteOptions& options, ByteSink& sink,
                    std::vector<uint8_t>* head) {
  const ConstantPlan& constants = plan.constants;
  std::vector<RodataSection> rodata = rodata_sections(module, constants);
  // Compressed only when asked, when the section is large enough to matter
  // and when zstd actually makes it smaller (random weights may not shrink).
  // zstd needs the raw section in one piece: it is assembled once, here.
  for (RodataSection& r : rodata) {
    if (options.compression != SectionCompression::kZstd || r.raw_size < kMinCompressedSectionSize) continue;
    std::vector<uint8_t> raw;
    try {  // at most CompileOptions::max_constant_bytes (checked before planning), if memory allows
      raw.reserve(static_cast<size_t>(r.raw_size));
    } catch (const std::bad_alloc&) {
      return resource_exhausted("cannot hold the " + std::to_string(r.raw_size) +
                                "-byte RODATA section in memory to compress it with zstd");
    }
    HEXIR_RETURN_IF_ERROR(stream_rodata(module, constants, r.streamed, [&](std::span<const uint8_t> piece) {
      raw.insert(raw.end(), piece.begin(), piece.end());  // within the reserved capacity
      return ok_status();
    }));
    HEXIR_ASSIGN_OR_RETURN(std::vector<uint8_t> compressed, format::compress_section(raw, options.compression_level));
    if (compressed.size() < raw.size()) {
      r.stored_size = compressed.size();
      r.compression = fb::Compression::Zstd;
      r.compressed = std::move(compressed);
    }
  }
  // The data sections' offsets are absolute and follow the metadata, each on
  // a page boundary: measure the metadata once, then build it with the real offsets.
  flatbuffers::FlatBufferBuilder sizing(1 << 16);
  HEXIR_RETURN_IF_ERROR(build_metadata(module, plan, options, rodata, sizing));
  const uint64_t data_offset = round_up(kPreludeSize + sizing.GetSize(), format::kPageSize);
  uint64_t data_end = data_offset;
  for (RodataSection& r : rodata) {
    r.offset = round_up(data_end, format::kPageSize);
    data_end = r.offset + r.stored_size;
  }
  flatbuffers::FlatBufferBuilder fbb(sizing.GetSize() + 1024);
  HEXIR_RETURN_IF_ERROR(build_metadata(module, plan, options, rodata, fbb));
  const uint64_t metadata_size = fbb.GetSize();
  if (metadata_size != sizing.GetSize()) return internal_error("metadata size changed between writer passes");
  const std::span<const uint8_t> metadata(fbb.GetBufferPointer(), static_cast<size_t>(metadata_size));

  // The prelude goes last, over zeros, once the data checksum is known.
  if (sink.size() != 0) return internal_error("the writer needs an empty sink");
  sink.reserve(data_end);
  HEXIR_RETURN_IF_ERROR(sink.append_zeros(kPreludeSize));
  HEXIR_RETURN_IF_ERROR(sink.append(metadata));
  HEXIR_RETURN_IF_ERROR(sink.append_zeros(data_offset - kPreludeSize - metadata_size));
  StreamingChecksum64 data_checksum;
  auto append_data = [&](std::span<const uint8_t> piece) {
    data_checksum.update(piece);
    return sink.append(piece);
  };
  for (const RodataSection& r : rodata) {
    if (sink.size() < r.offset) {  // the page padding between sections is data too (checksummed)
      static const uint8_t kZeros[format::kPageSize] = {};
      HEXIR_RETURN_IF_ERROR(append_data(std::span<const uint8_t>(kZeros, static_cast<size_t>(r.offset - sink.size()))));
    }
    if (r.compression == fb::Compression::Zstd) {
      HEXIR_RETURN_IF_ERROR(append_data(r.compressed));
    } else {
      HEXIR_RETURN_IF_ERROR(stream_rodata(module, constants, r.streamed, append_data));
    }
    if (sink.size() != r.offset + r.stored_size) return internal_error("data section size changed while writing");
  }
  const uint64_t data_size = data_end - data_offset;

  format::Prelude prelude{};
  std::memcpy(prelude.magic, format::kMagic, sizeof(prelude.magic));
  prelude.format_version = format::kFormatVersion;
  prelude.flags = 0;
  prelude.metadata_offset = kPreludeSize;
  prelude.metadata_size = metadata_size;
  prelude.data_offset = data_offset;
  prelude.data_size = data_size;
  prelude.metadata_checksum = format::checksum64(metadata);
  if (options.data_checksum) {
    prelude.flags |= format::kFlagDataChecksum;
    prelude.data_checksum = data_checksum.finish();
  }
  static_assert(std::endian::native == std::endian::little, "the prelude is written in host order");
  const auto* prelude_bytes = reinterpret_cast<const uint8_t*>(&prelude);
  HEXIR_RETURN_IF_ERROR(sink.overwrite(0, std::span<const uint8_t>(prelude_bytes, sizeof(prelude))));
  if (head) {
    head->assign(prelude_bytes, prelude_bytes + sizeof(prelude));
    head->insert(head->end(), metadata.begin(), metadata.end());
  }
  return ok_status();
}

Result<std::vector<uint8_t>> write_module(const Module& module, const ModulePlan& plan,
                                          const WriteOptions& options) {
  VectorSink sink;
  HEXIR_RETURN_IF_ERROR(write_module(module, plan, options, sink));
  return sink.take();
}

}  // namespace hexir::serializer
