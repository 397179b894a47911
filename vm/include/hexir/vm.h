// libhexir_vm: load a .hxe executable, prepare it on a device, run it.
//
//   auto module  = hexir::vm::Module::load_file("mlp.hxe");        // mmap + verify
//   auto device  = hexir::hal::create_device("cpu");
//   auto program = hexir::vm::Program::prepare(module.value(), *device.value());
//   auto context = hexir::vm::Context::create(program.value());    // one arena
//   context->invoke("main", inputs, outputs);                      // no allocation
//
// Ownership and lifetimes. Module, Program and Context are handles that
// share what they depend on: a Program keeps its Module's state (verified
// metadata, the file mapping or owned weights) alive, a Context keeps its
// Program's (and so the Module's). Handles may be destroyed or moved in any
// order; the last owner frees. What the caller must guarantee:
//  - the hal::Device outlives every Program prepared on it and every Context
//    created from those (it is borrowed, never owned);
//  - load_buffer's bytes stay alive and unchanged while any handle of that
//    Module lives, unless LoadOptions::copy_weights; a mapped file is not
//    truncated while in use (LoadOptions::copy_weights otherwise);
//  - invoke's inputs and outputs are borrowed for the duration of the call only;
//  - a TensorRef from Context::output() points into the context's own buffer:
//    valid until that function is invoked again on that context or the context
//    goes; a FunctionSignature reference, while any handle of its Module lives;
//  - a moved-from handle is only assigned to or destroyed: what returns a
//    Status refuses it (kFailedPrecondition); accessors returning references
//    must not be called on it.
// Indices are checked: an out-of-range function or output index is refused
// with a Status (Module::function returns an empty signature). Nothing here
// throws.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/base/types.h"
#include "hexir/hal/device.h"

namespace hexir::vm {

// How a file is loaded. The metadata (instructions, operands, parameters,
// bindings, slots, workspaces) is always copied into memory the Module owns
// before it is verified, and everything after load reads only that copy, so
// changing the file afterwards cannot change what was verified. The weights
// (RODATA sections) are used in place from the mapping unless copy_weights.
//
// The limits bound what a small file can make the loader, prepare and
// Context::create allocate; a file beyond one is refused at load with
// kResourceExhausted naming the limit. Raise them for models that need more.
struct LoadOptions {
  bool verify_data_checksum = false;  // O(weights) when on; off keeps mmap loads O(metadata)
  // Read the whole file (weights included) into memory the Module owns
  // instead of mapping it (load_buffer: copy the caller's bytes). O(file) at
  // load; afterwards the file may be rewritten, truncated or removed, or the
  // caller's buffer freed. Without it, truncating a mapped file under a
  // running process makes the next read of a lost page raise SIGBUS
  // (docs/hardening.md).
  bool copy_weights = false;
  // The checks and defaults are format::LoadLimits' (hexir/format/limits.h),
  // which hexir-dump applies too.
  // Raw (decompressed) bytes of all zstd sections together, decompressed at load.
  uint64_t max_decompressed_bytes = uint64_t{256} << 20;
  // Bytes of all fill constants together, materialized at prepare.
  uint64_t max_fill_bytes = uint64_t{256} << 20;
  // Arena plus shared workspace (and host arena) that Context::create allocates (static plans),
  // or the most bytes of values and scratch live at once (free-at-last-use).
  uint64_t max_arena_bytes = uint64_t{16} << 30;
};

// The static type and name of one function argument or result.
struct TensorSignature {
  std::string name;
  TensorType type;
  uint64_t byte_size = 0;
  int donated_to = -1;  // inputs: output index this input may be written as
};

struct FunctionSignature {
  std::string name;
  std::vector<TensorSignature> inputs;
  std::vector<TensorSignature> outputs;
  // "decode(input_ids: i64[1,1], pos: i64[], cache: f32[2,32,16] donate) -> (f32[1,64], f32[2,32,16])"
  std::string to_string() const;
};

// An input asked for by name (Module::find_function_for).
struct NamedTensorType {
  std::string_view name;
  TensorType type;
};

// One instruction of a function, for profiles and listings: its operator and
// its first result (name and type).
struct InstructionInfo {
  std::string op;
  std::string result;
  TensorType type;
};

class ModuleImpl;

// A verified executable. Movable, not copyable.
class Module {
 public:
  // mmaps the file; the mapping lives as long as the Module.
  static Result<Module> load_file(const std::string& path, const LoadOptions& options = {});
  // Uses caller memory in place (no copy of the weights); it must stay alive
  // and its data sections unchanged as long as the Module, unless
  // options.copy_weights. Data sections need 64-byte alignment of `bytes`.
  static Result<Module> load_buffer(std::span<const uint8_t> bytes, const LoadOptions& options = {});
  // Maps the regular file open as `fd` (read from offset 0 whatever the fd's
  // position); the caller keeps the descriptor, which may be closed once this
  // returns (the mapping stays). `what` names the file in errors.
  static Result<Module> load_fd(int fd, const std::string& what, const LoadOptions& options = {});

