// Byte-moving kernels (any dtype): transpose, concat, copy; and the reductions.
#include <algorithm>
#include <cstring>

#include "kernel_util.h"

namespace hexir::hal::cpu::internal {
namespace {

// Copies the output in row-major order; `in_stride[i]` is the input element
// stride of output dim i. The inner run is typed so it compiles to moves.
template <typename Element>
void transpose_typed(const uint8_t* in, uint8_t* out, const int64_t* out_dims, const int64_t* in_stride,
                     uint32_t rank) {
  const Element* src = reinterpret_cast<const Element*>(in);
  Element* dst = reinterpret_cast<Element*>(out);
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  const uint32_t outer_rank = rank - 1;
  const int64_t inner = out_dims[outer_rank];
  const int64_t inner_stride = in_stride[outer_rank];
  int64_t index[kMaxRank] = {};
  do {
    int64_t offset = 0;
    for (uint32_t i = 0; i < outer_rank; ++i) offset += index[i] * in_stride[i];
    const Element* s = src + offset;
    for (int64_t j = 0; j < inner; ++j) dst[j] = s[j * inner_stride];
    dst += inner;
  } while (next_index(index, out_dims, outer_rank));
}

// Same walk for element sizes without a native type: memcpy per element.
void transpose_bytes(const uint8_t* in, uint8_t* out, const int64_t* out_dims, const int64_t* in_stride,
                     uint32_t rank, size_t element_size) {
  if (rank == 0) {
    std::memcpy(out, in, element_size);
    return;
  }
  const uint32_t outer_rank = rank - 1;
  const int64_t inner = out_dims[outer_rank];
  int64_t index[kMaxRank] = {};
  do {
    int64_t offset = 0;
    for (uint32_t i = 0; i < outer_rank; ++i) offset += index[i] * in_stride[i];
    for (int64_t j = 0; j < inner; ++j) {
      std::memcpy(out, in + (offset + j * in_stride[outer_rank]) * element_size, element_size);
      out += element_size;
    }
  } while (next_index(index, out_dims, outer_rank));
}

struct Bytes16 {
  uint8_t bytes[16];
};

// Sums (in double) over the axes marked in `reduced`, one output element at a time.
Status reduce(const DispatchArgs& args, const char* name, bool mean) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, name, 1, 1, /*f32_only=*/true));
  const TensorArg& x = args.operands[0];
  if (args.params == nullptr || args.param_count < 1) {
    return invalid_argument(std::string(name) + ": params must be [keepdims, axis...]");
  }
  bool reduced[kMaxRank] = {};
  if (args.param_count == 1) {
    std::fill(reduced, reduced + x.rank, true);
  } else {
    for (uint32_t p = 1; p < args.param_count; ++p) {
      const int64_t axis = args.params[p];
      if (axis < 0 || axis >= static_cast<int64_t>(x.rank)) {
        return invalid_argument(std::string(name) + ": axis out of range");
      }
      reduced[axis] = true;
    }
  }
  // Input element strides split into kept and reduced dims (in input order, so
  // the innermost reduced dim is the most contiguous).
  int64_t kept_dims[kMaxRank], kept_stride[kMaxRank], red_dims[kMaxRank], red_stride[kMaxRank];
  uint32_t kept_rank = 0, red_rank = 0;
  int64_t stride = 1;
  int64_t strides[kMaxRank];
  for (uint32_t i = x.rank; i-- > 0;) {
    strides[i] = stride;
    stride *= x.dims[i];
  }
  for (uint32_t i = 0; i < x.rank; ++i) {
    if (reduced[i]) {
      red_dims[red_rank] = x.dims[i];
      red_stride[red_rank++] = strides[i];
    } else {
      kept_dims[kept_rank] = x.dims[i];
      kept_stride[kept_rank++] = strides[i];
    }
  }
  const int64_t out_count = dims_product(kept_dims, 0, kept_rank);
  const int64_t red_count = dims_product(red_dims, 0, red_rank);
  if (out_count == 0) return ok_status();
  const float* in = f32_in(x);
  float* out = f32_out(args.operands[1]);
  int64_t kept_index[kMaxRank] = {};
  for (int64_t o = 0; o < out_count; ++o) {
    int64_t base = 0;
    for (uint32_t i = 0; i < kept_rank; ++i) base += kept_index[i] * kept_stride[i];
    double sum = 0.0;
    if (red_count > 0) {
      if (red_rank == 0) {
        sum = in[base];
      } else {
        const uint32_t outer = red_rank - 1;
        const int64_t inner = red_dims[outer];
        const int64_t inner_stride = red_stride[outer];
        int64_t red_index[kMaxRank] = {};
        do {
          int64_t offset = base;
          for (uint32_t i = 0; i < outer; ++i) offset += red_index[i] * red_stride[i];
          for (int64_t j = 0; j < inner; ++j) sum += in[offset + j * inner_stride];
        } while (next_index(red_index, red_dims, outer));
      }
    }
    // numpy: the mean over zero elements is NaN (0/0).
    out[o] = static_cast<float>(mean ? sum / static_cast<double>(red_count) : sum);
    next_index(kept_index, kept_dims, kept_rank);
  }
  return ok_status();
}

}  // namespace

