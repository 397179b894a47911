// Elementwise kernels: binary ops with numpy broadcasting (BinaryPlan), unary
// maps, where and cast.
//
// Every loop reads element i of each input before writing element i of the
// output and never revisits it, so an output that shares storage with an
// input of the same shape (the in-place pass) is safe.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>

#include "hexir/base/half.h"
#include "kernel_util.h"
#include "lanes.h"
#include "thread_pool.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace hexir::hal::cpu::internal {
namespace {

using ops::BinaryPlan;

// Integer div and mod: their divisors are checked where they are read.
template <typename Op>
constexpr bool kChecksDivisor = requires { Op::kChecksDivisor; };

// Runs op over one inner run of n elements; the strides are 0 (broadcast) or 1.
// Returns -1, or (kChecksDivisor ops) the first i whose divisor is zero.
template <typename Op, typename T, typename R>
inline int64_t binary_run(const T* a, int64_t sa, const T* b, int64_t sb, R* out, int64_t n) {
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
  if constexpr (kChecksDivisor<Op>) {
    for (int64_t i = 0; i < n; ++i)
      if (b[i * sb] == 0) return i;
  }
  return -1;
}

// Elementwise work is split over the pool in ranges of at least this many
// output elements (below it a thread's start costs more than it saves).
constexpr int64_t kMinRange = 1 << 15;
// Elements a fused activation follows the operator by (16 KiB of floats).
constexpr int64_t kEpilogueChunk = 1 << 12;

// Operands of T, results of R (bool results as bytes 0 or 1). Split over the
// pool by output elements (flat modes) or by inner runs (general mode).
// Returns -1, or (kChecksDivisor ops) the first result element whose divisor
// is zero (every element is written all the same).
template <typename Op, typename T, typename R>
int64_t binary_typed(const KernelContext& context, const BinaryPlan& p, const T* pa, const T* pb, R* po) {
  std::atomic<int64_t> first_zero{INT64_MAX};
  auto found = [&](int64_t at) {  // the smallest index any range reports
    int64_t seen = first_zero.load(std::memory_order_relaxed);
    while (at < seen && !first_zero.compare_exchange_weak(seen, at, std::memory_order_relaxed)) {
    }
  };
  auto first = [&] {
    const int64_t at = first_zero.load(std::memory_order_relaxed);
    return at == INT64_MAX ? int64_t{-1} : at;
  };
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
        const int64_t zero = binary_run<Op>(pa + i * sa, sa, pb + i * sb, sb, po + i, end - i);
        if (zero >= 0) found(i + zero);
        finish(i, end);
      }
    });
  };
  switch (p.mode) {
    case 0: flat(1, 1); return first();
    case 1: flat(1, 0); return first();
    case 2: flat(0, 1); return first();
    case 4:
      if (binary_run<Op>(pa, 0, pb, 0, po, 1) >= 0) found(0);
      finish(0, 1);
      return first();
    default: break;
  }
  if (p.n == 0) return -1;
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
      const int64_t zero =
          binary_run<Op>(pa + offset_a, p.stride_a[outer_rank], pb + offset_b, p.stride_b[outer_rank], out, inner);
      if (zero >= 0) found(run * inner + zero);
      out += inner;
      if ((run + 1) * inner - unfinished >= kEpilogueChunk) {
        finish(unfinished, (run + 1) * inner);
        unfinished = (run + 1) * inner;
      }
      next_index(index, p.dims, outer_rank);
    }
    finish(unfinished, end * inner);
  });
  return first();
}

template <typename Op>
Status binary(const KernelContext& context, const Dispatch& d) {
  binary_typed<Op>(context, plan_of<BinaryPlan>(d), input(d, 0), input(d, 1), output(d, 0));
  return ok_status();
}

