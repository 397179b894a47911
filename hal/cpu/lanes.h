// Vector lanes written once for every ISA. A kernel's loop is a template over
// the lane count N, written with GCC/Clang vector types (F32<N>: N floats)
// and the always-inline helpers below; `widest<Kernel>(args...)` runs it
// inside a function compiled for the running CPU's widest ISA (N = 16 under
// AVX-512, 8 under AVX2 + FMA, 4 elsewhere: SSE2 on x86-64, NEON on ARM), so
// one source gives every path.
//
// The helpers are IEEE adds, multiplies, divisions, compares and bit steps
// (hal compiles with -ffp-contract=off, so a * b + c stays two roundings), in
// the order of the scalar maps in ops/plans.h: every lane count gives the bits
// of ops::*_of, and a scalar tail loop calling them finishes a row.
#pragma once

#include <cstdint>
#include <cstring>

#include "cpu_isa.h"
#include "hexir/ops/plans.h"


// Always inlined into the ISA's function (never called: hal builds with
// -Wno-psabi, GCC's note that a vector argument's ABI differs without AVX).
// Without UBSan's checks (cpu_isa.h, HEXIR_KERNEL_NO_UBSAN); UBSan keeps the
// scalar code, tails and plans.
#define HEXIR_LANES inline __attribute__((always_inline)) HEXIR_KERNEL_NO_UBSAN

