#include <algorithm>
#include <cstring>
#include <string>

#include "vm_impl.h"

namespace hexir::vm {
namespace {

// Host offload's copies (Evict, Prefetch) of a function: each becomes a
// Transfer (its target: its index, which is also its copy fence), and each
// names the instruction before which the queue waits for it (copy_wait): a
// prefetch, the first later instruction touching its device copy; an
// eviction, the first later one writing over its device source (its output
// or scratch). Without such an instruction, the end of the invoke waits. In
// a function with loops or ifs the copies run in order on the queue (a
// position is not a point in time there).
Status build_transfers(const fb::Module& fbm, const fb::Function& fn, FunctionTable& t) {
  const uint32_t count = fn.instruction_count();
  std::vector<std::vector<uint32_t>> waits(count);
  const bool per_instruction_workspace = fbm.workspaces() && fbm.workspaces()->size() > 0;
  for (uint32_t k = 0; k < count; ++k) {
    const fb::Opcode op = t.opcode[k];
    if (op != fb::Opcode::Evict && op != fb::Opcode::Prefetch) {
      if (op != fb::Opcode::Dispatch) t.ordered_copies = true;  // control flow
      continue;
    }
    const fb::Instruction& in = *fbm.instructions()->Get(fn.instruction_begin() + k);
    // Verified: one arena value in each memory space, of one size.
    const bool to_host = op == fb::Opcode::Evict;
    const fb::Slot& from = *fbm.slots()->Get(fbm.operand_pool()->Get(in.operand_begin()));
    const fb::Slot& to = *fbm.slots()->Get(fbm.operand_pool()->Get(in.operand_begin() + 1));
    FunctionTable::Transfer transfer;
    transfer.to_host = to_host;
    transfer.device_offset = to_host ? from.arena_offset() : to.arena_offset();
    transfer.host_offset = to_host ? to.arena_offset() : from.arena_offset();
    if (from.storage() == fb::StorageKind::Constant) {  // a streamed weight (verified: Rodata, a Host section)
      const fb::Constant& c = *fbm.constants()->Get(from.index());
      transfer.section = static_cast<int32_t>(c.section());
      transfer.host_offset = c.offset();
    }
    transfer.size = from.byte_size();
    const uint32_t fence = static_cast<uint32_t>(t.transfers.size());
    t.target[k] = fence;
    t.transfers.push_back(transfer);
    auto overlaps = [&](uint64_t offset, uint64_t size) {
      return size > 0 && transfer.size > 0 && offset < transfer.device_offset + transfer.size &&
             transfer.device_offset < offset + size;
    };
    for (uint32_t j = k + 1; j < count; ++j) {
      const fb::Instruction& later = *fbm.instructions()->Get(fn.instruction_begin() + j);
      bool conflict = false;
      for (uint32_t o = to_host ? later.input_count() : 0; o < later.operand_count() && !conflict; ++o) {
        const fb::Slot& s = *fbm.slots()->Get(fbm.operand_pool()->Get(later.operand_begin() + o));
        conflict = s.storage() == fb::StorageKind::Arena && s.memory_space() == fb::MemorySpace::Device &&
                   overlaps(s.arena_offset(), s.byte_size());
      }
      if (!conflict && per_instruction_workspace) {
        const fb::WorkspaceRange& w = *fbm.workspaces()->Get(fn.instruction_begin() + j);
        conflict = overlaps(w.offset(), w.size());
      }
      if (conflict) {
        waits[j].push_back(fence);
        break;
      }
    }
  }
  if (!t.transfers.empty()) append_csr(waits, t.wait_begin, t.wait_fence);
  return ok_status();
}

// Where an operand's data lives for every invoke: arena (static plans) and
// constant slots get their address here; inputs and outputs (and
// free-at-last-use values) are patched in at invoke, null until then.
void* fixed_operand_address(const ContextImpl& c, const fb::Slot& slot, uint64_t view_bytes) {
  switch (slot.storage()) {
    case fb::StorageKind::Arena:
      if (slot.memory_space() == fb::MemorySpace::Host)  // verified: static plans only
        return device_address(c.host_arena, slot.arena_offset());
      if (c.dynamic) return nullptr;
      return device_address(c.arena, slot.arena_offset() + view_bytes);
    case fb::StorageKind::Constant:
      return at_view_offset(c.program->constant_data[slot.index()], view_bytes);
    case fb::StorageKind::Input:
    case fb::StorageKind::Output:
      return nullptr;
    case fb::StorageKind::Extent:
      return device_address(c.extents, uint64_t{slot.index()} * sizeof(int64_t));
  }
  return nullptr;
}

// Instruction `index` as the queue runs it, its operands bound later.
hal::Dispatch make_dispatch(const ContextImpl& c, uint32_t index, const fb::Instruction& in) {
  const ProgramImpl& p = *c.program;
  const fb::Module& fbm = c.module->fb();
  hal::Dispatch d;
  d.kernel = p.instruction_kernel[index];
  d.plan = p.plan(index);
  d.prepared = p.instruction_prepared[index];
  d.input_count = in.input_count();
  d.output_count = in.operand_count() - in.input_count();
  // One workspace after the arena (free-at-last-use: allocated around each
  // dispatch), or a range per instruction.
  d.workspace_size = c.dynamic ? 0 : fbm.arena()->workspace_size();
  d.workspace = d.workspace_size > 0 ? device_address(c.arena, c.arena.size - d.workspace_size) : nullptr;
  if (fbm.workspaces() && fbm.workspaces()->size() > 0) {
    const fb::WorkspaceRange& w = *fbm.workspaces()->Get(index);
    d.workspace = w.size() > 0 ? device_address(c.arena, w.offset()) : nullptr;
    d.workspace_size = w.size();
  }
  return d;
}

// Every instruction's operands (flattened into t.operands, with their view
// offsets), its dispatch and its opcode. Returns, per argument (inputs, then
// outputs), the operands entries invoke patches with it.
std::vector<std::vector<uint32_t>> bind_instructions(const ContextImpl& c, const fb::Function& fn,
                                                     const FunctionSignature& sig, FunctionTable& t) {
  const fb::Module& fbm = c.module->fb();
  const size_t inputs = sig.inputs.size();
  size_t operand_total = 0;
  for (uint32_t k = 0; k < fn.instruction_count(); ++k)
    operand_total += fbm.instructions()->Get(fn.instruction_begin() + k)->operand_count();
  t.operands.reserve(operand_total);
  t.operand_view_bytes.reserve(operand_total);
  t.dispatches.reserve(fn.instruction_count());

  std::vector<std::vector<uint32_t>> patches(inputs + sig.outputs.size());
  std::vector<size_t> operand_base;
  operand_base.reserve(fn.instruction_count());
  for (uint32_t k = 0; k < fn.instruction_count(); ++k) {
    const uint32_t index = fn.instruction_begin() + k;
    const fb::Instruction& in = *fbm.instructions()->Get(index);
    operand_base.push_back(t.operands.size());
    for (uint32_t o = 0; o < in.operand_count(); ++o) {
      const uint32_t slot_index = fbm.operand_pool()->Get(in.operand_begin() + o);
      const fb::Slot& slot = *fbm.slots()->Get(slot_index);
      const auto operand_index = static_cast<uint32_t>(t.operands.size());
      // A view with an offset starts that many elements into its base (verified inside it).
      const uint64_t view_bytes = static_cast<uint64_t>(slot.view_offset()) *
                                  dtype_size(c.module->verified.slot_types[slot_index].dtype);
      t.operand_view_bytes.push_back(view_bytes);
      if (slot.storage() == fb::StorageKind::Input) patches[slot.index()].push_back(operand_index);
      if (slot.storage() == fb::StorageKind::Output) patches[inputs + slot.index()].push_back(operand_index);
      t.operands.push_back(fixed_operand_address(c, slot, view_bytes));
    }
    if (in.opcode() != fb::Opcode::Dispatch) {
      if (t.opcode.empty()) t.opcode.assign(fn.instruction_count(), fb::Opcode::Dispatch);
      t.opcode[k] = in.opcode();
    }
    t.dispatches.push_back(make_dispatch(c, index, in));
  }
  // operands no longer grows: pointers into it are stable from here on.
  for (size_t k = 0; k < t.dispatches.size(); ++k)
    t.dispatches[k].operands = t.operands.data() + operand_base[k];
  return patches;
}

// A function with control instructions: each one's target and step, host
// offload's copies (build_transfers), and where each straight-line run ends.
Status build_control(const fb::Module& fbm, const fb::Function& fn, FunctionTable& t) {
  const uint32_t count = fn.instruction_count();
  t.target.assign(count, 0);
  t.step.assign(count, 0);
  t.run_end.assign(count, count);
  HEXIR_RETURN_IF_ERROR(build_transfers(fbm, fn, t));
  auto waits_at = [&](uint32_t k) { return !t.wait_begin.empty() && t.wait_begin[k] < t.wait_begin[k + 1]; };
  for (uint32_t k = count; k-- > 0;) {
    const fb::Instruction& in = *fbm.instructions()->Get(fn.instruction_begin() + k);
    if (t.opcode[k] == fb::Opcode::Dispatch) {
      // A run ends before a control instruction and before one that waits for a copy.
      t.run_end[k] = k + 1 < count && t.opcode[k + 1] == fb::Opcode::Dispatch && !waits_at(k + 1)
                         ? t.run_end[k + 1]
                         : k + 1;
      continue;
    }
    // Evict and Prefetch: their target set by build_transfers.
    if (t.opcode[k] == fb::Opcode::Evict || t.opcode[k] == fb::Opcode::Prefetch) continue;
    t.target[k] = fbm.param_pool()->Get(in.param_begin());  // verified: inside the function
    if (in.param_count() > 1) t.step[k] = fbm.param_pool()->Get(in.param_begin() + 1);
  }
  return ok_status();
}

// What invoke binds and checks per argument: the operands entries each
// patches (CSR), and the arguments its overlap check looks at.
void bind_arguments(const FunctionSignature& sig, const std::vector<std::vector<uint32_t>>& patches,
                    FunctionTable& t) {
  t.bindings.assign(sig.inputs.size() + sig.outputs.size(), nullptr);
  append_csr(patches, t.patch_begin, t.patch_args);
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    t.input_bytes.push_back(sig.inputs[i].byte_size);
    if (sig.inputs[i].byte_size > 0)
      (sig.inputs[i].donated_to >= 0 ? t.written_inputs : t.read_inputs).push_back(static_cast<uint32_t>(i));
  }
  for (size_t j = 0; j < sig.outputs.size(); ++j) t.output_bytes.push_back(sig.outputs[j].byte_size);
}

// Where each result goes when invoke is passed no outputs: in place in its
// donated input, or a buffer of the context's own (allocated here).
Status allocate_own_outputs(ContextImpl& c, const fb::Function& fn, const FunctionSignature& sig,
                            FunctionTable& t) {
  const fb::Module& fbm = c.module->fb();
  const size_t outputs = sig.outputs.size();
  t.own_outputs.resize(outputs);
  t.output_in_input.assign(outputs, -1);
  t.last_output_data.assign(outputs, nullptr);
  for (size_t j = 0; j < outputs; ++j) {
    const fb::Slot& slot =
        *fbm.slots()->Get(fn.outputs()->Get(static_cast<flatbuffers::uoffset_t>(j))->slot());
    if (slot.storage() == fb::StorageKind::Input) {  // computed in place in a donated input
      t.output_in_input[j] = static_cast<int32_t>(slot.index());
      continue;
    }
    if (sig.outputs[j].byte_size == 0) continue;
    t.written_outputs.push_back(static_cast<uint32_t>(j));
    HEXIR_ASSIGN_OR_RETURN(t.own_outputs[j], c.program->device->allocate(
                                                 sig.outputs[j].byte_size, hal::MemoryType::kDeviceLocal,
                                                 hal::BufferUsage::kExternal, format::kConstantAlignment));
    ++c.create_stats.device_allocations;
    // Faulted in now, as the arena is (Context::create), not in the first invoke.
    if (c.program->device->name() == "cpu" && t.own_outputs[j].host_ptr != nullptr)
      std::memset(t.own_outputs[j].host_ptr, 0, sig.outputs[j].byte_size);
  }
  return ok_status();
}

Status build_function_table(ContextImpl& c, size_t function_index, FunctionTable& t) {
  const fb::Module& fbm = c.module->fb();
  const fb::Function& fn = *fbm.functions()->Get(static_cast<flatbuffers::uoffset_t>(function_index));
  const FunctionSignature& sig = c.module->functions[function_index];
  for (size_t j = 0; j < sig.outputs.size(); ++j) {
    const fb::Slot& slot = *fbm.slots()->Get(fn.outputs()->Get(static_cast<flatbuffers::uoffset_t>(j))->slot());
    if (slot.extent() < 0) continue;
    if (t.output_extent.empty()) t.output_extent.assign(sig.outputs.size(), -1);
    t.output_extent[j] = fbm.slots()->Get(static_cast<flatbuffers::uoffset_t>(slot.extent()))->index();
  }
  if (!t.output_extent.empty()) {
    for (const TensorSignature& o : sig.outputs) t.last_output_types.push_back(o.type);
    for (const TensorSignature& o : sig.outputs) t.last_output_bytes.push_back(o.byte_size);
  }
  const std::vector<std::vector<uint32_t>> patches = bind_instructions(c, fn, sig, t);
  if (!t.opcode.empty()) HEXIR_RETURN_IF_ERROR(build_control(fbm, fn, t));
  bind_arguments(sig, patches, t);
  return allocate_own_outputs(c, fn, sig, t);
}

Status check_argument(const char* kind, size_t index, const TensorSignature& expected, const TensorRef& got,
                      const std::string& function) {
  // A bounded result's buffer holds its bound: the caller's type may leave the mark out.
  if (got.type.same_layout(expected.type) && got.byte_size >= expected.byte_size &&
      (got.data != nullptr || expected.byte_size == 0))
    return ok_status();
  // Inputs go by argument name; outputs by position (their names are "0", "1", ...).
  const bool by_name = !expected.name.empty() && std::string_view(kind) == "input";
  std::string what = std::string(kind) + " " + (by_name ? "'" + expected.name + "'" : std::to_string(index)) +
                     " of function '" + function + "': ";
  if (!got.type.same_layout(expected.type))
    return invalid_argument(what + "expected " + expected.type.to_string() + ", got " + got.type.to_string());
  if (got.data == nullptr) return invalid_argument(what + "data is null");
  return invalid_argument(what + "buffer of " + std::to_string(got.byte_size) +
                          " bytes is smaller than the " + std::to_string(expected.byte_size) + " bytes of " +
                          expected.type.to_string());
}

// The refusal of two overlapping arguments, naming both (built only on error).
Status overlap_error(const FunctionSignature& sig, const ContextImpl::ArgumentRange& x,
                     const ContextImpl::ArgumentRange& y) {
  using Range = ContextImpl::ArgumentRange;
  // The one that is written first: an output, then a donated input.
  const bool x_first = (x.kind != Range::kInput) > (y.kind != Range::kInput) ||
                       ((x.kind != Range::kInput) == (y.kind != Range::kInput) &&
                        (x.written > y.written || (x.written == y.written && x.index < y.index)));
  const Range& a = x_first ? x : y;
  const Range& b = x_first ? y : x;
  const uint64_t shared = std::min(a.end, b.end) - std::max(a.begin, b.begin);
  auto input = [&](const Range& r) { return "input '" + sig.inputs[r.index].name + "'"; };
  const std::string function = " of function '" + sig.name + "'";
  const std::string of_b = std::to_string(shared) + " of its " + std::to_string(b.end - b.begin) + " bytes";
  if (a.kind == Range::kOutput && b.kind == Range::kOutput)
    return invalid_argument("outputs " + std::to_string(a.index) + " and " + std::to_string(b.index) +
                            function + " overlap (" + std::to_string(shared) + " bytes)");
  if (a.kind == Range::kOutput)
    return invalid_argument(
        "output " + std::to_string(a.index) + function + " overlaps " + (b.written ? "donated " : "") +
        input(b) + " (" + of_b + ")" +
        (b.written ? ", which is written with another result" : ", which is not donated to it"));
  if (a.kind == Range::kOwnOutput)
    return invalid_argument(
        input(b) + function + " is the context's own buffer of output " + std::to_string(a.index) + " (" +
        std::to_string(shared) + " of its " + std::to_string(b.end - b.begin) +
        " bytes), which this invoke overwrites; pass an output buffer or copy the input first");
  return invalid_argument("donated " + input(a) + function + " overlaps " + input(b) + " (" + of_b +
                          "); a donated input is overwritten with a result, so no other argument may share "
                          "its memory");
}

}  // namespace

