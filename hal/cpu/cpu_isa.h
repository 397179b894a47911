// The vector ISA the CPU kernels take: the widest the CPU has, capped by the
// environment variable HEXIR_MAX_CPU_ISA (`avx512`, `avx2` or `portable`;
// oneDNN's ONEDNN_MAX_CPU_ISA does the same) so that one machine runs and
// tests every path: the suite runs the HAL's tests again under each cap.
// On aarch64 the levels are `neon` (Advanced SIMD, in every ARMv8-A core)
// and `portable`. Read once per process, at the first kernel call (not in an
// ifunc resolver, which runs before sanitizer runtimes start). Prepared
// layouts depend on it; it cannot change while a process runs.
#pragma once

// A vector kernel body without UBSan's checks under clang (the sanitizer
// build; ASan still checks every access): the checks on each unrolled vector
// step made channels_last.cc take clang 20 minutes (docs/hardening.md).
#if defined(__clang__)
#define HEXIR_KERNEL_NO_UBSAN __attribute__((no_sanitize("undefined")))
#else
#define HEXIR_KERNEL_NO_UBSAN
#endif

namespace hexir::hal::cpu::internal {

// AVX2 means AVX2 + FMA. kNeon is not above the x86 levels: no order across
// architectures, so each test below names its levels.
enum class CpuIsa { kPortable = 0, kAvx2 = 1, kAvx512 = 2, kNeon = 3 };

CpuIsa cpu_isa();
inline bool isa_avx512() { return cpu_isa() == CpuIsa::kAvx512; }
inline bool isa_avx2() { return cpu_isa() == CpuIsa::kAvx2 || cpu_isa() == CpuIsa::kAvx512; }
inline bool isa_neon() { return cpu_isa() == CpuIsa::kNeon; }
// AVX-512 with its byte/word instructions and their 128/256-bit forms
// (AVX512BW + VL: every AVX-512 core but Knights Landing), and with VNNI
// (vpdpbusd): what the 8-bit kernels use.
bool isa_avx512_bw_vl();
bool isa_avx512_vnni();

}  // namespace hexir::hal::cpu::internal
