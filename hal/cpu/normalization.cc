// softmax and layernorm (both read every input element of a row before
// writing that element, so they are safe when the output is the input), and
// the reductions.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel_util.h"
#include "thread_pool.h"

namespace hexir::hal::cpu::internal {

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
  // Rows are independent: split over the pool.
  const int64_t rows = outer * inner;
  parallel_ranges(context, rows, std::max<int64_t>(1, (int64_t{1} << 15) / length), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t o = r / inner, i = r % inner;
      const int64_t base = o * length * inner + i;
      const float* row_in = in + base;
      float* row_out = out + base;
      float max_value = -std::numeric_limits<float>::infinity();
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
      // Two passes in double: mean, then variance around it (no cancellation).
      double sum = 0.0;
      for (int64_t j = 0; j < width; ++j) sum += row_in[j];
      const double mean = sum / static_cast<double>(width);
      double square_sum = 0.0;
      for (int64_t j = 0; j < width; ++j) {
        const double d = row_in[j] - mean;
        square_sum += d * d;
      }
      const double variance = square_sum / static_cast<double>(width);
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

}  // namespace

// Sums (in double) over the reduced dims, one output element at a time (or the max).
Status reduce(const KernelContext&, const Dispatch& d) {
  const ops::ReducePlan& p = plan_of<ops::ReducePlan>(d);
  if (p.out_count == 0) return ok_status();
  const float* in = input(d, 0);
  float* out = output(d, 0);
  if (p.max) {
    reduce_max(p, in, out);
    return ok_status();
  }
  int64_t kept_index[kMaxRank] = {};
  for (int64_t o = 0; o < p.out_count; ++o) {
    int64_t base = 0;
    for (int32_t i = 0; i < p.kept_rank; ++i) base += kept_index[i] * p.kept_stride[i];
    double sum = 0.0;
    if (p.red_count > 0) {
      if (p.red_rank == 0) {
        sum = in[base];
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
