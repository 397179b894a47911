// Elementwise kernels: binary ops with numpy broadcasting, unary maps, where
// and cast, with the semantics of hal/cpu/elementwise.cc. Each thread reads
// element i of the inputs before writing element i of the output, so an output
// that shares storage with a same-shaped input is safe.
#include "common.cuh"

namespace hexir_kernels {

struct AddOp { __device__ static float apply(float a, float b) { return a + b; } };
struct SubOp { __device__ static float apply(float a, float b) { return a - b; } };
struct MulOp { __device__ static float apply(float a, float b) { return a * b; } };
struct DivOp { __device__ static float apply(float a, float b) { return a / b; } };
// numpy.maximum/minimum propagate NaN from either side.
struct MaximumOp { __device__ static float apply(float a, float b) { return (a > b || is_nan(a)) ? a : b; } };
struct MinimumOp { __device__ static float apply(float a, float b) { return (a < b || is_nan(a)) ? a : b; } };

// numpy.power.
struct PowOp { __device__ static float apply(float a, float b) { return powf(a, b); } };
// Comparisons: 1 or 0; any comparison with NaN is false.
struct EqualOp { template <typename T> __device__ static uint8_t apply(T a, T b) { return a == b; } };
struct LessOp { template <typename T> __device__ static uint8_t apply(T a, T b) { return a < b; } };
struct GreaterOp { template <typename T> __device__ static uint8_t apply(T a, T b) { return a > b; } };

// The activations are defined once in ops/plans.h (shared with the cpu
// kernels and the fused conv2d / matmul epilogues).
struct ReluOp { __device__ static float apply(float x) { return hexir::ops::relu_of(x); } };
struct GeluErfOp { __device__ static float apply(float x) { return hexir::ops::gelu_erf_of(x); } };
struct GeluTanhOp { __device__ static float apply(float x) { return hexir::ops::gelu_tanh_of(x); } };
struct SigmoidOp { __device__ static float apply(float x) { return hexir::ops::sigmoid_of(x); } };
struct SiluOp { __device__ static float apply(float x) { return hexir::ops::silu_of(x); } };
struct TanhOp { __device__ static float apply(float x) { return hexir::ops::tanh_of(x); } };
struct ExpOp { __device__ static float apply(float x) { return expf(x); } };
struct SqrtOp { __device__ static float apply(float x) { return sqrtf(x); } };
// 1/sqrt rather than the approximate rsqrtf, to match the cpu kernel.
struct RsqrtOp { __device__ static float apply(float x) { return 1.0f / sqrtf(x); } };
struct NegOp { __device__ static float apply(float x) { return -x; } };
struct LeakyReluOp {
  __device__ static float apply(float x, float alpha, float) { return hexir::ops::leaky_relu_of(x, alpha); }
};
struct ClipOp {
  __device__ static float apply(float x, float lo, float hi) { return hexir::ops::clip_of(x, lo, hi); }
};
struct HardSigmoidOp {
  __device__ static float apply(float x, float alpha, float beta) {
    return hexir::ops::hard_sigmoid_of(x, alpha, beta);
  }
};
struct HardSwishOp { __device__ static float apply(float x) { return hexir::ops::hard_swish_of(x); } };
struct ErfOp { __device__ static float apply(float x) { return hexir::ops::erf_of(x); } };
struct LogOp { __device__ static float apply(float x) { return logf(x); } };
struct AbsOp { __device__ static float apply(float x) { return fabsf(x); } };
struct ReciprocalOp { __device__ static float apply(float x) { return 1.0f / x; } };
struct SoftplusOp { __device__ static float apply(float x) { return hexir::ops::softplus_of(x); } };

// BinaryPlan modes 0-2 are flat loops; 3 (general) and 4 (one element, rank 0)
// walk the merged dims.
template <typename Op>
__device__ void binary(const BinaryParams& p) {  // add's fused activation: none for the others
  const hexir::ops::BinaryPlan& q = p.plan;
  const int64_t stride = global_stride();
  switch (q.mode) {
    case 0:
      for (int64_t i = global_index(); i < q.n; i += stride) p.out[i] = hexir::ops::apply_epilogue(q.epilogue, Op::apply(p.a[i], p.b[i]));
      break;
    case 1: {
      const float b = p.b[0];
      for (int64_t i = global_index(); i < q.n; i += stride) p.out[i] = hexir::ops::apply_epilogue(q.epilogue, Op::apply(p.a[i], b));
      break;
    }
    case 2: {
      const float a = p.a[0];
      for (int64_t i = global_index(); i < q.n; i += stride) p.out[i] = hexir::ops::apply_epilogue(q.epilogue, Op::apply(a, p.b[i]));
      break;
    }
    default:
      for (int64_t i = global_index(); i < q.n; i += stride) {
        int64_t rest = i, offset_a = 0, offset_b = 0;
        for (int d = q.rank - 1; d >= 0; --d) {
          const int64_t index = rest % q.dims[d];
          rest /= q.dims[d];
          offset_a += index * q.stride_a[d];
          offset_b += index * q.stride_b[d];
        }
        p.out[i] = hexir::ops::apply_epilogue(q.epilogue, Op::apply(p.a[offset_a], p.b[offset_b]));
      }
      break;
  }
}

// The binary walk over operands of T, results of R: out = Op::apply(a, b).
template <typename Op, typename T, typename R>
__device__ void binary_walk(const hexir::ops::BinaryPlan& q, const T* a, const T* b, R* out) {
  const int64_t stride = global_stride();
  switch (q.mode) {
    case 0:
      for (int64_t i = global_index(); i < q.n; i += stride) out[i] = Op::apply(a[i], b[i]);
      break;
    case 1:
      for (int64_t i = global_index(); i < q.n; i += stride) out[i] = Op::apply(a[i], b[0]);
      break;
    case 2:
      for (int64_t i = global_index(); i < q.n; i += stride) out[i] = Op::apply(a[0], b[i]);
      break;
    default:
      for (int64_t i = global_index(); i < q.n; i += stride) {
        int64_t rest = i, offset_a = 0, offset_b = 0;
        for (int d = q.rank - 1; d >= 0; --d) {
          const int64_t index = rest % q.dims[d];
          rest /= q.dims[d];
          offset_a += index * q.stride_a[d];
          offset_b += index * q.stride_b[d];
        }
        out[i] = Op::apply(a[offset_a], b[offset_b]);
      }
      break;
  }
}

// The comparisons: the binary walk over operands of T, bool results.
template <typename Op, typename T>
__device__ void compare_typed(const CompareParams& p) {
  binary_walk<Op>(p.plan, static_cast<const T*>(p.a), static_cast<const T*>(p.b), p.out);
}

// Integer arithmetic (ops/plans.h's int_*_of rules: a zero divisor gives 0,
// the cpu kernel fails the invoke instead; docs/cuda.md).
struct IntAddOp { template <typename T> __device__ static T apply(T a, T b) { return hexir::ops::int_add_of(a, b); } };
struct IntSubOp { template <typename T> __device__ static T apply(T a, T b) { return hexir::ops::int_sub_of(a, b); } };
struct IntMulOp { template <typename T> __device__ static T apply(T a, T b) { return hexir::ops::int_mul_of(a, b); } };
struct IntDivOp { template <typename T> __device__ static T apply(T a, T b) { return hexir::ops::int_div_of(a, b); } };
struct IntMaximumOp { template <typename T> __device__ static T apply(T a, T b) { return a > b ? a : b; } };
struct IntMinimumOp { template <typename T> __device__ static T apply(T a, T b) { return a < b ? a : b; } };
struct IntModOp { template <typename T> __device__ static T apply(T a, T b) { return hexir::ops::int_mod_of(a, b, 0); } };
struct IntFmodOp { template <typename T> __device__ static T apply(T a, T b) { return hexir::ops::int_mod_of(a, b, 1); } };
struct IntPowOp { template <typename T> __device__ static T apply(T a, T b) { return hexir::ops::int_pow_of(a, b); } };

// One kernel per dtype; the switch on the operator is uniform across the grid.
template <typename T>
__device__ void int_binary(const IntBinaryParams& p) {
  using namespace hexir::hal::cuda;
  const T* a = static_cast<const T*>(p.a);
  const T* b = static_cast<const T*>(p.b);
  T* out = static_cast<T*>(p.out);
  switch (p.op) {
    case kIntAdd: binary_walk<IntAddOp>(p.plan, a, b, out); break;
    case kIntSub: binary_walk<IntSubOp>(p.plan, a, b, out); break;
    case kIntMul: binary_walk<IntMulOp>(p.plan, a, b, out); break;
    case kIntDiv: binary_walk<IntDivOp>(p.plan, a, b, out); break;
    case kIntMaximum: binary_walk<IntMaximumOp>(p.plan, a, b, out); break;
    case kIntMinimum: binary_walk<IntMinimumOp>(p.plan, a, b, out); break;
    case kIntMod:
      if (p.plan.variant == 1) binary_walk<IntFmodOp>(p.plan, a, b, out);
      else binary_walk<IntModOp>(p.plan, a, b, out);
      break;
    case kIntPow: binary_walk<IntPowOp>(p.plan, a, b, out); break;
    default: break;
  }
}

// Logical maps on bool bytes: any non-zero byte is true; results 0 or 1.
struct AndOp { __device__ static uint8_t apply(uint8_t a, uint8_t b) { return (a != 0) & (b != 0); } };
struct OrOp { __device__ static uint8_t apply(uint8_t a, uint8_t b) { return (a != 0) | (b != 0); } };
struct XorOp { __device__ static uint8_t apply(uint8_t a, uint8_t b) { return (a != 0) ^ (b != 0); } };

struct IntNegOp { template <typename T> __device__ static T apply(T x) { return hexir::ops::int_neg_of(x); } };
struct IntAbsOp { template <typename T> __device__ static T apply(T x) { return hexir::ops::int_abs_of(x); } };
struct SignOp { template <typename T> __device__ static T apply(T x) { return hexir::ops::sign_of(x); } };
struct CeilOp { __device__ static float apply(float x) { return ceilf(x); } };
struct FloorOp { __device__ static float apply(float x) { return floorf(x); } };
struct RoundOp { __device__ static float apply(float x) { return hexir::ops::round_half_even_of(x); } };
struct FmodOp { __device__ static float apply(float a, float b) { return fmodf(a, b); } };
struct LessOrEqualOp { template <typename T> __device__ static uint8_t apply(T a, T b) { return a <= b; } };
struct GreaterOrEqualOp { template <typename T> __device__ static uint8_t apply(T a, T b) { return a >= b; } };

// One kernel per comparison; the dtype switch is uniform across the grid.
template <typename Op>
__device__ void compare(const CompareParams& p) {
  using namespace hexir::hal::cuda;
  switch (p.dtype) {
    case kCastF32: compare_typed<Op, float>(p); break;
    case kCastI32: compare_typed<Op, int32_t>(p); break;
    case kCastI64: compare_typed<Op, int64_t>(p); break;
    default: break;
  }
}

template <typename Op, typename T>
__device__ void unary_walk(const hexir::ops::UnaryPlan& q, const T* in, T* out) {
  const int64_t stride = global_stride();
  if (q.rank > 0) {  // a strided view (docs/views.md)
    for (int64_t i = global_index(); i < q.n; i += stride)
      out[i] = Op::apply(in[hexir::ops::strided_element(q.dims, q.stride, q.rank, i)]);
    return;
  }
  for (int64_t i = global_index(); i < q.n; i += stride) out[i] = Op::apply(in[i]);
}

template <typename Op>
__device__ void unary(const UnaryParams& p) {
  unary_walk<Op>(p.plan, p.in, p.out);
}

template <typename T>
__device__ void int_unary(const IntUnaryParams& p) {
  using namespace hexir::hal::cuda;
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
  switch (p.op) {
    case kIntNeg: unary_walk<IntNegOp>(p.plan, in, out); break;
    case kIntAbs: unary_walk<IntAbsOp>(p.plan, in, out); break;
    case kIntSign: unary_walk<SignOp>(p.plan, in, out); break;
    default: break;
  }
}

// The plan's float parameters a, b, as floats.
template <typename Op>
__device__ void unary_floats(const UnaryParams& p) {
  const float a = static_cast<float>(p.plan.a), b = static_cast<float>(p.plan.b);
  const int64_t stride = global_stride();
  if (p.plan.rank > 0) {  // a strided view (docs/views.md)
    for (int64_t i = global_index(); i < p.plan.n; i += stride)
      p.out[i] = Op::apply(p.in[hexir::ops::strided_element(p.plan.dims, p.plan.stride, p.plan.rank, i)], a, b);
    return;
  }
  for (int64_t i = global_index(); i < p.plan.n; i += stride) p.out[i] = Op::apply(p.in[i], a, b);
}

// The unary math and ONNX activations: out[i] = R(ops::math_of<F>(x, a, b)).
template <hexir::ops::MathFn F, typename R>
__device__ void math_walk(const MathParams& p) {
  const hexir::ops::UnaryPlan& q = p.plan;
  const float a = static_cast<float>(q.a), b = static_cast<float>(q.b);
  R* out = static_cast<R*>(p.out);
  const int64_t stride = global_stride();
  for (int64_t i = global_index(); i < q.n; i += stride) {
    const float x = q.rank > 0 ? p.in[hexir::ops::strided_element(q.dims, q.stride, q.rank, i)] : p.in[i];
    out[i] = static_cast<R>(hexir::ops::math_of<F>(x, a, b));
  }
}

struct PReluOp { __device__ static float apply(float x, float slope) { return hexir::ops::prelu_of(x, slope); } };

// ---- where ------------------------------------------------------------------

// Any non-zero condition byte selects x.
template <typename Element>
__device__ void where(const WhereParams& p) {
  const hexir::ops::WherePlan& q = p.plan;
  const Element* x = static_cast<const Element*>(p.x);
  const Element* y = static_cast<const Element*>(p.y);
  Element* out = static_cast<Element*>(p.out);
  const int64_t stride = global_stride();
  if (q.rank == 0) {
    for (int64_t i = global_index(); i < q.n; i += stride) out[i] = p.cond[i] ? x[i] : y[i];
    return;
  }
  for (int64_t i = global_index(); i < q.n; i += stride) {
    int64_t rest = i, oc = 0, ox = 0, oy = 0;
    for (int d = q.rank - 1; d >= 0; --d) {
      const int64_t index = rest % q.dims[d];
      rest /= q.dims[d];
      oc += index * q.stride_c[d];
      ox += index * q.stride_x[d];
      oy += index * q.stride_y[d];
    }
    out[i] = p.cond[oc] ? x[ox] : y[oy];
  }
}

// ---- cast -------------------------------------------------------------------

struct Half {
  uint16_t bits;
};
struct BHalf {  // bfloat16
  uint16_t bits;
};
// bool as its byte: read, any non-zero byte is true; written, 0 or 1.
struct Bool8 {
  uint8_t byte;
};

// 0: f32, 1: f16, 2: bool, 3: an integer, 4: bf16.
template <typename T> struct Kind { static constexpr int value = 3; };
template <> struct Kind<float> { static constexpr int value = 0; };
template <> struct Kind<Half> { static constexpr int value = 1; };
template <> struct Kind<Bool8> { static constexpr int value = 2; };
template <> struct Kind<BHalf> { static constexpr int value = 4; };

template <typename T> struct Limits;
template <> struct Limits<int32_t> {
  __device__ static int32_t lowest() { return -2147483647 - 1; }
  __device__ static int32_t highest() { return 2147483647; }
};
template <> struct Limits<int64_t> {
  __device__ static int64_t lowest() { return -9223372036854775807LL - 1; }
  __device__ static int64_t highest() { return 9223372036854775807LL; }
};
template <> struct Limits<uint8_t> {
  __device__ static uint8_t lowest() { return 0; }
  __device__ static uint8_t highest() { return 255; }
};

template <typename From>
__device__ __forceinline__ float as_float(From v) {
  if constexpr (Kind<From>::value == 1) return half_bits_to_float(v.bits);
  else if constexpr (Kind<From>::value == 4) return bfloat16_bits_to_float(v.bits);
  else if constexpr (Kind<From>::value == 2) return v.byte != 0 ? 1.0f : 0.0f;
  else return static_cast<float>(v);
}

// The cpu kernel's conversion rules: floats to integers truncate toward zero,
// saturating, NaN to 0; integers wrap; to bool is != 0 (NaN is true); bool is
// 0 or 1; f16 goes through float (so even f16 to f16 quiets a NaN, as on the cpu).
template <typename To, typename From>
__device__ __forceinline__ To convert(From v) {
  constexpr int from = Kind<From>::value, to = Kind<To>::value;
  if constexpr (from == 2) {
    if constexpr (to == 1) return Half{static_cast<uint16_t>(v.byte != 0 ? 0x3c00 : 0)};
    else if constexpr (to == 4) return BHalf{static_cast<uint16_t>(v.byte != 0 ? 0x3f80 : 0)};
    else if constexpr (to == 2) return Bool8{static_cast<uint8_t>(v.byte != 0)};
    else return static_cast<To>(v.byte != 0 ? 1 : 0);
  } else if constexpr (to == 2) {
    if constexpr (from == 1 || from == 4) return Bool8{static_cast<uint8_t>((v.bits & 0x7fff) != 0)};
    else return Bool8{static_cast<uint8_t>(v != From(0))};
  } else if constexpr (to == 1) {
    return Half{float_to_half_bits(as_float(v))};
  } else if constexpr (to == 4) {
    return BHalf{float_to_bfloat16_bits(as_float(v))};
  } else if constexpr (to == 0) {
    return as_float(v);
  } else if constexpr (from <= 1 || from == 4) {
    const double x = static_cast<double>(as_float(v));
    if (x != x) return To(0);
    if (x <= static_cast<double>(Limits<To>::lowest())) return Limits<To>::lowest();
    if (x >= static_cast<double>(Limits<To>::highest())) return Limits<To>::highest();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(v);
  }
}

template <typename From, typename To>
__device__ void cast_loop(const CastParams& p) {
  const From* in = static_cast<const From*>(p.in);
  To* out = static_cast<To*>(p.out);
  const int64_t stride = global_stride();
  for (int64_t i = global_index(); i < p.plan.n; i += stride) out[i] = convert<To>(in[i]);
}

template <typename From>
__device__ void cast_from(const CastParams& p) {
  using namespace hexir::hal::cuda;
  switch (p.plan.to) {
    case kCastF32: cast_loop<From, float>(p); break;
    case kCastF16: cast_loop<From, Half>(p); break;
    case kCastBF16: cast_loop<From, BHalf>(p); break;
    case kCastI32: cast_loop<From, int32_t>(p); break;
    case kCastI64: cast_loop<From, int64_t>(p); break;
    case kCastU8: cast_loop<From, uint8_t>(p); break;
    case kCastBool: cast_loop<From, Bool8>(p); break;
    default: break;
  }
}

}  // namespace hexir_kernels