ContextImpl::~ContextImpl() {
  if (!program) return;
  for (FunctionTable& t : functions)
    for (hal::Buffer& buffer : t.own_outputs)
      if (buffer.size > 0) program->device->release(buffer);
  if (arena.size > 0) program->device->release(arena);
  if (host_arena.size > 0) program->device->release(host_arena);
  if (extents.size > 0) program->device->release(extents);
}

// The hot path: checks arguments, patches bound pointers, dispatches. It
// allocates nothing (strings are built only for errors).
Status ContextImpl::invoke(size_t function, std::span<const TensorRef> inputs,
                           std::span<const TensorRef> outputs) {
  if (function >= functions.size())
    return invalid_argument("function index " + std::to_string(function) + " out of range (the module has " +
                            std::to_string(functions.size()) + ")");
  const FunctionSignature& sig = module->functions[function];
  FunctionTable& t = functions[function];
  const size_t input_count = sig.inputs.size();
  if (inputs.size() != input_count)
    return invalid_argument("function '" + sig.name + "' takes " + std::to_string(input_count) +
                            " inputs, got " + std::to_string(inputs.size()));
  const bool own_outputs = outputs.empty();
  if (!own_outputs && outputs.size() != sig.outputs.size())
    return invalid_argument("function '" + sig.name + "' has " + std::to_string(sig.outputs.size()) +
                            " outputs, got " + std::to_string(outputs.size()));
  for (size_t i = 0; i < input_count; ++i)
    HEXIR_RETURN_IF_ERROR(check_argument("input", i, sig.inputs[i], inputs[i], sig.name));
  for (size_t j = 0; j < outputs.size(); ++j) {
    HEXIR_RETURN_IF_ERROR(check_argument("output", j, sig.outputs[j], outputs[j], sig.name));
    const int32_t donor = t.output_in_input[j];
    if (donor >= 0 && outputs[j].data != inputs[donor].data)
      return invalid_argument("output " + std::to_string(j) + " of function '" + sig.name +
                              "' is computed in place in donated input '" + sig.inputs[donor].name +
                              "': pass that input's buffer as the output");
  }
  ArgumentRange first, second;
  if (find_overlap(function, inputs, outputs, own_outputs, &first, &second))
    return overlap_error(sig, first, second);

  for (size_t i = 0; i < input_count; ++i) {
    t.bindings[i] = inputs[i].data;
    for (uint32_t a = t.patch_begin[i]; a < t.patch_begin[i + 1]; ++a)
      t.operands[t.patch_args[a]] = at_view_offset(inputs[i].data, t.operand_view_bytes[t.patch_args[a]]);
  }
  for (size_t j = 0; j < sig.outputs.size(); ++j) {
    const int32_t donor = t.output_in_input[j];
    void* data = donor >= 0    ? inputs[donor].data
                 : own_outputs ? device_address(t.own_outputs[j])
                               : outputs[j].data;
    t.last_output_data[j] = data;
    t.bindings[input_count + j] = data;
    for (uint32_t a = t.patch_begin[input_count + j]; a < t.patch_begin[input_count + j + 1]; ++a)
      t.operands[t.patch_args[a]] = at_view_offset(data, t.operand_view_bytes[t.patch_args[a]]);
  }
  t.has_own_results = false;
  loop_iterations = 0;
  loop_limit = max_loop_iterations.load(std::memory_order_relaxed);
  const uint64_t timeout = timeout_ns.load(std::memory_order_relaxed);
  deadline_at_ns = 0;
  if (timeout > 0 && __builtin_add_overflow(coarse_now_ns(), timeout, &deadline_at_ns))
    deadline_at_ns = UINT64_MAX;

  const uint64_t dispatches_before = queue->dispatch_count();
  size_t failed = 0;
  Status status = dynamic             ? dynamic->run(*this, function, t, &failed)
                  : !t.opcode.empty() ? run_program(t, &failed)
                  : profiling         ? run_profiled(t, 0, t.dispatches.size(), &failed)
                                      : queue->dispatch_sequence(t.dispatches, t.bindings, &failed);
  if (!status.ok()) {
    const uint32_t index =
        module->fb().functions()->Get(static_cast<flatbuffers::uoffset_t>(function))->instruction_begin() +
        static_cast<uint32_t>(failed);
    status = status.annotate("function '" + sig.name + "' instruction " + std::to_string(index) + " ('" +
                             format::instruction_name(module->verified, *module->fb().instructions()->Get(index)) +
                             "')");
  }
  Status synced = queue->synchronize();
  invoke_stats.dispatches += queue->dispatch_count() - dispatches_before;
  ++invoke_count;
  HEXIR_RETURN_IF_ERROR(status);
  HEXIR_RETURN_IF_ERROR(synced);
  if (!t.output_extent.empty()) HEXIR_RETURN_IF_ERROR(read_output_extents(t, sig));
  t.has_own_results = own_outputs;
  return ok_status();
}

