// Kernel plans: the geometry an operator's kernels need, computed once per
// instruction by the operator's plan rule (ops/op.h) when a program is
// prepared, then handed to every dispatch as a pointer. Kernels of every
// backend read these and nothing else about shapes. Plain structs, C++17 and
// <stdint.h> only, so nvcc-compiled CUDA code includes this file too.
//
// A plan lives in 8-byte words. Variadic operators (concat, split) follow
// their struct with one int64_t per operand, read with plan_tail().
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

namespace hexir::ops {

inline constexpr int kMaxRank = 8;

// Small index helpers next to the plans they serve, callable from host code
// and from the CUDA kernels.
#if defined(__CUDACC__)
#define HEXIR_PLAN_FN __host__ __device__ inline
#else
#define HEXIR_PLAN_FN inline
#endif

// Words after a plan struct (per-operand arrays of variadic operators).
template <typename Plan>
inline const int64_t* plan_tail(const Plan* plan) {
  return reinterpret_cast<const int64_t*>(plan + 1);
}

// ---- activations ---------------------------------------------------------------
//
// The scalar maps of the unary operators a conv2d or matmul can apply as its
// epilogue (fused; ops/op.h), defined once for the standalone kernels and the
// fused ones of every backend, so a fused result is bit for bit the unfused
// one. erf, exp (of sigmoid and silu) and tanh are our own, plain float
// multiplies, adds and divisions (never contracted: the cpu builds its
// baseline without FMA and compiles hal with -ffp-contract=off, nvcc runs
// with --fmad=false), so that the cpu's vector blocks (hal/cpu/elementwise.cc)
// and the CUDA kernels give the same bits as these functions on the host;
// exp's steps are explicit fmaf (one rounding each: the FMA instruction of
// AVX2, AVX-512, NEON and CUDA, glibc's fmaf elsewhere), which took a third
// of its instructions (efficientnet's SiLU was 1.7x onnxruntime's time).
// NaN propagates: the comparisons are written so that NaN falls through.
HEXIR_PLAN_FN float relu_of(float x) { return x > 0.0f ? x : (x != x ? x : 0.0f); }
// erf as a rational function (Eigen's and TensorFlow's float erf): x clamped
// to [-4, 4], an odd degree-13 numerator over an even degree-8 denominator in
// x^2; within 7 ulps (4.2e-7 relative) of the correctly rounded erf, NaN stays
// NaN. Written as separate multiplies and adds (never contracted: the cpu
// builds its baseline without FMA, nvcc runs with --fmad=false) so that the
// cpu's vector path (hal/cpu/gemm.cc, erf_block) gives the same bits.
HEXIR_PLAN_FN float erf_of(float v) {
  const float x = v < -4.0f ? -4.0f : (v > 4.0f ? 4.0f : v);
  const float x2 = x * x;
  float p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
  p = x2 * p + -2.10102402082508e-06f;
  p = x2 * p + -5.69250639462346e-05f;
  p = x2 * p + -7.34990630326855e-04f;
  p = x2 * p + -2.95459980854025e-03f;
  p = x2 * p + -1.60960333262415e-02f;
  p = x * p;
  float q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
  q = x2 * q + -1.68282697438203e-03f;
  q = x2 * q + -7.37332916720468e-03f;
  q = x2 * q + -1.42647390514189e-02f;
  return p / q;
}
HEXIR_PLAN_FN float gelu_erf_of(float x) { return 0.5f * x * (1.0f + erf_of(x * 0.70710678118654752f)); }

HEXIR_PLAN_FN uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}
HEXIR_PLAN_FN float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// exp (Cephes' expf polynomial): x clamped to [-104, 89] (NaN passes),
// n = x / ln2 rounded to nearest (adding and subtracting 1.5 * 2^23),
// r = x - n ln2 in two parts, a degree-6 polynomial in r (Horner, fmaf), times 2^n as two
// powers of two (2^floor(n/2) then 2^(n - floor(n/2))) so that results near
// the overflow and in the subnormal range are right. Within 1 ulp of exp
// over the floats, inf past 88.73, 0 below -103.98, exp(NaN) NaN. The
// integer steps are unsigned (a NaN's bits give some scale, still NaN).
HEXIR_PLAN_FN float exp_of(float v) {
  const float x = v < -104.0f ? -104.0f : (v > 89.0f ? 89.0f : v);
  const float shifted = fmaf(x, 1.44269504088896341f, 12582912.0f);
  const float n = shifted - 12582912.0f;
  float r = fmaf(n, -0.693359375f, x);
  r = fmaf(n, 2.12194440e-4f, r);
  float y = fmaf(1.9875691500e-4f, r, 1.3981999507e-3f);
  y = fmaf(y, r, 8.3334519073e-3f);
  y = fmaf(y, r, 4.1665795894e-2f);
  y = fmaf(y, r, 1.6666665459e-1f);
  y = fmaf(y, r, 5.0000001201e-1f);
  y = fmaf(y * r, r, r) + 1.0f;
  // m = n + 150 in [0, 278]: 2^(m/2 - 75) * 2^(m - m/2 - 75), exponents 52 + ...
  const uint32_t m = float_bits(shifted) - (0x4B400000u - 150u);
  const uint32_t half = m >> 1;
  return y * bits_float((half + 52u) << 23) * bits_float((m - half + 52u) << 23);
}
// 1 / (1 + exp(-x)) and x / (1 + exp(-x)) with exp_of: within 3 ulps of the
// exact functions where the result is a normal float (0 below x = -88.7,
// where exp(-x) overflows; silu(-inf) is NaN, -inf / inf).
HEXIR_PLAN_FN float sigmoid_of(float x) { return 1.0f / (1.0f + exp_of(-x)); }
HEXIR_PLAN_FN float silu_of(float x) { return x / (1.0f + exp_of(-x)); }
// ONNX Softplus, log(1 + exp(x)), as x + log1p(exp(-x)) above 0 so that exp
// never overflows: inf stays inf, -inf gives 0, NaN stays NaN.
HEXIR_PLAN_FN float softplus_of(float x) { return x > 0.0f ? x + log1pf(exp_of(-x)) : log1pf(exp_of(x)); }
// tanh (Cephes' tanhf) on a = |x|, then x's sign: below 0.625 an odd
// polynomial (a + a^3 P(a^2)), above it 1 - 2 / (exp(2a) + 1), which is 1
// from a = 9.01 on (and for inf); tanh(-0) is -0, NaN stays NaN. Within
// 2 ulps of tanh.
HEXIR_PLAN_FN float tanh_of(float x) {
  const float a = fabsf(x);
  float t;
  if (a < 0.625f) {
    const float z = a * a;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z + -5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z + -3.33332819422e-1f;
    t = p * z * a + a;
  } else {
    t = 1.0f - 2.0f / (exp_of(a + a) + 1.0f);
  }
  return copysignf(t, x);
}
HEXIR_PLAN_FN float gelu_tanh_of(float x) {
  const float kSqrt2OverPi = 0.79788456080286536f;
  return 0.5f * x * (1.0f + tanh_of(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}
HEXIR_PLAN_FN float leaky_relu_of(float x, float alpha) { return x < 0.0f ? alpha * x : x; }
// numpy.clip: minimum(maximum(x, lo), hi); lo > hi gives hi.
HEXIR_PLAN_FN float clip_of(float x, float lo, float hi) {
  const float v = x < lo ? lo : x;
  return v > hi ? hi : v;
}
HEXIR_PLAN_FN float clamp01(float v) { return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v); }
HEXIR_PLAN_FN float hard_sigmoid_of(float x, float alpha, float beta) { return clamp01(alpha * x + beta); }
// ONNX: x * hard_sigmoid(x, alpha = 1/6, beta = 1/2) (so -inf gives NaN, as there).
HEXIR_PLAN_FN float hard_swish_of(float x) { return x * clamp01(x * (1.0f / 6.0f) + 0.5f); }

// ---- unary math and the ONNX activations ------------------------------------------
//
// expm1 for the exponential activations: below |x| = ln 2 / 2 a degree-7
// Taylor polynomial (within 2e-8 relative: no cancellation near 0), else
// exp_of(x) - 1. Our own (plain multiplies and adds), so every backend gives
// the same bits; NaN stays NaN, -inf gives -1.
HEXIR_PLAN_FN float expm1_of(float x) {
  if (fabsf(x) < 0.34657359f) {
    float p = x * (1.0f / 5040.0f) + (1.0f / 720.0f);
    p = p * x + (1.0f / 120.0f);
    p = p * x + (1.0f / 24.0f);
    p = p * x + (1.0f / 6.0f);
    p = p * x + 0.5f;
    return p * x * x + x;
  }
  return exp_of(x) - 1.0f;
}

// The maps of the unary math and activation operators (ops/op.h kSin ..
// kShrink), with the operator's float parameters a, b (UnaryPlan): one
// function template shared by the cpu kernels and the CUDA kernel (which
// selects F per dispatch). The trigonometric and hyperbolic functions are
// libm's (the device's on CUDA: within a few ulps of each other).
enum class MathFn : int32_t {
  kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh,
  kElu,              // a: alpha. x > 0 ? x : alpha * expm1(x)
  kSelu,             // a, b: alpha, gamma. gamma * (x > 0 ? x : alpha * expm1(x))
  kCelu,             // a: alpha. x > 0 ? x : alpha * expm1(x / alpha)
  kMish,             // x * tanh(softplus(x))
  kSoftsign,         // x / (1 + |x|)
  kThresholdedRelu,  // a: alpha. x > alpha ? x : 0 (NaN gives 0, as ONNX's reference)
  kShrink,           // a, b: lambd, bias. x < -lambd ? x + bias : x > lambd ? x - bias : 0
  kIsInf,            // bool results; a, b: detect_positive, detect_negative (0 or 1)
  kIsNaN,
  kCount,
};

template <MathFn F>
HEXIR_PLAN_FN float math_of(float x, float a, float b) {
  if constexpr (F == MathFn::kSin) return sinf(x);
  else if constexpr (F == MathFn::kCos) return cosf(x);
  else if constexpr (F == MathFn::kTan) return tanf(x);
  else if constexpr (F == MathFn::kAsin) return asinf(x);
  else if constexpr (F == MathFn::kAcos) return acosf(x);
  else if constexpr (F == MathFn::kAtan) return atanf(x);
  else if constexpr (F == MathFn::kSinh) return sinhf(x);
  else if constexpr (F == MathFn::kCosh) return coshf(x);
  else if constexpr (F == MathFn::kAsinh) return asinhf(x);
  else if constexpr (F == MathFn::kAcosh) return acoshf(x);
  else if constexpr (F == MathFn::kAtanh) return atanhf(x);
  else if constexpr (F == MathFn::kElu) return x > 0.0f ? x : a * expm1_of(x);
  else if constexpr (F == MathFn::kSelu) return b * (x > 0.0f ? x : a * expm1_of(x));
  else if constexpr (F == MathFn::kCelu) return x > 0.0f ? x : a * expm1_of(x / a);
  else if constexpr (F == MathFn::kMish) return x * tanh_of(softplus_of(x));
  else if constexpr (F == MathFn::kSoftsign) return x / (1.0f + fabsf(x));
  else if constexpr (F == MathFn::kThresholdedRelu) return x > a ? x : 0.0f;
  else if constexpr (F == MathFn::kShrink) return x < -a ? x + b : (x > a ? x - b : 0.0f);
  else if constexpr (F == MathFn::kIsInf)  // beyond the largest finite float
    return (x > 3.40282347e38f && a != 0.0f) || (x < -3.40282347e38f && b != 0.0f);
  else return x != x;  // kIsNaN
}

// ONNX PRelu: x < 0 ? slope * x : x (NaN passes).
HEXIR_PLAN_FN float prelu_of(float x, float slope) { return x < 0.0f ? slope * x : x; }

// x * a then + b, two roundings (never contracted): what a mul by a then an
// add of b give. The affine epilogue of add and mul (mul by 1 is exact).
HEXIR_PLAN_FN float affine_of(float x, float a, float b) {
  const float scaled = x * a;
  return scaled + b;
}

// A fused epilogue's activation (the first epilogue parameter word of conv2d
// and matmul; the numbers are part of the file format).
enum class Activation : int32_t {
  kNone = 0,
  kRelu = 1,
  kGeluErf = 2,
  kGeluTanh = 3,
  kSilu = 4,
  kSigmoid = 5,
  kTanh = 6,
  kLeakyRelu = 7,    // a: alpha
  kClip = 8,         // a, b: min, max (may be infinite)
  kHardSigmoid = 9,  // a, b: alpha, beta
  kHardSwish = 10,
  kAffine = 11,  // a, b: x * a + b (a multiply, then an add); add and mul only (a scalar mul / add after them)
  kCount = 12,
};

// What a conv2d or matmul applies to each result element after the sum (and
// the bias): an activation with its float parameters (as floats, like the
// standalone kernels' UnaryPlan a and b).
struct Epilogue {
  int32_t activation;  // Activation
  int32_t pad;
  float a, b;
};

HEXIR_PLAN_FN float apply_epilogue(const Epilogue& e, float x) {
  switch (static_cast<Activation>(e.activation)) {
    case Activation::kRelu: return relu_of(x);
    case Activation::kGeluErf: return gelu_erf_of(x);
    case Activation::kGeluTanh: return gelu_tanh_of(x);
    case Activation::kSilu: return silu_of(x);
    case Activation::kSigmoid: return sigmoid_of(x);
    case Activation::kTanh: return tanh_of(x);
    case Activation::kLeakyRelu: return leaky_relu_of(x, e.a);
    case Activation::kClip: return clip_of(x, e.a, e.b);
    case Activation::kHardSigmoid: return hard_sigmoid_of(x, e.a, e.b);
    case Activation::kHardSwish: return hard_swish_of(x);
    case Activation::kAffine: return affine_of(x, e.a, e.b);
    default: return x;
  }
}

// The element offset, in a strided operand, of element i (row-major over
// `dims`) of the result: sum index[d] * stride[d].
HEXIR_PLAN_FN int64_t strided_element(const int64_t* dims, const int64_t* stride, int32_t rank, int64_t i) {
  int64_t offset = 0;
  for (int32_t d = rank - 1; d >= 0; --d) {
    offset += (i % dims[d]) * stride[d];
    i /= dims[d];
  }
  return offset;
}

// Unary elementwise maps over n elements. variant: gelu 0 = erf, 1 = tanh.
// a, b: the operator's float parameters (leaky_relu alpha; clip min, max;
// hard_sigmoid alpha, beta), applied as floats; 0 when it has none.
// rank 0: the input is row-major (the flat loop). Otherwise the input is a
// strided view (docs/views.md): output element i reads input element
// strided_element(dims, stride, rank, i).
struct UnaryPlan {
  int64_t n;
  int32_t variant;
  int32_t rank;
  double a, b;
  int64_t dims[kMaxRank];
  int64_t stride[kMaxRank];
};

// lstm_cell over `rows` rows of `hidden` values: gates [rows, 4 * hidden],
// c and both results [rows, hidden], row-major.
struct LstmCellPlan {
  int64_t rows, hidden;
};

// One element of lstm_cell: gate values i, o, f, g (the cell input) and the
// previous c; the new c (written over c) and h (returned), in the order of the
// operators it replaces: c = f * c_prev + i * tanh(g) (each product rounded,
// then the sum), h = o * tanh(c).
HEXIR_PLAN_FN float lstm_cell_of(float i, float o, float f, float g, float& c) {
  const float next = sigmoid_of(f) * c + sigmoid_of(i) * tanh_of(g);
  c = next;
  return sigmoid_of(o) * tanh_of(next);
}

// Binary elementwise with numpy broadcasting. mode 0: both inputs have the
// output's element count; 1: b is one element; 2: a is one element; 3:
// general, `rank` merged output dims (no size-1 dims; neighbours whose strides
// line up are merged) with per-dim element strides, 0 where broadcast. mode 4:
// every dim is 1 (one element). The same layout serves where's three inputs
// (stride_c for the condition).
struct BinaryPlan {
  int64_t n;
  int32_t mode;
  int32_t rank;
  int64_t dims[kMaxRank];
  int64_t stride_a[kMaxRank];
  int64_t stride_b[kMaxRank];
  Epilogue epilogue;  // add and mul only: a fused activation (none for the others)
  int32_t variant;    // mod: its fmod word (0 or 1); 0 for the others
  int32_t pad;
};

// ---- integer and rounding maps ---------------------------------------------------
//
// ONNX's integer arithmetic on i32 and i64 without undefined behaviour, shared
// by the cpu and CUDA kernels: add, sub, mul, neg and abs wrap (two's
// complement: the lowest value negates to itself); div truncates toward zero
// and lowest / -1 wraps to lowest (its remainder is 0). A zero divisor gives 0
// here: the cpu kernel checks its divisors and fails the invoke instead; a
// CUDA kernel cannot report (docs/cuda.md).
template <typename T> struct UnsignedOf;
template <> struct UnsignedOf<int32_t> { using type = uint32_t; };
template <> struct UnsignedOf<int64_t> { using type = uint64_t; };
template <typename T>
HEXIR_PLAN_FN T int_add_of(T a, T b) {
  using U = typename UnsignedOf<T>::type;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <typename T>
HEXIR_PLAN_FN T int_sub_of(T a, T b) {
  using U = typename UnsignedOf<T>::type;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <typename T>
HEXIR_PLAN_FN T int_mul_of(T a, T b) {
  using U = typename UnsignedOf<T>::type;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}
template <typename T>
HEXIR_PLAN_FN T int_neg_of(T x) {
  using U = typename UnsignedOf<T>::type;
  return static_cast<T>(U(0) - static_cast<U>(x));
}
template <typename T>
HEXIR_PLAN_FN T int_abs_of(T x) { return x < 0 ? int_neg_of(x) : x; }
template <typename T>
HEXIR_PLAN_FN T int_div_of(T a, T b) {
  if (b == 0) return 0;
  if (b == -1) return int_neg_of(a);
  return a / b;
}
// ONNX Mod: fmod 0, the remainder takes the divisor's sign (Python's %);
// fmod 1, the dividend's (C's %).
template <typename T>
HEXIR_PLAN_FN T int_mod_of(T a, T b, int32_t fmod) {
  if (b == 0 || b == -1) return 0;
  const T r = a % b;
  return fmod == 0 && r != 0 && ((r < 0) != (b < 0)) ? static_cast<T>(r + b) : r;
}
// ONNX Pow on integers (numpy.power, which the ONNX reference runs): power
// by squaring, wrapping like int_mul_of. A negative exponent (numpy refuses
// it) gives the truncated real power as onnxruntime does: 1 for base 1, +-1
// for base -1 by the exponent's parity, 0 for every other base (0 too).
template <typename T>
HEXIR_PLAN_FN T int_pow_of(T base, T exponent) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exponent & 1) != 0 ? T(-1) : T(1);
    return 0;
  }
  using U = typename UnsignedOf<T>::type;
  U result = 1;
  U b = static_cast<U>(base);
  for (U e = static_cast<U>(exponent); e != 0; e >>= 1) {
    if ((e & 1) != 0) result *= b;
    b *= b;
  }
  return static_cast<T>(result);
}
// -1, 0 or 1; a float 0, -0 or NaN passes through.
template <typename T>
HEXIR_PLAN_FN T sign_of(T x) { return x > T(0) ? T(1) : x < T(0) ? T(-1) : x; }
// ONNX Round: to the nearest integer, halves to even (rintf in the default
// rounding mode, which nothing here changes).
HEXIR_PLAN_FN float round_half_even_of(float x) { return rintf(x); }

