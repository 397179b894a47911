// The byte-moving kernels of any dtype (hal/cpu/layout.cc): transpose,
// concat, copy, split, gather, slice, pad, expand, dynamic_slice,
// update_slice, scatter_nd, scatter_elements, gather_elements and gather_nd
// against references written here: plain loops over
// multi-indices, whole elements as bytes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "reference_util.h"

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
  // An image's 3 (or 4) planes interleaved to channels-last: the last two dims in one loop.
  check_transpose(DType::kU8, {2, 3, 5, 7}, {0, 2, 3, 1});
  check_transpose(DType::kF32, {1, 4, 9, 11}, {0, 2, 3, 1});
  check_transpose(DType::kU8, {3, 1, 6}, {2, 1, 0});
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

// ---- split ----------------------------------------------------------------------

void check_split(DType dtype, const Dims& dims, int64_t axis, const Dims& sizes) {
  INFO("split " << std::string(dtype_name(dtype)) << dims_string(dims) << " axis " << axis << " sizes "
                << dims_string(sizes));
  const HostTensor x = iota_bytes(dtype, dims);
  std::vector<HostTensor> outs;
  for (int64_t s : sizes) {
    Dims d = dims;
    d[static_cast<size_t>(axis)] = s;
    outs.emplace_back(dtype, d);
    fill_sentinel(outs.back(), 0xEE);
  }
  std::vector<HostTensor*> out_ptrs;
  for (HostTensor& o : outs) out_ptrs.push_back(&o);
  Dims params{axis};
  params.insert(params.end(), sizes.begin(), sizes.end());
  HostTensor in = x;
  Status status = run_op(OpId::kSplit, {&in}, out_ptrs, params);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  CHECK(in.bytes == x.bytes);  // the input is untouched
  for (const HostTensor& o : outs) check_untouched(o, 0xEE);
  const Dims x_strides = row_major_strides(dims);
  int64_t start = 0;
  for (size_t k = 0; k < outs.size(); ++k) {
    for (int64_t i = 0; i < outs[k].count(); ++i) {
      Dims index = unravel(i, outs[k].dims);
      index[static_cast<size_t>(axis)] += start;
      int64_t src = 0;
      for (size_t d = 0; d < dims.size(); ++d) src += index[d] * x_strides[d];
      INFO("output " << k << " element " << i);
      REQUIRE(element_bytes(outs[k], i) == element_bytes(x, src));
    }
    start += sizes[k];
  }
}

TEST_CASE("split: several outputs of every element size") {
  check_split(DType::kF32, {4, 9}, 1, {2, 3, 4});
  check_split(DType::kF32, {4, 9}, 0, {1, 3});
  check_split(DType::kI64, {6, 5}, 0, {4, 2});
  check_split(DType::kU8, {3, 2, 7}, 2, {7, 0});
  check_split(DType::kU8, {3, 2, 7}, 2, {0, 3, 4});
  check_split(DType::kF16, {2, 6, 3}, 1, {1, 1, 1, 3});
  check_split(DType::kBool, {5}, 0, {2, 3});
  check_split(DType::kI32, {2, 3, 4, 5}, 3, {1, 1, 1, 1, 1});
  check_split(DType::kI32, {2, 3, 4, 5}, 2, {3, 1});
  check_split(DType::kI64, {3, 1, 4}, 1, {1});                    // one part: a copy
  check_split(DType::kF32, {0, 4}, 1, {1, 3});                    // empty input
  check_split(DType::kF16, {2, 1, 2, 1, 2, 1, 2, 3}, 7, {2, 1});  // rank 8
}

// ---- gather ---------------------------------------------------------------------

HostTensor index_tensor(DType dtype, const Dims& dims, const std::vector<int64_t>& values) {
  HostTensor t(dtype, dims);
  REQUIRE(t.count() == static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kI64) {
      std::memcpy(&t.bytes[8 * i], &values[i], 8);
    } else {
      const int32_t v = static_cast<int32_t>(values[i]);
      std::memcpy(&t.bytes[4 * i], &v, 4);
    }
  }
  return t;
}

void check_gather(DType dtype, const Dims& data_dims, int64_t axis, DType index_dtype, const Dims& index_dims,
                  const std::vector<int64_t>& indices, const Dims& out_dims) {
  INFO("gather " << std::string(dtype_name(dtype)) << dims_string(data_dims) << " axis " << axis
                 << " indices " << std::string(dtype_name(index_dtype)) << dims_string(index_dims) << " "
                 << dims_string(indices));
  HostTensor data = iota_bytes(dtype, data_dims);
  HostTensor idx = index_tensor(index_dtype, index_dims, indices);
  if (data.count() == 0) fill_sentinel(data, 0x33);
  if (idx.count() == 0) fill_sentinel(idx, 0x33);
  HostTensor out(dtype, out_dims);
  fill_sentinel(out, 0xEE);
  Status status = run_kernel(OpId::kGather, {&data, &idx}, out, {axis});
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  check_untouched(out, 0xEE);
  const size_t a = static_cast<size_t>(axis), r = index_dims.size();
  const Dims data_strides = row_major_strides(data_dims);
  const Dims index_strides = row_major_strides(index_dims);
  for (int64_t i = 0; i < out.count(); ++i) {
    const Dims o = unravel(i, out_dims);  // data[:axis] + indices + data[axis+1:]
    int64_t flat_index = 0;
    for (size_t k = 0; k < r; ++k) flat_index += o[a + k] * index_strides[k];
    int64_t pick = indices[static_cast<size_t>(flat_index)];
    if (pick < 0) pick += data_dims[a];
    int64_t src = pick * data_strides[a];
    for (size_t d = 0; d < a; ++d) src += o[d] * data_strides[d];
    for (size_t d = a + 1; d < data_dims.size(); ++d) src += o[d - 1 + r] * data_strides[d];
    INFO("element " << i);
    REQUIRE(element_bytes(out, i) == element_bytes(data, src));
  }
}