// Integer arithmetic on T (ops/plans.h's rules); div and mod fail on a zero divisor.
template <typename Op, typename T>
Status int_binary(const KernelContext& context, const Dispatch& d) {
  const int64_t zero =
      binary_typed<Op>(context, plan_of<BinaryPlan>(d), input<T>(d, 0), input<T>(d, 1), output<T>(d, 0));
  if constexpr (kChecksDivisor<Op>)
    if (zero >= 0)
      return invalid_argument(std::string(Op::kName) + ": integer division by zero (the divisor of result element " +
                              std::to_string(zero) + " is 0)");
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

// A view whose last two dims are transposed (the inner stride is not 1, the
// next dim's is: a unary map reading [N, K, T, H*W] of a channels-last
// [N*T, H*W, K] result): rows gathered 16 at a time into a tile, 64 columns
// a step, each column's 16 elements adjacent in the base, and `row(tile row,
// its place in out, width)` on each. One row at a time read every element
// from another cache line (7.7 ms for a relu over [1, 144, 8, 56, 56]).
// False (nothing done) for other views; true for an empty one.
template <typename T, typename Row>
bool transposed_tiles(const KernelContext& context, const ops::UnaryPlan& p, const T* in, T* out,
                      const Row& row) {
  if (p.n == 0) return true;
  if (p.rank < 2 || p.stride[p.rank - 1] == 1 || p.stride[p.rank - 2] != 1) return false;
  constexpr int64_t kRows = 16, kCols = 64;
  const int32_t rank = p.rank;
  const int64_t cols = p.dims[rank - 1], col_stride = p.stride[rank - 1], rows = p.dims[rank - 2];
  const int64_t runs = p.n / (cols * rows), tiles = (rows + kRows - 1) / kRows;
  parallel_ranges(context, runs * tiles, std::max<int64_t>(1, kMinRange / (kRows * cols)),
                  [&](int64_t begin, int64_t end) {
                    alignas(64) T tile[kRows][kCols];
                    for (int64_t t = begin; t < end; ++t) {
                      const int64_t run = t / tiles, r0 = t % tiles * kRows,
                                    count = std::min(kRows, rows - r0);
                      int64_t base = 0;  // the run's offset: its index over the outer dims
                      for (int64_t rest = run, i = rank - 2; i-- > 0;) {
                        base += rest % p.dims[i] * p.stride[i];
                        rest /= p.dims[i];
                      }
                      for (int64_t c0 = 0; c0 < cols; c0 += kCols) {
                        const int64_t width = std::min(kCols, cols - c0);
                        for (int64_t j = 0; j < width; ++j) {
                          const T* column = in + base + r0 + (c0 + j) * col_stride;
                          for (int64_t i = 0; i < count; ++i) tile[i][j] = column[i];
                        }
                        for (int64_t i = 0; i < count; ++i)
                          row(tile[i], out + ((run * rows + r0 + i) * cols + c0), width);
                      }
                    }
                  });
  return true;
}

template <typename Op, typename T = float>
Status unary(const KernelContext& context, const Dispatch& d) {
  const ops::UnaryPlan& p = plan_of<ops::UnaryPlan>(d);
  const int64_t n = p.n;
  const T* in = input<T>(d, 0);
  T* out = output<T>(d, 0);
  if (p.rank > 0) {
    if (transposed_tiles(context, p, in, out, [](const T* row, T* to, int64_t width) {
          for (int64_t j = 0; j < width; ++j) to[j] = Op::apply(row[j]);
        }))
      return ok_status();
    strided_rows(context, p, [&](int64_t from, int64_t to, int64_t length, int64_t stride) {
      if (stride == 1)  // rows in place (a transpose that keeps the last dim): a loop that vectorizes
        for (int64_t j = 0; j < length; ++j) out[to + j] = Op::apply(in[from + j]);
      else
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
    if (transposed_tiles(context, p, in, out, [&](const float* row, float* to, int64_t width) {
          for (int64_t j = 0; j < width; ++j) to[j] = Op::apply(row[j], a, b);
        }))
      return ok_status();
    strided_rows(context, p, [&](int64_t from, int64_t to, int64_t length, int64_t stride) {
      if (stride == 1)
        for (int64_t j = 0; j < length; ++j) out[to + j] = Op::apply(in[from + j], a, b);
      else
        for (int64_t j = 0; j < length; ++j) out[to + j] = Op::apply(in[from + j * stride], a, b);
    });
    return ok_status();
  }
  parallel_ranges(context, p.n, kMinRange, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = Op::apply(in[i], a, b);
  });
  return ok_status();
}

enum class Act { kSigmoid, kSilu, kTanh, kGeluTanh, kErf, kGeluErf, kHardSigmoid, kHardSwish, kRelu, kLeakyRelu, kClip };

// One activation over n elements (in may be out): lane blocks of the widest
// ISA (lanes.h: the bits of the scalar map), the tail of the transcendental
// ones as one more block through a zero-padded copy (a fused epilogue's rows
// of 14 or 7 were all tail: the scalar exp); hard_sigmoid's and hard_swish's
// tails by the scalar map (their padded block was slower: mobilenet_v3_large
// 9.1 -> 9.6 ms), and so are relu's, leaky_relu's and clip's (fused
// epilogues: compiled for the baseline ISA, relu ran 4 lanes at a time).
// Branch-free: hard_sigmoid's clamp mispredicted as branches on real data.
template <Act kAct>
struct ActBlock {
  template <int N>
  static HEXIR_LANES void run(const float* in, float* out, int64_t n, float alpha, float beta) {
    int64_t i = 0;
    for (; i + N <= n; i += N) lanes::store<N>(out + i, of<N>(lanes::load<N>(in + i), alpha, beta));
    if (i == n) return;
    if constexpr (N > 1 && kAct < Act::kHardSigmoid) {  // the cheap maps (hard_sigmoid on): scalar
      alignas(64) float tail[N] = {};
      std::copy(in + i, in + n, tail);
      lanes::store<N>(tail, of<N>(lanes::load<N>(tail), alpha, beta));
      std::copy(tail, tail + (n - i), out + i);
    } else {
      for (; i < n; ++i) out[i] = of<1>(in[i], alpha, beta);
    }
  }
  // N = 1: the scalar map itself.
  template <int N, typename V>
  static HEXIR_LANES V of(V x, float alpha, float beta) {
    if constexpr (N == 1) {
      if constexpr (kAct == Act::kSigmoid) return ops::sigmoid_of(x);
      else if constexpr (kAct == Act::kSilu) return ops::silu_of(x);
      else if constexpr (kAct == Act::kTanh) return ops::tanh_of(x);
      else if constexpr (kAct == Act::kGeluTanh) return ops::gelu_tanh_of(x);
      else if constexpr (kAct == Act::kErf) return ops::erf_of(x);
      else if constexpr (kAct == Act::kGeluErf) return ops::gelu_erf_of(x);
      else if constexpr (kAct == Act::kHardSigmoid) return ops::hard_sigmoid_of(x, alpha, beta);
      else if constexpr (kAct == Act::kRelu) return ops::relu_of(x);
      else if constexpr (kAct == Act::kLeakyRelu) return ops::leaky_relu_of(x, alpha);
      else if constexpr (kAct == Act::kClip) return ops::clip_of(x, alpha, beta);
      else return ops::hard_swish_of(x);
    } else {
      if constexpr (kAct == Act::kSigmoid) return lanes::sigmoid<N>(x);
      else if constexpr (kAct == Act::kSilu) return lanes::silu<N>(x);
      else if constexpr (kAct == Act::kTanh) return lanes::tanh<N>(x);
      else if constexpr (kAct == Act::kGeluTanh) return lanes::gelu_tanh<N>(x);
      else if constexpr (kAct == Act::kErf) return lanes::erf<N>(x);
      else if constexpr (kAct == Act::kGeluErf) return lanes::gelu_erf<N>(x);
      else if constexpr (kAct == Act::kHardSigmoid) return lanes::hard_sigmoid<N>(x, alpha, beta);
      else if constexpr (kAct == Act::kRelu) return lanes::relu<N>(x);
      else if constexpr (kAct == Act::kLeakyRelu) return lanes::leaky_relu<N>(x, alpha);
      else if constexpr (kAct == Act::kClip) return lanes::clip<N>(x, alpha, beta);
      else return lanes::hard_swish<N>(x);
    }
  }
};

template <Act kAct>
void act_block(const float* in, float* out, int64_t n, float alpha = 0.0f, float beta = 0.0f) {
  widest<ActBlock<kAct>>(in, out, n, alpha, beta);
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
struct LessOrEqualOp { template <typename T> static uint8_t apply(T a, T b) { return a <= b; } };
struct GreaterOrEqualOp { template <typename T> static uint8_t apply(T a, T b) { return a >= b; } };
// Logical maps on bool bytes: any non-zero byte is true; results 0 or 1.
struct AndOp { static uint8_t apply(uint8_t a, uint8_t b) { return (a != 0) & (b != 0); } };
struct OrOp { static uint8_t apply(uint8_t a, uint8_t b) { return (a != 0) | (b != 0); } };
struct XorOp { static uint8_t apply(uint8_t a, uint8_t b) { return (a != 0) ^ (b != 0); } };
// C's fmod (ONNX Mod with fmod = 1 on floats).
struct FmodOp { static float apply(float a, float b) { return std::fmod(a, b); } };

// Integer arithmetic (ops/plans.h: wrapping, no undefined behaviour).
struct IntAddOp { template <typename T> static T apply(T a, T b) { return ops::int_add_of(a, b); } };
struct IntSubOp { template <typename T> static T apply(T a, T b) { return ops::int_sub_of(a, b); } };
struct IntMulOp { template <typename T> static T apply(T a, T b) { return ops::int_mul_of(a, b); } };
struct IntMaximumOp { template <typename T> static T apply(T a, T b) { return a > b ? a : b; } };
struct IntMinimumOp { template <typename T> static T apply(T a, T b) { return a < b ? a : b; } };
struct IntDivOp {
  static constexpr bool kChecksDivisor = true;
  static constexpr const char* kName = "div";
  template <typename T> static T apply(T a, T b) { return ops::int_div_of(a, b); }
};
struct IntModOp {  // fmod = 0: the divisor's sign
  static constexpr bool kChecksDivisor = true;
  static constexpr const char* kName = "mod";
  template <typename T> static T apply(T a, T b) { return ops::int_mod_of(a, b, 0); }
};
struct IntFmodOp {  // fmod = 1: the dividend's sign
  static constexpr bool kChecksDivisor = true;
  static constexpr const char* kName = "mod";
  template <typename T> static T apply(T a, T b) { return ops::int_mod_of(a, b, 1); }
};
struct IntPowOp { template <typename T> static T apply(T a, T b) { return ops::int_pow_of(a, b); } };
struct IntNegOp { template <typename T> static T apply(T x) { return ops::int_neg_of(x); } };
struct IntAbsOp { template <typename T> static T apply(T x) { return ops::int_abs_of(x); } };
struct SignOp { template <typename T> static T apply(T x) { return ops::sign_of(x); } };
struct CeilOp { static float apply(float x) { return std::ceil(x); } };
struct FloorOp { static float apply(float x) { return std::floor(x); } };
struct RoundOp { static float apply(float x) { return ops::round_half_even_of(x); } };

// The activations are defined once in ops/plans.h, shared with the fused
// epilogues of conv2d and matmul (bit-identical results) and the CUDA kernels
// (gelu, silu, sigmoid, tanh, erf, hard_sigmoid, hard_swish: vector blocks below).
struct ExpOp { static float apply(float x) { return std::exp(x); } };
struct SqrtOp { static float apply(float x) { return std::sqrt(x); } };
struct RsqrtOp { static float apply(float x) { return 1.0f / std::sqrt(x); } };
struct NegOp { static float apply(float x) { return -x; } };
struct LeakyReluOp { static float apply(float x, float alpha, float) { return ops::leaky_relu_of(x, alpha); } };
struct ClipOp { static float apply(float x, float lo, float hi) { return ops::clip_of(x, lo, hi); } };
struct LogOp { static float apply(float x) { return std::log(x); } };
struct AbsOp { static float apply(float x) { return std::fabs(x); } };
struct ReciprocalOp { static float apply(float x) { return 1.0f / x; } };
struct SoftplusOp { static float apply(float x) { return ops::softplus_of(x); } };

// The unary math and ONNX activation maps (ops::math_of, shared with CUDA).
template <ops::MathFn F>
struct MathOp {
  static float apply(float x, float a, float b) { return ops::math_of<F>(x, a, b); }
};
struct PReluOp { static float apply(float x, float slope) { return ops::prelu_of(x, slope); } };

// The maps of MathBlock: math_of without libm (the exponential activations
// through expm1_of, softsign, thresholded_relu, shrink).
template <ops::MathFn F>
constexpr bool kMathLanes = F == ops::MathFn::kElu || F == ops::MathFn::kSelu || F == ops::MathFn::kCelu ||
                            F == ops::MathFn::kSoftsign || F == ops::MathFn::kThresholdedRelu ||
                            F == ops::MathFn::kShrink;

// ops::expm1_of per lane: both branches computed, one kept.
template <int N>
HEXIR_LANES lanes::F32<N> expm1_lanes(lanes::F32<N> x) {
  using namespace lanes;
  const U32<N> sign = U32<N>{} + 0x80000000u;
  const F32<N> magnitude = from_bits<N>(bits<N>(x) & ~sign);
  F32<N> p = x * (1.0f / 5040.0f) + (1.0f / 720.0f);
  p = p * x + (1.0f / 120.0f);
  p = p * x + (1.0f / 24.0f);
  p = p * x + (1.0f / 6.0f);
  p = p * x + 0.5f;
  const F32<N> small = p * x * x + x;
  return select<N>(magnitude < splat<N>(0.34657359f), small, lanes::exp<N>(x) - 1.0f);
}

// ops::math_of<F> (kMathLanes) over n elements in lane blocks of the widest
// ISA (the scalar map's bits, as ActBlock), the tail through math_of.
template <ops::MathFn F>
struct MathBlock {
  template <int N>
  static HEXIR_LANES void run(const float* in, float* out, int64_t n, float a, float b) {
    int64_t i = 0;
    for (; i + N <= n; i += N) lanes::store<N>(out + i, of<N>(lanes::load<N>(in + i), a, b));
    for (; i < n; ++i) out[i] = ops::math_of<F>(in[i], a, b);
  }
  template <int N>
  static HEXIR_LANES lanes::F32<N> of(lanes::F32<N> x, float a, float b) {
    using namespace lanes;
    using ops::MathFn;
    const F32<N> zero = lanes::zero<N>();
    if constexpr (F == MathFn::kElu) {
      return select<N>(x > zero, x, splat<N>(a) * expm1_lanes<N>(x));
    } else if constexpr (F == MathFn::kSelu) {
      return splat<N>(b) * select<N>(x > zero, x, splat<N>(a) * expm1_lanes<N>(x));
    } else if constexpr (F == MathFn::kCelu) {
      return select<N>(x > zero, x, splat<N>(a) * expm1_lanes<N>(x / a));
    } else if constexpr (F == MathFn::kSoftsign) {
      const U32<N> sign = U32<N>{} + 0x80000000u;
      return x / (1.0f + from_bits<N>(bits<N>(x) & ~sign));
    } else if constexpr (F == MathFn::kThresholdedRelu) {
      return select<N>(x > splat<N>(a), x, zero);
    } else {
      static_assert(F == MathFn::kShrink);
      return select<N>(x < splat<N>(-a), x + b, select<N>(x > splat<N>(a), x - b, zero));
    }
  }
};

template <ops::MathFn F>
void math_block(const float* in, float* out, int64_t n, float a, float b) {
  widest<MathBlock<F>>(in, out, n, a, b);
}

// is_inf, is_nan: f32 in, bool bytes out (0 or 1).
template <ops::MathFn F>
Status float_class(const KernelContext& context, const Dispatch& d) {
  const ops::UnaryPlan& p = plan_of<ops::UnaryPlan>(d);
  const float a = static_cast<float>(p.a), b = static_cast<float>(p.b);
  const float* in = input(d, 0);
  auto* out = output<uint8_t>(d, 0);
  if (p.rank > 0) {
    strided_rows(context, p, [&](int64_t from, int64_t to, int64_t length, int64_t stride) {
      for (int64_t j = 0; j < length; ++j) out[to + j] = ops::math_of<F>(in[from + j * stride], a, b) != 0.0f;
    });
    return ok_status();
  }
  parallel_ranges(context, p.n, kMinRange, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = ops::math_of<F>(in[i], a, b) != 0.0f;
  });
  return ok_status();
}

// ---- where ------------------------------------------------------------------

// One inner run with strides known at compile time (0: broadcast, 1:
// contiguous), the select as a bit blend (elements are unsigned integers of
// their width), so it compiles to vector code without branches: a constant
// mask over a batch (Trilu), an attention mask, a scalar fill.
template <typename Element, int kSc, int kSx, int kSy>
void where_run(const uint8_t* cond, const Element* x, const Element* y, Element* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    const Element take_x = static_cast<Element>(Element(0) - Element(cond[j * kSc] != 0));
    out[j] = static_cast<Element>((x[j * kSx] & take_x) | (y[j * kSy] & static_cast<Element>(~take_x)));
  }
}

template <typename Element>
using WhereRun = void (*)(const uint8_t*, const Element*, const Element*, Element*, int64_t);

// The run for inner strides (sc, sx, sy), each 0 or 1; null for others.
template <typename Element>
WhereRun<Element> where_run_for(int64_t sc, int64_t sx, int64_t sy) {
  if (sc < 0 || sc > 1 || sx < 0 || sx > 1 || sy < 0 || sy > 1) return nullptr;
  static constexpr WhereRun<Element> kRuns[8] = {where_run<Element, 0, 0, 0>, where_run<Element, 0, 0, 1>,
                                                 where_run<Element, 0, 1, 0>, where_run<Element, 0, 1, 1>,
                                                 where_run<Element, 1, 0, 0>, where_run<Element, 1, 0, 1>,
                                                 where_run<Element, 1, 1, 0>, where_run<Element, 1, 1, 1>};
  return kRuns[sc * 4 + sx * 2 + sy];
}

template <typename Element>
void where_typed(const ops::WherePlan& p, const uint8_t* cond, const Element* x, const Element* y, Element* out) {
  if (p.n == 0) return;  // the walk below visits one element before testing the dims
  if (p.rank == 0) {
    where_run<Element, 1, 1, 1>(cond, x, y, out, p.n);
    return;
  }
  const int32_t outer_rank = p.rank - 1;
  const int64_t inner = p.dims[outer_rank];
  const int64_t sc = p.stride_c[outer_rank], sx = p.stride_x[outer_rank], sy = p.stride_y[outer_rank];
  const WhereRun<Element> run = where_run_for<Element>(sc, sx, sy);
  int64_t index[kMaxRank] = {};
  do {
    int64_t oc = 0, ox = 0, oy = 0;
    for (int32_t i = 0; i < outer_rank; ++i) {
      oc += index[i] * p.stride_c[i];
      ox += index[i] * p.stride_x[i];
      oy += index[i] * p.stride_y[i];
    }
    if (run)
      run(cond + oc, x + ox, y + oy, out, inner);
    else
      for (int64_t j = 0; j < inner; ++j) out[j] = cond[oc + j * sc] ? x[ox + j * sx] : y[oy + j * sy];
    out += inner;
  } while (next_index(index, p.dims, outer_rank));
}

// ---- cast -------------------------------------------------------------------

struct Half {
  uint16_t bits;
};
struct BHalf {  // bfloat16
  uint16_t bits;
};
// A bool read as its byte, so any non-zero byte is true (no UB on odd bytes).
struct BoolByte {
  uint8_t byte;
};

template <typename T>
float to_float(T v) {
  if constexpr (std::is_same_v<T, Half>) return half_bits_to_float(v.bits);
  else if constexpr (std::is_same_v<T, BHalf>) return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16);
  else if constexpr (std::is_same_v<T, BoolByte>) return v.byte != 0 ? 1.0f : 0.0f;
  else return static_cast<float>(v);
}

