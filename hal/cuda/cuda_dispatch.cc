#include "cuda_dispatch.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <string>

namespace hexir::hal::cuda {
namespace {

using ops::OpId;

int64_t dims_product(const int64_t* dims, uint32_t begin, uint32_t end) {
  int64_t n = 1;
  for (uint32_t i = begin; i < end; ++i) n *= dims[i];
  return n;
}
int64_t element_count(const TensorArg& t) { return dims_product(t.dims, 0, t.rank); }

// The cpu kernels' structural checks (hal/cpu/kernels.cc), with the same messages.
Status check_operands(const DispatchArgs& args, const char* kernel, uint32_t min_inputs, uint32_t max_inputs,
                      bool f32_only) {
  if (args.operands == nullptr || args.input_count < min_inputs || args.input_count > max_inputs ||
      args.operand_count != args.input_count + 1) {
    return invalid_argument(std::string(kernel) + ": expected " + std::to_string(min_inputs) +
                            (min_inputs == max_inputs ? "" : "+") + " inputs and one output, got " +
                            std::to_string(args.input_count) + " inputs of " +
                            std::to_string(args.operand_count) + " operands");
  }
  for (uint32_t i = 0; i < args.operand_count; ++i) {
    const TensorArg& t = args.operands[i];
    if (t.rank > static_cast<uint32_t>(kMaxRank)) {
      return invalid_argument(std::string(kernel) + ": operand " + std::to_string(i) + " has rank " +
                              std::to_string(t.rank) + "; the cuda kernels support up to " +
                              std::to_string(kMaxRank));
    }
    if (t.rank > 0 && t.dims == nullptr) {
      return invalid_argument(std::string(kernel) + ": operand " + std::to_string(i) + " has no dims");
    }
    if (f32_only && t.dtype != DType::kF32) {
      return invalid_argument(std::string(kernel) + ": operand " + std::to_string(i) + " is " +
                              dtype_name(t.dtype) + ", expected f32");
    }
  }
  return ok_status();
}

const float* f32_in(const TensorArg& t) { return static_cast<const float*>(t.data); }
float* f32_out(const TensorArg& t) { return static_cast<float*>(t.data); }

// Block size of the row kernels: a power of two in [32, kRowBlockMax] covering `length`.
uint32_t row_block(int64_t length) {
  uint32_t block = 32;
  while (block < static_cast<uint32_t>(kRowBlockMax) && block < length) block *= 2;
  return block;
}

LaunchConfig rows_config(int64_t rows, int64_t length) {
  LaunchConfig c;
  c.grid[0] = static_cast<uint32_t>(std::min<int64_t>(rows, int64_t{1} << 20));
  c.block[0] = row_block(length);
  return c;
}

// Element strides of `t` viewed with `out_rank` dims, right-aligned; broadcast dims get 0.
void broadcast_strides(const TensorArg& t, uint32_t out_rank, int64_t* strides) {
  int64_t stride = 1;
  for (uint32_t i = out_rank; i-- > 0;) {
    const int64_t t_axis = static_cast<int64_t>(i) - static_cast<int64_t>(out_rank - t.rank);
    if (t_axis >= 0 && t.dims[t_axis] != 1) {
      strides[i] = stride;
      stride *= t.dims[t_axis];
    } else {
      strides[i] = 0;
    }
  }
}

Status binary(const DispatchArgs& args, Kernel kernel, const char* name, Launcher& launcher) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, name, 2, 2, /*f32_only=*/true));
  const TensorArg& a = args.operands[0];
  const TensorArg& b = args.operands[1];
  const TensorArg& out = args.operands[2];
  if (out.rank < a.rank || out.rank < b.rank)
    return invalid_argument(std::string(name) + ": output rank too small");
  BinaryParams p{};
  p.a = f32_in(a);
  p.b = f32_in(b);
  p.out = f32_out(out);
  p.n = element_count(out);
  if (p.n == 0) return ok_status();
  const int64_t na = element_count(a);
  const int64_t nb = element_count(b);
  if (na == p.n && nb == p.n) {
    p.mode = 0;
  } else if (na == p.n && nb == 1) {
    p.mode = 1;
  } else if (na == 1 && nb == p.n) {
    p.mode = 2;
  } else {
    // General case: merge neighbouring dims whose strides line up (as the cpu kernel does).
    p.mode = 3;
    int64_t sa[kMaxRank], sb[kMaxRank];
    broadcast_strides(a, out.rank, sa);
    broadcast_strides(b, out.rank, sb);
    int32_t merged = 0;
    for (uint32_t i = 0; i < out.rank; ++i) {
      const int64_t d = out.dims[i];
      if (d == 1) continue;
      if (merged > 0 && p.stride_a[merged - 1] == sa[i] * d && p.stride_b[merged - 1] == sb[i] * d) {
        p.dims[merged - 1] *= d;
        p.stride_a[merged - 1] = sa[i];
        p.stride_b[merged - 1] = sb[i];
        continue;
      }
      p.dims[merged] = d;
      p.stride_a[merged] = sa[i];
      p.stride_b[merged] = sb[i];
      ++merged;
    }
    p.rank = merged;
  }
  return launcher.launch(kernel, linear_config(p.n), &p);
}

