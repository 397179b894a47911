// softmax, log_softmax and layernorm (each reads every input element of a
// row before writing that element, so they are safe when the output is the
// input), hardmax, the reductions, argmax / argmin and top_k.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "kernel_util.h"
#include "lanes.h"
#include "thread_pool.h"

namespace hexir::hal::cpu::internal {
namespace {

// A contiguous softmax row whose maximum is finite and which holds no NaN
// (the caller checks): exp(x - max) with ops::exp_of's steps (lanes::exp in
// the vector blocks), summed in 16 float lanes (element j in lane j % 16),
// the lanes then in double in lane order, every element scaled by 1 / sum.
// The same bits on every ISA (the sum's lanes do not follow the vector
// width) and at every thread count (a row is one call).
constexpr int kSoftmaxLanes = 16;
struct SoftmaxRow {
  template <int N>
  static HEXIR_LANES void run(const float* in, float* out, int64_t length, float max_value) {
    constexpr int kVectors = kSoftmaxLanes / N;
    lanes::F32<N> acc[kVectors] = {};
    const lanes::F32<N> m = lanes::splat<N>(max_value);
    int64_t j = 0;
    for (; j + kSoftmaxLanes <= length; j += kSoftmaxLanes) {
      for (int q = 0; q < kVectors; ++q) {
        const lanes::F32<N> e = lanes::exp<N>(lanes::load<N>(in + j + q * N) - m);
        lanes::store<N>(out + j + q * N, e);
        acc[q] += e;
      }
    }
    float partial[kSoftmaxLanes];
    for (int q = 0; q < kVectors; ++q) lanes::store<N>(partial + q * N, acc[q]);
    for (int t = 0; j + t < length; ++t) {
      const float e = ops::exp_of(in[j + t] - max_value);
      out[j + t] = e;
      partial[t] += e;
    }
    double sum = 0.0;
    for (float v : partial) sum += v;
    const float scale = static_cast<float>(1.0 / sum);
    int64_t i = 0;
    for (; i + N <= length; i += N) lanes::store<N>(out + i, lanes::load<N>(out + i) * scale);
    for (; i < length; ++i) out[i] *= scale;
  }
};

// The sum of exp(x - max_value) over a contiguous row whose maximum is finite
// and which holds no NaN: SoftmaxRow's exponentials and lanes, nothing stored
// (log_softmax's rows and reduce_log_sum_exp's runs).
struct ExpSum {
  template <int N>
  static HEXIR_LANES double run(const float* in, int64_t length, float max_value) {
    constexpr int kVectors = kSoftmaxLanes / N;
    lanes::F32<N> acc[kVectors] = {};
    const lanes::F32<N> m = lanes::splat<N>(max_value);
    int64_t j = 0;
    for (; j + kSoftmaxLanes <= length; j += kSoftmaxLanes)
      for (int q = 0; q < kVectors; ++q) acc[q] += lanes::exp<N>(lanes::load<N>(in + j + q * N) - m);
    float partial[kSoftmaxLanes];
    for (int q = 0; q < kVectors; ++q) lanes::store<N>(partial + q * N, acc[q]);
    for (int t = 0; j + t < length; ++t) partial[t] += ops::exp_of(in[j + t] - max_value);
    double sum = 0.0;
    for (float v : partial) sum += v;
    return sum;
  }
};

// The row's maximum (NaN-free rows only use it) and whether it holds a NaN
// (a compare chain per element when scalar).
struct RowMax {
  template <int N>
  static HEXIR_LANES float run(const float* in, int64_t length, bool* nan) {
    lanes::F32<N> m = lanes::splat<N>(-std::numeric_limits<float>::infinity());
    lanes::I32<N> unordered = {};
    int64_t j = 0;
    for (; j + N <= length; j += N) {
      const lanes::F32<N> v = lanes::load<N>(in + j);
      unordered |= v != v;
      m = lanes::max<N>(m, v);
    }
    float max_value = lanes::max_of<N>(m);  // the maximum does not depend on the order it is taken in
    bool any = false;
    for (int i = 0; i < N; ++i) any |= unordered[i] != 0;
    for (; j < length; ++j) {
      const float v = in[j];
      max_value = v > max_value ? v : max_value;
      any |= v != v;
    }
    *nan = any;
    return max_value;
  }
};

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
  const bool contiguous = inner == 1;
  parallel_ranges(context, rows, std::max<int64_t>(1, (int64_t{1} << 15) / length), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t o = r / inner, i = r % inner;
      const int64_t base = o * length * inner + i;
      const float* row_in = in + base;
      float* row_out = out + base;
      float max_value = -std::numeric_limits<float>::infinity();
      if (contiguous) {
        bool nan = false;
        max_value = widest<RowMax>(row_in, length, &nan);
        if (!nan && std::isfinite(max_value)) {
          widest<SoftmaxRow>(row_in, row_out, length, max_value);
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

// scale * (q . k_j) for keys j < n: q and each k row `d` contiguous floats,
// k rows k_row apart; a float dot in N lanes, the lanes summed in order.
struct AttentionScores {
  template <int N>
  static HEXIR_LANES void run(const float* q, const float* k, int64_t k_row, int64_t d, int64_t n, float scale,
                              float* s) {
    for (int64_t j = 0; j < n; ++j) {
      const float* kj = k + j * k_row;
      lanes::F32<N> acc = lanes::zero<N>();
      int64_t i = 0;
      for (; i + N <= d; i += N) acc += lanes::load<N>(q + i) * lanes::load<N>(kj + i);
      float partial[N];
      lanes::store<N>(partial, acc);
      float sum = 0.0f;
      for (int l = 0; l < N; ++l) sum += partial[l];
      for (; i < d; ++i) sum += q[i] * kj[i];
      s[j] = sum * scale;
    }
  }
};

// out[c] = sum over j < n of w[j] * v_j[c], v rows v_row apart, e columns:
// up to four vectors of columns held in registers across the keys.
struct AttentionWeightedRows {
  template <int N>
  static HEXIR_LANES void run(const float* w, const float* v, int64_t v_row, int64_t e, int64_t n, float* out) {
    int64_t c = 0;
    for (; c + N <= e;) {
      const int vectors = static_cast<int>(std::min<int64_t>(4, (e - c) / N));
      lanes::F32<N> acc[4] = {};
      for (int64_t j = 0; j < n; ++j) {
        const lanes::F32<N> weight = lanes::splat<N>(w[j]);
        const float* row = v + j * v_row + c;
        for (int q = 0; q < vectors; ++q) acc[q] += weight * lanes::load<N>(row + q * N);
      }
      for (int q = 0; q < vectors; ++q) lanes::store<N>(out + c + q * N, acc[q]);
      c += vectors * N;
    }
    for (; c < e; ++c) {
      float sum = 0.0f;
      for (int64_t j = 0; j < n; ++j) sum += w[j] * v[j * v_row + c];
      out[c] = sum;
    }
  }
};

}  // namespace

// One task per range of (batch, query) rows: the row's scores over its keys
// into its own scratch, softmax there (softmax's row code), then the
// weighted sum of v's rows. Keys past the count are never read.
Status attention(const KernelContext& context, const Dispatch& d) {
  const ops::AttentionPlan& p = plan_of<ops::AttentionPlan>(d);
  const int64_t rows = p.batch_count * p.m;
  if (rows == 0 || p.e == 0) return ok_status();
  const int64_t n = ops::attention_keys(p, *input<int64_t>(d, 3));
  const float* q = input(d, 0);
  const float* k = input(d, 1);
  const float* v = input(d, 2);
  float* out = output(d, 0);
  if (n == 0) {  // softmax over no key: NaN, as the masked graph's softmax of -inf everywhere
    std::fill(out, out + rows * p.e, std::numeric_limits<float>::quiet_NaN());
    return ok_status();
  }
  if (d.workspace == nullptr || d.workspace_size < static_cast<uint64_t>(rows * p.t) * sizeof(float))
    return internal_error("attention: workspace of " + std::to_string(d.workspace_size) + " bytes is too small");
  float* scratch = static_cast<float*>(d.workspace);
  const int64_t work = std::max<int64_t>(1, n * (p.d + p.e));
  parallel_ranges(context, rows, std::max<int64_t>(1, (int64_t{1} << 15) / work), [&](int64_t b, int64_t end) {
    for (int64_t r = b; r < end; ++r) {
      int64_t qo, ko, vo;
      ops::attention_batch_offsets(p, r / p.m, &qo, &ko, &vo);
      float* w = scratch + r * p.t;
      widest<AttentionScores>(q + qo + (r % p.m) * p.q_row, k + ko, p.k_row, p.d, n, p.scale, w);
      bool nan = false;
      const float max_value = widest<RowMax>(static_cast<const float*>(w), n, &nan);
      if (!nan && std::isfinite(max_value)) {
        widest<SoftmaxRow>(static_cast<const float*>(w), w, n, max_value);
      } else {  // NaN and infinities as softmax's scalar rows
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < n; ++j) m = std::fmax(m, w[j]);
        double sum = 0.0;
        for (int64_t j = 0; j < n; ++j) sum += (w[j] = std::exp(w[j] - m));
        const float scale = static_cast<float>(1.0 / sum);
        for (int64_t j = 0; j < n; ++j) w[j] *= scale;
      }
      widest<AttentionWeightedRows>(static_cast<const float*>(w), v + vo, p.v_row, p.e, n, out + r * p.e);
    }
  });
  return ok_status();
}

namespace {
double sum_contiguous(const float* x, int64_t n);
double squared_deviation_sum(const float* x, int64_t n, double mean);

// (x - mean) * inv_std * gamma + beta per element, in the widest lanes.
struct NormalizeRow {
  template <int N>
  static HEXIR_LANES void run(const float* in, const float* gamma, const float* beta, float* out, int64_t width,
                              float mean, float inv_std) {
    int64_t j = 0;
    for (; j + N <= width; j += N)
      lanes::store<N>(out + j, (lanes::load<N>(in + j) - mean) * inv_std * lanes::load<N>(gamma + j) +
                                   lanes::load<N>(beta + j));
    for (; j < width; ++j) out[j] = (in[j] - mean) * inv_std * gamma[j] + beta[j];
  }
};
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
      widest<NormalizeRow>(row_in, gamma, beta, row_out, width, mean_f, inv_std);
    }
  });
  return ok_status();
}

