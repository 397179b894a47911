// The cpu backend: host memory from the C allocator and the builtin kernels,
// run synchronously on the calling thread with a thread pool per queue.
#pragma once

#include <memory>

#include "hexir/hal/device.h"

namespace hexir::hal::cpu {

// Creates the cpu Device. It holds no mutable state besides atomic counters,
// so one device may serve several threads, each with its own Queue. Each
// queue starts `threads` - 1 worker threads (0: one per available core).
std::unique_ptr<Device> create_cpu_device(int threads = 0, bool pack_weights = true);

}  // namespace hexir::hal::cpu