// where(cond, x, y): out = cond ? x : y with numpy broadcasting of all three.
// Elements are moved as bytes of element_size. rank 0 with n elements means all
// three have the output's element count (a flat loop).
struct WherePlan {
  int64_t n;
  int32_t rank;
  int32_t element_size;
  int64_t dims[kMaxRank];
  int64_t stride_c[kMaxRank];
  int64_t stride_x[kMaxRank];
  int64_t stride_y[kMaxRank];
};

// cast: n elements from dtype `from` to `to` (hexir::DType values). Floats to
// integers truncate toward zero (saturating at the integer's range, NaN to 0);
// integers to narrower integers wrap (two's complement, like numpy's astype);
// anything to bool is != 0; bool to anything is 0 or 1. f16 rounds to nearest
// even (overflow to infinity); NaN stays NaN.
struct CastPlan {
  int64_t n;
  int32_t from;
  int32_t to;
};

// quantize_linear and dequantize_linear: n elements, element i's scale and
// zero point at channel (i / inner) % channels (channels 1: per tensor);
// `quantized` the integer side's DType (i8, u8; i32 for dequantize).
struct QuantizePlan {
  int64_t n, inner, channels;
  int32_t quantized;
  int32_t pad;
};

// ONNX QuantizeLinear of one element: round half to even of x / scale, plus
// the zero point, saturated to [lo, hi] (NaN gives the zero point). The
// division as ONNX and onnxruntime's reference compute it.
HEXIR_PLAN_FN int32_t quantize_of(float x, float scale, int32_t zero_point, int32_t lo, int32_t hi) {
  const float q = rintf(x / scale) + static_cast<float>(zero_point);
  if (!(q == q)) return zero_point;
  return q <= static_cast<float>(lo) ? lo : q >= static_cast<float>(hi) ? hi : static_cast<int32_t>(q);
}
// ONNX DequantizeLinear of one element: (x - zero_point) * scale, the
// difference exact (in int64: two int32 values apart may not fit in int32),
// then rounded to float once.
HEXIR_PLAN_FN float dequantize_of(int32_t x, float scale, int32_t zero_point) {
  return static_cast<float>(static_cast<int64_t>(x) - static_cast<int64_t>(zero_point)) * scale;
}

