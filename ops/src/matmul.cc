// Contractions: matmul (numpy semantics), with an optional bias and fused
// epilogue; attention over a prefix of its keys.
#include <algorithm>
#include <cmath>
#include <utility>

#include "util.h"

namespace hexir::ops::internal {

using enum OpId;

namespace {

// Parameters: none, or [transpose_b] then the epilogue's words:
// [transpose_b, activation, alpha, beta].
Result<std::vector<int64_t>> lower_matmul(std::span<const TensorType>, const AttrMap& attrs,
                                          std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(
      check_attr_names(kMatmul, attrs, {"transpose_b", "activation", "activation_alpha", "activation_beta"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t transpose_b, int_attr(kMatmul, attrs, "transpose_b", 0));
  if (transpose_b != 0 && transpose_b != 1)
    return invalid_argument(prefix(kMatmul) + "attribute 'transpose_b' must be 0 or 1");
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> words, lower_epilogue(kMatmul, attrs));
  if (words.empty() && transpose_b == 0) return words;
  words.insert(words.begin(), transpose_b);
  return words;
}

AttrMap raise_matmul(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs;
  if (!params.empty() && params[0] != 0) attrs["transpose_b"] = AttrValue{params[0]};
  raise_epilogue(params, 1, attrs);
  return attrs;
}

// 2 per multiply-add (2 * m * n * k), and one per output element for the bias.
uint64_t flops_matmul(std::span<const TensorType> in, std::span<const TensorType> out,
                      std::span<const int64_t>) {
  const uint64_t n = output_elements_sat(out);
  if (in.empty() || in[0].dims.empty()) return n;
  // The contracted dim is a's last (a 1-D a is promoted to [1, k]).
  const int64_t k = in[0].dims.back();
  return add_sat(mul_sat(mul_sat(n, 2), k > 0 ? static_cast<uint64_t>(k) : 0), in.size() > 2 ? n : 0);
}

bool transposes_b(std::span<const int64_t> params) { return !params.empty() && params[0] == 1; }

// The operands as matrices: 1-D operands promoted ([K] on the left is [1,K],
// on the right [K,1]); b as the [.., k, n] it stands for (its last two dims
// swapped when it is stored transposed).
void promoted(std::span<const TensorType> in, std::span<const int64_t> params, std::vector<int64_t>& a,
              std::vector<int64_t>& b) {
  a = in[0].dims;
  b = in[1].dims;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  if (transposes_b(params)) std::swap(b[b.size() - 1], b[b.size() - 2]);
}

// One b for every batch element and a's batch elements one after another
// (row m of one is where row 0 of the next would be): the batch is more rows
// of one GEMM. torch's attention projects [197, 1, 768] by [768, 2304]: 197
// one-row GEMMs before, 33 ms a ViT-B layer; one 197-row GEMM now.
void fold_batch_into_rows(MatmulPlan& p) {
  if (p.batch_count <= 1) return;
  for (int32_t i = 0; i < p.batch_rank; ++i)
    if (p.batch_dims[i] > 1 && (p.b_stride[i] != 0 || p.a_stride[i] == 0)) return;
  if (!p.a_uniform || p.a_batch_stride != p.m * p.lda) return;
  p.m *= p.batch_count;
  p.batch_count = 1;
  p.batch_rank = 0;
  p.a_batch_stride = p.b_batch_stride = 0;
}

Result<std::vector<TensorType>> infer_matmul(std::span<const TensorType> in,
                                             std::span<const int64_t> params) {
  if (!params.empty()) {
    if (params.size() != 1 && params.size() != 1 + kEpilogueWords)
      return invalid_argument(prefix(kMatmul) + "takes 0, 1 or " + std::to_string(1 + kEpilogueWords) +
                              " parameters (transpose_b, then an epilogue), got " + std::to_string(params.size()));
    if (params[0] != 0 && params[0] != 1)
      return invalid_argument(prefix(kMatmul) + "transpose_b is " + std::to_string(params[0]) + ", not 0 or 1");
    if (params.size() > 1) HEXIR_RETURN_IF_ERROR(check_epilogue(kMatmul, params.subspan(1)));
  }
  if (in[0].dims.empty() || in[1].dims.empty())
    return invalid_argument(prefix(kMatmul) + "operands must have rank >= 1");
  if (transposes_b(params) && in[1].rank() < 2)
    return invalid_argument(prefix(kMatmul) + "transpose_b needs b of rank >= 2, got " + in[1].to_string());
  // The bias runs along the columns of b: b must have them.
  const int64_t columns = transposes_b(params) ? in[1].dims[in[1].rank() - 2] : in[1].dims.back();
  if (in.size() == 3 && (in[1].rank() < 2 || in[2].rank() != 1 || in[2].dims[0] != columns))
    return invalid_argument(prefix(kMatmul) + "bias " + in[2].to_string() + " is not [" + std::to_string(columns) +
                            "] for b " + in[1].to_string() + " (b needs rank >= 2)");
  std::vector<int64_t> a, b;
  promoted(in, params, a, b);
  if (a.back() != b[b.size() - 2])
    return invalid_argument(prefix(kMatmul) + "contraction dims differ: " + shape_str(in[0].dims) + " x " +
                            shape_str(in[1].dims));
  auto batch = broadcast_shapes(std::span(a).first(a.size() - 2), std::span(b).first(b.size() - 2));
  if (!batch)
    return invalid_argument(prefix(kMatmul) + "batch dims of " + shape_str(in[0].dims) + " and " +
                            shape_str(in[1].dims) + " do not broadcast");
  TensorType out{in[0].dtype, *batch};
  if (in[0].dims.size() > 1) out.dims.push_back(a[a.size() - 2]);
  if (in[1].dims.size() > 1) out.dims.push_back(b.back());
  return one(std::move(out));
}

void plan_matmul(const PlanInput& op, OpPlan& out) {
  MatmulPlan& p = out.start<MatmulPlan>();
  std::vector<int64_t> a, b;
  promoted(op.inputs, op.params, a, b);
  p.b_transposed = transposes_b(op.params) ? 1 : 0;
  p.m = a[a.size() - 2];
  p.k = a.back();
  p.n = b.back();
  const size_t a_batch = a.size() - 2, b_batch = b.size() - 2;
  const size_t batch_rank = std::max(a_batch, b_batch);
  int64_t a_step = p.m * p.k, b_step = p.k * p.n;
  bool a_full = true, a_repeated = true, b_full = true, b_repeated = true;
  for (size_t i = batch_rank; i-- > 0;) {
    const int64_t ai = static_cast<int64_t>(i) - static_cast<int64_t>(batch_rank - a_batch);
    const int64_t bi = static_cast<int64_t>(i) - static_cast<int64_t>(batch_rank - b_batch);
    const int64_t ad = ai >= 0 ? a[static_cast<size_t>(ai)] : 1;
    const int64_t bd = bi >= 0 ? b[static_cast<size_t>(bi)] : 1;
    p.batch_dims[i] = (ad == 0 || bd == 0) ? 0 : std::max(ad, bd);
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
  p.batch_count = dims_product(std::span<const int64_t>(p.batch_dims, batch_rank), 0, batch_rank);
  p.a_uniform = a_full || a_repeated;
  p.b_uniform = b_full || b_repeated;
  p.a_batch_stride = a_full ? p.m * p.k : 0;
  p.b_batch_stride = b_full ? p.k * p.n : 0;
  p.lda = p.k;
  p.ldb = p.b_transposed ? p.k : p.n;
  // Strided views (docs/views.md; rank >= 2, last stride 1): their row
  // stride and batch strides; one batch stride when the batch dims line up.
  for (size_t operand = 0; operand < 2 && operand < op.input_strides.size(); ++operand) {
    const std::vector<int64_t>& strides = op.input_strides[operand];
    if (strides.empty()) continue;
    const size_t rank = strides.size(), own_batch = rank - 2;
    const auto& dims = op.inputs[operand].dims;
    (operand == 0 ? p.lda : p.ldb) = strides[rank - 2];
    int64_t* batch_stride = operand == 0 ? p.a_stride : p.b_stride;
    int64_t uniform_stride = -1, step = -1;
    bool uniform = true;
    for (size_t i = batch_rank; i-- > 0;) {
      const int64_t own = static_cast<int64_t>(i) - static_cast<int64_t>(batch_rank - own_batch);
      const int64_t d = own >= 0 ? dims[static_cast<size_t>(own)] : 1;
      batch_stride[i] = d == 1 ? 0 : strides[static_cast<size_t>(own)];
      if (p.batch_dims[i] <= 1) continue;
      if (step < 0) {
        uniform_stride = batch_stride[i];
        step = batch_stride[i] * p.batch_dims[i];
      } else if (batch_stride[i] == step) {
        step *= p.batch_dims[i];
      } else {
        uniform = false;
      }
    }
    (operand == 0 ? p.a_uniform : p.b_uniform) = uniform;
    (operand == 0 ? p.a_batch_stride : p.b_batch_stride) = uniform && uniform_stride > 0 ? uniform_stride : 0;
  }
  fold_batch_into_rows(p);
  p.has_bias = op.inputs.size() == 3;
  p.epilogue = plan_epilogue(op.params, 1);
}

// ---- attention ------------------------------------------------------------------

// [bits of scale, offset]: {scale = 0.125, offset = 1}.
Result<std::vector<int64_t>> lower_attention(std::span<const TensorType>, const AttrMap& attrs,
                                             std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kAttention, attrs, {"scale", "offset"}));
  HEXIR_ASSIGN_OR_RETURN(double scale, float_attr(kAttention, attrs, "scale", 1.0));
  HEXIR_ASSIGN_OR_RETURN(int64_t offset, int_attr(kAttention, attrs, "offset", 0));
  return std::vector<int64_t>{float_word(scale), offset};
}

AttrMap raise_attention(std::span<const TensorType>, std::span<const int64_t> params) {
  return {{"scale", AttrValue{float_param(param_at(params, 0))}}, {"offset", AttrValue{param_at(params, 1)}}};
}

constexpr int64_t kAttentionMaxOffset = int64_t{1} << 32;

Result<std::vector<TensorType>> infer_attention(std::span<const TensorType> in, std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kAttention, params, 2));
  const double scale = float_param(params[0]);
  if (!std::isfinite(scale) || std::fabs(scale) > 3.4e38)
    return invalid_argument(prefix(kAttention) + "scale must be a finite f32, got " + std::to_string(scale));
  if (params[1] <= -kAttentionMaxOffset || params[1] >= kAttentionMaxOffset)
    return invalid_argument(prefix(kAttention) + "offset " + std::to_string(params[1]) + " is out of range");
  const TensorType &q = in[0], &k = in[1], &v = in[2], &n = in[3];
  for (int i = 0; i < 3; ++i)
    if (in[static_cast<size_t>(i)].dtype != DType::kF32 || in[static_cast<size_t>(i)].rank() < 2)
      return invalid_argument(prefix(kAttention) + "operand " + std::to_string(i) + " is " +
                              in[static_cast<size_t>(i)].to_string() + ", expected f32 of rank >= 2");
  if (n.dtype != DType::kI64 || count_of(n) != 1)
    return invalid_argument(prefix(kAttention) + "the key count is " + n.to_string() + ", expected one i64");
  const size_t r = q.rank();
  if (k.rank() != r || v.rank() != r || !std::equal(q.dims.begin(), q.dims.end() - 2, k.dims.begin()) ||
      !std::equal(q.dims.begin(), q.dims.end() - 2, v.dims.begin()) || k.dims[r - 1] != q.dims[r - 1] ||
      v.dims[r - 2] != k.dims[r - 2])
    return invalid_argument(prefix(kAttention) + "q " + q.to_string() + ", k " + k.to_string() + " and v " +
                            v.to_string() + " are not [B.., M, D], [B.., T, D], [B.., T, E]");
  TensorType out = q;
  out.dims.back() = v.dims.back();
  return one(std::move(out));
}

