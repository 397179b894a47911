// softmax and layernorm (both read every input element of a row before
// writing that element, so they are safe when the output is the input), and
// the reductions.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "kernel_util.h"
#include "thread_pool.h"

namespace hexir::hal::cpu::internal {
namespace {

// exp(x) for x <= 0 (an input minus its row's maximum), Cephes' expf:
// x = n ln2 + r, a degree-6 polynomial in r, then 2^n from the exponent
// bits; about 1 ulp, 0 below -87 (where expf is subnormal). Plain float
// arithmetic, so the row loops below vectorize.
inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return y * std::bit_cast<float>(bits);
}

// One contiguous row whose maximum is finite and which holds no NaN (the
// caller checks): exp of each element minus the maximum (exp_nonpositive, in
// vector lanes where the machine has them), summed per lane and then in
// double, scaled by 1 / sum. Within a few ulps of the scalar path; the same
// bits whatever the thread count (each row is one call).
using SoftmaxRow = void (*)(const float*, float*, int64_t, float);

void finish_row(float* out, int64_t length, double sum) {
  const float scale = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < length; ++i) out[i] *= scale;
}

void softmax_row_generic(const float* in, float* out, int64_t length, float max_value) {
  double sum = 0.0;
  for (int64_t j = 0; j < length; ++j) {
    const float e = exp_nonpositive(in[j] - max_value);
    out[j] = e;
    sum += e;
  }
  finish_row(out, length, sum);
}

#if defined(__x86_64__) && defined(__GNUC__)
// The same steps as exp_nonpositive, 16 lanes at a time.
[[gnu::target("avx512f")]] inline __m512 exp_nonpositive16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f),
                                                        _mm512_set1_ps(0.5f)),
                                        _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(_mm512_mul_ps(y, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(y, _mm512_castsi512_ps(bits));
}

// The row's maximum and whether it holds a NaN, 16 lanes at a time (the
// scalar loop in softmax() otherwise: a compare chain per element).
[[gnu::target("avx512f")]] float row_max_avx512(const float* in, int64_t length, bool* nan) {
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __mmask16 unordered = 0;
  int64_t j = 0;
  for (; j + 16 <= length; j += 16) {
    const __m512 v = _mm512_loadu_ps(in + j);
    unordered |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    m = _mm512_max_ps(m, v);
  }
  if (j < length) {
    const __mmask16 k = static_cast<__mmask16>((1u << (length - j)) - 1);
    const __m512 v = _mm512_mask_loadu_ps(m, k, in + j);  // lanes past the row keep m
    unordered |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    m = _mm512_max_ps(m, v);
  }
  *nan = unordered != 0;
  alignas(64) float lanes[16];  // the maximum does not depend on the order it is taken in
  _mm512_store_ps(lanes, m);
  float max_value = lanes[0];
  for (float v : lanes) max_value = v > max_value ? v : max_value;
  return max_value;
}

[[gnu::target("avx512f")]] void softmax_row_avx512(const float* in, float* out, int64_t length, float max_value) {
  const __m512 m = _mm512_set1_ps(max_value);
  __m512 lanes = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= length; j += 16) {
    const __m512 e = exp_nonpositive16(_mm512_sub_ps(_mm512_loadu_ps(in + j), m));
    _mm512_storeu_ps(out + j, e);
    lanes = _mm512_add_ps(lanes, e);
  }
  if (j < length) {  // the tail, masked
    const __mmask16 k = static_cast<__mmask16>((1u << (length - j)) - 1);
    const __m512 e = exp_nonpositive16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, in + j), m));
    _mm512_mask_storeu_ps(out + j, k, e);
    lanes = _mm512_add_ps(lanes, _mm512_maskz_mov_ps(k, e));
  }
  alignas(64) float partial[16];
  _mm512_store_ps(partial, lanes);
  double sum = 0.0;
  for (float v : partial) sum += v;
  finish_row(out, length, sum);
}
#endif

SoftmaxRow select_softmax_row() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return softmax_row_avx512;
#endif
  return softmax_row_generic;
}