// The one place the VM looks at extents: the results' actual shapes. The
// kernels clamp what they write, but an extent slot may be any i64 result
// of an untrusted file, so each is checked against its bound.
Status ContextImpl::read_output_extents(FunctionTable& t, const FunctionSignature& sig) {
  const auto* table = static_cast<const int64_t*>(extents.host_ptr);
  for (size_t j = 0; j < t.output_extent.size(); ++j) {
    if (t.output_extent[j] < 0) continue;
    const TensorType& bound = sig.outputs[j].type;
    const size_t d = static_cast<size_t>(bound.bounded);
    const int64_t n = table[t.output_extent[j]];
    if (n < 0 || n > bound.dims[d])
      return internal_error("function '" + sig.name + "' result " + std::to_string(j) + ": run-time extent " +
                            std::to_string(n) + " is outside its bound " + bound.to_string());
    t.last_output_types[j].dims[d] = n;
    t.last_output_bytes[j] = bound.dims[d] == 0 ? 0 : sig.outputs[j].byte_size / static_cast<uint64_t>(bound.dims[d]) *
                                                          static_cast<uint64_t>(n);
  }
  return ok_status();
}

// No byte written by this call may be shared with another argument. Each
// argument is a byte range (its signature's size: what the kernels touch).
// Written ranges are the outputs (the caller's, or the context's own buffers
// when none are passed) and the donated inputs; a donated output passed as
// its donated input is that input's range, not a second one (the same pointer
// was required above). Read-only inputs may share memory with each other.
// The written ranges (few: outputs and donations) are sorted by start in
// argument_ranges (sized at create: no allocation) and must be disjoint, so
// their ends are sorted too; each read-only input is then checked against
// the first written range ending after its start (a binary search).
// O(k log k + n log k) for k written ranges and n inputs.
bool ContextImpl::find_overlap(size_t function, std::span<const TensorRef> inputs,
                               std::span<const TensorRef> outputs, bool own_outputs, ArgumentRange* first,
                               ArgumentRange* second) {
  const FunctionTable& t = functions[function];
  ArgumentRange* written = argument_ranges.data();
  size_t k = 0;
  auto add = [&](const void* data, uint64_t size, uint32_t index, ArgumentRange::Kind kind) {
    if (!data) return;
    const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
    uintptr_t end;
    if (__builtin_add_overflow(begin, size, &end)) end = UINTPTR_MAX;
    written[k++] = {begin, end, index, kind, true};
  };
  for (uint32_t i : t.written_inputs) add(inputs[i].data, t.input_bytes[i], i, ArgumentRange::kInput);
  for (uint32_t j : t.written_outputs)
    add(own_outputs ? device_address(t.own_outputs[j]) : outputs[j].data, t.output_bytes[j], j,
        own_outputs ? ArgumentRange::kOwnOutput : ArgumentRange::kOutput);
  if (k == 0) return false;
  if (k > 1) {
    auto before = [](const ArgumentRange& a, const ArgumentRange& b) {
      if (a.begin != b.begin) return a.begin < b.begin;
      if (a.kind != b.kind) return a.kind < b.kind;
      return a.index < b.index;
    };
    if (k == 2) {  // the common case of several written ranges: no sort call
      if (before(written[1], written[0])) std::swap(written[0], written[1]);
    } else {
      std::sort(written, written + k, before);
    }
    // Sorted by start and disjoint so far: the previous range ends last.
    for (size_t m = 1; m < k; ++m)
      if (written[m].begin < written[m - 1].end) {
        *first = written[m - 1];
        *second = written[m];
        return true;
      }
  }
  for (uint32_t i : t.read_inputs) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(inputs[i].data);
    if (begin == 0) continue;
    uintptr_t end;
    if (__builtin_add_overflow(begin, t.input_bytes[i], &end)) end = UINTPTR_MAX;
    // The first written range ending after the input starts, the only one that can overlap it.
    const ArgumentRange* w = written;
    if (k > 1)
      w = std::partition_point(written, written + k, [&](const ArgumentRange& r) { return r.end <= begin; });
    if (w != written + k && w->end > begin && w->begin < end) {
      *first = *w;
      *second = ArgumentRange{begin, end, i, ArgumentRange::kInput, false};
      return true;
    }
  }
  return false;
}

