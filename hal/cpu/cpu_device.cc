#include "cpu_device.h"

#include <cstdlib>
#include <cstring>

#include "hexir/hal/cpu_kernels.h"
#include "thread_pool.h"

namespace hexir::hal::cpu {
namespace {

constexpr uint64_t kMinAlignment = 64;

uint8_t* bytes_at(const Buffer& buffer, uint64_t offset) {
  return static_cast<uint8_t*>(buffer.host_ptr) + offset;
}

// Runs every dispatch immediately on the calling thread, kernels splitting
// their work over the queue's own thread pool. Owned by one context (one
// thread); only the device counters it bumps are shared.
class CpuQueue final : public Queue {
 public:
  // `scratch`: the pool's per-participant scratch, allocated through `device`
  // (so its counters show it) and released through it with the queue.
  // `pool` was made over `scratch`.
  CpuQueue(Device& device, AtomicCounters& counters, std::unique_ptr<ThreadPool> pool, Buffer scratch)
      : counters_(counters), scratch_{&device, scratch}, pool_(std::move(pool)) {
    context_.backend = pool_.get();
  }

  Status dispatch(const Dispatch& dispatch) override {
    if (dispatch.kernel == 0) return invalid_argument("dispatch: kernel handle is null (not resolved)");
    // Hot path: no allocation here or in the kernels.
    // Single writer: a relaxed load + store is a plain add, no locked
    // read-modify-write; the shared device counter is settled in synchronize().
    dispatch_count_.store(dispatch_count_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return reinterpret_cast<KernelFn>(dispatch.kernel)(context_, dispatch);
  }

  Status dispatch_sequence(std::span<const Dispatch> sequence, std::span<void* const> bindings,
                           size_t* failed_index) override {
    (void)bindings;  // runs immediately: nothing is cached
    size_t k = 0;
    Status status;
    for (; k < sequence.size(); ++k) {
      const Dispatch& dispatch = sequence[k];
      if (dispatch.kernel == 0) {
        status = invalid_argument("dispatch: kernel handle is null (not resolved)");
        break;
      }
      // A fresh status per call (constructed in place) rather than assigning
      // into one: the loop then costs what a direct call loop costs.
      Status result = reinterpret_cast<KernelFn>(dispatch.kernel)(context_, dispatch);
      if (!result.ok()) {
        status = std::move(result);
        break;
      }
    }
    dispatch_count_.store(dispatch_count_.load(std::memory_order_relaxed) + k + (status.ok() ? 0 : 1),
                          std::memory_order_relaxed);
    if (!status.ok() && failed_index) *failed_index = k;
    return status;
  }

  Status copy(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset,
              uint64_t size) override {
    HEXIR_RETURN_IF_ERROR(check_buffer_range(dst, dst_offset, size, "copy destination"));
    HEXIR_RETURN_IF_ERROR(check_buffer_range(src, src_offset, size, "copy source"));
    if (size > 0) std::memmove(bytes_at(dst, dst_offset), bytes_at(src, src_offset), size);
    return ok_status();
  }

  // Work is done when dispatch returns; only the device-wide count is settled here.
  Status synchronize() override {
    const uint64_t count = dispatch_count_.load(std::memory_order_relaxed);
    counters_.dispatches.fetch_add(count - reported_dispatches_, std::memory_order_relaxed);
    reported_dispatches_ = count;
    return ok_status();
  }

  uint64_t dispatch_count() const override { return dispatch_count_.load(std::memory_order_relaxed); }

 private:
  // Released after the pool has joined its workers (declared before it).
  struct OwnedBuffer {
    OwnedBuffer(Device* owner, Buffer owned) : device(owner), buffer(owned) {}
    OwnedBuffer(const OwnedBuffer&) = delete;
    OwnedBuffer& operator=(const OwnedBuffer&) = delete;
    ~OwnedBuffer() {
      if (buffer.size > 0) device->release(buffer);
    }
    Device* device;
    Buffer buffer;
  };

  AtomicCounters& counters_;
  OwnedBuffer scratch_;
  std::unique_ptr<ThreadPool> pool_;
  KernelContext context_;
  // Atomic only so another thread may read it while this one dispatches.
  std::atomic<uint64_t> dispatch_count_{0};
  uint64_t reported_dispatches_ = 0;  // part of dispatch_count_ already added to the device counters
};

class CpuDevice final : public Device {
 public:
  CpuDevice(int threads, bool pack_weights)
      : threads_(threads > 0 ? threads : available_cores()), pack_weights_(pack_weights) {}

