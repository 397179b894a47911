// Elementwise kernels: binary ops with numpy broadcasting (BinaryPlan), unary
// maps, where and cast.
//
// Every loop reads element i of each input before writing element i of the
// output and never revisits it, so an output that shares storage with an
// input of the same shape (the in-place pass) is safe.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "hexir/base/half.h"
#include "kernel_util.h"
#include "thread_pool.h"

namespace hexir::hal::cpu::internal {
namespace {

using ops::BinaryPlan;

// Runs op over one inner run of n elements; the strides are 0 (broadcast) or 1.
template <typename Op, typename T, typename R>
inline void binary_run(const T* a, int64_t sa, const T* b, int64_t sb, R* out, int64_t n) {
  // Separate loops for the stride patterns so each one vectorizes.
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = Op::apply(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const T bv = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = Op::apply(a[i], bv);
  } else if (sa == 0 && sb == 1) {
    const T av = a[0];
    for (int64_t i = 0; i < n; ++i) out[i] = Op::apply(av, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = Op::apply(a[i * sa], b[i * sb]);
  }
}

// Elementwise work is split over the pool in ranges of at least this many
// output elements (below it a thread's start costs more than it saves).
constexpr int64_t kMinRange = 1 << 15;
// Elements a fused activation follows the operator by (16 KiB of floats).
constexpr int64_t kEpilogueChunk = 1 << 12;

// Operands of T, results of R (bool results as bytes 0 or 1). Split over the
// pool by output elements (flat modes) or by inner runs (general mode).
template <typename Op, typename T, typename R>
void binary_typed(const KernelContext& context, const BinaryPlan& p, const T* pa, const T* pb, R* po) {
  // add's and mul's fused activation (or affine map), over each range just written (still in cache).
  const bool epilogue = std::is_same_v<R, float> && p.epilogue.activation != 0;
  auto finish = [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<R, float>) {
      if (!epilogue) return;
      if (p.epilogue.activation == static_cast<int32_t>(ops::Activation::kAffine)) {
        const float scale = p.epilogue.a, shift = p.epilogue.b;
        for (int64_t i = b; i < e; ++i) po[i] = ops::affine_of(po[i], scale, shift);
      } else {
        apply_epilogue(p.epilogue, po + b, 0, 1, e - b);
      }
    }
  };
  // A flat range in pieces of kEpilogueChunk when there is an epilogue, so
  // that it reads what was just written from L1, not from L2 or memory.
  auto flat = [&](int64_t sa, int64_t sb) {
    parallel_ranges(context, p.n, kMinRange, [&](int64_t b, int64_t e) {
      const int64_t step = epilogue ? kEpilogueChunk : e - b;
      for (int64_t i = b; i < e; i += step) {
        const int64_t end = std::min(e, i + step);
        binary_run<Op>(pa + i * sa, sa, pb + i * sb, sb, po + i, end - i);
        finish(i, end);
      }
    });
  };
  switch (p.mode) {
    case 0: return flat(1, 1);
    case 1: return flat(1, 0);
    case 2: return flat(0, 1);
    case 4:
      po[0] = Op::apply(pa[0], pb[0]);
      finish(0, 1);
      return;
    default: break;
  }
  if (p.n == 0) return;
  // General case: merged dims, the innermost one a contiguous run.
  const int32_t outer_rank = p.rank - 1;
  const int64_t inner = p.dims[outer_rank];
  const int64_t runs = p.n / inner;
  parallel_ranges(context, runs, std::max<int64_t>(1, kMinRange / inner), [&](int64_t begin, int64_t end) {
    int64_t index[kMaxRank] = {};
    for (int64_t rest = begin, i = outer_rank; i-- > 0;) {  // the multi-index of run `begin`
      index[i] = rest % p.dims[i];
      rest /= p.dims[i];
    }
    R* out = po + begin * inner;
    int64_t unfinished = begin * inner;  // the epilogue follows in pieces of about kEpilogueChunk
    for (int64_t run = begin; run < end; ++run) {
      int64_t offset_a = 0, offset_b = 0;
      for (int32_t i = 0; i < outer_rank; ++i) {
        offset_a += index[i] * p.stride_a[i];
        offset_b += index[i] * p.stride_b[i];
      }
      binary_run<Op>(pa + offset_a, p.stride_a[outer_rank], pb + offset_b, p.stride_b[outer_rank], out, inner);
      out += inner;
      if ((run + 1) * inner - unfinished >= kEpilogueChunk) {
        finish(unfinished, (run + 1) * inner);
        unfinished = (run + 1) * inner;
      }
      next_index(index, p.dims, outer_rank);
    }
    finish(unfinished, end * inner);
  });
}

template <typename Op>
Status binary(const KernelContext& context, const Dispatch& d) {
  binary_typed<Op>(context, plan_of<BinaryPlan>(d), input(d, 0), input(d, 1), output(d, 0));
  return ok_status();
}

// equal / less / greater on operands of T: bool results.
template <typename Op, typename T>
Status compare(const KernelContext& context, const Dispatch& d) {
  binary_typed<Op>(context, plan_of<BinaryPlan>(d), input<T>(d, 0), input<T>(d, 1), output<uint8_t>(d, 0));
  return ok_status();
}

// A strided input (UnaryPlan rank > 0: a view, docs/views.md): calls
// row(input offset, output offset, length, input stride) for each innermost
// row of the row-major output, rows split over the pool. The flat loops of
// row-major inputs stay as they are.
template <typename Row>
void strided_rows(const KernelContext& context, const ops::UnaryPlan& p, const Row& row) {
  if (p.n == 0) return;
  const int32_t outer_rank = p.rank - 1;
  const int64_t inner = p.dims[outer_rank], inner_stride = p.stride[outer_rank];
  parallel_ranges(context, p.n / inner, std::max<int64_t>(1, kMinRange / inner), [&](int64_t begin, int64_t end) {
    int64_t index[kMaxRank] = {};
    for (int64_t rest = begin, i = outer_rank; i-- > 0;) {  // the multi-index of row `begin`
      index[i] = rest % p.dims[i];
      rest /= p.dims[i];
    }
    for (int64_t r = begin; r < end; ++r) {
      int64_t offset = 0;
      for (int32_t i = 0; i < outer_rank; ++i) offset += index[i] * p.stride[i];
      row(offset, r * inner, inner, inner_stride);
      next_index(index, p.dims, outer_rank);
    }
  });
}

template <typename Op>
Status unary(const KernelContext& context, const Dispatch& d) {
  const ops::UnaryPlan& p = plan_of<ops::UnaryPlan>(d);
  const int64_t n = p.n;
  const float* in = input(d, 0);
  float* out = output(d, 0);
  if (p.rank > 0) {
    strided_rows(context, p, [&](int64_t from, int64_t to, int64_t length, int64_t stride) {
      for (int64_t j = 0; j < length; ++j) out[to + j] = Op::apply(in[from + j * stride]);
    });
    return ok_status();
  }
  parallel_ranges(context, n, kMinRange, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = Op::apply(in[i]);
  });
  return ok_status();
}

// Unary maps with the plan's float parameters a, b (as floats).
template <typename Op>
Status unary_floats(const KernelContext& context, const Dispatch& d) {
  const ops::UnaryPlan& p = plan_of<ops::UnaryPlan>(d);
  const float a = static_cast<float>(p.a), b = static_cast<float>(p.b);
  const float* in = input(d, 0);
  float* out = output(d, 0);
  if (p.rank > 0) {
    strided_rows(context, p, [&](int64_t from, int64_t to, int64_t length, int64_t stride) {
      for (int64_t j = 0; j < length; ++j) out[to + j] = Op::apply(in[from + j * stride], a, b);
    });
    return ok_status();
  }
  parallel_ranges(context, p.n, kMinRange, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = Op::apply(in[i], a, b);
  });
  return ok_status();
}