// Profiling: one dispatch at a time, each waited for, its wall time added up.
Status ContextImpl::run_profiled(FunctionTable& t, size_t begin, size_t end, size_t* failed) {
  for (size_t k = begin; k < end; ++k) {
    *failed = k;
    const uint64_t start = now_ns();
    HEXIR_RETURN_IF_ERROR(queue->dispatch(t.dispatches[k]));
    HEXIR_RETURN_IF_ERROR(queue->synchronize());
    t.instruction_ns[k] += now_ns() - start;
  }
  return ok_status();
}

template <typename T>
Result<T> ContextImpl::read_scalar(const void* data) {
  T value = 0;
  if (host_addressable) {
    std::memcpy(&value, data, sizeof value);
    return value;
  }
  hal::Buffer buffer;
  buffer.device_ptr = reinterpret_cast<uintptr_t>(data);
  buffer.size = sizeof value;
  HEXIR_RETURN_IF_ERROR(program->device->read(buffer, 0, &value, sizeof value));
  return value;
}

Status ContextImpl::write_scalar(void* data, int64_t value) {
  if (host_addressable) {
    std::memcpy(data, &value, sizeof value);
    return ok_status();
  }
  hal::Buffer buffer;
  buffer.device_ptr = reinterpret_cast<uintptr_t>(data);
  buffer.size = sizeof value;
  return program->device->write(buffer, 0, &value, sizeof value);
}