template <typename To, typename From>
To convert(From v) {
  if constexpr (std::is_same_v<From, BoolByte>) {
    if constexpr (std::is_same_v<To, Half>) return Half{static_cast<uint16_t>(v.byte != 0 ? 0x3c00 : 0)};
    else if constexpr (std::is_same_v<To, BHalf>) return BHalf{static_cast<uint16_t>(v.byte != 0 ? 0x3f80 : 0)};
    else return static_cast<To>(v.byte != 0);
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BHalf>) return (v.bits & 0x7fff) != 0;
    else return v != From{0};
  } else if constexpr (std::is_same_v<To, Half>) {
    return Half{float_to_half_bits(to_float(v))};
  } else if constexpr (std::is_same_v<To, BHalf>) {
    return BHalf{float_to_bfloat16_bits(to_float(v))};
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(to_float(v));
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BHalf> ||
                       std::is_floating_point_v<From>) {
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
    case DType::kBF16: return cast<From, BHalf>;
    case DType::kI32: return cast<From, int32_t>;
    case DType::kI64: return cast<From, int64_t>;
    case DType::kBool: return cast<From, bool>;
    case DType::kU8: return cast<From, uint8_t>;
    default: return nullptr;
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12 takes the _mm512_undefined_* operand of the unmasked intrinsics
// inlined into target("avx512...") functions for an uninitialized read.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Per-tensor quantize and dequantize, 16 (8) lanes at a time: the steps of
// ops::quantize_of / dequantize_of (a division, rounding half to even, the
// zero point added in float, NaN to the zero point, the clamp), so the bytes
// are the scalar loop's. A QDQ model quantizes and dequantizes every
// activation between its integer kernels: the scalar loop (rintf is a call
// on the x86-64 baseline) was half of a QDQ ResNet-50's time.
template <typename Q>
[[gnu::target("avx512f,avx512bw,avx512vl")]] int64_t quantize_avx512(const float* x, float scale, int32_t zero,
                                                                     Q* out, int64_t n) {
  constexpr int32_t lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
  const __m512 s = _mm512_set1_ps(scale), z = _mm512_set1_ps(static_cast<float>(zero));
  const __m512 low = _mm512_set1_ps(static_cast<float>(lo)), high = _mm512_set1_ps(static_cast<float>(hi));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 q = _mm512_add_ps(_mm512_roundscale_ps(_mm512_div_ps(_mm512_loadu_ps(x + i), s), _MM_FROUND_TO_NEAREST_INT), z);
    q = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(q, q, _CMP_UNORD_Q), q, z);
    q = _mm512_min_ps(_mm512_max_ps(q, low), high);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q)));
  }
  return i;
}