namespace {

// One channel's run of a group_norm row: (x - mean) * gain + shift, the
// inverse deviation and the channel's scale folded into `gain` (centred
// first: no cancellation when the mean is large against the deviation).
struct NormalizeRun {
  template <int N>
  static HEXIR_LANES void run(const float* in, float* out, int64_t n, float mean, float gain, float shift) {
    int64_t j = 0;
    for (; j + N <= n; j += N) lanes::store<N>(out + j, (lanes::load<N>(in + j) - mean) * gain + shift);
    for (; j < n; ++j) out[j] = (in[j] - mean) * gain + shift;
  }
};

}  // namespace

// group_norm: a row per (batch, group) with layernorm's two passes in double
// (mean, then the squared deviations), then each channel's run normalized.
Status group_norm(const KernelContext& context, const Dispatch& d) {
  const ops::GroupNormPlan& p = plan_of<ops::GroupNormPlan>(d);
  if (p.rows == 0 || p.width == 0) return ok_status();
  const float* in = input(d, 0);
  const float* scale = input(d, 1);
  const float* bias = input(d, 2);
  float* out = output(d, 0);
  const int64_t channels_per_group = p.width / p.spatial;
  parallel_ranges(context, p.rows, std::max<int64_t>(1, (int64_t{1} << 15) / p.width), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* row_in = in + r * p.width;
      float* row_out = out + r * p.width;
      const double mean = sum_contiguous(row_in, p.width) / static_cast<double>(p.width);
      const double variance = squared_deviation_sum(row_in, p.width, mean) / static_cast<double>(p.width);
      const double inv_std = 1.0 / std::sqrt(variance + p.epsilon);
      // Centred on the float mean; what it misses of the mean goes into the shift.
      const float mean_f = static_cast<float>(mean);
      const double missed = mean - static_cast<double>(mean_f);
      const int64_t first_channel = (r % p.groups) * channels_per_group;
      for (int64_t c = 0; c < channels_per_group; ++c) {
        const double gain = inv_std * scale[first_channel + c];
        const float shift = static_cast<float>(bias[first_channel + c] - missed * gain);
        widest<NormalizeRun>(row_in + c * p.spatial, row_out + c * p.spatial, p.spatial, mean_f,
                             static_cast<float>(gain), shift);
      }
    }
  });
  return ok_status();
}