TEST_CASE("gather: rows (axis 0), inner axes, i32 and i64 indices, negative indices") {
  check_gather(DType::kF32, {10, 8}, 0, DType::kI32, {4}, {3, 0, 9, 3}, {4, 8});
  check_gather(DType::kF32, {10, 8}, 0, DType::kI64, {2, 3}, {-1, 0, 5, -10, 9, 2}, {2, 3, 8});
  check_gather(DType::kI32, {5, 6, 3}, 1, DType::kI32, {2, 2}, {5, -6, 0, -1}, {5, 2, 2, 3});
  check_gather(DType::kF16, {5, 6, 3}, 1, DType::kI64, {7}, {1, 1, 2, 3, 5, -6, -3}, {5, 7, 3});
  check_gather(DType::kU8, {2, 3, 7}, 2, DType::kI32, {}, {-2}, {2, 3});  // scalar index drops the axis
  check_gather(DType::kI64, {2, 3, 7}, 2, DType::kI64, {3}, {6, 0, -7}, {2, 3, 3});
  check_gather(DType::kBool, {4}, 0, DType::kI32, {6}, {0, 1, 2, 3, -4, -1}, {6});
  check_gather(DType::kF32, {3, 4}, 1, DType::kI32, {0}, {}, {3, 0});       // no indices
  check_gather(DType::kF32, {0, 4}, 1, DType::kI64, {2}, {1, -1}, {0, 2});  // no rows
}

TEST_CASE("gather: an out-of-range index is kInvalidArgument naming it") {
  struct Bad {
    DType index_dtype;
    int64_t axis;
    std::vector<int64_t> indices;
    std::string named;
  };
  const Bad cases[] = {
      {DType::kI32, 0, {0, 4}, "index 4"},
      {DType::kI32, 0, {1, -5}, "index -5"},
      {DType::kI64, 0, {kI64Min}, "index -9223372036854775808"},
      {DType::kI64, 0, {kI64Max}, "index 9223372036854775807"},
      {DType::kI64, 0, {int64_t{1} << 32}, "index 4294967296"},
      {DType::kI32, 0, {kI32Min}, "index -2147483648"},
      {DType::kI32, 1, {2, 3}, "index 3"},
      {DType::kI64, 1, {-4}, "index -4"},
  };
  for (const Bad& b : cases) {
    INFO("axis " << b.axis << " indices " << dims_string(b.indices));
    HostTensor data = iota_bytes(DType::kF32, {4, 3});
    HostTensor idx = index_tensor(b.index_dtype, {static_cast<int64_t>(b.indices.size())}, b.indices);
    Dims out_dims = {4, 3};
    out_dims[static_cast<size_t>(b.axis)] = static_cast<int64_t>(b.indices.size());
    HostTensor out(DType::kF32, out_dims);
    Status status = run_kernel(OpId::kGather, {&data, &idx}, out, {b.axis});
    CHECK(status.code() == StatusCode::kInvalidArgument);
    INFO("message: " << status.message());
    CHECK(status.message().find(b.named) != std::string::npos);
  }
}

// ---- slice ----------------------------------------------------------------------

// The indices ONNX Slice takes along one dim (clamping as the ONNX spec says).
std::vector<int64_t> onnx_indices(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (dim == 0) return {};
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
  }
  std::vector<int64_t> out;
  for (__int128 i = start; step > 0 ? i < end : i > end; i += step) out.push_back(static_cast<int64_t>(i));
  return out;
}

struct SliceArgs {
  std::vector<int64_t> starts, ends, axes, steps;  // axes / steps empty: left out
};

void check_slice(DType dtype, const Dims& dims, const SliceArgs& a, const Dims& want_dims) {
  INFO("slice " << std::string(dtype_name(dtype)) << dims_string(dims) << " starts " << dims_string(a.starts)
                << " ends " << dims_string(a.ends) << " axes " << dims_string(a.axes) << " steps "
                << dims_string(a.steps));
  ops::AttrMap attrs;
  if (!a.starts.empty() || !a.ends.empty()) {
    attrs["starts"] = int_list(a.starts);
    attrs["ends"] = int_list(a.ends);
  }
  if (!a.axes.empty()) attrs["axes"] = int_list(a.axes);
  if (!a.steps.empty()) attrs["steps"] = int_list(a.steps);
  HostTensor x = iota_bytes(dtype, dims);
  const std::vector<TensorType> types{x.type()};
  auto params = ops::lower_attributes(OpId::kSlice, types, attrs, {});
  REQUIRE_MESSAGE(params.ok(), params.status().to_string());
  auto result = ops::infer_result_type(OpId::kSlice, types, *params);
  REQUIRE_MESSAGE(result.ok(), result.status().to_string());
  REQUIRE(result->dims == want_dims);
  REQUIRE(result->dtype == dtype);

  // the indices taken along every dim
  std::vector<std::vector<int64_t>> taken(dims.size());
  for (size_t d = 0; d < dims.size(); ++d)
    for (int64_t i = 0; i < dims[d]; ++i) taken[d].push_back(i);
  for (size_t k = 0; k < a.starts.size(); ++k) {
    int64_t axis = a.axes.empty() ? static_cast<int64_t>(k) : a.axes[k];
    if (axis < 0) axis += static_cast<int64_t>(dims.size());
    const int64_t step = a.steps.empty() ? 1 : a.steps[k];
    taken[static_cast<size_t>(axis)] =
        onnx_indices(dims[static_cast<size_t>(axis)], a.starts[k], a.ends[k], step);
  }
  for (size_t d = 0; d < dims.size(); ++d) REQUIRE(static_cast<int64_t>(taken[d].size()) == want_dims[d]);

  if (x.count() == 0) fill_sentinel(x, 0x33);
  HostTensor out(dtype, want_dims);
  fill_sentinel(out, 0xEE);
  Status status = run_kernel(OpId::kSlice, {&x}, out, *params);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  check_untouched(out, 0xEE);
  const Dims strides = row_major_strides(dims);
  for (int64_t i = 0; i < out.count(); ++i) {
    const Dims o = unravel(i, want_dims);
    int64_t src = 0;
    for (size_t d = 0; d < dims.size(); ++d) src += taken[d][static_cast<size_t>(o[d])] * strides[d];
    INFO("element " << i);
    REQUIRE(element_bytes(out, i) == element_bytes(x, src));
  }
}

TEST_CASE("slice: ONNX attributes lowered, then run") {
  const Dims d = {6, 7, 5};
  check_slice(DType::kI32, d, {{1, -2}, {5, kI64Max}, {0, 2}, {}}, {4, 7, 2});
  check_slice(DType::kI32, d, {{-1}, {kI64Min}, {1}, {-2}}, {6, 4, 5});           // 6, 4, 2, 0
  check_slice(DType::kF32, d, {{4, 6}, {0, -100}, {0, 1}, {-1, -3}}, {4, 3, 5});  // 4..1; 6, 3, 0
  check_slice(DType::kU8, d, {{5, -1, 0}, {-7, 0, 5}, {-3, -2, -1}, {-2, -1, 2}}, {3, 6, 3});
  check_slice(DType::kF16, d, {{2}, {kI64Max}, {1}, {10}}, {6, 1, 5});                 // step past the end
  check_slice(DType::kI64, d, {{kI64Min}, {kI64Max}, {2}, {}}, {6, 7, 5});             // everything
  check_slice(DType::kI64, d, {{kI64Max}, {kI64Min}, {2}, {-1}}, {6, 7, 5});           // everything, reversed
  check_slice(DType::kBool, d, {{3}, {kI64Max}, {0}, {int64_t{1} << 62}}, {1, 7, 5});  // a huge step
  // ONNX clamps a negative-step start to [0, dim-1]: -100 is 0, and element 0 is taken
  check_slice(DType::kI32, d, {{-100}, {-100}, {0}, {-1}}, {1, 7, 5});
  check_slice(DType::kF32, {2, 3, 4, 5}, {{1, 3, -1}, {-100, 0, 0}, {1, 2, 3}, {-1, -2, -3}}, {2, 2, 2, 2});
  check_slice(DType::kF32, {9}, {{1}, {8}, {}, {3}}, {3});
  check_slice(DType::kF32, {}, {}, {});  // a scalar
}

