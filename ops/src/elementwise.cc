// Elementwise operators: binary with numpy broadcasting, unary maps, where, cast.
#include <array>
#include <cmath>
#include <limits>

#include "hexir/ops/widen.h"
#include "util.h"

namespace hexir::ops::internal {
namespace {

using enum OpId;

// ---- binary -----------------------------------------------------------------

template <OpId kId>
Result<std::vector<int64_t>> lower_none(std::span<const TensorType>, const AttrMap& attrs,
                                        std::span<const TensorType>) {
  return no_attributes(kId, attrs);
}

bool arithmetic(DType t) { return is_float(t) || t == DType::kI32 || t == DType::kI64; }

// Both operands f32 (or f16, bf16), i32 or i64, of one dtype.
Status check_arithmetic(OpId id, std::span<const TensorType> in) {
  for (const TensorType& t : in)
    if (!arithmetic(t.dtype) || t.dtype != in[0].dtype) {
      std::string operands;
      for (const TensorType& u : in) operands += (operands.empty() ? "" : " and ") + u.to_string();
      return invalid_argument(prefix(id) + "operands are " + operands + "; " +
                              (in.size() > 1 ? "both must be f32, f16, bf16, i32 or i64, of one dtype"
                                             : "it must be f32, f16, bf16, i32 or i64"));
    }
  return ok_status();
}

template <OpId kId>
Result<std::vector<TensorType>> infer_binary(std::span<const TensorType> in,
                                             std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_arithmetic(kId, in));
  // add and mul may carry a fused epilogue (the residual add + relu of a
  // convnet; a scalar mul and add after them as an affine map), on f32.
  if ((kId == kAdd || kId == kMul) && params.size() == kEpilogueWords) {
    if (!is_float(in[0].dtype))
      return invalid_argument(prefix(kId) + "a fused epilogue needs float operands, not " + in[0].to_string());
    HEXIR_RETURN_IF_ERROR(check_epilogue(kId, params));
  } else {
    HEXIR_RETURN_IF_ERROR(check_param_count(kId, params, 0));
  }
  auto dims = broadcast_shapes(in[0].dims, in[1].dims);
  if (!dims)
    return invalid_argument(prefix(kId) + "shapes " + shape_str(in[0].dims) + " and " +
                            shape_str(in[1].dims) + " do not broadcast");
  return one({in[0].dtype, *dims});
}

bool comparable(DType t) { return is_float(t) || t == DType::kI32 || t == DType::kI64; }

// equal, less, greater: one dtype on both sides, a bool result.
template <OpId kId>
Result<std::vector<TensorType>> infer_compare(std::span<const TensorType> in,
                                              std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kId, params, 0));
  if (in[0].dtype != in[1].dtype || !comparable(in[0].dtype))
    return invalid_argument(prefix(kId) + "operands are " + in[0].to_string() + " and " + in[1].to_string() +
                            "; both must be f32, f16, bf16, i32 or i64, of one dtype");
  auto dims = broadcast_shapes(in[0].dims, in[1].dims);
  if (!dims)
    return invalid_argument(prefix(kId) + "shapes " + shape_str(in[0].dims) + " and " +
                            shape_str(in[1].dims) + " do not broadcast");
  return one({DType::kBool, *dims});
}

// and, or, xor: two bool operands, a bool result.
template <OpId kId>
Result<std::vector<TensorType>> infer_logical(std::span<const TensorType> in,
                                              std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kId, params, 0));
  if (in[0].dtype != DType::kBool || in[1].dtype != DType::kBool)
    return invalid_argument(prefix(kId) + "operands are " + in[0].to_string() + " and " + in[1].to_string() +
                            "; both must be bool");
  auto dims = broadcast_shapes(in[0].dims, in[1].dims);
  if (!dims)
    return invalid_argument(prefix(kId) + "shapes " + shape_str(in[0].dims) + " and " +
                            shape_str(in[1].dims) + " do not broadcast");
  return one({DType::kBool, *dims});
}

// mod: [fmod] (ONNX's attribute, 0 by default); fmod 0 on integers only.
Result<std::vector<int64_t>> lower_mod(std::span<const TensorType>, const AttrMap& attrs,
                                       std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kMod, attrs, {"fmod"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t fmod, int_attr(kMod, attrs, "fmod", 0));
  return std::vector<int64_t>{fmod};
}

AttrMap raise_mod(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs;
  if (!params.empty() && params[0] != 0) attrs["fmod"] = AttrValue{params[0]};
  return attrs;
}

Result<std::vector<TensorType>> infer_mod(std::span<const TensorType> in, std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kMod, params, 1));
  if (params[0] != 0 && params[0] != 1)
    return invalid_argument(prefix(kMod) + "fmod parameter must be 0 or 1, not " + std::to_string(params[0]));
  HEXIR_RETURN_IF_ERROR(check_arithmetic(kMod, in));
  if (is_float(in[0].dtype) && params[0] == 0)
    return invalid_argument(prefix(kMod) + in[0].to_string() + " operands need fmod = 1 (ONNX Mod)");
  auto dims = broadcast_shapes(in[0].dims, in[1].dims);
  if (!dims)
    return invalid_argument(prefix(kMod) + "shapes " + shape_str(in[0].dims) + " and " +
                            shape_str(in[1].dims) + " do not broadcast");
  return one({in[0].dtype, *dims});
}

