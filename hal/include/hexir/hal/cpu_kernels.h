// The builtin CPU kernels, callable directly (the VM-overhead benchmark and
// kernel tests do) or through the cpu Device.
#pragma once

#include "hexir/base/status.h"
#include "hexir/hal/device.h"

namespace hexir::hal::cpu {

// A kernel computes from its dispatch's plan and pointers; it never validates.
using KernelFn = Status (*)(const KernelContext& context, const Dispatch& dispatch);

// The kernel registered for `key`; null when there is none (views never have one).
KernelFn find_cpu_kernel(const ops::KernelKey& key);

}  // namespace hexir::hal::cpu
