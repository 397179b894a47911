// The cuda / cuda-managed Device and its Queue (one CUDA stream per VM
// context). See docs/cuda.md for the design: driver table, memory types,
// pinned staging, graph capture and replay.
#include "cuda_device.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "cuda_blas.h"
#include "cuda_dispatch.h"
#include "cuda_driver.h"
#include "cuda_fatbins.h"

namespace hexir::hal::cuda {
namespace {

constexpr uint64_t kStagingChunk = uint64_t{4} << 20;  // two of these, double-buffered
constexpr uint64_t kDeviceAlignment = 256;             // what cuMemAlloc guarantees
constexpr size_t kGraphCacheEntries = 8;

const char* const kKernelSymbols[] = {
#define HEXIR_CUDA_KERNEL_SYMBOL(name, symbol, params) #symbol,
    HEXIR_CUDA_KERNELS(HEXIR_CUDA_KERNEL_SYMBOL)
#undef HEXIR_CUDA_KERNEL_SYMBOL
};

struct DeviceOptions {
  bool managed = false;
  int ordinal = 0;
  bool graphs = true;
  bool cublas = true;
};

bool env_off(const char* variable) {
  const char* v = std::getenv(variable);
  return v != nullptr &&
         (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0 || std::strcmp(v, "false") == 0);
}

Result<DeviceOptions> parse_name(std::string_view name) {
  DeviceOptions o;
  o.graphs = !env_off("HEXIR_CUDA_GRAPHS");
  o.cublas = !env_off("HEXIR_CUDA_CUBLAS");
  const size_t q = name.find('?');
  std::string_view base = name.substr(0, q);
  std::string_view query = q == std::string_view::npos ? std::string_view() : name.substr(q + 1);
  constexpr std::string_view kManaged = "cuda-managed", kPlain = "cuda";
  std::string_view rest;
  if (base.substr(0, kManaged.size()) == kManaged) {
    o.managed = true;
    rest = base.substr(kManaged.size());
  } else if (base.substr(0, kPlain.size()) == kPlain) {
    rest = base.substr(kPlain.size());
  } else {
    return invalid_argument("not a cuda device name: '" + std::string(name) + "'");
  }
  if (!rest.empty()) {
    if (rest[0] != ':' || rest.size() < 2 || rest.size() > 10)
      return invalid_argument("bad cuda device ordinal in '" + std::string(name) + "'");
    int ordinal = 0;
    for (char c : rest.substr(1)) {
      if (c < '0' || c > '9')
        return invalid_argument("bad cuda device ordinal in '" + std::string(name) + "'");
      ordinal = ordinal * 10 + (c - '0');
    }
    o.ordinal = ordinal;
  }
  bool seen_graphs = false, seen_cublas = false;
  while (!query.empty()) {
    const size_t end = query.find_first_of("&,");
    std::string_view option = query.substr(0, end);
    query = end == std::string_view::npos ? std::string_view() : query.substr(end + 1);
    const size_t eq = option.find('=');
    std::string_view key = option.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? std::string_view() : option.substr(eq + 1);
    bool on;
    if (value == "on" || value == "1" || value == "true") {
      on = true;
    } else if (value == "off" || value == "0" || value == "false") {
      on = false;
    } else {
      return invalid_argument("device '" + std::string(name) + "': option '" + std::string(option) +
                              "' needs =on or =off");
    }
    bool* seen = key == "graphs" ? &seen_graphs : key == "cublas" ? &seen_cublas : nullptr;
    if (seen && std::exchange(*seen, true))
      return invalid_argument("device '" + std::string(name) + "': option '" + std::string(key) +
                              "' given twice");
    if (key == "graphs") {
      o.graphs = on;
    } else if (key == "cublas") {
      o.cublas = on;
    } else {
      return invalid_argument("device '" + std::string(name) + "': unknown option '" + std::string(key) +
                              "' (options: graphs, cublas)");
    }
  }
  return o;
}

// Host-side pattern fill (pinned buffers): the cpu device's doubling copy.
void host_fill(uint8_t* out, uint64_t size, const uint8_t* bytes, uint32_t pattern_size) {
  if (size == 0) return;
  std::memcpy(out, bytes, std::min<uint64_t>(pattern_size, size));
  uint64_t filled = pattern_size;
  while (filled < size) {
    const uint64_t chunk = std::min(filled, size - filled);
    std::memcpy(out + filled, out, chunk);
    filled += chunk;
  }
}

std::string format_gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

// Launches on one stream: the driver for kernels and copies, cuBLAS for GEMMs.
class StreamLauncher final : public Launcher {
 public:
  StreamLauncher(const Driver& driver, const CUfunction* functions, CUstream stream, BlasHandle* blas)
      : driver_(driver), functions_(functions), stream_(stream), blas_(blas) {}