// Merges the output dims of a broadcast over `count` operands: size-1 dims
// dropped, neighbours whose strides all line up fused. Returns the rank.
int32_t merge_broadcast(std::span<const int64_t> out_dims, std::span<const int64_t* const> operand_strides,
                        int64_t* dims, std::span<int64_t* const> merged_strides) {
  int32_t merged = 0;
  for (size_t i = 0; i < out_dims.size(); ++i) {
    const int64_t d = out_dims[i];
    if (d == 1) continue;
    bool fuse = merged > 0;
    for (size_t k = 0; fuse && k < operand_strides.size(); ++k)
      fuse = merged_strides[k][merged - 1] == operand_strides[k][i] * d;
    if (fuse) {
      dims[merged - 1] *= d;
      for (size_t k = 0; k < operand_strides.size(); ++k)
        merged_strides[k][merged - 1] = operand_strides[k][i];
      continue;
    }
    dims[merged] = d;
    for (size_t k = 0; k < operand_strides.size(); ++k) merged_strides[k][merged] = operand_strides[k][i];
    ++merged;
  }
  return merged;
}

template <OpId kId>
Result<std::vector<int64_t>> lower_with_epilogue(std::span<const TensorType>, const AttrMap& attrs,
                                                 std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kId, attrs, {"activation", "activation_alpha", "activation_beta"}));
  return lower_epilogue(kId, attrs);
}

AttrMap raise_with_epilogue(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs;
  raise_epilogue(params, 0, attrs);
  return attrs;
}

// broadcast_strides of an operand that may be a strided view (`view`
// empty: row-major): its own strides right-aligned, 0 where broadcast.
void view_broadcast_strides(std::span<const int64_t> dims, std::span<const int64_t> view, size_t out_rank,
                            int64_t* strides) {
  if (view.empty()) return broadcast_strides(dims, out_rank, strides);
  const size_t lead = out_rank - dims.size();
  for (size_t i = 0; i < out_rank; ++i)
    strides[i] = i < lead || dims[i - lead] == 1 ? 0 : view[i - lead];
}

// The broadcast geometry (and add's and mul's epilogue; none for mod's one word).
BinaryPlan& start_binary_plan(const PlanInput& op, OpPlan& out) {
  BinaryPlan& p = out.start<BinaryPlan>();
  p.epilogue = plan_epilogue(op.params, 0);
  const TensorType& result = op.outputs[0];
  p.n = count_of(result);
  const int64_t na = count_of(op.inputs[0]), nb = count_of(op.inputs[1]);
  if (!op.input_strides.empty()) {  // a strided view: the general walk, by its strides
    int64_t sa[kMaxRank], sb[kMaxRank];
    view_broadcast_strides(op.inputs[0].dims, op.input_strides[0], result.rank(), sa);
    view_broadcast_strides(op.inputs[1].dims, op.input_strides[1], result.rank(), sb);
    const int64_t* strides[] = {sa, sb};
    int64_t* merged[] = {p.stride_a, p.stride_b};
    p.rank = merge_broadcast(result.dims, strides, p.dims, merged);
    p.mode = p.rank == 0 ? 4 : 3;
  } else if (na == p.n && nb == p.n) {
    p.mode = 0;
  } else if (na == p.n && nb == 1) {
    p.mode = 1;
  } else if (na == 1 && nb == p.n) {
    p.mode = 2;
  } else {
    int64_t sa[kMaxRank], sb[kMaxRank];
    broadcast_strides(op.inputs[0].dims, result.rank(), sa);
    broadcast_strides(op.inputs[1].dims, result.rank(), sb);
    const int64_t* strides[] = {sa, sb};
    int64_t* merged[] = {p.stride_a, p.stride_b};
    p.rank = merge_broadcast(result.dims, strides, p.dims, merged);
    p.mode = p.rank == 0 ? 4 : 3;
  }
  return p;
}

void plan_binary(const PlanInput& op, OpPlan& out) { start_binary_plan(op, out); }

// The binary plan with mod's fmod word as its variant.
void plan_mod(const PlanInput& op, OpPlan& out) {
  start_binary_plan(op, out).variant = static_cast<int32_t>(op.params[0]);
}

// ---- unary ------------------------------------------------------------------

template <OpId kId>
Result<std::vector<TensorType>> infer_unary(std::span<const TensorType> in, std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kId, params, 0));
  return one(in[0]);
}

// A strided input (a view): the walk by its strides; else rank 0, the flat loop.
// Size-1 dims are dropped and neighbours whose strides line up merged, so a
// transpose that keeps the last dims walks rows as long as they are (a video
// ResNet's [1, 64, 8, 56, 56] had rows of 56, the kernels' per-row cost).
void plan_unary_strides(const PlanInput& op, UnaryPlan& p) {
  if (op.input_strides.empty() || op.input_strides[0].empty()) return;
  const TensorType& x = op.inputs[0];
  p.rank = 0;
  for (size_t d = 0; d < x.rank(); ++d) {
    const int64_t dim = x.dims[d], stride = op.input_strides[0][d];
    if (dim == 1) continue;
    if (p.rank > 0 && p.stride[p.rank - 1] == stride * dim) {
      p.dims[p.rank - 1] *= dim;
      p.stride[p.rank - 1] = stride;
      continue;
    }
    p.dims[p.rank] = dim;
    p.stride[p.rank] = stride;
    ++p.rank;
  }
  if (p.rank == 0) p.rank = 1, p.dims[0] = 1, p.stride[0] = 1;
}

// neg, abs, sign: f32, i32 or i64.
template <OpId kId>
Result<std::vector<TensorType>> infer_unary_arithmetic(std::span<const TensorType> in,
                                                       std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kId, params, 0));
  HEXIR_RETURN_IF_ERROR(check_arithmetic(kId, in));
  return one(in[0]);
}