#if defined(__x86_64__) && defined(__GNUC__)
// ops::erf_of on 16 lanes: the same multiplies, adds and division in the same
// order, so the same bits (the clamp as max(-4, v) then min(4, .): NaN passes).
[[gnu::target("avx512f")]] inline __m512 horner_step(__m512 x2, __m512 acc, float c) {
  return _mm512_add_ps(_mm512_mul_ps(x2, acc), _mm512_set1_ps(c));
}

[[gnu::target("avx512f")]] inline __m512 erf16(__m512 v) {
  const __m512 x = _mm512_min_ps(_mm512_set1_ps(4.0f), _mm512_max_ps(_mm512_set1_ps(-4.0f), v));
  const __m512 x2 = _mm512_mul_ps(x, x);
  __m512 p = _mm512_add_ps(_mm512_mul_ps(x2, _mm512_set1_ps(-2.72614225801306e-10f)), _mm512_set1_ps(2.77068142495902e-08f));
  p = horner_step(x2, p, -2.10102402082508e-06f);
  p = horner_step(x2, p, -5.69250639462346e-05f);
  p = horner_step(x2, p, -7.34990630326855e-04f);
  p = horner_step(x2, p, -2.95459980854025e-03f);
  p = horner_step(x2, p, -1.60960333262415e-02f);
  p = _mm512_mul_ps(x, p);
  __m512 q = _mm512_add_ps(_mm512_mul_ps(x2, _mm512_set1_ps(-1.45660718464996e-05f)), _mm512_set1_ps(-2.13374055278905e-04f));
  q = horner_step(x2, q, -1.68282697438203e-03f);
  q = horner_step(x2, q, -7.37332916720468e-03f);
  q = horner_step(x2, q, -1.42647390514189e-02f);
  return _mm512_div_ps(p, q);
}