Status unary(const DispatchArgs& args, Kernel kernel, const char* name, Launcher& launcher) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, name, 1, 1, /*f32_only=*/true));
  UnaryParams p{};
  p.in = f32_in(args.operands[0]);
  p.out = f32_out(args.operands[1]);
  p.n = element_count(args.operands[1]);
  if (p.n == 0) return ok_status();
  return launcher.launch(kernel, linear_config(p.n), &p);
}

Status matmul(const DispatchArgs& args, Launcher& launcher) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, "matmul", 2, 2, /*f32_only=*/true));
  const TensorArg& a = args.operands[0];
  const TensorArg& b = args.operands[1];
  if (a.rank == 0 || b.rank == 0) return invalid_argument("matmul: operands must have rank >= 1");
  int64_t a_dims[kMaxRank], b_dims[kMaxRank];
  uint32_t a_rank = a.rank, b_rank = b.rank;
  if (a_rank == 1) {
    a_dims[0] = 1;
    a_dims[1] = a.dims[0];
    a_rank = 2;
  } else {
    std::copy(a.dims, a.dims + a_rank, a_dims);
  }
  if (b_rank == 1) {
    b_dims[0] = b.dims[0];
    b_dims[1] = 1;
    b_rank = 2;
  } else {
    std::copy(b.dims, b.dims + b_rank, b_dims);
  }
  MatmulParams p{};
  p.m = a_dims[a_rank - 2];
  p.k = a_dims[a_rank - 1];
  p.n = b_dims[b_rank - 1];
  if (b_dims[b_rank - 2] != p.k) return invalid_argument("matmul: inner dimensions differ");

  const uint32_t a_batch_rank = a_rank - 2;
  const uint32_t b_batch_rank = b_rank - 2;
  const uint32_t batch_rank = std::max(a_batch_rank, b_batch_rank);
  int64_t a_step = p.m * p.k, b_step = p.k * p.n;
  bool a_full = true, a_repeated = true, b_full = true, b_repeated = true;
  for (uint32_t i = batch_rank; i-- > 0;) {
    const int64_t ai = static_cast<int64_t>(i) - static_cast<int64_t>(batch_rank - a_batch_rank);
    const int64_t bi = static_cast<int64_t>(i) - static_cast<int64_t>(batch_rank - b_batch_rank);
    const int64_t ad = ai >= 0 ? a_dims[ai] : 1;
    const int64_t bd = bi >= 0 ? b_dims[bi] : 1;
    if (ad != bd && ad != 1 && bd != 1) return invalid_argument("matmul: batch dims do not broadcast");
    p.batch_dims[i] = std::max(ad, bd);
    if (ad == 0 || bd == 0) p.batch_dims[i] = 0;
    p.a_stride[i] = ad == 1 ? 0 : a_step;
    p.b_stride[i] = bd == 1 ? 0 : b_step;
    if (p.batch_dims[i] > 1) {
      (p.a_stride[i] == 0 ? a_full : a_repeated) = false;
      (p.b_stride[i] == 0 ? b_full : b_repeated) = false;
    }
    a_step *= ad;
    b_step *= bd;
  }
  p.batch_rank = static_cast<int32_t>(batch_rank);
  p.batch_count = dims_product(p.batch_dims, 0, batch_rank);
  if (p.batch_count == 0 || p.m == 0 || p.n == 0) return ok_status();
  p.a = f32_in(a);
  p.b = f32_in(b);
  p.c = f32_out(args.operands[2]);

  // The library GEMM takes one stride per operand: every batch dim either
  // walks the operand (contiguously) or repeats it.
  const bool fits_int = p.m <= INT_MAX && p.n <= INT_MAX && p.k <= INT_MAX && p.batch_count <= INT_MAX;
  if (launcher.has_gemm() && p.k > 0 && fits_int && (a_full || a_repeated) && (b_full || b_repeated)) {
    GemmBatch g;
    g.a = p.a;
    g.b = p.b;
    g.c = p.c;
    g.m = static_cast<int32_t>(p.m);
    g.n = static_cast<int32_t>(p.n);
    g.k = static_cast<int32_t>(p.k);
    g.batch = static_cast<int32_t>(p.batch_count);
    g.stride_a = a_full ? p.m * p.k : 0;
    g.stride_b = b_full ? p.k * p.n : 0;
    g.stride_c = p.m * p.n;
    return launcher.gemm(g);
  }
  constexpr int64_t T = kMatmulTile;
  const int64_t grid_x = (p.n + T - 1) / T, grid_y = (p.m + T - 1) / T;
  if (grid_x > INT_MAX || grid_y > 65535)
    return invalid_argument("matmul: result too large for the cuda kernel");
  LaunchConfig c;
  c.grid[0] = static_cast<uint32_t>(grid_x);
  c.grid[1] = static_cast<uint32_t>(grid_y);
  c.grid[2] = static_cast<uint32_t>(std::min<int64_t>(p.batch_count, 65535));
  c.block[0] = T;
  c.block[1] = T;
  return launcher.launch(Kernel::kMatmul, c, &p);
}