void plan_unary(const PlanInput& op, OpPlan& out) {
  UnaryPlan& p = out.start<UnaryPlan>();
  p.n = count_of(op.outputs[0]);
  p.variant = op.params.empty() ? 0 : static_cast<int32_t>(op.params[0]);
  plan_unary_strides(op, p);
}

Result<std::vector<int64_t>> lower_gelu(std::span<const TensorType>, const AttrMap& attrs,
                                        std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kGelu, attrs, {"approximate"}));
  const AttrValue* v = find_attr(attrs, "approximate");
  if (!v) return std::vector<int64_t>{0};
  auto* s = std::get_if<std::string>(&v->value);
  if (!s || (*s != "none" && *s != "tanh" && *s != "erf"))
    return invalid_argument(prefix(kGelu) + "attribute 'approximate' must be \"none\" or \"tanh\"");
  return std::vector<int64_t>{*s == "tanh" ? 1 : 0};
}

AttrMap raise_gelu(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs;
  if (!params.empty() && params[0] == 1) attrs["approximate"] = AttrValue{std::string("tanh")};
  return attrs;
}

Result<std::vector<TensorType>> infer_gelu(std::span<const TensorType> in, std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kGelu, params, 1));
  if (params[0] != 0 && params[0] != 1)
    return invalid_argument(prefix(kGelu) + "approximate parameter must be 0 or 1");
  return one(in[0]);
}

Result<std::vector<TensorType>> infer_not(std::span<const TensorType> in, std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kNot, params, 0));
  if (in[0].dtype != DType::kBool)
    return invalid_argument(prefix(kNot) + "operand is " + in[0].to_string() + ", expected bool");
  return one(in[0]);
}

// ---- unary with float parameters ------------------------------------------------

// A float attribute as a parameter word: finite unless `infinite_ok`, never NaN.
Result<int64_t> float_param_attr(OpId id, const AttrMap& attrs, std::string_view name, double fallback,
                                 bool infinite_ok = false) {
  HEXIR_ASSIGN_OR_RETURN(double v, float_attr(id, attrs, name, fallback));
  if (std::isnan(v) || (!infinite_ok && std::isinf(v)))
    return invalid_argument(prefix(id) + "attribute '" + std::string(name) + "' must be a " +
                            (infinite_ok ? "number, not NaN" : "finite number"));
  return float_word(v);
}

Result<std::vector<int64_t>> lower_leaky_relu(std::span<const TensorType>, const AttrMap& attrs,
                                              std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kLeakyRelu, attrs, {"alpha"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t alpha, float_param_attr(kLeakyRelu, attrs, "alpha", 0.01));
  return std::vector<int64_t>{alpha};
}

// ONNX Clip's min and max (inputs there; attributes here): absent is unbounded.
Result<std::vector<int64_t>> lower_clip(std::span<const TensorType>, const AttrMap& attrs,
                                        std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kClip, attrs, {"min", "max"}));
  constexpr double kInf = std::numeric_limits<double>::infinity();
  HEXIR_ASSIGN_OR_RETURN(int64_t lo, float_param_attr(kClip, attrs, "min", -kInf, true));
  HEXIR_ASSIGN_OR_RETURN(int64_t hi, float_param_attr(kClip, attrs, "max", kInf, true));
  return std::vector<int64_t>{lo, hi};
}

Result<std::vector<int64_t>> lower_hard_sigmoid(std::span<const TensorType>, const AttrMap& attrs,
                                                std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kHardSigmoid, attrs, {"alpha", "beta"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t alpha, float_param_attr(kHardSigmoid, attrs, "alpha", 0.2));
  HEXIR_ASSIGN_OR_RETURN(int64_t beta, float_param_attr(kHardSigmoid, attrs, "beta", 0.5));
  return std::vector<int64_t>{alpha, beta};
}

// The inverse of the three above: the float words as the attributes `kNames`
// (absent words read as 0); an infinite one is left out (clip: unbounded).
template <const char* const* kNames, size_t kCount>
AttrMap raise_floats(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs;
  for (size_t i = 0; i < kCount; ++i) {
    const double v = float_param(i < params.size() ? params[i] : 0);
    if (!std::isinf(v)) attrs[kNames[i]] = AttrValue{v};
  }
  return attrs;
}
constexpr const char* kLeakyReluNames[] = {"alpha"};
constexpr const char* kClipNames[] = {"min", "max"};
constexpr const char* kHardSigmoidNames[] = {"alpha", "beta"};

// `count` words, each the bits of a double: never NaN, finite unless `infinite_ok`.
template <OpId kId, size_t kCount, bool kInfiniteOk>
Result<std::vector<TensorType>> infer_unary_floats(std::span<const TensorType> in,
                                                   std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kId, params, kCount));
  for (int64_t word : params) {
    const double v = float_param(word);
    if (std::isnan(v) || (!kInfiniteOk && std::isinf(v)))
      return invalid_argument(prefix(kId) + "parameter " + std::to_string(v) + " must be " +
                              (kInfiniteOk ? "a number, not NaN" : "finite"));
  }
  return one(in[0]);
}

void plan_unary_floats(const PlanInput& op, OpPlan& out) {
  UnaryPlan& p = out.start<UnaryPlan>();
  p.n = count_of(op.outputs[0]);
  if (op.params.size() > 0) p.a = float_param(op.params[0]);
  if (op.params.size() > 1) p.b = float_param(op.params[1]);
  plan_unary_strides(op, p);
}