TEST_CASE("slice: empty results") {
  const Dims d = {6, 7, 5};
  check_slice(DType::kI32, d, {{3}, {3}, {}, {}}, {0, 7, 5});
  check_slice(DType::kI32, d, {{5}, {1}, {}, {}}, {0, 7, 5});
  check_slice(DType::kI32, d, {{1}, {5}, {}, {-1}}, {0, 7, 5});
  check_slice(DType::kF16, d, {{100}, {200}, {2}, {}}, {6, 7, 0});
  check_slice(DType::kF16, d, {{-100}, {-50}, {1}, {}}, {6, 0, 5});
  check_slice(DType::kU8, {0, 4}, {{0}, {kI64Max}, {}, {}}, {0, 4});
  check_slice(DType::kU8, {0, 4}, {{-1}, {kI64Min}, {}, {-1}}, {0, 4});
  check_slice(DType::kU8, {4, 0}, {{-1, 1}, {kI64Min, 2}, {}, {-1, 1}}, {4, 0});
}

// ---- pad, expand --------------------------------------------------------------------

// numpy.pad's index rule for one dim, written out: i is the index into the kept
// range [lo, hi) before folding. -1: the constant.
int64_t numpy_pad_index(int mode, int64_t i, int64_t lo, int64_t hi) {
  if (i >= lo && i < hi) return i;
  const int64_t n = hi - lo;
  if (mode == 0) return -1;
  if (mode == 2) return i < lo ? lo : hi - 1;
  if (mode == 3) return lo + (((i - lo) % n) + n) % n;
  // reflect, folding one mirror at a time as numpy does (no period formula)
  if (n == 1) return lo;
  int64_t t = i - lo;
  while (t < 0 || t >= n) t = t < 0 ? -t : 2 * (n - 1) - t;
  return lo + t;
}

void check_pad(DType dtype, const Dims& dims, int mode, int64_t value_word, const Dims& begin,
               const Dims& end) {
  INFO("pad " << dtype_name(dtype) << dims_string(dims) << " mode " << mode << " begin " << dims_string(begin)
              << " end " << dims_string(end));
  HostTensor x(dtype, dims);
  for (size_t i = 0; i < x.bytes.size(); ++i) x.bytes[i] = static_cast<uint8_t>(i * 13 + 5);
  std::vector<int64_t> params{mode, value_word};
  params.insert(params.end(), begin.begin(), begin.end());
  params.insert(params.end(), end.begin(), end.end());
  Dims out_dims;
  for (size_t d = 0; d < dims.size(); ++d) out_dims.push_back(dims[d] + begin[d] + end[d]);
  HostTensor out(dtype, out_dims);
  std::fill(out.bytes.begin(), out.bytes.end(), uint8_t{0xEE});
  REQUIRE(run_kernel(OpId::kPad, {&x}, out, params).ok());
  const size_t e = dtype_size(dtype);
  const Dims in_strides = row_major_strides(dims);
  for (int64_t k = 0; k < product(out_dims); ++k) {
    const Dims index = unravel(k, out_dims);
    int64_t offset = 0;
    bool constant = false;
    for (size_t d = 0; d < dims.size(); ++d) {
      const int64_t lo = std::max<int64_t>(0, -begin[d]), hi = dims[d] - std::max<int64_t>(0, -end[d]);
      const int64_t i = numpy_pad_index(mode, index[d] - begin[d], lo, hi);
      if (i < 0) constant = true;
      offset += i * in_strides[d];
    }
    std::vector<uint8_t> want(e);
    for (size_t b = 0; b < e; ++b)
      want[b] = constant ? static_cast<uint8_t>(static_cast<uint64_t>(value_word) >> (8 * b))
                         : x.bytes[static_cast<size_t>(offset) * e + b];
    const std::vector<uint8_t> got(
        out.bytes.begin() + static_cast<std::ptrdiff_t>(k * static_cast<int64_t>(e)),
        out.bytes.begin() + static_cast<std::ptrdiff_t>((k + 1) * static_cast<int64_t>(e)));
    if (got != want) {
      INFO("output element " << k << " " << dims_string(index) << (constant ? " (constant)" : ""));
      CHECK(false);
      return;
    }
  }
}

TEST_CASE("pad: every mode and element size against numpy's rule") {
  for (DType dtype : {DType::kU8, DType::kF16, DType::kF32, DType::kI64}) {
    const int64_t value = dtype_size(dtype) == 8 ? -5 : 0x5A;
    check_pad(dtype, {3, 4}, 0, value, {1, 2}, {2, 0});
    check_pad(dtype, {4, 5}, 1, 0, {3, 4}, {3, 1});
    check_pad(dtype, {3}, 1, 0, {7}, {9});  // beyond the dim: mirrored again and again
    check_pad(dtype, {2, 3, 4}, 2, 0, {1, 0, 5}, {0, 3, 6});
    check_pad(dtype, {3, 5}, 3, 0, {4, 11}, {5, 7});
    check_pad(dtype, {5, 6}, 0, value, {-1, 2}, {-2, -3});  // crop and pad
    check_pad(dtype, {5, 6}, 1, 0, {-1, 3}, {2, -2});       // reflect inside the cropped part
    check_pad(dtype, {5, 6}, 2, 0, {-4, -1}, {3, 2});
    check_pad(dtype, {1, 4}, 1, 0, {3, 0}, {2, 0});        // reflect of one row repeats it
    check_pad(dtype, {0, 3}, 0, value, {2, 1}, {1, 1});    // constant around nothing
    check_pad(dtype, {3, 2}, 0, value, {-2, 0}, {-1, 0});  // cropped to nothing
    check_pad(dtype, {2, 2, 2, 2, 2}, 2, 0, {1, 0, 1, 0, 1}, {0, 1, 0, 1, 0});
  }
  check_pad(DType::kBool, {2, 3}, 0, 1, {1, 1}, {1, 1});
  // Many rows: split into tasks of whole rows.
  check_pad(DType::kF32, {3, 96, 70}, 0, 0x5A, {0, 2, 1}, {1, 1, 2});
  check_pad(DType::kF32, {3, 96, 70}, 1, 0, {0, 2, 3}, {1, 1, 2});
}

