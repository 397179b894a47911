// AVX-512 VNNI for the 8-bit kernels (quantized_conv.cc, integer_matmul.cc).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace hexir::hal::cpu::internal {

// sum += the products of a's u8 and w's int8 quadruples, per 32-bit lane, in
// place. An asm statement, not _mm512_dpbusd_epi32: with the intrinsic GCC 12
// copies each accumulator of a register tile through a scratch register and
// stores it to the stack every step (quantized_conv2d's 6 x 64 tile ran at a
// third of the speed).
[[gnu::target("avx512f,avx512vnni"), gnu::always_inline]] inline void dpbusd(__m512i& sum, __m512i a, __m512i w) {
  asm("vpdpbusd %2, %1, %0" : "+v"(sum) : "v"(a), "v"(w));
}

}  // namespace hexir::hal::cpu::internal
#endif