// The row's maximum (NaN-free rows only use it) and whether it holds a NaN.
float row_max_generic(const float* in, int64_t length, bool* nan) {
  float max_value = -std::numeric_limits<float>::infinity();
  bool any = false;
  for (int64_t j = 0; j < length; ++j) {
    const float v = in[j];
    max_value = v > max_value ? v : max_value;
    any |= v != v;
  }
  *nan = any;
  return max_value;
}
using RowMax = float (*)(const float*, int64_t, bool*);
RowMax select_row_max() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return row_max_avx512;
#endif
  return row_max_generic;
}

}  // namespace

Status softmax(const KernelContext& context, const Dispatch& d) {
  const ops::SoftmaxPlan& p = plan_of<ops::SoftmaxPlan>(d);
  const int64_t outer = p.outer, length = p.length, inner = p.inner;
  if (outer == 0 || length == 0 || inner == 0) return ok_status();
  const float* in = input(d, 0);
  float* out = output(d, 0);
  const uint64_t scratch = static_cast<uint64_t>(inner) * (sizeof(double) + sizeof(float));
  if (inner > 1 && d.workspace != nullptr && d.workspace_size >= scratch &&
      reinterpret_cast<uintptr_t>(d.workspace) % alignof(double) == 0) {
    // Scratch: per column of the inner block a double sum and a float max
    // (then scale), so every pass runs unit-stride over the inner dims. Each
    // element sees the same operations in the same order as the strided path.
    double* sums = static_cast<double*>(d.workspace);
    float* column = reinterpret_cast<float*>(sums + inner);
    for (int64_t o = 0; o < outer; ++o) {
      const float* block_in = in + o * length * inner;
      float* block_out = out + o * length * inner;
      for (int64_t i = 0; i < inner; ++i) column[i] = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < length; ++j)
        for (int64_t i = 0; i < inner; ++i) column[i] = std::fmax(column[i], block_in[j * inner + i]);
      for (int64_t i = 0; i < inner; ++i) sums[i] = 0.0;
      for (int64_t j = 0; j < length; ++j) {
        for (int64_t i = 0; i < inner; ++i) {
          const float e = std::exp(block_in[j * inner + i] - column[i]);
          block_out[j * inner + i] = e;
          sums[i] += e;
        }
      }
      for (int64_t i = 0; i < inner; ++i) column[i] = static_cast<float>(1.0 / sums[i]);
      for (int64_t j = 0; j < length; ++j)
        for (int64_t i = 0; i < inner; ++i) block_out[j * inner + i] *= column[i];
    }
    return ok_status();
  }
  // One strided row per (outer, inner) pair; max-subtracted for stability.
  // Rows are independent: split over the pool. Contiguous rows (the last
  // axis) with a finite maximum and no NaN take the vectorized row; the
  // others (NaN and infinities propagate as numpy's) the scalar loop below.
  const int64_t rows = outer * inner;
  const SoftmaxRow fast_row = inner == 1 ? select_softmax_row() : nullptr;
  const RowMax row_max = select_row_max();
  parallel_ranges(context, rows, std::max<int64_t>(1, (int64_t{1} << 15) / length), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t o = r / inner, i = r % inner;
      const int64_t base = o * length * inner + i;
      const float* row_in = in + base;
      float* row_out = out + base;
      float max_value = -std::numeric_limits<float>::infinity();
      if (fast_row) {
        bool nan = false;
        max_value = row_max(row_in, length, &nan);
        if (!nan && std::isfinite(max_value)) {
          fast_row(row_in, row_out, length, max_value);
          continue;
        }
        max_value = -std::numeric_limits<float>::infinity();
      }
      for (int64_t j = 0; j < length; ++j) max_value = std::fmax(max_value, row_in[j * inner]);
      double sum = 0.0;
      for (int64_t j = 0; j < length; ++j) {
        const float e = std::exp(row_in[j * inner] - max_value);
        row_out[j * inner] = e;
        sum += e;
      }
      const float scale = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < length; ++j) row_out[j * inner] *= scale;
    }
  });
  return ok_status();
}

namespace {
double sum_contiguous(const float* x, int64_t n);
double squared_deviation_sum(const float* x, int64_t n, double mean);
}  // namespace