#define HEXIR_BINARY_KERNEL(name, op) \
  extern "C" __global__ void name(BinaryParams p) { hexir_kernels::binary<hexir_kernels::op>(p); }
#define HEXIR_UNARY_KERNEL(name, op) \
  extern "C" __global__ void name(UnaryParams p) { hexir_kernels::unary<hexir_kernels::op>(p); }

HEXIR_BINARY_KERNEL(hexir_add, AddOp)
HEXIR_BINARY_KERNEL(hexir_sub, SubOp)
HEXIR_BINARY_KERNEL(hexir_mul, MulOp)
HEXIR_BINARY_KERNEL(hexir_div, DivOp)
HEXIR_BINARY_KERNEL(hexir_maximum, MaximumOp)
HEXIR_BINARY_KERNEL(hexir_minimum, MinimumOp)
HEXIR_BINARY_KERNEL(hexir_pow, PowOp)
HEXIR_UNARY_KERNEL(hexir_relu, ReluOp)
HEXIR_UNARY_KERNEL(hexir_gelu_erf, GeluErfOp)
HEXIR_UNARY_KERNEL(hexir_gelu_tanh, GeluTanhOp)
HEXIR_UNARY_KERNEL(hexir_silu, SiluOp)
HEXIR_UNARY_KERNEL(hexir_sigmoid, SigmoidOp)
HEXIR_UNARY_KERNEL(hexir_tanh, TanhOp)
HEXIR_UNARY_KERNEL(hexir_exp, ExpOp)
HEXIR_UNARY_KERNEL(hexir_sqrt, SqrtOp)
HEXIR_UNARY_KERNEL(hexir_rsqrt, RsqrtOp)
HEXIR_UNARY_KERNEL(hexir_neg, NegOp)
HEXIR_UNARY_KERNEL(hexir_hard_swish, HardSwishOp)
HEXIR_UNARY_KERNEL(hexir_erf, ErfOp)
HEXIR_UNARY_KERNEL(hexir_log, LogOp)
HEXIR_UNARY_KERNEL(hexir_abs, AbsOp)
HEXIR_UNARY_KERNEL(hexir_reciprocal, ReciprocalOp)
HEXIR_UNARY_KERNEL(hexir_softplus, SoftplusOp)
HEXIR_UNARY_KERNEL(hexir_sign, SignOp)
HEXIR_UNARY_KERNEL(hexir_ceil, CeilOp)
HEXIR_UNARY_KERNEL(hexir_floor, FloorOp)
HEXIR_UNARY_KERNEL(hexir_round, RoundOp)
HEXIR_BINARY_KERNEL(hexir_fmod, FmodOp)