  std::string_view name() const override { return "cpu"; }

  Result<Buffer> allocate(uint64_t size, MemoryType type, BufferUsage usage, uint64_t alignment) override {
    (void)usage;
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      return invalid_argument("allocate: alignment " + std::to_string(alignment) + " is not a power of two");
    }
    if (alignment < kMinAlignment) alignment = kMinAlignment;
    // aligned_alloc wants a size that is a multiple of the alignment; a zero
    // size still gets one block so the buffer has a distinct, valid address.
    const uint64_t blocks = size == 0 ? 1 : (size - 1) / alignment + 1;
    if (blocks > SIZE_MAX / alignment) {
      return resource_exhausted("allocate: " + std::to_string(size) + " bytes is too large");
    }
    void* memory =
        std::aligned_alloc(static_cast<size_t>(alignment), static_cast<size_t>(blocks * alignment));
    if (memory == nullptr) {
      return resource_exhausted("allocate: out of host memory for " + std::to_string(size) + " bytes");
    }
    counters_.allocations.fetch_add(1, std::memory_order_relaxed);
    counters_.bytes_allocated.fetch_add(size, std::memory_order_relaxed);
    if (type == MemoryType::kHostVisible) counters_.host_visible_bytes_allocated.fetch_add(size, std::memory_order_relaxed);
    Buffer buffer;
    buffer.host_ptr = memory;
    buffer.device_ptr = reinterpret_cast<uintptr_t>(memory);
    buffer.size = size;
    buffer.memory_type = type;  // all host memory on cpu; keep what was asked for
    return buffer;
  }

  void release(Buffer& buffer) override {
    if (buffer.host_ptr == nullptr && !buffer.imported) return;
    if (!buffer.imported) {
      std::free(buffer.host_ptr);
      counters_.releases.fetch_add(1, std::memory_order_relaxed);
    }
    buffer = Buffer{};
  }

  Result<Buffer> import_host(void* host_ptr, uint64_t size, BufferUsage usage) override {
    (void)usage;
    if (host_ptr == nullptr && size > 0) return invalid_argument("import_host: null pointer");
    Buffer buffer;
    buffer.host_ptr = host_ptr;
    buffer.device_ptr = reinterpret_cast<uintptr_t>(host_ptr);
    buffer.size = size;
    buffer.memory_type = MemoryType::kHostVisible;
    buffer.imported = true;
    return buffer;
  }

  Status write(const Buffer& dst, uint64_t offset, const void* src, uint64_t size) override {
    HEXIR_RETURN_IF_ERROR(check_buffer_range(dst, offset, size, "write"));
    if (size > 0 && src == nullptr) return invalid_argument("write: null source");
    if (size > 0) std::memcpy(bytes_at(dst, offset), src, size);
    counters_.uploads.fetch_add(1, std::memory_order_relaxed);
    counters_.bytes_uploaded.fetch_add(size, std::memory_order_relaxed);
    return ok_status();
  }

  Status read(const Buffer& src, uint64_t offset, void* dst, uint64_t size) override {
    HEXIR_RETURN_IF_ERROR(check_buffer_range(src, offset, size, "read"));
    if (size > 0 && dst == nullptr) return invalid_argument("read: null destination");
    if (size > 0) std::memcpy(dst, bytes_at(src, offset), size);
    counters_.downloads.fetch_add(1, std::memory_order_relaxed);
    return ok_status();
  }