// The ONNX activations with float attributes (elu .. shrink): each
// attribute of `kNames`, its default from `kDefaults`, one finite word each.
template <OpId kId, const char* const* kNames, const double* kDefaults, size_t kCount>
Result<std::vector<int64_t>> lower_floats(std::span<const TensorType>, const AttrMap& attrs,
                                          std::span<const TensorType>) {
  static_assert(kCount == 1 || kCount == 2);
  if constexpr (kCount == 1) {
    HEXIR_RETURN_IF_ERROR(check_attr_names(kId, attrs, {kNames[0]}));
  } else {
    HEXIR_RETURN_IF_ERROR((check_attr_names(kId, attrs, {kNames[0], kNames[1]})));
  }
  std::vector<int64_t> words;
  for (size_t i = 0; i < kCount; ++i) {
    HEXIR_ASSIGN_OR_RETURN(int64_t word, float_param_attr(kId, attrs, kNames[i], kDefaults[i]));
    words.push_back(word);
  }
  return words;
}
constexpr const char* kAlphaNames[] = {"alpha"};
constexpr const char* kSeluNames[] = {"alpha", "gamma"};
constexpr const char* kShrinkNames[] = {"lambd", "bias"};
constexpr double kEluDefaults[] = {1.0};
constexpr double kSeluDefaults[] = {1.67326319217681884765625, 1.05070102214813232421875};  // ONNX's floats
constexpr double kThresholdedReluDefaults[] = {1.0};
constexpr double kShrinkDefaults[] = {0.5, 0.0};

// celu divides by alpha: not 0.
Result<std::vector<TensorType>> infer_celu(std::span<const TensorType> in, std::span<const int64_t> params) {
  HEXIR_ASSIGN_OR_RETURN(std::vector<TensorType> result, (infer_unary_floats<kCelu, 1, false>(in, params)));
  if (float_param(params[0]) == 0.0) return invalid_argument(prefix(kCelu) + "alpha must not be 0");
  return result;
}

// is_inf: [detect_positive, detect_negative], each 0 or 1 (ONNX's defaults 1).
Result<std::vector<int64_t>> lower_is_inf(std::span<const TensorType>, const AttrMap& attrs,
                                          std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kIsInf, attrs, {"detect_positive", "detect_negative"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t positive, int_attr(kIsInf, attrs, "detect_positive", 1));
  HEXIR_ASSIGN_OR_RETURN(int64_t negative, int_attr(kIsInf, attrs, "detect_negative", 1));
  return std::vector<int64_t>{positive, negative};
}

AttrMap raise_is_inf(std::span<const TensorType>, std::span<const int64_t> params) {
  return {{"detect_positive", AttrValue{param_at(params, 0)}}, {"detect_negative", AttrValue{param_at(params, 1)}}};
}

// is_inf, is_nan: f32 to bool (OpDef::f32_only checks the operand).
template <OpId kId>
Result<std::vector<TensorType>> infer_float_class(std::span<const TensorType> in,
                                                  std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kId, params, kId == kIsInf ? 2 : 0));
  for (int64_t flag : params)
    if (flag != 0 && flag != 1)
      return invalid_argument(prefix(kId) + "detect_positive and detect_negative must be 0 or 1, not " +
                              std::to_string(flag));
  return one({DType::kBool, in[0].dims});
}

// The detect flags as the plan's floats a, b (MathFn::kIsInf).
void plan_float_class(const PlanInput& op, OpPlan& out) {
  UnaryPlan& p = out.start<UnaryPlan>();
  p.n = count_of(op.outputs[0]);
  if (op.params.size() == 2) {
    p.a = static_cast<double>(op.params[0]);
    p.b = static_cast<double>(op.params[1]);
  }
  plan_unary_strides(op, p);
}

// ---- where ------------------------------------------------------------------

Result<std::vector<TensorType>> infer_where(std::span<const TensorType> in, std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kWhere, params, 0));
  if (in[0].dtype != DType::kBool)
    return invalid_argument(prefix(kWhere) + "condition is " + in[0].to_string() + ", expected bool");
  if (in[1].dtype != in[2].dtype)
    return invalid_argument(prefix(kWhere) + "x is " + in[1].to_string() + " but y is " + in[2].to_string() +
                            "; they must have one dtype");
  auto xy = broadcast_shapes(in[1].dims, in[2].dims);
  auto all = xy ? broadcast_shapes(in[0].dims, *xy) : std::nullopt;
  if (!all)
    return invalid_argument(prefix(kWhere) + "shapes " + shape_str(in[0].dims) + ", " +
                            shape_str(in[1].dims) + " and " + shape_str(in[2].dims) + " do not broadcast");
  return one({in[1].dtype, *all});
}

void plan_where(const PlanInput& op, OpPlan& out) {
  WherePlan& p = out.start<WherePlan>();
  const TensorType& result = op.outputs[0];
  p.n = count_of(result);
  p.element_size = static_cast<int32_t>(dtype_size(result.dtype));
  bool flat = true;
  for (const TensorType& t : op.inputs) flat = flat && count_of(t) == p.n;
  if (flat) return;  // rank 0: one flat loop
  int64_t sc[kMaxRank], sx[kMaxRank], sy[kMaxRank];
  broadcast_strides(op.inputs[0].dims, result.rank(), sc);
  broadcast_strides(op.inputs[1].dims, result.rank(), sx);
  broadcast_strides(op.inputs[2].dims, result.rank(), sy);
  const int64_t* strides[] = {sc, sx, sy};
  int64_t* merged[] = {p.stride_c, p.stride_x, p.stride_y};
  p.rank = merge_broadcast(result.dims, strides, p.dims, merged);
  if (p.rank == 0) {  // all dims 1, but counts differ only when n is 0 or 1: one element
    p.rank = 1;
    p.dims[0] = p.n;
  }
}