namespace {

// The sum, in double, of n contiguous floats: element i goes to lane i % 32,
// the 32 lanes are then folded in halves (16, 8, 4, 2, 1).
constexpr int kSumLanes = 32;

double fold_lanes(double* acc) {
  for (int width = kSumLanes / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  return acc[0];
}

// Element i's double (its squared deviation from `mean`, or its magnitude)
// into lane i % 32. A plain loop over the 32 lanes, which GCC vectorizes for
// the ISA `widest` compiles it for (written with lanes::F64 it split the
// conversions through the stack). The same doubles in the same order on every ISA.
enum class LaneTerm { kValue, kDeviation, kMagnitude };
template <LaneTerm kTerm>
struct LaneSums {
  template <int N>
  static HEXIR_LANES double run(const float* x, int64_t n, double mean) {
    double acc[kSumLanes] = {};
    auto add = [&](int j, float v) {
      double d = static_cast<double>(v);
      if constexpr (kTerm == LaneTerm::kDeviation) {
        d -= mean;
        d *= d;  // then added: two roundings (-ffp-contract=off)
      } else if constexpr (kTerm == LaneTerm::kMagnitude) {
        d = std::fabs(d);
      }
      acc[j] += d;
    };
    int64_t i = 0;
    for (; i + kSumLanes <= n; i += kSumLanes)
      for (int j = 0; j < kSumLanes; ++j) add(j, x[i + j]);
    for (int j = 0; i + j < n; ++j) add(j, x[i + j]);
    return fold_lanes(acc);
  }
};

double sum_contiguous(const float* x, int64_t n) { return widest<LaneSums<LaneTerm::kValue>>(x, n, 0.0); }
// The sum of (x[i] - mean)^2 in double, element i in lane i % 32 as above.
double squared_deviation_sum(const float* x, int64_t n, double mean) {
  return widest<LaneSums<LaneTerm::kDeviation>>(x, n, mean);
}
double magnitude_sum(const float* x, int64_t n) { return widest<LaneSums<LaneTerm::kMagnitude>>(x, n, 0.0); }

// The largest (the smallest with kMin: the largest of the negated) of n
// contiguous floats, NaN if any is; -inf (+inf) of nothing.
template <bool kMin>
struct RowExtreme {
  template <int N>
  static HEXIR_LANES float run(const float* in, int64_t n) {
    lanes::F32<N> m = lanes::splat<N>(-std::numeric_limits<float>::infinity());
    lanes::I32<N> unordered = {};
    int64_t j = 0;
    for (; j + N <= n; j += N) {
      lanes::F32<N> v = lanes::load<N>(in + j);
      if constexpr (kMin) v = -v;
      unordered |= v != v;
      m = lanes::max<N>(m, v);
    }
    float best = lanes::max_of<N>(m);
    bool nan = false;
    for (int i = 0; i < N; ++i) nan |= unordered[i] != 0;
    for (; j < n; ++j) {
      const float v = kMin ? -in[j] : in[j];
      best = v > best ? v : best;
      nan |= v != v;
    }
    if (nan) return std::numeric_limits<float>::quiet_NaN();
    return kMin ? -best : best;
  }
};

// The reduced elements of one output as runs of `length` elements `stride`
// apart: the last reduced dim per index of the others, or the whole block as
// one run when it is contiguous (a global pool, the last axes).
class ReducedRuns {
 public:
  explicit ReducedRuns(const ops::ReducePlan& p) : p_(p) {
    contiguous_ = p.red_rank > 0;
    int64_t stride = 1;
    for (int32_t i = p.red_rank - 1; contiguous_ && i >= 0; --i) {
      contiguous_ = p.red_dims[i] == 1 || p.red_stride[i] == stride;
      stride *= p.red_dims[i];
    }
  }

  template <typename F>
  void each(int64_t base, F&& run) const {
    if (p_.red_count == 0) return;
    if (p_.red_rank == 0 || contiguous_) {  // a scalar (no axes) or one block
      run(base, p_.red_count, int64_t{1});
      return;
    }
    const int32_t outer = p_.red_rank - 1;
    int64_t red_index[kMaxRank] = {};
    do {
      int64_t offset = base;
      for (int32_t i = 0; i < outer; ++i) offset += red_index[i] * p_.red_stride[i];
      run(offset, p_.red_dims[outer], p_.red_stride[outer]);
    } while (next_index(red_index, p_.red_dims, outer));
  }

 private:
  const ops::ReducePlan& p_;
  bool contiguous_;
};

// max (min): NaN if any element is NaN, -inf (+inf) over nothing.
template <bool kMin>
float extreme_of(const ReducedRuns& runs, const float* in, int64_t base) {
  float m = kMin ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  runs.each(base, [&](int64_t offset, int64_t length, int64_t stride) {
    if (m != m) return;
    if (stride == 1 && length >= 16) {
      const float r = widest<RowExtreme<kMin>>(in + offset, length);
      if (r != r || (kMin ? r < m : r > m)) m = r;
      return;
    }
    for (int64_t j = 0; j < length; ++j) {
      const float v = in[offset + j * stride];
      if ((kMin ? v < m : v > m) || v != v) m = v;  // NaN sticks: nothing compares past it
    }
  });
  return m;
}

// The sum in double of f(element) over the reduced elements: runs of 32 or
// more contiguous elements in 32 lanes (lane_sum), the rest in order.
template <typename Lanes, typename Term>
double sum_of(const ReducedRuns& runs, const float* in, int64_t base, Lanes lane_sum, Term term) {
  double sum = 0.0;
  runs.each(base, [&](int64_t offset, int64_t length, int64_t stride) {
    if (stride == 1 && length >= kSumLanes) {
      sum += lane_sum(in + offset, length);
      return;
    }
    for (int64_t j = 0; j < length; ++j) sum += term(in[offset + j * stride]);
  });
  return sum;
}

// log(sum(exp(x))) as max + log(sum(exp(x - max))): no overflow; NaN, +inf
// and -inf (every element -inf, or nothing) as the max is.
float log_sum_exp_of(const ReducedRuns& runs, const float* in, int64_t base) {
  const float m = extreme_of<false>(runs, in, base);
  if (!std::isfinite(m)) return m;
  double sum = 0.0;
  runs.each(base, [&](int64_t offset, int64_t length, int64_t stride) {
    if (stride == 1 && length >= 16) {  // no NaN (m is finite): the vector exponentials
      sum += widest<ExpSum>(in + offset, length, m);
      return;
    }
    for (int64_t j = 0; j < length; ++j) sum += std::exp(static_cast<double>(in[offset + j * stride]) - m);
  });
  return static_cast<float>(m + std::log(sum));
}

float reduce_one(const ops::ReducePlan& p, const ReducedRuns& runs, const float* in, int64_t base) {
  using ops::ReduceKind;
  auto value = [](float v) { return static_cast<double>(v); };
  auto square = [](float v) { return static_cast<double>(v) * static_cast<double>(v); };
  auto magnitude = [](float v) { return std::fabs(static_cast<double>(v)); };
  auto squares = [](const float* x, int64_t n) { return squared_deviation_sum(x, n, 0.0); };
  switch (p.kind) {
    case ReduceKind::kMax:
      return extreme_of<false>(runs, in, base);
    case ReduceKind::kMin:
      return extreme_of<true>(runs, in, base);
    case ReduceKind::kLogSumExp:
      return log_sum_exp_of(runs, in, base);
    case ReduceKind::kProd: {
      double product = 1.0;
      runs.each(base, [&](int64_t offset, int64_t length, int64_t stride) {
        for (int64_t j = 0; j < length; ++j) product *= in[offset + j * stride];
      });
      return static_cast<float>(product);
    }
    case ReduceKind::kL1:
      return static_cast<float>(sum_of(runs, in, base, magnitude_sum, magnitude));
    case ReduceKind::kSumSquare:
      return static_cast<float>(sum_of(runs, in, base, squares, square));
    case ReduceKind::kL2:
      return static_cast<float>(std::sqrt(sum_of(runs, in, base, squares, square)));
    case ReduceKind::kLogSum:
      return static_cast<float>(std::log(sum_of(runs, in, base, sum_contiguous, value)));
    case ReduceKind::kMean:  // numpy: the mean over zero elements is NaN (0/0)
      return static_cast<float>(sum_of(runs, in, base, sum_contiguous, value) /
                                static_cast<double>(p.red_count));
    case ReduceKind::kSum:
      break;
  }
  return static_cast<float>(sum_of(runs, in, base, sum_contiguous, value));
}

// The integer reductions: sums and products wrap in 64 bits (truncated to T,
// the same bits as wrapping in T); max and min exact.
template <typename T>
T reduce_one_integer(const ops::ReducePlan& p, const ReducedRuns& runs, const T* in, int64_t base) {
  using ops::ReduceKind;
  if (p.kind == ReduceKind::kMax || p.kind == ReduceKind::kMin) {
    const bool min = p.kind == ReduceKind::kMin;
    T m = min ? std::numeric_limits<T>::max() : std::numeric_limits<T>::lowest();
    runs.each(base, [&](int64_t offset, int64_t length, int64_t stride) {
      if (min)
        for (int64_t j = 0; j < length; ++j) m = std::min(m, in[offset + j * stride]);
      else
        for (int64_t j = 0; j < length; ++j) m = std::max(m, in[offset + j * stride]);
    });
    return m;
  }
  uint64_t acc = p.kind == ReduceKind::kProd ? 1 : 0;
  runs.each(base, [&](int64_t offset, int64_t length, int64_t stride) {
    const T* x = in + offset;
    auto term = [&](int64_t j) {
      const uint64_t v = static_cast<uint64_t>(static_cast<int64_t>(x[j * stride]));
      switch (p.kind) {
        case ReduceKind::kL1:
          return static_cast<int64_t>(v) < 0 ? 0 - v : v;
        case ReduceKind::kSumSquare:
          return v * v;
        default:
          return v;
      }
    };
    if (p.kind == ReduceKind::kProd)
      for (int64_t j = 0; j < length; ++j) acc *= term(j);
    else
      for (int64_t j = 0; j < length; ++j) acc += term(j);
  });
  return static_cast<T>(acc);
}

#if defined(__x86_64__) && defined(__GNUC__)
// One full block's 64 column sums, 8 doubles to a zmm, the rows in the order
// reduce_columns reads them: each column's additions are the scalar loop's,
// so its bits. That loop, compiled for the baseline ISA, added two doubles
// an instruction: efficientnet's squeeze-excite pools (144 channels at
// 56 x 56) ran 2-3x onnxruntime's.
// (GCC 12 takes the _mm512_undefined_* operand of the conversion for an
// uninitialized read.)
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
[[gnu::target("avx512f")]] void sum_columns64_avx512(const ops::ReducePlan& p, const float* in, int64_t base,
                                                     double* sum) {
  __m512d acc[8];
  for (int v = 0; v < 8; ++v) acc[v] = _mm512_setzero_pd();
  int64_t red_index[kMaxRank] = {};
  do {
    int64_t offset = base;
    for (int32_t i = 0; i < p.red_rank; ++i) offset += red_index[i] * p.red_stride[i];
    const float* row = in + offset;
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) acc[v] = _mm512_add_pd(acc[v], _mm512_cvtps_pd(_mm256_loadu_ps(row + 8 * v)));
  } while (next_index(red_index, p.red_dims, p.red_rank));
  for (int v = 0; v < 8; ++v) _mm512_storeu_pd(sum + 8 * v, acc[v]);
}
// The same on AVX2 over 4 * V columns (V of the 16 ymm): a full block as two
// halves of 32, a narrower map's channels (32, 48, 96: efficientnet's pools
// ended in a scalar loop, 2 doubles an instruction) in the widest V that fit.
template <int V>
[[gnu::target("avx2")]] void sum_columns_avx2(const ops::ReducePlan& p, const float* in, int64_t base,
                                              double* sum) {
  __m256d acc[V];
  for (int v = 0; v < V; ++v) acc[v] = _mm256_setzero_pd();
  int64_t red_index[kMaxRank] = {};
  do {
    int64_t offset = base;
    for (int32_t i = 0; i < p.red_rank; ++i) offset += red_index[i] * p.red_stride[i];
    const float* row = in + offset;
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[v] = _mm256_add_pd(acc[v], _mm256_cvtps_pd(_mm_loadu_ps(row + 4 * v)));
  } while (next_index(red_index, p.red_dims, p.red_rank));
  for (int v = 0; v < V; ++v) _mm256_storeu_pd(sum + 4 * v, acc[v]);
}
// Columns [0, 4 * (n / 4)) of n through sum_columns_avx2; returns how many.
int64_t sum_columns_avx2_up_to(const ops::ReducePlan& p, const float* in, int64_t base, int64_t n, double* sum) {
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) sum_columns_avx2<8>(p, in, base + j, sum + j);
  switch ((n - j) / 4) {
    case 7: sum_columns_avx2<7>(p, in, base + j, sum + j); break;
    case 6: sum_columns_avx2<6>(p, in, base + j, sum + j); break;
    case 5: sum_columns_avx2<5>(p, in, base + j, sum + j); break;
    case 4: sum_columns_avx2<4>(p, in, base + j, sum + j); break;
    case 3: sum_columns_avx2<3>(p, in, base + j, sum + j); break;
    case 2: sum_columns_avx2<2>(p, in, base + j, sum + j); break;
    case 1: sum_columns_avx2<1>(p, in, base + j, sum + j); break;
    default: break;
  }
  return j + (n - j) / 4 * 4;
}
#pragma GCC diagnostic pop
#endif

