// Internal state behind the public vm.h handles. Tests include this to look
// at prepared tables (e.g. that RODATA is used in place); applications don't.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dynamic_executor.h"
#include "hexir/base/mapped_file.h"
#include "hexir/format/sections.h"
#include "hexir/format/verifier.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"

namespace hexir::vm {

// An address in the device's address space, as kernels receive it.
// `bytes` past `data` (a host or device address; null stays null when bytes is 0).
inline void* at_view_offset(void* data, uint64_t bytes) {
  return bytes == 0 ? data : reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(data) + bytes);
}

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

  MappedFile mapping;  // load_file's mapping (empty for load_buffer), unmapped with the module
  // LoadOptions::copy_weights: the whole file, owned (the mapping is then empty).
  format::SectionBuffer owned_file;
  format::VerifiedModule verified;
  // Decompressed zstd sections (64-byte aligned); verified.sections points into them.
  std::vector<format::SectionBuffer> owned_sections;
  std::string name;
  std::vector<FunctionSignature> functions;
  FunctionSignature no_function;  // what Module::function returns for an index out of range
  uint64_t arena_bytes = 0;
  uint64_t lower_bound_bytes = 0;
  uint64_t host_arena_bytes = 0;  // the host memory space's arena (host offload)
  uint64_t host_lower_bound_bytes = 0;
  uint64_t constant_bytes = 0;
  uint64_t streamed_constant_bytes = 0;  // of constant_bytes: in Host sections (weights streaming)
  uint64_t workspace_bytes = 0;
  uint64_t context_bytes = 0;  // Module::context_bytes
};

class ProgramImpl {
 public:
  ProgramImpl() = default;
  ProgramImpl(const ProgramImpl&) = delete;
  ProgramImpl& operator=(const ProgramImpl&) = delete;
  ~ProgramImpl();

  // A handle sharing the Module's state, so the caller's handle may go first;
  // declared first, so it is released last.
  std::optional<Module> module_handle;
  const Module* module = nullptr;  // module_handle's
  const ModuleImpl* module_impl = nullptr;
  hal::Device* device = nullptr;
  std::vector<hal::Buffer> buffers;  // imported or allocated; released on destruction
  std::vector<void*> constant_data;  // per constant: its device address
  // Per section: its buffer (RODATA; imported, uploaded, or for a Host
  // section of streamed weights a host-visible copy), empty for the others.
  std::vector<hal::Buffer> section_buffers;
  // Per module instruction, decided once: the kernel resolved for its
  // operator and dtypes, its plan (words at plan_begin[k] in plan_words, which
  // never reallocates after prepare) and the scratch it needs.
  std::vector<uintptr_t> instruction_kernel;
  std::vector<size_t> plan_begin;
  std::vector<uint64_t> plan_words;
  std::vector<uint64_t> workspace_need;
  // Per instruction: what the device prepared from its constant operands
  // (Device::prepare_dispatch; a buffer in `buffers`), or null.
  std::vector<const void*> instruction_prepared;
  uint64_t prepared_bytes = 0;  // of those buffers, together (Program::prepared_bytes)
  PhaseStats prepare_stats;

  const void* plan(size_t instruction) const { return plan_words.data() + plan_begin[instruction]; }
};

// One function's prebuilt dispatch table inside a context: its instructions
// with their operands bound, what invoke binds around them, and the static
// path's schedule (runs, host offload's copies). The free-at-last-use
// executor runs from the same table, its values in a table of its own
// (dynamic_executor.h).
struct FunctionTable {
  std::vector<void*> operands;            // data pointers of every instruction's operands, flattened
  std::vector<hal::Dispatch> dispatches;  // one per instruction, pointing into operands
  // operands entries each binding patches at invoke: inputs first, then outputs (CSR).
  std::vector<uint32_t> patch_begin;
  std::vector<uint32_t> patch_args;
  // Per operands entry: bytes past its buffer's start where a view with an
  // offset (docs/views.md) begins; 0 for everything else. Added to the
  // pointers patched at invoke (bindings, free-at-last-use buffers).
  std::vector<uint64_t> operand_view_bytes;
  std::vector<void*> bindings;           // the pointers bound by the last invoke, inputs then outputs
  std::vector<hal::Buffer> own_outputs;  // context-owned result buffers
  std::vector<int32_t> output_in_input;  // per output: donated input holding it, or -1
  std::vector<void*> last_output_data;   // where each result of the last invoke landed
  // Bounded dims (docs/design-notes.md): per result, its extent's entry in
  // the context's extent table (-1: an exact shape), and the results' types
  // at their actual extents after the last invoke (sized at create; invoke
  // only rewrites one dim). Empty when no result is bounded: invoke skips it.
  std::vector<int64_t> output_extent;
  std::vector<TensorType> last_output_types;
  std::vector<uint64_t> last_output_bytes;
  bool has_own_results = false;          // last invoke used own_outputs
  // For invoke's overlap check, decided at create (arguments of 0 bytes are
  // left out): the inputs it writes (donated), the outputs with a buffer of
  // their own (not computed in a donated input), the inputs it only reads,
  // and every argument's byte size (the signature's).
  std::vector<uint32_t> written_inputs;
  std::vector<uint32_t> written_outputs;
  std::vector<uint32_t> read_inputs;
  std::vector<uint64_t> input_bytes;
  std::vector<uint64_t> output_bytes;