Status layernorm(const KernelContext& context, const Dispatch& d) {
  const ops::LayernormPlan& p = plan_of<ops::LayernormPlan>(d);
  const int64_t rows = p.rows, width = p.width;
  const double epsilon = p.epsilon;
  if (rows == 0 || width == 0) return ok_status();
  const float* in = input(d, 0);
  const float* gamma = input(d, 1);
  const float* beta = input(d, 2);
  float* out = output(d, 0);
  // Rows are independent: split over the pool.
  parallel_ranges(context, rows, std::max<int64_t>(1, (int64_t{1} << 15) / width), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* row_in = in + r * width;
      float* row_out = out + r * width;
      // Two passes in double: mean, then variance around it (no cancellation),
      // each summed in 32 lanes (one chain of adds was the kernel's latency).
      const double mean = sum_contiguous(row_in, width) / static_cast<double>(width);
      const double variance = squared_deviation_sum(row_in, width, mean) / static_cast<double>(width);
      const float inv_std = static_cast<float>(1.0 / std::sqrt(variance + epsilon));
      const float mean_f = static_cast<float>(mean);
      for (int64_t j = 0; j < width; ++j) row_out[j] = (row_in[j] - mean_f) * inv_std * gamma[j] + beta[j];
    }
  });
  return ok_status();
}

namespace {

// reduce_max: NaN if any element is NaN, -inf over nothing.
void reduce_max(const ops::ReducePlan& p, const float* in, float* out) {
  int64_t kept_index[kMaxRank] = {};
  for (int64_t o = 0; o < p.out_count; ++o) {
    int64_t base = 0;
    for (int32_t i = 0; i < p.kept_rank; ++i) base += kept_index[i] * p.kept_stride[i];
    float m = -std::numeric_limits<float>::infinity();
    if (p.red_count > 0) {
      if (p.red_rank == 0) {
        m = in[base];
      } else {
        const int32_t outer = p.red_rank - 1;
        const int64_t inner = p.red_dims[outer];
        const int64_t inner_stride = p.red_stride[outer];
        int64_t red_index[kMaxRank] = {};
        do {
          int64_t offset = base;
          for (int32_t i = 0; i < outer; ++i) offset += red_index[i] * p.red_stride[i];
          for (int64_t j = 0; j < inner; ++j) {
            const float v = in[offset + j * inner_stride];
            if (v > m || v != v) m = v;  // NaN sticks: nothing compares greater
          }
        } while (next_index(red_index, p.red_dims, outer));
      }
    }
    out[o] = m;
    next_index(kept_index, p.kept_dims, p.kept_rank);
  }
}

// The sum, in double, of n contiguous floats: element i goes to lane i % 32,
// the 32 lanes are then folded in halves (16, 8, 4, 2, 1). Both paths add the
// same doubles in the same order: the same bits with or without AVX-512.
constexpr int kSumLanes = 32;

double fold_lanes(double* acc) {
  for (int width = kSumLanes / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  return acc[0];
}

double sum_contiguous_scalar(const float* x, int64_t n) {
  double acc[kSumLanes] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (int j = 0; j < kSumLanes; ++j) acc[j] += x[i + j];
  for (int j = 0; i + j < n; ++j) acc[j] += x[i + j];
  return fold_lanes(acc);
}

#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx512f")]] double sum_contiguous_avx512(const float* x, int64_t n) {
  __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_loadu_ps(x + i)));
    a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8)));
    a2 = _mm512_add_pd(a2, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 16)));
    a3 = _mm512_add_pd(a3, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 24)));
  }
  alignas(64) double acc[kSumLanes];
  _mm512_store_pd(acc, a0);
  _mm512_store_pd(acc + 8, a1);
  _mm512_store_pd(acc + 16, a2);
  _mm512_store_pd(acc + 24, a3);
  for (int j = 0; i + j < n; ++j) acc[j] += x[i + j];
  return fold_lanes(acc);
}
#endif

double sum_contiguous(const float* x, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) return sum_contiguous_avx512(x, n);
#endif
  return sum_contiguous_scalar(x, n);
}

// The sum of (x[i] - mean)^2 in double, element i in lane i % 32 as above:
// the same doubles in the same order on both paths.
double squared_deviation_sum_scalar(const float* x, int64_t n, double mean) {
  double acc[kSumLanes] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (int j = 0; j < kSumLanes; ++j) {
      const double d = static_cast<double>(x[i + j]) - mean;
      acc[j] += d * d;
    }
  for (int j = 0; i + j < n; ++j) {
    const double d = static_cast<double>(x[i + j]) - mean;
    acc[j] += d * d;
  }
  return fold_lanes(acc);
}