extern "C" __global__ void hexir_int_binary_i32(IntBinaryParams p) { hexir_kernels::int_binary<int32_t>(p); }
extern "C" __global__ void hexir_int_binary_i64(IntBinaryParams p) { hexir_kernels::int_binary<int64_t>(p); }
extern "C" __global__ void hexir_int_unary_i32(IntUnaryParams p) { hexir_kernels::int_unary<int32_t>(p); }
extern "C" __global__ void hexir_int_unary_i64(IntUnaryParams p) { hexir_kernels::int_unary<int64_t>(p); }
extern "C" __global__ void hexir_logical(IntBinaryParams p) {
  using namespace hexir::hal::cuda;
  const uint8_t* a = static_cast<const uint8_t*>(p.a);
  const uint8_t* b = static_cast<const uint8_t*>(p.b);
  uint8_t* out = static_cast<uint8_t*>(p.out);
  switch (p.op) {
    case kLogicalAnd: hexir_kernels::binary_walk<hexir_kernels::AndOp>(p.plan, a, b, out); break;
    case kLogicalOr: hexir_kernels::binary_walk<hexir_kernels::OrOp>(p.plan, a, b, out); break;
    case kLogicalXor: hexir_kernels::binary_walk<hexir_kernels::XorOp>(p.plan, a, b, out); break;
    default: break;
  }
}