Status softmax(const DispatchArgs& args, Launcher& launcher) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, "softmax", 1, 1, /*f32_only=*/true));
  const TensorArg& x = args.operands[0];
  if (args.params == nullptr || args.param_count < 1 || args.params[0] < 0 ||
      args.params[0] >= static_cast<int64_t>(x.rank)) {
    return invalid_argument("softmax: params must be [axis] with axis in 0..rank-1");
  }
  const uint32_t axis = static_cast<uint32_t>(args.params[0]);
  SoftmaxParams p{};
  p.in = f32_in(x);
  p.out = f32_out(args.operands[1]);
  p.outer = dims_product(x.dims, 0, axis);
  p.length = x.dims[axis];
  p.inner = dims_product(x.dims, axis + 1, x.rank);
  if (p.outer == 0 || p.length == 0 || p.inner == 0) return ok_status();
  LaunchConfig c = rows_config(p.outer * p.inner, p.length);
  return launcher.launch(Kernel::kSoftmax, c, &p);
}

Status layernorm(const DispatchArgs& args, Launcher& launcher) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, "layernorm", 3, 3, /*f32_only=*/true));
  const TensorArg& x = args.operands[0];
  if (args.params == nullptr || args.param_count < 2 || args.params[0] < 0 ||
      args.params[0] >= static_cast<int64_t>(x.rank)) {
    return invalid_argument("layernorm: params must be [axis, epsilon bits] with axis in 0..rank-1");
  }
  const uint32_t axis = static_cast<uint32_t>(args.params[0]);
  LayernormParams p{};
  p.epsilon = std::bit_cast<double>(args.params[1]);
  p.rows = dims_product(x.dims, 0, axis);
  p.width = dims_product(x.dims, axis, x.rank);
  if (p.rows == 0 || p.width == 0) return ok_status();
  p.in = f32_in(x);
  p.gamma = f32_in(args.operands[1]);
  p.beta = f32_in(args.operands[2]);
  p.out = f32_out(args.operands[3]);
  return launcher.launch(Kernel::kLayernorm, rows_config(p.rows, p.width), &p);
}

Status reduce(const DispatchArgs& args, const char* name, bool mean, Launcher& launcher) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, name, 1, 1, /*f32_only=*/true));
  const TensorArg& x = args.operands[0];
  if (args.params == nullptr || args.param_count < 1) {
    return invalid_argument(std::string(name) + ": params must be [keepdims, axis...]");
  }
  bool reduced[kMaxRank] = {};
  if (args.param_count == 1) {
    std::fill(reduced, reduced + x.rank, true);
  } else {
    for (uint32_t i = 1; i < args.param_count; ++i) {
      const int64_t axis = args.params[i];
      if (axis < 0 || axis >= static_cast<int64_t>(x.rank)) {
        return invalid_argument(std::string(name) + ": axis out of range");
      }
      reduced[axis] = true;
    }
  }
  ReduceParams p{};
  int64_t strides[kMaxRank];
  int64_t stride = 1;
  for (uint32_t i = x.rank; i-- > 0;) {
    strides[i] = stride;
    stride *= x.dims[i];
  }
  for (uint32_t i = 0; i < x.rank; ++i) {
    if (reduced[i]) {
      p.red_dims[p.red_rank] = x.dims[i];
      p.red_stride[p.red_rank++] = strides[i];
    } else {
      p.kept_dims[p.kept_rank] = x.dims[i];
      p.kept_stride[p.kept_rank++] = strides[i];
    }
  }
  p.out_count = dims_product(p.kept_dims, 0, static_cast<uint32_t>(p.kept_rank));
  p.red_count = dims_product(p.red_dims, 0, static_cast<uint32_t>(p.red_rank));
  if (p.out_count == 0) return ok_status();
  p.in = f32_in(x);
  p.out = f32_out(args.operands[1]);
  p.mean = mean ? 1 : 0;
  return launcher.launch(Kernel::kReduce, rows_config(p.out_count, p.red_count), &p);
}