// Sums and means whose innermost kept dim is contiguous (a channels-last
// global pool: [N,H,W,C] into C sums, each read H*W times C apart): a block
// of neighbouring outputs at a time, every element added to its own double
// in the order reduce_one takes it (row-major over the reduced dims), so the
// same bits as one output at a time, with the rows read in order.
bool reduce_columns(const KernelContext& context, const ops::ReducePlan& p, const float* in, float* out) {
  using ops::ReduceKind;
  constexpr int64_t kColumns = 64;
  if ((p.kind != ReduceKind::kSum && p.kind != ReduceKind::kMean) || p.kept_rank == 0 || p.red_rank == 0 ||
      p.kept_stride[p.kept_rank - 1] != 1 || p.kept_dims[p.kept_rank - 1] < 8)
    return false;
  const int64_t width = p.kept_dims[p.kept_rank - 1];
  const int64_t blocks = (width + kColumns - 1) / kColumns, outer = p.out_count / width;
  const bool mean = p.kind == ReduceKind::kMean;
  auto sum_blocks = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / blocks, first = (t % blocks) * kColumns, n = std::min(kColumns, width - first);
      int64_t base = first;  // plus the outer kept dims of output row o
      for (int64_t rest = o, i = p.kept_rank - 1; i-- > 0;) {
        base += rest % p.kept_dims[i] * p.kept_stride[i];
        rest /= p.kept_dims[i];
      }
      double sum[kColumns] = {};
      int64_t done = 0;  // columns summed by a vector path
#if defined(__x86_64__) && defined(__GNUC__)
      if (n == kColumns && p.red_count > 0 && isa_avx512()) {
        static_assert(kColumns == 64);
        sum_columns64_avx512(p, in, base, sum);
        done = n;
      } else if (p.red_count > 0 && isa_avx2()) {
        done = sum_columns_avx2_up_to(p, in, base, n, sum);
      }
#endif
      if (p.red_count > 0 && done < n) {
        int64_t red_index[kMaxRank] = {};
        do {
          int64_t offset = base;
          for (int32_t i = 0; i < p.red_rank; ++i) offset += red_index[i] * p.red_stride[i];
          const float* row = in + offset;
          for (int64_t j = done; j < n; ++j) sum[j] += static_cast<double>(row[j]);
        } while (next_index(red_index, p.red_dims, p.red_rank));
      }
      float* y = out + o * width + first;
      for (int64_t j = 0; j < n; ++j)  // numpy: the mean over zero elements is NaN (0/0)
        y[j] = static_cast<float>(mean ? sum[j] / static_cast<double>(p.red_count) : sum[j]);
    }
  };
  const int64_t grain =
      std::max<int64_t>(1, (int64_t{1} << 15) / (kColumns * std::max<int64_t>(p.red_count, 1)));
  parallel_ranges(context, outer * blocks, grain, sum_blocks);
  return true;
}

}  // namespace