#define HEXIR_UNARY_FLOATS_KERNEL(name, op) \
  extern "C" __global__ void name(UnaryParams p) { hexir_kernels::unary_floats<hexir_kernels::op>(p); }
HEXIR_UNARY_FLOATS_KERNEL(hexir_leaky_relu, LeakyReluOp)
HEXIR_UNARY_FLOATS_KERNEL(hexir_clip, ClipOp)
HEXIR_UNARY_FLOATS_KERNEL(hexir_hard_sigmoid, HardSigmoidOp)

HEXIR_BINARY_KERNEL(hexir_prelu, PReluOp)

// One kernel for every MathFn: the switch is uniform across the grid and
// outside the element loop.
extern "C" __global__ void hexir_math(MathParams p) {
  using hexir::ops::MathFn;
  using hexir_kernels::math_walk;
  switch (static_cast<MathFn>(p.fn)) {
    case MathFn::kSin: math_walk<MathFn::kSin, float>(p); break;
    case MathFn::kCos: math_walk<MathFn::kCos, float>(p); break;
    case MathFn::kTan: math_walk<MathFn::kTan, float>(p); break;
    case MathFn::kAsin: math_walk<MathFn::kAsin, float>(p); break;
    case MathFn::kAcos: math_walk<MathFn::kAcos, float>(p); break;
    case MathFn::kAtan: math_walk<MathFn::kAtan, float>(p); break;
    case MathFn::kSinh: math_walk<MathFn::kSinh, float>(p); break;
    case MathFn::kCosh: math_walk<MathFn::kCosh, float>(p); break;
    case MathFn::kAsinh: math_walk<MathFn::kAsinh, float>(p); break;
    case MathFn::kAcosh: math_walk<MathFn::kAcosh, float>(p); break;
    case MathFn::kAtanh: math_walk<MathFn::kAtanh, float>(p); break;
    case MathFn::kElu: math_walk<MathFn::kElu, float>(p); break;
    case MathFn::kSelu: math_walk<MathFn::kSelu, float>(p); break;
    case MathFn::kCelu: math_walk<MathFn::kCelu, float>(p); break;
    case MathFn::kMish: math_walk<MathFn::kMish, float>(p); break;
    case MathFn::kSoftsign: math_walk<MathFn::kSoftsign, float>(p); break;
    case MathFn::kThresholdedRelu: math_walk<MathFn::kThresholdedRelu, float>(p); break;
    case MathFn::kShrink: math_walk<MathFn::kShrink, float>(p); break;
    case MathFn::kIsInf: math_walk<MathFn::kIsInf, uint8_t>(p); break;
    case MathFn::kIsNaN: math_walk<MathFn::kIsNaN, uint8_t>(p); break;
    default: break;
  }
}