TEST_CASE("pad: ONNX attributes lowered (mode, pads begin-then-end, value in the dtype, axes)") {
  auto lower = [](TensorType x, ops::AttrMap attrs) {
    return ops::lower_attributes(OpId::kPad, std::vector{x}, attrs, {});
  };
  ops::AttrMap attrs;
  attrs["pads"].value = std::vector<ops::AttrValue>{{int64_t{1}}, {int64_t{2}}, {int64_t{3}}, {int64_t{4}}};
  attrs["value"].value = 2.5;
  auto p = lower({DType::kF32, {2, 2}}, attrs);
  REQUIRE(p.ok());
  CHECK(*p == std::vector<int64_t>{0, int64_t{std::bit_cast<uint32_t>(2.5f)}, 1, 2, 3, 4});
  p = lower({DType::kF16, {2, 2}}, attrs);
  REQUIRE(p.ok());
  CHECK((*p)[1] == 0x4100);                               // 2.5 as f16
  CHECK_FALSE(lower({DType::kI32, {2, 2}}, attrs).ok());  // 2.5 is not an i32
  attrs["value"].value = int64_t{-1};
  CHECK((*lower({DType::kI8, {2, 2}}, attrs))[1] == 0xFF);
  CHECK((*lower({DType::kI32, {2, 2}}, attrs))[1] == 0xFFFFFFFF);
  CHECK((*lower({DType::kI64, {2, 2}}, attrs))[1] == -1);
  CHECK_FALSE(lower({DType::kU8, {2, 2}}, attrs).ok());
  attrs["value"].value = int64_t{256};
  CHECK_FALSE(lower({DType::kU8, {2, 2}}, attrs).ok());
  attrs.erase("value");
  attrs["mode"].value = std::string("reflect");
  CHECK((*lower({DType::kF32, {4, 5}}, attrs))[0] == 1);
  attrs["mode"].value = std::string("edge");
  CHECK((*lower({DType::kF32, {4, 5}}, attrs))[0] == 2);
  attrs["mode"].value = std::string("wrap");
  CHECK((*lower({DType::kF32, {4, 5}}, attrs))[0] == 3);
  attrs["value"].value = 1.0;
  CHECK_FALSE(lower({DType::kF32, {4, 5}}, attrs).ok());  // a value for a non-constant mode
  attrs["mode"].value = std::string("symmetric");
  CHECK_FALSE(lower({DType::kF32, {4, 5}}, attrs).ok());
  // axes: the pads list begin then end for the listed axes only
  ops::AttrMap with_axes;
  with_axes["axes"].value = std::vector<ops::AttrValue>{{int64_t{-1}}};
  with_axes["pads"].value = std::vector<ops::AttrValue>{{int64_t{2}}, {int64_t{3}}};
  CHECK(*lower({DType::kF32, {4, 5, 6}}, with_axes) == std::vector<int64_t>{0, 0, 0, 0, 2, 0, 0, 3});
}

TEST_CASE("expand: numpy broadcast of any dtype to the result dims") {
  struct Case {
    DType dtype;
    Dims from, to;
  };
  const Case cases[] = {{DType::kF32, {3, 1}, {2, 3, 4}},     {DType::kI64, {}, {5}},
                        {DType::kU8, {1, 4}, {3, 4}},         {DType::kF16, {2, 3}, {2, 3}},
                        {DType::kBool, {2, 1, 3}, {2, 4, 3}}, {DType::kI32, {1, 3}, {0, 3}},
                        {DType::kF32, {1}, {1, 1, 1}},        {DType::kI64, {4, 1, 1}, {2, 4, 3, 2}}};
  for (const Case& c : cases) {
    INFO(dtype_name(c.dtype) << dims_string(c.from) << " -> " << dims_string(c.to));
    HostTensor x(c.dtype, c.from);
    for (size_t i = 0; i < x.bytes.size(); ++i) x.bytes[i] = static_cast<uint8_t>(i * 29 + 3);
    HostTensor out(c.dtype, c.to);
    REQUIRE(run_kernel(OpId::kExpand, {&x}, out, c.to).ok());
    const size_t e = dtype_size(c.dtype);
    for (int64_t k = 0; k < out.count(); ++k) {
      const int64_t src = broadcast_offset(unravel(k, c.to), c.from);
      CHECK(std::equal(out.bytes.begin() + k * static_cast<int64_t>(e),
                       out.bytes.begin() + (k + 1) * static_cast<int64_t>(e),
                       x.bytes.begin() + src * static_cast<int64_t>(e)));
    }
  }
  // ONNX Expand broadcasts both ways: a stated 1 keeps x's dim.
  auto p = ops::lower_attributes(
      OpId::kExpand, std::vector{TensorType{DType::kF32, {3, 1}}},
      {{"shape", ops::AttrValue{std::vector<ops::AttrValue>{{int64_t{2}}, {int64_t{1}}, {int64_t{6}}}}}}, {});
  REQUIRE(p.ok());
  CHECK(*p == std::vector<int64_t>{2, 3, 6});
}

// ---- dynamic_slice, update_slice --------------------------------------------------

const DType kEveryDType[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI8,
                             DType::kU8,  DType::kI32, DType::kI64,  DType::kBool};

// The start a window of `size` in a dim of `dim` really takes (XLA: clamped into the dim).
int64_t clamped(int64_t start, int64_t dim, int64_t size) {
  return std::min(std::max<int64_t>(start, 0), dim - size);
}

std::vector<HostTensor> start_tensors(const std::vector<int64_t>& starts) {
  std::vector<HostTensor> out;
  for (int64_t s : starts) out.push_back(i64_scalar(s));
  return out;
}

