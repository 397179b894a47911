#include "hexir/hal/device.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "cpu/cpu_device.h"
#include "cuda/cuda_device.h"

namespace hexir::hal {

DeviceCounters AtomicCounters::snapshot() const {
  constexpr auto kOrder = std::memory_order_relaxed;
  DeviceCounters c;
  c.allocations = allocations.load(kOrder);
  c.releases = releases.load(kOrder);
  c.bytes_allocated = bytes_allocated.load(kOrder);
  c.host_visible_bytes_allocated = host_visible_bytes_allocated.load(kOrder);
  c.uploads = uploads.load(kOrder);
  c.bytes_uploaded = bytes_uploaded.load(kOrder);
  c.downloads = downloads.load(kOrder);
  c.fills = fills.load(kOrder);
  c.dispatches = dispatches.load(kOrder);
  return c;
}

Status check_buffer_range(const Buffer& buffer, uint64_t offset, uint64_t size, const char* what,
                          bool host_memory) {
  if (offset > buffer.size || size > buffer.size - offset)
    return invalid_argument(std::string(what) + ": range [" + std::to_string(offset) + ", +" +
                            std::to_string(size) + ") is outside a buffer of " + std::to_string(buffer.size) +
                            " bytes");
  if (size > 0 && (host_memory ? buffer.host_ptr == nullptr : buffer.device_ptr == 0))
    return invalid_argument(std::string(what) + ": buffer has no memory");
  return ok_status();
}

Status check_fill(const Buffer& buffer, uint64_t offset, uint64_t size, const void* pattern,
                  uint32_t pattern_size, bool host_memory) {
  if (pattern == nullptr || pattern_size < 1 || pattern_size > 16)
    return invalid_argument("fill: pattern must be 1..16 bytes, got " + std::to_string(pattern_size));
  if (size % pattern_size != 0)
    return invalid_argument("fill: size " + std::to_string(size) + " is not a multiple of the " +
                            std::to_string(pattern_size) + "-byte pattern");
  return check_buffer_range(buffer, offset, size, "fill", host_memory);
}

Status no_kernel(std::string_view backend, const ops::KernelKey& key) {
  if (static_cast<int>(key.op) >= ops::kOpCount)
    return unimplemented(std::string(backend) + ": no operator with id " +
                         std::to_string(static_cast<int>(key.op)));
  const ops::OpDef& def = ops::op_def(key.op);
  if (def.is_view)
    return unimplemented(std::string(backend) + ": '" + def.name + "' is a view and is never dispatched");
  return unimplemented(std::string(backend) + ": no kernel for '" + def.name + "' on " +
                       dtype_name(key.input) + " -> " + dtype_name(key.output));
}

namespace {

// True for `prefix` alone or `prefix:N` with N a decimal device ordinal.
bool matches_device_name(std::string_view name, std::string_view prefix) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  std::string_view rest = name.substr(prefix.size());
  if (rest.empty()) return true;
  if (rest[0] != ':' || rest.size() < 2 || rest.size() > 10) return false;
  for (char c : rest.substr(1)) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

namespace {

// "threads=N" (1..1024) and "pack_weights=0|1" after "cpu?", '&' between
// them, each at most once.
Status parse_cpu_options(std::string_view options, DeviceOptions& out) {
  bool seen_threads = false, seen_pack_weights = false;
  while (!options.empty()) {
    const std::string_view item = options.substr(0, options.find('&'));
    options.remove_prefix(std::min(options.size(), item.size() + 1));
    const std::string_view key = item.substr(0, item.find('='));
    bool* seen = key == "threads" ? &seen_threads : key == "pack_weights" ? &seen_pack_weights : nullptr;
    if (seen && std::exchange(*seen, true))
      return invalid_argument("cpu option '" + std::string(key) + "' given twice");
    if (item == "pack_weights=0" || item == "pack_weights=1") {
      out.pack_weights = item.back() == '1';
      continue;
    }
    if (item.substr(0, 8) != "threads=")
      return invalid_argument("unknown cpu option '" + std::string(item) +
                              "' (cpu takes threads=N and pack_weights=0|1)");
    const std::string_view digits = item.substr(8);
    int value = 0;
    bool ok = !digits.empty() && digits.size() <= 4;
    for (char c : digits) {
      ok = ok && std::isdigit(static_cast<unsigned char>(c));
      value = value * 10 + (c - '0');
    }
    if (!ok || value < 1 || value > 1024)
      return invalid_argument("cpu option threads='" + std::string(digits) + "' is not a number from 1 to 1024");
    out.threads = value;
  }
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<Device>> create_device(std::string_view name, const DeviceOptions& options) {
  // The C API's char* would end at it; a C++ caller's name must read the same.
  if (const size_t nul = name.find('\0'); nul != std::string_view::npos)
    return invalid_argument("device name '" + std::string(name.substr(0, nul)) +
                            "' holds a NUL character at offset " + std::to_string(nul));
  if (options.threads < 0 || options.threads > 1024)
    return invalid_argument("DeviceOptions::threads " + std::to_string(options.threads) + " is not in 0..1024");
  if (name == "cpu") return cpu::create_cpu_device(options.threads, options.pack_weights);
  if (name.substr(0, 4) == "cpu?") {
    DeviceOptions parsed = options;
    HEXIR_RETURN_IF_ERROR(parse_cpu_options(name.substr(4), parsed));
    return cpu::create_cpu_device(parsed.threads, parsed.pack_weights);
  }
  // CUDA names may carry options after '?' ("cuda:0?graphs=off").
  const std::string_view base = name.substr(0, name.find('?'));
  if (matches_device_name(base, "cuda") || matches_device_name(base, "cuda-managed")) {
#ifdef HEXIR_HAVE_CUDA
    return cuda::create_cuda_device(name);
#else
    return unavailable(
        "CUDA backend not built: this libhexir was configured without nvcc or with "
        "-Dcuda=disabled (device '" +
        std::string(name) + "')");
#endif
  }
  return invalid_argument("unknown device '" + std::string(name) +
                          "'; valid names: cpu, cuda, cuda:N, cuda-managed, cuda-managed:N");
}

std::vector<DeviceDescription> list_devices() {
  std::vector<DeviceDescription> out;
  out.push_back({"cpu", true, "host memory, builtin C++ kernels"});
#ifdef HEXIR_HAVE_CUDA
  for (DeviceDescription& d : cuda::list_cuda_devices()) out.push_back(std::move(d));
#else
  out.push_back(
      {"cuda", false,
       "CUDA backend not built: this libhexir was configured without nvcc or with -Dcuda=disabled"});
#endif
  return out;
}

}  // namespace hexir::hal