template <typename Q>
[[gnu::target("avx2")]] int64_t quantize_avx2(const float* x, float scale, int32_t zero, Q* out, int64_t n) {
  constexpr int32_t lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
  const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(static_cast<float>(zero));
  const __m256 low = _mm256_set1_ps(static_cast<float>(lo)), high = _mm256_set1_ps(static_cast<float>(hi));
  int64_t i = 0;
  alignas(32) int32_t lanes[8];
  for (; i + 8 <= n; i += 8) {
    __m256 q = _mm256_add_ps(
        _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
    q = _mm256_blendv_ps(q, z, _mm256_cmp_ps(q, q, _CMP_UNORD_Q));
    q = _mm256_min_ps(_mm256_max_ps(q, low), high);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_cvtps_epi32(q));
    for (int j = 0; j < 8; ++j) out[i + j] = static_cast<Q>(lanes[j]);
  }
  return i;
}

template <typename Q>
[[gnu::target("avx512f,avx512bw,avx512vl")]] int64_t dequantize_avx512(const Q* x, float scale, int32_t zero,
                                                                       float* out, int64_t n) {
  const __m512 s = _mm512_set1_ps(scale);
  const __m512i z = _mm512_set1_epi32(zero);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
    const __m512i v = std::is_signed_v<Q> ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(v, z)), s));
  }
  return i;
}