void check_dynamic_slice(DType dtype, const Dims& dims, const std::vector<int64_t>& starts,
                         const Dims& sizes) {
  INFO("dynamic_slice " << std::string(dtype_name(dtype)) << dims_string(dims) << " starts "
                        << dims_string(starts) << " sizes " << dims_string(sizes));
  HostTensor x = iota_bytes(dtype, dims);
  if (x.count() == 0) fill_sentinel(x, 0x33);
  std::vector<HostTensor> s = start_tensors(starts);
  std::vector<HostTensor*> inputs{&x};
  for (HostTensor& t : s) inputs.push_back(&t);
  HostTensor out(dtype, sizes);
  fill_sentinel(out, 0xEE);
  Status status = run_kernel(OpId::kDynamicSlice, inputs, out, sizes);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  check_untouched(out, 0xEE);
  const Dims strides = row_major_strides(dims);
  for (int64_t i = 0; i < out.count(); ++i) {
    const Dims w = unravel(i, sizes);
    int64_t src = 0;
    for (size_t d = 0; d < dims.size(); ++d)
      src += (clamped(starts[d], dims[d], sizes[d]) + w[d]) * strides[d];
    INFO("element " << i);
    REQUIRE(element_bytes(out, i) == element_bytes(x, src));
  }
}

TEST_CASE("dynamic_slice: every dtype, starts inside, clamped from both sides, whole and empty windows") {
  for (DType dtype : kEveryDType) {
    check_dynamic_slice(dtype, {5, 6}, {1, 2}, {2, 3});
    check_dynamic_slice(dtype, {5, 6}, {-3, 9}, {2, 3});             // clamped to 0 and 3
    check_dynamic_slice(dtype, {5, 6}, {kI64Max, kI64Min}, {5, 1});  // whole dim; extremes
    check_dynamic_slice(dtype, {4, 3, 7}, {2, 1, 3}, {1, 2, 4});
  }
  check_dynamic_slice(DType::kF32, {6, 4}, {4, 0}, {1, 4});  // one row (a KV-cache read)
  check_dynamic_slice(DType::kF32, {6, 4}, {2, 7}, {0, 4});  // empty window
  check_dynamic_slice(DType::kI64, {0, 4}, {3, 1}, {0, 2});  // empty tensor
  check_dynamic_slice(DType::kF16, {}, {}, {});              // a scalar: itself
  check_dynamic_slice(DType::kU8, {2, 1, 2, 1, 2, 1, 2, 3}, {1, 0, 1, 0, 1, 0, 1, 1},
                      {1, 1, 1, 1, 1, 1, 2, 2});
}

// update_slice out of place (aliased false) and in place on x (aliased true).
void check_update_slice(DType dtype, const Dims& dims, const Dims& update_dims,
                        const std::vector<int64_t>& starts, bool in_place) {
  INFO("update_slice " << std::string(dtype_name(dtype)) << dims_string(dims) << " update "
                       << dims_string(update_dims) << " starts " << dims_string(starts) << " in place "
                       << in_place);
  HostTensor x = iota_bytes(dtype, dims);
  HostTensor update(dtype, update_dims);
  for (size_t i = 0; i < update.bytes.size(); ++i) update.bytes[i] = static_cast<uint8_t>(0xA0 + i * 3);
  if (dtype == DType::kBool)
    for (uint8_t& b : update.bytes) b &= 1;
  const HostTensor original = x;
  std::vector<HostTensor> s = start_tensors(starts);
  std::vector<HostTensor*> inputs{&x, &update};
  for (HostTensor& t : s) inputs.push_back(&t);
  HostTensor out(dtype, dims);
  fill_sentinel(out, 0xEE);
  Status status = run_op(OpId::kUpdateSlice, inputs, {&out}, {}, in_place ? 0 : -1);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  const HostTensor& got = in_place ? x : out;
  if (!in_place) CHECK(x.bytes == original.bytes);  // x is only read
  const Dims strides = row_major_strides(dims);
  HostTensor want = original;
  for (int64_t i = 0; i < update.count(); ++i) {
    const Dims w = unravel(i, update_dims);
    int64_t dst = 0;
    for (size_t d = 0; d < dims.size(); ++d)
      dst += (clamped(starts[d], dims[d], update_dims[d]) + w[d]) * strides[d];
    const std::vector<uint8_t> e = element_bytes(update, i);
    std::copy(e.begin(), e.end(), want.bytes.begin() + static_cast<std::ptrdiff_t>(dst * esize(want)));
  }
  if (got.count() == 0) {
    if (!in_place) check_untouched(out, 0xEE);
    return;
  }
  CHECK(got.bytes == want.bytes);
}

TEST_CASE("update_slice: every dtype, in place and not, clamped starts, empty updates, the whole tensor") {
  for (DType dtype : kEveryDType)
    for (bool in_place : {false, true}) {
      check_update_slice(dtype, {8, 4}, {1, 4}, {3, 0}, in_place);   // one KV-cache row
      check_update_slice(dtype, {8, 4}, {2, 3}, {7, -2}, in_place);  // clamped to 6 and 0
      check_update_slice(dtype, {3, 5, 4}, {2, 2, 3}, {1, 2, 1}, in_place);
      check_update_slice(dtype, {8, 4}, {8, 4}, {5, 5}, in_place);  // the whole tensor
      check_update_slice(dtype, {8, 4}, {0, 4}, {5, 0}, in_place);  // nothing written
      check_update_slice(dtype, {}, {}, {}, in_place);              // a scalar: the update
    }
  check_update_slice(DType::kF32, {0, 4}, {0, 2}, {1, 1}, false);
  check_update_slice(DType::kI64, {6}, {2}, {kI64Min}, true);
  check_update_slice(DType::kI64, {6}, {2}, {kI64Max}, false);
}

TEST_CASE("update_slice: a result in update's storage (update as large as x) is update") {
  HostTensor x = iota_bytes(DType::kI32, {3, 2});
  HostTensor update = random_f32({3, 2}, 4200);
  update.dtype = DType::kI32;
  const HostTensor want = update;
  HostTensor zero = i64_scalar(0), big = i64_scalar(9);
  HostTensor out(DType::kI32, {3, 2});
  REQUIRE(run_op(OpId::kUpdateSlice, {&x, &update, &zero, &big}, {&out}, {}, 1).ok());
  CHECK(update.bytes == want.bytes);
}

// ---- scatter_nd, scatter_elements ----------------------------------------------