Status transpose(const DispatchArgs& args) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, "transpose", 1, 1, /*f32_only=*/false));
  const TensorArg& x = args.operands[0];
  const TensorArg& out = args.operands[1];
  const uint32_t rank = x.rank;
  if (args.param_count != rank || (rank > 0 && args.params == nullptr) || out.rank != rank) {
    return invalid_argument("transpose: params must be a permutation of the input's dims");
  }
  int64_t in_strides[kMaxRank];
  int64_t stride = 1;
  for (uint32_t i = rank; i-- > 0;) {
    in_strides[i] = stride;
    stride *= x.dims[i];
  }
  int64_t out_dims[kMaxRank], perm_strides[kMaxRank];
  for (uint32_t i = 0; i < rank; ++i) {
    const int64_t p = args.params[i];
    if (p < 0 || p >= static_cast<int64_t>(rank)) return invalid_argument("transpose: perm entry out of range");
    out_dims[i] = x.dims[p];
    perm_strides[i] = in_strides[p];
  }
  if (dims_product(out_dims, 0, rank) == 0) return ok_status();
  const auto* in = static_cast<const uint8_t*>(x.data);
  auto* dst = static_cast<uint8_t*>(out.data);
  switch (dtype_size(x.dtype)) {
    case 1: transpose_typed<uint8_t>(in, dst, out_dims, perm_strides, rank); break;
    case 2: transpose_typed<uint16_t>(in, dst, out_dims, perm_strides, rank); break;
    case 4: transpose_typed<uint32_t>(in, dst, out_dims, perm_strides, rank); break;
    case 8: transpose_typed<uint64_t>(in, dst, out_dims, perm_strides, rank); break;
    case 16: transpose_typed<Bytes16>(in, dst, out_dims, perm_strides, rank); break;
    default: transpose_bytes(in, dst, out_dims, perm_strides, rank, dtype_size(x.dtype)); break;
  }
  return ok_status();
}

Status reduce_sum(const DispatchArgs& args) { return reduce(args, "reduce_sum", /*mean=*/false); }
Status reduce_mean(const DispatchArgs& args) { return reduce(args, "reduce_mean", /*mean=*/true); }

Status concat(const DispatchArgs& args) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, "concat", 1, 0xFFFFFFFFu, /*f32_only=*/false));
  const TensorArg& out = args.operands[args.input_count];
  if (args.params == nullptr || args.param_count < 1 || args.params[0] < 0 ||
      args.params[0] >= static_cast<int64_t>(out.rank)) {
    return invalid_argument("concat: params must be [axis] with axis in 0..rank-1");
  }
  const uint32_t axis = static_cast<uint32_t>(args.params[0]);
  const uint64_t element_size = dtype_size(out.dtype);
  const int64_t outer = dims_product(out.dims, 0, axis);
  if (dims_product(out.dims, 0, out.rank) == 0) return ok_status();
  // Each outer step appends one contiguous chunk (dims[axis:]) of every input.
  auto* dst = static_cast<uint8_t*>(out.data);
  for (int64_t o = 0; o < outer; ++o) {
    for (uint32_t k = 0; k < args.input_count; ++k) {
      const TensorArg& in = args.operands[k];
      const uint64_t chunk = static_cast<uint64_t>(dims_product(in.dims, axis, in.rank)) * element_size;
      if (chunk == 0) continue;
      std::memcpy(dst, static_cast<const uint8_t*>(in.data) + o * chunk, chunk);
      dst += chunk;
    }
  }
  return ok_status();
}

Status copy(const DispatchArgs& args) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, "copy", 1, 1, /*f32_only=*/false));
  const TensorArg& in = args.operands[0];
  const TensorArg& out = args.operands[1];
  const uint64_t in_bytes = static_cast<uint64_t>(element_count(in)) * dtype_size(in.dtype);
  const uint64_t out_bytes = static_cast<uint64_t>(element_count(out)) * dtype_size(out.dtype);
  if (out_bytes < in_bytes) return invalid_argument("copy: output is smaller than input");
  // memmove: a copy onto itself (or an overlapping alias) stays well defined.
  if (in_bytes > 0 && in.data != out.data) std::memmove(out.data, in.data, in_bytes);
  return ok_status();
}

}  // namespace hexir::hal::cpu::internal