// Ordered on the queue after the work before it, before the work after it:
// Evict copies from the arena to the host, Prefetch back (from the host
// arena, or from a streamed weight's Host section).
Status ContextImpl::run_transfer(const FunctionTable& t, uint32_t fence) {
  const FunctionTable::Transfer& x = t.transfers[fence];
  const hal::Buffer& host =
      x.section >= 0 ? program->section_buffers[static_cast<size_t>(x.section)] : host_arena;
  const hal::Buffer& dst = x.to_host ? host : arena;
  const hal::Buffer& src = x.to_host ? arena : host;
  const uint64_t dst_offset = x.to_host ? x.host_offset : x.device_offset;
  const uint64_t src_offset = x.to_host ? x.device_offset : x.host_offset;
  return t.ordered_copies ? queue->copy(dst, dst_offset, src, src_offset, x.size)
                          : queue->copy_begin(dst, dst_offset, src, src_offset, x.size, fence);
}

// Jump: continue at its target. Evict, Prefetch: start its copy. Fail: stop
// with its message. BranchIfZero: into the then-branch when the condition
// (bool[]) is true, else to the else-branch.
// LoopBegin: counter = start, enter the body when counter < trip.
// LoopNext: counter += step, back to the body while counter < trip (an
// overflowing counter ends the loop). Scalars are read on the host, after
// the work queued before them has finished.
Result<size_t> ContextImpl::run_control(FunctionTable& t, size_t k) {
  if (may_interrupt()) HEXIR_RETURN_IF_ERROR(check_interrupt());
  void* const* operands = t.dispatches[k].operands;
  const fb::Opcode opcode = t.opcode[k];
  switch (opcode) {
    case fb::Opcode::Jump:
      return static_cast<size_t>(t.target[k]);
    case fb::Opcode::Evict:
    case fb::Opcode::Prefetch:
      HEXIR_RETURN_IF_ERROR(run_transfer(t, static_cast<uint32_t>(t.target[k])));
      return k + 1;
    case fb::Opcode::Fail:  // target: its message (verified)
      HEXIR_RETURN_IF_ERROR(queue->synchronize());
      return failed_precondition(
          module->fb().messages()->Get(static_cast<flatbuffers::uoffset_t>(t.target[k]))->str());
    case fb::Opcode::BranchIfZero: {
      HEXIR_RETURN_IF_ERROR(queue->synchronize());
      HEXIR_ASSIGN_OR_RETURN(uint8_t condition, read_scalar<uint8_t>(operands[0]));
      return condition != 0 ? k + 1 : static_cast<size_t>(t.target[k]);
    }
    case fb::Opcode::LoopBegin: {
      HEXIR_RETURN_IF_ERROR(queue->synchronize());
      HEXIR_ASSIGN_OR_RETURN(int64_t start, read_scalar<int64_t>(operands[0]));
      HEXIR_ASSIGN_OR_RETURN(int64_t trip, read_scalar<int64_t>(operands[1]));
      HEXIR_RETURN_IF_ERROR(write_scalar(operands[2], start));
      return start < trip ? k + 1 : static_cast<size_t>(t.target[k]);
    }
    case fb::Opcode::LoopNext: {
      HEXIR_RETURN_IF_ERROR(queue->synchronize());
      HEXIR_ASSIGN_OR_RETURN(int64_t trip, read_scalar<int64_t>(operands[0]));
      HEXIR_ASSIGN_OR_RETURN(int64_t counter, read_scalar<int64_t>(operands[1]));
      int64_t next = 0;
      const bool overflow = __builtin_add_overflow(counter, t.step[k], &next);
      HEXIR_RETURN_IF_ERROR(write_scalar(operands[2], next));
      if (overflow || next >= trip) return k + 1;
      if (loop_limit > 0 && ++loop_iterations >= loop_limit)
        return resource_exhausted("the invoke ran " + std::to_string(loop_iterations) +
                                  " loop iterations, the context's limit (set_max_loop_iterations)");
      return static_cast<size_t>(t.target[k]);
    }
    case fb::Opcode::Dispatch:
      break;  // not a control instruction: the executors never send one here
  }
  return internal_error("instruction " + std::to_string(k) + " has opcode " +
                        std::to_string(static_cast<int>(opcode)) + ", not a control instruction");
}

