// The cuda and cuda-managed backends (see docs/cuda.md). Free of CUDA
// headers so hal/device.cc can include it in every build.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "hexir/hal/device.h"

namespace hexir::hal::cuda {

// `name` is "cuda[:N]" or "cuda-managed[:N]", optionally followed by
// "?graphs=on|off" and/or "cublas=on|off" joined with '&' or ','. A missing
// driver or device is kUnavailable ("CUDA driver not available: ...").
Result<std::unique_ptr<Device>> create_cuda_device(std::string_view name);

// One entry per CUDA device and memory mode, or a single unavailable "cuda"
// entry giving the reason.
std::vector<DeviceDescription> list_cuda_devices();

}  // namespace hexir::hal::cuda