// q k^T and the weights times v over every key (the bound a run reaches).
uint64_t flops_attention(std::span<const TensorType> in, std::span<const TensorType> out, std::span<const int64_t>) {
  if (in.size() < 3 || in[1].rank() < 2 || out.empty()) return 0;
  const uint64_t rows = tail_product_sat(out[0], 0) / std::max<uint64_t>(1, static_cast<uint64_t>(out[0].dims.back()));
  const int64_t t = in[1].dims[in[1].rank() - 2], d = in[1].dims.back(), e = in[2].dims.back();
  return mul_sat(mul_sat(rows, static_cast<uint64_t>(std::max<int64_t>(t, 0))),
                 static_cast<uint64_t>(std::max<int64_t>(2 * d + 2 * e + 4, 0)));
}

void fill_attention(const PlanInput& op, AttentionPlan& p) {
  const TensorType &q = op.inputs[0], &k = op.inputs[1], &v = op.inputs[2];
  const size_t r = q.rank();
  p.m = q.dims[r - 2];
  p.d = q.dims[r - 1];
  p.t = k.dims[r - 2];
  p.e = v.dims[r - 1];
  p.batch_rank = static_cast<int32_t>(r - 2);
  p.scale = static_cast<float>(float_param(op.params[0]));
  p.offset = op.params[1];
  p.batch_count = dims_product(q.dims, 0, r - 2);
  int64_t* strides[3] = {p.q_stride, p.k_stride, p.v_stride};
  int64_t* rows[3] = {&p.q_row, &p.k_row, &p.v_row};
  for (size_t operand = 0; operand < 3; ++operand) {
    const TensorType& t = op.inputs[operand];
    int64_t row_major[kMaxRank];
    row_major_strides(t.dims, row_major);
    const bool strided = operand < op.input_strides.size() && !op.input_strides[operand].empty();
    const int64_t* s = strided ? op.input_strides[operand].data() : row_major;
    *rows[operand] = s[r - 2];
    for (size_t i = 0; i + 2 < r; ++i) strides[operand][i] = s[i];
  }
  for (size_t i = 0; i + 2 < r; ++i) p.batch_dims[i] = q.dims[i];
}

