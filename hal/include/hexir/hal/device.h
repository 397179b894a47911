// The HAL device interface. The VM talks only to this; cpu, cuda and
// cuda-managed implement it. A Device owns memory and kernels; a Queue (one
// per VM context) orders dispatches and transfers, so contexts on different
// threads never share mutable state.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/base/types.h"
#include "hexir/ops/op.h"

namespace hexir::hal {

enum class MemoryType : uint32_t {
  kDeviceLocal = 1u << 0,  // fastest for kernels; may not be host addressable
  kHostVisible = 1u << 1,  // host addressable (pinned on CUDA)
  kManaged = 1u << 2,      // unified memory migrating between host and device
};

enum class BufferUsage : uint32_t {
  kConstant = 1u << 0,   // read-only after prepare
  kTransient = 1u << 1,  // arena / workspace
  kTransfer = 1u << 2,   // staging for uploads and host inputs/outputs
  kExternal = 1u << 3,   // caller input/output
};

// A range of device memory. `device_ptr` is what kernels receive; `host_ptr`
// is non-null when the host can address the bytes directly (always on cpu).
// Buffers are plain values; whoever allocated one releases it once.
struct Buffer {
  void* host_ptr = nullptr;
  uint64_t device_ptr = 0;
  uint64_t size = 0;
  MemoryType memory_type = MemoryType::kDeviceLocal;
  bool imported = false;  // wraps memory the device does not own (release is a no-op)
  void* impl = nullptr;   // backend bookkeeping
};

// One prepared dispatch. Everything that never changes after load was
// decided at prepare: the kernel (resolved per operator and dtype), its plan
// (the operator's geometry, ops/plans.h) and the workspace. The invoke loop
// only hands over pointers; kernels compute and never validate.
struct Dispatch {
  uintptr_t kernel = 0;             // handle from Device::resolve_kernel
  const void* plan = nullptr;       // the operator's plan struct, owned by the program
  void* const* operands = nullptr;  // data pointers (device address space): inputs, then outputs
  uint32_t input_count = 0;
  uint32_t output_count = 0;
  void* workspace = nullptr;  // scratch the plan asked for (ops::workspace_bytes)
  uint64_t workspace_size = 0;
  // What Device::prepare_dispatch derived from the constant operands (cpu: the
  // weights packed in the GEMM's order), owned by the program; null when
  // nothing was prepared, and a kernel then does all its work per call.
  const void* prepared = nullptr;
};

// What a kernel gets besides its dispatch: per-queue resources. cpu: the
// queue's thread pool (hal/cpu/thread_pool.h; null when a kernel is called
// directly, which then runs on the calling thread); cuda: the launcher.
struct KernelContext {
  void* backend = nullptr;
};

// Counts the VM and tests read to prove the hot path allocates and uploads nothing.
struct DeviceCounters {
  uint64_t allocations = 0;  // allocate() calls that succeeded
  uint64_t releases = 0;
  uint64_t bytes_allocated = 0;
  // Of those, MemoryType::kHostVisible bytes (pinned on CUDA): the host
  // memory space, counted apart (on the cpu both spaces are host memory).
  uint64_t host_visible_bytes_allocated = 0;
  uint64_t uploads = 0;  // host -> device writes
  uint64_t bytes_uploaded = 0;
  uint64_t downloads = 0;
  uint64_t fills = 0;
  uint64_t dispatches = 0;
};

// Thread-safe counters a backend bumps; snapshot() gives a consistent-enough copy.
class AtomicCounters {
 public:
  std::atomic<uint64_t> allocations{0}, releases{0}, bytes_allocated{0}, host_visible_bytes_allocated{0}, uploads{0},
      bytes_uploaded{0},
      downloads{0}, fills{0}, dispatches{0};
  DeviceCounters snapshot() const;
};

class Queue {
 public:
  virtual ~Queue() = default;
  // Runs (or enqueues) one kernel. Must not allocate.
  virtual Status dispatch(const Dispatch& dispatch) = 0;
  // Runs (or enqueues) a whole sequence in order, stopping at the first
  // failure, whose index goes to *failed_index. One call per invoke keeps the
  // per-dispatch cost of the VM at a plain loop (and is the unit a CUDA queue
  // captures as a graph). `bindings` are the pointers the caller patched into
  // the sequence since it was built (a function's inputs and outputs); the
  // caller promises that the same `sequence` storage with equal bindings is the
  // same work, so a CUDA queue replays its graph without looking further. Must
  // not allocate.
  virtual Status dispatch_sequence(std::span<const Dispatch> sequence, std::span<void* const> bindings,
                                   size_t* failed_index) = 0;
  virtual Status copy(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset,
                      uint64_t size) = 0;
  // Copies between memory spaces that later work may overlap (host offload:
  // a value evicted to, or prefetched from, host-visible memory). A backend
  // with a copy engine runs them on a second stream: copy_begin starts the
  // copy after the work enqueued so far and names it by `fence` (below the
  // count reserve_copy_fences asked for, once, before invoking); work
  // enqueued after copy_wait(fence) runs after the copy. The copy stream
  // keeps its own order, so a later copy follows an earlier one. The
  // defaults copy in order on the queue itself (nothing to wait for): the
  // cpu, where both memory spaces are host memory. Must not allocate.
  virtual Status reserve_copy_fences(uint32_t count) {
    (void)count;
    return ok_status();
  }
  virtual Status copy_begin(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset,
                            uint64_t size, uint32_t fence) {
    (void)fence;
    return copy(dst, dst_offset, src, src_offset, size);
  }
  virtual Status copy_wait(uint32_t fence) {
    (void)fence;
    return ok_status();
  }
  // Blocks until everything enqueued has finished.
  virtual Status synchronize() = 0;
  // Per-queue dispatch count (a context's own work, unaffected by other threads).
  // The device-wide DeviceCounters::dispatches may lag until synchronize().
  virtual uint64_t dispatch_count() const = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual std::string_view name() const = 0;  // "cpu", "cuda:0", "cuda-managed:0"