// ---- cast -------------------------------------------------------------------

bool castable(DType t) {
  return is_float(t) || t == DType::kI32 || t == DType::kI64 || t == DType::kBool || t == DType::kU8;
}

Result<std::vector<int64_t>> lower_cast(std::span<const TensorType>, const AttrMap& attrs,
                                        std::span<const TensorType> declared) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kCast, attrs, {"to"}));
  const AttrValue* v = find_attr(attrs, "to");
  std::optional<DType> to;
  if (v) {
    auto* s = std::get_if<std::string>(&v->value);
    if (!s || !(to = parse_dtype(*s)))
      return invalid_argument(prefix(kCast) + "attribute 'to' must name a dtype, like \"i64\"");
  } else if (declared.size() == 1) {
    to = declared[0].dtype;  // the stated result type says it
  } else {
    return invalid_argument(prefix(kCast) + "needs attribute 'to' (the target dtype)");
  }
  return std::vector<int64_t>{static_cast<int64_t>(*to)};
}

AttrMap raise_cast(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs;
  const int64_t to = params.empty() ? 0 : params[0];
  if (dtype_is_valid(static_cast<uint8_t>(to)))
    attrs["to"] = AttrValue{std::string(dtype_name(static_cast<DType>(to)))};
  return attrs;
}

Result<std::vector<TensorType>> infer_cast(std::span<const TensorType> in, std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kCast, params, 1));
  if (params[0] < 0 || params[0] >= kDTypeCount || !castable(static_cast<DType>(params[0])))
    return invalid_argument(prefix(kCast) + "target dtype " + std::to_string(params[0]) +
                            " is not one of f32, f16, bf16, i32, i64, bool, u8");
  if (!castable(in[0].dtype))
    return invalid_argument(prefix(kCast) + "operand is " + in[0].to_string() +
                            "; cast takes f32, f16, bf16, i32, i64, bool or u8");
  return one({static_cast<DType>(params[0]), in[0].dims});
}

void plan_cast(const PlanInput& op, OpPlan& out) {
  CastPlan& p = out.start<CastPlan>();
  p.n = count_of(op.outputs[0]);
  p.from = static_cast<int32_t>(op.inputs[0].dtype);
  p.to = static_cast<int32_t>(op.outputs[0].dtype);
}

// Elementwise: one FLOP per element written.
// clang-format off
// f32, i32 or i64 (the rule checks).
#define HEXIR_BINARY_OP(id, name)                                                                   \
  { id, name, 2, 2, 1, 1, false, true, false, 0, lower_none<id>, raise_none, infer_binary<id>,      \
    flops_per_element, nullptr, plan_binary }
#define HEXIR_UNARY_ARITHMETIC_OP(id, name)                                                         \
  { id, name, 1, 1, 1, 1, false, true, false, 0, lower_none<id>, raise_none,                        \
    infer_unary_arithmetic<id>, flops_per_element, nullptr, plan_unary }
#define HEXIR_LOGICAL_OP(id, name)                                                                  \
  { id, name, 2, 2, 1, 1, false, true, false, 0, lower_none<id>, raise_none, infer_logical<id>,     \
    flops_per_element, nullptr, plan_binary }
#define HEXIR_UNARY_OP(id, name)                                                                    \
  { id, name, 1, 1, 1, 1, true, true, false, 0, lower_none<id>, raise_none, infer_unary<id>,        \
    flops_per_element, nullptr, plan_unary }

#define HEXIR_UNARY_FLOATS_OP(id, name, names, defaults, count)                                    \
  { id, name, 1, 1, 1, 1, true, true, false, 0, lower_floats<id, names, defaults, count>,            \
    raise_floats<names, count>, infer_unary_floats<id, count, false>, flops_per_element, nullptr,    \
    plan_unary_floats }

// Keyed by the operands' dtype; the bool result never takes an operand's storage.
#define HEXIR_COMPARE_OP(id, name)                                                                  \
  { id, name, 2, 2, 1, 1, false, false, false, 0, lower_none<id>, raise_none, infer_compare<id>,    \
    flops_per_element, nullptr, plan_binary }
// clang-format on

// ---- quantize_linear, dequantize_linear ------------------------------------------

// Per tensor (scale of one element): [0]; per axis: [axis normalized] (ONNX's default 1).
template <OpId kId>
Result<std::vector<int64_t>> lower_quantize(std::span<const TensorType> in, const AttrMap& attrs,
                                            std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kId, attrs, {"axis"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, int_attr(kId, attrs, "axis", 1));
  if (in.size() < 2 || count_of(in[1]) == 1) return std::vector<int64_t>{0};
  HEXIR_ASSIGN_OR_RETURN(int64_t norm, normalize_axis(kId, axis, in[0].rank(), "axis"));
  return std::vector<int64_t>{norm};
}

AttrMap raise_quantize(std::span<const TensorType> in, std::span<const int64_t> params) {
  if (in.size() >= 2 && count_of(in[1]) == 1) return {};
  return {{"axis", AttrValue{param_at(params, 0)}}};
}