extern "C" __global__ void hexir_where_1(WhereParams p) { hexir_kernels::where<uint8_t>(p); }
extern "C" __global__ void hexir_where_2(WhereParams p) { hexir_kernels::where<uint16_t>(p); }
extern "C" __global__ void hexir_where_4(WhereParams p) { hexir_kernels::where<uint32_t>(p); }
extern "C" __global__ void hexir_where_8(WhereParams p) { hexir_kernels::where<uint64_t>(p); }

// One kernel for every (from, to) pair: the switch is uniform across the grid
// and outside the element loop.
extern "C" __global__ void hexir_cast(CastParams p) {
  using namespace hexir::hal::cuda;
  switch (p.plan.from) {
    case kCastF32: hexir_kernels::cast_from<float>(p); break;
    case kCastF16: hexir_kernels::cast_from<hexir_kernels::Half>(p); break;
    case kCastBF16: hexir_kernels::cast_from<hexir_kernels::BHalf>(p); break;
    case kCastI32: hexir_kernels::cast_from<int32_t>(p); break;
    case kCastI64: hexir_kernels::cast_from<int64_t>(p); break;
    case kCastU8: hexir_kernels::cast_from<uint8_t>(p); break;
    case kCastBool: hexir_kernels::cast_from<hexir_kernels::Bool8>(p); break;
    default: break;
  }
}