// numpy.matmul: one [m,k] x [k,n] product per batch element; batch dims broadcast
// through element strides (0 for a size-1 dim). C is contiguous, batch after
// batch. a_uniform / b_uniform: every batch dim walks the operand contiguously
// (stride m*k, k*n per matrix) or repeats it everywhere (stride 0), so one
// strided-batched GEMM call covers the product; a_batch_stride / b_batch_stride
// are that stride.
struct MatmulPlan {
  int64_t m, n, k;
  int64_t batch_count;
  int32_t batch_rank;
  int32_t a_uniform;
  int32_t b_uniform;
  // b holds each batch element's [n, k] (the transpose of the [k, n] it
  // stands for): the compiler folds a transpose of b's last two dims into
  // the matmul instead of copying it (fusion.cc).
  int32_t b_transposed;
  int64_t a_batch_stride, b_batch_stride;
  // Elements between consecutive rows of a ([m, k]) and of b as stored ([k,
  // n], or [n, k] when b_transposed): k and n (k) when row-major; a strided
  // view's row stride otherwise (docs/views.md: its last stride is 1).
  int64_t lda, ldb;
  int64_t batch_dims[kMaxRank];
  int64_t a_stride[kMaxRank];
  int64_t b_stride[kMaxRank];
  // Fused: a bias input (f32[n], added to every row) and an activation.
  int64_t has_bias;
  Epilogue epilogue;
};

// quantized_matmul: m rows of a (k long, contiguous) against w [n, k] int8,
// each output column scaled by scale[n], then + bias[n] when has_bias.
struct QuantizedMatmulPlan {
  int64_t m, k, n;
  int64_t has_bias;
};

// int4_matmul: m rows of a (k long, contiguous) against w [n, k / 2]
// packed 4-bit (op.h), scale f16 [n, k / group]; + bias[n] when has_bias.
struct Int4MatmulPlan {
  int64_t m, k, n, group;
  int64_t has_bias;
};
inline constexpr int64_t kInt4Block = 32;  // weights per 16 packed bytes
// integer_matmul: m rows of a (k u8, contiguous) against w [n, k] int8.
struct IntegerMatmulPlan {
  int64_t m, k, n;
};
inline constexpr int64_t kIntegerMatmulMaxK = 65536;  // |sum| <= 65536 * 255 * 128 < 2^31

// quantized_add (op.h): n elements of a and b.
struct QuantizedAddPlan {
  int64_t n;
  float a_scale, b_scale, y_scale;
  int32_t a_zero, b_zero, y_zero, y_min, y_max;
};

// The group's own float steps, so a QDQ residual join gives the bytes of
// the graph it came from (a product by y_scale's reciprocal, or the two
// ratios of scales, differ from it by a step where the sum falls near half
// a step: ResNet-50 drifted 1.4 steps from onnxruntime that way).
HEXIR_PLAN_FN uint8_t quantized_add_of(const QuantizedAddPlan& p, uint8_t a, uint8_t b) {
  const float v = dequantize_of(a, p.a_scale, p.a_zero) + dequantize_of(b, p.b_scale, p.b_zero);
  return static_cast<uint8_t>(quantize_of(v, p.y_scale, p.y_zero, p.y_min, p.y_max));
}

// quantized_conv2d (op.h): channels-last u8 x [n, h, w, c] and int8 weights
// to u8 [n, oh, ow, k], the int32 sum requantized in the epilogue. Dense
// and grouped: weights [groups, ceil(k_per_group / 16), depth / 4, 16, 4]
// (quantized_conv2d_weight_index), the reduction index r = (ky * kw + kx) *
// c_per_group + ci padded with zeros to `depth` (a multiple of 4: the VNNI
// layout, 4 consecutive r of one output channel in one 32-bit lane), each
// block of 16 output channels contiguous over r, zeros past the group's
// channels. Depthwise (groups = c = k): weights [kh * kw, c].
struct QuantizedConv2dPlan {
  int64_t n, h, w, c;
  int64_t k, oh, ow;
  int64_t kh, kw;
  int64_t stride_h, stride_w;
  int64_t pad_top, pad_left;
  int64_t dilation_h, dilation_w;
  int64_t groups, c_per_group, k_per_group;
  int64_t depth;  // kh * kw * c_per_group rounded up to 4 (dense and grouped)
  int64_t depthwise;
  int32_t x_zero, y_zero, y_min, y_max;
};
inline constexpr int64_t kQuantizedConvMaxDepth = 65536;  // |sum| <= 65536 * 255 * 128 < 2^31
inline constexpr int64_t kQuantizedConvBlock = 16;        // output channels per weight block

// Where the weight of output channel `kg` of group g at reduction index r
// lies in a dense or grouped quantized_conv2d's weights.
HEXIR_PLAN_FN int64_t quantized_conv2d_weight_index(int64_t depth, int64_t k_per_group, int64_t g, int64_t kg,
                                                    int64_t r) {
  const int64_t blocks = (k_per_group + kQuantizedConvBlock - 1) / kQuantizedConvBlock;
  return (((g * blocks + kg / kQuantizedConvBlock) * (depth / 4) + r / 4) * kQuantizedConvBlock +
          kg % kQuantizedConvBlock) * 4 + r % 4;
}

