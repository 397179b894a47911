// The builtin CPU kernels, callable directly (the VM-overhead benchmark and
// kernel tests do) or through the cpu Device.
#pragma once

#include "hexir/base/status.h"
#include "hexir/hal/device.h"

namespace hexir::hal::cpu {

using KernelFn = Status (*)(const DispatchArgs& args);

// One entry per ops::OpId; null for views (reshape), which are never dispatched.
KernelFn kernel_function(ops::OpId id);

}  // namespace hexir::hal::cpu