// Where each update element lands (element offsets in data), in update order:
// ONNX ScatterND / ScatterElements written out with unravel, indices wrapped
// once from the end.
std::vector<int64_t> scatter_destinations(OpId id, const Dims& data_dims, const Dims& index_dims,
                                          const std::vector<int64_t>& indices, int64_t axis) {
  const Dims strides = row_major_strides(data_dims);
  auto wrap = [](int64_t index, int64_t dim) { return index < 0 ? index + dim : index; };
  std::vector<int64_t> out;
  if (id == OpId::kScatterElements) {
    for (int64_t i = 0; i < product(index_dims); ++i) {
      Dims at = unravel(i, index_dims);
      at[static_cast<size_t>(axis)] =
          wrap(indices[static_cast<size_t>(i)], data_dims[static_cast<size_t>(axis)]);
      out.push_back(std::inner_product(at.begin(), at.end(), strides.begin(), int64_t{0}));
    }
    return out;
  }
  const size_t k = static_cast<size_t>(index_dims.back());
  const int64_t slice = product(Dims(data_dims.begin() + static_cast<std::ptrdiff_t>(k), data_dims.end()));
  for (size_t t = 0; t * k < indices.size(); ++t) {
    int64_t base = 0;
    for (size_t d = 0; d < k; ++d) base += wrap(indices[t * k + d], data_dims[d]) * strides[d];
    for (int64_t c = 0; c < slice; ++c) out.push_back(base + c);
  }
  return out;
}

// The reductions in data's dtype, written here (not ops::scatter_combine);
// integers wrap.
template <typename T>
struct WrapType {
  using type = T;
};
template <>
struct WrapType<int32_t> {
  using type = uint32_t;
};
template <>
struct WrapType<int64_t> {
  using type = uint64_t;
};

template <typename T>
T combine_reference(T old, T value, int64_t reduction) {
  using Wide = typename WrapType<T>::type;
  switch (reduction) {
    case 1:
      return static_cast<T>(static_cast<Wide>(old) + static_cast<Wide>(value));
    case 2:
      return static_cast<T>(static_cast<Wide>(old) * static_cast<Wide>(value));
    case 3:
      return std::isnan(static_cast<double>(value)) || value > old ? value : old;
    case 4:
      return std::isnan(static_cast<double>(value)) || value < old ? value : old;
    default:
      return value;
  }
}

template <typename T>
void combine_at(HostTensor& want, const HostTensor& updates, int64_t i, int64_t dst, int64_t reduction) {
  T old, value;
  std::memcpy(&old, &want.bytes[static_cast<size_t>(dst) * sizeof(T)], sizeof(T));
  std::memcpy(&value, &updates.bytes[static_cast<size_t>(i) * sizeof(T)], sizeof(T));
  const T result = combine_reference(old, value, reduction);
  std::memcpy(&want.bytes[static_cast<size_t>(dst) * sizeof(T)], &result, sizeof(T));
}

struct ScatterCase {
  OpId id;
  DType dtype;
  Dims data_dims;
  DType index_dtype;
  Dims index_dims;
  std::vector<int64_t> indices;
  int64_t axis;       // scatter_elements
  int64_t reduction;  // 0 none .. 4 min
};

// Out of place (data only read) and in place on data (the alias the compiler plans).
void check_scatter(const ScatterCase& c, bool in_place) {
  const bool nd = c.id == OpId::kScatterND;
  INFO((nd ? "scatter_nd " : "scatter_elements ")
       << std::string(dtype_name(c.dtype)) << dims_string(c.data_dims) << " indices "
       << dims_string(c.index_dims) << " " << dims_string(c.indices) << " axis " << c.axis << " reduction "
       << c.reduction << " in place " << in_place);
  Dims update_dims = c.index_dims;
  if (nd) {
    update_dims.pop_back();
    update_dims.insert(update_dims.end(), c.data_dims.begin() + c.index_dims.back(), c.data_dims.end());
  }
  HostTensor data = c.dtype == DType::kF32 ? random_f32(c.data_dims, 4300) : iota_bytes(c.dtype, c.data_dims);
  HostTensor updates(c.dtype, update_dims);
  if (c.dtype == DType::kF32) {
    updates = random_f32(update_dims, 4301);
  } else {
    for (size_t i = 0; i < updates.bytes.size(); ++i) updates.bytes[i] = static_cast<uint8_t>(0xA0 + i * 3);
    if (c.dtype == DType::kBool)
      for (uint8_t& b : updates.bytes) b &= 1;
  }
  HostTensor idx = index_tensor(c.index_dtype, c.index_dims, c.indices);
  const HostTensor original = data;
  HostTensor out(c.dtype, c.data_dims);
  fill_sentinel(out, 0xEE);
  const std::vector<int64_t> params =
      nd ? std::vector<int64_t>{c.reduction} : std::vector<int64_t>{c.axis, c.reduction};
  Status status = run_op(c.id, {&data, &idx, &updates}, {&out}, params, in_place ? 0 : -1);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  const HostTensor& got = in_place ? data : out;
  if (!in_place) CHECK(data.bytes == original.bytes);  // data is only read

  HostTensor want = original;
  const std::vector<int64_t> dst = scatter_destinations(c.id, c.data_dims, c.index_dims, c.indices, c.axis);
  REQUIRE(static_cast<int64_t>(dst.size()) == updates.count());
  const size_t size = dtype_size(c.dtype);
  for (int64_t i = 0; i < updates.count(); ++i) {
    if (c.reduction == 0) {
      std::memcpy(&want.bytes[static_cast<size_t>(dst[static_cast<size_t>(i)]) * size],
                  &updates.bytes[static_cast<size_t>(i) * size], size);
    } else if (c.dtype == DType::kF32) {
      combine_at<float>(want, updates, i, dst[static_cast<size_t>(i)], c.reduction);
    } else if (c.dtype == DType::kI32) {
      combine_at<int32_t>(want, updates, i, dst[static_cast<size_t>(i)], c.reduction);
    } else {
      combine_at<int64_t>(want, updates, i, dst[static_cast<size_t>(i)], c.reduction);
    }
  }
  if (got.count() > 0) CHECK(got.bytes == want.bytes);
}

TEST_CASE("scatter_nd: every dtype (none), the reductions, slices and full tuples, duplicates in order") {
  const OpId nd = OpId::kScatterND;
  for (bool in_place : {false, true}) {
    for (DType dtype : kEveryDType) {
      // Rows of a [4, 3] table (slices of 3), negative and duplicate rows: the last wins.
      check_scatter({nd, dtype, {4, 3}, DType::kI64, {3, 1}, {2, -1, 2}, 0, 0}, in_place);
      // Full tuples: single elements.
      check_scatter(
          {nd, dtype, {2, 3, 4}, DType::kI32, {2, 2, 3}, {1, 2, 3, 0, 0, 0, -1, -3, -4, 1, 1, 1}, 0, 0},
          in_place);
    }
    for (DType dtype : {DType::kF32, DType::kI32, DType::kI64})
      for (int64_t reduction = 1; reduction <= 4; ++reduction) {
        check_scatter({nd, dtype, {4, 3}, DType::kI64, {4, 1}, {2, 0, 2, -2}, 0, reduction}, in_place);
        check_scatter({nd, dtype, {2, 2, 2}, DType::kI32, {3, 2}, {1, 1, 0, 1, 1, 1}, 0, reduction},
                      in_place);
      }
    // A KV-cache write: one position of [B, S, D] for every batch.
    check_scatter({nd, DType::kF32, {2, 8, 4}, DType::kI64, {2, 1, 2}, {0, 5, 1, 5}, 0, 0}, in_place);
    check_scatter({nd, DType::kF32, {3, 2}, DType::kI64, {0, 1}, {}, 0, 1}, in_place);  // no updates
  }
}