// The int32 sum of output element (n, oy, ox, k) of a quantized_conv2d:
// every tap of the window, a tap outside the input reading x_zero (the bias
// holds -x_zero * sum w, so padding adds nothing net). Exact in any order.
// The input pixel tap (ky, kx) of output pixel (n, oy, ox) reads (its
// first channel), or nullptr when the tap falls outside the input (it
// reads x_zero): the window's geometry, for every kernel of the operator.
HEXIR_PLAN_FN const uint8_t* quantized_conv2d_tap(const QuantizedConv2dPlan& p, const uint8_t* x, int64_t n,
                                                  int64_t oy, int64_t ox, int64_t ky, int64_t kx) {
  const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
  const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
  return iy >= 0 && iy < p.h && ix >= 0 && ix < p.w ? x + ((n * p.h + iy) * p.w + ix) * p.c : nullptr;
}

HEXIR_PLAN_FN int32_t quantized_conv2d_sum(const QuantizedConv2dPlan& p, const uint8_t* x, const int8_t* w,
                                           int64_t n, int64_t oy, int64_t ox, int64_t k) {
  const int64_t g = k / p.k_per_group, kg = k % p.k_per_group;
  int32_t sum = 0;
  for (int64_t ky = 0; ky < p.kh; ++ky)
    for (int64_t kx = 0; kx < p.kw; ++kx) {
      const uint8_t* px = quantized_conv2d_tap(p, x, n, oy, ox, ky, kx);
      const int64_t tap = ky * p.kw + kx;
      for (int64_t ci = 0; ci < p.c_per_group; ++ci) {
        const int32_t xv = px ? px[g * p.c_per_group + ci] : p.x_zero;
        int32_t wv;
        if (p.depthwise) {
          wv = w[tap * p.c + k];
        } else {
          const int64_t r = tap * p.c_per_group + ci;
          wv = w[quantized_conv2d_weight_index(p.depth, p.k_per_group, g, kg, r)];
        }
        sum += xv * wv;
      }
    }
  return sum;
}

// The requantizing epilogue of quantized_conv2d: (sum + bias) (wrapping in
// int32) as float times the multiplier, clamped to [lo - zero, hi - zero],
// rounded half to even, plus the zero point. Clamping before rounding is
// the same as after (rounding is monotone) and keeps the conversion in range.
HEXIR_PLAN_FN uint8_t requantize_of(int32_t sum, int32_t bias, float multiplier, int32_t zero, int32_t lo,
                                    int32_t hi) {
  const int32_t total = static_cast<int32_t>(static_cast<uint32_t>(sum) + static_cast<uint32_t>(bias));
  float v = static_cast<float>(total) * multiplier;
  const float low = static_cast<float>(lo - zero), high = static_cast<float>(hi - zero);
  v = v < low ? low : v > high ? high : v;
  return static_cast<uint8_t>(static_cast<int32_t>(rintf(v)) + zero);
}

// dequantize_int4: rows of k weights, a scale per group of `group`.
struct DequantizeInt4Plan {
  int64_t rows, k, group;
};

// Weight t (0 <= t < k) of a packed int4 row, -8..7: the block layout of op.h.
HEXIR_PLAN_FN int32_t int4_weight_of(const uint8_t* row, int64_t t) {
  const uint8_t byte = row[(t / kInt4Block) * (kInt4Block / 2) + t % (kInt4Block / 2)];
  return static_cast<int32_t>(t % kInt4Block < kInt4Block / 2 ? byte & 0xf : byte >> 4) - 8;
}

// attention over a prefix of the keys (op.h): batch element b of q, k and
// v at offsets sum_i index_i * *_stride[i] (index the batch coordinates),
// their rows q_row, k_row, v_row elements apart (unit last stride); the
// result row-major [batch, m, e]. Keys j < clamp(n + offset, 0, t) take
// part. workspace: t floats per (batch, query row), the row's weights.
struct AttentionPlan {
  int64_t batch_count, m, t, d, e;
  int32_t batch_rank;
  float scale;
  int64_t offset;
  int64_t q_row, k_row, v_row;
  int64_t batch_dims[kMaxRank];
  int64_t q_stride[kMaxRank];
  int64_t k_stride[kMaxRank];
  int64_t v_stride[kMaxRank];
};

// The keys an attention row takes part over: n + offset clamped to [0, t].
HEXIR_PLAN_FN int64_t attention_keys(const AttentionPlan& p, int64_t n) {
  if (n > p.t - p.offset) return p.t;  // |offset| < 2^32: no overflow
  return n + p.offset < 0 ? 0 : n + p.offset;
}

// Element offsets of batch element b's q, k and v.
HEXIR_PLAN_FN void attention_batch_offsets(const AttentionPlan& p, int64_t b, int64_t* q, int64_t* k, int64_t* v) {
  *q = *k = *v = 0;
  for (int32_t i = p.batch_rank; i-- > 0;) {
    const int64_t index = b % p.batch_dims[i];
    b /= p.batch_dims[i];
    *q += index * p.q_stride[i];
    *k += index * p.k_stride[i];
    *v += index * p.v_stride[i];
  }
}

// softmax over rows of `length` elements `inner` apart: row r starts at
// (r / inner) * length * inner + r % inner. workspace: bytes a kernel may use
// for the unit-stride path (0 when the axis is the last one).
struct SoftmaxPlan {
  int64_t outer, length, inner;
};

// layernorm over `rows` rows of `width` contiguous elements.
struct LayernormPlan {
  int64_t rows, width;
  double epsilon;
};

// group_norm over `rows` = N * groups rows of `width` = (C / groups) *
// spatial contiguous elements; element j of row r is of channel
// (r % groups) * (width / spatial) + j / spatial.
struct GroupNormPlan {
  int64_t rows, width, spatial, groups;
  double epsilon;
};

// What a reduction computes (op.h: reduce_sum and its family). The sums
// (sum, mean, l1, l2, sum_square, log_sum, log_sum_exp's exponentials) and
// prod run in double on floats; on integers every one wraps in 64 bits and
// is truncated to the element.
enum class ReduceKind : int32_t {
  kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSumExp, kSumSquare, kLogSum,
};

// The reductions: one output element per kept index; the kept dims pick the
// base offset, the reduced dims (input order) are combined by `kind`
// (max and min: the extreme, NaN if any is NaN, -inf / +inf of nothing).
struct ReducePlan {
  int64_t out_count;
  int64_t red_count;
  int32_t kept_rank, red_rank;
  ReduceKind kind;
  int32_t pad;
  int64_t kept_dims[kMaxRank], kept_stride[kMaxRank];
  int64_t red_dims[kMaxRank], red_stride[kMaxRank];
};

// A strided gather of elements: output element i (row-major over out_dims)
// is input element offset + sum(index[d] * in_stride[d]). transpose (offset 0,
// permuted strides) and slice (start offset, strides times steps, possibly
// negative) are both this. element_size picks the kernel's move width.
struct StridedPlan {
  int64_t n;
  int32_t rank;
  int32_t element_size;
  int64_t offset;
  int64_t out_dims[kMaxRank];
  int64_t in_stride[kMaxRank];
};

// pad: output element (row-major over out_dims) at index o reads the input
// element with index i[d] = o[d] - begin[d] in each dim, where [lo[d], hi[d])
// is the part of the input kept (negative pads crop it). Outside it, by mode:
// 0 constant (the element is `value`'s low element_size bytes), 1 reflect
// (numpy: lo + t with t = (i - lo) mod 2(n - 1), folded to 2(n - 1) - t past n - 1;
// n = hi - lo; lo when n is 1), 2 edge (clamped to [lo, hi - 1]), 3 wrap (lo + (i - lo) mod n).
struct PadPlan {
  int64_t n;
  int32_t rank;
  int32_t element_size;
  int32_t mode;
  int32_t pad;
  int64_t value;
  int64_t out_dims[kMaxRank];
  int64_t in_stride[kMaxRank];
  int64_t begin[kMaxRank];
  int64_t lo[kMaxRank];
  int64_t hi[kMaxRank];
};

// The input index pad reads in one dim for output index o, or -1 for the
// constant; shared by the kernels of every backend.
HEXIR_PLAN_FN int64_t pad_source_index(const PadPlan& p, int d, int64_t o) {
  const int64_t i = o - p.begin[d], lo = p.lo[d], hi = p.hi[d];
  if (i >= lo && i < hi) return i;
  const int64_t n = hi - lo;
  switch (p.mode) {
    case 1: {
      if (n == 1) return lo;
      const int64_t period = 2 * (n - 1);
      int64_t t = (i - lo) % period;
      if (t < 0) t += period;
      return lo + (t < n ? t : period - t);
    }
    case 2:
      return i < lo ? lo : hi - 1;
    case 3: {
      int64_t t = (i - lo) % n;
      if (t < 0) t += n;
      return lo + t;
    }
    default:
      return -1;
  }
}

