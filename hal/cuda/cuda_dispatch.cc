#include "cuda_dispatch.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <span>

#include "hexir/ops/widen.h"

namespace hexir::hal::cuda {
namespace {

using ops::OpId;

static_assert(kCastF32 == static_cast<int>(DType::kF32) && kCastF16 == static_cast<int>(DType::kF16) &&
                  kCastBF16 == static_cast<int>(DType::kBF16) &&
                  kCastI32 == static_cast<int>(DType::kI32) && kCastI64 == static_cast<int>(DType::kI64) &&
                  kCastU8 == static_cast<int>(DType::kU8) && kCastBool == static_cast<int>(DType::kBool),
              "kernels/params.h CastDType must spell hexir::DType");

template <typename Plan>
const Plan& plan_of(const Dispatch& d) {
  return *static_cast<const Plan*>(d.plan);
}
template <typename T = float>
const T* in(const Dispatch& d, uint32_t i) {
  return static_cast<const T*>(d.operands[i]);
}
template <typename T = float>
T* out(const Dispatch& d, uint32_t j) {
  return static_cast<T*>(d.operands[d.input_count + j]);
}

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

// ---- elementwise ------------------------------------------------------------

template <Kernel K>
Status binary(const Dispatch& d, Launcher& launcher) {
  BinaryParams p;
  p.a = in(d, 0);
  p.b = in(d, 1);
  p.out = out(d, 0);
  p.plan = plan_of<ops::BinaryPlan>(d);
  if (p.plan.n == 0) return ok_status();
  return launcher.launch(K, linear_config(p.plan.n), &p);
}

Status launch_unary(Kernel kernel, const Dispatch& d, Launcher& launcher) {
  UnaryParams p;
  p.in = in(d, 0);
  p.out = out(d, 0);
  p.plan = plan_of<ops::UnaryPlan>(d);
  if (p.plan.n == 0) return ok_status();
  return launcher.launch(kernel, linear_config(p.plan.n), &p);
}

template <Kernel K>
Status unary(const Dispatch& d, Launcher& launcher) {
  return launch_unary(K, d, launcher);
}

// The unary math and ONNX activations (and is_inf, is_nan): one kernel, F its switch.
template <ops::MathFn F>
Status math(const Dispatch& d, Launcher& launcher) {
  MathParams p{};
  p.in = in(d, 0);
  p.out = d.operands[1];
  p.fn = static_cast<int32_t>(F);
  p.plan = plan_of<ops::UnaryPlan>(d);
  if (p.plan.n == 0) return ok_status();
  return launcher.launch(Kernel::kMath, linear_config(p.plan.n), &p);
}

// variant 0: the erf form, 1: the tanh approximation.
Status gelu(const Dispatch& d, Launcher& launcher) {
  const bool tanh_form = plan_of<ops::UnaryPlan>(d).variant == 1;
  return launch_unary(tanh_form ? Kernel::kGeluTanh : Kernel::kGeluErf, d, launcher);
}

// equal / less / greater on operands of `Dtype` (a CastDType), bool results.
template <Kernel K, int32_t Dtype>
Status compare(const Dispatch& d, Launcher& launcher) {
  CompareParams p{};
  p.a = d.operands[0];
  p.b = d.operands[1];
  p.out = out<uint8_t>(d, 0);
  p.dtype = Dtype;
  p.plan = plan_of<ops::BinaryPlan>(d);
  if (p.plan.n == 0) return ok_status();
  return launcher.launch(K, linear_config(p.plan.n), &p);
}

// An IntBinaryParams kernel (integer arithmetic or a logical map) with operator code `op`.
Status launch_int_binary(const Dispatch& d, Launcher& launcher, int32_t op, Kernel kernel) {
  IntBinaryParams p{};
  p.a = d.operands[0];
  p.b = d.operands[1];
  p.out = d.operands[2];
  p.op = op;
  p.plan = plan_of<ops::BinaryPlan>(d);
  if (p.plan.n == 0) return ok_status();
  return launcher.launch(kernel, linear_config(p.plan.n), &p);
}

// Integer arithmetic (IntBinaryOp `Op`) on operands of `Dtype` (kCastI32 or kCastI64).
template <int32_t Op, int32_t Dtype>
Status int_binary(const Dispatch& d, Launcher& launcher) {
  return launch_int_binary(d, launcher, Op, Dtype == kCastI32 ? Kernel::kIntBinaryI32 : Kernel::kIntBinaryI64);
}

// and, or, xor (LogicalOp `Op`) on bool operands.
template <int32_t Op>
Status logical(const Dispatch& d, Launcher& launcher) {
  return launch_int_binary(d, launcher, Op, Kernel::kLogical);
}

// neg, abs, sign (IntUnaryOp `Op`) on `Dtype` (kCastI32 or kCastI64).
template <int32_t Op, int32_t Dtype>
Status int_unary(const Dispatch& d, Launcher& launcher) {
  IntUnaryParams p{};
  p.in = d.operands[0];
  p.out = d.operands[1];
  p.op = Op;
  p.plan = plan_of<ops::UnaryPlan>(d);
  if (p.plan.n == 0) return ok_status();
  return launcher.launch(Dtype == kCastI32 ? Kernel::kIntUnaryI32 : Kernel::kIntUnaryI64,
                         linear_config(p.plan.n), &p);
}

Status logical_not(const Dispatch& d, Launcher& launcher) {
  NotParams p;
  p.in = in<uint8_t>(d, 0);
  p.out = out<uint8_t>(d, 0);
  p.plan = plan_of<ops::UnaryPlan>(d);
  if (p.plan.n == 0) return ok_status();
  return launcher.launch(Kernel::kNot, linear_config(p.plan.n), &p);
}

// Every dtype is 1, 2, 4 or 8 bytes wide.
Status where(const Dispatch& d, Launcher& launcher) {
  WhereParams p;
  p.cond = in<uint8_t>(d, 0);
  p.x = d.operands[1];
  p.y = d.operands[2];
  p.out = d.operands[3];
  p.plan = plan_of<ops::WherePlan>(d);
  if (p.plan.n == 0) return ok_status();
  const Kernel kernel = p.plan.element_size == 1   ? Kernel::kWhere1
                        : p.plan.element_size == 2 ? Kernel::kWhere2
                        : p.plan.element_size == 4 ? Kernel::kWhere4
                                                   : Kernel::kWhere8;
  return launcher.launch(kernel, linear_config(p.plan.n), &p);
}

Status cast(const Dispatch& d, Launcher& launcher) {
  CastParams p;
  p.in = d.operands[0];
  p.out = d.operands[1];
  p.plan = plan_of<ops::CastPlan>(d);
  if (p.plan.n == 0) return ok_status();
  return launcher.launch(Kernel::kCast, linear_config(p.plan.n), &p);
}

template <Kernel K>
Status quantize(const Dispatch& d, Launcher& launcher) {
  static_assert(static_cast<int>(DType::kI8) == 5 && static_cast<int>(DType::kU8) == 6 &&
                    static_cast<int>(DType::kI32) == 3,
                "hexir_quantize_linear / hexir_dequantize_linear spell DType by number");
  QuantizeParams p;
  p.x = d.operands[0];
  p.scale = in(d, 1);
  p.zero = d.operands[2];
  p.out = d.operands[3];
  p.plan = plan_of<ops::QuantizePlan>(d);
  if (p.plan.n == 0) return ok_status();
  return launcher.launch(K, linear_config(p.plan.n), &p);
}

Status lstm_cell(const Dispatch& d, Launcher& launcher) {
  LstmCellParams p;
  p.gates = in(d, 0);
  p.c_prev = in(d, 1);
  p.c = out(d, 0);
  p.h = out(d, 1);
  p.plan = plan_of<ops::LstmCellPlan>(d);
  if (p.plan.rows * p.plan.hidden == 0) return ok_status();
  return launcher.launch(Kernel::kLstmCell, linear_config(p.plan.rows * p.plan.hidden), &p);
}

Status quantized_add(const Dispatch& d, Launcher& launcher) {
  QuantizedAddParams p;
  p.a = in<uint8_t>(d, 0);
  p.b = in<uint8_t>(d, 1);
  p.out = out<uint8_t>(d, 0);
  p.plan = plan_of<ops::QuantizedAddPlan>(d);
  if (p.plan.n == 0) return ok_status();
  return launcher.launch(Kernel::kQuantizedAdd, linear_config(p.plan.n), &p);
}

// ---- contractions -------------------------------------------------------------

// cuBLAS when the plan says one stride per operand describes the batch (each
// batch operand contiguous or repeated) and the dims fit its int arguments;
// otherwise the tiled kernel.
Status matmul(const Dispatch& d, Launcher& launcher) {
  MatmulParams p;
  p.a = in(d, 0);
  p.b = in(d, 1);
  p.c = out(d, 0);
  p.plan = plan_of<ops::MatmulPlan>(d);
  const ops::MatmulPlan& q = p.plan;
  p.bias = q.has_bias ? in(d, 2) : nullptr;
  if (q.batch_count == 0 || q.m == 0 || q.n == 0) return ok_status();
  const bool fits_int = q.m <= INT_MAX && q.n <= INT_MAX && q.k <= INT_MAX && q.batch_count <= INT_MAX &&
                        q.lda <= INT_MAX && q.ldb <= INT_MAX;
  if (launcher.has_gemm() && q.k > 0 && fits_int && q.a_uniform && q.b_uniform) {
    GemmBatch g;
    g.a = p.a;
    g.b = p.b;
    g.c = p.c;
    g.m = static_cast<int32_t>(q.m);
    g.n = static_cast<int32_t>(q.n);
    g.k = static_cast<int32_t>(q.k);
    g.batch = static_cast<int32_t>(q.batch_count);
    g.stride_a = q.a_batch_stride;
    g.stride_b = q.b_batch_stride;
    g.stride_c = q.m * q.n;
    g.b_transposed = q.b_transposed != 0;
    g.lda = q.lda;
    g.ldb = q.ldb;
    HEXIR_RETURN_IF_ERROR(launcher.gemm(g));
    if (!q.has_bias && q.epilogue.activation == 0) return ok_status();
    return launcher.launch(Kernel::kMatmulEpilogue, linear_config(q.batch_count * q.m * q.n), &p);
  }
  constexpr int64_t T = kMatmulTile;
  LaunchConfig c;  // the kernel loops over whatever the grid does not cover
  c.grid[0] = static_cast<uint32_t>(std::min<int64_t>((q.n + T - 1) / T, int64_t{1} << 20));
  c.grid[1] = static_cast<uint32_t>(std::min<int64_t>((q.m + T - 1) / T, 65535));
  c.grid[2] = static_cast<uint32_t>(std::min<int64_t>(q.batch_count, 65535));
  c.block[0] = T;
  c.block[1] = T;
  return launcher.launch(Kernel::kMatmul, c, &p);
}

Status conv2d(const Dispatch& d, Launcher& launcher) {
  Conv2dParams p;
  p.x = in(d, 0);
  p.w = in(d, 1);
  p.plan = plan_of<ops::Conv2dPlan>(d);
  p.bias = p.plan.has_bias ? in(d, 2) : nullptr;
  p.residual = p.plan.has_residual ? in(d, 3) : nullptr;
  p.out = out(d, 0);
  const int64_t total = p.plan.n * p.plan.k * p.plan.oh * p.plan.ow;
  if (total == 0) return ok_status();
  return launcher.launch(Kernel::kConv2d, linear_config(total), &p);
}

Status separable_conv2d(const Dispatch& d, Launcher& launcher) {
  SeparableConv2dParams p;
  // Operands (op.h): x, dw_w, pw_w, then the biases the plan has, then the residual.
  p.plan = plan_of<ops::SeparableConv2dPlan>(d);
  const int64_t dw_bias = p.plan.depthwise.has_bias, pw_bias = p.plan.pointwise.has_bias;
  p.x = in(d, 0);
  p.dw_w = in(d, 1);
  p.pw_w = in(d, 2);
  p.dw_bias = dw_bias ? in(d, 3) : nullptr;
  p.pw_bias = pw_bias ? in(d, 3 + dw_bias) : nullptr;
  p.residual = p.plan.pointwise.has_residual ? in(d, 3 + dw_bias + pw_bias) : nullptr;
  p.out = out(d, 0);
  const int64_t total = p.plan.pointwise.n * p.plan.pointwise.k * p.plan.pointwise.oh * p.plan.pointwise.ow;
  if (total == 0) return ok_status();
  return launcher.launch(Kernel::kSeparableConv2d, linear_config(total), &p);
}

Status pool2d(const Dispatch& d, Launcher& launcher) {
  Pool2dParams p;
  p.x = in(d, 0);
  p.out = out(d, 0);
  p.plan = plan_of<ops::Pool2dPlan>(d);
  const int64_t total = p.plan.n * p.plan.c * p.plan.oh * p.plan.ow;
  if (total == 0) return ok_status();
  return launcher.launch(Kernel::kPool2d, linear_config(total), &p);
}

Status max_pool_u8(const Dispatch& d, Launcher& launcher) {
  MaxPoolU8Params p;
  p.x = in<uint8_t>(d, 0);
  p.out = out<uint8_t>(d, 0);
  p.plan = plan_of<ops::Pool2dPlan>(d);
  const int64_t total = p.plan.n * p.plan.c * p.plan.oh * p.plan.ow;
  if (total == 0) return ok_status();
  return launcher.launch(Kernel::kMaxPoolU8, linear_config(total), &p);
}

Status resize(const Dispatch& d, Launcher& launcher) {
  ResizeParams p;
  p.x = in(d, 0);
  p.out = out(d, 0);
  p.plan = plan_of<ops::ResizePlan>(d);
  const int64_t total = p.plan.n * p.plan.c * p.plan.oh * p.plan.ow;
  if (total == 0) return ok_status();
  return launcher.launch(Kernel::kResize, linear_config(total), &p);
}

Status conv_transpose(const Dispatch& d, Launcher& launcher) {
  ConvTransposeParams p;
  p.x = in(d, 0);
  p.w = in(d, 1);
  p.plan = plan_of<ops::ConvTransposePlan>(d);
  p.bias = p.plan.has_bias ? in(d, 2) : nullptr;
  p.out = out(d, 0);
  const int64_t total = p.plan.n * p.plan.k * p.plan.oh * p.plan.ow;
  if (total == 0) return ok_status();
  return launcher.launch(Kernel::kConvTranspose, linear_config(total), &p);
}

Status quantized_matmul(const Dispatch& d, Launcher& launcher) {
  QuantizedMatmulParams p;
  p.a = in(d, 0);
  p.w = in<int8_t>(d, 1);
  p.scale = in(d, 2);
  p.plan = plan_of<ops::QuantizedMatmulPlan>(d);
  p.bias = p.plan.has_bias ? in(d, 3) : nullptr;
  p.c = out(d, 0);
  if (p.plan.m == 0 || p.plan.n == 0) return ok_status();
  return launcher.launch(Kernel::kQuantizedMatmul, linear_config(p.plan.m * p.plan.n), &p);
}

Status int4_matmul(const Dispatch& d, Launcher& launcher) {
  Int4MatmulParams p;
  p.a = in(d, 0);
  p.w = in<uint8_t>(d, 1);
  p.scale = in<uint16_t>(d, 2);
  p.plan = plan_of<ops::Int4MatmulPlan>(d);
  p.bias = p.plan.has_bias ? in(d, 3) : nullptr;
  p.c = out(d, 0);
  if (p.plan.m == 0 || p.plan.n == 0) return ok_status();
  return launcher.launch(Kernel::kInt4Matmul, linear_config(p.plan.m * p.plan.n), &p);
}

Status integer_matmul(const Dispatch& d, Launcher& launcher) {
  IntegerMatmulParams p;
  p.a = in<uint8_t>(d, 0);
  p.w = in<int8_t>(d, 1);
  p.zero = in<uint8_t>(d, 2);
  p.c = out<int32_t>(d, 0);
  p.plan = plan_of<ops::IntegerMatmulPlan>(d);
  if (p.plan.m == 0 || p.plan.n == 0) return ok_status();
  return launcher.launch(Kernel::kIntegerMatmul, linear_config(p.plan.m * p.plan.n), &p);
}

Status quantized_conv2d(const Dispatch& d, Launcher& launcher) {
  QuantizedConv2dParams p;
  p.x = in<uint8_t>(d, 0);
  p.w = in<int8_t>(d, 1);
  p.bias = in<int32_t>(d, 2);
  p.multiplier = in(d, 3);
  p.out = out<uint8_t>(d, 0);
  p.plan = plan_of<ops::QuantizedConv2dPlan>(d);
  const int64_t total = p.plan.n * p.plan.oh * p.plan.ow * p.plan.k;
  if (total == 0) return ok_status();
  return launcher.launch(Kernel::kQuantizedConv2d, linear_config(total), &p);
}

Status dequantize_int4(const Dispatch& d, Launcher& launcher) {
  DequantizeInt4Params p;
  p.w = in<uint8_t>(d, 0);
  p.scale = in<uint16_t>(d, 1);
  p.out = out(d, 0);
  p.plan = plan_of<ops::DequantizeInt4Plan>(d);
  if (p.plan.rows == 0 || p.plan.k == 0) return ok_status();
  return launcher.launch(Kernel::kDequantizeInt4, linear_config(p.plan.rows * p.plan.k), &p);
}

// ---- normalization ------------------------------------------------------------

Status softmax(const Dispatch& d, Launcher& launcher) {
  SoftmaxParams p;
  p.in = in(d, 0);
  p.out = out(d, 0);
  p.plan = plan_of<ops::SoftmaxPlan>(d);
  const ops::SoftmaxPlan& q = p.plan;
  if (q.outer == 0 || q.length == 0 || q.inner == 0) return ok_status();
  return launcher.launch(Kernel::kSoftmax, rows_config(q.outer * q.inner, q.length), &p);
}

Status attention(const Dispatch& d, Launcher& launcher) {
  AttentionParams p;
  p.q = in(d, 0);
  p.k = in(d, 1);
  p.v = in(d, 2);
  p.count = in<int64_t>(d, 3);
  p.out = out(d, 0);
  p.scratch = static_cast<float*>(d.workspace);
  p.plan = plan_of<ops::AttentionPlan>(d);
  const ops::AttentionPlan& q = p.plan;
  const int64_t rows = q.batch_count * q.m;
  if (rows == 0 || q.e == 0) return ok_status();
  if (p.scratch == nullptr || d.workspace_size < static_cast<uint64_t>(rows * q.t) * sizeof(float))
    return internal_error("attention: workspace of " + std::to_string(d.workspace_size) + " bytes is too small");
  return launcher.launch(Kernel::kAttention, rows_config(rows, q.t), &p);
}

Status layernorm(const Dispatch& d, Launcher& launcher) {
  LayernormParams p;
  p.in = in(d, 0);
  p.gamma = in(d, 1);
  p.beta = in(d, 2);
  p.out = out(d, 0);
  p.plan = plan_of<ops::LayernormPlan>(d);
  if (p.plan.rows == 0 || p.plan.width == 0) return ok_status();
  return launcher.launch(Kernel::kLayernorm, rows_config(p.plan.rows, p.plan.width), &p);
}

Status group_norm(const Dispatch& d, Launcher& launcher) {
  GroupNormParams p;
  p.in = in(d, 0);
  p.scale = in(d, 1);
  p.bias = in(d, 2);
  p.out = out(d, 0);
  p.plan = plan_of<ops::GroupNormPlan>(d);
  if (p.plan.rows == 0 || p.plan.width == 0) return ok_status();
  return launcher.launch(Kernel::kGroupNorm, rows_config(p.plan.rows, p.plan.width), &p);
}

// The reductions on `Dtype` (kCastF32, kCastI32 or kCastI64): one block per output element.
template <int32_t Dtype>
Status reduce(const Dispatch& d, Launcher& launcher) {
  ReduceParams p;
  p.in = d.operands[0];
  p.out = d.operands[1];
  p.plan = plan_of<ops::ReducePlan>(d);
  if (p.plan.out_count == 0) return ok_status();
  const Kernel kernel = Dtype == kCastF32   ? Kernel::kReduce
                        : Dtype == kCastI32 ? Kernel::kReduceI32
                                            : Kernel::kReduceI64;
  return launcher.launch(kernel, rows_config(p.plan.out_count, p.plan.red_count), &p);
}

Status log_softmax(const Dispatch& d, Launcher& launcher) {
  SoftmaxParams p;
  p.in = in(d, 0);
  p.out = out(d, 0);
  p.plan = plan_of<ops::SoftmaxPlan>(d);
  const ops::SoftmaxPlan& q = p.plan;
  if (q.outer == 0 || q.length == 0 || q.inner == 0) return ok_status();
  return launcher.launch(Kernel::kLogSoftmax, rows_config(q.outer * q.inner, q.length), &p);
}

Status hardmax(const Dispatch& d, Launcher& launcher) {
  HardmaxParams p;
  p.x = in(d, 0);
  p.out = out(d, 0);
  p.plan = plan_of<ops::ArgmaxPlan>(d);
  const int64_t n = p.plan.outer * p.plan.inner;
  if (n == 0 || p.plan.length == 0) return ok_status();
  return launcher.launch(Kernel::kHardmax, linear_config(n), &p);
}

// top_k on x of `Dtype`: one thread per row.
template <int32_t Dtype>
Status top_k(const Dispatch& d, Launcher& launcher) {
  TopKParams p;
  p.x = d.operands[0];
  p.values = d.operands[1];
  p.indices = out<int64_t>(d, 1);
  p.plan = plan_of<ops::TopKPlan>(d);
  const int64_t n = p.plan.outer * p.plan.inner;
  if (n == 0 || p.plan.k == 0) return ok_status();
  const Kernel kernel = Dtype == kCastF32   ? Kernel::kTopK
                        : Dtype == kCastI32 ? Kernel::kTopKI32
                                            : Kernel::kTopKI64;
  return launcher.launch(kernel, linear_config(n), &p);
}

// ---- layout -------------------------------------------------------------------

// transpose, slice and expand; copy of a strided view.
Status launch_strided(const Dispatch& d, const ops::StridedPlan& plan, Launcher& launcher) {
  StridedParams p;
  p.in = d.operands[0];
  p.out = d.operands[1];
  p.plan = plan;
  if (p.plan.n == 0) return ok_status();
  Kernel kernel = Kernel::kStridedBytes;
  switch (p.plan.element_size) {
    case 1:
      kernel = Kernel::kStrided1;
      break;
    case 2:
      kernel = Kernel::kStrided2;
      break;
    case 4:
      kernel = Kernel::kStrided4;
      break;
    case 8:
      kernel = Kernel::kStrided8;
      break;
    default:
      break;
  }
  const int64_t threads = kernel == Kernel::kStridedBytes ? p.plan.n * p.plan.element_size : p.plan.n;
  return launcher.launch(kernel, linear_config(threads), &p);
}

Status strided(const Dispatch& d, Launcher& launcher) {
  return launch_strided(d, plan_of<ops::StridedPlan>(d), launcher);
}

// Every dtype is 1, 2, 4 or 8 bytes wide.
Status pad(const Dispatch& d, Launcher& launcher) {
  PadParams p;
  p.in = d.operands[0];
  p.out = d.operands[1];
  p.plan = plan_of<ops::PadPlan>(d);
  if (p.plan.n == 0) return ok_status();
  const Kernel kernel = p.plan.element_size == 1   ? Kernel::kPad1
                        : p.plan.element_size == 2 ? Kernel::kPad2
                        : p.plan.element_size == 4 ? Kernel::kPad4
                                                   : Kernel::kPad8;
  return launcher.launch(kernel, linear_config(p.plan.n), &p);
}

// Widest unit (16, 4 or 1 bytes) dividing every one of `bits` (addresses, lengths, pitches or'ed).
int64_t unit_of(uint64_t bits) { return bits % 16 == 0 ? 16 : bits % 4 == 0 ? 4 : 1; }

// rows x row_bytes from src (src_pitch apart) to dst (dst_pitch apart): one
// copy when the rows are one contiguous run, else the strided copy kernel.
Status copy_rows(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t rows,
                 int64_t row_bytes, Launcher& launcher) {
  if (rows == 0 || row_bytes == 0) return ok_status();
  if (rows == 1 || (src_pitch == row_bytes && dst_pitch == row_bytes))
    return launcher.copy(dst, src, static_cast<uint64_t>(rows * row_bytes));
  StridedCopyParams p;
  p.src = src;
  p.dst = dst;
  p.rows = rows;
  p.row_bytes = row_bytes;
  p.src_pitch = src_pitch;
  p.dst_pitch = dst_pitch;
  const int64_t unit = unit_of(reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
                               static_cast<uint64_t>(row_bytes) | static_cast<uint64_t>(src_pitch) |
                               static_cast<uint64_t>(dst_pitch));
  const Kernel kernel = unit == 16  ? Kernel::kStridedCopy16
                        : unit == 4 ? Kernel::kStridedCopy4
                                    : Kernel::kStridedCopy1;
  return launcher.launch(kernel, linear_config(rows * (row_bytes / unit)), &p);
}

// Each output row takes one chunk of every input in turn.
Status concat(const Dispatch& d, Launcher& launcher) {
  const ops::ConcatPlan& p = plan_of<ops::ConcatPlan>(d);
  const int64_t* row_bytes = ops::plan_tail(&p);
  auto* dst = out<uint8_t>(d, 0);
  for (int64_t k = 0; k < p.input_count; ++k) {
    HEXIR_RETURN_IF_ERROR(
        copy_rows(dst, p.out_row_bytes, d.operands[k], row_bytes[k], p.outer, row_bytes[k], launcher));
    dst += row_bytes[k];
  }
  return ok_status();
}

// The inverse: each input row hands one chunk to every output.
Status split(const Dispatch& d, Launcher& launcher) {
  const ops::SplitPlan& p = plan_of<ops::SplitPlan>(d);
  const int64_t* row_bytes = ops::plan_tail(&p);
  const auto* src = in<uint8_t>(d, 0);
  for (int64_t k = 0; k < p.output_count; ++k) {
    HEXIR_RETURN_IF_ERROR(copy_rows(out<uint8_t>(d, static_cast<uint32_t>(k)), row_bytes[k], src,
                                    p.in_row_bytes, p.outer, row_bytes[k], launcher));
    src += row_bytes[k];
  }
  return ok_status();
}

Status copy(const Dispatch& d, Launcher& launcher) {
  const ops::CopyPlan& plan = plan_of<ops::CopyPlan>(d);
  if (plan.strided) return launch_strided(d, plan.gather, launcher);  // a strided view materialized
  const int64_t bytes = plan.bytes;
  if (bytes == 0 || d.operands[0] == d.operands[1]) return ok_status();
  return launcher.copy(d.operands[1], d.operands[0], static_cast<uint64_t>(bytes));
}

// Out-of-range indices write zeros (the cpu kernel reports them; see docs/cuda.md).
Status gather(const Dispatch& d, Launcher& launcher) {
  GatherParams p;
  p.data = d.operands[0];
  p.indices = d.operands[1];
  p.out = d.operands[2];
  p.plan = plan_of<ops::GatherPlan>(d);
  const ops::GatherPlan& q = p.plan;
  if (q.outer == 0 || q.index_count == 0 || q.inner_bytes == 0) return ok_status();
  const int64_t unit = unit_of(reinterpret_cast<uintptr_t>(p.data) | reinterpret_cast<uintptr_t>(p.out) |
                               static_cast<uint64_t>(q.inner_bytes));
  const Kernel kernel = unit == 16 ? Kernel::kGather16 : unit == 4 ? Kernel::kGather4 : Kernel::kGather1;
  return launcher.launch(kernel, linear_config(q.outer * q.index_count * (q.inner_bytes / unit)), &p);
}

// argmax and argmin on x of `Dtype`.
template <int32_t Dtype>
Status argmax(const Dispatch& d, Launcher& launcher) {
  ArgmaxParams p;
  p.x = d.operands[0];
  p.out = out<int64_t>(d, 0);
  p.plan = plan_of<ops::ArgmaxPlan>(d);
  const int64_t n = p.plan.outer * p.plan.inner;
  if (n == 0) return ok_status();
  const Kernel kernel = Dtype == kCastF32   ? Kernel::kArgmax
                        : Dtype == kCastI32 ? Kernel::kArgmaxI32
                                            : Kernel::kArgmaxI64;
  return launcher.launch(kernel, linear_config(n), &p);
}

// The window kernel of one element width (every dtype is 1, 2, 4 or 8 bytes).
Kernel window_kernel(int32_t element_size, bool update) {
  switch (element_size) {
    case 1:
      return update ? Kernel::kUpdateSlice1 : Kernel::kDynamicSlice1;
    case 2:
      return update ? Kernel::kUpdateSlice2 : Kernel::kDynamicSlice2;
    case 4:
      return update ? Kernel::kUpdateSlice4 : Kernel::kDynamicSlice4;
    default:
      return update ? Kernel::kUpdateSlice8 : Kernel::kDynamicSlice8;
  }
}

// The start indices stay in device memory: the kernel reads them.
WindowParams window_params(const Dispatch& d, uint32_t first_start) {
  WindowParams p{};
  p.plan = plan_of<ops::WindowPlan>(d);
  p.out = d.operands[d.input_count];
  for (int32_t k = 0; k < p.plan.rank; ++k)
    p.starts[k] = in<int64_t>(d, first_start + static_cast<uint32_t>(k));
  return p;
}

Status dynamic_slice(const Dispatch& d, Launcher& launcher) {
  WindowParams p = window_params(d, 1);
  p.x = d.operands[0];
  if (p.plan.n == 0) return ok_status();
  return launcher.launch(window_kernel(p.plan.element_size, false), linear_config(p.plan.n), &p);
}

// A copy of x unless the result is in x's storage (in place), then the
// window. A result in update's storage means update is as large as x: it is
// the result already.
Status update_slice(const Dispatch& d, Launcher& launcher) {
  WindowParams p = window_params(d, 2);
  p.update = d.operands[1];
  if (p.out == p.update) return ok_status();
  if (p.out != d.operands[0] && p.plan.x_bytes > 0)
    HEXIR_RETURN_IF_ERROR(launcher.copy(p.out, d.operands[0], static_cast<uint64_t>(p.plan.x_bytes)));
  if (p.plan.n == 0) return ok_status();
  return launcher.launch(window_kernel(p.plan.element_size, true), linear_config(p.plan.n), &p);
}

// The threads of a scatter: scatter_nd's slice elements, or scatter_elements'
// lines along the axis (kernels/layout.cu).
int64_t scatter_threads(const ops::ScatterPlan& q) {
  if (q.depth > 0) return q.slice;
  const int64_t length = q.index_dims[q.axis];
  return length == 0 ? 0 : q.n / length;
}

Kernel scatter_kernel(const ops::ScatterPlan& q) {
  if (q.reduction != ops::kScatterNone)
    return q.dtype == static_cast<int32_t>(DType::kI32)   ? Kernel::kScatterI32
           : q.dtype == static_cast<int32_t>(DType::kI64) ? Kernel::kScatterI64
                                                          : Kernel::kScatterF32;
  return q.element_size == 1   ? Kernel::kScatter1
         : q.element_size == 2 ? Kernel::kScatter2
         : q.element_size == 4 ? Kernel::kScatter4
                               : Kernel::kScatter8;
}

// A copy of data unless the result is in data's storage (in place), then the
// updates. Out-of-range indices land nowhere (the cpu kernel reports them;
// docs/cuda.md).
// Bounded dynamic shapes: one thread for the producers (serial scans), the
// extent written to their last output; compact in parallel.
LaunchConfig one_thread() { return LaunchConfig{}; }

Status nonzero(const Dispatch& d, Launcher& launcher) {
  NonZeroParams p;
  p.x = d.operands[0];
  p.out = out<int64_t>(d, 0);
  p.count = out<int64_t>(d, 1);
  p.plan = plan_of<ops::NonZeroPlan>(d);
  return launcher.launch(Kernel::kNonZero, one_thread(), &p);
}

Status non_max_suppression(const Dispatch& d, Launcher& launcher) {
  NmsParams p;
  p.boxes = in(d, 0);
  p.scores = in(d, 1);
  p.max_output = static_cast<const int64_t*>(d.operands[2]);
  p.iou_threshold = in(d, 3);
  p.score_threshold = in(d, 4);
  p.out = out<int64_t>(d, 0);
  p.count = out<int64_t>(d, 1);
  p.scratch = static_cast<int64_t*>(d.workspace);
  p.plan = plan_of<ops::NmsPlan>(d);
  return launcher.launch(Kernel::kNms, one_thread(), &p);
}

Status compress(const Dispatch& d, Launcher& launcher) {
  CompressParams p;
  p.x = d.operands[0];
  p.cond = static_cast<const uint8_t*>(d.operands[1]);
  p.out = d.operands[2];
  p.count = out<int64_t>(d, 1);
  p.plan = plan_of<ops::CompressPlan>(d);
  return launcher.launch(Kernel::kCompress, one_thread(), &p);
}

Status compact(const Dispatch& d, Launcher& launcher) {
  CompactParams p;
  p.x = d.operands[0];
  p.count = static_cast<const int64_t*>(d.operands[1]);
  p.out = d.operands[2];
  p.plan = plan_of<ops::CompactPlan>(d);
  const int64_t bytes = p.plan.outer * p.plan.bound * p.plan.inner_bytes;  // the most it moves
  if (bytes == 0) return ok_status();
  return launcher.launch(Kernel::kCompact, linear_config(bytes), &p);
}

Status bound(const Dispatch& d, Launcher& launcher) {
  BoundParams p;
  p.x = d.operands[0];
  p.n = static_cast<const int64_t*>(d.operands[1]);
  p.out = d.operands[2];
  p.plan = plan_of<ops::CompactPlan>(d);
  const int64_t bytes = p.plan.outer * p.plan.bound * p.plan.inner_bytes;
  return launcher.launch(Kernel::kBound, linear_config(bytes > 0 ? bytes : 1), &p);
}

Status scatter(const Dispatch& d, Launcher& launcher) {
  ScatterParams p;
  p.indices = d.operands[1];
  p.updates = d.operands[2];
  p.out = d.operands[3];
  p.plan = plan_of<ops::ScatterPlan>(d);
  if (p.out != d.operands[0] && p.plan.data_bytes > 0)
    HEXIR_RETURN_IF_ERROR(launcher.copy(p.out, d.operands[0], static_cast<uint64_t>(p.plan.data_bytes)));
  const int64_t threads = scatter_threads(p.plan);
  if (p.plan.n == 0 || threads == 0) return ok_status();
  return launcher.launch(scatter_kernel(p.plan), linear_config(threads), &p);
}

// gather_elements and gather_nd: one thread per result element; an index out
// of range reads a zero (the cpu kernel reports it; docs/cuda.md).
Status gather_indexed(const Dispatch& d, Launcher& launcher) {
  GatherIndexedParams p;
  p.data = d.operands[0];
  p.indices = d.operands[1];
  p.out = d.operands[2];
  p.plan = plan_of<ops::ScatterPlan>(d);
  if (p.plan.n == 0) return ok_status();
  const int32_t size = p.plan.element_size;
  const Kernel kernel = size == 1   ? Kernel::kGatherIndexed1
                        : size == 2 ? Kernel::kGatherIndexed2
                        : size == 4 ? Kernel::kGatherIndexed4
                                    : Kernel::kGatherIndexed8;
  return launcher.launch(kernel, linear_config(p.plan.n), &p);
}

template <Kernel kKernel>
Status cumsum(const Dispatch& d, Launcher& launcher) {
  CumSumParams p;
  p.x = d.operands[0];
  p.out = d.operands[1];
  p.plan = plan_of<ops::CumSumPlan>(d);
  const int64_t lines = p.plan.outer * p.plan.inner;
  if (lines == 0 || p.plan.length == 0) return ok_status();
  return launcher.launch(kKernel, linear_config(lines), &p);
}

// ---- the table ------------------------------------------------------------------

constexpr int kF32 = static_cast<int>(DType::kF32);
constexpr int kU8 = static_cast<int>(DType::kU8);

// cast: one line per (from, to) pair of the castable dtypes, all one kernel.
// ---- f16 and bf16 through the f32 kernels (ops/widen.h) -------------------------

// n elements from one dtype to another by the cast kernel (f16 and bf16 to
// and from f32: the bits of base/half.h, on the device and in the emulation).
Status convert(const void* from, int32_t from_dtype, void* to, int32_t to_dtype, int64_t n, Launcher& launcher) {
  if (n == 0) return ok_status();
  CastParams p;
  p.in = from;
  p.out = to;
  p.plan.n = n;
  p.plan.from = from_dtype;
  p.plan.to = to_dtype;
  return launcher.launch(Kernel::kCast, linear_config(n), &p);
}

// The half operands to f32 in the workspace, the f32 kernel on the copies,
// its results rounded back (the cpu's widening kernel, hal/cpu/widen.cc).
Status run_widened(CudaKernelFn f32_kernel, const Dispatch& d, Launcher& launcher) {
  const ops::WidenPlan& w = plan_of<ops::WidenPlan>(d);
  const uint32_t count = d.input_count + d.output_count;
  auto* workspace = static_cast<uint8_t*>(d.workspace);
  void* operands[ops::kMaxWidenOperands];
  for (uint32_t i = 0; i < count; ++i) {
    const ops::WidenOperand& o = w.operands[i];
    operands[i] = d.operands[i];
    if (!o.staged) continue;
    operands[i] = workspace + o.offset;
    if (i < d.input_count)
      HEXIR_RETURN_IF_ERROR(convert(d.operands[i], o.dtype, operands[i], kCastF32, o.count, launcher));
  }
  Dispatch inner = d;
  inner.plan = ops::widen_inner_plan(w);
  inner.operands = operands;
  inner.workspace = workspace + w.staging_bytes;
  inner.workspace_size = w.inner_workspace;
  HEXIR_RETURN_IF_ERROR(f32_kernel(inner, launcher));
  for (uint32_t i = d.input_count; i < count; ++i) {
    const ops::WidenOperand& o = w.operands[i];
    if (o.staged) HEXIR_RETURN_IF_ERROR(convert(operands[i], kCastF32, d.operands[i], o.dtype, o.count, launcher));
  }
  return ok_status();
}

template <CudaKernelFn F>
Status widened(const Dispatch& d, Launcher& launcher) {
  return run_widened(F, d, launcher);
}

// clang-format off
#define HEXIR_CAST_FROM(from)                                                                          \
  {OpId::kCast, from, kCastF32, cast}, {OpId::kCast, from, kCastF16, cast},                            \
  {OpId::kCast, from, kCastI32, cast}, {OpId::kCast, from, kCastI64, cast},                            \
  {OpId::kCast, from, kCastU8, cast}, {OpId::kCast, from, kCastBool, cast},                            \
  {OpId::kCast, from, kCastBF16, cast}
// An integer operator: one line per dtype.
#define HEXIR_INT_BINARY(op, code)                                  \
  {OpId::op, kCastI32, kCastI32, int_binary<code, kCastI32>},       \
  {OpId::op, kCastI64, kCastI64, int_binary<code, kCastI64>}
#define HEXIR_INT_UNARY(op, code)                                   \
  {OpId::op, kCastI32, kCastI32, int_unary<code, kCastI32>},        \
  {OpId::op, kCastI64, kCastI64, int_unary<code, kCastI64>}
// f16 and bf16 through the f32 kernel: keyed by the half dtype of the key
// input and the result, or of the key input only (a bool or i64 result).
// (Variadic: a template's comma.)
#define HEXIR_WIDENED(op, ...) \
  {OpId::op, kCastF16, kCastF16, widened<__VA_ARGS__>}, {OpId::op, kCastBF16, kCastBF16, widened<__VA_ARGS__>}
#define HEXIR_WIDENED_KEY(op, ...) \
  {OpId::op, kCastF16, kAnyDType, widened<__VA_ARGS__>}, {OpId::op, kCastBF16, kAnyDType, widened<__VA_ARGS__>}
#define HEXIR_INT_REDUCE(op)                                        \
  {OpId::op, kCastI32, kCastI32, reduce<kCastI32>},                 \
  {OpId::op, kCastI64, kCastI64, reduce<kCastI64>}
// clang-format on

constexpr KernelEntry<CudaKernelFn> kKernels[] = {
    {OpId::kAdd, kF32, kF32, binary<Kernel::kAdd>},
    {OpId::kSub, kF32, kF32, binary<Kernel::kSub>},
    {OpId::kMul, kF32, kF32, binary<Kernel::kMul>},
    {OpId::kDiv, kF32, kF32, binary<Kernel::kDiv>},
    {OpId::kMaximum, kF32, kF32, binary<Kernel::kMaximum>},
    {OpId::kMinimum, kF32, kF32, binary<Kernel::kMinimum>},
    {OpId::kRelu, kF32, kF32, unary<Kernel::kRelu>},
    {OpId::kGelu, kF32, kF32, gelu},
    {OpId::kSilu, kF32, kF32, unary<Kernel::kSilu>},
    {OpId::kSigmoid, kF32, kF32, unary<Kernel::kSigmoid>},
    {OpId::kTanh, kF32, kF32, unary<Kernel::kTanh>},
    {OpId::kExp, kF32, kF32, unary<Kernel::kExp>},
    {OpId::kSqrt, kF32, kF32, unary<Kernel::kSqrt>},
    {OpId::kRsqrt, kF32, kF32, unary<Kernel::kRsqrt>},
    {OpId::kNeg, kF32, kF32, unary<Kernel::kNeg>},
    {OpId::kLeakyRelu, kF32, kF32, unary<Kernel::kLeakyRelu>},
    {OpId::kClip, kF32, kF32, unary<Kernel::kClip>},
    {OpId::kHardSigmoid, kF32, kF32, unary<Kernel::kHardSigmoid>},
    {OpId::kHardSwish, kF32, kF32, unary<Kernel::kHardSwish>},
    {OpId::kErf, kF32, kF32, unary<Kernel::kErf>},
    {OpId::kLog, kF32, kF32, unary<Kernel::kLog>},
    {OpId::kAbs, kF32, kF32, unary<Kernel::kAbs>},
    {OpId::kReciprocal, kF32, kF32, unary<Kernel::kReciprocal>},
    {OpId::kSoftplus, kF32, kF32, unary<Kernel::kSoftplus>},
    {OpId::kPow, kF32, kF32, binary<Kernel::kPow>},
    // Comparisons are keyed by the operands' dtype; the result is always bool.
    {OpId::kEqual, kCastF32, kAnyDType, compare<Kernel::kEqual, kCastF32>},
    {OpId::kEqual, kCastI32, kAnyDType, compare<Kernel::kEqual, kCastI32>},
    {OpId::kEqual, kCastI64, kAnyDType, compare<Kernel::kEqual, kCastI64>},
    {OpId::kLess, kCastF32, kAnyDType, compare<Kernel::kLess, kCastF32>},
    {OpId::kLess, kCastI32, kAnyDType, compare<Kernel::kLess, kCastI32>},
    {OpId::kLess, kCastI64, kAnyDType, compare<Kernel::kLess, kCastI64>},
    {OpId::kGreater, kCastF32, kAnyDType, compare<Kernel::kGreater, kCastF32>},
    {OpId::kGreater, kCastI32, kAnyDType, compare<Kernel::kGreater, kCastI32>},
    {OpId::kGreater, kCastI64, kAnyDType, compare<Kernel::kGreater, kCastI64>},
    // not: bool only (its rule).
    {OpId::kNot, kAnyDType, kAnyDType, logical_not},
    {OpId::kReduceMax, kF32, kF32, reduce<kCastF32>},
    {OpId::kMaxPool, kF32, kF32, pool2d},
    {OpId::kMaxPool, kU8, kU8, max_pool_u8},
    {OpId::kAveragePool, kF32, kF32, pool2d},
    {OpId::kPad, kAnyDType, kAnyDType, pad},
    {OpId::kExpand, kAnyDType, kAnyDType, strided},
    {OpId::kResize, kF32, kF32, resize},
    {OpId::kConvTranspose, kF32, kF32, conv_transpose},
    {OpId::kMatmul, kF32, kF32, matmul},
    {OpId::kConv2d, kF32, kF32, conv2d},
    {OpId::kSeparableConv2d, kF32, kF32, separable_conv2d},
    {OpId::kSoftmax, kF32, kF32, softmax},
    {OpId::kAttention, kF32, kF32, attention},
    {OpId::kQuantizedMatmul, kF32, kF32, quantized_matmul},
    {OpId::kInt4Matmul, kF32, kF32, int4_matmul},
    {OpId::kDequantizeInt4, static_cast<int>(DType::kU8), kF32, dequantize_int4},
    {OpId::kIntegerMatmul, static_cast<int>(DType::kU8), static_cast<int>(DType::kI32), integer_matmul},
    {OpId::kQuantizedConv2d, kU8, kU8, quantized_conv2d},
    {OpId::kQuantizedAdd, kU8, kU8, quantized_add},
    {OpId::kLstmCell, kF32, kF32, lstm_cell},
    {OpId::kQuantizeLinear, kAnyDType, kAnyDType, quantize<Kernel::kQuantizeLinear>},
    {OpId::kDequantizeLinear, kAnyDType, kF32, quantize<Kernel::kDequantizeLinear>},
    {OpId::kLayernorm, kF32, kF32, layernorm},
    {OpId::kReduceSum, kF32, kF32, reduce<kCastF32>},
    {OpId::kReduceMean, kF32, kF32, reduce<kCastF32>},
    {OpId::kTranspose, kAnyDType, kAnyDType, strided},
    {OpId::kSlice, kAnyDType, kAnyDType, strided},
    {OpId::kConcat, kAnyDType, kAnyDType, concat},
    {OpId::kSplit, kAnyDType, kAnyDType, split},
    {OpId::kCopy, kAnyDType, kAnyDType, copy},
    {OpId::kGather, kAnyDType, kAnyDType, gather},
    {OpId::kWhere, kAnyDType, kAnyDType, where},
    // argmax: keyed by its f32 operand; the result is always i64 (its rule).
    {OpId::kArgMax, kF32, kAnyDType, argmax<kCastF32>},
    {OpId::kDynamicSlice, kAnyDType, kAnyDType, dynamic_slice},
    {OpId::kUpdateSlice, kAnyDType, kAnyDType, update_slice},
    {OpId::kScatterND, kAnyDType, kAnyDType, scatter},
    {OpId::kScatterElements, kAnyDType, kAnyDType, scatter},
    // The unary math and ONNX activations; is_inf and is_nan give bools.
    {OpId::kSin, kF32, kF32, math<ops::MathFn::kSin>},
    {OpId::kCos, kF32, kF32, math<ops::MathFn::kCos>},
    {OpId::kTan, kF32, kF32, math<ops::MathFn::kTan>},
    {OpId::kAsin, kF32, kF32, math<ops::MathFn::kAsin>},
    {OpId::kAcos, kF32, kF32, math<ops::MathFn::kAcos>},
    {OpId::kAtan, kF32, kF32, math<ops::MathFn::kAtan>},
    {OpId::kSinh, kF32, kF32, math<ops::MathFn::kSinh>},
    {OpId::kCosh, kF32, kF32, math<ops::MathFn::kCosh>},
    {OpId::kAsinh, kF32, kF32, math<ops::MathFn::kAsinh>},
    {OpId::kAcosh, kF32, kF32, math<ops::MathFn::kAcosh>},
    {OpId::kAtanh, kF32, kF32, math<ops::MathFn::kAtanh>},
    {OpId::kIsInf, kF32, kAnyDType, math<ops::MathFn::kIsInf>},
    {OpId::kIsNaN, kF32, kAnyDType, math<ops::MathFn::kIsNaN>},
    {OpId::kElu, kF32, kF32, math<ops::MathFn::kElu>},
    {OpId::kSelu, kF32, kF32, math<ops::MathFn::kSelu>},
    {OpId::kCelu, kF32, kF32, math<ops::MathFn::kCelu>},
    {OpId::kMish, kF32, kF32, math<ops::MathFn::kMish>},
    {OpId::kSoftsign, kF32, kF32, math<ops::MathFn::kSoftsign>},
    {OpId::kThresholdedRelu, kF32, kF32, math<ops::MathFn::kThresholdedRelu>},
    {OpId::kShrink, kF32, kF32, math<ops::MathFn::kShrink>},
    {OpId::kPRelu, kF32, kF32, binary<Kernel::kPRelu>},
    {OpId::kGroupNorm, kF32, kF32, group_norm},
    {OpId::kGatherElements, kAnyDType, kAnyDType, gather_indexed},
    {OpId::kGatherND, kAnyDType, kAnyDType, gather_indexed},
    {OpId::kCumSum, kF32, kF32, cumsum<Kernel::kCumSumF32>},
    {OpId::kCumSum, kCastI32, kCastI32, cumsum<Kernel::kCumSumI32>},
    {OpId::kCumSum, kCastI64, kCastI64, cumsum<Kernel::kCumSumI64>},
    HEXIR_CAST_FROM(kCastF32),
    HEXIR_CAST_FROM(kCastF16),
    HEXIR_CAST_FROM(kCastBF16),
    HEXIR_CAST_FROM(kCastI32),
    HEXIR_CAST_FROM(kCastI64),
    HEXIR_CAST_FROM(kCastU8),
    HEXIR_CAST_FROM(kCastBool),
    // Integer arithmetic (the f32 operators on i32 and i64) and the integer,
    // boolean and rounding operators.
    HEXIR_INT_BINARY(kAdd, kIntAdd),
    HEXIR_INT_BINARY(kSub, kIntSub),
    HEXIR_INT_BINARY(kMul, kIntMul),
    HEXIR_INT_BINARY(kDiv, kIntDiv),
    HEXIR_INT_BINARY(kMaximum, kIntMaximum),
    HEXIR_INT_BINARY(kMinimum, kIntMinimum),
    HEXIR_INT_BINARY(kMod, kIntMod),
    HEXIR_INT_BINARY(kPow, kIntPow),
    HEXIR_INT_UNARY(kNeg, kIntNeg),
    HEXIR_INT_UNARY(kAbs, kIntAbs),
    HEXIR_INT_UNARY(kSign, kIntSign),
    {OpId::kMod, kF32, kF32, binary<Kernel::kFmod>},
    {OpId::kLessOrEqual, kCastF32, kAnyDType, compare<Kernel::kLessOrEqual, kCastF32>},
    {OpId::kLessOrEqual, kCastI32, kAnyDType, compare<Kernel::kLessOrEqual, kCastI32>},
    {OpId::kLessOrEqual, kCastI64, kAnyDType, compare<Kernel::kLessOrEqual, kCastI64>},
    {OpId::kGreaterOrEqual, kCastF32, kAnyDType, compare<Kernel::kGreaterOrEqual, kCastF32>},
    {OpId::kGreaterOrEqual, kCastI32, kAnyDType, compare<Kernel::kGreaterOrEqual, kCastI32>},
    {OpId::kGreaterOrEqual, kCastI64, kAnyDType, compare<Kernel::kGreaterOrEqual, kCastI64>},
    // and, or, xor: bool only (their rule).
    {OpId::kAnd, kAnyDType, kAnyDType, logical<kLogicalAnd>},
    {OpId::kOr, kAnyDType, kAnyDType, logical<kLogicalOr>},
    {OpId::kXor, kAnyDType, kAnyDType, logical<kLogicalXor>},
    {OpId::kSign, kF32, kF32, unary<Kernel::kSign>},
    {OpId::kCeil, kF32, kF32, unary<Kernel::kCeil>},
    {OpId::kFloor, kF32, kF32, unary<Kernel::kFloor>},
    {OpId::kRound, kF32, kF32, unary<Kernel::kRound>},
    // f16 and bf16: the float operators through their f32 kernels (ops/widen.h's list).
    HEXIR_WIDENED(kAdd, binary<Kernel::kAdd>), HEXIR_WIDENED(kSub, binary<Kernel::kSub>),
    HEXIR_WIDENED(kMul, binary<Kernel::kMul>), HEXIR_WIDENED(kDiv, binary<Kernel::kDiv>),
    HEXIR_WIDENED(kMaximum, binary<Kernel::kMaximum>), HEXIR_WIDENED(kMinimum, binary<Kernel::kMinimum>),
    HEXIR_WIDENED(kPow, binary<Kernel::kPow>), HEXIR_WIDENED(kMod, binary<Kernel::kFmod>),
    HEXIR_WIDENED(kRelu, unary<Kernel::kRelu>), HEXIR_WIDENED(kGelu, gelu),
    HEXIR_WIDENED(kSilu, unary<Kernel::kSilu>), HEXIR_WIDENED(kSigmoid, unary<Kernel::kSigmoid>),
    HEXIR_WIDENED(kTanh, unary<Kernel::kTanh>), HEXIR_WIDENED(kExp, unary<Kernel::kExp>),
    HEXIR_WIDENED(kSqrt, unary<Kernel::kSqrt>), HEXIR_WIDENED(kRsqrt, unary<Kernel::kRsqrt>),
    HEXIR_WIDENED(kNeg, unary<Kernel::kNeg>), HEXIR_WIDENED(kLeakyRelu, unary<Kernel::kLeakyRelu>),
    HEXIR_WIDENED(kClip, unary<Kernel::kClip>), HEXIR_WIDENED(kHardSigmoid, unary<Kernel::kHardSigmoid>),
    HEXIR_WIDENED(kHardSwish, unary<Kernel::kHardSwish>), HEXIR_WIDENED(kErf, unary<Kernel::kErf>),
    HEXIR_WIDENED(kLog, unary<Kernel::kLog>), HEXIR_WIDENED(kAbs, unary<Kernel::kAbs>),
    HEXIR_WIDENED(kReciprocal, unary<Kernel::kReciprocal>), HEXIR_WIDENED(kSoftplus, unary<Kernel::kSoftplus>),
    HEXIR_WIDENED(kSign, unary<Kernel::kSign>), HEXIR_WIDENED(kCeil, unary<Kernel::kCeil>),
    HEXIR_WIDENED(kFloor, unary<Kernel::kFloor>), HEXIR_WIDENED(kRound, unary<Kernel::kRound>),
    HEXIR_WIDENED_KEY(kEqual, compare<Kernel::kEqual, kCastF32>),
    HEXIR_WIDENED_KEY(kLess, compare<Kernel::kLess, kCastF32>),
    HEXIR_WIDENED_KEY(kGreater, compare<Kernel::kGreater, kCastF32>),
    HEXIR_WIDENED_KEY(kLessOrEqual, compare<Kernel::kLessOrEqual, kCastF32>),
    HEXIR_WIDENED_KEY(kGreaterOrEqual, compare<Kernel::kGreaterOrEqual, kCastF32>),
    HEXIR_WIDENED(kMatmul, matmul),
    HEXIR_WIDENED(kConv2d, conv2d), HEXIR_WIDENED(kSeparableConv2d, separable_conv2d),
    HEXIR_WIDENED(kConvTranspose, conv_transpose), HEXIR_WIDENED(kMaxPool, pool2d),
    HEXIR_WIDENED(kAveragePool, pool2d), HEXIR_WIDENED(kResize, resize), HEXIR_WIDENED(kSoftmax, softmax),
    HEXIR_WIDENED(kLayernorm, layernorm), HEXIR_WIDENED(kReduceSum, reduce<kCastF32>),
    HEXIR_WIDENED(kReduceMean, reduce<kCastF32>), HEXIR_WIDENED(kReduceMax, reduce<kCastF32>),
    HEXIR_WIDENED_KEY(kArgMax, argmax<kCastF32>),
    // The reductions: every one on f32, those ONNX defines on integers on i32 and i64 (their rule).
    HEXIR_INT_REDUCE(kReduceSum),
    HEXIR_INT_REDUCE(kReduceMax),
    {OpId::kReduceMin, kF32, kF32, reduce<kCastF32>},
    HEXIR_INT_REDUCE(kReduceMin),
    {OpId::kReduceProd, kF32, kF32, reduce<kCastF32>},
    HEXIR_INT_REDUCE(kReduceProd),
    {OpId::kReduceL1, kF32, kF32, reduce<kCastF32>},
    HEXIR_INT_REDUCE(kReduceL1),
    {OpId::kReduceL2, kF32, kF32, reduce<kCastF32>},
    {OpId::kReduceLogSumExp, kF32, kF32, reduce<kCastF32>},
    {OpId::kReduceSumSquare, kF32, kF32, reduce<kCastF32>},
    HEXIR_INT_REDUCE(kReduceSumSquare),
    {OpId::kReduceLogSum, kF32, kF32, reduce<kCastF32>},
    // argmax, argmin: keyed by the operand; the result is always i64 (their rule).
    {OpId::kArgMax, kCastI32, kAnyDType, argmax<kCastI32>},
    {OpId::kArgMax, kCastI64, kAnyDType, argmax<kCastI64>},
    {OpId::kArgMin, kCastF32, kAnyDType, argmax<kCastF32>},
    {OpId::kArgMin, kCastI32, kAnyDType, argmax<kCastI32>},
    {OpId::kArgMin, kCastI64, kAnyDType, argmax<kCastI64>},
    {OpId::kLogSoftmax, kF32, kF32, log_softmax},
    {OpId::kHardmax, kF32, kF32, hardmax},
    // f16 and bf16 for the operators added after the first list (ops/widen.h).
    HEXIR_WIDENED(kSin, math<ops::MathFn::kSin>), HEXIR_WIDENED(kCos, math<ops::MathFn::kCos>),
    HEXIR_WIDENED(kTan, math<ops::MathFn::kTan>), HEXIR_WIDENED(kAsin, math<ops::MathFn::kAsin>),
    HEXIR_WIDENED(kAcos, math<ops::MathFn::kAcos>), HEXIR_WIDENED(kAtan, math<ops::MathFn::kAtan>),
    HEXIR_WIDENED(kSinh, math<ops::MathFn::kSinh>), HEXIR_WIDENED(kCosh, math<ops::MathFn::kCosh>),
    HEXIR_WIDENED(kAsinh, math<ops::MathFn::kAsinh>), HEXIR_WIDENED(kAcosh, math<ops::MathFn::kAcosh>),
    HEXIR_WIDENED(kAtanh, math<ops::MathFn::kAtanh>), HEXIR_WIDENED(kElu, math<ops::MathFn::kElu>),
    HEXIR_WIDENED(kSelu, math<ops::MathFn::kSelu>), HEXIR_WIDENED(kCelu, math<ops::MathFn::kCelu>),
    HEXIR_WIDENED(kMish, math<ops::MathFn::kMish>), HEXIR_WIDENED(kSoftsign, math<ops::MathFn::kSoftsign>),
    HEXIR_WIDENED(kThresholdedRelu, math<ops::MathFn::kThresholdedRelu>),
    HEXIR_WIDENED(kShrink, math<ops::MathFn::kShrink>), HEXIR_WIDENED_KEY(kIsInf, math<ops::MathFn::kIsInf>),
    HEXIR_WIDENED_KEY(kIsNaN, math<ops::MathFn::kIsNaN>), HEXIR_WIDENED(kPRelu, binary<Kernel::kPRelu>),
    HEXIR_WIDENED(kGroupNorm, group_norm), HEXIR_WIDENED(kLogSoftmax, log_softmax),
    HEXIR_WIDENED(kHardmax, hardmax), HEXIR_WIDENED(kReduceMin, reduce<kCastF32>),
    HEXIR_WIDENED(kReduceProd, reduce<kCastF32>), HEXIR_WIDENED(kReduceL1, reduce<kCastF32>),
    HEXIR_WIDENED(kReduceL2, reduce<kCastF32>), HEXIR_WIDENED(kReduceLogSumExp, reduce<kCastF32>),
    HEXIR_WIDENED(kReduceSumSquare, reduce<kCastF32>), HEXIR_WIDENED(kReduceLogSum, reduce<kCastF32>),
    HEXIR_WIDENED_KEY(kArgMin, argmax<kCastF32>),
    // top_k: keyed by x; values of x's dtype, i64 indices.
    {OpId::kTopK, kCastF32, kAnyDType, top_k<kCastF32>},
    {OpId::kTopK, kCastI32, kAnyDType, top_k<kCastI32>},
    {OpId::kTopK, kCastI64, kAnyDType, top_k<kCastI64>},
    // top_k (values half, indices i64) and cumsum on halves through the f32 kernels.
    HEXIR_WIDENED_KEY(kTopK, top_k<kCastF32>), HEXIR_WIDENED(kCumSum, cumsum<Kernel::kCumSumF32>),
    // Bounded dynamic shapes.
    {OpId::kNonZero, kAnyDType, kAnyDType, nonzero},
    {OpId::kNonMaxSuppression, kF32, kAnyDType, non_max_suppression},
    {OpId::kCompress, kAnyDType, kAnyDType, compress},
    {OpId::kCompact, kAnyDType, kAnyDType, compact},
    {OpId::kBound, kAnyDType, kAnyDType, bound},
    {OpId::kUnbound, kAnyDType, kAnyDType, copy},  // the stored bytes (ops' CopyPlan)
};

#undef HEXIR_CAST_FROM
#undef HEXIR_WIDENED
#undef HEXIR_WIDENED_KEY
#undef HEXIR_INT_BINARY
#undef HEXIR_INT_UNARY
#undef HEXIR_INT_REDUCE

}  // namespace

LaunchConfig linear_config(int64_t n) {
  LaunchConfig c;
  const int64_t blocks = (n + kElementwiseBlock - 1) / kElementwiseBlock;
  c.grid[0] = static_cast<uint32_t>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 20));
  c.block[0] = kElementwiseBlock;
  return c;
}

CudaKernelFn find_cuda_kernel(const ops::KernelKey& key) {
  return find_kernel(std::span<const KernelEntry<CudaKernelFn>>(kKernels), key);
}

Result<uintptr_t> resolve_cuda_kernel(const ops::KernelKey& key) {
  const CudaKernelFn fn = find_cuda_kernel(key);
  if (fn == nullptr) return no_kernel("cuda", key);
  return reinterpret_cast<uintptr_t>(fn);
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
