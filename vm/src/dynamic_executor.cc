#include "dynamic_executor.h"

#include <algorithm>
#include <string>

#include "vm_impl.h"

namespace hexir::vm {
namespace {

// Each value is released after its last use (verified against the
// instructions), unless an in-place result took its buffer over there.
// `roots`: per local value number, its slot.
Status schedule_frees(const fb::Module& fbm, const fb::Function& fn, const std::vector<uint32_t>& roots,
                      const std::string& function_name, DynamicExecutor::Values& v) {
  std::vector<std::vector<uint32_t>> frees(fn.instruction_count());
  for (size_t local = 0; local < roots.size(); ++local) {
    const int32_t last = fbm.slots()->Get(roots[local])->last_use();
    if (last < 0 || static_cast<uint32_t>(last) >= fn.instruction_count())
      return data_loss("free-at-last-use value " + std::to_string(roots[local]) + " has no last use in function '" +
                       function_name + "'");
    if (v.step_inherit[static_cast<size_t>(last)] == static_cast<int32_t>(local)) continue;
    frees[static_cast<size_t>(last)].push_back(static_cast<uint32_t>(local));
  }
  append_csr(frees, v.step_free_begin, v.step_free);
  return ok_status();
}

}  // namespace

// Values are numbered in the order the instructions first name them; the
// operands entries are counted as build_function_table lays them out (every
// operand of every instruction, in order). O(the function's operands): the
// slot-to-value table is the caller's, shared by every function, and only
// the entries this function set are reset.
Status DynamicExecutor::add_function(const ModuleImpl& m, const ProgramImpl& p, size_t function_index,
                                     std::vector<int32_t>& local_value) {
  const fb::Module& fbm = m.fb();
  const fb::Function& fn = *fbm.functions()->Get(static_cast<flatbuffers::uoffset_t>(function_index));
  Values& v = functions_.emplace_back();
  std::vector<uint32_t> roots;  // per local value: its slot
  std::vector<std::vector<uint32_t>> value_patches;
  auto local_of = [&](uint32_t slot_index) {
    const fb::Slot& slot = *fbm.slots()->Get(slot_index);
    const uint32_t root = slot.view_of() >= 0 ? static_cast<uint32_t>(slot.view_of()) : slot_index;
    if (local_value[root] < 0) {
      local_value[root] = static_cast<int32_t>(v.value_size.size());
      roots.push_back(root);
      v.value_size.push_back(fbm.slots()->Get(root)->byte_size());
      value_patches.emplace_back();
    }
    return local_value[root];
  };
  uint32_t operand_index = 0;
  for (uint32_t k = 0; k < fn.instruction_count(); ++k) {
    const uint32_t index = fn.instruction_begin() + k;
    const fb::Instruction& in = *fbm.instructions()->Get(index);
    v.step_write_begin.push_back(static_cast<uint32_t>(v.step_write.size()));
    for (uint32_t o = 0; o < in.operand_count(); ++o, ++operand_index) {
      const uint32_t slot_index = fbm.operand_pool()->Get(in.operand_begin() + o);
      const fb::Slot& slot = *fbm.slots()->Get(slot_index);
      // The host memory space has a static arena (verified: static plans only).
      if (slot.storage() != fb::StorageKind::Arena || slot.memory_space() == fb::MemorySpace::Host) continue;
      const int32_t value = local_of(slot_index);
      value_patches[static_cast<size_t>(value)].push_back(operand_index);
      if (o >= in.input_count()) v.step_write.push_back(static_cast<uint32_t>(value));
    }
    // Control instructions may have no output (BranchIfZero, Jump, Fail).
    const bool arena_out =
        in.operand_count() > in.input_count() &&
        fbm.slots()->Get(fbm.operand_pool()->Get(in.operand_begin() + in.input_count()))->storage() ==
            fb::StorageKind::Arena;
    int32_t inherit = -1;
    for (uint32_t i = 0; i < in.input_count() && i < 32; ++i)
      if (arena_out && ((in.alias_mask() >> i) & 1u))
        inherit = local_of(fbm.operand_pool()->Get(in.operand_begin() + i));
    v.step_inherit.push_back(inherit);
    v.step_workspace.push_back(p.workspace_need[index]);
  }
  v.step_write_begin.push_back(static_cast<uint32_t>(v.step_write.size()));
  for (uint32_t root : roots) local_value[root] = -1;
  HEXIR_RETURN_IF_ERROR(schedule_frees(fbm, fn, roots, m.functions[function_index].name, v));
  append_csr(value_patches, v.value_patch_begin, v.value_patch_args);
  v.value_buffer.assign(v.value_size.size(), hal::Buffer{});
  return ok_status();
}

Status DynamicExecutor::run(ContextImpl& c, size_t function, FunctionTable& t, size_t* failed) {
  Values& v = functions_[function];
  Status status = run_steps(c, v, t, failed);
  // After an error, what was held; after success nothing is left unless a
  // value was never released (not in a verified file).
  release_values(*c.program->device, v);
  return status;
}

// With loops, a value written again (a carried value) keeps its buffer; a
// LoopNext releases what lives through its loop only when the loop ends, and
// a jump forward releases what the skipped instructions would have.
Status DynamicExecutor::run_steps(ContextImpl& c, Values& v, FunctionTable& t, size_t* failed) {
  hal::Device& device = *c.program->device;
  const size_t count = t.dispatches.size();
  size_t next_pc = 0;
  for (size_t k = 0; k < count; k = next_pc) {
    *failed = k;
    HEXIR_RETURN_IF_ERROR(hold_writes(c, v, t, k));
    if (t.opcode.empty() || t.opcode[k] == fb::Opcode::Dispatch) {
      HEXIR_RETURN_IF_ERROR(dispatch(c, v, t, k));
      release_after(device, v, k);
      next_pc = k + 1;
      continue;
    }
    HEXIR_ASSIGN_OR_RETURN(next_pc, c.run_control(t, k));
    // Back to a loop's body (next_pc <= k): its live values stay.
    for (size_t skipped = k; skipped < next_pc; ++skipped) release_after(device, v, skipped);
  }
  return ok_status();
}

Status DynamicExecutor::hold_writes(ContextImpl& c, Values& v, FunctionTable& t, size_t k) {
  for (uint32_t w = v.step_write_begin[k]; w < v.step_write_begin[k + 1]; ++w) {
    const uint32_t write = v.step_write[w];
    hal::Buffer& buffer = v.value_buffer[write];
    const int32_t inherit = w == v.step_write_begin[k] ? v.step_inherit[k] : -1;  // output 0 only
    if (buffer.size > 0) {
      // Already holds its buffer: written again inside a loop.
    } else if (inherit >= 0) {
      buffer = v.value_buffer[static_cast<size_t>(inherit)];
      v.value_buffer[static_cast<size_t>(inherit)] = hal::Buffer{};
    } else if (v.value_size[write] > 0) {
      HEXIR_ASSIGN_OR_RETURN(buffer, allocate(c, v.value_size[write]));
    }
    void* data = buffer.size > 0 ? device_address(buffer) : nullptr;
    for (uint32_t a = v.value_patch_begin[write]; a < v.value_patch_begin[write + 1]; ++a)
      t.operands[v.value_patch_args[a]] = at_view_offset(data, t.operand_view_bytes[v.value_patch_args[a]]);
  }
  return ok_status();
}

// A dispatch waits for the kernel before what it used is released (its
// scratch, values at their last use), and when profiled.
Status DynamicExecutor::dispatch(ContextImpl& c, const Values& v, FunctionTable& t, size_t k) {
  hal::Buffer scratch;
  if (v.step_workspace[k] > 0) {
    HEXIR_ASSIGN_OR_RETURN(scratch, allocate(c, v.step_workspace[k]));
    t.dispatches[k].workspace = device_address(scratch);
    t.dispatches[k].workspace_size = scratch.size;
  }
  const uint64_t start = c.profiling ? now_ns() : 0;
  Status status = c.queue->dispatch(t.dispatches[k]);
  const bool releases = scratch.size > 0 || v.step_free_begin[k] < v.step_free_begin[k + 1];
  if (status.ok() && (releases || c.profiling)) status = c.queue->synchronize();
  if (c.profiling) t.instruction_ns[k] += now_ns() - start;
  if (scratch.size > 0) {
    live_bytes_ -= scratch.size;
    c.program->device->release(scratch);
    t.dispatches[k].workspace = nullptr;
    t.dispatches[k].workspace_size = 0;
  }
  return status;
}

Result<hal::Buffer> DynamicExecutor::allocate(ContextImpl& c, uint64_t size) {
  HEXIR_ASSIGN_OR_RETURN(hal::Buffer buffer,
                         c.program->device->allocate(size, hal::MemoryType::kDeviceLocal,
                                                     hal::BufferUsage::kTransient, alignment_));
  ++c.invoke_stats.device_allocations;
  live_bytes_ += buffer.size;
  c.invoke_stats.peak_live_bytes = std::max(c.invoke_stats.peak_live_bytes, live_bytes_);
  return buffer;
}

void DynamicExecutor::release_after(hal::Device& device, Values& v, size_t k) {
  for (uint32_t f = v.step_free_begin[k]; f < v.step_free_begin[k + 1]; ++f) {
    hal::Buffer& buffer = v.value_buffer[v.step_free[f]];
    if (buffer.size == 0) continue;
    live_bytes_ -= buffer.size;
    device.release(buffer);
    buffer = hal::Buffer{};
  }
}

void DynamicExecutor::release_values(hal::Device& device, Values& v) {
  for (hal::Buffer& buffer : v.value_buffer) {
    if (buffer.size == 0) continue;
    live_bytes_ -= buffer.size;
    device.release(buffer);
    buffer = hal::Buffer{};
  }
}

}  // namespace hexir::vm