// Every control instruction asks first (run_control), so a loop stops within
// one iteration: a relaxed load, and under a deadline a coarse clock read.
Status ContextImpl::check_interrupt() const {
  if (run_state.load(std::memory_order_relaxed) & kCancelRequested)
    return cancelled("the invoke was cancelled (Context::cancel) after " + std::to_string(loop_iterations) +
                     " loop iterations");
  if (deadline_at_ns != 0 && coarse_now_ns() >= deadline_at_ns)
    return deadline_exceeded("the invoke ran past its deadline (set_deadline: " +
                             std::to_string(timeout_ns.load(std::memory_order_relaxed)) +
                             " ns from its start) after " + std::to_string(loop_iterations) + " loop iterations");
  return ok_status();
}

// A cancel lands only on a running invoke: the flag is set while kRunning
// holds, and cleared with it when that invoke ends.
bool ContextImpl::cancel() {
  uint32_t state = run_state.load(std::memory_order_relaxed);
  while (state & kRunning)
    if (run_state.compare_exchange_weak(state, state | kCancelRequested, std::memory_order_relaxed))
      return true;
  return false;
}

Status ContextImpl::busy(const char* what) {
  return failed_precondition(std::string(what) +
                             ": the context is already running an invoke on another thread; use one context "
                             "per thread");
}