// The operands' shared rule: scale f32 and zero_point `zero_dtype` of one
// shape, one element or [x's dim axis]; the axis in range.
Status check_quantize_operands(OpId id, std::span<const TensorType> in, std::span<const int64_t> params,
                               DType zero_dtype) {
  HEXIR_RETURN_IF_ERROR(check_param_count(id, params, 1));
  const TensorType &x = in[0], &scale = in[1], &zero = in[2];
  if (params[0] < 0 || params[0] >= std::max<int64_t>(1, static_cast<int64_t>(x.rank())))
    return invalid_argument(prefix(id) + "axis " + std::to_string(params[0]) + " is out of range for " + x.to_string());
  if (scale.dtype != DType::kF32 || zero.dtype != zero_dtype || scale.dims != zero.dims)
    return invalid_argument(prefix(id) + "scale " + scale.to_string() + " and zero point " + zero.to_string() +
                            " are not f32 and " + dtype_name(zero_dtype) + " of one shape");
  const bool per_tensor = count_of(scale) == 1;
  const bool per_axis = scale.rank() == 1 && x.rank() > 0 && scale.dims[0] == x.dims[static_cast<size_t>(params[0])];
  if (!per_tensor && !per_axis)
    return invalid_argument(prefix(id) + "scale " + scale.to_string() + " is neither one element nor [" +
                            (x.rank() > 0 ? std::to_string(x.dims[static_cast<size_t>(params[0])]) : "") +
                            "] along axis " + std::to_string(params[0]) + " of " + x.to_string());
  if (per_tensor && params[0] != 0)
    return invalid_argument(prefix(id) + "a per-tensor scale takes axis 0, got " + std::to_string(params[0]));
  return ok_status();
}

Result<std::vector<TensorType>> infer_quantize(std::span<const TensorType> in, std::span<const int64_t> params) {
  const DType q = in[2].dtype;
  if (in[0].dtype != DType::kF32 || (q != DType::kI8 && q != DType::kU8))
    return invalid_argument(prefix(kQuantizeLinear) + "x " + in[0].to_string() + " and zero point " +
                            in[2].to_string() + ": expected f32 and i8 or u8");
  HEXIR_RETURN_IF_ERROR(check_quantize_operands(kQuantizeLinear, in, params, q));
  return one({q, in[0].dims});
}

Result<std::vector<TensorType>> infer_dequantize(std::span<const TensorType> in, std::span<const int64_t> params) {
  const DType q = in[0].dtype;
  if (q != DType::kI8 && q != DType::kU8 && q != DType::kI32)
    return invalid_argument(prefix(kDequantizeLinear) + "x is " + in[0].to_string() + ", expected i8, u8 or i32");
  HEXIR_RETURN_IF_ERROR(check_quantize_operands(kDequantizeLinear, in, params, q));
  return one({DType::kF32, in[0].dims});
}

void plan_quantize(const PlanInput& op, OpPlan& out) {
  QuantizePlan& p = out.start<QuantizePlan>();
  const TensorType& x = op.inputs[0];
  const size_t axis = static_cast<size_t>(op.params[0]);
  p.n = count_of(x);
  p.channels = count_of(op.inputs[1]) == 1 ? 1 : x.dims[axis];
  p.inner = p.channels == 1 ? 1 : dims_product(x.dims, axis + 1, x.rank());
  p.quantized = static_cast<int32_t>(op.inputs[2].dtype);
}

// ---- quantized_add ---------------------------------------------------------------

enum QuantizedAddParam { kQaAZero, kQaBZero, kQaYZero, kQaYMin, kQaYMax, kQaAScale, kQaBScale, kQaYScale, kQaCount };
constexpr const char* kQuantizedAddScales[] = {"a_scale", "b_scale", "y_scale"};
constexpr std::string_view kQuantizedAddInts[] = {"a_zero", "b_zero", "y_zero", "y_min", "y_max"};

Result<std::vector<int64_t>> lower_quantized_add(std::span<const TensorType>, const AttrMap& attrs,
                                                 std::span<const TensorType>) {
  constexpr OpId id = kQuantizedAdd;
  HEXIR_RETURN_IF_ERROR(
      check_attr_names(id, attrs, {"a_zero", "b_zero", "y_zero", "y_min", "y_max", "a_scale", "b_scale", "y_scale"}));
  std::vector<int64_t> words;
  for (std::string_view name : kQuantizedAddInts) {
    HEXIR_ASSIGN_OR_RETURN(int64_t v, int_attr(id, attrs, name, name == "y_max" ? 255 : 0));
    words.push_back(v);
  }
  for (const char* name : kQuantizedAddScales) {
    HEXIR_ASSIGN_OR_RETURN(double v, float_attr(id, attrs, name, 1.0));
    words.push_back(float_word(v));
  }
  return words;
}

AttrMap raise_quantized_add(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs;
  for (size_t i = 0; i < std::size(kQuantizedAddInts); ++i)
    attrs[std::string(kQuantizedAddInts[i])] = AttrValue{param_at(params, i)};
  for (size_t i = 0; i < std::size(kQuantizedAddScales); ++i)
    attrs[kQuantizedAddScales[i]] = AttrValue{float_param(param_at(params, kQaAScale + i))};
  return attrs;
}