void plan_attention(const PlanInput& op, OpPlan& out) { fill_attention(op, out.start<AttentionPlan>()); }

uint64_t workspace_attention(const PlanInput& op) {
  AttentionPlan p{};
  fill_attention(op, p);
  return mul_sat(mul_sat(static_cast<uint64_t>(p.batch_count), static_cast<uint64_t>(p.m)),
                 mul_sat(static_cast<uint64_t>(p.t), sizeof(float)));
}

template <OpId kId>
Result<std::vector<int64_t>> no_attributes_of(std::span<const TensorType>, const AttrMap& attrs,
                                              std::span<const TensorType>) {
  return no_attributes(kId, attrs);
}

// ---- quantized_matmul ------------------------------------------------------------

Result<std::vector<TensorType>> infer_quantized_matmul(std::span<const TensorType> in,
                                                       std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kQuantizedMatmul, params, 0));
  const TensorType &a = in[0], &w = in[1], &scale = in[2];
  if (a.dtype != DType::kF32 || a.rank() < 1 || w.dtype != DType::kI8 || w.rank() != 2 ||
      w.dims[1] != a.dims.back() || scale.dtype != DType::kF32 || scale.dims != std::vector<int64_t>{w.dims[0]} ||
      (in.size() == 4 && (in[3].dtype != DType::kF32 || in[3].dims != scale.dims)))
    return invalid_argument(prefix(kQuantizedMatmul) + "a " + a.to_string() + ", w " + w.to_string() + ", scale " +
                            scale.to_string() + (in.size() == 4 ? ", bias " + in[3].to_string() : std::string()) +
                            " are not f32[.., K], i8[N, K], f32[N] (and f32[N])");
  TensorType out = a;
  out.dims.back() = w.dims[0];
  return one(std::move(out));
}

