// Kernel parameter structs, passed by value to the CUDA kernels (one struct
// per launch, well under the 4 KiB parameter limit). Each is the operand
// pointers of one dispatch followed by its operator's plan (ops/plans.h),
// copied as computed at prepare: the kernels read their geometry from there
// and nothing else. Shared by the host dispatcher (C++20) and the kernels
// (nvcc, C++17): plain PODs only.
#pragma once

#include <stdint.h>

#include "hexir/ops/plans.h"

namespace hexir::hal::cuda {

using ops::kMaxRank;
// Threads per block of the 1-D elementwise and copy kernels.
inline constexpr int kElementwiseBlock = 256;
// Upper bound on the block size of the row kernels (softmax, layernorm,
// reduce); they run with a power of two between 32 and this.
inline constexpr int kRowBlockMax = 256;
// Edge of the square tile of the fallback matmul kernel.
inline constexpr int kMatmulTile = 16;

// Binary elementwise (BinaryPlan: modes 0-2 flat, 3 general broadcast, 4 one element).
struct BinaryParams {
  const float* a;
  const float* b;
  float* out;
  ops::BinaryPlan plan;
};

// equal / less / greater: a and b of dtype `dtype` (kCastF32, kCastI32 or
// kCastI64 of CastDType below), bool results; BinaryPlan as for the binary ops.
struct CompareParams {
  const void* a;
  const void* b;
  uint8_t* out;
  int32_t dtype;
  int32_t pad;
  ops::BinaryPlan plan;
};

// Integer arithmetic: a, b and out of dtype int32_t (the _i32 kernel) or
// int64_t (_i64), the operator `op` (IntBinaryOp; mod's fmod from the plan's
// variant). The logical kernel: bool a, b, out, `op` a LogicalOp.
enum IntBinaryOp : int32_t { kIntAdd, kIntSub, kIntMul, kIntDiv, kIntMaximum, kIntMinimum, kIntMod, kIntPow };
enum LogicalOp : int32_t { kLogicalAnd, kLogicalOr, kLogicalXor };
struct IntBinaryParams {
  const void* a;
  const void* b;
  void* out;
  int32_t op;
  int32_t pad;
  ops::BinaryPlan plan;
};

// Integer unary maps (IntUnaryOp) over int32_t (_i32) or int64_t (_i64).
enum IntUnaryOp : int32_t { kIntNeg, kIntAbs, kIntSign };
struct IntUnaryParams {
  const void* in;
  void* out;
  int32_t op;
  int32_t pad;
  ops::UnaryPlan plan;
};

// not: plan.n bytes, any non-zero byte true; results 0 or 1.
struct NotParams {
  const uint8_t* in;
  uint8_t* out;
  ops::UnaryPlan plan;
};

// Unary maps over plan.n elements (gelu's form is the kernel picked from
// plan.variant; leaky_relu, clip and hard_sigmoid read plan.a and plan.b).
struct UnaryParams {
  const float* in;
  float* out;
  ops::UnaryPlan plan;
};

// where(cond, x, y), moving elements of plan.element_size bytes (the kernel's width).
struct WhereParams {
  const uint8_t* cond;
  const void* x;
  const void* y;
  void* out;
  ops::WherePlan plan;
};

// The dtypes cast moves between, as plan.from / plan.to spell them (the
// values of hexir::DType, checked against it by the dispatcher).
enum CastDType : int32_t {
  kCastF32 = 0,
  kCastF16 = 1,
  kCastBF16 = 2,
  kCastI32 = 3,
  kCastI64 = 4,
  kCastU8 = 6,
  kCastBool = 7
};

// quantize_linear (x f32 to out of plan.quantized) and dequantize_linear
// (x of plan.quantized to out f32); zero of plan.quantized.
struct QuantizeParams {
  const void* x;
  const float* scale;
  const void* zero;
  void* out;
  ops::QuantizePlan plan;
};

// cast: plan.n elements of dtype plan.from to plan.to.
struct CastParams {
  const void* in;
  void* out;
  ops::CastPlan plan;
};

// The tiled matmul (cuBLAS is used when present and the batch is uniform).
struct MatmulParams {
  const float* a;
  const float* b;
  float* c;
  const float* bias;  // plan.has_bias: f32[n], added to every row
  ops::MatmulPlan plan;
};

// quantized_matmul: a [m, k] against w [n, k] int8 scaled per row of w.
struct QuantizedMatmulParams {
  const float* a;
  const int8_t* w;
  const float* scale;
  const float* bias;  // plan.has_bias
  float* c;
  ops::QuantizedMatmulPlan plan;
};

// int4_matmul: a [m, k] against packed int4 rows w [n, k / 2], f16 scales per group.
struct Int4MatmulParams {
  const float* a;
  const uint8_t* w;
  const uint16_t* scale;  // f16 bits, [n, k / group]
  const float* bias;      // plan.has_bias
  float* c;
  ops::Int4MatmulPlan plan;
};

// integer_matmul: u8 rows a [m, k] against int8 rows w [n, k], int32 sums.
struct IntegerMatmulParams {
  const uint8_t* a;
  const int8_t* w;
  const uint8_t* zero;  // one element
  int32_t* c;
  ops::IntegerMatmulPlan plan;
};

// quantized_add: two u8 operands of one shape.
struct QuantizedAddParams {
  const uint8_t* a;
  const uint8_t* b;
  uint8_t* out;
  ops::QuantizedAddPlan plan;
};

// lstm_cell: one thread per (row, column).
struct LstmCellParams {
  const float* gates;
  const float* c_prev;
  float* h;
  float* c;
  ops::LstmCellPlan plan;
};

// quantized_conv2d: channels-last u8, one thread per output element.
struct QuantizedConv2dParams {
  const uint8_t* x;
  const int8_t* w;
  const int32_t* bias;
  const float* multiplier;
  uint8_t* out;
  ops::QuantizedConv2dPlan plan;
};

// dequantize_int4: packed int4 rows w [rows, k / 2] to floats.
struct DequantizeInt4Params {
  const uint8_t* w;
  const uint16_t* scale;  // f16 bits, [rows, k / group]
  float* out;
  ops::DequantizeInt4Plan plan;
};

// attention: q, k, v and the result per ops::AttentionPlan; count the
// run-time key count (read on the device); scratch t floats per row.
struct AttentionParams {
  const float* q;
  const float* k;
  const float* v;
  const int64_t* count;
  float* out;
  float* scratch;
  ops::AttentionPlan plan;
};

struct SoftmaxParams {
  const float* in;
  float* out;
  ops::SoftmaxPlan plan;
};

// The unary math and ONNX activation maps: ops::math_of<fn> (fn an
// ops::MathFn), f32 in; f32 out, or bool bytes for is_inf and is_nan.
struct MathParams {
  const float* in;
  void* out;
  int32_t fn;
  int32_t pad;
  ops::UnaryPlan plan;
};

struct GroupNormParams {
  const float* in;
  const float* scale;
  const float* bias;
  float* out;
  ops::GroupNormPlan plan;
};

struct LayernormParams {
  const float* in;
  const float* gamma;
  const float* beta;
  float* out;
  ops::LayernormPlan plan;
};

// The reductions: elements of the kernel's dtype (hexir_reduce f32, _i32, _i64).
struct ReduceParams {
  const void* in;
  void* out;
  ops::ReducePlan plan;
};

// transpose, slice and expand: output element i (row-major) is input element
// plan.offset + sum(index[d] * plan.in_stride[d]); strides may be negative.
// The kernel variant is the element width (1, 2, 4, 8, or bytewise).
struct StridedParams {
  const void* in;
  void* out;
  ops::StridedPlan plan;
};

// rows x row_bytes copied from src (rows src_pitch apart) to dst (dst_pitch
// apart), in units of the kernel variant's width (1, 4 or 16 bytes), which
// divides every pointer, length and pitch. concat and split are made of these.
struct StridedCopyParams {
  const void* src;
  void* dst;
  int64_t rows;
  int64_t row_bytes;
  int64_t src_pitch;
  int64_t dst_pitch;
};

// gather: rows of plan.inner_bytes picked by index, moved in units of the
// kernel variant's width (1, 4 or 16 bytes), which divides inner_bytes and
// both data pointers. Out-of-range indices write zeros.
struct GatherParams {
  const void* data;
  const void* indices;  // int32 or int64 (plan.index_i64)
  void* out;
  ops::GatherPlan plan;
};

// conv2d, NCHW, one thread per output element (bias null when plan.has_bias is 0).
struct Conv2dParams {
  const float* x;
  const float* w;
  const float* bias;
  const float* residual;  // plan.has_residual
  float* out;
  ops::Conv2dPlan plan;
};

// separable_conv2d, NCHW, one thread per output element (a bias null when
// its stage has none, the residual when plan.pointwise.has_residual is 0).
struct SeparableConv2dParams {
  const float* x;
  const float* dw_w;
  const float* dw_bias;
  const float* pw_w;
  const float* pw_bias;
  const float* residual;
  float* out;
  ops::SeparableConv2dPlan plan;
};

// pad, moving elements of plan.element_size bytes (the kernel's width: 1, 2, 4 or 8).
struct PadParams {
  const void* in;
  void* out;
  ops::PadPlan plan;
};

// max_pool / average_pool, NCHW, one thread per output element.
struct Pool2dParams {
  const float* x;
  float* out;
  ops::Pool2dPlan plan;
};

// max_pool of u8 (a QDQ model's), one thread per output element.
struct MaxPoolU8Params {
  const uint8_t* x;
  uint8_t* out;
  ops::Pool2dPlan plan;
};

// resize, NCHW, one thread per output element.
struct ResizeParams {
  const float* x;
  float* out;
  ops::ResizePlan plan;
};

// conv_transpose, NCHW, one thread per output element (bias null when plan.has_bias is 0).
struct ConvTransposeParams {
  const float* x;
  const float* w;
  const float* bias;
  float* out;
  ops::ConvTransposePlan plan;
};

// argmax and argmin: one thread per output element (ops::argmax_of along the
// axis), x of the kernel's dtype (hexir_argmax f32, _i32, _i64).
struct ArgmaxParams {
  const void* x;
  int64_t* out;
  ops::ArgmaxPlan plan;
};

// hardmax: one thread per (outer, inner) row, a 1 at its argmax, 0 elsewhere.
struct HardmaxParams {
  const float* x;
  float* out;
  ops::ArgmaxPlan plan;
};

// top_k: one thread per (outer, inner) row, x and values of the kernel's
// dtype (hexir_top_k f32, _i32, _i64).
struct TopKParams {
  const void* x;
  void* values;
  int64_t* indices;
  ops::TopKPlan plan;
};

// dynamic_slice (x to out) and update_slice (update into out, which already
// holds x), moving elements of plan.element_size bytes (the kernel's width:
// 1, 2, 4 or 8). starts: the i64 start index of each dim, in device memory
// (written by earlier kernels): read by the kernel, clamped with ops::window_start.
struct WindowParams {
  const void* x;       // dynamic_slice
  const void* update;  // update_slice
  void* out;
  const int64_t* starts[kMaxRank];
  ops::WindowPlan plan;
};

// scatter_nd and scatter_elements: updates into out, which already holds
// data; indices i32 or i64 (plan.index_i64). Kernels of one element width
// (none) or of one dtype (the reductions: f32, i32, i64).
struct ScatterParams {
  const void* indices;
  const void* updates;
  void* out;
  ops::ScatterPlan plan;
};

// gather_elements and gather_nd: the scatters' plan read the other way, one
// thread per result element, elements of plan.element_size bytes (1, 2, 4
// or 8); indices i32 or i64 (plan.index_i64).
struct GatherIndexedParams {
  const void* data;
  const void* indices;
  void* out;
  ops::ScatterPlan plan;
};

// cumsum: one thread per line along the axis (plan.outer * plan.inner), in order.
struct CumSumParams {
  const void* x;
  void* out;
  ops::CumSumPlan plan;
};

// bytes written from dst on: byte i is pattern[i % pattern_size].
struct FillParams {
  void* dst;
  int64_t bytes;
  int32_t pattern_size;
  uint8_t pattern[16];
};

// X(enum name, kernel symbol, params type): every kernel in the fatbins.
// Bounded dynamic shapes (ops/plans.h): nonzero, non_max_suppression and
// compress run in one thread (serial: their output order is a scan; a block
// scan is the next step), writing the extent to `count`; compact reads its
// extent from `count` and moves rows in parallel.
struct NonZeroParams {
  const void* x;
  int64_t* out;
  int64_t* count;
  ops::NonZeroPlan plan;
};
struct NmsParams {
  const float* boxes;
  const float* scores;
  const int64_t* max_output;
  const float* iou_threshold;
  const float* score_threshold;
  int64_t* out;
  int64_t* count;
  int64_t* scratch;  // plan.boxes words: the kept boxes of one batch and class
  ops::NmsPlan plan;
};
struct CompressParams {
  const void* x;
  const uint8_t* cond;
  void* out;
  int64_t* count;
  ops::CompressPlan plan;
};
struct CompactParams {
  const void* x;
  const int64_t* count;
  void* out;
  ops::CompactPlan plan;
};
// bound: x's rows below the extent `n` (clamped to [0, bound]) into out,
// zeros after them.
struct BoundParams {
  const void* x;
  const int64_t* n;
  void* out;
  ops::CompactPlan plan;
};

#define HEXIR_CUDA_KERNELS(X)                                  \
  X(kAdd, hexir_add, BinaryParams)                             \
  X(kSub, hexir_sub, BinaryParams)                             \
  X(kMul, hexir_mul, BinaryParams)                             \
  X(kDiv, hexir_div, BinaryParams)                             \
  X(kMaximum, hexir_maximum, BinaryParams)                     \
  X(kMinimum, hexir_minimum, BinaryParams)                     \
  X(kRelu, hexir_relu, UnaryParams)                            \
  X(kGeluErf, hexir_gelu_erf, UnaryParams)                     \
  X(kGeluTanh, hexir_gelu_tanh, UnaryParams)                   \
  X(kSilu, hexir_silu, UnaryParams)                            \
  X(kSigmoid, hexir_sigmoid, UnaryParams)                      \
  X(kTanh, hexir_tanh, UnaryParams)                            \
  X(kExp, hexir_exp, UnaryParams)                              \
  X(kSqrt, hexir_sqrt, UnaryParams)                            \
  X(kRsqrt, hexir_rsqrt, UnaryParams)                          \
  X(kNeg, hexir_neg, UnaryParams)                              \
  X(kLeakyRelu, hexir_leaky_relu, UnaryParams)                 \
  X(kClip, hexir_clip, UnaryParams)                            \
  X(kHardSigmoid, hexir_hard_sigmoid, UnaryParams)             \
  X(kHardSwish, hexir_hard_swish, UnaryParams)                 \
  X(kErf, hexir_erf, UnaryParams)                              \
  X(kLog, hexir_log, UnaryParams)                              \
  X(kAbs, hexir_abs, UnaryParams)                              \
  X(kReciprocal, hexir_reciprocal, UnaryParams)                \
  X(kSoftplus, hexir_softplus, UnaryParams)                    \
  X(kPow, hexir_pow, BinaryParams)                             \
  X(kEqual, hexir_equal, CompareParams)                        \
  X(kLess, hexir_less, CompareParams)                          \
  X(kGreater, hexir_greater, CompareParams)                    \
  X(kNot, hexir_not, NotParams)                                \
  X(kPool2d, hexir_pool2d, Pool2dParams)                       \
  X(kMaxPoolU8, hexir_max_pool_u8, MaxPoolU8Params)            \
  X(kPad1, hexir_pad_1, PadParams)                             \
  X(kPad2, hexir_pad_2, PadParams)                             \
  X(kPad4, hexir_pad_4, PadParams)                             \
  X(kPad8, hexir_pad_8, PadParams)                             \
  X(kResize, hexir_resize, ResizeParams)                       \
  X(kConvTranspose, hexir_conv_transpose, ConvTransposeParams) \
  X(kWhere1, hexir_where_1, WhereParams)                       \
  X(kWhere2, hexir_where_2, WhereParams)                       \
  X(kWhere4, hexir_where_4, WhereParams)                       \
  X(kWhere8, hexir_where_8, WhereParams)                       \
  X(kCast, hexir_cast, CastParams)                             \
  X(kQuantizeLinear, hexir_quantize_linear, QuantizeParams)    \
  X(kDequantizeLinear, hexir_dequantize_linear, QuantizeParams) \
  X(kMatmul, hexir_matmul_tiled, MatmulParams)                 \
  X(kQuantizedMatmul, hexir_quantized_matmul, QuantizedMatmulParams) \
  X(kInt4Matmul, hexir_int4_matmul, Int4MatmulParams) \
  X(kDequantizeInt4, hexir_dequantize_int4, DequantizeInt4Params) \
  X(kIntegerMatmul, hexir_integer_matmul, IntegerMatmulParams) \
  X(kQuantizedConv2d, hexir_quantized_conv2d, QuantizedConv2dParams) \
  X(kQuantizedAdd, hexir_quantized_add, QuantizedAddParams) \
  X(kLstmCell, hexir_lstm_cell, LstmCellParams) \
  X(kMatmulEpilogue, hexir_matmul_epilogue, MatmulParams)      \
  X(kConv2d, hexir_conv2d, Conv2dParams)                       \
  X(kSeparableConv2d, hexir_separable_conv2d, SeparableConv2dParams) \
  X(kSoftmax, hexir_softmax, SoftmaxParams)                    \
  X(kAttention, hexir_attention, AttentionParams)              \
  X(kLayernorm, hexir_layernorm, LayernormParams)              \
  X(kReduce, hexir_reduce, ReduceParams)                       \
  X(kStrided1, hexir_strided_1, StridedParams)                 \
  X(kStrided2, hexir_strided_2, StridedParams)                 \
  X(kStrided4, hexir_strided_4, StridedParams)                 \
  X(kStrided8, hexir_strided_8, StridedParams)                 \
  X(kStridedBytes, hexir_strided_bytes, StridedParams)         \
  X(kStridedCopy1, hexir_strided_copy_1, StridedCopyParams)    \
  X(kStridedCopy4, hexir_strided_copy_4, StridedCopyParams)    \
  X(kStridedCopy16, hexir_strided_copy_16, StridedCopyParams)  \
  X(kGather1, hexir_gather_1, GatherParams)                    \
  X(kGather4, hexir_gather_4, GatherParams)                    \
  X(kGather16, hexir_gather_16, GatherParams)                  \
  X(kFill, hexir_fill, FillParams)                             \
  X(kArgmax, hexir_argmax, ArgmaxParams)                       \
  X(kDynamicSlice1, hexir_dynamic_slice_1, WindowParams)       \
  X(kDynamicSlice2, hexir_dynamic_slice_2, WindowParams)       \
  X(kDynamicSlice4, hexir_dynamic_slice_4, WindowParams)       \
  X(kDynamicSlice8, hexir_dynamic_slice_8, WindowParams)       \
  X(kUpdateSlice1, hexir_update_slice_1, WindowParams)         \
  X(kUpdateSlice2, hexir_update_slice_2, WindowParams)         \
  X(kUpdateSlice4, hexir_update_slice_4, WindowParams)         \
  X(kUpdateSlice8, hexir_update_slice_8, WindowParams)         \
  X(kIntBinaryI32, hexir_int_binary_i32, IntBinaryParams)      \
  X(kIntBinaryI64, hexir_int_binary_i64, IntBinaryParams)      \
  X(kIntUnaryI32, hexir_int_unary_i32, IntUnaryParams)         \
  X(kIntUnaryI64, hexir_int_unary_i64, IntUnaryParams)         \
  X(kLogical, hexir_logical, IntBinaryParams)                  \
  X(kFmod, hexir_fmod, BinaryParams)                           \
  X(kLessOrEqual, hexir_less_or_equal, CompareParams)          \
  X(kGreaterOrEqual, hexir_greater_or_equal, CompareParams)    \
  X(kSign, hexir_sign, UnaryParams)                            \
  X(kCeil, hexir_ceil, UnaryParams)                            \
  X(kFloor, hexir_floor, UnaryParams)                          \
  X(kRound, hexir_round, UnaryParams)  \
  X(kScatter1, hexir_scatter_1, ScatterParams)                 \
  X(kScatter2, hexir_scatter_2, ScatterParams)                 \
  X(kScatter4, hexir_scatter_4, ScatterParams)                 \
  X(kScatter8, hexir_scatter_8, ScatterParams)                 \
  X(kScatterF32, hexir_scatter_f32, ScatterParams)             \
  X(kScatterI32, hexir_scatter_i32, ScatterParams)             \
  X(kScatterI64, hexir_scatter_i64, ScatterParams)             \
  X(kMath, hexir_math, MathParams)                             \
  X(kPRelu, hexir_prelu, BinaryParams)                         \
  X(kGroupNorm, hexir_group_norm, GroupNormParams)              \
  X(kReduceI32, hexir_reduce_i32, ReduceParams)                \
  X(kReduceI64, hexir_reduce_i64, ReduceParams)                \
  X(kArgmaxI32, hexir_argmax_i32, ArgmaxParams)                \
  X(kArgmaxI64, hexir_argmax_i64, ArgmaxParams)                \
  X(kLogSoftmax, hexir_log_softmax, SoftmaxParams)             \
  X(kHardmax, hexir_hardmax, HardmaxParams)                    \
  X(kTopK, hexir_top_k, TopKParams)                            \
  X(kTopKI32, hexir_top_k_i32, TopKParams)                     \
  X(kTopKI64, hexir_top_k_i64, TopKParams)                     \
  X(kGatherIndexed1, hexir_gather_indexed_1, GatherIndexedParams) \
  X(kGatherIndexed2, hexir_gather_indexed_2, GatherIndexedParams) \
  X(kGatherIndexed4, hexir_gather_indexed_4, GatherIndexedParams) \
  X(kGatherIndexed8, hexir_gather_indexed_8, GatherIndexedParams) \
  X(kCumSumF32, hexir_cumsum_f32, CumSumParams)                \
  X(kCumSumI32, hexir_cumsum_i32, CumSumParams)                \
  X(kCumSumI64, hexir_cumsum_i64, CumSumParams)                \
  X(kNonZero, hexir_nonzero, NonZeroParams)                    \
  X(kNms, hexir_nms, NmsParams)                                \
  X(kCompress, hexir_compress, CompressParams)                 \
  X(kCompact, hexir_compact, CompactParams)                    \
  X(kBound, hexir_bound, BoundParams)

enum class Kernel : uint16_t {
#define HEXIR_CUDA_KERNEL_ENUM(name, symbol, params) name,
  HEXIR_CUDA_KERNELS(HEXIR_CUDA_KERNEL_ENUM)
#undef HEXIR_CUDA_KERNEL_ENUM
      kCount
};

}  // namespace hexir::hal::cuda