// concat along an axis: `outer` rows; each row of the output takes row_bytes[k]
// bytes of input k in turn (plan_tail: input_count entries). out_row_bytes is
// their sum.
struct ConcatPlan {
  int64_t outer;
  int64_t out_row_bytes;
  int64_t input_count;
};

// split along an axis, the inverse of concat: each of `outer` input rows of
// in_row_bytes gives row_bytes[k] bytes to output k (plan_tail: output_count
// entries).
struct SplitPlan {
  int64_t outer;
  int64_t in_row_bytes;
  int64_t output_count;
};

// copy: bytes from input to output; or, when `strided` is 1 (the input is
// a strided view, docs/views.md), the gather `gather` into a row-major output.
struct CopyPlan {
  int64_t bytes;
  int64_t strided;
  StridedPlan gather;
};

// gather (numpy.take along axis): data viewed as [outer, axis_dim, inner]
// elements, indices as `index_count` integers (i64 when index_i64, else i32;
// negative ones count from the end); output is [outer, index_count, inner].
// inner_bytes = inner * element size.
struct GatherPlan {
  int64_t outer;
  int64_t axis_dim;
  int64_t inner_bytes;
  int64_t index_count;
  int32_t index_i64;
  int32_t pad;
};

// argmax along one axis: x viewed as [outer, length, inner]; output element
// (o, i) (row-major, o * inner + i) is the index in [0, length) of the largest
// of x[o, ., i] (argmax_of).
// argmin (smallest 1) likewise; hardmax reads the same plan (select_last 0).
struct ArgmaxPlan {
  int64_t outer, length, inner;
  int32_t select_last;
  int32_t smallest;
};

// The argmax (argmin with `smallest`) of `length` elements `stride` apart:
// ties go to the first (the last with select_last); a NaN wins over every
// number either way, so the first NaN is taken (numpy.argmax, numpy.argmin),
// or the last one with select_last. length >= 1.
template <typename T>
HEXIR_PLAN_FN int64_t argmax_of(const T* x, int64_t length, int64_t stride, int32_t select_last,
                                int32_t smallest = 0) {
  T best = x[0];
  int64_t index = 0;
  for (int64_t k = 1; k < length; ++k) {
    const T v = x[k * stride];
    bool take;
    if (best != best)
      take = select_last && v != v;  // only another NaN, and only for the last
    else if (v != v)
      take = true;
    else if (smallest)
      take = select_last ? v <= best : v < best;
    else
      take = select_last ? v >= best : v > best;
    if (take) {
      best = v;
      index = k;
    }
  }
  return index;
}

// top_k along one axis: x viewed as [outer, length, inner]; each of the
// outer * inner rows gives k values and indices (row-major outputs [outer, k, inner]).
struct TopKPlan {
  int64_t outer, length, inner, k;
  int32_t largest;
  int32_t pad;
};

// Whether element (a, ia) comes before (b, ib) in top_k's order: the larger
// (the smaller unless `largest`) first, NaN as larger than every number,
// equal values by lower index.
template <typename T>
HEXIR_PLAN_FN bool topk_before(T a, int64_t ia, T b, int64_t ib, int32_t largest) {
  const bool a_nan = a != a, b_nan = b != b;
  if (a_nan || b_nan) {
    if (a_nan && b_nan) return ia < ib;
    return largest ? a_nan : b_nan;
  }
  if (a != b) return largest ? a > b : a < b;
  return ia < ib;
}

// cumsum along one axis: x viewed as [outer, length, inner]; the line
// (o, ., i) is summed in order (from its end with reverse), each result
// the sum of the elements up to and including its own (exclusive: of
// those before it, 0 for the first). f32 sums in float, one add per
// element (every backend in the same order, so the same bits); integers
// wrap (two's complement).
struct CumSumPlan {
  int64_t outer, length, inner;
  int32_t exclusive, reverse;
};

// dynamic_slice and update_slice: a window of `window` elements per dim in a
// tensor x of `dims` (row-major strides `stride`), at start indices read at run
// time from i64 scalars (in device memory on a GPU: the kernels read them).
// n: the window's element count; x_bytes: x's (update_slice copies x first
// when not in place).
struct WindowPlan {
  int64_t n;
  int64_t x_bytes;
  int32_t rank;
  int32_t element_size;
  // update_slice's out_of_range (kWindowClamp, kWindowSkip, kWindowFail):
  // what a start index that would put the window outside x does.
  int32_t out_of_range;
  int32_t pad;
  int64_t dims[kMaxRank];
  int64_t window[kMaxRank];
  int64_t stride[kMaxRank];
};

// update_slice's out_of_range: clamped into x (XLA's DynamicUpdateSlice);
// skipped, nothing written (the rewritten where(iota == pos, new, cache));
// or, a negative start counted from the end of its dim, the invoke failed
// (the rewritten ScatterElements, ONNX's rule; the cuda kernel skips).
enum WindowOutOfRange : int32_t { kWindowClamp = 0, kWindowSkip = 1, kWindowFail = 2 };

// A start index under out_of_range (kWindowFail: a negative one counted
// from the end), and whether the window then lies inside its dim.
HEXIR_PLAN_FN int64_t window_start_unclamped(int64_t start, int64_t dim, int32_t out_of_range) {
  return out_of_range == kWindowFail && start < 0 ? start + dim : start;
}
HEXIR_PLAN_FN bool window_inside(int64_t start, int64_t dim, int64_t window) {
  return start >= 0 && start <= dim - window;
}

// A run-time start index clamped so the window stays inside its dim (XLA).
HEXIR_PLAN_FN int64_t window_start(int64_t start, int64_t dim, int64_t window) {
  const int64_t last = dim - window;
  return start < 0 ? 0 : (start > last ? last : start);
}

// The element offset in x of window element i (row-major over the window),
// with `origin` the offset of the window's first element.
HEXIR_PLAN_FN int64_t window_offset(const WindowPlan& p, int64_t origin, int64_t i) {
  int64_t offset = origin;
  for (int32_t d = p.rank - 1; d >= 0; --d) {
    offset += (i % p.window[d]) * p.stride[d];
    i /= p.window[d];
  }
  return offset;
}

// scatter_nd and scatter_elements: how an update combines with the element
// it lands on (the parameter word; the numbers are stored in files).
enum ScatterReduction : int32_t {
  kScatterNone = 0,
  kScatterAdd = 1,
  kScatterMul = 2,
  kScatterMax = 3,
  kScatterMin = 4,
};

// scatter_nd (depth = k > 0) and scatter_elements (depth 0). The result is
// data (copied first, data_bytes, unless in place), then `n` update elements
// land on it in order. scatter_nd: `tuples` index tuples of `depth` indices,
// each naming a slice of `slice` elements; tuple element d indexes
// data_dims[d] (data_stride[d] elements apart). scatter_elements: update i
// (row-major over index_dims, the indices' and updates' dims) lands where i
// lies, its `axis` coordinate replaced by indices[i]. element_size: data's;
// dtype: data's (a DType, for the reductions' arithmetic).
struct ScatterPlan {
  int64_t data_bytes;
  int64_t n;
  int64_t tuples;
  int64_t slice;
  int32_t depth;
  int32_t axis;
  int32_t rank;
  int32_t element_size;
  int32_t dtype;
  int32_t reduction;
  int32_t index_i64;
  int32_t pad;
  int64_t data_dims[kMaxRank];
  int64_t data_stride[kMaxRank];
  int64_t index_dims[kMaxRank];
  // gather_nd with batch_dims > 0 (0 for the others): the tuples come in
  // blocks of batch_tuples, block b reading batch element b of data, which
  // starts batch_stride * b elements in; data_dims and data_stride then
  // describe the dims after the batch dims.
  int64_t batch_tuples;
  int64_t batch_stride;
};

// The element offset in data of scatter_nd's (gather_nd's) index tuple t,
// or -1 when one of its indices is outside its dim.
template <typename Index>
HEXIR_PLAN_FN int64_t nd_tuple_offset(const ScatterPlan& p, const Index* indices, int64_t t) {
  int64_t offset = p.batch_tuples > 0 ? (t / p.batch_tuples) * p.batch_stride : 0;
  for (int32_t d = 0; d < p.depth; ++d) {
    int64_t index = static_cast<int64_t>(indices[t * p.depth + d]);
    const int64_t dim = p.data_dims[d];
    if (index < 0) index += dim;
    if (index < 0 || index >= dim) return -1;
    offset += index * p.data_stride[d];
  }
  return offset;
}

// A scatter index wrapped once from the end (ONNX); -1 when outside [-dim, dim).
HEXIR_PLAN_FN int64_t scatter_index(int64_t index, int64_t dim) {
  if (index < 0) index += dim;
  return index >= 0 && index < dim ? index : -1;
}

// The element offset in data of scatter_elements' update i, its axis
// coordinate `index` (wrapped, in range).
HEXIR_PLAN_FN int64_t scatter_elements_offset(const ScatterPlan& p, int64_t i, int64_t index) {
  int64_t offset = 0;
  for (int32_t d = p.rank - 1; d >= 0; --d) {
    const int64_t coordinate = i % p.index_dims[d];
    i /= p.index_dims[d];
    offset += (d == p.axis ? index : coordinate) * p.data_stride[d];
  }
  return offset;
}