uint64_t flops_quantized_matmul(std::span<const TensorType> in, std::span<const TensorType> out,
                                std::span<const int64_t>) {
  if (in.empty() || in[0].dims.empty()) return 0;
  const int64_t k = in[0].dims.back();
  return mul_sat(mul_sat(output_elements_sat(out), 2), k > 0 ? static_cast<uint64_t>(k) : 0);
}

void plan_quantized_matmul(const PlanInput& op, OpPlan& out) {
  QuantizedMatmulPlan& p = out.start<QuantizedMatmulPlan>();
  p.k = op.inputs[0].dims.back();
  p.n = op.inputs[1].dims[0];
  p.m = p.k > 0 ? count_of(op.inputs[0]) / p.k : 0;
  p.has_bias = op.inputs.size() == 4 ? 1 : 0;
}

// ---- int4_matmul -----------------------------------------------------------------

Result<std::vector<TensorType>> infer_int4_matmul(std::span<const TensorType> in, std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kInt4Matmul, params, 0));
  const TensorType &a = in[0], &w = in[1], &scale = in[2];
  const int64_t k = a.rank() >= 1 ? a.dims.back() : -1;
  const bool shapes = a.dtype == DType::kF32 && a.rank() >= 1 && k % kInt4Block == 0 && w.dtype == DType::kU8 &&
                      w.rank() == 2 && w.dims[1] * 2 == k && scale.dtype == DType::kF16 && scale.rank() == 2 &&
                      scale.dims[0] == w.dims[0] && scale.dims[1] > 0 && k % scale.dims[1] == 0 &&
                      (k / scale.dims[1]) % kInt4Block == 0 &&
                      (in.size() < 4 || (in[3].dtype == DType::kF32 && in[3].dims == std::vector<int64_t>{w.dims[0]}));
  if (!shapes)
    return invalid_argument(prefix(kInt4Matmul) + "a " + a.to_string() + ", w " + w.to_string() + ", scale " +
                            scale.to_string() + (in.size() == 4 ? ", bias " + in[3].to_string() : std::string()) +
                            " are not f32[.., K], u8[N, K/2], f16[N, K/G] (and f32[N]) with K a multiple of G, G of 32");
  TensorType out = a;
  out.dims.back() = w.dims[0];
  return one(std::move(out));
}