  virtual Result<Buffer> allocate(uint64_t size, MemoryType type, BufferUsage usage,
                                  uint64_t alignment = 64) = 0;
  virtual void release(Buffer& buffer) = 0;

  // Wraps caller memory without copying when the device can address it
  // (cpu: always). Returns kUnimplemented otherwise; callers then allocate
  // and write().
  virtual Result<Buffer> import_host(void* host_ptr, uint64_t size, BufferUsage usage) = 0;

  // Synchronous transfers and fills, used at prepare and by tests.
  virtual Status write(const Buffer& dst, uint64_t offset, const void* src, uint64_t size) = 0;
  virtual Status read(const Buffer& src, uint64_t offset, void* dst, uint64_t size) = 0;
  // Repeats `pattern` (1..16 bytes) over [offset, offset + size); size is a multiple of it.
  virtual Status fill(const Buffer& dst, uint64_t offset, uint64_t size, const void* pattern,
                      uint32_t pattern_size) = 0;

  // Done once at prepare: the kernel for an operator on these dtypes, as the
  // handle dispatches pass back. kUnimplemented when the backend has none.
  virtual Result<uintptr_t> resolve_kernel(const ops::KernelKey& key) = 0;

  // Optional, once per instruction at prepare: data the kernel derives from
  // its constant operands so that invoking only hands over a pointer (cpu: a
  // GEMM's weights packed into its register tile's order). `dispatch` carries
  // the kernel handle and the plan; its operands are the constants' device
  // addresses and null for every operand that is not a constant. The buffer
  // is allocated through this device (so DeviceCounters count it); the caller
  // owns it, releases it after the last dispatch using it, and passes its
  // device address as Dispatch::prepared. An empty Buffer (size 0): nothing
  // to prepare. Backends without such kernels keep this default.
  // `replaced_inputs` (optional) gets a bit per input the kernel no longer
  // reads when given the prepared data (the caller may then let go of it).
  virtual Result<Buffer> prepare_dispatch(const Dispatch& dispatch, uint32_t* replaced_inputs = nullptr) {
    (void)dispatch;
    if (replaced_inputs) *replaced_inputs = 0;
    return Buffer{};
  }