template <bool kGelu>
[[gnu::target("avx512f")]] void erf_block_avx512(const float* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(in + i);
    if constexpr (kGelu) {
      const __m512 e = erf16(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f)));
      _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x),
                                              _mm512_add_ps(_mm512_set1_ps(1.0f), e)));
    } else {
      _mm512_storeu_ps(out + i, erf16(x));
    }
  }
  for (; i < n; ++i) out[i] = kGelu ? ops::gelu_erf_of(in[i]) : ops::erf_of(in[i]);
}

// ops::hard_sigmoid_of / hard_swish_of on 16 lanes with the scalar bits:
// clamp01(v) is min(1, v) then max(0, .) (x86 min/max return the second
// operand on NaN, as the scalar comparisons do). A plain loop left these
// comparisons as branches, which mispredict on real activations.
[[gnu::target("avx512f")]] inline __m512 clamp01_16(__m512 v) {
  return _mm512_max_ps(_mm512_setzero_ps(), _mm512_min_ps(_mm512_set1_ps(1.0f), v));
}

template <bool kSwish>
[[gnu::target("avx512f")]] void hard_block_avx512(const float* in, float* out, int64_t n, float alpha, float beta) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(in + i);
    if constexpr (kSwish) {
      const __m512 t = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.0f / 6.0f)), _mm512_set1_ps(0.5f));
      _mm512_storeu_ps(out + i, _mm512_mul_ps(x, clamp01_16(t)));
    } else {
      const __m512 t = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(alpha), x), _mm512_set1_ps(beta));
      _mm512_storeu_ps(out + i, clamp01_16(t));
    }
  }
  for (; i < n; ++i) out[i] = kSwish ? ops::hard_swish_of(in[i]) : ops::hard_sigmoid_of(in[i], alpha, beta);
}

// ops::exp_of, sigmoid_of, silu_of, tanh_of and gelu_tanh_of on 16 lanes:
// the same multiplies, adds, divisions and bit steps in the same order, so
// the same bits (the clamp as max(-104, v) then min(89, .): NaN passes; the
// scale's integer steps unsigned, as there). tanh computes both of its
// ranges and keeps one per lane.
[[gnu::target("avx512f")]] inline __m512 exp16(__m512 v) {
  const __m512 x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), v));
  const __m512 shifted =
      _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _mm512_set1_ps(12582912.0f));
  const __m512 n = _mm512_sub_ps(shifted, _mm512_set1_ps(12582912.0f));
  __m512 r = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(0.693359375f)));
  r = _mm512_sub_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(-2.12194440e-4f)));
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_add_ps(_mm512_mul_ps(y, r), _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_add_ps(_mm512_mul_ps(y, r), _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_add_ps(_mm512_mul_ps(y, r), _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_add_ps(_mm512_mul_ps(y, r), _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_add_ps(_mm512_mul_ps(y, r), _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(y, r), r), r), _mm512_set1_ps(1.0f));
  const __m512i m = _mm512_sub_epi32(_mm512_castps_si512(shifted), _mm512_set1_epi32(0x4B400000 - 150));
  const __m512i half = _mm512_srli_epi32(m, 1);
  const __m512i bias = _mm512_set1_epi32(52);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(half, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_sub_epi32(m, half), bias), 23));
  return _mm512_mul_ps(_mm512_mul_ps(y, s1), s2);
}