// One output element at a time (reduce_one); outputs are independent, so
// ranges of them go over the pool, each computed as on one thread.
template <typename T>
Status reduce(const KernelContext& context, const Dispatch& d) {
  const ops::ReducePlan& p = plan_of<ops::ReducePlan>(d);
  if (p.out_count == 0) return ok_status();
  const T* in = input<T>(d, 0);
  T* out = output<T>(d, 0);
  if constexpr (std::is_same_v<T, float>)
    if (reduce_columns(context, p, in, out)) return ok_status();
  const ReducedRuns runs(p);
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
      if constexpr (std::is_same_v<T, float>)
        out[o] = reduce_one(p, runs, in, base);
      else
        out[o] = reduce_one_integer<T>(p, runs, in, base);
      next_index(kept_index, p.kept_dims, p.kept_rank);
    }
  });
  return ok_status();
}
template Status reduce<float>(const KernelContext&, const Dispatch&);
template Status reduce<int32_t>(const KernelContext&, const Dispatch&);
template Status reduce<int64_t>(const KernelContext&, const Dispatch&);

// argmax and argmin: one index per (outer, inner) position, ops::argmax_of along the axis.
template <typename T>
Status argmax(const KernelContext&, const Dispatch& d) {
  const ops::ArgmaxPlan& p = plan_of<ops::ArgmaxPlan>(d);
  const T* x = input<T>(d, 0);
  int64_t* out = output<int64_t>(d, 0);
  for (int64_t o = 0; o < p.outer; ++o)
    for (int64_t i = 0; i < p.inner; ++i)
      out[o * p.inner + i] =
          ops::argmax_of(x + o * p.length * p.inner + i, p.length, p.inner, p.select_last, p.smallest);
  return ok_status();
}
template Status argmax<float>(const KernelContext&, const Dispatch&);
template Status argmax<int32_t>(const KernelContext&, const Dispatch&);
template Status argmax<int64_t>(const KernelContext&, const Dispatch&);

