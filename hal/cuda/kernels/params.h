// Kernel parameter structs, passed by value to the CUDA kernels (one struct
// per launch, well under the 4 KiB parameter limit). Shared by the host
// dispatcher (C++20) and the kernels (nvcc, C++17): plain PODs only.
#pragma once

#include <stdint.h>

namespace hexir::hal::cuda {

inline constexpr int kMaxRank = 8;
// Threads per block of the 1-D elementwise and copy kernels.
inline constexpr int kElementwiseBlock = 256;
// Upper bound on the block size of the row kernels (softmax, layernorm,
// reduce); they run with a power of two between 32 and this.
inline constexpr int kRowBlockMax = 256;
// Edge of the square tile of the fallback matmul kernel.
inline constexpr int kMatmulTile = 16;

// Binary elementwise with numpy broadcasting. mode 0: a and b have out's
// element count; 1: b is one element; 2: a is one element; 3: general, with
// `rank` merged output dims and per-dim element strides (0 = broadcast).
struct BinaryParams {
  const float* a;
  const float* b;
  float* out;
  int64_t n;
  int32_t mode;
  int32_t rank;
  int64_t dims[kMaxRank];
  int64_t stride_a[kMaxRank];
  int64_t stride_b[kMaxRank];
};

struct UnaryParams {
  const float* in;
  float* out;
  int64_t n;
};

// One [M,K]x[K,N] product per batch element; batch dims broadcast through
// strides (0 for a size-1 dim). C is contiguous, batch after batch.
struct MatmulParams {
  const float* a;
  const float* b;
  float* c;
  int64_t m, n, k;
  int64_t batch_count;
  int32_t batch_rank;
  int32_t pad;
  int64_t batch_dims[kMaxRank];
  int64_t a_stride[kMaxRank];
  int64_t b_stride[kMaxRank];
};

// Rows of `length` elements `inner` apart: row r starts at
// (r / inner) * length * inner + r % inner.
struct SoftmaxParams {
  const float* in;
  float* out;
  int64_t outer, length, inner;
};

struct LayernormParams {
  const float* in;
  const float* gamma;
  const float* beta;
  float* out;
  int64_t rows, width;
  double epsilon;
};

// One output element per block: the kept dims pick the base offset, the
// reduced dims (input order) are summed in double.
struct ReduceParams {
  const float* in;
  float* out;
  int64_t out_count;
  int64_t red_count;
  int32_t kept_rank, red_rank;
  int32_t mean;
  int32_t pad;
  int64_t kept_dims[kMaxRank], kept_stride[kMaxRank];
  int64_t red_dims[kMaxRank], red_stride[kMaxRank];
};

// Output in row-major order; in_stride[i] is the input element stride of
// output dim i. element_size picks the kernel variant (1, 2, 4, 8, or bytes).
struct TransposeParams {
  const void* in;
  void* out;
  int64_t n;
  int32_t rank;
  int32_t element_size;
  int64_t out_dims[kMaxRank];
  int64_t in_stride[kMaxRank];
};

// rows x row_bytes copied from src (rows src_pitch apart) to dst (dst_pitch
// apart), in units of the kernel variant's width (1, 4 or 16 bytes), which
// divides every pointer, length and pitch.
struct StridedCopyParams {
  const void* src;
  void* dst;
  int64_t rows;
  int64_t row_bytes;
  int64_t src_pitch;
  int64_t dst_pitch;
};

// bytes written from dst on: byte i is pattern[i % pattern_size].
struct FillParams {
  void* dst;
  int64_t bytes;
  int32_t pattern_size;
  uint8_t pattern[16];
};

// X(enum name, kernel symbol, params type): every kernel in the fatbins.
#define HEXIR_CUDA_KERNELS(X)                                 \
  X(kAdd, hexir_add, BinaryParams)                            \
  X(kSub, hexir_sub, BinaryParams)                            \
  X(kMul, hexir_mul, BinaryParams)                            \
  X(kDiv, hexir_div, BinaryParams)                            \
  X(kMaximum, hexir_maximum, BinaryParams)                    \
  X(kMinimum, hexir_minimum, BinaryParams)                    \
  X(kRelu, hexir_relu, UnaryParams)                           \
  X(kGeluErf, hexir_gelu_erf, UnaryParams)                    \
  X(kGeluTanh, hexir_gelu_tanh, UnaryParams)                  \
  X(kSilu, hexir_silu, UnaryParams)                           \
  X(kSigmoid, hexir_sigmoid, UnaryParams)                     \
  X(kTanh, hexir_tanh, UnaryParams)                           \
  X(kExp, hexir_exp, UnaryParams)                             \
  X(kSqrt, hexir_sqrt, UnaryParams)                           \
  X(kRsqrt, hexir_rsqrt, UnaryParams)                         \
  X(kNeg, hexir_neg, UnaryParams)                             \
  X(kMatmul, hexir_matmul_tiled, MatmulParams)                \
  X(kSoftmax, hexir_softmax, SoftmaxParams)                   \
  X(kLayernorm, hexir_layernorm, LayernormParams)             \
  X(kReduce, hexir_reduce, ReduceParams)                      \
  X(kTranspose1, hexir_transpose_1, TransposeParams)          \
  X(kTranspose2, hexir_transpose_2, TransposeParams)          \
  X(kTranspose4, hexir_transpose_4, TransposeParams)          \
  X(kTranspose8, hexir_transpose_8, TransposeParams)          \
  X(kTransposeBytes, hexir_transpose_bytes, TransposeParams)  \
  X(kStridedCopy1, hexir_strided_copy_1, StridedCopyParams)   \
  X(kStridedCopy4, hexir_strided_copy_4, StridedCopyParams)   \
  X(kStridedCopy16, hexir_strided_copy_16, StridedCopyParams) \
  X(kFill, hexir_fill, FillParams)

enum class Kernel : uint16_t {
#define HEXIR_CUDA_KERNEL_ENUM(name, symbol, params) name,
  HEXIR_CUDA_KERNELS(HEXIR_CUDA_KERNEL_ENUM)
#undef HEXIR_CUDA_KERNEL_ENUM
      kCount
};

}  // namespace hexir::hal::cuda