// NaN for floats; integers never are.
template <typename T>
HEXIR_PLAN_FN bool scatter_is_nan(T) {
  return false;
}
HEXIR_PLAN_FN bool scatter_is_nan(float x) { return x != x; }

// Sums and products; integers wrap (two's complement), as numpy's do.
template <typename T>
HEXIR_PLAN_FN T scatter_add(T a, T b) {
  return a + b;
}
template <typename T>
HEXIR_PLAN_FN T scatter_mul(T a, T b) {
  return a * b;
}
HEXIR_PLAN_FN int32_t scatter_add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
HEXIR_PLAN_FN int32_t scatter_mul(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}
HEXIR_PLAN_FN int64_t scatter_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
HEXIR_PLAN_FN int64_t scatter_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// An update `value` combined into the element `old` it lands on. max and min
// propagate NaN (numpy.maximum, as ONNX's reference).
template <typename T>
HEXIR_PLAN_FN T scatter_combine(T old, T value, int32_t reduction) {
  switch (reduction) {
    case kScatterAdd:
      return scatter_add(old, value);
    case kScatterMul:
      return scatter_mul(old, value);
    case kScatterMax:
      return (scatter_is_nan(value) || value > old) ? value : old;
    case kScatterMin:
      return (scatter_is_nan(value) || value < old) ? value : old;
    default:
      return value;
  }
}

// conv2d, NCHW: x [n, c, h, w], weights [k, c / groups, kh, kw], optional bias
// [k], output [n, k, oh, ow]. pad_top/pad_left are the leading pads (the
// trailing ones only shape oh/ow). No scratch: the CPU packs its patches from
// the image as its GEMM goes.
struct Conv2dPlan {
  int64_t n, c, h, w;
  int64_t k, oh, ow;
  int64_t kh, kw;
  int64_t stride_h, stride_w;
  int64_t pad_top, pad_left;
  int64_t dilation_h, dilation_w;
  int64_t groups;
  int64_t c_per_group, k_per_group;
  int64_t has_bias;
  Epilogue epilogue;  // fused activation, after the bias
  // Channels-last (x [n, h, w, c], output [n, oh, ow, k]; weights stay
  // [k, c / groups, kh, kw]): chosen by the compiler where it pays
  // (docs/layout.md). Its sum order differs: conv2d_channels_last_element.
  int64_t channels_last;
  // A residual (input 3, the result's type): added after the bias, before
  // the activation (a conv2d followed by an add of another value, fused).
  int64_t has_residual;
  // Channels-last by Winograd (a 3x3 kernel at stride 1, dilation 1, one
  // group): the output tile's side, 2 for F(2x2, 3x3) (layout word 2:
  // conv2d_winograd_element<2>'s sums), 4 for F(4x4, 3x3) (layout word 3:
  // conv2d_winograd_element<4>'s); 0 the window.
  int64_t winograd;
};

// A channels-last conv2d sums per block of this many of the group's input
// channels one chain from 0 over the window: taps in (ky, kx) order, each
// tap's channels of the block in order, a tap column outside the input as
// zeros (its products with 0: the im2col patch's padding), a tap row outside
// the input skipped; the blocks' sums are added in order; then the bias.
// One chain across the taps lets a register tile keep its sums over the
// whole window (the order of every other runtime's im2col or NCHWc kernel);
// the zeros let a row's edge pixels share the tile with its interior ones;
// a skipped tap row costs nothing at the top and bottom edges. The blocks
// are the GEMM's K blocks: a 1x1 convolution is one GEMM, the same sums.
// Depthwise (one channel a group) differs: per tap (ky, kx) inside the
// input its product, rounded, is added (the kernel's vectors run across the
// channels; a multiply and an add, no chain to keep).
inline constexpr int64_t kConvChannelBlock = 256;

// Below this many input channels (one group; a stem: an image's 3) a
// channels-last conv2d sums its whole window as one chain instead: per tap
// the few channels gave the register tile a few multiply-adds and a pass over
// the output each, so the cpu kernel gathers each pixel's window (its patch:
// (ky, kx, c) order, zeros outside the input) and runs the tile once over the
// patch's length.
inline constexpr int64_t kConvPatchChannels = 32;
inline constexpr int64_t kConvPatchFloats = 512;  // the patch's length at most
HEXIR_PLAN_FN bool conv2d_channels_last_patch(const Conv2dPlan& p) {
  return p.channels_last != 0 && p.winograd == 0 && p.groups == 1 && p.c_per_group < kConvPatchChannels && p.kh * p.kw > 1 &&
         p.c_per_group * p.kh * p.kw <= kConvPatchFloats;
}

// Winograd's F(2x2, 3x3) (Lavin and Gray, 2015): a 2x2 tile of outputs from
// the 4x4 tile of inputs under it (zeros outside the input), as
//   Y = A^T [ sum over c of (G g_c G^T) . (B^T d_c B) ] A
// with G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1], B^T = [1 0 -1 0; 0 1 1 0;
// 0 -1 1 0; 0 1 0 -1], A^T = [1 1 1 0; 0 1 -1 -1]: 16 multiply-adds per
// input channel for 4 outputs where the window takes 36. The functions
// below are its roundings in their order; the sum over c is one FMA chain
// per (tile, xi, nu, k), channels in order. Its error against the direct
// sums stays within a few ulps of the sums' magnitude (the transforms'
// coefficients are 0, +-1 and +-1/2).
//
// Each transform is written once as 1-D steps (G on one column of the
// taps, B^T on one column of the input tile, A^T on one column of the
// sums), for a float or a vector of floats (the cpu kernel's lanes), and
// applied to the columns, then the rows: every path gives these bits. The
// overloads' array sizes pick the tile: 4 inputs (F(2x2, 3x3)) or 6
// (F(4x4, 3x3), below).
template <class T>
HEXIR_PLAN_FN void winograd_weight_1d(T g0, T g1, T g2, T (&t)[4]) {
  t[0] = g0;
  t[1] = 0.5f * ((g0 + g1) + g2);
  t[2] = 0.5f * ((g0 - g1) + g2);
  t[3] = g2;
}
template <class T>
HEXIR_PLAN_FN void winograd_input_1d(const T (&d)[4], T (&r)[4]) {
  r[0] = d[0] - d[2];
  r[1] = d[1] + d[2];
  r[2] = d[2] - d[1];
  r[3] = d[1] - d[3];
}
template <class T>
HEXIR_PLAN_FN void winograd_output_1d(const T (&m)[4], T (&s)[2]) {
  s[0] = (m[0] + m[1]) + m[2];
  s[1] = (m[1] - m[2]) - m[3];
}

// Winograd's F(4x4, 3x3) (interpolation points 0, 1, -1, 2, -2): a 4x4
// tile of outputs from the 6x6 tile of inputs under it, the same form with
//   G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6;
//        1/24 -1/12 1/6; 0 0 1],
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0;
//          0 2 -1 -2 1 0; 0 4 0 -5 0 1],
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]:
// 36 multiply-adds per input channel for 16 outputs where the window takes
// 144 (F(2x2, 3x3): 64). The transforms' larger coefficients cost accuracy:
// the error grows with the inputs' magnitude, about ten times
// F(2x2, 3x3)'s.
template <class T>
HEXIR_PLAN_FN void winograd_weight_1d(T g0, T g1, T g2, T (&t)[6]) {
  t[0] = g0 * 0.25f;
  t[1] = ((g0 + g1) + g2) * (-1.0f / 6.0f);
  t[2] = ((g0 - g1) + g2) * (-1.0f / 6.0f);
  t[3] = ((g0 + g1 * 2.0f) + g2 * 4.0f) * (1.0f / 24.0f);
  t[4] = ((g0 - g1 * 2.0f) + g2 * 4.0f) * (1.0f / 24.0f);
  t[5] = g2;
}
template <class T>
HEXIR_PLAN_FN void winograd_input_1d(const T (&d)[6], T (&r)[6]) {
  r[0] = (d[0] * 4.0f - d[2] * 5.0f) + d[4];
  r[1] = (d[3] + d[4]) - (d[1] + d[2]) * 4.0f;
  r[2] = (d[4] - d[3]) + (d[1] - d[2]) * 4.0f;
  r[3] = (d[4] - d[2]) + (d[3] - d[1]) * 2.0f;
  r[4] = (d[4] - d[2]) - (d[3] - d[1]) * 2.0f;
  r[5] = (d[1] * 4.0f - d[3] * 5.0f) + d[5];
}
template <class T>
HEXIR_PLAN_FN void winograd_output_1d(const T (&m)[6], T (&s)[4]) {
  s[0] = (m[0] + (m[1] + m[2])) + (m[3] + m[4]);
  s[1] = (m[1] - m[2]) + (m[3] - m[4]) * 2.0f;
  s[2] = (m[1] + m[2]) + (m[3] + m[4]) * 4.0f;
  s[3] = ((m[1] - m[2]) + (m[3] - m[4]) * 8.0f) + m[5];
}

