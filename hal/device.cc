#include "hexir/hal/device.h"

#include <cctype>

#include "cpu/cpu_device.h"

namespace hexir::hal {

DeviceCounters AtomicCounters::snapshot() const {
  constexpr auto kOrder = std::memory_order_relaxed;
  DeviceCounters c;
  c.allocations = allocations.load(kOrder);
  c.releases = releases.load(kOrder);
  c.bytes_allocated = bytes_allocated.load(kOrder);
  c.uploads = uploads.load(kOrder);
  c.bytes_uploaded = bytes_uploaded.load(kOrder);
  c.downloads = downloads.load(kOrder);
  c.fills = fills.load(kOrder);
  c.dispatches = dispatches.load(kOrder);
  return c;
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

Result<std::unique_ptr<Device>> create_device(std::string_view name) {
  if (name == "cpu") return cpu::create_cpu_device();
  if (matches_device_name(name, "cuda") || matches_device_name(name, "cuda-managed")) {
    return unavailable("device '" + std::string(name) + "': CUDA backend not built in this version");
  }
  return invalid_argument("unknown device '" + std::string(name) +
                          "'; valid names: cpu, cuda, cuda:N, cuda-managed, cuda-managed:N");
}

}  // namespace hexir::hal