[[gnu::target("avx512f")]] inline __m512 neg16(__m512 x) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
}

[[gnu::target("avx512f")]] inline __m512 tanh16(__m512 x) {
  const __m512i sign = _mm512_set1_epi32(INT32_MIN);
  const __m512 a = _mm512_castsi512_ps(_mm512_andnot_si512(sign, _mm512_castps_si512(x)));
  const __m512 z = _mm512_mul_ps(a, a);
  __m512 p = _mm512_set1_ps(-5.70498872745e-3f);
  p = _mm512_add_ps(_mm512_mul_ps(p, z), _mm512_set1_ps(2.06390887954e-2f));
  p = _mm512_add_ps(_mm512_mul_ps(p, z), _mm512_set1_ps(-5.37397155531e-2f));
  p = _mm512_add_ps(_mm512_mul_ps(p, z), _mm512_set1_ps(1.33314422036e-1f));
  p = _mm512_add_ps(_mm512_mul_ps(p, z), _mm512_set1_ps(-3.33332819422e-1f));
  const __m512 small = _mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(p, z), a), a);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 large =
      _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(exp16(_mm512_add_ps(a, a)), one)));
  const __mmask16 below = _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.625f), _CMP_LT_OQ);
  const __m512i t = _mm512_castps_si512(_mm512_mask_blend_ps(below, large, small));
  // copysignf(t, x): t's magnitude bits, x's sign.
  return _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_andnot_si512(sign, t), _mm512_and_si512(sign, _mm512_castps_si512(x))));
}
#endif

enum class Act { kSigmoid, kSilu, kTanh, kGeluTanh };

template <Act kAct>
inline float act_of(float x) {
  if constexpr (kAct == Act::kSigmoid) return ops::sigmoid_of(x);
  else if constexpr (kAct == Act::kSilu) return ops::silu_of(x);
  else if constexpr (kAct == Act::kTanh) return ops::tanh_of(x);
  else return ops::gelu_tanh_of(x);
}

#if defined(__x86_64__) && defined(__GNUC__)
template <Act kAct>
[[gnu::target("avx512f")]] void act_block_avx512(const float* in, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(in + i);
    __m512 y;
    if constexpr (kAct == Act::kSigmoid) {
      y = _mm512_div_ps(one, _mm512_add_ps(one, exp16(neg16(x))));
    } else if constexpr (kAct == Act::kSilu) {
      y = _mm512_div_ps(x, _mm512_add_ps(one, exp16(neg16(x))));
    } else if constexpr (kAct == Act::kTanh) {
      y = tanh16(x);
    } else {
      const __m512 cube = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), x), x), x);
      const __m512 t = tanh16(_mm512_mul_ps(_mm512_set1_ps(0.79788456080286536f), _mm512_add_ps(x, cube)));
      y = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(one, t));
    }
    _mm512_storeu_ps(out + i, y);
  }
  for (; i < n; ++i) out[i] = act_of<kAct>(in[i]);
}
#endif

template <Act kAct>
void act_block_any(const float* in, float* out, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return act_block_avx512<kAct>(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = act_of<kAct>(in[i]);
}

template <bool kSwish>
void hard_block_any(const float* in, float* out, int64_t n, float alpha, float beta) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return hard_block_avx512<kSwish>(in, out, n, alpha, beta);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = kSwish ? ops::hard_swish_of(in[i]) : ops::hard_sigmoid_of(in[i], alpha, beta);
}