// hardmax: zeros, then a 1 at each (outer, inner) position's argmax.
Status hardmax(const KernelContext&, const Dispatch& d) {
  const ops::ArgmaxPlan& p = plan_of<ops::ArgmaxPlan>(d);
  const float* x = input(d, 0);
  float* out = output(d, 0);
  std::fill(out, out + p.outer * p.length * p.inner, 0.0f);
  if (p.length == 0) return ok_status();
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t i = 0; i < p.inner; ++i) {
      const int64_t base = o * p.length * p.inner + i;
      out[base + ops::argmax_of(x + base, p.length, p.inner, 0) * p.inner] = 1.0f;
    }
  }
  return ok_status();
}

// log_softmax: per row x - max - log(sum(exp(x - max))), the sum in double.
// Each row is read whole before it is written (in place is safe). A row
// holding NaN or +inf, or only -inf, gives NaN (as the definition: the max
// ignores NaN, then exp(NaN) or exp(inf - inf) reaches the sum).
Status log_softmax(const KernelContext& context, const Dispatch& d) {
  const ops::SoftmaxPlan& p = plan_of<ops::SoftmaxPlan>(d);
  const int64_t outer = p.outer, length = p.length, inner = p.inner;
  if (outer == 0 || length == 0 || inner == 0) return ok_status();
  const float* in = input(d, 0);
  float* out = output(d, 0);
  const uint64_t scratch = static_cast<uint64_t>(inner) * (sizeof(double) + sizeof(float));
  if (inner > 1 && d.workspace != nullptr && d.workspace_size >= scratch &&
      reinterpret_cast<uintptr_t>(d.workspace) % alignof(double) == 0) {
    // As softmax's: per column of the inner block a float max and a double
    // sum (then its log), every pass unit-stride over the inner dims.
    double* shifts = static_cast<double*>(d.workspace);
    float* column = reinterpret_cast<float*>(shifts + inner);
    for (int64_t o = 0; o < outer; ++o) {
      const float* block_in = in + o * length * inner;
      float* block_out = out + o * length * inner;
      for (int64_t i = 0; i < inner; ++i) column[i] = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < length; ++j)
        for (int64_t i = 0; i < inner; ++i) column[i] = std::fmax(column[i], block_in[j * inner + i]);
      for (int64_t i = 0; i < inner; ++i) shifts[i] = 0.0;
      for (int64_t j = 0; j < length; ++j)
        for (int64_t i = 0; i < inner; ++i) shifts[i] += std::exp(block_in[j * inner + i] - column[i]);
      for (int64_t i = 0; i < inner; ++i) shifts[i] = std::log(shifts[i]);
      for (int64_t j = 0; j < length; ++j)
        for (int64_t i = 0; i < inner; ++i)
          block_out[j * inner + i] = (block_in[j * inner + i] - column[i]) - static_cast<float>(shifts[i]);
    }
    return ok_status();
  }
  // One row per (outer, inner) pair, over the pool. Contiguous rows with a
  // finite maximum and no NaN take the vector exponentials (ExpSum).
  const int64_t rows = outer * inner;
  parallel_ranges(context, rows, std::max<int64_t>(1, (int64_t{1} << 15) / length),
                  [&](int64_t b, int64_t e) {
                    for (int64_t r = b; r < e; ++r) {
                      const int64_t base = (r / inner) * length * inner + r % inner;
                      const float* row_in = in + base;
                      float* row_out = out + base;
                      float max_value = -std::numeric_limits<float>::infinity();
                      double sum = 0.0;
                      bool nan = true;
                      if (inner == 1) {
                        max_value = widest<RowMax>(row_in, length, &nan);
                        if (!nan && std::isfinite(max_value)) sum = widest<ExpSum>(row_in, length, max_value);
                      }
                      if (nan || !std::isfinite(max_value)) {
                        max_value = -std::numeric_limits<float>::infinity();
                        for (int64_t j = 0; j < length; ++j)
                          max_value = std::fmax(max_value, row_in[j * inner]);
                        sum = 0.0;
                        for (int64_t j = 0; j < length; ++j) sum += std::exp(row_in[j * inner] - max_value);
                      }
                      const float shift = static_cast<float>(std::log(sum));
                      for (int64_t j = 0; j < length; ++j)
                        row_out[j * inner] = (row_in[j * inner] - max_value) - shift;
                    }
                  });
  return ok_status();
}

