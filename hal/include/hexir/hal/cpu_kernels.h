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

// A kernel's optional prepare step (Device::prepare_dispatch): `bytes` says
// how much it derives from the dispatch's constant operands (null operands
// are not constants; 0: nothing), `fill` writes it, 64-byte aligned. The
// kernel finds it as Dispatch::prepared and gives the same results without it.
// `key` (optional) writes what `bytes` and `fill` read of the plan, at most
// kMaxPrepareKeyWords words, and returns how many: two dispatches of the
// kernel on the same constants with equal words get the same bytes, so a
// program prepares once for both (Device::prepare_key). Null: the whole plan.
inline constexpr uint32_t kMaxPrepareKeyWords = 8;
struct KernelPrepare {
  uint64_t (*bytes)(const Dispatch& constants);
  void (*fill)(const Dispatch& constants, void* out);
  uint32_t replaces;  // a bit per input the kernel no longer reads once prepared
  uint32_t (*key)(const Dispatch& constants, uint64_t* words);
};
// The prepare step registered for `kernel`; null when it has none.
const KernelPrepare* find_cpu_prepare(KernelFn kernel);

}  // namespace hexir::hal::cpu