void plan_int4_matmul(const PlanInput& op, OpPlan& out) {
  Int4MatmulPlan& p = out.start<Int4MatmulPlan>();
  p.k = op.inputs[0].dims.back();
  p.n = op.inputs[1].dims[0];
  p.m = p.k > 0 ? count_of(op.inputs[0]) / p.k : 0;
  p.group = p.k / op.inputs[2].dims[1];
  p.has_bias = op.inputs.size() == 4 ? 1 : 0;
}

// ---- dequantize_int4 -------------------------------------------------------------

Result<std::vector<TensorType>> infer_dequantize_int4(std::span<const TensorType> in, std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kDequantizeInt4, params, 0));
  const TensorType &w = in[0], &scale = in[1];
  const bool shapes = w.dtype == DType::kU8 && w.rank() >= 1 && scale.dtype == DType::kF16 &&
                      scale.rank() == w.rank() &&
                      std::equal(w.dims.begin(), w.dims.end() - 1, scale.dims.begin()) && scale.dims.back() > 0 &&
                      (2 * w.dims.back()) % scale.dims.back() == 0 &&
                      (2 * w.dims.back() / scale.dims.back()) % kInt4Block == 0;
  if (!shapes)
    return invalid_argument(prefix(kDequantizeInt4) + "w " + w.to_string() + ", scale " + scale.to_string() +
                            " are not u8[.., K/2], f16[.., K/G] with K a multiple of G, G of 32");
  TensorType out{DType::kF32, w.dims};
  out.dims.back() *= 2;
  return one(std::move(out));
}