// top_k: per row, its indices ordered by ops::topk_before in the workspace
// (a partial sort: n log k), the first k written.
template <typename T>
Status top_k(const KernelContext&, const Dispatch& d) {
  const ops::TopKPlan& p = plan_of<ops::TopKPlan>(d);
  if (p.k == 0 || p.outer == 0 || p.inner == 0) return ok_status();
  if (d.workspace == nullptr || d.workspace_size < static_cast<uint64_t>(p.length) * sizeof(int64_t))
    return internal_error("@top_k: workspace below its stated size");
  const T* x = input<T>(d, 0);
  T* values = output<T>(d, 0);
  int64_t* indices = output<int64_t>(d, 1);
  int64_t* order = static_cast<int64_t*>(d.workspace);
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t i = 0; i < p.inner; ++i) {
      const T* row = x + o * p.length * p.inner + i;
      for (int64_t j = 0; j < p.length; ++j) order[j] = j;
      std::partial_sort(order, order + p.k, order + p.length, [&](int64_t a, int64_t b) {
        return ops::topk_before(row[a * p.inner], a, row[b * p.inner], b, p.largest);
      });
      const int64_t out_base = o * p.k * p.inner + i;
      for (int64_t j = 0; j < p.k; ++j) {
        values[out_base + j * p.inner] = row[order[j] * p.inner];
        indices[out_base + j * p.inner] = order[j];
      }
    }
  }
  return ok_status();
}
template Status top_k<float>(const KernelContext&, const Dispatch&);
template Status top_k<int32_t>(const KernelContext&, const Dispatch&);
template Status top_k<int64_t>(const KernelContext&, const Dispatch&);