  Status launch(Kernel kernel, const LaunchConfig& c, void* params) override {
    ++operations;
    void* kernel_params[] = {params};
    return driver_.check(
        driver_.cuLaunchKernel(functions_[static_cast<size_t>(kernel)], c.grid[0], c.grid[1], c.grid[2],
                               c.block[0], c.block[1], c.block[2], 0, stream_, kernel_params, nullptr),
        "cuLaunchKernel");
  }
  Status copy(void* dst, const void* src, uint64_t bytes) override {
    ++operations;
    return driver_.check(driver_.cuMemcpyDtoDAsync_v2(reinterpret_cast<CUdeviceptr>(dst),
                                                      reinterpret_cast<CUdeviceptr>(src), bytes, stream_),
                         "cuMemcpyDtoDAsync");
  }
  bool has_gemm() const override { return blas_ != nullptr; }
  Status gemm(const GemmBatch& g) override {
    ++operations;
    return blas_->gemm(g);
  }

  uint64_t operations = 0;  // launches, copies and GEMMs enqueued so far

 private:
  const Driver& driver_;
  const CUfunction* functions_;
  CUstream stream_;
  BlasHandle* blas_;
};

class CudaDevice;

// One stream. dispatch_sequence captures the sequence into a CUDA graph the
// first time it sees it (this storage, these bindings) and replays it after that.
class CudaQueue final : public Queue {
 public:
  CudaQueue(CudaDevice& device, CUstream stream, std::unique_ptr<BlasHandle> blas);
  ~CudaQueue() override;

  Status dispatch(const Dispatch& dispatch) override;
  Status dispatch_sequence(std::span<const Dispatch> sequence, std::span<void* const> bindings,
                           size_t* failed_index) override;
  Status copy(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset,
              uint64_t size) override;
  // Host offload's copies on copy_stream_, ordered with stream_ by events:
  // copy_ready_[f] recorded on stream_ before copy f starts, copy_done_[f]
  // on copy_stream_ after it; copy_wait makes stream_ wait for copy_done_[f].
  Status reserve_copy_fences(uint32_t count) override;
  Status copy_begin(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset, uint64_t size,
                    uint32_t fence) override;
  Status copy_wait(uint32_t fence) override;
  Status synchronize() override;
  uint64_t dispatch_count() const override { return dispatch_count_.load(std::memory_order_relaxed); }

  uint64_t graph_captures() const { return captures_; }

 private:
  struct GraphEntry {
    std::vector<uint64_t> key;
    CUgraphExec exec = nullptr;
    uint64_t last_use = 0;
  };

