// transpose, concat and copy against references.
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