template <typename Q>
[[gnu::target("avx2")]] int64_t dequantize_avx2(const Q* x, float scale, int32_t zero, float* out, int64_t n) {
  const __m256 s = _mm256_set1_ps(scale);
  const __m256i z = _mm256_set1_epi32(zero);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i));
    const __m256i v = std::is_signed_v<Q> ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v, z)), s));
  }
  return i;
}

// quantized_add, 16 lanes: quantized_add_of's float steps (dequantize_of
// each, the sum, quantize_of's division; the bounds clamp the quotient
// before the rounding, which gives quantize_of's bytes: they are integers).
[[gnu::target("avx512f,avx512bw,avx512vl")]] int64_t quantized_add_avx512(const ops::QuantizedAddPlan& p,
                                                                          const uint8_t* a, const uint8_t* b,
                                                                          uint8_t* y, int64_t n) {
  const __m512i za = _mm512_set1_epi32(p.a_zero), zb = _mm512_set1_epi32(p.b_zero), zy = _mm512_set1_epi32(p.y_zero);
  const __m512 sa = _mm512_set1_ps(p.a_scale), sb = _mm512_set1_ps(p.b_scale), sy = _mm512_set1_ps(p.y_scale);
  const __m512 low = _mm512_set1_ps(static_cast<float>(p.y_min - p.y_zero));
  const __m512 high = _mm512_set1_ps(static_cast<float>(p.y_max - p.y_zero));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i av = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m512i bv = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    __m512 v = _mm512_div_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(av, za)), sa),
                                           _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(bv, zb)), sb)),
                             sy);
    v = _mm512_min_ps(_mm512_max_ps(v, low), high);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(v), zy)));
  }
  return i;
}