template <bool kGelu>
void erf_block_any(const float* in, float* out, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return erf_block_avx512<kGelu>(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = kGelu ? ops::gelu_erf_of(in[i]) : ops::erf_of(in[i]);
}

struct AddOp { static float apply(float a, float b) { return a + b; } };
struct SubOp { static float apply(float a, float b) { return a - b; } };
struct MulOp { static float apply(float a, float b) { return a * b; } };
struct DivOp { static float apply(float a, float b) { return a / b; } };
// numpy.maximum/minimum propagate NaN from either side (unlike std::fmax).
struct MaximumOp { static float apply(float a, float b) { return (a > b || std::isnan(a)) ? a : b; } };
// numpy.power (powf).
struct PowOp { static float apply(float a, float b) { return std::pow(a, b); } };
// Comparisons: 1 or 0; any comparison with NaN is false.
struct EqualOp { template <typename T> static uint8_t apply(T a, T b) { return a == b; } };
struct LessOp { template <typename T> static uint8_t apply(T a, T b) { return a < b; } };
struct GreaterOp { template <typename T> static uint8_t apply(T a, T b) { return a > b; } };
struct MinimumOp { static float apply(float a, float b) { return (a < b || std::isnan(a)) ? a : b; } };

// The activations are defined once in ops/plans.h, shared with the fused
// epilogues of conv2d and matmul (bit-identical results) and the CUDA kernels
// (gelu, silu, sigmoid, tanh, erf, hard_sigmoid, hard_swish: vector blocks below).
struct ReluOp { static float apply(float x) { return ops::relu_of(x); } };
struct ExpOp { static float apply(float x) { return std::exp(x); } };
struct SqrtOp { static float apply(float x) { return std::sqrt(x); } };
struct RsqrtOp { static float apply(float x) { return 1.0f / std::sqrt(x); } };
struct NegOp { static float apply(float x) { return -x; } };
struct LeakyReluOp { static float apply(float x, float alpha, float) { return ops::leaky_relu_of(x, alpha); } };
struct ClipOp { static float apply(float x, float lo, float hi) { return ops::clip_of(x, lo, hi); } };
struct LogOp { static float apply(float x) { return std::log(x); } };
struct AbsOp { static float apply(float x) { return std::fabs(x); } };
struct ReciprocalOp { static float apply(float x) { return 1.0f / x; } };

// ---- where ------------------------------------------------------------------

template <typename Element>
void where_typed(const ops::WherePlan& p, const uint8_t* cond, const Element* x, const Element* y, Element* out) {
  if (p.n == 0) return;  // the walk below visits one element before testing the dims
  if (p.rank == 0) {
    for (int64_t i = 0; i < p.n; ++i) out[i] = cond[i] ? x[i] : y[i];
    return;
  }
  const int32_t outer_rank = p.rank - 1;
  const int64_t inner = p.dims[outer_rank];
  const int64_t sc = p.stride_c[outer_rank], sx = p.stride_x[outer_rank], sy = p.stride_y[outer_rank];
  int64_t index[kMaxRank] = {};
  do {
    int64_t oc = 0, ox = 0, oy = 0;
    for (int32_t i = 0; i < outer_rank; ++i) {
      oc += index[i] * p.stride_c[i];
      ox += index[i] * p.stride_x[i];
      oy += index[i] * p.stride_y[i];
    }
    for (int64_t j = 0; j < inner; ++j) out[j] = cond[oc + j * sc] ? x[ox + j * sx] : y[oy + j * sy];
    out += inner;
  } while (next_index(index, p.dims, outer_rank));
}

// ---- cast -------------------------------------------------------------------

struct Half {
  uint16_t bits;
};
// A bool read as its byte, so any non-zero byte is true (no UB on odd bytes).
struct BoolByte {
  uint8_t byte;
};

template <typename T>
float to_float(T v) {
  if constexpr (std::is_same_v<T, Half>) return half_bits_to_float(v.bits);
  else if constexpr (std::is_same_v<T, BoolByte>) return v.byte != 0 ? 1.0f : 0.0f;
  else return static_cast<float>(v);
}

template <typename To, typename From>
To convert(From v) {
  if constexpr (std::is_same_v<From, BoolByte>) {
    if constexpr (std::is_same_v<To, Half>) return Half{static_cast<uint16_t>(v.byte != 0 ? 0x3c00 : 0)};
    else return static_cast<To>(v.byte != 0);
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_same_v<From, Half>) return (v.bits & 0x7fff) != 0;
    else return v != From{0};
  } else if constexpr (std::is_same_v<To, Half>) {
    return Half{float_to_half_bits(to_float(v))};
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(to_float(v));
  } else if constexpr (std::is_same_v<From, Half> || std::is_floating_point_v<From>) {
    // Truncate toward zero, saturating; NaN to 0.
    const double x = static_cast<double>(to_float(v));
    if (x != x) return To{0};
    if (x <= static_cast<double>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (x >= static_cast<double>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(v);  // integers wrap, bool is 0 or 1
  }
}

template <typename From, typename To>
Status cast(const KernelContext&, const Dispatch& d) {
  const int64_t n = plan_of<ops::CastPlan>(d).n;
  const From* in = input<From>(d, 0);
  To* out = output<To>(d, 0);
  for (int64_t i = 0; i < n; ++i) out[i] = convert<To>(in[i]);
  return ok_status();
}

template <typename From>
KernelFn cast_from(DType to) {
  switch (to) {
    case DType::kF32: return cast<From, float>;
    case DType::kF16: return cast<From, Half>;
    case DType::kI32: return cast<From, int32_t>;
    case DType::kI64: return cast<From, int64_t>;
    case DType::kBool: return cast<From, bool>;
    case DType::kU8: return cast<From, uint8_t>;
    default: return nullptr;
  }
}

}  // namespace

Status add(const KernelContext& c, const Dispatch& d) { return binary<AddOp>(c, d); }
Status sub(const KernelContext& c, const Dispatch& d) { return binary<SubOp>(c, d); }
Status mul(const KernelContext& c, const Dispatch& d) { return binary<MulOp>(c, d); }
Status div(const KernelContext& c, const Dispatch& d) { return binary<DivOp>(c, d); }
Status maximum(const KernelContext& c, const Dispatch& d) { return binary<MaximumOp>(c, d); }
Status minimum(const KernelContext& c, const Dispatch& d) { return binary<MinimumOp>(c, d); }

Status pow(const KernelContext& c, const Dispatch& d) { return binary<PowOp>(c, d); }

template <typename T>
Status equal(const KernelContext& c, const Dispatch& d) {
  return compare<EqualOp, T>(c, d);
}
template <typename T>
Status less(const KernelContext& c, const Dispatch& d) {
  return compare<LessOp, T>(c, d);
}
template <typename T>
Status greater(const KernelContext& c, const Dispatch& d) {
  return compare<GreaterOp, T>(c, d);
}
#define HEXIR_COMPARE_TYPES(T)                                   \
  template Status equal<T>(const KernelContext&, const Dispatch&); \
  template Status less<T>(const KernelContext&, const Dispatch&);  \
  template Status greater<T>(const KernelContext&, const Dispatch&);
HEXIR_COMPARE_TYPES(float)
HEXIR_COMPARE_TYPES(int32_t)
HEXIR_COMPARE_TYPES(int64_t)
#undef HEXIR_COMPARE_TYPES

// Any non-zero byte is true; the result is 0 or 1.
Status logical_not(const KernelContext&, const Dispatch& d) {
  const int64_t n = plan_of<ops::UnaryPlan>(d).n;
  const auto* in = input<uint8_t>(d, 0);
  auto* out = output<uint8_t>(d, 0);
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] == 0;
  return ok_status();
}