namespace hexir_kernels {
template <typename Q>
__device__ void quantize_loop(const hexir::hal::cuda::QuantizeParams& p, int32_t lo, int32_t hi) {
  const hexir::ops::QuantizePlan& q = p.plan;
  const float* x = static_cast<const float*>(p.x);
  const Q* zero = static_cast<const Q*>(p.zero);
  Q* out = static_cast<Q*>(p.out);
  for (int64_t i = global_index(); i < q.n; i += global_stride()) {
    const int64_t c = (i / q.inner) % q.channels;
    out[i] = static_cast<Q>(hexir::ops::quantize_of(x[i], p.scale[c], zero[c], lo, hi));
  }
}
template <typename Q>
__device__ void dequantize_loop(const hexir::hal::cuda::QuantizeParams& p) {
  const hexir::ops::QuantizePlan& q = p.plan;
  const Q* x = static_cast<const Q*>(p.x);
  const Q* zero = static_cast<const Q*>(p.zero);
  float* out = static_cast<float*>(p.out);
  for (int64_t i = global_index(); i < q.n; i += global_stride()) {
    const int64_t c = (i / q.inner) % q.channels;
    out[i] = hexir::ops::dequantize_of(x[i], p.scale[c], zero[c]);
  }
}
}  // namespace hexir_kernels