// The program counter: each straight-line run goes to the queue as one
// sequence (the same storage each time it runs: a CUDA queue replays its
// captured graph), control instructions run here.
Status ContextImpl::run_program(FunctionTable& t, size_t* failed) {
  const size_t count = t.dispatches.size();
  size_t pc = 0;
  while (pc < count) {
    if (!t.wait_begin.empty() && !t.ordered_copies)  // copies (host offload) this instruction needs done
      for (uint32_t w = t.wait_begin[pc]; w < t.wait_begin[pc + 1]; ++w) {
        *failed = pc;
        HEXIR_RETURN_IF_ERROR(queue->copy_wait(t.wait_fence[w]));
      }
    if (t.opcode[pc] == fb::Opcode::Dispatch) {
      const size_t end = t.run_end[pc];
      size_t failed_in_run = 0;
      Status status = profiling ? run_profiled(t, pc, end, &failed_in_run)
                                : queue->dispatch_sequence({t.dispatches.data() + pc, end - pc}, t.bindings,
                                                           &failed_in_run);
      if (!status.ok()) {
        *failed = profiling ? failed_in_run : pc + failed_in_run;
        return status;
      }
      pc = end;
      continue;
    }
    *failed = pc;
    HEXIR_ASSIGN_OR_RETURN(pc, run_control(t, pc));
  }
  // Every copy done before the invoke ends (the copy stream runs them in order).
  if (!t.transfers.empty() && !t.ordered_copies)
    HEXIR_RETURN_IF_ERROR(queue->copy_wait(static_cast<uint32_t>(t.transfers.size() - 1)));
  return ok_status();
}

Context::Context(std::unique_ptr<ContextImpl> impl) : impl_(std::move(impl)) {}
Context::Context(Context&&) noexcept = default;
Context& Context::operator=(Context&&) noexcept = default;
Context::~Context() = default;

Result<Context> Context::create(const Program& program) {
  if (!program.impl_) return failed_precondition("Context::create: the Program is a moved-from handle");
  auto c = std::make_unique<ContextImpl>();
  c->program_owner = program.impl_;  // the Context keeps the Program (and its Module) alive
  c->program = c->program_owner.get();
  c->module = c->program->module_impl;
  hal::Device& device = *c->program->device;
  HEXIR_ASSIGN_OR_RETURN(c->queue, device.create_queue());

  // One allocation: the arena, then the workspace at the next 64-byte boundary.
  const fb::ArenaPlan& plan = *c->module->fb().arena();
  const uint64_t align = std::max<uint64_t>(plan.alignment(), format::kConstantAlignment);
  if (plan.strategy() == fb::PlanStrategy::FreeAtLastUse) c->dynamic.emplace(align);
  uint64_t total = 0;
  const uint64_t workspace = c->dynamic ? 0 : plan.workspace_size();  // dynamic: per instruction
  if (__builtin_add_overflow(plan.size(), align - 1, &total) ||
      __builtin_add_overflow(total & ~(align - 1), workspace, &total))
    return resource_exhausted("arena of " + std::to_string(plan.size()) + " bytes plus workspace overflows");
  if (workspace == 0) total = plan.size();
  if (total > 0) {
    HEXIR_ASSIGN_OR_RETURN(
        c->arena, device.allocate(total, hal::MemoryType::kDeviceLocal, hal::BufferUsage::kTransient, align));
    ++c->create_stats.device_allocations;
    // The CPU's arena is faulted in here, not page by page in the first
    // invoke (mobilenet_v2's first invoke was 1.3x the steady state).
    if (device.name() == "cpu" && c->arena.host_ptr != nullptr) std::memset(c->arena.host_ptr, 0, total);
  }
  if (plan.host_size() > 0) {
    // Counted apart from the device's memory: Context::host_bytes.
    HEXIR_ASSIGN_OR_RETURN(c->host_arena, device.allocate(plan.host_size(), hal::MemoryType::kHostVisible,
                                                          hal::BufferUsage::kTransfer, align));
    ++c->create_stats.device_allocations;
  }
  c->host_addressable = device.name() == "cpu";
  if (const uint32_t entries = c->module->fb().extent_count(); entries > 0) {
    // Host-visible (pinned on CUDA): kernels write extents, the host reads the results' after the invoke.
    HEXIR_ASSIGN_OR_RETURN(c->extents, device.allocate(uint64_t{entries} * sizeof(int64_t),
                                                       hal::MemoryType::kHostVisible, hal::BufferUsage::kTransient,
                                                       format::kConstantAlignment));
    ++c->create_stats.device_allocations;
    std::fill_n(static_cast<int64_t*>(c->extents.host_ptr), entries, 0);
  }

  c->functions.resize(c->module->functions.size());
  size_t most_arguments = 0;
  // Free-at-last-use: slot -> value number, shared by the functions (add_function).
  std::vector<int32_t> local_value(c->dynamic ? c->module->fb().slots()->size() : 0, -1);
  for (size_t f = 0; f < c->functions.size(); ++f) {
    if (c->dynamic) HEXIR_RETURN_IF_ERROR(c->dynamic->add_function(*c->module, *c->program, f, local_value));
    HEXIR_RETURN_IF_ERROR(build_function_table(*c, f, c->functions[f]));
    const FunctionSignature& sig = c->module->functions[f];
    most_arguments = std::max(most_arguments, sig.inputs.size() + sig.outputs.size());
  }
  c->argument_ranges.resize(most_arguments);  // invoke's overlap check sorts in here
  size_t most_transfers = 0;
  for (const FunctionTable& t : c->functions) most_transfers = std::max(most_transfers, t.transfers.size());
  if (most_transfers > 0)  // events for the copy stream, made here: invoke allocates nothing
    HEXIR_RETURN_IF_ERROR(c->queue->reserve_copy_fences(static_cast<uint32_t>(most_transfers)));
  return Context(std::move(c));
}

namespace {
Status moved_from(const char* what) {
  return failed_precondition(std::string(what) + ": this is a moved-from Context");
}
}  // namespace

