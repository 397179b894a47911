#include "cpu_isa.h"

#include <cstdlib>
#include <cstring>

namespace hexir::hal::cpu::internal {
namespace {

CpuIsa detect() {
  CpuIsa isa = CpuIsa::kPortable;
#if defined(__x86_64__) && defined(__GNUC__)
  // AVX-512 kernels use the 256-bit FMA too (every AVX-512 core has it).
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    isa = CpuIsa::kAvx512;
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    isa = CpuIsa::kAvx2;
#elif defined(__aarch64__)
  isa = CpuIsa::kNeon;  // Advanced SIMD is part of the base ARMv8-A ISA
#endif
  // A cap, never more than the CPU has; any other value is no cap.
  if (const char* cap = std::getenv("HEXIR_MAX_CPU_ISA")) {
    if (std::strcmp(cap, "avx2") == 0 && isa == CpuIsa::kAvx512) isa = CpuIsa::kAvx2;
    if (std::strcmp(cap, "portable") == 0) isa = CpuIsa::kPortable;
  }
  return isa;
}

}  // namespace

CpuIsa cpu_isa() {
  static const CpuIsa isa = detect();
  return isa;
}

bool isa_avx512_bw_vl() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool bw_vl = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return bw_vl && isa_avx512();
#else
  return false;
#endif
}

bool isa_avx512_vnni() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool vnni = __builtin_cpu_supports("avx512vnni");
  return vnni && isa_avx512_bw_vl();
#else
  return false;
#endif
}

}  // namespace hexir::hal::cpu::internal