Status relu(const KernelContext& c, const Dispatch& d) { return unary<ReluOp>(c, d); }
// erf, gelu (both forms), silu, sigmoid, tanh, hard_sigmoid, hard_swish: in
// vector blocks with the scalar functions' bits. `Block` maps n elements
// with the plan's a, b.
using BlockFn = void (*)(const float* in, float* out, int64_t n, float a, float b);
template <BlockFn Block>
Status block_map(const KernelContext& context, const Dispatch& d) {
  const ops::UnaryPlan& p = plan_of<ops::UnaryPlan>(d);
  const float a = static_cast<float>(p.a), b = static_cast<float>(p.b);
  const float* in = input(d, 0);
  float* out = output(d, 0);
  if (p.rank > 0) {  // a strided view: each row gathered into a block on the stack first
    strided_rows(context, p, [&](int64_t from, int64_t to, int64_t length, int64_t stride) {
      constexpr int64_t kChunk = 256;
      float gathered[kChunk];
      for (int64_t j = 0; j < length; j += kChunk) {
        const int64_t count = std::min(kChunk, length - j);
        for (int64_t t = 0; t < count; ++t) gathered[t] = in[from + (j + t) * stride];
        Block(gathered, out + to + j, count, a, b);
      }
    });
    return ok_status();
  }
  parallel_ranges(context, p.n, kMinRange,
                  [&](int64_t begin, int64_t end) { Block(in + begin, out + begin, end - begin, a, b); });
  return ok_status();
}
void erf_any(const float* in, float* out, int64_t n, float, float) { erf_block_any<false>(in, out, n); }
void gelu_erf_any(const float* in, float* out, int64_t n, float, float) { erf_block_any<true>(in, out, n); }
template <Act kAct>
void act_any(const float* in, float* out, int64_t n, float, float) {
  act_block_any<kAct>(in, out, n);
}

