// transpose, reduce_sum/reduce_mean, concat and copy against references.
#include <algorithm>
#include <numeric>

#include "hal_test_util.h"

namespace hexir::hal::testing {
namespace {

using ops::OpId;

// out[i0..in] = x[index permuted back], moving whole elements as bytes.
HostTensor transpose_reference(const HostTensor& x, const std::vector<int64_t>& perm) {
  std::vector<int64_t> out_dims;
  for (int64_t p : perm) out_dims.push_back(x.dims[p]);
  HostTensor out(x.dtype, out_dims);
  const size_t element = dtype_size(x.dtype);
  const auto in_strides = row_major_strides(x.dims);
  for (int64_t i = 0; i < out.count(); ++i) {
    const auto index = unravel(i, out_dims);
    int64_t src = 0;
    for (size_t d = 0; d < perm.size(); ++d) src += index[d] * in_strides[perm[d]];
    std::memcpy(&out.bytes[i * element], &x.bytes[src * element], element);
  }
  return out;
}

void check_transpose(DType dtype, const std::vector<int64_t>& dims, const std::vector<int64_t>& perm) {
  INFO(std::string(dtype_name(dtype)) << dims_string(dims) << " perm " << dims_string(perm));
  HostTensor x = iota_bytes(dtype, dims);
  HostTensor want = transpose_reference(x, perm);
  HostTensor out(dtype, want.dims);
  REQUIRE(run_kernel(OpId::kTranspose, {&x}, out, perm).ok());
  CHECK(out.bytes == want.bytes);
}

// Every permutation of 0..rank-1 for the given dims.
void check_all_perms(DType dtype, const std::vector<int64_t>& dims) {
  std::vector<int64_t> perm(dims.size());
  std::iota(perm.begin(), perm.end(), 0);
  do {
    check_transpose(dtype, dims, perm);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST_CASE("transpose: every perm of rank 2, 3 and 4 (f32)") {
  check_all_perms(DType::kF32, {3, 5});
  check_all_perms(DType::kF32, {2, 3, 4});
  check_all_perms(DType::kF32, {2, 3, 1, 5});
}

TEST_CASE("transpose: the tiled path (16 or more along the contiguous and the last dim), partial tiles") {
  // NCHW <-> NHWC as the channels-last regions convert (docs/layout.md), and every perm of a rank 3.
  check_transpose(DType::kF32, {2, 35, 17, 19}, {0, 2, 3, 1});
  check_transpose(DType::kF32, {2, 17, 19, 35}, {0, 3, 1, 2});
  check_transpose(DType::kI64, {1, 16, 33, 20}, {0, 2, 3, 1});
  check_transpose(DType::kI32, {40, 16}, {1, 0});
  check_all_perms(DType::kF32, {16, 18, 33});
}

TEST_CASE("transpose: i32, u8, i64 and f16 move whole elements") {
  check_all_perms(DType::kI32, {2, 3, 4});
  check_all_perms(DType::kU8, {3, 2, 5});
  check_transpose(DType::kU8, {7, 9}, {1, 0});
  check_transpose(DType::kI64, {2, 3, 2, 2}, {3, 1, 0, 2});
  check_transpose(DType::kF16, {4, 6}, {1, 0});
  check_transpose(DType::kBool, {2, 2, 3}, {2, 0, 1});
}

TEST_CASE("transpose: rank 0, rank 1, rank 8 and zero-size") {
  check_transpose(DType::kF32, {}, {});
  check_transpose(DType::kF32, {6}, {0});
  check_transpose(DType::kF32, {2, 1, 2, 3, 1, 2, 2, 1}, {7, 3, 0, 6, 1, 5, 2, 4});
  check_transpose(DType::kF32, {0, 3}, {1, 0});
  HostTensor x = iota_bytes(DType::kF32, {2, 3}), out(DType::kF32, {3, 2});
  CHECK(run_kernel(OpId::kTranspose, {&x}, out, {0, 2}).code() == StatusCode::kInvalidArgument);
  CHECK(run_kernel(OpId::kTranspose, {&x}, out, {1}).code() == StatusCode::kInvalidArgument);
}

// Reference reduction: returns the result dims (keepdims honoured) and values.
std::pair<std::vector<int64_t>, std::vector<double>> reduce_reference(const HostTensor& x, bool keepdims,
                                                                      std::vector<int64_t> axes, bool mean) {
  if (axes.empty()) {
    axes.resize(x.dims.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  auto reduced = [&](size_t d) {
    return std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
  };
  std::vector<int64_t> kept_dims, out_dims;
  int64_t reduced_count = 1;
  for (size_t d = 0; d < x.dims.size(); ++d) {
    if (reduced(d)) {
      reduced_count *= x.dims[d];
      if (keepdims) out_dims.push_back(1);
    } else {
      kept_dims.push_back(x.dims[d]);
      out_dims.push_back(x.dims[d]);
    }
  }
  std::vector<double> sums(static_cast<size_t>(product(kept_dims)), 0.0);
  for (int64_t i = 0; i < x.count(); ++i) {
    const auto index = unravel(i, x.dims);
    int64_t o = 0;
    for (size_t d = 0; d < x.dims.size(); ++d) {
      if (!reduced(d)) o = o * x.dims[d] + index[d];
    }
    sums[o] += x.at(i);
  }
  if (mean) {
    for (double& s : sums) s /= static_cast<double>(reduced_count);
  }
  return {out_dims, sums};
}

void check_reduce(const std::vector<int64_t>& dims, bool keepdims, const std::vector<int64_t>& axes) {
  for (bool mean : {false, true}) {
    INFO(std::string(mean ? "reduce_mean " : "reduce_sum ")
         << dims_string(dims) << " keepdims " << keepdims << " axes " << dims_string(axes));
    HostTensor x = random_f32(dims, 51);
    auto [out_dims, want] = reduce_reference(x, keepdims, axes, mean);
    HostTensor out(DType::kF32, out_dims);
    std::vector<int64_t> params = {keepdims ? 1 : 0};
    params.insert(params.end(), axes.begin(), axes.end());
    REQUIRE(run_kernel(mean ? OpId::kReduceMean : OpId::kReduceSum, {&x}, out, params).ok());
    check_close(out, want, 1e-5, 1e-5);
  }
}

TEST_CASE("reduce: one axis, each position, with and without keepdims") {
  for (bool keepdims : {false, true}) {
    for (int64_t axis = 0; axis < 3; ++axis) check_reduce({3, 4, 5}, keepdims, {axis});
  }
}

TEST_CASE("reduce: multiple axes") {
  check_reduce({3, 4, 5}, false, {0, 2});
  check_reduce({3, 4, 5}, true, {0, 2});
  check_reduce({2, 3, 4, 5}, false, {1, 2});
  check_reduce({2, 3, 4, 5}, true, {0, 1, 3});
}

// The sum of a contiguous block as the cpu kernel adds it: element i into
// lane i % 32, in double, then the lanes folded in halves.
double lane_sum(const float* x, int64_t n) {
  double lanes[32] = {};
  for (int64_t i = 0; i < n; ++i) lanes[i % 32] += x[i];
  for (int width = 16; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  return lanes[0];
}

TEST_CASE("reduce: the last axes (a global pool) sum in 32 lanes, the same bits on every vector path") {
  for (int64_t length : {1, 7, 31, 32, 33, 100, 1031}) {
    INFO("block of " << length);
    HostTensor x = random_f32({3, 5, length}, 52, -100.0f, 100.0f);
    for (bool mean : {false, true}) {
      HostTensor out(DType::kF32, {3, 1, 1});
      REQUIRE(run_kernel(mean ? OpId::kReduceMean : OpId::kReduceSum, {&x}, out, {1, 1, 2}).ok());
      for (int64_t o = 0; o < 3; ++o) {
        const double sum = lane_sum(x.f32() + o * 5 * length, 5 * length);
        CHECK(out.at(o) == static_cast<float>(mean ? sum / static_cast<double>(5 * length) : sum));
      }
    }
  }
  check_reduce({2, 3, 40, 40}, true, {2, 3});
  check_reduce({2, 3, 1, 40}, false, {1, 2, 3});
}

TEST_CASE("reduce: no axes listed reduces everything") {
  check_reduce({3, 4, 5}, false, {});
  check_reduce({3, 4, 5}, true, {});
  check_reduce({7}, false, {});
  check_reduce({}, false, {});
}

TEST_CASE("reduce: zero-size inputs (sum 0, mean NaN like numpy) and empty outputs") {
  check_reduce({0, 4}, false, {0});
  check_reduce({4, 0}, true, {1});
  check_reduce({0, 4}, false, {1});
  HostTensor x(DType::kF32, {3}), out(DType::kF32, {});
  CHECK(run_kernel(OpId::kReduceSum, {&x}, out, {0, 1}).code() == StatusCode::kInvalidArgument);
  CHECK(run_kernel(OpId::kReduceSum, {&x}, out, {}).code() == StatusCode::kInvalidArgument);
}

HostTensor concat_reference(const std::vector<HostTensor*>& inputs, int64_t axis) {
  std::vector<int64_t> out_dims = inputs[0]->dims;
  out_dims[axis] = 0;
  for (HostTensor* t : inputs) out_dims[axis] += t->dims[axis];
  HostTensor out(inputs[0]->dtype, out_dims);
  const size_t element = dtype_size(out.dtype);
  for (int64_t i = 0; i < out.count(); ++i) {
    auto index = unravel(i, out_dims);
    size_t k = 0;
    while (index[axis] >= inputs[k]->dims[axis]) index[axis] -= inputs[k++]->dims[axis];
    int64_t src = 0;
    for (size_t d = 0; d < index.size(); ++d) src = src * inputs[k]->dims[d] + index[d];
    std::memcpy(&out.bytes[i * element], &inputs[k]->bytes[src * element], element);
  }
  return out;
}

void check_concat(DType dtype, std::vector<std::vector<int64_t>> shapes, int64_t axis) {
  INFO(std::string(dtype_name(dtype)) << " axis " << axis << " first " << dims_string(shapes[0]));
  std::vector<HostTensor> storage;
  for (size_t i = 0; i < shapes.size(); ++i) {
    storage.push_back(iota_bytes(dtype, shapes[i]));
    for (uint8_t& byte : storage.back().bytes) byte = static_cast<uint8_t>(byte + 31 * i);
  }
  std::vector<HostTensor*> inputs;
  for (HostTensor& t : storage) inputs.push_back(&t);
  HostTensor want = concat_reference(inputs, axis);
  HostTensor out(dtype, want.dims);
  REQUIRE(run_kernel(OpId::kConcat, inputs, out, {axis}).ok());
  CHECK(out.bytes == want.bytes);
}

TEST_CASE("concat: three inputs along each axis of a rank-3 tensor") {
  check_concat(DType::kF32, {{1, 3, 4}, {2, 3, 4}, {3, 3, 4}}, 0);
  check_concat(DType::kF32, {{2, 1, 4}, {2, 2, 4}, {2, 3, 4}}, 1);
  check_concat(DType::kF32, {{2, 3, 1}, {2, 3, 2}, {2, 3, 5}}, 2);
}

TEST_CASE("concat: any dtype, one input, zero-size inputs") {
  check_concat(DType::kI32, {{2, 2}, {2, 3}, {2, 1}}, 1);
  check_concat(DType::kU8, {{3, 2}, {1, 2}, {2, 2}}, 0);
  check_concat(DType::kI64, {{2, 3}, {2, 1}}, 1);
  check_concat(DType::kF32, {{4, 5}}, 0);
  check_concat(DType::kF32, {{2, 0}, {2, 3}, {2, 0}}, 1);
  check_concat(DType::kF32, {{0, 3}, {0, 3}}, 0);
  check_concat(DType::kF32, {{0, 3}, {0, 2}}, 1);
}

TEST_CASE("copy: any dtype, byte for byte; in place is a no-op") {
  for (DType dtype : {DType::kF32, DType::kU8, DType::kI64, DType::kBF16}) {
    HostTensor x = iota_bytes(dtype, {3, 7}), out(dtype, {3, 7});
    REQUIRE(run_kernel(OpId::kCopy, {&x}, out).ok());
    CHECK(out.bytes == x.bytes);
  }
  HostTensor x = iota_bytes(DType::kF32, {5});
  const auto before = x.bytes;
  REQUIRE(run_kernel(OpId::kCopy, {&x}, x).ok());
  CHECK(x.bytes == before);
  HostTensor empty(DType::kF32, {0}), empty_out(DType::kF32, {0});
  CHECK(run_kernel(OpId::kCopy, {&empty}, empty_out).ok());
}

}  // namespace
}  // namespace hexir::hal::testing
