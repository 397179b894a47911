#include <map>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include "vm_impl.h"

namespace hexir::vm {
namespace {

// Rounds up to a multiple of 64 (fills are packed at constant alignment).
bool align_up(uint64_t value, uint64_t* out) {
  constexpr uint64_t kAlign = format::kConstantAlignment;
  uint64_t padded;
  if (__builtin_add_overflow(value, kAlign - 1, &padded)) return false;
  *out = padded & ~(kAlign - 1);
  return true;
}

// RODATA sections: imported in place when the device can address host
// memory (cpu), otherwise one allocation and one upload each: into device
// memory, or for a Host section (streamed weights, read only by Prefetch)
// into host-visible memory (pinned on CUDA), the source of those copies.
Status prepare_sections(ProgramImpl& p, std::vector<hal::Buffer>& section_buffers) {
  const ModuleImpl& m = *p.module_impl;
  hal::Device& device = *p.device;
  section_buffers.resize(m.verified.sections.size());
  for (size_t i = 0; i < m.verified.sections.size(); ++i) {
    const fb::Section& section = *m.fb().sections()->Get(static_cast<flatbuffers::uoffset_t>(i));
    std::span<const uint8_t> bytes = m.verified.sections[i];
    if (section.kind() != fb::SectionKind::Rodata || bytes.empty()) continue;
    // The buffer is only ever read; the mapping itself is read-only.
    Result<hal::Buffer> imported =
        device.import_host(const_cast<uint8_t*>(bytes.data()), bytes.size(), hal::BufferUsage::kConstant);
    if (imported.ok()) {
      p.buffers.push_back(*imported);
      section_buffers[i] = *imported;
      continue;
    }
    if (imported.status().code() != StatusCode::kUnimplemented)
      return imported.status().annotate("importing section " + std::to_string(i));
    const bool host = section.memory_space() == fb::MemorySpace::Host;
    HEXIR_ASSIGN_OR_RETURN(hal::Buffer buffer,
                           device.allocate(bytes.size(), host ? hal::MemoryType::kHostVisible : hal::MemoryType::kDeviceLocal,
                                           hal::BufferUsage::kConstant, format::kConstantAlignment));
    p.buffers.push_back(buffer);
    ++p.prepare_stats.device_allocations;
    HEXIR_RETURN_IF_ERROR(device.write(buffer, 0, bytes.data(), bytes.size())
                              .annotate("uploading section " + std::to_string(i)));
    ++p.prepare_stats.uploads;
    section_buffers[i] = buffer;
  }
  return ok_status();
}

// Fill constants packed into one allocation, each materialized by one device fill.
Status prepare_constants(ProgramImpl& p, const std::vector<hal::Buffer>& section_buffers) {
  const ModuleImpl& m = *p.module_impl;
  const size_t count = m.fb().constants() ? m.fb().constants()->size() : 0;
  p.constant_data.assign(count, nullptr);
  std::vector<uint64_t> fill_offsets(count, 0);
  uint64_t fill_bytes = 0;
  for (size_t i = 0; i < count; ++i) {
    const fb::Constant& c = *m.fb().constants()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (c.storage() == fb::ConstantStorage::Rodata) {
      const hal::Buffer& section = section_buffers[c.section()];
      if (c.byte_size() > 0) p.constant_data[i] = device_address(section, c.offset());
      continue;
    }
    fill_offsets[i] = fill_bytes;
    if (__builtin_add_overflow(fill_bytes, c.byte_size(), &fill_bytes) || !align_up(fill_bytes, &fill_bytes))
      return resource_exhausted("fill constants need more than 2^64 bytes");
  }
  if (fill_bytes == 0) return ok_status();

  HEXIR_ASSIGN_OR_RETURN(hal::Buffer fills,
                         p.device->allocate(fill_bytes, hal::MemoryType::kDeviceLocal,
                                            hal::BufferUsage::kConstant, format::kConstantAlignment));
  p.buffers.push_back(fills);
  ++p.prepare_stats.device_allocations;
  for (size_t i = 0; i < count; ++i) {
    const fb::Constant& c = *m.fb().constants()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (c.storage() != fb::ConstantStorage::Fill || c.byte_size() == 0) continue;
    HEXIR_RETURN_IF_ERROR(
        p.device
            ->fill(fills, fill_offsets[i], c.byte_size(), c.fill_pattern()->data(), c.fill_pattern()->size())
            .annotate("filling constant " + std::to_string(i)));
    p.constant_data[i] = device_address(fills, fill_offsets[i]);
  }
  return ok_status();
}

// Every instruction's plan and kernel, once: the invoke loop only hands over
// pointers. Kernels are resolved per (operator, dtypes); the same key is
// resolved once.
Status prepare_instructions(ProgramImpl& p) {
  const ModuleImpl& m = *p.module_impl;
  const fb::Module& fbm = m.fb();
  const size_t count = fbm.instructions() ? fbm.instructions()->size() : 0;
  p.instruction_kernel.assign(count, 0);
  p.plan_begin.assign(count, 0);
  p.workspace_need.assign(count, 0);
  std::vector<std::pair<ops::KernelKey, uintptr_t>> resolved;
  std::vector<TensorType> inputs, outputs;
  std::vector<std::vector<int64_t>> input_strides;  // per input: a strided view's strides (docs/views.md)
  for (size_t k = 0; k < count; ++k) {
    const fb::Instruction& in = *fbm.instructions()->Get(static_cast<flatbuffers::uoffset_t>(k));
    p.plan_begin[k] = p.plan_words.size();
    if (in.opcode() != fb::Opcode::Dispatch) continue;  // run by the VM itself: no kernel, no plan
    const ops::OpId op = m.verified.kernel_ids[in.kernel()];
    inputs.clear();
    outputs.clear();
    input_strides.assign(in.input_count(), {});
    bool any_strided = false;
    for (uint32_t o = 0; o < in.operand_count(); ++o) {
      const uint32_t slot = fbm.operand_pool()->Get(in.operand_begin() + o);
      const TensorType& type = m.verified.slot_types[slot];
      (o < in.input_count() ? inputs : outputs).push_back(type);
      const auto* strides = fbm.slots()->Get(slot)->strides();
      if (o < in.input_count() && strides && strides->size() > 0) {
        input_strides[o].assign(strides->begin(), strides->end());
        any_strided = true;
      }
    }
    if (!any_strided) input_strides.clear();
    std::span<const int64_t> params;
    if (in.param_count() > 0) params = {fbm.param_pool()->data() + in.param_begin(), in.param_count()};
    const std::string where = "instruction " + std::to_string(k) + " ('" + ops::op_def(op).name + "')";
    // The verifier ran the same rule; a failure here is a bug, not a bad file.
    Result<ops::OpPlan> plan = ops::plan_op(op, inputs, outputs, params, input_strides);
    if (!plan.ok()) return plan.status().annotate("planning " + where);
    p.plan_begin[k] = p.plan_words.size();
    p.plan_words.insert(p.plan_words.end(), plan->words().begin(), plan->words().end());
    p.workspace_need[k] = ops::workspace_bytes(op, inputs, params);
    const ops::KernelKey key = ops::kernel_key(op, inputs, outputs);
    uintptr_t handle = 0;
    for (const auto& [known, h] : resolved)
      if (known.op == key.op && known.input == key.input && known.output == key.output) handle = h;
    if (handle == 0) {
      Result<uintptr_t> found = p.device->resolve_kernel(key);
      if (!found.ok()) return found.status().annotate(where + " on " + std::string(p.device->name()));
      handle = *found;
      resolved.emplace_back(key, handle);
    }
    p.instruction_kernel[k] = handle;
  }
  p.plan_words.shrink_to_fit();  // fixed from here on: plan() pointers stay valid
  return ok_status();
}

// Where constant i lies when it is read in place from the file's read-only
// mapping: its bytes [*begin, *end) and the page size; false for a copy
// (load_buffer, copy_weights, decompressed sections) or an empty one.
bool mapped_constant(const ProgramImpl& p, size_t i, uintptr_t* begin, uintptr_t* end, uintptr_t* page) {
  const ModuleImpl& m = *p.module_impl;
  if (m.mapping.empty() || p.constant_data[i] == nullptr) return false;
  *page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  if (*page == 0 || (*page & (*page - 1)) != 0) return false;
  const auto map_begin = reinterpret_cast<uintptr_t>(m.mapping.data());
  const uintptr_t map_end = map_begin + m.mapping.size();
  const fb::Constant& c = *m.fb().constants()->Get(static_cast<flatbuffers::uoffset_t>(i));
  *begin = reinterpret_cast<uintptr_t>(p.constant_data[i]);
  if (c.storage() != fb::ConstantStorage::Rodata || *begin < map_begin || *begin >= map_end ||
      c.byte_size() > map_end - *begin || c.byte_size() == 0)
    return false;
  *end = *begin + c.byte_size();
  return true;
}

// A constant every reader of which got a prepared copy in its place is not
// read again by this program (released as soon as its last reader is
// prepared, so the original and the copy are not both resident): when it lies in the file's read-only mapping,
// its whole pages are handed back (MADV_DONTNEED on clean private file pages
// only drops them from this process; a later reader, e.g. another Program
// of the same Module, faults them in again from the file), so the weights
// are not resident twice. Copies are kept: dropping anonymous pages would zero them.
void release_constant(const ProgramImpl& p, size_t i) {
  uintptr_t begin, end, page;
  if (!mapped_constant(p, i, &begin, &end, &page)) return;
  const uintptr_t first = (begin + page - 1) & ~(page - 1), last = end & ~(page - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

// A constant still read in place from the file's mapping is faulted in at
// prepare (MADV_POPULATE_READ maps its pages in one call, where the kernel
// has it), then one byte of each page is read: the first invoke then reads
// resident pages like the others (alexnet's 233 MB of fully connected
// weights made it 81 ms against 22). The read is not redundant under a
// hypervisor: on a Firecracker guest the populated pages' first access still
// cost 1.7-2 us each (the host's mapping; 12 ms for a QDQ ResNet-50's 25 MB,
// its first invoke 2x the steady state), and it is 0.1-0.3 ms where the
// pages are mapped already.
void populate_constant(const ProgramImpl& p, size_t i) {
  uintptr_t begin, end, page;
  if (!mapped_constant(p, i, &begin, &end, &page)) return;
  const uintptr_t first = begin & ~(page - 1);
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14
#endif
  (void)madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_READ);
  unsigned char sum = 0;
  for (uintptr_t a = first; a < end; a += page) sum ^= *reinterpret_cast<const volatile unsigned char*>(a);
  (void)sum;
}

// What a prepared form is derived from: the kernel, what the device says its
// prepare step reads of the plan (Device::prepare_key; the whole plan where it
// cannot tell) and the operands' constant addresses (null where an operand is
// not constant). Two instructions with the same key get the same bytes from
// prepare_dispatch, so the program keeps one copy for all of them: an
// unrolled recurrence's steps, or the prefill and decode functions of a
// language model, whose matmuls read the same weights with 32 rows and 1.
using PreparedKey = std::vector<uint64_t>;
PreparedKey prepared_key(const ProgramImpl& p, size_t k, const hal::Dispatch& d,
                         const std::vector<void*>& constants) {
  PreparedKey key{p.instruction_kernel[k], 1};
  if (!p.device->prepare_key(d, &key)) {
    const size_t end = k + 1 < p.plan_begin.size() ? p.plan_begin[k + 1] : p.plan_words.size();
    key.resize(1);
    key.push_back(0);  // the whole plan
    key.insert(key.end(), p.plan_words.begin() + static_cast<ptrdiff_t>(p.plan_begin[k]),
               p.plan_words.begin() + static_cast<ptrdiff_t>(end));
  }
  for (void* c : constants) key.push_back(reinterpret_cast<uintptr_t>(c));
  return key;
}

// Once per instruction, after the plans and constants: what its kernel
// derives from its constant operands (the CPU packs GEMM weights), kept for
// the program's lifetime and shared by every instruction with the same
// kernel, plan and constants; the invoke loop only hands the pointer over.
Status prepare_dispatches(ProgramImpl& p) {
  const ModuleImpl& m = *p.module_impl;
  const fb::Module& fbm = m.fb();
  const size_t count = p.instruction_kernel.size();
  p.instruction_prepared.assign(count, nullptr);
  std::vector<void*> constants;
  // Per constant: instructions reading it, and those whose prepared copy
  // replaced it (their kernels no longer read the original).
  const size_t constant_count = p.constant_data.size();
  std::vector<uint32_t> readers(constant_count, 0), replaced(constant_count, 0);
  struct Shared {
    const void* data;  // null: the device prepared nothing for this key
    uint32_t replaces;
  };
  std::map<PreparedKey, Shared> shared;
  for (size_t k = 0; k < count; ++k) {
    const fb::Instruction& in = *fbm.instructions()->Get(static_cast<flatbuffers::uoffset_t>(k));
    for (uint32_t o = 0; o < in.input_count(); ++o) {
      const fb::Slot& slot = *fbm.slots()->Get(fbm.operand_pool()->Get(in.operand_begin() + o));
      if (slot.storage() == fb::StorageKind::Constant && slot.index() < constant_count) ++readers[slot.index()];
    }
  }
  for (size_t k = 0; k < count; ++k) {
    const fb::Instruction& in = *fbm.instructions()->Get(static_cast<flatbuffers::uoffset_t>(k));
    if (in.opcode() != fb::Opcode::Dispatch) continue;  // control: run by the VM, no kernel
    constants.clear();
    bool any_constant = false;
    for (uint32_t o = 0; o < in.operand_count(); ++o) {
      const fb::Slot& slot = *fbm.slots()->Get(fbm.operand_pool()->Get(in.operand_begin() + o));
      void* data = nullptr;
      if (o < in.input_count() && slot.storage() == fb::StorageKind::Constant) data = p.constant_data[slot.index()];
      any_constant = any_constant || data != nullptr;
      constants.push_back(data);
    }
    if (!any_constant) continue;
    hal::Dispatch d;
    d.kernel = p.instruction_kernel[k];
    d.plan = p.plan(k);
    d.operands = constants.data();
    d.input_count = in.input_count();
    d.output_count = in.operand_count() - in.input_count();
    PreparedKey key = prepared_key(p, k, d, constants);
    uint32_t replaces = 0;
    if (auto same = shared.find(key); same != shared.end()) {
      p.instruction_prepared[k] = same->second.data;
      replaces = same->second.replaces;
    } else {
      Result<hal::Buffer> prepared = p.device->prepare_dispatch(d, &replaces);
      if (!prepared.ok()) return prepared.status().annotate("preparing instruction " + std::to_string(k));
      const bool empty = prepared->size == 0 && prepared->host_ptr == nullptr && prepared->device_ptr == 0;
      if (!empty) {
        p.buffers.push_back(*prepared);
        ++p.prepare_stats.device_allocations;
        p.prepared_bytes += prepared->size;
        p.instruction_prepared[k] = device_address(*prepared);
      }
      shared.emplace(std::move(key), Shared{p.instruction_prepared[k], empty ? 0u : replaces});
    }
    if (p.instruction_prepared[k] == nullptr) continue;
    for (uint32_t o = 0; o < in.input_count() && o < 32; ++o) {
      const fb::Slot& slot = *fbm.slots()->Get(fbm.operand_pool()->Get(in.operand_begin() + o));
      if (((replaces >> o) & 1u) && slot.storage() == fb::StorageKind::Constant && slot.index() < constant_count &&
          ++replaced[slot.index()] == readers[slot.index()])
        release_constant(p, slot.index());
    }
  }
  if (p.device->name() == "cpu")
    for (size_t i = 0; i < constant_count; ++i)
      if (readers[i] > replaced[i]) populate_constant(p, i);
  return ok_status();
}

}  // namespace

ProgramImpl::~ProgramImpl() {
  for (hal::Buffer& buffer : buffers) device->release(buffer);
}

Program::Program(std::unique_ptr<ProgramImpl> impl) : impl_(std::move(impl)) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;

Result<Program> Program::prepare(const Module& module, hal::Device& device) {
  if (!module.impl_) return failed_precondition("Program::prepare: the Module is a moved-from handle");
  auto impl = std::make_unique<ProgramImpl>();
  // The Program shares the Module's state: the caller's handle may go first.
  impl->module_handle.emplace(Module(module.impl_));
  impl->module = &*impl->module_handle;
  impl->module_impl = &impl->module->impl();
  impl->device = &device;
  HEXIR_RETURN_IF_ERROR(prepare_sections(*impl, impl->section_buffers));
  HEXIR_RETURN_IF_ERROR(prepare_constants(*impl, impl->section_buffers));
  HEXIR_RETURN_IF_ERROR(prepare_instructions(*impl));
  HEXIR_RETURN_IF_ERROR(prepare_dispatches(*impl));
  return Program(std::move(impl));
}

const Module& Program::module() const { return *impl_->module; }
hal::Device& Program::device() const { return *impl_->device; }
const PhaseStats& Program::prepare_stats() const { return impl_->prepare_stats; }
uint64_t Program::prepared_bytes() const { return impl_ ? impl_->prepared_bytes : 0; }

}  // namespace hexir::vm
