// softmax and layernorm (both read every input element of a row before
// writing that element, so they are safe when the output is the input), and
// the reductions.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

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
// the 32 lanes are then folded in halves (16, 8, 4, 2, 1).
constexpr int kSumLanes = 32;

double fold_lanes(double* acc) {
  for (int width = kSumLanes / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  return acc[0];
}

// Element i's double (or its squared deviation from `mean`) into lane i % 32.
// A plain loop over the 32 lanes, which GCC vectorizes for the ISA `widest`
// compiles it for (written with lanes::F64 it split the conversions through
// the stack). The same doubles in the same order on every ISA.
template <bool kDeviation>
struct LaneSums {
  template <int N>
  static HEXIR_LANES double run(const float* x, int64_t n, double mean) {
    double acc[kSumLanes] = {};
    auto add = [&](int j, float v) {
      double d = static_cast<double>(v);
      if constexpr (kDeviation) {
        d -= mean;
        d *= d;  // then added: two roundings (-ffp-contract=off)
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

double sum_contiguous(const float* x, int64_t n) { return widest<LaneSums<false>>(x, n, 0.0); }
// The sum of (x[i] - mean)^2 in double, element i in lane i % 32 as above.
double squared_deviation_sum(const float* x, int64_t n, double mean) {
  return widest<LaneSums<true>>(x, n, mean);
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
