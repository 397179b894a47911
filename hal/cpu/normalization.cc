// softmax and layernorm. Both read every input element of a row before
// writing that element, so they are safe when the output is the input.
#include <bit>
#include <cmath>
#include <limits>

#include "kernel_util.h"

namespace hexir::hal::cpu::internal {

Status softmax(const DispatchArgs& args) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, "softmax", 1, 1, /*f32_only=*/true));
  const TensorArg& x = args.operands[0];
  if (args.params == nullptr || args.param_count < 1 || args.params[0] < 0 ||
      args.params[0] >= static_cast<int64_t>(x.rank)) {
    return invalid_argument("softmax: params must be [axis] with axis in 0..rank-1");
  }
  const uint32_t axis = static_cast<uint32_t>(args.params[0]);
  const int64_t outer = dims_product(x.dims, 0, axis);
  const int64_t length = x.dims[axis];
  const int64_t inner = dims_product(x.dims, axis + 1, x.rank);
  if (outer == 0 || length == 0 || inner == 0) return ok_status();
  const float* in = f32_in(x);
  float* out = f32_out(args.operands[1]);
  const uint64_t scratch = static_cast<uint64_t>(inner) * (sizeof(double) + sizeof(float));
  if (inner > 1 && args.workspace != nullptr && args.workspace_size >= scratch &&
      reinterpret_cast<uintptr_t>(args.workspace) % alignof(double) == 0) {
    // Scratch: per column of the inner block a double sum and a float max
    // (then scale), so every pass runs unit-stride over the inner dims. Each
    // element sees the same operations in the same order as the strided path.
    double* sums = static_cast<double*>(args.workspace);
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
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
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
  }
  return ok_status();
}

Status layernorm(const DispatchArgs& args) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, "layernorm", 3, 3, /*f32_only=*/true));
  const TensorArg& x = args.operands[0];
  if (args.params == nullptr || args.param_count < 2 || args.params[0] < 0 ||
      args.params[0] >= static_cast<int64_t>(x.rank)) {
    return invalid_argument("layernorm: params must be [axis, epsilon bits] with axis in 0..rank-1");
  }
  const uint32_t axis = static_cast<uint32_t>(args.params[0]);
  const double epsilon = std::bit_cast<double>(args.params[1]);
  const int64_t rows = dims_product(x.dims, 0, axis);
  const int64_t width = dims_product(x.dims, axis, x.rank);
  if (rows == 0 || width == 0) return ok_status();
  const float* in = f32_in(x);
  const float* gamma = f32_in(args.operands[1]);
  const float* beta = f32_in(args.operands[2]);
  float* out = f32_out(args.operands[3]);
  for (int64_t r = 0; r < rows; ++r) {
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
  return ok_status();
}

}  // namespace hexir::hal::cpu::internal