  // Context::set_profiling: nanoseconds per instruction, summed over invokes.
  std::vector<uint64_t> instruction_ns;

  // Control flow (docs/control-flow.md). Per instruction: its opcode
  // (Dispatch for a dispatch), its target and step (control only) and, for
  // a dispatch, the end of the straight-line run it starts (the next control
  // instruction), which goes to the queue as one sequence. Empty `opcode`:
  // the function is one straight line.
  std::vector<fb::Opcode> opcode;
  std::vector<int64_t> target;  // Evict and Prefetch: their index in `transfers`
  std::vector<int64_t> step;
  std::vector<uint32_t> run_end;

  // Evict and Prefetch (host offload): bytes between the arena and the host
  // arena, run by the queue in order with the dispatches (Queue::copy).
  struct Transfer {
    bool to_host = false;
    uint64_t device_offset = 0;
    uint64_t host_offset = 0;  // in the host arena, or in `section`
    uint64_t size = 0;
    int32_t section = -1;      // a streamed weight's Host section (a Prefetch's source); -1: the host arena
  };
  std::vector<Transfer> transfers;
  // Per instruction (CSR, count + 1 entries; empty without transfers): the
  // copy fences to wait for before it runs (build_transfers).
  std::vector<uint32_t> wait_begin;
  std::vector<uint32_t> wait_fence;
  // Loops or ifs: copies run in order on the queue (Queue::copy), no waits.
  bool ordered_copies = false;
};

// Lists flattened into CSR form: list i is flat[begin[i] .. begin[i + 1]).
inline void append_csr(const std::vector<std::vector<uint32_t>>& lists, std::vector<uint32_t>& begin,
                       std::vector<uint32_t>& flat) {
  begin.reserve(begin.size() + lists.size() + 1);
  for (const std::vector<uint32_t>& list : lists) {
    begin.push_back(static_cast<uint32_t>(flat.size()));
    flat.insert(flat.end(), list.begin(), list.end());
  }
  begin.push_back(static_cast<uint32_t>(flat.size()));
}

inline uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// The deadline's clock: the kernel's tick, a few milliseconds coarse, read
// without a syscall in about 5 ns (a precise clock read costs 25 ns, most of
// a small loop iteration).
inline uint64_t coarse_now_ns() {
#ifdef CLOCK_MONOTONIC_COARSE
  timespec now{};
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &now) == 0)
    return static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
#endif
  return now_ns();
}

class ContextImpl;

// Holds a context for one call (ContextImpl::try_hold), released on return.
class ContextHold {
 public:
  explicit ContextHold(ContextImpl& c);
  ~ContextHold();
  ContextHold(const ContextHold&) = delete;
  ContextHold& operator=(const ContextHold&) = delete;
  bool held() const { return held_; }

 private:
  ContextImpl& c_;
  bool held_;
};

class ContextImpl {
 public:
  ContextImpl() = default;
  ContextImpl(const ContextImpl&) = delete;
  ContextImpl& operator=(const ContextImpl&) = delete;
  ~ContextImpl();

  // The caller holds the context (try_hold; Context::invoke and the C API do).
  Status invoke(size_t function, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs);
  // Runs control instruction k of t and returns the next program counter.
  // Both executors (run_program and the free-at-last-use one) run them here.
  Result<size_t> run_control(FunctionTable& t, size_t k);