// The 2-D transforms of one element, for output tile side M (2 or 4;
// S = M + 2 inputs a side). U[xi][nu] of one (k, c): g its 3x3 taps
// (row-major).
template <int M>
HEXIR_PLAN_FN float winograd_weight(const float* g, int xi, int nu) {
  float t[3], col[M + 2];
  for (int j = 0; j < 3; ++j) {
    winograd_weight_1d(g[j], g[3 + j], g[6 + j], col);
    t[j] = col[xi];
  }
  float u[M + 2];
  winograd_weight_1d(t[0], t[1], t[2], u);
  return u[nu];
}
// V[xi][nu] of one channel's input tile d.
template <int M>
HEXIR_PLAN_FN float winograd_input(const float (&d)[M + 2][M + 2], int xi, int nu) {
  float row[M + 2];
  for (int j = 0; j < M + 2; ++j) {
    float col[M + 2], r[M + 2];
    for (int i = 0; i < M + 2; ++i) col[i] = d[i][j];
    winograd_input_1d(col, r);
    row[j] = r[xi];
  }
  float v[M + 2];
  winograd_input_1d(row, v);
  return v[nu];
}
// Output (a, b) of the tile from its sums m[xi][nu].
template <int M>
HEXIR_PLAN_FN float winograd_output(const float (&m)[M + 2][M + 2], int a, int b) {
  float row[M + 2];
  for (int j = 0; j < M + 2; ++j) {
    float col[M + 2], s[M];
    for (int i = 0; i < M + 2; ++i) col[i] = m[i][j];
    winograd_output_1d(col, s);
    row[j] = s[a];
  }
  float y[M];
  winograd_output_1d(row, y);
  return y[b];
}

// A Winograd conv2d's output element before the bias: the tile's (M + 2)^2
// sums (each one chain over the input channels of V times U, the chains
// side by side), then the output transform. w: the weights as stored,
// [k, c, 3, 3].
template <int M>
HEXIR_PLAN_FN float conv2d_winograd_element(const Conv2dPlan& p, const float* x_image, const float* w, int64_t k,
                                            int64_t oy, int64_t ox) {
  constexpr int S = M + 2;
  const int64_t iy0 = oy / M * M - p.pad_top, ix0 = ox / M * M - p.pad_left;
  float m[S][S] = {};
  for (int64_t c = 0; c < p.c; ++c) {
    float d[S][S];
    for (int i = 0; i < S; ++i)
      for (int j = 0; j < S; ++j) {
        const int64_t iy = iy0 + i, ix = ix0 + j;
        d[i][j] = iy >= 0 && iy < p.h && ix >= 0 && ix < p.w ? x_image[(iy * p.w + ix) * p.c + c] : 0.0f;
      }
    for (int xi = 0; xi < S; ++xi)
      for (int nu = 0; nu < S; ++nu)
        m[xi][nu] = fmaf(winograd_input<M>(d, xi, nu), winograd_weight<M>(w + (k * p.c + c) * 9, xi, nu), m[xi][nu]);
  }
  return winograd_output<M>(m, static_cast<int>(oy % M), static_cast<int>(ox % M));
}

// The value of one channels-last conv2d output element before the bias, in
// that order: the cuda kernel's loop and the tests' reference. x_image points
// at image n, w at the weights.
HEXIR_PLAN_FN float conv2d_channels_last_element(const Conv2dPlan& p, const float* x_image, const float* w, int64_t k,
                                                 int64_t oy, int64_t ox) {
  if (p.winograd == 4) return conv2d_winograd_element<4>(p, x_image, w, k, oy, ox);
  if (p.winograd) return conv2d_winograd_element<2>(p, x_image, w, k, oy, ox);
  const int64_t g = k / p.k_per_group;
  float acc = 0.0f;
  if (conv2d_channels_last_patch(p)) {  // one chain over the patch, (ky, kx, c), zeros outside the input
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
        const bool inside = iy >= 0 && iy < p.h && ix >= 0 && ix < p.w;
        for (int64_t c = 0; c < p.c; ++c)
          acc = fmaf(inside ? x_image[(iy * p.w + ix) * p.c + c] : 0.0f, w[((k * p.c + c) * p.kh + ky) * p.kw + kx], acc);
      }
    }
    return acc;
  }
  const float* image = x_image + g * p.c_per_group;
  const float* taps = w + k * p.c_per_group * p.kh * p.kw;
  if (p.c_per_group == 1 && p.k_per_group == 1) {  // depthwise: one FMA chain over the taps inside, (ky, kx) order
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      if (iy < 0 || iy >= p.h) continue;
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
        if (ix >= 0 && ix < p.w) acc = fmaf(image[(iy * p.w + ix) * p.c], taps[ky * p.kw + kx], acc);
      }
    }
    return acc;
  }
  for (int64_t c0 = 0; c0 < p.c_per_group; c0 += kConvChannelBlock) {
    const int64_t c1 = c0 + kConvChannelBlock < p.c_per_group ? c0 + kConvChannelBlock : p.c_per_group;
    float partial = 0.0f;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      if (iy < 0 || iy >= p.h) continue;
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
        const bool inside = ix >= 0 && ix < p.w;
        const float* pixel = inside ? image + (iy * p.w + ix) * p.c : nullptr;
        const int64_t t = ky * p.kw + kx;
        for (int64_t c = c0; c < c1; ++c)
          partial = fmaf(inside ? pixel[c] : 0.0f, taps[c * p.kh * p.kw + t], partial);
      }
    }
    acc += partial;
  }
  return acc;
}

// One input and one output channel per group: each output row sums its taps
// straight from the input.
HEXIR_PLAN_FN bool conv2d_is_depthwise(const Conv2dPlan& p) { return p.c_per_group == 1 && p.k_per_group == 1; }
// 1x1, stride 1, no padding: the image is the patch matrix.
HEXIR_PLAN_FN bool conv2d_is_plain_gemm(const Conv2dPlan& p) {
  return p.kh == 1 && p.kw == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 && p.pad_left == 0 &&
         p.oh == p.h && p.ow == p.w;
}

// separable_conv2d: the depthwise conv2d (c -> c) and the 1x1 (c -> k) over
// its result, each planned as the conv2d it replaces (the 1x1 with the
// residual, when there is one).
struct SeparableConv2dPlan {
  Conv2dPlan depthwise;
  Conv2dPlan pointwise;
};
// The most floats of one output row of the depthwise's result (c * ow) a
// separable_conv2d holds: a cpu thread keeps rows of it in its scratch.
inline constexpr int64_t kSeparableMaxRowFloats = 8192;

// conv_transpose, NCHW: x [n, c, h, w], weights [c, k / groups, kh, kw],
// optional bias [k], output [n, k, oh, ow]. Output (oy, ox) of channel k in
// group g sums x[ci, iy, ix] * w[ci, k % k_per_group, ky, kx] over the group's
// input channels ci and the taps with iy * stride_h = oy + pad_top - ky *
// dilation_h (likewise x), in float; then the bias. The order of the sum is
// the backend's: (ci, ky, kx) in one chain (conv_transpose_element), or on the
// cpu a GEMM over ci per tap, then the taps in (ky, kx) order; the two agree
// within rounding.
struct ConvTransposePlan {
  int64_t n, c, h, w;
  int64_t k, oh, ow;
  int64_t kh, kw;
  int64_t stride_h, stride_w;
  int64_t pad_top, pad_left;
  int64_t dilation_h, dilation_w;
  int64_t groups;
  int64_t c_per_group, k_per_group;
  int64_t has_bias;
  Epilogue epilogue;  // fused activation, after the bias
};

// The value of one conv_transpose output element (before the bias), summed in
// (ci, ky, kx) order: the cuda kernel's loop and the cpu's fallback when it
// has no workspace. x_image points at image n's channel 0, w at the weights,
// k_in_group the channel within its group g.
HEXIR_PLAN_FN float conv_transpose_element(const ConvTransposePlan& p, const float* x_image, const float* w,
                                           int64_t g, int64_t k_in_group, int64_t oy, int64_t ox) {
  float acc = 0.0f;
  for (int64_t ci = g * p.c_per_group; ci < (g + 1) * p.c_per_group; ++ci) {
    const float* plane = x_image + ci * p.h * p.w;
    const float* taps = w + (ci * p.k_per_group + k_in_group) * p.kh * p.kw;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t ty = oy + p.pad_top - ky * p.dilation_h;
      if (ty < 0) break;  // only smaller from here on
      if (ty % p.stride_h != 0) continue;
      const int64_t iy = ty / p.stride_h;
      if (iy >= p.h) continue;
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const int64_t tx = ox + p.pad_left - kx * p.dilation_w;
        if (tx < 0) break;
        if (tx % p.stride_w != 0) continue;
        const int64_t ix = tx / p.stride_w;
        if (ix >= p.w) continue;
        acc += plane[iy * p.w + ix] * taps[ky * p.kw + kx];
      }
    }
  }
  return acc;
}