// The same with AVX2, 8 lanes (no FMA: the product and the sum rounded apart).
[[gnu::target("avx2")]] int64_t quantized_add_avx2(const ops::QuantizedAddPlan& p, const uint8_t* a,
                                                   const uint8_t* b, uint8_t* y, int64_t n) {
  const __m256i za = _mm256_set1_epi32(p.a_zero), zb = _mm256_set1_epi32(p.b_zero), zy = _mm256_set1_epi32(p.y_zero);
  const __m256 sa = _mm256_set1_ps(p.a_scale), sb = _mm256_set1_ps(p.b_scale), sy = _mm256_set1_ps(p.y_scale);
  const __m256 low = _mm256_set1_ps(static_cast<float>(p.y_min - p.y_zero));
  const __m256 high = _mm256_set1_ps(static_cast<float>(p.y_max - p.y_zero));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i av = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a + i)));
    const __m256i bv = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + i)));
    __m256 v = _mm256_div_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(av, za)), sa),
                                           _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(bv, zb)), sb)),
                             sy);
    v = _mm256_min_ps(_mm256_max_ps(v, low), high);
    const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(v), zy);  // in [y_min, y_max]
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), _mm_packus_epi16(words, words));
  }
  return i;
}
#pragma GCC diagnostic pop
#endif

// The elements of [0, n) a vector loop took, per tensor (the rest go scalar).
template <typename Q>
int64_t quantize_vector([[maybe_unused]] const float* x, [[maybe_unused]] float scale, [[maybe_unused]] int32_t zero,
                        [[maybe_unused]] Q* out, [[maybe_unused]] int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa_avx512_bw_vl()) return quantize_avx512<Q>(x, scale, zero, out, n);
  if (isa_avx2()) return quantize_avx2<Q>(x, scale, zero, out, n);
#endif
  return 0;
}

template <typename Q>
int64_t dequantize_vector([[maybe_unused]] const Q* x, [[maybe_unused]] float scale, [[maybe_unused]] int32_t zero,
                          [[maybe_unused]] float* out, [[maybe_unused]] int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if constexpr (sizeof(Q) == 1) {
    if (isa_avx512_bw_vl()) return dequantize_avx512<Q>(x, scale, zero, out, n);
    if (isa_avx2()) return dequantize_avx2<Q>(x, scale, zero, out, n);
  }
#endif
  return 0;
}

}  // namespace

// Element i's channel is (i / inner) % channels; a per-tensor plan has one.
template <typename Q>
Status quantize_linear(const KernelContext& context, const Dispatch& d) {
  const ops::QuantizePlan& p = plan_of<ops::QuantizePlan>(d);
  const float* x = input(d, 0);
  const float* scale = input(d, 1);
  const Q* zero = input<Q>(d, 2);
  Q* out = output<Q>(d, 0);
  constexpr int32_t lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
  parallel_ranges(context, p.n, int64_t{1} << 14, [&](int64_t b, int64_t e) {
    if (p.channels == 1) {
      const float s = scale[0];
      const int32_t z = zero[0];
      for (int64_t i = b + quantize_vector<Q>(x + b, s, z, out + b, e - b); i < e; ++i)
        out[i] = static_cast<Q>(ops::quantize_of(x[i], s, z, lo, hi));
      return;
    }
    for (int64_t i = b; i < e; ++i) {
      const int64_t c = (i / p.inner) % p.channels;
      out[i] = static_cast<Q>(ops::quantize_of(x[i], scale[c], zero[c], lo, hi));
    }
  });
  return ok_status();
}

template <typename Q>
Status dequantize_linear(const KernelContext& context, const Dispatch& d) {
  const ops::QuantizePlan& p = plan_of<ops::QuantizePlan>(d);
  const Q* x = input<Q>(d, 0);
  const float* scale = input(d, 1);
  const Q* zero = input<Q>(d, 2);
  float* out = output(d, 0);
  parallel_ranges(context, p.n, int64_t{1} << 14, [&](int64_t b, int64_t e) {
    if (p.channels == 1) {
      const float s = scale[0];
      const int32_t z = zero[0];
      for (int64_t i = b + dequantize_vector<Q>(x + b, s, z, out + b, e - b); i < e; ++i)
        out[i] = ops::dequantize_of(x[i], s, z);
      return;
    }
    for (int64_t i = b; i < e; ++i) {
      const int64_t c = (i / p.inner) % p.channels;
      out[i] = ops::dequantize_of(x[i], scale[c], zero[c]);
    }
  });
  return ok_status();
}

Status quantized_add(const KernelContext& context, const Dispatch& d) {
  const ops::QuantizedAddPlan& p = plan_of<ops::QuantizedAddPlan>(d);
  const uint8_t* a = input<uint8_t>(d, 0);
  const uint8_t* b = input<uint8_t>(d, 1);
  uint8_t* y = output<uint8_t>(d, 0);
  parallel_ranges(context, p.n, int64_t{1} << 15, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa_avx512_bw_vl())
      i += quantized_add_avx512(p, a + begin, b + begin, y + begin, end - begin);
    else if (isa_avx2())
      i += quantized_add_avx2(p, a + begin, b + begin, y + begin, end - begin);
#endif
    for (; i < end; ++i) y[i] = ops::quantized_add_of(p, a[i], b[i]);
  });
  return ok_status();
}

template Status quantize_linear<int8_t>(const KernelContext&, const Dispatch&);
template Status quantize_linear<uint8_t>(const KernelContext&, const Dispatch&);
template Status dequantize_linear<int8_t>(const KernelContext&, const Dispatch&);
template Status dequantize_linear<uint8_t>(const KernelContext&, const Dispatch&);
template Status dequantize_linear<int32_t>(const KernelContext&, const Dispatch&);