// plan.quantized spells hexir::DType: 5 i8, 6 u8, 3 i32.
extern "C" __global__ void hexir_quantize_linear(hexir::hal::cuda::QuantizeParams p) {
  if (p.plan.quantized == 5) hexir_kernels::quantize_loop<int8_t>(p, -128, 127);
  else hexir_kernels::quantize_loop<uint8_t>(p, 0, 255);
}
extern "C" __global__ void hexir_dequantize_linear(hexir::hal::cuda::QuantizeParams p) {
  switch (p.plan.quantized) {
    case 5: hexir_kernels::dequantize_loop<int8_t>(p); break;
    case 6: hexir_kernels::dequantize_loop<uint8_t>(p); break;
    default: hexir_kernels::dequantize_loop<int32_t>(p); break;
  }
}

extern "C" __global__ void hexir_quantized_add(hexir::hal::cuda::QuantizedAddParams p) {
  for (int64_t i = hexir_kernels::global_index(); i < p.plan.n; i += hexir_kernels::global_stride())
    p.out[i] = hexir::ops::quantized_add_of(p.plan, p.a[i], p.b[i]);
}

extern "C" __global__ void hexir_lstm_cell(hexir::hal::cuda::LstmCellParams p) {
  const int64_t hidden = p.plan.hidden, n = p.plan.rows * hidden;
  for (int64_t e = hexir_kernels::global_index(); e < n; e += hexir_kernels::global_stride()) {
    const int64_t r = e / hidden, j = e % hidden;
    const float* g = p.gates + r * 4 * hidden + j;
    float c = p.c_prev[e];
    p.h[e] = hexir::ops::lstm_cell_of(g[0], g[hidden], g[2 * hidden], g[3 * hidden], c);
    p.c[e] = c;
  }
}

extern "C" __global__ void hexir_equal(CompareParams p) { hexir_kernels::compare<hexir_kernels::EqualOp>(p); }
extern "C" __global__ void hexir_less(CompareParams p) { hexir_kernels::compare<hexir_kernels::LessOp>(p); }
extern "C" __global__ void hexir_greater(CompareParams p) { hexir_kernels::compare<hexir_kernels::GreaterOp>(p); }
extern "C" __global__ void hexir_less_or_equal(CompareParams p) {
  hexir_kernels::compare<hexir_kernels::LessOrEqualOp>(p);
}
extern "C" __global__ void hexir_greater_or_equal(CompareParams p) {
  hexir_kernels::compare<hexir_kernels::GreaterOrEqualOp>(p);
}

// Any non-zero byte is true; the result is 0 or 1.
extern "C" __global__ void hexir_not(NotParams p) {
  const int64_t stride = hexir_kernels::global_stride();
  for (int64_t i = hexir_kernels::global_index(); i < p.plan.n; i += stride) p.out[i] = p.in[i] == 0;
}