// cumsum: per line along the axis, each result the previous result plus one
// element (ops::scatter_add: float adds, integers wrapping), the lines of
// one outer block side by side so the rows are read in memory order.
template <typename T>
Status cumsum(const KernelContext&, const Dispatch& d) {
  const ops::CumSumPlan& p = plan_of<ops::CumSumPlan>(d);
  const T* x = input<T>(d, 0);
  T* out = output<T>(d, 0);
  const int64_t step = p.reverse ? -p.inner : p.inner;
  if (p.inner == 1) {  // one line per outer index, its running sum held in a register
    for (int64_t o = 0; o < p.outer; ++o) {
      const int64_t first = o * p.length + (p.reverse ? p.length - 1 : 0);
      T sum = T(0);
      for (int64_t k = 0; k < p.length; ++k) {
        const int64_t at = first + k * step;
        if (p.exclusive) {
          out[at] = sum;
          sum = ops::scatter_add(sum, x[at]);
        } else {
          sum = k == 0 ? x[at] : ops::scatter_add(sum, x[at]);
          out[at] = sum;
        }
      }
    }
    return ok_status();
  }
  for (int64_t o = 0; o < p.outer; ++o) {
    const int64_t first = o * p.length * p.inner + (p.reverse ? (p.length - 1) * p.inner : 0);
    for (int64_t k = 0; k < p.length; ++k) {
      const int64_t row = first + k * step, prev = row - step;
      for (int64_t i = 0; i < p.inner; ++i) {
        if (k == 0)
          out[row + i] = p.exclusive ? T(0) : x[row + i];
        else
          out[row + i] = ops::scatter_add(out[prev + i], p.exclusive ? x[prev + i] : x[row + i]);
      }
    }
  }
  return ok_status();
}
template Status cumsum<float>(const KernelContext&, const Dispatch&);
template Status cumsum<int32_t>(const KernelContext&, const Dispatch&);
template Status cumsum<int64_t>(const KernelContext&, const Dispatch&);

}  // namespace hexir::hal::cpu::internal