Status transpose(const DispatchArgs& args, Launcher& launcher) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, "transpose", 1, 1, /*f32_only=*/false));
  const TensorArg& x = args.operands[0];
  const TensorArg& out = args.operands[1];
  const uint32_t rank = x.rank;
  if (args.param_count != rank || (rank > 0 && args.params == nullptr) || out.rank != rank) {
    return invalid_argument("transpose: params must be a permutation of the input's dims");
  }
  TransposeParams p{};
  int64_t in_strides[kMaxRank];
  int64_t stride = 1;
  for (uint32_t i = rank; i-- > 0;) {
    in_strides[i] = stride;
    stride *= x.dims[i];
  }
  for (uint32_t i = 0; i < rank; ++i) {
    const int64_t axis = args.params[i];
    if (axis < 0 || axis >= static_cast<int64_t>(rank))
      return invalid_argument("transpose: perm entry out of range");
    p.out_dims[i] = x.dims[axis];
    p.in_stride[i] = in_strides[axis];
  }
  p.n = dims_product(p.out_dims, 0, rank);
  if (p.n == 0) return ok_status();
  p.in = x.data;
  p.out = out.data;
  p.rank = static_cast<int32_t>(rank);
  p.element_size = static_cast<int32_t>(dtype_size(x.dtype));
  Kernel kernel = Kernel::kTransposeBytes;
  switch (p.element_size) {
    case 1:
      kernel = Kernel::kTranspose1;
      break;
    case 2:
      kernel = Kernel::kTranspose2;
      break;
    case 4:
      kernel = Kernel::kTranspose4;
      break;
    case 8:
      kernel = Kernel::kTranspose8;
      break;
    default:
      break;
  }
  const int64_t threads = kernel == Kernel::kTransposeBytes ? p.n * p.element_size : p.n;
  return launcher.launch(kernel, linear_config(threads), &p);
}

// Widest unit (16, 4 or 1 bytes) dividing every address, length and pitch.
Kernel copy_kernel(const void* src, const void* dst, int64_t row_bytes, int64_t src_pitch,
                   int64_t dst_pitch) {
  const uint64_t bits = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
                        static_cast<uint64_t>(row_bytes) | static_cast<uint64_t>(src_pitch) |
                        static_cast<uint64_t>(dst_pitch);
  if (bits % 16 == 0) return Kernel::kStridedCopy16;
  if (bits % 4 == 0) return Kernel::kStridedCopy4;
  return Kernel::kStridedCopy1;
}

int64_t copy_unit(Kernel kernel) {
  return kernel == Kernel::kStridedCopy16 ? 16 : kernel == Kernel::kStridedCopy4 ? 4 : 1;
}

Status concat(const DispatchArgs& args, Launcher& launcher) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, "concat", 1, 0xFFFFFFFFu, /*f32_only=*/false));
  const TensorArg& out = args.operands[args.input_count];
  if (args.params == nullptr || args.param_count < 1 || args.params[0] < 0 ||
      args.params[0] >= static_cast<int64_t>(out.rank)) {
    return invalid_argument("concat: params must be [axis] with axis in 0..rank-1");
  }
  const uint32_t axis = static_cast<uint32_t>(args.params[0]);
  const int64_t element_size = static_cast<int64_t>(dtype_size(out.dtype));
  const int64_t outer = dims_product(out.dims, 0, axis);
  if (dims_product(out.dims, 0, out.rank) == 0) return ok_status();
  const int64_t total = dims_product(out.dims, axis, out.rank) * element_size;
  int64_t offset = 0;
  for (uint32_t k = 0; k < args.input_count; ++k) {
    const TensorArg& in = args.operands[k];
    if (in.rank != out.rank) return invalid_argument("concat: input rank differs from the output's");
    const int64_t chunk = dims_product(in.dims, axis, in.rank) * element_size;
    if (chunk == 0) continue;
    uint8_t* dst = static_cast<uint8_t*>(out.data) + offset;
    offset += chunk;
    if (outer == 1) {
      HEXIR_RETURN_IF_ERROR(launcher.copy(dst, in.data, static_cast<uint64_t>(chunk)));
      continue;
    }
    StridedCopyParams p{};
    p.src = in.data;
    p.dst = dst;
    p.rows = outer;
    p.row_bytes = chunk;
    p.src_pitch = chunk;
    p.dst_pitch = total;
    const Kernel kernel = copy_kernel(p.src, p.dst, chunk, chunk, total);
    HEXIR_RETURN_IF_ERROR(launcher.launch(kernel, linear_config(outer * (chunk / copy_unit(kernel))), &p));
  }
  return ok_status();
}