TEST_CASE("scatter_elements: every dtype (none), the reductions, every axis, duplicates in order") {
  const OpId el = OpId::kScatterElements;
  for (bool in_place : {false, true}) {
    for (DType dtype : kEveryDType) {
      check_scatter({el, dtype, {3, 3}, DType::kI64, {2, 3}, {1, 0, 2, 0, 2, 1}, 0, 0}, in_place);
      check_scatter({el, dtype, {1, 5}, DType::kI32, {1, 2}, {1, -2}, 1, 0}, in_place);
      // Duplicates along the axis (indices longer than the axis): the last wins.
      check_scatter({el, dtype, {2, 3}, DType::kI64, {2, 4}, {0, 2, 0, -1, 1, 1, 1, 0}, 1, 0}, in_place);
    }
    for (DType dtype : {DType::kF32, DType::kI32, DType::kI64})
      for (int64_t reduction = 1; reduction <= 4; ++reduction)
        check_scatter({el, dtype, {2, 3}, DType::kI64, {2, 4}, {0, 2, 0, -1, 1, 1, 1, 0}, 1, reduction},
                      in_place);
    // index_copy_(2, pos, new) as exported: a cache [B, H, S, D], one position, axis 2.
    check_scatter(
        {el, DType::kF32, {2, 2, 6, 3}, DType::kI64, {2, 2, 1, 3}, std::vector<int64_t>(12, 4), 2, 0},
        in_place);
    // Smaller than data in the other dims; rank 1.
    check_scatter(
        {el, DType::kF16, {4, 5, 3}, DType::kI32, {2, 3, 2}, {0, 1, 2, 3, -1, -4, 3, 3, 0, 1, 2, 2}, 1, 0},
        in_place);
    check_scatter({el, DType::kI64, {5}, DType::kI64, {3}, {4, -5, 2}, 0, 0}, in_place);
    check_scatter({el, DType::kF32, {0, 3}, DType::kI64, {0, 2}, {}, 1, 0}, in_place);  // nothing
  }
}

TEST_CASE("scatter: an out-of-range index is kInvalidArgument naming it; nothing written, even in place") {
  struct Bad {
    OpId id;
    Dims index_dims;
    std::vector<int64_t> indices;
    std::vector<int64_t> params;
    std::string named;
  };
  const Bad cases[] = {
      {OpId::kScatterND, {2, 1}, {0, 4}, {0}, "scatter_nd: index 4 (position 1)"},
      {OpId::kScatterND, {2, 1}, {-5, 0}, {1}, "index -5 (position 0) is out of range for a dim of 4"},
      {OpId::kScatterND, {1, 2}, {3, 3}, {0}, "index 3 (position 1) is out of range for a dim of 3"},
      {OpId::kScatterND, {1, 1}, {kI64Min}, {0}, "index -9223372036854775808"},
      {OpId::kScatterElements, {1, 3}, {0, 1, 3}, {1, 0}, "scatter_elements: index 3 (position 2)"},
      {OpId::kScatterElements, {2, 3}, {0, 0, 0, 0, 0, kI64Max}, {0, 2}, "index 9223372036854775807"},
  };
  for (const Bad& b : cases) {
    INFO(b.named);
    HostTensor data = random_f32({4, 3}, 4400);
    const HostTensor original = data;
    HostTensor idx = index_tensor(DType::kI64, b.index_dims, b.indices);
    Dims update_dims = b.index_dims;
    if (b.id == OpId::kScatterND) {
      update_dims.pop_back();
      update_dims.insert(update_dims.end(), data.dims.begin() + b.index_dims.back(), data.dims.end());
    }
    HostTensor updates = random_f32(update_dims, 4401);
    HostTensor out(DType::kF32, {4, 3});
    const Status status = run_op(b.id, {&data, &idx, &updates}, {&out}, b.params, /*aliased_output=*/0);
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK_MESSAGE(status.message().find(b.named) != std::string::npos, status.message());
    CHECK(data.bytes == original.bytes);  // in place, and the valid indices before the bad one wrote nothing
  }
}

// ---- gather_elements, gather_nd -------------------------------------------------

// numpy.take_along_axis (indices wrapped once from the end): the data element
// each result element reads.
std::vector<int64_t> gather_elements_sources(const Dims& data_dims, const Dims& index_dims,
                                             const std::vector<int64_t>& indices, int64_t axis) {
  const auto strides = row_major_strides(data_dims);
  std::vector<int64_t> src;
  for (size_t i = 0; i < indices.size(); ++i) {
    auto at = unravel(static_cast<int64_t>(i), index_dims);
    int64_t index = indices[i];
    if (index < 0) index += data_dims[static_cast<size_t>(axis)];
    at[static_cast<size_t>(axis)] = index;
    int64_t offset = 0;
    for (size_t d = 0; d < at.size(); ++d) offset += at[d] * strides[d];
    src.push_back(offset);
  }
  return src;
}

// ONNX GatherND's reference loop: per batch element, per tuple, the slice
// the tuple names; the data element of each result element in order.
std::vector<int64_t> gather_nd_sources(const Dims& data_dims, const Dims& index_dims,
                                       const std::vector<int64_t>& indices, int64_t batch_dims) {
  const size_t b = static_cast<size_t>(batch_dims);
  const int64_t depth = index_dims.back();
  int64_t batches = 1, per_batch_data = 1, tuples = 1, slice = 1;
  for (size_t d = 0; d < b; ++d) batches *= data_dims[d];
  for (size_t d = b; d < data_dims.size(); ++d) per_batch_data *= data_dims[d];
  for (size_t d = 0; d + 1 < index_dims.size(); ++d) tuples *= index_dims[d];
  for (size_t d = b + static_cast<size_t>(depth); d < data_dims.size(); ++d) slice *= data_dims[d];
  const int64_t per_batch_tuples = batches == 0 ? 0 : tuples / batches;
  std::vector<int64_t> src;
  for (int64_t t = 0; t < tuples; ++t) {
    const int64_t batch = per_batch_tuples == 0 ? 0 : t / per_batch_tuples;
    int64_t offset = batch * per_batch_data, scale = per_batch_data;
    for (int64_t k = 0; k < depth; ++k) {
      const int64_t dim = data_dims[b + static_cast<size_t>(k)];
      scale /= dim;
      int64_t index = indices[static_cast<size_t>(t * depth + k)];
      if (index < 0) index += dim;
      offset += index * scale;
    }
    for (int64_t c = 0; c < slice; ++c) src.push_back(offset + c);
  }
  return src;
}