  Module(Module&&) noexcept;
  Module& operator=(Module&&) noexcept;
  ~Module();

  const std::string& name() const;
  size_t function_count() const;
  // Every function's signature, by index (range-for needs no index at all).
  std::span<const FunctionSignature> functions() const;
  // An out-of-range index gives an empty signature (no name, no arguments):
  // use find_function or functions() to get indices that exist.
  const FunctionSignature& function(size_t index) const;
  Result<size_t> find_function(std::string_view name) const;  // kNotFound lists the names there are
  // The one function whose inputs are of `inputs`' types, by position: as
  // many, each with the same dtype and dims. For a module holding one
  // function per shape (prefill_32, prefill_128, decode), the one for what
  // the caller has. None (kNotFound) or several (kInvalidArgument): the
  // message names the types asked and lists every function's signature.
  Result<size_t> find_function_for(std::span<const TensorType> inputs) const;
  // The same by name: the one function having an input of each name with
  // that dtype and dims (its other inputs, if any, are not looked at).
  Result<size_t> find_function_for(std::span<const NamedTensorType> inputs) const;
  // The instructions of a function in execution order (empty for an index out of range).
  std::vector<InstructionInfo> instructions(size_t function) const;
  uint64_t arena_bytes() const;
  uint64_t lower_bound_bytes() const;
  // The host memory space (host offload, docs/memory-budget.md): the host
  // arena a context allocates besides its device memory, and the most bytes
  // live in it at once. 0 when nothing is offloaded.
  uint64_t host_arena_bytes() const;
  uint64_t host_lower_bound_bytes() const;
  uint64_t constant_bytes() const;  // raw bytes of all constants (packed + filled)
  // Of constant_bytes: the streamed weights (weights streaming), kept in host
  // memory and prefetched into the arena before each read, never uploaded.
  uint64_t streamed_constant_bytes() const;
  uint64_t workspace_bytes() const;  // the shared scratch of a static plan (0 for free-at-last-use)
  // Device bytes Context::create allocates for this module: the arena and
  // workspace (one allocation) and the context's own output buffers (every
  // result not computed in a donated input). Free-at-last-use plans allocate
  // their values per invoke on top (PhaseStats::peak_live_bytes).
  uint64_t context_bytes() const;

  const ModuleImpl& impl() const { return *impl_; }

 private:
  friend class Program;
  explicit Module(std::unique_ptr<ModuleImpl> impl);
  explicit Module(std::shared_ptr<ModuleImpl> impl);
  std::shared_ptr<ModuleImpl> impl_;  // shared with the Programs prepared from it
};

// Per-phase counters: what the device was asked to do.
struct PhaseStats {
  uint64_t device_allocations = 0;
  uint64_t uploads = 0;
  uint64_t dispatches = 0;
  // Free-at-last-use plans only (invoke): the most bytes of values and scratch
  // held at once during any invoke so far. Static plans hold their arena instead.
  uint64_t peak_live_bytes = 0;
};

class ProgramImpl;

// A Module made ready on one device: constants uploaded or imported once,
// fills materialized once, kernels resolved. Shared read-only by contexts.
// It keeps the Module's state alive (the caller's Module handle may go); the
// Device is borrowed and must outlive the Program and its contexts.
class Program {
 public:
  // A moved-from `module` is refused (kFailedPrecondition).
  static Result<Program> prepare(const Module& module, hal::Device& device);
  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;
  ~Program();

  // A handle of the Module it was prepared from, owned by the Program: valid
  // as long as the Program, whatever became of the caller's Module handle.
  const Module& module() const;
  hal::Device& device() const;
  const PhaseStats& prepare_stats() const;
  // Device bytes of what the kernels derived from constants at prepare (the
  // cpu's packed GEMM weights), kept for the Program's lifetime: one copy per
  // constant and packing, however many instructions and functions read it
  // (a prefill's matmul with 32 rows and a decode's with 1 share one).
  uint64_t prepared_bytes() const;
  const ProgramImpl& impl() const { return *impl_; }

 private:
  friend class Context;
  explicit Program(std::unique_ptr<ProgramImpl> impl);
  std::shared_ptr<ProgramImpl> impl_;  // shared with the contexts created from it
};

// A caller's tensor: host or device memory holding `byte_size` bytes of
// `type`. For the cpu device both are the same address space.
struct TensorRef {
  void* data = nullptr;
  uint64_t byte_size = 0;
  TensorType type;
};

class ContextImpl;

// Per-thread execution state: one arena (+ workspace), one queue, output
// buffers for callers that pass none. Not thread-safe; use one per thread.
// It keeps its Program (and so the Module) alive: the caller's Program
// handle may go first. The Device must outlive it.
//
// Concurrent use is detected, not serialized: an invoke (or set_profiling)
// entered while another thread's invoke runs on the same context is refused
// with kFailedPrecondition and changes nothing (one atomic operation per
// invoke). cancel, set_deadline and set_max_loop_iterations may be called
// from any thread at any time. output, read_output and the counters read what
// the last invoke left: call them while no invoke runs.
class Context {
 public:
  // A moved-from `program` is refused (kFailedPrecondition).
  static Result<Context> create(const Program& program);
  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
  ~Context();