Status gelu(const KernelContext& c, const Dispatch& d) {
  return plan_of<ops::UnaryPlan>(d).variant == 1 ? block_map<act_any<Act::kGeluTanh>>(c, d)
                                                 : block_map<gelu_erf_any>(c, d);
}
Status silu(const KernelContext& c, const Dispatch& d) { return block_map<act_any<Act::kSilu>>(c, d); }
Status sigmoid(const KernelContext& c, const Dispatch& d) { return block_map<act_any<Act::kSigmoid>>(c, d); }
Status tanh(const KernelContext& c, const Dispatch& d) { return block_map<act_any<Act::kTanh>>(c, d); }
Status exp(const KernelContext& c, const Dispatch& d) { return unary<ExpOp>(c, d); }
Status sqrt(const KernelContext& c, const Dispatch& d) { return unary<SqrtOp>(c, d); }
Status rsqrt(const KernelContext& c, const Dispatch& d) { return unary<RsqrtOp>(c, d); }
Status neg(const KernelContext& c, const Dispatch& d) { return unary<NegOp>(c, d); }
Status leaky_relu(const KernelContext& c, const Dispatch& d) { return unary_floats<LeakyReluOp>(c, d); }
Status clip(const KernelContext& c, const Dispatch& d) { return unary_floats<ClipOp>(c, d); }
Status hard_sigmoid(const KernelContext& c, const Dispatch& d) { return block_map<hard_block_any<false>>(c, d); }
Status hard_swish(const KernelContext& c, const Dispatch& d) { return block_map<hard_block_any<true>>(c, d); }
Status erf(const KernelContext& c, const Dispatch& d) { return block_map<erf_any>(c, d); }
Status log(const KernelContext& c, const Dispatch& d) { return unary<LogOp>(c, d); }
Status abs(const KernelContext& c, const Dispatch& d) { return unary<AbsOp>(c, d); }
Status reciprocal(const KernelContext& c, const Dispatch& d) { return unary<ReciprocalOp>(c, d); }

Status where(const KernelContext&, const Dispatch& d) {
  const ops::WherePlan& p = plan_of<ops::WherePlan>(d);
  const auto* cond = input<uint8_t>(d, 0);
  switch (p.element_size) {
    case 1: where_typed(p, cond, input<uint8_t>(d, 1), input<uint8_t>(d, 2), output<uint8_t>(d, 0)); break;
    case 2: where_typed(p, cond, input<uint16_t>(d, 1), input<uint16_t>(d, 2), output<uint16_t>(d, 0)); break;
    case 4: where_typed(p, cond, input<uint32_t>(d, 1), input<uint32_t>(d, 2), output<uint32_t>(d, 0)); break;
    default: where_typed(p, cond, input<uint64_t>(d, 1), input<uint64_t>(d, 2), output<uint64_t>(d, 0)); break;
  }
  return ok_status();
}

KernelFn cast_kernel(DType from, DType to) {
  switch (from) {
    case DType::kF32: return cast_from<float>(to);
    case DType::kF16: return cast_from<Half>(to);
    case DType::kI32: return cast_from<int32_t>(to);
    case DType::kI64: return cast_from<int64_t>(to);
    case DType::kBool: return cast_from<BoolByte>(to);
    case DType::kU8: return cast_from<uint8_t>(to);
    default: return nullptr;
  }
}

void erf_block(const float* in, float* out, int64_t n) { erf_block_any<false>(in, out, n); }
void gelu_erf_block(const float* in, float* out, int64_t n) { erf_block_any<true>(in, out, n); }
void hard_sigmoid_block(const float* in, float* out, int64_t n, float alpha, float beta) {
  hard_block_any<false>(in, out, n, alpha, beta);
}
void hard_swish_block(const float* in, float* out, int64_t n) { hard_block_any<true>(in, out, n, 0.0f, 0.0f); }
void sigmoid_block(const float* in, float* out, int64_t n) { act_block_any<Act::kSigmoid>(in, out, n); }
void silu_block(const float* in, float* out, int64_t n) { act_block_any<Act::kSilu>(in, out, n); }
void tanh_block(const float* in, float* out, int64_t n) { act_block_any<Act::kTanh>(in, out, n); }
void gelu_tanh_block(const float* in, float* out, int64_t n) { act_block_any<Act::kGeluTanh>(in, out, n); }

}  // namespace hexir::hal::cpu::internal