#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx512f")]] double squared_deviation_sum_avx512(const float* x, int64_t n, double mean) {
  const __m512d m = _mm512_set1_pd(mean);
  __m512d a[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8 * q)), m);
      a[q] = _mm512_add_pd(a[q], _mm512_mul_pd(d, d));  // not fused: the scalar path's rounding
    }
  }
  alignas(64) double acc[kSumLanes];
  for (int q = 0; q < 4; ++q) _mm512_store_pd(acc + 8 * q, a[q]);
  for (int j = 0; i + j < n; ++j) {
    const double d = static_cast<double>(x[i + j]) - mean;
    acc[j] += d * d;
  }
  return fold_lanes(acc);
}
#endif

double squared_deviation_sum(const float* x, int64_t n, double mean) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) return squared_deviation_sum_avx512(x, n, mean);
#endif
  return squared_deviation_sum_scalar(x, n, mean);
}

}  // namespace

// Sums (in double) over the reduced dims, one output element at a time (or the
// max). Reduced dims that form one contiguous block (the last axes: a global
// pool) are summed by sum_contiguous; others in index order.
Status reduce(const KernelContext& context, const Dispatch& d) {
  const ops::ReducePlan& p = plan_of<ops::ReducePlan>(d);
  if (p.out_count == 0) return ok_status();
  const float* in = input(d, 0);
  float* out = output(d, 0);
  if (p.max) {
    reduce_max(p, in, out);
    return ok_status();
  }
  // Whether the reduced elements of one output are one contiguous block.
  bool contiguous = p.red_rank > 0;
  int64_t stride = 1;
  for (int32_t i = p.red_rank - 1; contiguous && i >= 0; --i) {
    contiguous = p.red_dims[i] == 1 || p.red_stride[i] == stride;
    stride *= p.red_dims[i];
  }
  // Outputs are independent: ranges of them over the pool, each summed in
  // the same order as on one thread.
  parallel_ranges(context, p.out_count, std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(p.red_count, 1)),
                  [&](int64_t begin, int64_t end) {
    int64_t kept_index[kMaxRank] = {};
    for (int64_t rest = begin, i = p.kept_rank; i-- > 0;) {  // the multi-index of output `begin`
      kept_index[i] = rest % p.kept_dims[i];
      rest /= p.kept_dims[i];
    }
    for (int64_t o = begin; o < end; ++o) {
      int64_t base = 0;
      for (int32_t i = 0; i < p.kept_rank; ++i) base += kept_index[i] * p.kept_stride[i];
      double sum = 0.0;
      if (p.red_count > 0) {
        if (p.red_rank == 0) {
          sum = in[base];
        } else if (contiguous) {
          sum = sum_contiguous(in + base, p.red_count);
        } else {
          const int32_t outer = p.red_rank - 1;
          const int64_t inner = p.red_dims[outer];
          const int64_t inner_stride = p.red_stride[outer];
          int64_t red_index[kMaxRank] = {};
          do {
            int64_t offset = base;
            for (int32_t i = 0; i < outer; ++i) offset += red_index[i] * p.red_stride[i];
            for (int64_t j = 0; j < inner; ++j) sum += in[offset + j * inner_stride];
          } while (next_index(red_index, p.red_dims, outer));
        }
      }
      // numpy: the mean over zero elements is NaN (0/0).
      out[o] = static_cast<float>(p.mean ? sum / static_cast<double>(p.red_count) : sum);
      next_index(kept_index, p.kept_dims, p.kept_rank);
    }
  });
  return ok_status();
}

// argmax: one index per (outer, inner) position, ops::argmax_of along the axis.
Status argmax(const KernelContext&, const Dispatch& d) {
  const ops::ArgmaxPlan& p = plan_of<ops::ArgmaxPlan>(d);
  const float* x = input(d, 0);
  int64_t* out = output<int64_t>(d, 0);
  for (int64_t o = 0; o < p.outer; ++o)
    for (int64_t i = 0; i < p.inner; ++i)
      out[o * p.inner + i] = ops::argmax_of(x + o * p.length * p.inner + i, p.length, p.inner, p.select_last);
  return ok_status();
}

}  // namespace hexir::hal::cpu::internal