  void count(uint64_t n) {
    dispatch_count_.store(dispatch_count_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  Status run_eagerly(std::span<const Dispatch> sequence, size_t* failed_index);
  void build_key(std::span<const Dispatch> sequence, std::span<void* const> bindings);
  Status capture(std::span<const Dispatch> sequence, size_t* failed_index, CUgraphExec* out);

  CudaDevice& device_;
  const Driver& driver_;
  CUstream stream_;
  std::unique_ptr<BlasHandle> blas_;
  StreamLauncher launcher_;
  std::atomic<uint64_t> dispatch_count_{0};
  uint64_t reported_dispatches_ = 0;
  std::vector<uint64_t> key_;  // scratch, keeps its capacity between invokes
  std::vector<GraphEntry> graphs_;
  uint64_t use_clock_ = 0;
  uint64_t captures_ = 0;
  CUstream copy_stream_ = nullptr;  // created by reserve_copy_fences
  std::vector<CUevent> copy_ready_, copy_done_;
};

class CudaDevice final : public Device {
 public:
  CudaDevice(const Driver& driver, const DeviceOptions& options) : driver_(driver), options_(options) {
    name_ = std::string(options.managed ? "cuda-managed:" : "cuda:") + std::to_string(options.ordinal);
  }

  ~CudaDevice() override {
    if (context_ == nullptr) return;
    driver_.cuCtxSetCurrent(context_);
    if (sync_stream_) driver_.cuStreamSynchronize(sync_stream_);
    for (CUevent& e : staging_events_)
      if (e) driver_.cuEventDestroy_v2(e);
    for (void*& p : staging_)
      if (p) driver_.cuMemFreeHost(p);
    if (sync_stream_) driver_.cuStreamDestroy_v2(sync_stream_);
    for (CUmodule m : modules_)
      if (m) driver_.cuModuleUnload(m);
    driver_.cuDevicePrimaryCtxRelease_v2(device_);
  }

  Status init() {
    int count = 0;
    HEXIR_RETURN_IF_ERROR(driver_.check(driver_.cuDeviceGetCount(&count), "cuDeviceGetCount"));
    if (options_.ordinal >= count) {
      return unavailable("CUDA device " + std::to_string(options_.ordinal) + " not present (" +
                         std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s") + " found)");
    }
    HEXIR_RETURN_IF_ERROR(driver_.check(driver_.cuDeviceGet(&device_, options_.ordinal), "cuDeviceGet"));
    int major = 0, minor = 0, managed = 0, concurrent = 0;
    driver_.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_);
    driver_.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_);
    driver_.cuDeviceGetAttribute(&managed, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, device_);
    driver_.cuDeviceGetAttribute(&concurrent, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, device_);
    if (major < 8) {
      return unavailable("CUDA device " + std::to_string(options_.ordinal) + " has compute capability " +
                         std::to_string(major) + "." + std::to_string(minor) +
                         "; this build's kernels need 8.0 or newer (sm_80, sm_90, compute_90 PTX)");
    }
    if (options_.managed && !managed) {
      return unavailable("CUDA device " + std::to_string(options_.ordinal) +
                         " does not support managed memory");
    }
    concurrent_managed_ = concurrent != 0;
    HEXIR_RETURN_IF_ERROR(
        driver_.check(driver_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain"));
    HEXIR_RETURN_IF_ERROR(bind());

    for (size_t m = 0; m < kEmbeddedModuleCount; ++m) {
      CUmodule module = nullptr;
      HEXIR_RETURN_IF_ERROR(driver_
                                .check(driver_.cuModuleLoadData(&module, kEmbeddedModules[m].data),
                                       "cuModuleLoadData (embedded kernels)")
                                .annotate(kEmbeddedModules[m].name));
      modules_.push_back(module);
    }
    for (size_t k = 0; k < static_cast<size_t>(Kernel::kCount); ++k) {
      for (CUmodule module : modules_) {
        if (driver_.cuModuleGetFunction(&functions_[k], module, kKernelSymbols[k]) == CUDA_SUCCESS) break;
        functions_[k] = nullptr;
      }
      if (functions_[k] == nullptr)
        return internal_error(std::string("cuda: kernel ") + kKernelSymbols[k] +
                              " missing from the embedded fatbins");
    }

    HEXIR_RETURN_IF_ERROR(
        driver_.check(driver_.cuStreamCreate(&sync_stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
    for (int i = 0; i < 2; ++i) {
      HEXIR_RETURN_IF_ERROR(
          driver_.check(driver_.cuMemHostAlloc(&staging_[i], kStagingChunk, 0), "cuMemHostAlloc (staging)"));
      HEXIR_RETURN_IF_ERROR(driver_.check(driver_.cuEventCreate(&staging_events_[i], CU_EVENT_DISABLE_TIMING),
                                          "cuEventCreate"));
    }
    if (options_.cublas) {
      Result<const BlasLibrary*> blas = blas_library();
      if (blas.ok()) blas_ = *blas;  // else: the tiled kernel
    }
    return ok_status();
  }

  // The primary context, current on the calling thread (cheap when it already is).
  Status bind() const { return driver_.check(driver_.cuCtxSetCurrent(context_), "cuCtxSetCurrent"); }

  std::string_view name() const override { return name_; }

  Result<Buffer> allocate(uint64_t size, MemoryType type, BufferUsage usage, uint64_t alignment) override {
    (void)usage;
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      return invalid_argument("allocate: alignment " + std::to_string(alignment) + " is not a power of two");
    }
    HEXIR_RETURN_IF_ERROR(bind());
    // Over-allocate for alignments beyond what the driver guarantees; the base goes in impl.
    const uint64_t extra = alignment > kDeviceAlignment ? alignment : 0;
    const uint64_t bytes = std::max<uint64_t>(size, 1) + extra;
    if (bytes < size) return resource_exhausted("allocate: " + std::to_string(size) + " bytes is too large");
    Buffer buffer;
    buffer.size = size;
    CUdeviceptr base = 0;
    if (type == MemoryType::kHostVisible) {
      void* host = nullptr;
      HEXIR_RETURN_IF_ERROR(driver_.check(
          driver_.cuMemHostAlloc(&host, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
          "cuMemHostAlloc"));
      CUdeviceptr mapped = 0;
      if (Status s = driver_.check(driver_.cuMemHostGetDevicePointer_v2(&mapped, host, 0),
                                   "cuMemHostGetDevicePointer");
          !s.ok()) {
        driver_.cuMemFreeHost(host);
        return s;
      }
      base = mapped;
      buffer.memory_type = MemoryType::kHostVisible;
      const uint64_t pad = (alignment - mapped % alignment) % alignment;
      buffer.device_ptr = mapped + pad;
      buffer.host_ptr = static_cast<uint8_t*>(host) + pad;
      buffer.impl = host;
    } else if (type == MemoryType::kManaged || options_.managed) {
      HEXIR_RETURN_IF_ERROR(
          driver_.check(driver_.cuMemAllocManaged(&base, bytes, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged"));
      CUmemLocation location{};
      location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      location.id = options_.ordinal;
      // Preferred on the device, and resident there before the first kernel.
      Status advised = driver_.check(
          driver_.cuMemAdvise_v2(base, bytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, location), "cuMemAdvise");
      if (advised.ok() && concurrent_managed_) {
        advised = driver_.check(driver_.cuMemPrefetchAsync_v2(base, bytes, location, 0, sync_stream_),
                                "cuMemPrefetchAsync");
        if (advised.ok())
          advised = driver_.check(driver_.cuStreamSynchronize(sync_stream_), "cuStreamSynchronize");
      }
      if (!advised.ok()) {
        driver_.cuMemFree_v2(base);
        return advised;
      }
      buffer.memory_type = MemoryType::kManaged;
      buffer.device_ptr = (base + alignment - 1) & ~(CUdeviceptr(alignment) - 1);
      buffer.host_ptr = reinterpret_cast<void*>(buffer.device_ptr);
      buffer.impl = reinterpret_cast<void*>(base);
    } else {
      HEXIR_RETURN_IF_ERROR(driver_.check(driver_.cuMemAlloc_v2(&base, bytes), "cuMemAlloc"));
      buffer.memory_type = MemoryType::kDeviceLocal;
      buffer.device_ptr = (base + alignment - 1) & ~(CUdeviceptr(alignment) - 1);
      buffer.impl = reinterpret_cast<void*>(base);
    }
    counters_.allocations.fetch_add(1, std::memory_order_relaxed);
    counters_.bytes_allocated.fetch_add(size, std::memory_order_relaxed);
    if (buffer.memory_type == MemoryType::kHostVisible)
      counters_.host_visible_bytes_allocated.fetch_add(size, std::memory_order_relaxed);
    return buffer;
  }

  void release(Buffer& buffer) override {
    if (buffer.device_ptr == 0 && !buffer.imported) return;
    if (!buffer.imported && buffer.impl != nullptr && bind().ok()) {
      if (buffer.memory_type == MemoryType::kHostVisible) {
        driver_.cuMemFreeHost(buffer.impl);
      } else {
        driver_.cuMemFree_v2(reinterpret_cast<CUdeviceptr>(buffer.impl));
      }
      counters_.releases.fetch_add(1, std::memory_order_relaxed);
    }
    buffer = Buffer{};
  }

  // Caller memory is not device addressable here: the VM allocates and writes.
  Result<Buffer> import_host(void* host_ptr, uint64_t size, BufferUsage usage) override {
    (void)host_ptr;
    (void)size;
    (void)usage;
    return unimplemented(name_ + ": import_host is not supported; allocate and write()");
  }

  Status write(const Buffer& dst, uint64_t offset, const void* src, uint64_t size) override {
    HEXIR_RETURN_IF_ERROR(check_buffer_range(dst, offset, size, "write", /*host_memory=*/false));
    if (size > 0 && src == nullptr) return invalid_argument("write: null source");
    if (size > 0) {
      if (dst.memory_type == MemoryType::kHostVisible) {
        std::memcpy(static_cast<uint8_t*>(dst.host_ptr) + offset, src, size);
      } else {
        HEXIR_RETURN_IF_ERROR(staged_upload(dst.device_ptr + offset, static_cast<const uint8_t*>(src), size));
      }
    }
    counters_.uploads.fetch_add(1, std::memory_order_relaxed);
    counters_.bytes_uploaded.fetch_add(size, std::memory_order_relaxed);
    return ok_status();
  }

  Status read(const Buffer& src, uint64_t offset, void* dst, uint64_t size) override {
    HEXIR_RETURN_IF_ERROR(check_buffer_range(src, offset, size, "read", /*host_memory=*/false));
    if (size > 0 && dst == nullptr) return invalid_argument("read: null destination");
    if (size > 0) {
      if (src.memory_type == MemoryType::kHostVisible) {
        std::memcpy(dst, static_cast<const uint8_t*>(src.host_ptr) + offset, size);
      } else {
        HEXIR_RETURN_IF_ERROR(staged_download(static_cast<uint8_t*>(dst), src.device_ptr + offset, size));
      }
    }
    counters_.downloads.fetch_add(1, std::memory_order_relaxed);
    return ok_status();
  }

  Status fill(const Buffer& dst, uint64_t offset, uint64_t size, const void* pattern,
              uint32_t pattern_size) override {
    HEXIR_RETURN_IF_ERROR(check_fill(dst, offset, size, pattern, pattern_size, /*host_memory=*/false));
    if (size > 0) {
      const auto* bytes = static_cast<const uint8_t*>(pattern);
      if (dst.memory_type == MemoryType::kHostVisible) {
        host_fill(static_cast<uint8_t*>(dst.host_ptr) + offset, size, bytes, pattern_size);
      } else {
        HEXIR_RETURN_IF_ERROR(device_fill(dst.device_ptr + offset, size, bytes, pattern_size));
      }
    }
    counters_.fills.fetch_add(1, std::memory_order_relaxed);
    return ok_status();
  }

  // The kernel's host function (cuda_dispatch.cc's table) is the handle.
  Result<uintptr_t> resolve_kernel(const ops::KernelKey& key) override { return resolve_cuda_kernel(key); }

  Result<std::unique_ptr<Queue>> create_queue() override {
    HEXIR_RETURN_IF_ERROR(bind());
    CUstream stream = nullptr;
    HEXIR_RETURN_IF_ERROR(
        driver_.check(driver_.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
    std::unique_ptr<BlasHandle> blas;
    if (blas_ != nullptr) {
      Result<std::unique_ptr<BlasHandle>> handle = BlasHandle::create(driver_, *blas_, stream);
      if (handle.ok()) blas = std::move(handle).value();  // else: the tiled kernel
    }
    return std::unique_ptr<Queue>(std::make_unique<CudaQueue>(*this, stream, std::move(blas)));
  }

  DeviceCounters counters() const override { return counters_.snapshot(); }

  const Driver& driver() const { return driver_; }
  const CUfunction* functions() const { return functions_; }
  bool graphs() const { return options_.graphs; }
  AtomicCounters& atomic_counters() { return counters_; }

 private:
  // Host -> device through two pinned chunks: the copy of one overlaps the
  // memcpy into the other.
  Status staged_upload(CUdeviceptr dst, const uint8_t* src, uint64_t size) {
    std::lock_guard<std::mutex> lock(staging_mutex_);
    HEXIR_RETURN_IF_ERROR(bind());
    int b = 0;
    for (uint64_t done = 0; done < size; done += kStagingChunk, b ^= 1) {
      const uint64_t n = std::min(kStagingChunk, size - done);
      HEXIR_RETURN_IF_ERROR(
          driver_.check(driver_.cuEventSynchronize(staging_events_[b]), "cuEventSynchronize"));
      std::memcpy(staging_[b], src + done, n);
      HEXIR_RETURN_IF_ERROR(driver_.check(
          driver_.cuMemcpyHtoDAsync_v2(dst + done, staging_[b], n, sync_stream_), "cuMemcpyHtoDAsync"));
      HEXIR_RETURN_IF_ERROR(
          driver_.check(driver_.cuEventRecord(staging_events_[b], sync_stream_), "cuEventRecord"));
    }
    return driver_.check(driver_.cuStreamSynchronize(sync_stream_), "cuStreamSynchronize");
  }

  // Device -> host: chunk i+1 is copied while chunk i is memcpy'd out.
  Status staged_download(uint8_t* dst, CUdeviceptr src, uint64_t size) {
    std::lock_guard<std::mutex> lock(staging_mutex_);
    HEXIR_RETURN_IF_ERROR(bind());
    auto issue = [&](uint64_t done, int b) -> Status {
      const uint64_t n = std::min(kStagingChunk, size - done);
      HEXIR_RETURN_IF_ERROR(driver_.check(
          driver_.cuMemcpyDtoHAsync_v2(staging_[b], src + done, n, sync_stream_), "cuMemcpyDtoHAsync"));
      return driver_.check(driver_.cuEventRecord(staging_events_[b], sync_stream_), "cuEventRecord");
    };
    Status status = issue(0, 0);
    int b = 0;
    for (uint64_t done = 0; status.ok() && done < size; done += kStagingChunk, b ^= 1) {
      if (done + kStagingChunk < size) status = issue(done + kStagingChunk, b ^ 1);
      if (!status.ok()) break;
      status = driver_.check(driver_.cuEventSynchronize(staging_events_[b]), "cuEventSynchronize");
      if (status.ok()) std::memcpy(dst + done, staging_[b], std::min(kStagingChunk, size - done));
    }
    Status synced = driver_.check(driver_.cuStreamSynchronize(sync_stream_), "cuStreamSynchronize");
    return status.ok() ? synced : status;
  }

  Status device_fill(CUdeviceptr dst, uint64_t size, const uint8_t* bytes, uint32_t pattern_size) {
    std::lock_guard<std::mutex> lock(staging_mutex_);
    HEXIR_RETURN_IF_ERROR(bind());
    bool uniform = true;
    for (uint32_t i = 1; i < pattern_size; ++i) uniform = uniform && bytes[i] == bytes[0];
    CUresult r;
    if (uniform) {
      r = driver_.cuMemsetD8Async(dst, bytes[0], size, sync_stream_);
    } else if (pattern_size == 2 && dst % 2 == 0) {
      uint16_t v;
      std::memcpy(&v, bytes, 2);
      r = driver_.cuMemsetD16Async(dst, v, size / 2, sync_stream_);
    } else if (pattern_size == 4 && dst % 4 == 0) {
      uint32_t v;
      std::memcpy(&v, bytes, 4);
      r = driver_.cuMemsetD32Async(dst, v, size / 4, sync_stream_);
    } else {
      StreamLauncher launcher(driver_, functions_, sync_stream_, nullptr);
      HEXIR_RETURN_IF_ERROR(
          enqueue_pattern_fill(reinterpret_cast<void*>(dst), size, bytes, pattern_size, launcher));
      r = CUDA_SUCCESS;
    }
    HEXIR_RETURN_IF_ERROR(driver_.check(r, "cuMemset"));
    return driver_.check(driver_.cuStreamSynchronize(sync_stream_), "cuStreamSynchronize");
  }

  const Driver& driver_;
  DeviceOptions options_;
  std::string name_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  bool concurrent_managed_ = false;
  std::vector<CUmodule> modules_;
  CUfunction functions_[static_cast<size_t>(Kernel::kCount)] = {};
  CUstream sync_stream_ = nullptr;  // Device-level (synchronous) transfers and fills
  std::mutex staging_mutex_;
  void* staging_[2] = {nullptr, nullptr};
  CUevent staging_events_[2] = {nullptr, nullptr};
  const BlasLibrary* blas_ = nullptr;
  AtomicCounters counters_;
};

CudaQueue::CudaQueue(CudaDevice& device, CUstream stream, std::unique_ptr<BlasHandle> blas)
    : device_(device),
      driver_(device.driver()),
      stream_(stream),
      blas_(std::move(blas)),
      launcher_(device.driver(), device.functions(), stream, blas_.get()) {}

CudaQueue::~CudaQueue() {
  if (!device_.bind().ok()) return;
  driver_.cuStreamSynchronize(stream_);
  for (GraphEntry& entry : graphs_)
    if (entry.exec) driver_.cuGraphExecDestroy(entry.exec);
  blas_.reset();
  if (copy_stream_) {
    driver_.cuStreamSynchronize(copy_stream_);
    driver_.cuStreamDestroy_v2(copy_stream_);
  }
  for (CUevent e : copy_ready_) driver_.cuEventDestroy_v2(e);
  for (CUevent e : copy_done_) driver_.cuEventDestroy_v2(e);
  driver_.cuStreamDestroy_v2(stream_);
}

Status CudaQueue::dispatch(const Dispatch& dispatch) {
  if (dispatch.kernel == 0) return invalid_argument("dispatch: kernel handle is null (not resolved)");
  HEXIR_RETURN_IF_ERROR(device_.bind());
  count(1);
  return enqueue_dispatch(dispatch, launcher_);
}

Status CudaQueue::run_eagerly(std::span<const Dispatch> sequence, size_t* failed_index) {
  size_t k = 0;
  Status status;
  for (; k < sequence.size(); ++k) {
    const Dispatch& dispatch = sequence[k];
    status = dispatch.kernel == 0 ? invalid_argument("dispatch: kernel handle is null (not resolved)")
                                  : enqueue_dispatch(dispatch, launcher_);
    if (!status.ok()) break;
  }
  count(k + (status.ok() ? 0 : 1));
  if (!status.ok() && failed_index) *failed_index = k;
  return status;
}

// What identifies the captured work: the caller promises that the same
// sequence storage with equal bindings is the same work (Queue::dispatch_sequence),
// so the key is the storage and the bindings, never the dispatches themselves.
void CudaQueue::build_key(std::span<const Dispatch> sequence, std::span<void* const> bindings) {
  key_.clear();
  key_.push_back(reinterpret_cast<uintptr_t>(sequence.data()));
  key_.push_back(sequence.size());
  for (void* binding : bindings) key_.push_back(reinterpret_cast<uintptr_t>(binding));
}

Status CudaQueue::capture(std::span<const Dispatch> sequence, size_t* failed_index, CUgraphExec* out) {
  HEXIR_RETURN_IF_ERROR(driver_.check(
      driver_.cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture"));
  const uint64_t operations_before = launcher_.operations;
  size_t k = 0;
  Status status;
  for (; k < sequence.size(); ++k) {
    const Dispatch& dispatch = sequence[k];
    status = dispatch.kernel == 0 ? invalid_argument("dispatch: kernel handle is null (not resolved)")
                                  : enqueue_dispatch(dispatch, launcher_);
    if (!status.ok()) break;
  }
  CUgraph graph = nullptr;
  const CUresult ended = driver_.cuStreamEndCapture(stream_, &graph);
  if (!status.ok()) {
    // Nothing ran: run what came before the failure, as the cpu queue would have.
    if (graph) driver_.cuGraphDestroy(graph);
    size_t ignored = 0;
    Status before = run_eagerly(sequence.first(k), &ignored);
    count(1);
    if (failed_index) *failed_index = k;
    return before.ok() ? status : before;
  }
  HEXIR_RETURN_IF_ERROR(driver_.check(ended, "cuStreamEndCapture"));
  if (launcher_.operations == operations_before) {  // all no-ops (empty tensors): nothing to replay
    if (graph) driver_.cuGraphDestroy(graph);
    *out = nullptr;
    return ok_status();
  }
  const CUresult instantiated = driver_.cuGraphInstantiateWithFlags(out, graph, 0);
  driver_.cuGraphDestroy(graph);
  ++captures_;
  return driver_.check(instantiated, "cuGraphInstantiateWithFlags");
}

Status CudaQueue::dispatch_sequence(std::span<const Dispatch> sequence, std::span<void* const> bindings,
                                    size_t* failed_index) {
  HEXIR_RETURN_IF_ERROR(device_.bind());
  if (!device_.graphs() || sequence.empty()) return run_eagerly(sequence, failed_index);
  build_key(sequence, bindings);
  GraphEntry* hit = nullptr;
  for (GraphEntry& entry : graphs_)
    if (entry.key == key_) hit = &entry;
  if (hit == nullptr) {
    CUgraphExec exec = nullptr;
    HEXIR_RETURN_IF_ERROR(capture(sequence, failed_index, &exec));
    if (graphs_.size() == kGraphCacheEntries) {
      auto oldest =
          std::min_element(graphs_.begin(), graphs_.end(),
                           [](const GraphEntry& a, const GraphEntry& b) { return a.last_use < b.last_use; });
      if (oldest->exec) driver_.cuGraphExecDestroy(oldest->exec);
      graphs_.erase(oldest);
    }
    graphs_.push_back(GraphEntry{key_, exec, 0});
    hit = &graphs_.back();
  }
  hit->last_use = ++use_clock_;
  if (hit->exec)
    HEXIR_RETURN_IF_ERROR(driver_.check(driver_.cuGraphLaunch(hit->exec, stream_), "cuGraphLaunch"));
  count(sequence.size());
  return ok_status();
}

Status CudaQueue::copy(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset,
                       uint64_t size) {
  HEXIR_RETURN_IF_ERROR(check_buffer_range(dst, dst_offset, size, "copy destination", /*host_memory=*/false));
  HEXIR_RETURN_IF_ERROR(check_buffer_range(src, src_offset, size, "copy source", /*host_memory=*/false));
  if (size == 0) return ok_status();
  const CUdeviceptr d = dst.device_ptr + dst_offset, s = src.device_ptr + src_offset;
  if (d == s) return ok_status();
  if (d < s + size && s < d + size) {
    return unimplemented("copy: overlapping source and destination ranges are not supported on cuda");
  }
  HEXIR_RETURN_IF_ERROR(device_.bind());
  return driver_.check(driver_.cuMemcpyAsync(d, s, size, stream_), "cuMemcpyAsync");
}

Status CudaQueue::reserve_copy_fences(uint32_t count) {
  if (count <= copy_done_.size()) return ok_status();
  HEXIR_RETURN_IF_ERROR(device_.bind());
  if (!copy_stream_)
    HEXIR_RETURN_IF_ERROR(
        driver_.check(driver_.cuStreamCreate(&copy_stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  while (copy_done_.size() < count) {
    CUevent ready = nullptr, done = nullptr;
    HEXIR_RETURN_IF_ERROR(driver_.check(driver_.cuEventCreate(&ready, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
    copy_ready_.push_back(ready);
    HEXIR_RETURN_IF_ERROR(driver_.check(driver_.cuEventCreate(&done, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
    copy_done_.push_back(done);
  }
  return ok_status();
}

Status CudaQueue::copy_begin(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset,
                             uint64_t size, uint32_t fence) {
  if (fence >= copy_done_.size() || !copy_stream_) return copy(dst, dst_offset, src, src_offset, size);
  HEXIR_RETURN_IF_ERROR(check_buffer_range(dst, dst_offset, size, "copy destination", /*host_memory=*/false));
  HEXIR_RETURN_IF_ERROR(check_buffer_range(src, src_offset, size, "copy source", /*host_memory=*/false));
  HEXIR_RETURN_IF_ERROR(device_.bind());
  // After the work before it (its source is written, its destination free)...
  HEXIR_RETURN_IF_ERROR(driver_.check(driver_.cuEventRecord(copy_ready_[fence], stream_), "cuEventRecord"));
  HEXIR_RETURN_IF_ERROR(
      driver_.check(driver_.cuStreamWaitEvent(copy_stream_, copy_ready_[fence], 0), "cuStreamWaitEvent"));
  if (size > 0)
    HEXIR_RETURN_IF_ERROR(driver_.check(
        driver_.cuMemcpyAsync(dst.device_ptr + dst_offset, src.device_ptr + src_offset, size, copy_stream_),
        "cuMemcpyAsync"));
  // ...and before whatever copy_wait(fence) precedes.
  return driver_.check(driver_.cuEventRecord(copy_done_[fence], copy_stream_), "cuEventRecord");
}

Status CudaQueue::copy_wait(uint32_t fence) {
  if (fence >= copy_done_.size() || !copy_stream_) return ok_status();
  HEXIR_RETURN_IF_ERROR(device_.bind());
  return driver_.check(driver_.cuStreamWaitEvent(stream_, copy_done_[fence], 0), "cuStreamWaitEvent");
}

Status CudaQueue::synchronize() {
  HEXIR_RETURN_IF_ERROR(device_.bind());
  Status status = driver_.check(driver_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  const uint64_t count = dispatch_count_.load(std::memory_order_relaxed);
  device_.atomic_counters().dispatches.fetch_add(count - reported_dispatches_, std::memory_order_relaxed);
  reported_dispatches_ = count;
  return status;
}

}  // namespace

Result<std::unique_ptr<Device>> create_cuda_device(std::string_view name) {
  HEXIR_ASSIGN_OR_RETURN(DeviceOptions options, parse_name(name));
  HEXIR_ASSIGN_OR_RETURN(const Driver* driver, driver());
  auto device = std::make_unique<CudaDevice>(*driver, options);
  HEXIR_RETURN_IF_ERROR(device->init());
  return std::unique_ptr<Device>(std::move(device));
}

std::vector<DeviceDescription> list_cuda_devices() {
  std::vector<DeviceDescription> out;
  Result<const Driver*> loaded = driver();
  if (!loaded.ok()) {
    out.push_back({"cuda", false, loaded.status().message()});
    return out;
  }
  const Driver& d = **loaded;
  int count = 0;
  if (Status s = d.check(d.cuDeviceGetCount(&count), "cuDeviceGetCount"); !s.ok() || count == 0) {
    out.push_back({"cuda", false, s.ok() ? std::string("no CUDA devices") : s.message()});
    return out;
  }
  for (int i = 0; i < count; ++i) {
    CUdevice device = 0;
    char name[256] = {};
    size_t memory = 0;
    int major = 0, minor = 0;
    if (d.cuDeviceGet(&device, i) != CUDA_SUCCESS) continue;
    d.cuDeviceGetName(name, sizeof(name) - 1, device);
    d.cuDeviceTotalMem_v2(&memory, device);
    d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    std::string details = std::string(name) + ", " + format_gib(memory) + ", compute capability " +
                          std::to_string(major) + "." + std::to_string(minor) + ", driver " +
                          std::to_string(d.version / 1000) + "." + std::to_string(d.version % 1000 / 10);
    const bool usable = major >= 8;
    if (!usable) details += " (needs compute capability 8.0+)";
    out.push_back({"cuda:" + std::to_string(i), usable, details});
    out.push_back({"cuda-managed:" + std::to_string(i), usable, details + ", managed memory"});
  }
  return out;
}

}  // namespace hexir::hal::cuda
