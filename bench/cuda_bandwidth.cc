// cuda_bandwidth [MiB] [repeats]
// Host <-> device copy bandwidth on cuda:0, straight through the driver table:
// pageable (malloc) vs pinned (cuMemHostAlloc) memory, and the HAL's staged
// Device::write/read (pageable source through two pinned chunks), which is how
// the VM uploads constants and hexir-run uploads inputs. Prints one
// "name GB/s" line per measurement (the median of the repeats).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cuda/cuda_driver.h"
#include "hexir/hal/device.h"

namespace {

using Clock = std::chrono::steady_clock;

double median_gbps(uint64_t bytes, int repeats, const std::function<bool()>& copy) {
  std::vector<double> rates;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    if (!copy()) return -1.0;
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    rates.push_back(static_cast<double>(bytes) / seconds / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

int fail(const std::string& message) {
  std::fprintf(stderr, "cuda_bandwidth: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  const uint64_t bytes = mib << 20;
  auto loaded = hexir::hal::cuda::driver();
  if (!loaded.ok()) return fail(loaded.status().message());
  const hexir::hal::cuda::Driver& d = **loaded;
  CUdevice device;
  CUcontext context;
  if (d.cuDeviceGet(&device, 0) != CUDA_SUCCESS ||
      d.cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS ||
      d.cuCtxSetCurrent(context) != CUDA_SUCCESS)
    return fail("cannot open cuda:0");
  CUdeviceptr dev = 0;
  void* pinned = nullptr;
  if (d.cuMemAlloc_v2(&dev, bytes) != CUDA_SUCCESS || d.cuMemHostAlloc(&pinned, bytes, 0) != CUDA_SUCCESS)
    return fail("cannot allocate " + std::to_string(mib) + " MiB");
  std::vector<uint8_t> pageable(bytes, 1);
  std::memset(pinned, 1, bytes);
  CUstream stream;
  d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);

  std::printf("# %llu MiB, median of %d\n", static_cast<unsigned long long>(mib), repeats);
  auto report = [](const char* name, double gbps) { std::printf("%-28s %8.2f GB/s\n", name, gbps); };
  report("htod_pageable", median_gbps(bytes, repeats, [&] {
           return d.cuMemcpyHtoD_v2(dev, pageable.data(), bytes) == CUDA_SUCCESS;
         }));
  report("htod_pinned", median_gbps(bytes, repeats, [&] {
           return d.cuMemcpyHtoDAsync_v2(dev, pinned, bytes, stream) == CUDA_SUCCESS &&
                  d.cuStreamSynchronize(stream) == CUDA_SUCCESS;
         }));
  report("dtoh_pageable", median_gbps(bytes, repeats, [&] {
           return d.cuMemcpyDtoH_v2(pageable.data(), dev, bytes) == CUDA_SUCCESS;
         }));
  report("dtoh_pinned", median_gbps(bytes, repeats, [&] {
           return d.cuMemcpyDtoHAsync_v2(pinned, dev, bytes, stream) == CUDA_SUCCESS &&
                  d.cuStreamSynchronize(stream) == CUDA_SUCCESS;
         }));

  auto hal = hexir::hal::create_device("cuda:0");
  if (!hal.ok()) return fail(hal.status().message());
  auto buffer =
      (*hal)->allocate(bytes, hexir::hal::MemoryType::kDeviceLocal, hexir::hal::BufferUsage::kTransfer);
  if (!buffer.ok()) return fail(buffer.status().message());
  report("hal_write_staged",
         median_gbps(bytes, repeats, [&] { return (*hal)->write(*buffer, 0, pageable.data(), bytes).ok(); }));
  report("hal_read_staged",
         median_gbps(bytes, repeats, [&] { return (*hal)->read(*buffer, 0, pageable.data(), bytes).ok(); }));
  (*hal)->release(*buffer);

  d.cuCtxSetCurrent(context);
  d.cuStreamDestroy_v2(stream);
  d.cuMemFreeHost(pinned);
  d.cuMemFree_v2(dev);
  d.cuDevicePrimaryCtxRelease_v2(device);
  return 0;
}