  // Runs `function`. `outputs` may be empty: results then land in the
  // context's own buffers, readable with output(). Checks count, dtype and
  // shape of every argument, and that the caller's buffers share no byte
  // where the call writes: an output may not overlap any other argument, nor
  // a donated input any other input (plain inputs, only read, may share
  // memory), nor an input the context's own output buffer this call
  // overwrites (y = f(y) with no outputs passed). The one legal overlap is a
  // donated input passed as its own output (the same pointer). Each refusal
  // names the two arguments. Allocates nothing. Refused on a moved-from
  // Context (kFailedPrecondition).
  Status invoke(size_t function, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs = {});
  Status invoke(std::string_view function, std::span<const TensorRef> inputs,
                std::span<const TensorRef> outputs = {});

  // The context-owned result buffer of the last invoke of `function` that passed no outputs.
  Result<TensorRef> output(size_t function, size_t index) const;
  // Copies that result to host memory through the device (works on every backend).
  Status read_output(size_t function, size_t index, std::span<uint8_t> host) const;
  // The actual type of result `index` of the last invoke of `function`
  // (whether it passed outputs or not): a result with a bounded dim
  // (f32[<=300,4], docs/design-notes.md) has the extent that invoke
  // produced there, its elements row-major at that shape from the start of
  // its buffer (which holds the bound); every other result, its signature's
  // type. Before any invoke, the bound. output() reports the
  // same type and its byte size.
  Result<TensorType> output_type(size_t function, size_t index) const;

  // Profiling (hexir-run --profile). While on, invoke runs the instructions
  // one at a time, waits for each to finish and adds its wall time to that
  // instruction's total: a clock read and a queue synchronize per
  // instruction (on CUDA, no graph replay), so leave it off otherwise.
  // Turning it on sizes the totals (allocates); invoke still allocates nothing.
  Status set_profiling(bool on);
  // Nanoseconds per instruction of `function` (Module::instructions order),
  // summed over the invokes profiled so far; empty before profiling was on.
  std::span<const uint64_t> instruction_nanoseconds(size_t function) const;

  // Bounds on one invoke, for callers that run untrusted files (whose loop
  // trip counts are data) or need an answer in time. Each may be set from
  // any thread; a running invoke keeps the values it started with.
  //
  // Loops: the most loop iterations one invoke may run, all loops together
  // (0, the default: no limit). An invoke that would run more fails with
  // kResourceExhausted naming the limit (the fuzzers set it).
  Status set_max_loop_iterations(uint64_t limit);
  // A time limit per invoke, counted from its start (0, the default: none;
  // negative is refused). An invoke still running when it passes stops at
  // its next control instruction (a loop iteration, a branch) with
  // kDeadlineExceeded. The clock is read there and once at the start, only
  // when a deadline is set: the kernel's coarse monotonic clock (about 5 ns
  // a read, a few milliseconds' resolution, so a deadline may be passed by
  // that much). A function without loops or ifs runs to its end (its work is
  // bounded by the file).
  Status set_deadline(std::chrono::nanoseconds timeout);
  // Asks the invoke running on another thread to stop: it returns
  // kCancelled at its next control instruction (a loop iteration, a
  // branch), or finishes normally if it gets to the end first. Thread-safe;
  // never blocks. A cancel applies to the invoke running at that moment
  // only: with none running it does nothing (returns false) and the next
  // invoke runs normally, so to bound an invoke that may not have started
  // yet, set a deadline. Returns whether an invoke was running.
  bool cancel();

  // Summed over every invoke so far.
  const PhaseStats& invoke_stats() const;
  uint64_t invoke_count() const;
  const PhaseStats& create_stats() const;
  // Device bytes this context holds between invokes (arena, workspace, own
  // output buffers): Module::context_bytes() of its module.
  uint64_t device_bytes() const;
  // Host memory this context holds for values offloaded from the device (the
  // host arena; pinned on CUDA): Module::host_arena_bytes() of its module.
  uint64_t host_bytes() const;
  const ContextImpl& impl() const { return *impl_; }
  // The library's own layers (the C API) invoke through it.
  ContextImpl& impl() { return *impl_; }

 private:
  friend class Generator;  // hexir/generator.h: invokes through the context's state
  explicit Context(std::unique_ptr<ContextImpl> impl);
  std::unique_ptr<ContextImpl> impl_;
};

}  // namespace hexir::vm