Status copy(const DispatchArgs& args, Launcher& launcher) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, "copy", 1, 1, /*f32_only=*/false));
  const TensorArg& in = args.operands[0];
  const TensorArg& out = args.operands[1];
  const uint64_t in_bytes = static_cast<uint64_t>(element_count(in)) * dtype_size(in.dtype);
  const uint64_t out_bytes = static_cast<uint64_t>(element_count(out)) * dtype_size(out.dtype);
  if (out_bytes < in_bytes) return invalid_argument("copy: output is smaller than input");
  if (in_bytes == 0 || in.data == out.data) return ok_status();
  return launcher.copy(out.data, in.data, in_bytes);
}

}  // namespace

LaunchConfig linear_config(int64_t n) {
  LaunchConfig c;
  const int64_t blocks = (n + kElementwiseBlock - 1) / kElementwiseBlock;
  c.grid[0] = static_cast<uint32_t>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 20));
  c.block[0] = kElementwiseBlock;
  return c;
}

Status enqueue_dispatch(const DispatchArgs& args, Launcher& launcher) {
  switch (args.kernel_id) {
    case OpId::kAdd:
      return binary(args, Kernel::kAdd, "add", launcher);
    case OpId::kSub:
      return binary(args, Kernel::kSub, "sub", launcher);
    case OpId::kMul:
      return binary(args, Kernel::kMul, "mul", launcher);
    case OpId::kDiv:
      return binary(args, Kernel::kDiv, "div", launcher);
    case OpId::kMaximum:
      return binary(args, Kernel::kMaximum, "maximum", launcher);
    case OpId::kMinimum:
      return binary(args, Kernel::kMinimum, "minimum", launcher);
    case OpId::kRelu:
      return unary(args, Kernel::kRelu, "relu", launcher);
    case OpId::kGelu: {
      // params: [approximate]; absent or 0 = erf form, 1 = tanh approximation.
      const bool tanh_form = args.params != nullptr && args.param_count >= 1 && args.params[0] == 1;
      return unary(args, tanh_form ? Kernel::kGeluTanh : Kernel::kGeluErf, "gelu", launcher);
    }
    case OpId::kSilu:
      return unary(args, Kernel::kSilu, "silu", launcher);
    case OpId::kSigmoid:
      return unary(args, Kernel::kSigmoid, "sigmoid", launcher);
    case OpId::kTanh:
      return unary(args, Kernel::kTanh, "tanh", launcher);
    case OpId::kExp:
      return unary(args, Kernel::kExp, "exp", launcher);
    case OpId::kSqrt:
      return unary(args, Kernel::kSqrt, "sqrt", launcher);
    case OpId::kRsqrt:
      return unary(args, Kernel::kRsqrt, "rsqrt", launcher);
    case OpId::kNeg:
      return unary(args, Kernel::kNeg, "neg", launcher);
    case OpId::kMatmul:
      return matmul(args, launcher);
    case OpId::kSoftmax:
      return softmax(args, launcher);
    case OpId::kLayernorm:
      return layernorm(args, launcher);
    case OpId::kTranspose:
      return transpose(args, launcher);
    case OpId::kReduceSum:
      return reduce(args, "reduce_sum", /*mean=*/false, launcher);
    case OpId::kReduceMean:
      return reduce(args, "reduce_mean", /*mean=*/true, launcher);
    case OpId::kConcat:
      return concat(args, launcher);
    case OpId::kCopy:
      return copy(args, launcher);
    case OpId::kReshape:
    case OpId::kCount:
      break;
  }
  return invalid_argument("cuda: no kernel for id " + std::to_string(static_cast<int>(args.kernel_id)) +
                          " (views are never dispatched)");
}

Status enqueue_pattern_fill(void* dst, uint64_t bytes, const void* pattern, uint32_t pattern_size,
                            Launcher& launcher) {
  if (bytes == 0) return ok_status();
  FillParams p{};
  p.dst = dst;
  p.bytes = static_cast<int64_t>(bytes);
  p.pattern_size = static_cast<int32_t>(pattern_size);
  std::memcpy(p.pattern, pattern, pattern_size);
  return launcher.launch(Kernel::kFill, linear_config(p.bytes), &p);
}

}  // namespace hexir::hal::cuda