  // Keeps the Program (and through it the Module) alive; declared first, so
  // it is released after the destructor has returned the buffers.
  std::shared_ptr<const ProgramImpl> program_owner;
  const ProgramImpl* program = nullptr;
  const ModuleImpl* module = nullptr;
  std::unique_ptr<hal::Queue> queue;
  hal::Buffer arena;  // arena, then workspace, in one allocation
  // The host memory space's arena (host offload): host-visible memory
  // (pinned on CUDA), which only the Evict and Prefetch copies touch.
  hal::Buffer host_arena;
  // The extent table (Module.extent_count int64 words, host-visible so
  // kernels write it and the host reads it after the queue drains): the
  // run-time extents of the bounded dims. Empty without bounded dims.
  hal::Buffer extents;
  // After a successful invoke of t: the results' actual types and sizes
  // from the extent table; an error when an extent is outside its bound.
  Status read_output_extents(FunctionTable& t, const FunctionSignature& sig);
  std::vector<FunctionTable> functions;
  PhaseStats create_stats;
  PhaseStats invoke_stats;  // allocations and uploads stay 0 (static plans): invoke never asks for either
  uint64_t invoke_count = 0;
  // Free-at-last-use: values are allocated and released per invoke, by
  // their own executor; empty for a static plan.
  std::optional<DynamicExecutor> dynamic;
  bool profiling = false;  // Context::set_profiling
  // The device's addresses are host addresses (cpu; managed memory): the
  // control instructions read and write their scalars directly.
  bool host_addressable = false;
  // Context::set_max_loop_iterations and set_deadline (0: none), set from
  // any thread; each invoke copies them at its start.
  std::atomic<uint64_t> max_loop_iterations{0};
  std::atomic<uint64_t> timeout_ns{0};
  uint64_t loop_limit = 0;       // the current invoke's max_loop_iterations
  uint64_t deadline_at_ns = 0;   // the current invoke's end (coarse_now_ns(); 0: none)
  uint64_t loop_iterations = 0;  // run by the current invoke

  // Who is using the context, in one word so that a cancel can only land on
  // a running invoke: kRunning while an invoke (or a call that must not
  // overlap one) holds it; kCancelRequested, set by cancel() only while
  // kRunning, cleared with it.
  static constexpr uint32_t kRunning = 1;
  static constexpr uint32_t kCancelRequested = 2;
  std::atomic<uint32_t> run_state{0};
  // True when this call now holds the context; false (nothing changed) when
  // another thread does.
  bool try_hold() { return (run_state.fetch_or(kRunning, std::memory_order_acquire) & kRunning) == 0; }
  void release_hold() { run_state.store(0, std::memory_order_release); }
  // The refusal of `what` while another thread holds the context.
  static Status busy(const char* what);
  bool cancel();
  // Between instructions: kCancelled or kDeadlineExceeded when the invoke
  // must stop. The inline test first: a load and a compare when neither is on.
  bool may_interrupt() const {
    return deadline_at_ns != 0 || (run_state.load(std::memory_order_relaxed) & kCancelRequested) != 0;
  }
  Status check_interrupt() const;

  // One caller buffer (or the context's own output buffer) as a byte range,
  // for the overlap check of invoke. `written`: this call writes it.
  struct ArgumentRange {
    uintptr_t begin = 0;
    uintptr_t end = 0;
    uint32_t index = 0;  // input or output index
    enum Kind : uint8_t { kInput, kOutput, kOwnOutput } kind = kInput;
    bool written = false;
  };
  // Sized at create for the function with the most arguments: invoke sorts
  // into it and never allocates.
  std::vector<ArgumentRange> argument_ranges;

 private:
  // invoke's overlap check (context.cc): true, with the two ranges, when a
  // byte this call writes is shared with another argument.
  bool find_overlap(size_t function, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                    bool own_outputs, ArgumentRange* first, ArgumentRange* second);
  Status run_profiled(FunctionTable& t, size_t begin, size_t end, size_t* failed);
  // A function with control instructions: the program counter over its runs.
  Status run_program(FunctionTable& t, size_t* failed);
  // Evict or Prefetch: the copy `fence` of t.transfers, started on the queue.
  Status run_transfer(const FunctionTable& t, uint32_t fence);
  // A control scalar (sizeof(T) bytes at a device address) read on the host.
  template <typename T>
  Result<T> read_scalar(const void* data);
  Status write_scalar(void* data, int64_t value);
};

inline ContextHold::ContextHold(ContextImpl& c) : c_(c), held_(c.try_hold()) {}
inline ContextHold::~ContextHold() {
  if (held_) c_.release_hold();
}

}  // namespace hexir::vm