struct IndexedGatherCase {
  OpId id;
  DType dtype;
  Dims data_dims;
  DType index_dtype;
  Dims index_dims;
  std::vector<int64_t> indices;
  int64_t param;  // axis or batch_dims
};

void check_indexed_gather(const IndexedGatherCase& c) {
  const bool nd = c.id == OpId::kGatherND;
  INFO(std::string(nd ? "gather_nd " : "gather_elements ")
       << dtype_name(c.dtype) << dims_string(c.data_dims) << " indices " << dims_string(c.index_dims)
       << " param " << c.param);
  HostTensor data = iota_bytes(c.dtype, c.data_dims);
  HostTensor idx = index_tensor(c.index_dtype, c.index_dims, c.indices);
  const std::vector<int64_t> src =
      nd ? gather_nd_sources(c.data_dims, c.index_dims, c.indices, c.param)
         : gather_elements_sources(c.data_dims, c.index_dims, c.indices, c.param);
  Dims out_dims = c.index_dims;
  if (nd) {
    out_dims.pop_back();
    out_dims.insert(out_dims.end(), c.data_dims.begin() + c.param + c.index_dims.back(), c.data_dims.end());
  }
  HostTensor want(c.dtype, out_dims);
  const size_t element = dtype_size(c.dtype);
  REQUIRE(static_cast<int64_t>(src.size()) == want.count());
  for (size_t i = 0; i < src.size(); ++i)
    std::memcpy(&want.bytes[i * element], &data.bytes[static_cast<size_t>(src[i]) * element], element);
  HostTensor out(c.dtype, out_dims);
  REQUIRE(run_op(c.id, {&data, &idx}, {&out}, {c.param}).ok());
  CHECK(out.bytes == want.bytes);
}

TEST_CASE("gather_elements: every element size, every axis, negative and repeated indices") {
  for (DType dtype : {DType::kF32, DType::kU8, DType::kF16, DType::kI64, DType::kBool}) {
    check_indexed_gather({OpId::kGatherElements, dtype, {3, 3}, DType::kI64, {2, 3}, {1, 0, 2, 0, 2, 1}, 0});
    check_indexed_gather({OpId::kGatherElements, dtype, {2, 2}, DType::kI32, {2, 2}, {0, 0, 1, 0}, 1});
    check_indexed_gather(
        {OpId::kGatherElements, dtype, {2, 3}, DType::kI64, {2, 4}, {0, 2, 0, -1, 1, 1, 1, -3}, 1});
  }
  check_indexed_gather({OpId::kGatherElements,
                        DType::kF32,
                        {2, 3, 4},
                        DType::kI64,
                        {2, 2, 3},
                        {0, 3, 2, -1, 1, 1, 0, 0, 2, 3, 3, 3},
                        2});
  check_indexed_gather(
      {OpId::kGatherElements, DType::kF32, {4, 3, 2}, DType::kI32, {2, 2, 1}, {3, -4, 1, 2}, 0});
  check_indexed_gather({OpId::kGatherElements, DType::kF32, {0, 3}, DType::kI64, {0, 2}, {}, 1});  // nothing
}

TEST_CASE("gather_nd: tuples of every depth, batch_dims 0..2, every element size") {
  for (DType dtype : {DType::kF32, DType::kU8, DType::kF16, DType::kI64}) {
    // ONNX's examples: full tuples, rows, and batch_dims 1.
    check_indexed_gather({OpId::kGatherND, dtype, {2, 2}, DType::kI64, {2, 2}, {0, 0, 1, 1}, 0});
    check_indexed_gather({OpId::kGatherND, dtype, {2, 2}, DType::kI64, {2, 1}, {1, 0}, 0});
    check_indexed_gather({OpId::kGatherND, dtype, {2, 2, 2}, DType::kI32, {2, 1, 2}, {0, 1, 1, 0}, 0});
    check_indexed_gather({OpId::kGatherND, dtype, {2, 2, 2}, DType::kI64, {2, 1}, {1, 0}, 1});
  }
  check_indexed_gather(
      {OpId::kGatherND, DType::kF32, {3, 4, 5}, DType::kI64, {3, 2, 1}, {0, -1, 2, 3, 1, 1}, 1});
  check_indexed_gather({OpId::kGatherND,
                        DType::kF32,
                        {2, 3, 4, 5},
                        DType::kI32,
                        {2, 3, 2, 1},
                        {0, 3, 1, 2, 3, -4, 3, 3, 0, 0, 2, 1},
                        2});
  check_indexed_gather({OpId::kGatherND,
                        DType::kF32,
                        {2, 3, 4},
                        DType::kI64,
                        {2, 3, 2},
                        {0, 0, 1, 3, 2, -1, 2, 2, 0, 1, -3, 0},
                        1});
  check_indexed_gather({OpId::kGatherND, DType::kF32, {3, 4}, DType::kI64, {0, 1}, {}, 0});  // no tuples
}

TEST_CASE("gather_elements, gather_nd: an out-of-range index is kInvalidArgument naming it") {
  HostTensor data = random_f32({4, 3}, 4410);
  struct Bad {
    OpId id;
    Dims index_dims;
    std::vector<int64_t> indices;
    int64_t param;
    Dims out_dims;
    std::string named;
  };
  const Bad cases[] = {
      {OpId::kGatherElements, {1, 3}, {0, 1, 3}, 1, {1, 3}, "gather_elements: index 3 (position 2)"},
      {OpId::kGatherElements,
       {2, 1},
       {0, -5},
       0,
       {2, 1},
       "index -5 (position 1) is out of range for a dim of 4"},
      {OpId::kGatherND, {2, 1}, {0, 4}, 0, {2, 3}, "gather_nd: index 4 (position 1)"},
      {OpId::kGatherND, {1, 2}, {kI64Min, 0}, 0, {1}, "index -9223372036854775808"},
  };
  for (const Bad& b : cases) {
    INFO(b.named);
    HostTensor idx = index_tensor(DType::kI64, b.index_dims, b.indices);
    HostTensor out(DType::kF32, b.out_dims);
    const Status status = run_op(b.id, {&data, &idx}, {&out}, {b.param});
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK_MESSAGE(status.message().find(b.named) != std::string::npos, status.message());
  }
}

}  // namespace
}  // namespace hexir::hal::testing