void plan_dequantize_int4(const PlanInput& op, OpPlan& out) {
  DequantizeInt4Plan& p = out.start<DequantizeInt4Plan>();
  p.k = op.inputs[0].dims.back() * 2;
  p.rows = p.k > 0 ? count_of(op.inputs[0]) * 2 / p.k : 0;
  p.group = p.k / op.inputs[1].dims.back();
}

// ---- integer_matmul ---------------------------------------------------------------

Result<std::vector<TensorType>> infer_integer_matmul(std::span<const TensorType> in, std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kIntegerMatmul, params, 0));
  const TensorType &a = in[0], &w = in[1], &zero = in[2];
  if (a.dtype != DType::kU8 || a.rank() < 1 || w.dtype != DType::kI8 || w.rank() != 2 || w.dims[1] != a.dims.back() ||
      zero.dtype != DType::kU8 || count_of(zero) != 1)
    return invalid_argument(prefix(kIntegerMatmul) + "a " + a.to_string() + ", w " + w.to_string() + ", a_zero " +
                            zero.to_string() + " are not u8[.., K], i8[N, K], one u8");
  if (w.dims[1] > kIntegerMatmulMaxK)
    return invalid_argument(prefix(kIntegerMatmul) + "K " + std::to_string(w.dims[1]) + " is over " +
                            std::to_string(kIntegerMatmulMaxK) + " (int32 sums would overflow)");
  TensorType out{DType::kI32, a.dims};
  out.dims.back() = w.dims[0];
  return one(std::move(out));
}

void plan_integer_matmul(const PlanInput& op, OpPlan& out) {
  IntegerMatmulPlan& p = out.start<IntegerMatmulPlan>();
  p.k = op.inputs[0].dims.back();
  p.n = op.inputs[1].dims[0];
  p.m = p.k > 0 ? count_of(op.inputs[0]) / p.k : 0;
}

constexpr OpDef kDefs[] = {
    {kMatmul, "matmul", 2, 3, 1, 1, true, false, false, 0, lower_matmul, raise_matmul, infer_matmul,
     flops_matmul, nullptr, plan_matmul},
    {kAttention, "attention", 4, 4, 1, 1, false, false, false, 0, lower_attention, raise_attention,
     infer_attention, flops_attention, workspace_attention, plan_attention},
    {kQuantizedMatmul, "quantized_matmul", 3, 4, 1, 1, false, false, false, 0, no_attributes_of<kQuantizedMatmul>,
     raise_none, infer_quantized_matmul, flops_quantized_matmul, nullptr, plan_quantized_matmul},
    {kInt4Matmul, "int4_matmul", 3, 4, 1, 1, false, false, false, 0, no_attributes_of<kInt4Matmul>, raise_none,
     infer_int4_matmul, flops_quantized_matmul, nullptr, plan_int4_matmul},
    {kDequantizeInt4, "dequantize_int4", 2, 2, 1, 1, false, false, false, 0, no_attributes_of<kDequantizeInt4>,
     raise_none, infer_dequantize_int4, flops_per_element, nullptr, plan_dequantize_int4},
    {kIntegerMatmul, "integer_matmul", 3, 3, 1, 1, false, false, false, 0, no_attributes_of<kIntegerMatmul>,
     raise_none, infer_integer_matmul, flops_quantized_matmul, nullptr, plan_integer_matmul},
};

}  // namespace

std::span<const OpDef> matmul_ops() { return kDefs; }

}  // namespace hexir::ops::internal