namespace hexir::hal::cpu::internal::lanes {

template <int N>
struct Types {
  typedef float F __attribute__((vector_size(4 * N)));
  typedef int32_t I __attribute__((vector_size(4 * N)));
  typedef uint32_t U __attribute__((vector_size(4 * N)));
};
template <int N>
using F32 = typename Types<N>::F;
template <int N>
using I32 = typename Types<N>::I;  // a compare's result: all ones where true
template <int N>
using U32 = typename Types<N>::U;

template <int N>
HEXIR_LANES F32<N> load(const float* p) {
  F32<N> v;
  std::memcpy(&v, p, sizeof v);  // unaligned
  return v;
}
template <int N>
HEXIR_LANES void store(float* p, F32<N> v) {
  std::memcpy(p, &v, sizeof v);
}
template <int N>
HEXIR_LANES F32<N> splat(float x) {
  return F32<N>{} + x;
}
// x in every lane as it is (-0 stays -0), one broadcast instruction: for a
// kernel's inner loop, where splat's add to zeros is an instruction more.
template <int N>
HEXIR_LANES F32<N> broadcast(float x) {
  F32<N> v;
  for (int i = 0; i < N; ++i) v[i] = x;
  return v;
}
template <int N>
HEXIR_LANES F32<N> zero() {
  return F32<N>{};
}
// `mask ? a : b` per lane (mask from a compare).
template <int N>
HEXIR_LANES F32<N> select(I32<N> mask, F32<N> a, F32<N> b) {
  return mask ? a : b;
}
// v kept in a register where it is: an optimization barrier, so GCC does
// not fold the load that made v into each instruction reading it (a
// memory-operand FMA per use: a load per product, where the load ports and
// not the FMAs then bound a tile that reuses its inputs).
// GCC only: Clang checks the operand's size against the template's own
// (baseline) target and refuses a 256- or 512-bit vector; its builds (the
// sanitizer legs) do without the barrier.
template <class V>
HEXIR_LANES void in_register(V& v) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  asm("" : "+v"(v));
#elif defined(__aarch64__) && defined(__GNUC__) && !defined(__clang__)
  asm("" : "+w"(v));
#else
  (void)v;
#endif
}
// a * b + c rounded once (fmaf per lane): the FMA instruction of the lane
// count's ISA (widest() compiles N = 16 for AVX-512 and N = 8 for AVX2 + FMA;
// NEON has it); elsewhere (SSE2) glibc's fmaf lane by lane.
template <int N>
HEXIR_LANES F32<N> fma(F32<N> a, F32<N> b, F32<N> c) {
  // Lane by lane: GCC turns the N fmaf into one vfmadd (zmm, ymm) or fmla
  // once inlined into the ISA's function (an intrinsic cannot be inlined
  // into these target-less templates).
  F32<N> out;
  for (int i = 0; i < N; ++i) out[i] = __builtin_fmaf(a[i], b[i], c[i]);
  return out;
}
// x86's maxps: the second operand where either is NaN.
template <int N>
HEXIR_LANES F32<N> max(F32<N> a, F32<N> b) {
  return a > b ? a : b;
}
template <int N>
HEXIR_LANES U32<N> bits(F32<N> v) {
  return (U32<N>)v;  // a vector cast keeps the bits
}
template <int N>
HEXIR_LANES F32<N> from_bits(U32<N> u) {
  return (F32<N>)u;
}
template <int N>
HEXIR_LANES float max_of(F32<N> v) {
  float m = v[0];
  for (int i = 1; i < N; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

// ---- the scalar maps of ops/plans.h, per lane, the same bits ------------------

template <int N>
HEXIR_LANES F32<N> relu(F32<N> x) {  // relu_of: NaN stays NaN (x <= 0 is false), -0 gives +0
  return select<N>(x <= zero<N>(), zero<N>(), x);
}
template <int N>
HEXIR_LANES F32<N> leaky_relu(F32<N> x, float alpha) {  // leaky_relu_of
  return select<N>(x < zero<N>(), splat<N>(alpha) * x, x);
}
template <int N>
HEXIR_LANES F32<N> clip(F32<N> x, float lo, float hi) {  // clip_of
  const F32<N> v = select<N>(x < splat<N>(lo), splat<N>(lo), x);
  return select<N>(v > splat<N>(hi), splat<N>(hi), v);
}
template <int N>
HEXIR_LANES F32<N> clamp01(F32<N> v) {  // ops::clamp01
  return select<N>(v < zero<N>(), zero<N>(), select<N>(v > splat<N>(1.0f), splat<N>(1.0f), v));
}
template <int N>
HEXIR_LANES F32<N> hard_sigmoid(F32<N> x, float alpha, float beta) {
  return clamp01<N>(splat<N>(alpha) * x + beta);
}
template <int N>
HEXIR_LANES F32<N> hard_swish(F32<N> x) {
  return x * clamp01<N>(x * (1.0f / 6.0f) + 0.5f);
}

template <int N>
HEXIR_LANES F32<N> erf(F32<N> v) {  // erf_of
  const F32<N> x = select<N>(v < splat<N>(-4.0f), splat<N>(-4.0f), select<N>(v > splat<N>(4.0f), splat<N>(4.0f), v));
  const F32<N> x2 = x * x;
  F32<N> p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
  p = x2 * p + -2.10102402082508e-06f;
  p = x2 * p + -5.69250639462346e-05f;
  p = x2 * p + -7.34990630326855e-04f;
  p = x2 * p + -2.95459980854025e-03f;
  p = x2 * p + -1.60960333262415e-02f;
  p = x * p;
  F32<N> q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
  q = x2 * q + -1.68282697438203e-03f;
  q = x2 * q + -7.37332916720468e-03f;
  q = x2 * q + -1.42647390514189e-02f;
  return p / q;
}
template <int N>
HEXIR_LANES F32<N> gelu_erf(F32<N> x) {
  return 0.5f * x * (1.0f + erf<N>(x * 0.70710678118654752f));
}

// exp_of's steps for x already clamped: n = x / ln2 rounded (in `shifted`'s
// low bits: bits(shifted) - 0x4B400000 is n) and the polynomial's y =
// exp(x - n ln2); exp(x) is y * 2^n.
template <int N>
HEXIR_LANES F32<N> exp_reduced(F32<N> x, F32<N>* shifted) {
  *shifted = fma<N>(x, splat<N>(1.44269504088896341f), splat<N>(12582912.0f));
  const F32<N> n = *shifted - 12582912.0f;
  F32<N> r = fma<N>(n, splat<N>(-0.693359375f), x);
  r = fma<N>(n, splat<N>(2.12194440e-4f), r);
  F32<N> y = fma<N>(splat<N>(1.9875691500e-4f), r, splat<N>(1.3981999507e-3f));
  y = fma<N>(y, r, splat<N>(8.3334519073e-3f));
  y = fma<N>(y, r, splat<N>(4.1665795894e-2f));
  y = fma<N>(y, r, splat<N>(1.6666665459e-1f));
  y = fma<N>(y, r, splat<N>(5.0000001201e-1f));
  return fma<N>(y * r, r, r) + 1.0f;
}
// exp_of. At or below -104 exp_of is +0 (its clamp, then an underflow): such
// lanes are computed from 0 instead and replaced by 0 at the end, since the
// clamped value's scaling by 2^-150 is a subnormal multiply, which takes a
// microcode assist on x86 for the whole vector: softmax rows with causal or
// padding masks (finfo.min, -inf, -1e4 added) ran at 1.75x the unmasked time.
template <int N>
HEXIR_LANES F32<N> exp(F32<N> v) {
  const I32<N> under = v <= splat<N>(-104.0f);
  const F32<N> x = select<N>(under, zero<N>(), select<N>(v > splat<N>(89.0f), splat<N>(89.0f), v));
  F32<N> shifted;
  const F32<N> y = exp_reduced<N>(x, &shifted);
  // 2^n as two halves: m = n + 150 in [0, 278], 2^(m/2 - 75) * 2^(m - m/2 - 75).
  const U32<N> m = bits<N>(shifted) - (0x4B400000u - 150u);
  const U32<N> half = m >> 1;
  return select<N>(under, zero<N>(), y * from_bits<N>((half + 52u) << 23) * from_bits<N>((m - half + 52u) << 23));
}
// sigmoid_of and silu_of: exp_of(-x)'s bits where they matter, fewer steps.
// 1 + exp(a) is 1 for every exp(a) at or below 2^-24, so a is raised to -17
// where it is lower (exp(-17) = 4.1e-8): the same sums. Then 2^n, n in
// [-25, 128], is 2^(n - 1) (a normal float from its exponent bits) times 2:
// two exact multiplies by powers of two, as exp_of's two halves of the
// scale, where exp_of's full range takes seven integer steps and its
// underflow lanes three more (its subnormal multiplies take an assist on
// x86: the raised argument keeps them out too; silu on [14, 14, 960] with
// |x| near 60 ran 0.047 -> 0.116 ms with them). Checked against exp_of on
// every float (silu and sigmoid alike): 0.76x the time of the full exp on
// [112, 112, 96] (AVX2, Zen 3). NaN stays NaN.
template <int N>
HEXIR_LANES F32<N> logistic_exp(F32<N> x) {  // exp(-x), or exp(-17) where that is smaller
  F32<N> a = -x;
  a = select<N>(a < splat<N>(-17.0f), splat<N>(-17.0f), a);
  a = select<N>(a > splat<N>(89.0f), splat<N>(89.0f), a);  // exp_of's clamp: inf from 88.73 on
  F32<N> shifted;
  const F32<N> y = exp_reduced<N>(a, &shifted);
  // n - 1 + 127 as the exponent.
  return y * from_bits<N>((bits<N>(shifted) - (0x4B400000u - 126u)) << 23) * 2.0f;
}
template <int N>
HEXIR_LANES F32<N> sigmoid(F32<N> x) {
  return 1.0f / (1.0f + logistic_exp<N>(x));
}
template <int N>
HEXIR_LANES F32<N> silu(F32<N> x) {
  return x / (1.0f + logistic_exp<N>(x));
}
// tanh_of: both ranges computed, one kept per lane; then x's sign.
template <int N>
HEXIR_LANES F32<N> tanh(F32<N> x) {
  const U32<N> sign = U32<N>{} + 0x80000000u;
  const F32<N> a = from_bits<N>(bits<N>(x) & ~sign);
  const F32<N> z = a * a;
  F32<N> p = splat<N>(-5.70498872745e-3f);
  p = p * z + 2.06390887954e-2f;
  p = p * z + -5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z + -3.33332819422e-1f;
  const F32<N> small = p * z * a + a;
  const F32<N> large = 1.0f - 2.0f / (exp<N>(a + a) + 1.0f);
  const F32<N> t = select<N>(a < splat<N>(0.625f), small, large);
  return from_bits<N>((bits<N>(t) & ~sign) | (bits<N>(x) & sign));
}
template <int N>
HEXIR_LANES F32<N> gelu_tanh(F32<N> x) {
  return 0.5f * x * (1.0f + tanh<N>(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

}  // namespace hexir::hal::cpu::internal::lanes

namespace hexir::hal::cpu::internal {

// Runs Kernel::run<N>(args...) compiled for the running CPU's widest ISA.
// Kernel: a struct with `template <int N> static HEXIR_LANES R run(...)`.
#if defined(__x86_64__) && defined(__GNUC__)
// AVX-512 with AVX2's FMA: a kernel's narrower vectors (a depthwise row's
// last 8 channels of 72: F32<8>) are ymm FMAs; avx512f alone gave GCC no
// 256-bit FMA (AVX-512VL is not asked for) and it split them into scalar
// vfmadd231ss, lane by lane (72 channels at 56 x 56 took 0.135 ms, 64 took
// 0.076).
template <typename Kernel, typename... Args>
[[gnu::target("avx512f,avx2,fma")]] auto run_lanes16(Args... args) {
  return Kernel::template run<16>(args...);
}
template <typename Kernel, typename... Args>
[[gnu::target("avx2,fma")]] auto run_lanes8(Args... args) {
  return Kernel::template run<8>(args...);
}
#endif
template <typename Kernel, typename... Args>
auto run_lanes4(Args... args) {
  return Kernel::template run<4>(args...);
}
template <typename Kernel, typename... Args>
inline auto widest(Args... args) {
#if defined(__x86_64__) && defined(__GNUC__)
  // cpu_isa() per call (a cached value); callers run whole rows or blocks per call.
  if (isa_avx512()) return run_lanes16<Kernel>(args...);
  if (isa_avx2()) return run_lanes8<Kernel>(args...);
#endif
  return run_lanes4<Kernel>(args...);
}

// widest<LaneCount>(): the lane count N that widest() runs kernels with.
struct LaneCount {
  template <int N>
  static HEXIR_LANES int64_t run() {
    return N;
  }
};

}  // namespace hexir::hal::cpu::internal