  Status fill(const Buffer& dst, uint64_t offset, uint64_t size, const void* pattern,
              uint32_t pattern_size) override {
    HEXIR_RETURN_IF_ERROR(check_fill(dst, offset, size, pattern, pattern_size));
    uint8_t* out = bytes_at(dst, offset);
    if (size > 0) {
      const auto* bytes = static_cast<const uint8_t*>(pattern);
      bool uniform = true;
      for (uint32_t i = 1; i < pattern_size; ++i) uniform = uniform && bytes[i] == bytes[0];
      if (uniform) {
        std::memset(out, bytes[0], size);
      } else {
        // Lay down one pattern, then double the filled prefix until done.
        std::memcpy(out, bytes, pattern_size);
        uint64_t filled = pattern_size;
        while (filled < size) {
          const uint64_t chunk = filled < size - filled ? filled : size - filled;
          std::memcpy(out + filled, out, chunk);
          filled += chunk;
        }
      }
    }
    counters_.fills.fetch_add(1, std::memory_order_relaxed);
    return ok_status();
  }

  Result<uintptr_t> resolve_kernel(const ops::KernelKey& key) override {
    KernelFn fn = static_cast<int>(key.op) < ops::kOpCount ? find_cpu_kernel(key) : nullptr;
    if (fn == nullptr) return no_kernel("cpu", key);
    return reinterpret_cast<uintptr_t>(fn);
  }

  // The kernel's registered prepare step (its weights packed for the GEMM),
  // into memory allocated and counted like any other.
  Result<Buffer> prepare_dispatch(const Dispatch& dispatch, uint32_t* replaced_inputs) override {
    if (replaced_inputs) *replaced_inputs = 0;
    if (dispatch.kernel == 0 || dispatch.plan == nullptr || !pack_weights_) return Buffer{};
    const KernelPrepare* prepare = find_cpu_prepare(reinterpret_cast<KernelFn>(dispatch.kernel));
    if (prepare == nullptr) return Buffer{};
    const uint64_t bytes = prepare->bytes(dispatch);
    if (bytes == 0) return Buffer{};
    HEXIR_ASSIGN_OR_RETURN(Buffer buffer,
                           allocate(bytes, MemoryType::kDeviceLocal, BufferUsage::kConstant, kMinAlignment));
    prepare->fill(dispatch, buffer.host_ptr);
    if (replaced_inputs) *replaced_inputs = prepare->replaces;
    return buffer;
  }

  // The words the kernel's prepare step reads (its `key`), after the bytes
  // it prepares; {0} when it prepares nothing.
  bool prepare_key(const Dispatch& dispatch, std::vector<uint64_t>* words) override {
    const KernelPrepare* prepare = dispatch.kernel == 0 || dispatch.plan == nullptr || !pack_weights_
                                       ? nullptr
                                       : find_cpu_prepare(reinterpret_cast<KernelFn>(dispatch.kernel));
    const uint64_t bytes = prepare ? prepare->bytes(dispatch) : 0;
    words->push_back(bytes);
    if (bytes == 0) return true;
    if (prepare->key == nullptr) return false;
    uint64_t key[kMaxPrepareKeyWords];
    const uint32_t count = prepare->key(dispatch, key);
    words->insert(words->end(), key, key + count);
    return true;
  }

  // The queue's pool gets its scratch here, at context creation (never on
  // invoke); the pool faults it in (256 KiB per thread).
  Result<std::unique_ptr<Queue>> create_queue() override {
    const uint64_t bytes = static_cast<uint64_t>(threads_) * kScratchFloatsPerParticipant * sizeof(float);
    HEXIR_ASSIGN_OR_RETURN(Buffer scratch,
                           allocate(bytes, MemoryType::kHostVisible, BufferUsage::kTransient, kMinAlignment));
    Result<std::unique_ptr<ThreadPool>> pool =
        ThreadPool::create(threads_, static_cast<float*>(scratch.host_ptr));
    if (!pool.ok()) {
      release(scratch);
      return pool.status();
    }
    return std::unique_ptr<Queue>(std::make_unique<CpuQueue>(*this, counters_, std::move(*pool), scratch));
  }

  DeviceCounters counters() const override { return counters_.snapshot(); }

 private:
  const int threads_;  // per queue, the calling thread included
  const bool pack_weights_;  // prepare_dispatch packs constant weights (DeviceOptions::pack_weights)
  AtomicCounters counters_;
};

}  // namespace

std::unique_ptr<Device> create_cpu_device(int threads, bool pack_weights) {
  return std::make_unique<CpuDevice>(threads, pack_weights);
}

}  // namespace hexir::hal::cpu