// lstm_cell: a row's gates through the sigmoid and tanh kernels' vector
// blocks (their bits, as the operators it replaces have them), then
// lstm_cell_of's products and sums, 256 columns at a time. One step of a
// recurrent loop: a few hundred values, on the calling thread. c (output 0)
// may be the previous c's storage: each column is read before it is written.
Status lstm_cell(const KernelContext&, const Dispatch& d) {
  const ops::LstmCellPlan& p = plan_of<ops::LstmCellPlan>(d);
  const float* gates = input(d, 0);
  const float* c_prev = input(d, 1);
  float* c = output(d, 0);
  float* h = output(d, 1);
  constexpr int64_t kColumns = 256;
  alignas(64) float in[kColumns], out[kColumns], forget[kColumns], cell[kColumns];
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* g = gates + r * 4 * p.hidden;
    for (int64_t j0 = 0; j0 < p.hidden; j0 += kColumns) {
      const int64_t n = std::min(kColumns, p.hidden - j0);
      sigmoid_block(g + j0, in, n);
      sigmoid_block(g + p.hidden + j0, out, n);
      sigmoid_block(g + 2 * p.hidden + j0, forget, n);
      tanh_block(g + 3 * p.hidden + j0, cell, n);
      const float* cp = c_prev + r * p.hidden + j0;
      float* cn = c + r * p.hidden + j0;
      for (int64_t j = 0; j < n; ++j) cn[j] = forget[j] * cp[j] + in[j] * cell[j];
      tanh_block(cn, cell, n);
      float* hn = h + r * p.hidden + j0;
      for (int64_t j = 0; j < n; ++j) hn[j] = out[j] * cell[j];
    }
  }
  return ok_status();
}

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
template <typename T>
Status less_or_equal(const KernelContext& c, const Dispatch& d) {
  return compare<LessOrEqualOp, T>(c, d);
}
template <typename T>
Status greater_or_equal(const KernelContext& c, const Dispatch& d) {
  return compare<GreaterOrEqualOp, T>(c, d);
}
#define HEXIR_COMPARE_TYPES(T)                                                \
  template Status equal<T>(const KernelContext&, const Dispatch&);         \
  template Status less<T>(const KernelContext&, const Dispatch&);          \
  template Status greater<T>(const KernelContext&, const Dispatch&);       \
  template Status less_or_equal<T>(const KernelContext&, const Dispatch&); \
  template Status greater_or_equal<T>(const KernelContext&, const Dispatch&);
HEXIR_COMPARE_TYPES(float)
HEXIR_COMPARE_TYPES(int32_t)
HEXIR_COMPARE_TYPES(int64_t)
#undef HEXIR_COMPARE_TYPES

Status logical_and(const KernelContext& c, const Dispatch& d) { return compare<AndOp, uint8_t>(c, d); }
Status logical_or(const KernelContext& c, const Dispatch& d) { return compare<OrOp, uint8_t>(c, d); }
Status logical_xor(const KernelContext& c, const Dispatch& d) { return compare<XorOp, uint8_t>(c, d); }

Status fmod(const KernelContext& c, const Dispatch& d) { return binary<FmodOp>(c, d); }
template <typename T>
Status int_add(const KernelContext& c, const Dispatch& d) { return int_binary<IntAddOp, T>(c, d); }
template <typename T>
Status int_sub(const KernelContext& c, const Dispatch& d) { return int_binary<IntSubOp, T>(c, d); }
template <typename T>
Status int_mul(const KernelContext& c, const Dispatch& d) { return int_binary<IntMulOp, T>(c, d); }
template <typename T>
Status int_div(const KernelContext& c, const Dispatch& d) { return int_binary<IntDivOp, T>(c, d); }
template <typename T>
Status int_maximum(const KernelContext& c, const Dispatch& d) { return int_binary<IntMaximumOp, T>(c, d); }
template <typename T>
Status int_minimum(const KernelContext& c, const Dispatch& d) { return int_binary<IntMinimumOp, T>(c, d); }
template <typename T>
Status int_mod(const KernelContext& c, const Dispatch& d) {
  return plan_of<BinaryPlan>(d).variant == 1 ? int_binary<IntFmodOp, T>(c, d) : int_binary<IntModOp, T>(c, d);
}
template <typename T>
Status int_pow(const KernelContext& c, const Dispatch& d) { return int_binary<IntPowOp, T>(c, d); }
template <typename T>
Status int_neg(const KernelContext& c, const Dispatch& d) { return unary<IntNegOp, T>(c, d); }
template <typename T>
Status int_abs(const KernelContext& c, const Dispatch& d) { return unary<IntAbsOp, T>(c, d); }
template <typename T>
Status sign(const KernelContext& c, const Dispatch& d) { return unary<SignOp, T>(c, d); }
#define HEXIR_INT_TYPES(T)                                              \
  template Status int_add<T>(const KernelContext&, const Dispatch&);     \
  template Status int_sub<T>(const KernelContext&, const Dispatch&);     \
  template Status int_mul<T>(const KernelContext&, const Dispatch&);     \
  template Status int_div<T>(const KernelContext&, const Dispatch&);     \
  template Status int_maximum<T>(const KernelContext&, const Dispatch&); \
  template Status int_minimum<T>(const KernelContext&, const Dispatch&); \
  template Status int_mod<T>(const KernelContext&, const Dispatch&);     \
  template Status int_pow<T>(const KernelContext&, const Dispatch&);     \
  template Status int_neg<T>(const KernelContext&, const Dispatch&);     \
  template Status int_abs<T>(const KernelContext&, const Dispatch&);     \
  template Status sign<T>(const KernelContext&, const Dispatch&);
HEXIR_INT_TYPES(int32_t)
HEXIR_INT_TYPES(int64_t)
#undef HEXIR_INT_TYPES
template Status sign<float>(const KernelContext&, const Dispatch&);
Status ceil(const KernelContext& c, const Dispatch& d) { return unary<CeilOp>(c, d); }
Status floor(const KernelContext& c, const Dispatch& d) { return unary<FloorOp>(c, d); }
Status round(const KernelContext& c, const Dispatch& d) { return unary<RoundOp>(c, d); }