// max_pool / average_pool, NCHW: x [n, c, h, w], output [n, c, oh, ow]. Output
// (oy, ox) reads taps (oy * stride_h - pad_top + ky * dilation_h, ...) for ky <
// kh, kx < kw; those inside the input count. average: the sum (in double, ky
// then kx order) over the taps inside the input, divided by their number, or
// with count_include_pad by the taps inside [-pad_top, h + pad_bottom) x
// [-pad_left, w + pad_right). max (is_max 1): NaN if any tap is NaN, -inf
// when no tap is inside.
struct Pool2dPlan {
  int64_t n, c, h, w;
  int64_t oh, ow;
  int64_t kh, kw;
  int64_t stride_h, stride_w;
  int64_t pad_top, pad_left, pad_bottom, pad_right;
  int64_t dilation_h, dilation_w;
  int64_t count_include_pad;
  int64_t is_max;
  int64_t channels_last;  // x [N,H,W,C] and the result [N,OH,OW,C]: element (y, x, c) at (y * w + x) * c + c
};

// The taps of one window dim that land in [lo, hi): ky in [*first, *last) for
// a window starting at `start` with `k` taps `d` apart (d >= 1). Plain integer
// arithmetic, shared by the kernels of every backend.
HEXIR_PLAN_FN void pool_tap_range(int64_t start, int64_t d, int64_t k, int64_t lo, int64_t hi, int64_t* first,
                                  int64_t* last) {
  // start + ky * d >= lo  <=>  ky >= ceil((lo - start) / d)
  int64_t f = start >= lo ? 0 : (lo - start + d - 1) / d;
  // start + ky * d < hi  <=>  ky < ceil((hi - start) / d)
  int64_t l = start >= hi ? 0 : (hi - start + d - 1) / d;
  if (l > k) l = k;
  if (f > l) f = l;
  *first = f;
  *last = l;
}

// resize, NCHW: x [n, c, h, w] to [n, c, oh, ow]. Output (y, x) samples the
// input at resize_source(coordinate_mode, ., scale, in, out) per dim (in
// double, scale = out / in): nearest (mode 0) takes the element nearest_mode
// rounds it to, clamped to the input; linear (mode 1) clamps the coordinate to
// [0, in - 1] and blends the two neighbours of each dim (in double).
struct ResizePlan {
  int64_t n, c, h, w;
  int64_t oh, ow;
  int32_t mode;
  int32_t coordinate_mode;
  int32_t nearest_mode;
  int32_t pad;
  double scale_h, scale_w;
};

// floor of a double well inside the int64 range, without <cmath>.
HEXIR_PLAN_FN int64_t plan_floor(double v) {
  const int64_t t = static_cast<int64_t>(v);
  return static_cast<double>(t) > v ? t - 1 : t;
}

// ONNX Resize's coordinate_transformation_mode: the input coordinate of output index x.
HEXIR_PLAN_FN double resize_source(int32_t coordinate_mode, int64_t x, double scale, int64_t in,
                                   int64_t out) {
  const double xd = static_cast<double>(x);
  switch (coordinate_mode) {
    case 1: {  // align_corners, over the unrounded resized length in * scale (as ONNX defines it)
      const double length = static_cast<double>(in) * scale;
      return out == 1 || length == 1.0 ? 0.0 : xd * static_cast<double>(in - 1) / (length - 1.0);
    }
    case 2:  // asymmetric
      return xd / scale;
    case 3:  // pytorch_half_pixel
      return out > 1 ? (xd + 0.5) / scale - 0.5 : 0.0;
    case 4:  // tf_half_pixel_for_nn
      return (xd + 0.5) / scale;
    default:  // half_pixel
      return (xd + 0.5) / scale - 0.5;
  }
}

// nearest_mode: round_prefer_floor (ties down), round_prefer_ceil (ties up),
// floor, ceil; clamped to [0, in - 1].
HEXIR_PLAN_FN int64_t resize_nearest(int32_t nearest_mode, double v, int64_t in) {
  int64_t i;
  switch (nearest_mode) {
    case 1:
      i = plan_floor(v + 0.5);
      break;
    case 2:
      i = plan_floor(v);
      break;
    case 3:
      i = -plan_floor(-v);
      break;
    default:
      i = -plan_floor(0.5 - v);
      break;  // ceil(v - 0.5)
  }
  return i < 0 ? 0 : (i >= in ? in - 1 : i);
}

// linear: the coordinate clamped to [0, in - 1], its two neighbours and the
// weight of the second.
HEXIR_PLAN_FN void resize_linear_taps(double v, int64_t in, int64_t* i0, int64_t* i1, double* frac) {
  const double top = static_cast<double>(in - 1);
  v = v < 0.0 ? 0.0 : (v > top ? top : v);
  const int64_t i = plan_floor(v);
  *i0 = i;
  *i1 = i + 1 < in ? i + 1 : in - 1;
  *frac = v - static_cast<double>(i);
}

// The bilinear blend of a (y0, x0), b (y0, x1), c (y1, x0), d (y1, x1), in double.
HEXIR_PLAN_FN double resize_blend(double a, double b, double c, double d, double dy, double dx) {
  return (1.0 - dy) * ((1.0 - dx) * a + dx * b) + dy * ((1.0 - dx) * c + dx * d);
}

// ---- bounded dynamic shapes -----------------------------------------------------
// Each plan is the bound's; the kernel writes the actual extent (an int64) to
// its last output and zero-fills its result past it.

// nonzero: x of `rank` dims (`dims`), `count` elements of `element_size`
// bytes; float_sign: the top bit of an element is a sign that does not make
// it non-zero (-0.0). Result i64[rank, count] (padded).
// `bound`: the result's columns (count, or less given one: --dim-bound).
struct NonZeroPlan {
  int64_t count;
  int64_t bound;
  int64_t rank;
  int64_t element_size;
  int64_t float_sign;
  int64_t dims[kMaxRank];
};

// non_max_suppression: `batches` x `classes` x `boxes`; at most
// `per_class` kept per batch and class (the bound); result rows
// [b, c, box], `batches * classes * per_class` of them.
// `rows`: the result's bound (batches * classes * per_class, or less given one).
struct NmsPlan {
  int64_t batches, classes, boxes, per_class;
  int64_t center_point_box;
  int64_t rows;
};

// compress: x viewed as [outer, axis_dim, inner_bytes]; `cond_len` entries
// of the condition are read (<= axis_dim); the result is [outer, bound,
// inner_bytes], bound = cond_len.
// `bound` <= cond_len: the result's rows (less given one: --dim-bound).
struct CompressPlan {
  int64_t outer, axis_dim, inner_bytes, cond_len, bound;
};

// compact: x viewed as [outer, bound, inner_bytes] with the actual extent
// n <= bound along the middle; y is [outer, n, inner_bytes] row-major.
struct CompactPlan {
  int64_t outer, bound, inner_bytes;
};

// The IoU test of non_max_suppression (ONNX, as onnxruntime computes it),
// in two steps a kernel may cache the first of: a box's corners (x0, y0,
// x1, y1, ordered) and area, then whether two boxes overlap by more than
// `threshold`.
struct NmsBox {
  float x0, y0, x1, y1, area;
};
HEXIR_PLAN_FN NmsBox nms_box(const float* a, int64_t center_point_box) {
  NmsBox b;
  if (center_point_box == 0) {  // [y1, x1, y2, x2], either diagonal
    b.y0 = a[0] < a[2] ? a[0] : a[2], b.y1 = a[0] < a[2] ? a[2] : a[0];
    b.x0 = a[1] < a[3] ? a[1] : a[3], b.x1 = a[1] < a[3] ? a[3] : a[1];
  } else {  // [x_center, y_center, width, height]
    b.x0 = a[0] - a[2] / 2.0f, b.x1 = a[0] + a[2] / 2.0f, b.y0 = a[1] - a[3] / 2.0f, b.y1 = a[1] + a[3] / 2.0f;
  }
  b.area = (b.x1 - b.x0) * (b.y1 - b.y0);
  return b;
}
HEXIR_PLAN_FN bool nms_overlaps(const NmsBox& a, const NmsBox& b, float threshold) {
  const float ix0 = a.x0 > b.x0 ? a.x0 : b.x0, ix1 = a.x1 < b.x1 ? a.x1 : b.x1;
  const float iy0 = a.y0 > b.y0 ? a.y0 : b.y0, iy1 = a.y1 < b.y1 ? a.y1 : b.y1;
  if (ix1 <= ix0 || iy1 <= iy0) return false;
  const float inter = (ix1 - ix0) * (iy1 - iy0);
  const float uni = a.area + b.area - inter;
  if (inter <= 0.0f || a.area <= 0.0f || b.area <= 0.0f || uni <= 0.0f) return false;
  return inter / uni > threshold;
}
// Whether boxes a and b (4 floats each) overlap by more than `threshold`.
HEXIR_PLAN_FN bool nms_suppresses(const float* a, const float* b, int64_t center_point_box, float threshold) {
  return nms_overlaps(nms_box(a, center_point_box), nms_box(b, center_point_box), threshold);
}

}  // namespace hexir::ops