Result<std::vector<TensorType>> infer_quantized_add(std::span<const TensorType> in, std::span<const int64_t> p) {
  constexpr OpId id = kQuantizedAdd;
  HEXIR_RETURN_IF_ERROR(check_param_count(id, p, kQaCount));
  if (in[0].dtype != DType::kU8 || !(in[0] == in[1]))
    return invalid_argument(prefix(id) + "a " + in[0].to_string() + " and b " + in[1].to_string() +
                            " are not u8 of one shape");
  for (int i : {kQaAZero, kQaBZero, kQaYZero, kQaYMin, kQaYMax})
    if (p[i] < 0 || p[i] > 255) return invalid_argument(prefix(id) + "zero points and bounds must be in 0..255");
  if (p[kQaYMin] > p[kQaYMax]) return invalid_argument(prefix(id) + "y_min is above y_max");
  for (int i : {kQaAScale, kQaBScale, kQaYScale}) {
    const double s = float_param(p[i]);
    // Positive normal floats: QuantizeLinear divides by y_scale.
    if (!(s >= 1e-30 && s <= 1e30)) return invalid_argument(prefix(id) + "the scales must be finite positive floats");
  }
  return one(in[0]);
}

void plan_quantized_add(const PlanInput& op, OpPlan& out) {
  QuantizedAddPlan& p = out.start<QuantizedAddPlan>();
  p.n = count_of(op.inputs[0]);
  p.a_zero = static_cast<int32_t>(op.params[kQaAZero]);
  p.b_zero = static_cast<int32_t>(op.params[kQaBZero]);
  p.y_zero = static_cast<int32_t>(op.params[kQaYZero]);
  p.y_min = static_cast<int32_t>(op.params[kQaYMin]);
  p.y_max = static_cast<int32_t>(op.params[kQaYMax]);
  p.a_scale = static_cast<float>(float_param(op.params[kQaAScale]));
  p.b_scale = static_cast<float>(float_param(op.params[kQaBScale]));
  p.y_scale = static_cast<float>(float_param(op.params[kQaYScale]));
}

// ---- lstm_cell ------------------------------------------------------------

Result<std::vector<TensorType>> infer_lstm_cell(std::span<const TensorType> in, std::span<const int64_t> params) {
  constexpr OpId id = kLstmCell;
  HEXIR_RETURN_IF_ERROR(check_param_count(id, params, 0));
  const TensorType &gates = in[0], &c = in[1];
  // gates.dims[1] / 4, not 4 * c's: an untrusted file's dims must not overflow.
  if (gates.rank() != 2 || c.rank() != 2 || gates.dims[0] != c.dims[0] || gates.dims[1] % 4 != 0 ||
      gates.dims[1] / 4 != c.dims[1])
    return invalid_argument(prefix(id) + "gates " + gates.to_string() + " and c " + c.to_string() +
                            " are not [B, 4H] and [B, H]");
  return std::vector<TensorType>{c, c};
}

void plan_lstm_cell(const PlanInput& op, OpPlan& out) {
  LstmCellPlan& p = out.start<LstmCellPlan>();
  p.rows = op.inputs[1].dims[0];
  p.hidden = op.inputs[1].dims[1];
}