Status Context::invoke(size_t function, std::span<const TensorRef> inputs,
                       std::span<const TensorRef> outputs) {
  if (!impl_) return moved_from("invoke");
  ContextHold hold(*impl_);
  if (!hold.held()) return ContextImpl::busy("invoke");
  return impl_->invoke(function, inputs, outputs);
}

Status Context::invoke(std::string_view function, std::span<const TensorRef> inputs,
                       std::span<const TensorRef> outputs) {
  if (!impl_) return moved_from("invoke");
  const std::vector<FunctionSignature>& functions = impl_->module->functions;
  for (size_t f = 0; f < functions.size(); ++f)
    if (functions[f].name == function) return invoke(f, inputs, outputs);
  // Only reached on error, so building the message may allocate.
  std::string names;
  for (const FunctionSignature& f : functions) names += (names.empty() ? "'" : ", '") + f.name + "'";
  return not_found("no function '" + std::string(function) + "' (the module has " +
                   (names.empty() ? std::string("none") : names) + ")");
}

Result<TensorRef> Context::output(size_t function, size_t index) const {
  if (!impl_) return moved_from("output");
  if (function >= impl_->functions.size())
    return invalid_argument("function index " + std::to_string(function) + " out of range (the module has " +
                            std::to_string(impl_->functions.size()) + ")");
  const FunctionSignature& sig = impl_->module->functions[function];
  if (index >= sig.outputs.size())
    return invalid_argument("function '" + sig.name + "' has " + std::to_string(sig.outputs.size()) +
                            " outputs, asked for output " + std::to_string(index));
  const FunctionTable& t = impl_->functions[function];
  if (!t.has_own_results)
    return failed_precondition("function '" + sig.name +
                               "' has no context-owned results: its last invoke "
                               "passed outputs, failed, or never happened");
  TensorRef ref;
  ref.data = t.last_output_data[index];
  ref.byte_size = sig.outputs[index].byte_size;
  ref.type = sig.outputs[index].type;
  if (!t.output_extent.empty()) {  // a bounded result: its actual shape
    ref.type = t.last_output_types[index];
    ref.byte_size = t.last_output_bytes[index];
  }
  return ref;
}

Result<TensorType> Context::output_type(size_t function, size_t index) const {
  if (!impl_) return moved_from("output_type");
  if (function >= impl_->functions.size())
    return invalid_argument("function index " + std::to_string(function) + " out of range (the module has " +
                            std::to_string(impl_->functions.size()) + ")");
  const FunctionSignature& sig = impl_->module->functions[function];
  if (index >= sig.outputs.size())
    return invalid_argument("function '" + sig.name + "' has " + std::to_string(sig.outputs.size()) +
                            " outputs, asked for output " + std::to_string(index));
  const FunctionTable& t = impl_->functions[function];
  if (t.output_extent.empty()) return sig.outputs[index].type;
  return t.last_output_types[index];
}

Status Context::read_output(size_t function, size_t index, std::span<uint8_t> host) const {
  HEXIR_ASSIGN_OR_RETURN(TensorRef ref, output(function, index));
  if (host.size() < ref.byte_size)
    return invalid_argument("read_output: destination of " + std::to_string(host.size()) +
                            " bytes is smaller than the " + std::to_string(ref.byte_size) + "-byte result");
  if (ref.byte_size == 0) return ok_status();
  const FunctionTable& t = impl_->functions[function];
  if (t.output_in_input[index] >= 0)
    return failed_precondition("output " + std::to_string(index) +
                               " lives in the caller's donated input buffer; read it there");
  return impl_->program->device->read(t.own_outputs[index], 0, host.data(), ref.byte_size);
}

Status Context::set_max_loop_iterations(uint64_t limit) {
  if (!impl_) return moved_from("set_max_loop_iterations");
  impl_->max_loop_iterations.store(limit, std::memory_order_relaxed);
  return ok_status();
}

Status Context::set_deadline(std::chrono::nanoseconds timeout) {
  if (!impl_) return moved_from("set_deadline");
  if (timeout.count() < 0)
    return invalid_argument("set_deadline: the timeout is " + std::to_string(timeout.count()) +
                            " ns (0: none, or a positive time)");
  impl_->timeout_ns.store(static_cast<uint64_t>(timeout.count()), std::memory_order_relaxed);
  return ok_status();
}

bool Context::cancel() { return impl_ && impl_->cancel(); }

Status Context::set_profiling(bool on) {
  if (!impl_) return moved_from("set_profiling");
  ContextHold hold(*impl_);  // it resizes what a running invoke writes
  if (!hold.held()) return ContextImpl::busy("set_profiling");
  if (on)
    for (FunctionTable& t : impl_->functions) t.instruction_ns.resize(t.dispatches.size(), 0);
  impl_->profiling = on;
  return ok_status();
}

std::span<const uint64_t> Context::instruction_nanoseconds(size_t function) const {
  if (!impl_ || function >= impl_->functions.size()) return {};
  return impl_->functions[function].instruction_ns;
}

const PhaseStats& Context::invoke_stats() const { return impl_->invoke_stats; }
uint64_t Context::invoke_count() const { return impl_ ? impl_->invoke_count : 0; }
const PhaseStats& Context::create_stats() const { return impl_->create_stats; }
uint64_t Context::host_bytes() const { return impl_ ? impl_->host_arena.size : 0; }

uint64_t Context::device_bytes() const {
  if (!impl_) return 0;
  uint64_t bytes = impl_->arena.size;
  for (const FunctionTable& t : impl_->functions)
    for (const hal::Buffer& b : t.own_outputs) bytes += b.size;
  return bytes;
}

}  // namespace hexir::vm