// Any non-zero byte is true; the result is 0 or 1.
Status logical_not(const KernelContext&, const Dispatch& d) {
  const int64_t n = plan_of<ops::UnaryPlan>(d).n;
  const auto* in = input<uint8_t>(d, 0);
  auto* out = output<uint8_t>(d, 0);
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] == 0;
  return ok_status();
}

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
  if (transposed_tiles(context, p, in, out,
                       [&](const float* row, float* to, int64_t width) { Block(row, to, width, a, b); }))
    return ok_status();
  if (p.rank > 0) {  // a strided view: each row in place when unit-stride, else gathered into a block on the stack
    strided_rows(context, p, [&](int64_t from, int64_t to, int64_t length, int64_t stride) {
      if (stride == 1) {  // the relu after a video ResNet's 3-D convolution (a transpose keeping W) ran at 2 ns a float
        Block(in + from, out + to, length, a, b);
        return;
      }
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
Status gelu(const KernelContext& c, const Dispatch& d) {
  return plan_of<ops::UnaryPlan>(d).variant == 1 ? block_map<act_block<Act::kGeluTanh>>(c, d)
                                                 : block_map<act_block<Act::kGeluErf>>(c, d);
}
Status relu(const KernelContext& c, const Dispatch& d) { return block_map<act_block<Act::kRelu>>(c, d); }
Status silu(const KernelContext& c, const Dispatch& d) { return block_map<act_block<Act::kSilu>>(c, d); }
Status sigmoid(const KernelContext& c, const Dispatch& d) { return block_map<act_block<Act::kSigmoid>>(c, d); }
Status tanh(const KernelContext& c, const Dispatch& d) { return block_map<act_block<Act::kTanh>>(c, d); }
Status exp(const KernelContext& c, const Dispatch& d) { return unary<ExpOp>(c, d); }
Status sqrt(const KernelContext& c, const Dispatch& d) { return unary<SqrtOp>(c, d); }
Status rsqrt(const KernelContext& c, const Dispatch& d) { return unary<RsqrtOp>(c, d); }
Status neg(const KernelContext& c, const Dispatch& d) { return unary<NegOp>(c, d); }
Status leaky_relu(const KernelContext& c, const Dispatch& d) { return unary_floats<LeakyReluOp>(c, d); }
Status clip(const KernelContext& c, const Dispatch& d) { return unary_floats<ClipOp>(c, d); }
Status hard_sigmoid(const KernelContext& c, const Dispatch& d) { return block_map<act_block<Act::kHardSigmoid>>(c, d); }
Status hard_swish(const KernelContext& c, const Dispatch& d) { return block_map<act_block<Act::kHardSwish>>(c, d); }
Status erf(const KernelContext& c, const Dispatch& d) { return block_map<act_block<Act::kErf>>(c, d); }
Status log(const KernelContext& c, const Dispatch& d) { return unary<LogOp>(c, d); }
Status abs(const KernelContext& c, const Dispatch& d) { return unary<AbsOp>(c, d); }
Status reciprocal(const KernelContext& c, const Dispatch& d) { return unary<ReciprocalOp>(c, d); }
Status softplus(const KernelContext& c, const Dispatch& d) { return unary<SoftplusOp>(c, d); }

template <ops::MathFn F>
Status math(const KernelContext& c, const Dispatch& d) {
  if constexpr (F == ops::MathFn::kIsInf || F == ops::MathFn::kIsNaN) return float_class<F>(c, d);
  else if constexpr (kMathLanes<F>) return block_map<math_block<F>>(c, d);
  else return unary_floats<MathOp<F>>(c, d);  // libm's, and mish (log1pf)
}
#define HEXIR_MATH(F) template Status math<ops::MathFn::F>(const KernelContext&, const Dispatch&);
HEXIR_MATH(kSin)
HEXIR_MATH(kCos)
HEXIR_MATH(kTan)
HEXIR_MATH(kAsin)
HEXIR_MATH(kAcos)
HEXIR_MATH(kAtan)
HEXIR_MATH(kSinh)
HEXIR_MATH(kCosh)
HEXIR_MATH(kAsinh)
HEXIR_MATH(kAcosh)
HEXIR_MATH(kAtanh)
HEXIR_MATH(kElu)
HEXIR_MATH(kSelu)
HEXIR_MATH(kCelu)
HEXIR_MATH(kMish)
HEXIR_MATH(kSoftsign)
HEXIR_MATH(kThresholdedRelu)
HEXIR_MATH(kShrink)
HEXIR_MATH(kIsInf)
HEXIR_MATH(kIsNaN)
#undef HEXIR_MATH
Status prelu(const KernelContext& c, const Dispatch& d) { return binary<PReluOp>(c, d); }

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
    case DType::kBF16: return cast_from<BHalf>(to);
    case DType::kI32: return cast_from<int32_t>(to);
    case DType::kI64: return cast_from<int64_t>(to);
    case DType::kBool: return cast_from<BoolByte>(to);
    case DType::kU8: return cast_from<uint8_t>(to);
    default: return nullptr;
  }
}

void erf_block(const float* in, float* out, int64_t n) { act_block<Act::kErf>(in, out, n); }
void gelu_erf_block(const float* in, float* out, int64_t n) { act_block<Act::kGeluErf>(in, out, n); }
void hard_sigmoid_block(const float* in, float* out, int64_t n, float alpha, float beta) {
  act_block<Act::kHardSigmoid>(in, out, n, alpha, beta);
}
void hard_swish_block(const float* in, float* out, int64_t n) { act_block<Act::kHardSwish>(in, out, n); }
void relu_block(const float* in, float* out, int64_t n) { act_block<Act::kRelu>(in, out, n); }
void leaky_relu_block(const float* in, float* out, int64_t n, float alpha) {
  act_block<Act::kLeakyRelu>(in, out, n, alpha);
}
void clip_block(const float* in, float* out, int64_t n, float lo, float hi) { act_block<Act::kClip>(in, out, n, lo, hi); }
void sigmoid_block(const float* in, float* out, int64_t n) { act_block<Act::kSigmoid>(in, out, n); }
void silu_block(const float* in, float* out, int64_t n) { act_block<Act::kSilu>(in, out, n); }
void tanh_block(const float* in, float* out, int64_t n) { act_block<Act::kTanh>(in, out, n); }
void gelu_tanh_block(const float* in, float* out, int64_t n) { act_block<Act::kGeluTanh>(in, out, n); }

}  // namespace hexir::hal::cpu::internal