constexpr OpDef kDefs[] = {
    {kAdd, "add", 2, 2, 1, 1, false, true, false, 0, lower_with_epilogue<kAdd>, raise_with_epilogue,
     infer_binary<kAdd>, flops_per_element, nullptr, plan_binary},
    HEXIR_BINARY_OP(kSub, "sub"),
    {kMul, "mul", 2, 2, 1, 1, false, true, false, 0, lower_with_epilogue<kMul>, raise_with_epilogue,
     infer_binary<kMul>, flops_per_element, nullptr, plan_binary},
    HEXIR_BINARY_OP(kDiv, "div"),
    HEXIR_BINARY_OP(kMaximum, "maximum"),
    HEXIR_BINARY_OP(kMinimum, "minimum"),
    HEXIR_UNARY_OP(kRelu, "relu"),
    {kGelu, "gelu", 1, 1, 1, 1, true, true, false, 0, lower_gelu, raise_gelu, infer_gelu, flops_per_element,
     nullptr, plan_unary},
    HEXIR_UNARY_OP(kSilu, "silu"),
    HEXIR_UNARY_OP(kSigmoid, "sigmoid"),
    HEXIR_UNARY_OP(kTanh, "tanh"),
    HEXIR_UNARY_OP(kExp, "exp"),
    HEXIR_UNARY_OP(kSqrt, "sqrt"),
    HEXIR_UNARY_OP(kRsqrt, "rsqrt"),
    HEXIR_UNARY_ARITHMETIC_OP(kNeg, "neg"),
    // where: keyed by x's dtype; its result never takes the 1-byte condition's storage.
    {kWhere, "where", 3, 3, 1, 1, false, false, false, 1, lower_none<kWhere>, raise_none, infer_where,
     flops_per_element, nullptr, plan_where},
    {kCast, "cast", 1, 1, 1, 1, false, false, false, 0, lower_cast, raise_cast, infer_cast, flops_per_element,
     nullptr, plan_cast},
    {kQuantizeLinear, "quantize_linear", 3, 3, 1, 1, false, false, false, 2, lower_quantize<kQuantizeLinear>,
     raise_quantize, infer_quantize, flops_per_element, nullptr, plan_quantize},
    {kDequantizeLinear, "dequantize_linear", 3, 3, 1, 1, false, false, false, 0, lower_quantize<kDequantizeLinear>,
     raise_quantize, infer_dequantize, flops_per_element, nullptr, plan_quantize},
    {kQuantizedAdd, "quantized_add", 2, 2, 1, 1, false, true, false, 0, lower_quantized_add, raise_quantized_add,
     infer_quantized_add, flops_per_element, nullptr, plan_quantized_add},
    // lstm_cell: its new c (output 0) in place on c (input 1).
    {kLstmCell, "lstm_cell", 2, 2, 2, 2, true, true, false, 0, lower_none<kLstmCell>, raise_none, infer_lstm_cell,
     flops_per_element, nullptr, plan_lstm_cell, /*in_place_inputs=*/2u},
    {kLeakyRelu, "leaky_relu", 1, 1, 1, 1, true, true, false, 0, lower_leaky_relu,
     raise_floats<kLeakyReluNames, 1>, infer_unary_floats<kLeakyRelu, 1, false>, flops_per_element, nullptr,
     plan_unary_floats},
    {kClip, "clip", 1, 1, 1, 1, true, true, false, 0, lower_clip, raise_floats<kClipNames, 2>,
     infer_unary_floats<kClip, 2, true>, flops_per_element, nullptr, plan_unary_floats},
    {kHardSigmoid, "hard_sigmoid", 1, 1, 1, 1, true, true, false, 0, lower_hard_sigmoid,
     raise_floats<kHardSigmoidNames, 2>, infer_unary_floats<kHardSigmoid, 2, false>, flops_per_element,
     nullptr, plan_unary_floats},
    HEXIR_UNARY_OP(kHardSwish, "hard_swish"),
    HEXIR_UNARY_OP(kErf, "erf"),
    HEXIR_UNARY_OP(kLog, "log"),
    HEXIR_UNARY_OP(kSoftplus, "softplus"),
    HEXIR_UNARY_ARITHMETIC_OP(kAbs, "abs"),
    HEXIR_UNARY_OP(kReciprocal, "reciprocal"),
    {kPow, "pow", 2, 2, 1, 1, false, true, false, 0, lower_none<kPow>, raise_none, infer_binary<kPow>,
     flops_per_element, nullptr, plan_binary},
    HEXIR_COMPARE_OP(kEqual, "equal"),
    HEXIR_COMPARE_OP(kLess, "less"),
    HEXIR_COMPARE_OP(kGreater, "greater"),
    {kNot, "not", 1, 1, 1, 1, false, true, false, 0, lower_none<kNot>, raise_none, infer_not,
     flops_per_element, nullptr, plan_unary},
    {kMod, "mod", 2, 2, 1, 1, false, true, false, 0, lower_mod, raise_mod, infer_mod, flops_per_element,
     nullptr, plan_mod},
    HEXIR_COMPARE_OP(kLessOrEqual, "less_or_equal"),
    HEXIR_COMPARE_OP(kGreaterOrEqual, "greater_or_equal"),
    HEXIR_LOGICAL_OP(kAnd, "and"),
    HEXIR_LOGICAL_OP(kOr, "or"),
    HEXIR_LOGICAL_OP(kXor, "xor"),
    HEXIR_UNARY_ARITHMETIC_OP(kSign, "sign"),
    HEXIR_UNARY_OP(kCeil, "ceil"),
    HEXIR_UNARY_OP(kFloor, "floor"),
    HEXIR_UNARY_OP(kRound, "round"),
    HEXIR_UNARY_OP(kSin, "sin"),
    HEXIR_UNARY_OP(kCos, "cos"),
    HEXIR_UNARY_OP(kTan, "tan"),
    HEXIR_UNARY_OP(kAsin, "asin"),
    HEXIR_UNARY_OP(kAcos, "acos"),
    HEXIR_UNARY_OP(kAtan, "atan"),
    HEXIR_UNARY_OP(kSinh, "sinh"),
    HEXIR_UNARY_OP(kCosh, "cosh"),
    HEXIR_UNARY_OP(kAsinh, "asinh"),
    HEXIR_UNARY_OP(kAcosh, "acosh"),
    HEXIR_UNARY_OP(kAtanh, "atanh"),
    // bool results: never in place.
    {kIsInf, "is_inf", 1, 1, 1, 1, true, false, false, 0, lower_is_inf, raise_is_inf, infer_float_class<kIsInf>,
     flops_per_element, nullptr, plan_float_class},
    {kIsNaN, "is_nan", 1, 1, 1, 1, true, false, false, 0, lower_none<kIsNaN>, raise_none,
     infer_float_class<kIsNaN>, flops_per_element, nullptr, plan_float_class},
    HEXIR_UNARY_FLOATS_OP(kElu, "elu", kAlphaNames, kEluDefaults, 1),
    HEXIR_UNARY_FLOATS_OP(kSelu, "selu", kSeluNames, kSeluDefaults, 2),
    {kCelu, "celu", 1, 1, 1, 1, true, true, false, 0, lower_floats<kCelu, kAlphaNames, kEluDefaults, 1>,
     raise_floats<kAlphaNames, 1>, infer_celu, flops_per_element, nullptr, plan_unary_floats},
    HEXIR_UNARY_OP(kMish, "mish"),
    HEXIR_UNARY_OP(kSoftsign, "softsign"),
    HEXIR_UNARY_FLOATS_OP(kThresholdedRelu, "thresholded_relu", kAlphaNames, kThresholdedReluDefaults, 1),
    HEXIR_UNARY_FLOATS_OP(kShrink, "shrink", kShrinkNames, kShrinkDefaults, 2),
    {kPRelu, "prelu", 2, 2, 1, 1, true, true, false, 0, lower_none<kPRelu>, raise_none, infer_binary<kPRelu>,
     flops_per_element, nullptr, plan_binary},
};

#undef HEXIR_BINARY_OP
#undef HEXIR_UNARY_OP
#undef HEXIR_UNARY_FLOATS_OP
#undef HEXIR_COMPARE_OP
#undef HEXIR_UNARY_ARITHMETIC_OP
#undef HEXIR_LOGICAL_OP

}  // namespace

std::span<const OpDef> elementwise_ops() { return kDefs; }

}  // namespace hexir::ops::internal