  // Optional, at prepare, beside prepare_dispatch: what the bytes it derives
  // for `dispatch` depend on besides the kernel and the constant operands'
  // addresses, appended to `words`. Two dispatches of one kernel on the same
  // constants whose words are equal get the same bytes and replaced inputs,
  // so a program prepares once for both (a prefill's matmul with 32 rows and
  // a decode's with 1 on the same weights pack them once). false: the
  // backend cannot tell (the caller then keys on the whole plan), the
  // default: a backend overriding prepare_dispatch overrides this too to share.
  virtual bool prepare_key(const Dispatch& dispatch, std::vector<uint64_t>* words) {
    (void)dispatch;
    (void)words;
    return false;
  }

  virtual Result<std::unique_ptr<Queue>> create_queue() = 0;

  virtual DeviceCounters counters() const = 0;
};

// Checks shared by every backend, so each reports misuse alike. Overflow-safe:
// [offset, offset + size) must lie inside `buffer`, which must have memory
// when size > 0 (`host_memory`: host_ptr, else device_ptr).
Status check_buffer_range(const Buffer& buffer, uint64_t offset, uint64_t size, const char* what,
                          bool host_memory = true);
// A fill: pattern of 1..16 bytes, size a multiple of it, range inside the buffer.
Status check_fill(const Buffer& buffer, uint64_t offset, uint64_t size, const void* pattern,
                  uint32_t pattern_size, bool host_memory = true);

// One line per kernel of a backend: the operator, the dtypes it is for
// (kAnyDType: every dtype; the plan carries element sizes) and the function.
inline constexpr int kAnyDType = -1;
template <typename Fn>
struct KernelEntry {
  ops::OpId op;
  int input;   // DType of the operator's key input, or kAnyDType
  int output;  // DType of output 0, or kAnyDType
  Fn fn;
};

// The entry for `key` in a backend's table; null when there is none.
template <typename Fn>
Fn find_kernel(std::span<const KernelEntry<Fn>> table, const ops::KernelKey& key) {
  for (const KernelEntry<Fn>& e : table)
    if (e.op == key.op && (e.input == kAnyDType || e.input == static_cast<int>(key.input)) &&
        (e.output == kAnyDType || e.output == static_cast<int>(key.output)))
      return e.fn;
  return nullptr;
}

// Why a backend has no kernel for `key`, for resolve_kernel's status.
Status no_kernel(std::string_view backend, const ops::KernelKey& key);

// "cpu", "cuda", "cuda:1", "cuda-managed", ... Unknown or absent devices give
// a clear kUnavailable / kInvalidArgument status. CUDA names take options
// after '?': "cuda:0?graphs=off&cublas=off" (see docs/cuda.md); "cpu?threads=N"
// sets DeviceOptions::threads. An option given twice, or a NUL anywhere in the
// name, is kInvalidArgument.
struct DeviceOptions {
  // cpu: threads per context (the calling thread included), started when the
  // context is created; 0: one per core this process may run on. A thread the
  // system refuses makes context creation kResourceExhausted (how many were
  // asked for and how many started).
  int threads = 0;
  // cpu: constant weights packed for the GEMM at Program::prepare (faster,
  // but private memory in every process). false ("cpu?pack_weights=0"):
  // kernels read them from the mapped file, whose pages N processes share.
  bool pack_weights = true;
};
Result<std::unique_ptr<Device>> create_device(std::string_view name, const DeviceOptions& options = {});

// What create_device can open on this machine, for `hexir-run --list-devices`.
struct DeviceDescription {
  std::string name;  // "cpu", "cuda:0", "cuda-managed:0"; "cuda" when CUDA is unavailable
  bool available = true;
  std::string details;  // "NVIDIA H200, 139.8 GiB, compute capability 9.0", or why it is unavailable
};
// cpu first, then every CUDA device (or one unavailable "cuda" entry with the reason).
std::vector<DeviceDescription> list_devices();

}  // namespace hexir::hal
