// The cpu backend: host memory from the C allocator and the builtin kernels,
// run synchronously on the calling thread.
#pragma once

#include <memory>

#include "hexir/hal/device.h"

namespace hexir::hal::cpu {

// Creates the cpu Device. It holds no mutable state besides atomic counters,
// so one device may serve several threads, each with its own Queue.
std::unique_ptr<Device> create_cpu_device();

}  // namespace hexir::hal::cpu
