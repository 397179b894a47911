// Row-wise operators: softmax, log_softmax, hardmax, layernorm, the reductions
// (reduce_sum's family), argmax, argmin, top_k and cumsum.
#include <algorithm>
#include <bit>
#include <cmath>

#include "hexir/ops/widen.h"
#include "util.h"

namespace hexir::ops::internal {
namespace {

using enum OpId;

template <OpId kId>
Result<std::vector<int64_t>> lower_axis(std::span<const TensorType> in, const AttrMap& attrs,
                                        std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kId, attrs, {"axis"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, int_attr(kId, attrs, "axis", -1));
  HEXIR_ASSIGN_OR_RETURN(int64_t norm, normalize_axis(kId, axis, in[0].rank(), "axis"));
  return std::vector<int64_t>{norm};
}

AttrMap raise_axis(std::span<const TensorType>, std::span<const int64_t> params) {
  return {{"axis", AttrValue{param_at(params, 0)}}};
}

// max, subtract and exp, sum, divide: 4 per element.
uint64_t flops_softmax(std::span<const TensorType>, std::span<const TensorType> out,
                       std::span<const int64_t>) {
  return mul_sat(output_elements_sat(out), 4);
}

// softmax, log_softmax and hardmax: [axis], the result of the input's type.
template <OpId kId>
Result<std::vector<TensorType>> infer_softmax(std::span<const TensorType> in,
                                              std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kId, params, 1));
  HEXIR_RETURN_IF_ERROR(check_axis_param(kId, params[0], in[0].rank()));
  return one(in[0]);
}

void fill_softmax(const PlanInput& op, SoftmaxPlan& p) {
  const auto& dims = op.inputs[0].dims;
  const size_t axis = static_cast<size_t>(op.params[0]);
  p.outer = dims_product(dims, 0, axis);
  p.length = dims[axis];
  p.inner = dims_product(dims, axis + 1, dims.size());
}

void plan_softmax(const PlanInput& op, OpPlan& out) { fill_softmax(op, out.start<SoftmaxPlan>()); }

// hardmax: argmax's plan along the axis (the first of ties).
void plan_hardmax(const PlanInput& op, OpPlan& out) {
  ArgmaxPlan& p = out.start<ArgmaxPlan>();
  SoftmaxPlan rows{};
  fill_softmax(op, rows);
  p.outer = rows.outer;
  p.length = rows.length;
  p.inner = rows.inner;
}

// softmax (and log_softmax) over a non-last axis walks its rows with a
// stride; with one double sum and one float max per column of the inner
// block it runs unit-stride instead (same arithmetic per element, same results).
uint64_t workspace_softmax(const PlanInput& op) {
  SoftmaxPlan p{};
  fill_softmax(op, p);
  if (p.inner <= 1) return 0;
  return static_cast<uint64_t>(p.inner) * (sizeof(double) + sizeof(float));
}

Result<std::vector<int64_t>> lower_layernorm(std::span<const TensorType> in, const AttrMap& attrs,
                                             std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kLayernorm, attrs, {"axis", "epsilon"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, int_attr(kLayernorm, attrs, "axis", -1));
  HEXIR_ASSIGN_OR_RETURN(int64_t norm, normalize_axis(kLayernorm, axis, in[0].rank(), "axis"));
  double epsilon = 1e-5;
  if (const AttrValue* v = find_attr(attrs, "epsilon")) {
    if (auto* d = std::get_if<double>(&v->value))
      epsilon = *d;
    else if (auto* i = std::get_if<int64_t>(&v->value))
      epsilon = static_cast<double>(*i);
    else
      return invalid_argument(prefix(kLayernorm) + "attribute 'epsilon' must be a number");
  }
  if (!(epsilon >= 0) || !std::isfinite(epsilon))
    return invalid_argument(prefix(kLayernorm) + "attribute 'epsilon' must be finite and >= 0");
  return std::vector<int64_t>{norm, std::bit_cast<int64_t>(epsilon)};
}

AttrMap raise_layernorm(std::span<const TensorType>, std::span<const int64_t> params) {
  return {{"axis", AttrValue{param_at(params, 0)}}, {"epsilon", AttrValue{float_param(param_at(params, 1))}}};
}

// mean, variance, normalize, scale and shift: 6 per element.
uint64_t flops_layernorm(std::span<const TensorType>, std::span<const TensorType> out,
                         std::span<const int64_t>) {
  return mul_sat(output_elements_sat(out), 6);
}

Result<std::vector<TensorType>> infer_layernorm(std::span<const TensorType> in,
                                                std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kLayernorm, params, 2));
  const TensorType& x = in[0];
  HEXIR_RETURN_IF_ERROR(check_axis_param(kLayernorm, params[0], x.rank()));
  const double epsilon = std::bit_cast<double>(params[1]);
  if (!(epsilon >= 0) || !std::isfinite(epsilon))
    return invalid_argument(prefix(kLayernorm) + "epsilon must be finite and >= 0");
  std::vector<int64_t> norm_dims(x.dims.begin() + params[0], x.dims.end());
  for (int i = 1; i <= 2; ++i)
    if (in[i].dims != norm_dims)
      return invalid_argument(prefix(kLayernorm) + (i == 1 ? "gamma" : "beta") + " has shape " +
                              shape_str(in[i].dims) + ", expected " + shape_str(norm_dims));
  return one(x);
}

void plan_layernorm(const PlanInput& op, OpPlan& out) {
  LayernormPlan& p = out.start<LayernormPlan>();
  const auto& dims = op.inputs[0].dims;
  const size_t axis = static_cast<size_t>(op.params[0]);
  p.rows = dims_product(dims, 0, axis);
  p.width = dims_product(dims, axis, dims.size());
  p.epsilon = std::bit_cast<double>(op.params[1]);
}

// group_norm: [groups, bits of epsilon].
Result<std::vector<int64_t>> lower_group_norm(std::span<const TensorType>, const AttrMap& attrs,
                                              std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kGroupNorm, attrs, {"groups", "epsilon"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t groups, int_attr(kGroupNorm, attrs, "groups", 1));
  HEXIR_ASSIGN_OR_RETURN(double epsilon, float_attr(kGroupNorm, attrs, "epsilon", 1e-5));
  if (!(epsilon >= 0) || !std::isfinite(epsilon))
    return invalid_argument(prefix(kGroupNorm) + "attribute 'epsilon' must be finite and >= 0");
  return std::vector<int64_t>{groups, std::bit_cast<int64_t>(epsilon)};
}

AttrMap raise_group_norm(std::span<const TensorType>, std::span<const int64_t> params) {
  return {{"groups", AttrValue{param_at(params, 0)}}, {"epsilon", AttrValue{float_param(param_at(params, 1))}}};
}

// x [N, C, ...], scale and bias [C]; groups divides C.
Result<std::vector<TensorType>> infer_group_norm(std::span<const TensorType> in,
                                                 std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kGroupNorm, params, 2));
  const TensorType& x = in[0];
  if (x.rank() < 2)
    return invalid_argument(prefix(kGroupNorm) + "x is " + x.to_string() + ", expected [N, C, ...]");
  const int64_t channels = x.dims[1], groups = params[0];
  if (groups < 1 || channels % groups != 0)
    return invalid_argument(prefix(kGroupNorm) + "groups " + std::to_string(groups) + " does not divide the " +
                            std::to_string(channels) + " channels of " + x.to_string());
  const double epsilon = std::bit_cast<double>(params[1]);
  if (!(epsilon >= 0) || !std::isfinite(epsilon))
    return invalid_argument(prefix(kGroupNorm) + "epsilon must be finite and >= 0");
  for (int i = 1; i <= 2; ++i)
    if (in[i].dims != std::vector<int64_t>{channels})
      return invalid_argument(prefix(kGroupNorm) + (i == 1 ? "scale" : "bias") + " has shape " +
                              shape_str(in[i].dims) + ", expected [" + std::to_string(channels) + "]");
  return one(x);
}

void plan_group_norm(const PlanInput& op, OpPlan& out) {
  GroupNormPlan& p = out.start<GroupNormPlan>();
  const auto& dims = op.inputs[0].dims;
  p.groups = op.params[0];
  p.spatial = dims_product(dims, 2, dims.size());
  p.rows = dims[0] * p.groups;
  p.width = dims[1] / p.groups * p.spatial;
  p.epsilon = std::bit_cast<double>(op.params[1]);
}

template <OpId kId>
Result<std::vector<int64_t>> lower_reduce(std::span<const TensorType> in, const AttrMap& attrs,
                                          std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kId, attrs, {"axes", "keepdims"}));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> axes, int_list_attr(kId, attrs, "axes"));
  int64_t keepdims = 0;
  if (const AttrValue* v = find_attr(attrs, "keepdims")) {
    auto* i = std::get_if<int64_t>(&v->value);
    if (!i || (*i != 0 && *i != 1))
      return invalid_argument(prefix(kId) + "attribute 'keepdims' must be 0 or 1");
    keepdims = *i;
  }
  for (int64_t& a : axes) {
    HEXIR_ASSIGN_OR_RETURN(a, normalize_axis(kId, a, in[0].rank(), "axis"));
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return invalid_argument(prefix(kId) + "attribute 'axes' lists an axis twice");
  std::vector<int64_t> params{keepdims};
  params.insert(params.end(), axes.begin(), axes.end());
  return params;
}

AttrMap raise_reduce(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs{{"keepdims", AttrValue{param_at(params, 0)}}};
  if (params.size() > 1) attrs["axes"] = int_list_value(params.subspan(1));
  return attrs;
}

// The reductions and argmax: one per input element.
uint64_t flops_reduce(std::span<const TensorType> in, std::span<const TensorType> out,
                      std::span<const int64_t>) {
  return in.empty() ? output_elements_sat(out) : elements_sat(in[0]);
}

// Which dims a reduce parameter list reduces (all when it lists none).
template <OpId kId>
Status reduced_dims(std::span<const int64_t> params, size_t rank, bool* reduced) {
  if (params.empty() || (params[0] != 0 && params[0] != 1))
    return invalid_argument(prefix(kId) + "first parameter (keepdims) must be 0 or 1");
  std::fill(reduced, reduced + rank, params.size() == 1);
  for (size_t i = 1; i < params.size(); ++i) {
    if (params[i] < 0 || params[i] >= static_cast<int64_t>(rank) || (i > 1 && params[i] <= params[i - 1]))
      return invalid_argument(prefix(kId) + "axes " + shape_str(params.subspan(1)) +
                              " must be sorted, unique and below rank " + std::to_string(rank));
    reduced[params[i]] = true;
  }
  return ok_status();
}

constexpr ReduceKind reduce_kind(OpId id) {
  switch (id) {
    case kReduceMean:
      return ReduceKind::kMean;
    case kReduceMax:
      return ReduceKind::kMax;
    case kReduceMin:
      return ReduceKind::kMin;
    case kReduceProd:
      return ReduceKind::kProd;
    case kReduceL1:
      return ReduceKind::kL1;
    case kReduceL2:
      return ReduceKind::kL2;
    case kReduceLogSumExp:
      return ReduceKind::kLogSumExp;
    case kReduceSumSquare:
      return ReduceKind::kSumSquare;
    case kReduceLogSum:
      return ReduceKind::kLogSum;
    default:
      return ReduceKind::kSum;
  }
}

// The reductions ONNX defines on integers too (mean, l2 and the logarithms: floats only).
constexpr bool reduces_integers(ReduceKind kind) {
  return kind == ReduceKind::kSum || kind == ReduceKind::kMax || kind == ReduceKind::kMin ||
         kind == ReduceKind::kProd || kind == ReduceKind::kL1 || kind == ReduceKind::kSumSquare;
}

// f32, or i32 / i64 where `integers` allows.
Status check_number_operand(OpId id, const TensorType& x, bool integers) {
  if (x.dtype == DType::kF32 || (integers && (x.dtype == DType::kI32 || x.dtype == DType::kI64)) ||
      (is_half(x.dtype) && widens_halves(id)))  // f16 / bf16 through the f32 kernel (ops/widen.h)
    return ok_status();
  return invalid_argument(prefix(id) + "operand 0 is " + x.to_string() +
                          (integers ? ", must be f32, i32 or i64" : ", only f32 is supported"));
}

template <OpId kId>
Result<std::vector<TensorType>> infer_reduce(std::span<const TensorType> in,
                                             std::span<const int64_t> params) {
  const TensorType& x = in[0];
  HEXIR_RETURN_IF_ERROR(check_number_operand(kId, x, reduces_integers(reduce_kind(kId))));
  bool reduced[kMaxRank];
  HEXIR_RETURN_IF_ERROR(reduced_dims<kId>(params, x.rank(), reduced));
  TensorType out{x.dtype, {}};
  for (size_t d = 0; d < x.rank(); ++d) {
    if (!reduced[d])
      out.dims.push_back(x.dims[d]);
    else if (params[0] == 1)
      out.dims.push_back(1);
  }
  return one(std::move(out));
}

template <OpId kId>
void plan_reduce(const PlanInput& op, OpPlan& out) {
  ReducePlan& p = out.start<ReducePlan>();
  const auto& dims = op.inputs[0].dims;
  bool reduced[kMaxRank];
  (void)reduced_dims<kId>(op.params, dims.size(), reduced);  // checked by infer
  int64_t strides[kMaxRank];
  row_major_strides(dims, strides);
  if (!op.input_strides.empty() && !op.input_strides[0].empty())  // a strided view: its own strides
    for (size_t i = 0; i < dims.size(); ++i) strides[i] = op.input_strides[0][i];
  for (size_t i = 0; i < dims.size(); ++i) {
    if (reduced[i]) {
      p.red_dims[p.red_rank] = dims[i];
      p.red_stride[p.red_rank++] = strides[i];
    } else {
      p.kept_dims[p.kept_rank] = dims[i];
      p.kept_stride[p.kept_rank++] = strides[i];
    }
  }
  p.out_count = dims_product(std::span<const int64_t>(p.kept_dims, static_cast<size_t>(p.kept_rank)), 0,
                             static_cast<size_t>(p.kept_rank));
  p.red_count = dims_product(std::span<const int64_t>(p.red_dims, static_cast<size_t>(p.red_rank)), 0,
                             static_cast<size_t>(p.red_rank));
  p.kind = reduce_kind(kId);
}

// ---- argmax -----------------------------------------------------------------

Result<int64_t> flag_attr(OpId id, const AttrMap& attrs, std::string_view name, int64_t fallback) {
  HEXIR_ASSIGN_OR_RETURN(int64_t v, int_attr(id, attrs, name, fallback));
  if (v != 0 && v != 1)
    return invalid_argument(prefix(id) + "attribute '" + std::string(name) + "' must be 0 or 1");
  return v;
}

template <OpId kId>
Result<std::vector<int64_t>> lower_argmax(std::span<const TensorType> in, const AttrMap& attrs,
                                          std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kId, attrs, {"axis", "keepdims", "select_last_index"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, int_attr(kId, attrs, "axis", 0));
  HEXIR_ASSIGN_OR_RETURN(axis, normalize_axis(kId, axis, in[0].rank(), "axis"));
  HEXIR_ASSIGN_OR_RETURN(int64_t keepdims, flag_attr(kId, attrs, "keepdims", 1));
  HEXIR_ASSIGN_OR_RETURN(int64_t last, flag_attr(kId, attrs, "select_last_index", 0));
  return std::vector<int64_t>{axis, keepdims, last};
}

AttrMap raise_argmax(std::span<const TensorType>, std::span<const int64_t> params) {
  return {{"axis", AttrValue{param_at(params, 0)}},
          {"keepdims", AttrValue{param_at(params, 1)}},
          {"select_last_index", AttrValue{param_at(params, 2)}}};
}

template <OpId kId>
Result<std::vector<TensorType>> infer_argmax(std::span<const TensorType> in,
                                             std::span<const int64_t> params) {
  const TensorType& x = in[0];
  HEXIR_RETURN_IF_ERROR(check_number_operand(kId, x, true));
  HEXIR_RETURN_IF_ERROR(check_param_count(kId, params, 3));
  HEXIR_RETURN_IF_ERROR(check_axis_param(kId, params[0], x.rank()));
  if ((params[1] != 0 && params[1] != 1) || (params[2] != 0 && params[2] != 1))
    return invalid_argument(prefix(kId) + "keepdims and select_last_index must be 0 or 1, got " +
                            shape_str(params.subspan(1)));
  const size_t axis = static_cast<size_t>(params[0]);
  TensorType out{DType::kI64, {}};
  for (size_t d = 0; d < x.rank(); ++d) {
    if (d != axis)
      out.dims.push_back(x.dims[d]);
    else if (params[1] == 1)
      out.dims.push_back(1);
  }
  if (x.dims[axis] == 0 && count_of(out) > 0)
    return invalid_argument(prefix(kId) + "axis " + std::to_string(axis) + " of " + x.to_string() +
                            " is empty: no element to pick");
  return one(std::move(out));
}

template <OpId kId>
void plan_argmax(const PlanInput& op, OpPlan& out) {
  ArgmaxPlan& p = out.start<ArgmaxPlan>();
  const auto& dims = op.inputs[0].dims;
  const size_t axis = static_cast<size_t>(op.params[0]);
  p.outer = dims_product(dims, 0, axis);
  p.length = dims[axis];
  p.inner = dims_product(dims, axis + 1, dims.size());
  p.select_last = static_cast<int32_t>(op.params[2]);
  p.smallest = kId == kArgMin;
}

// ---- top_k --------------------------------------------------------------------

Result<std::vector<int64_t>> lower_top_k(std::span<const TensorType> in, const AttrMap& attrs,
                                         std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kTopK, attrs, {"axis", "k", "largest", "sorted"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, int_attr(kTopK, attrs, "axis", -1));
  HEXIR_ASSIGN_OR_RETURN(axis, normalize_axis(kTopK, axis, in[0].rank(), "axis"));
  if (!find_attr(attrs, "k")) return invalid_argument(prefix(kTopK) + "needs attribute 'k'");
  HEXIR_ASSIGN_OR_RETURN(int64_t k, int_attr(kTopK, attrs, "k", 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t largest, flag_attr(kTopK, attrs, "largest", 1));
  HEXIR_ASSIGN_OR_RETURN(int64_t sorted, flag_attr(kTopK, attrs, "sorted", 1));
  return std::vector<int64_t>{axis, k, largest, sorted};
}

AttrMap raise_top_k(std::span<const TensorType>, std::span<const int64_t> params) {
  return {{"axis", AttrValue{param_at(params, 0)}},
          {"k", AttrValue{param_at(params, 1)}},
          {"largest", AttrValue{param_at(params, 2)}},
          {"sorted", AttrValue{param_at(params, 3)}}};
}

Result<std::vector<TensorType>> infer_top_k(std::span<const TensorType> in, std::span<const int64_t> params) {
  const TensorType& x = in[0];
  HEXIR_RETURN_IF_ERROR(check_number_operand(kTopK, x, true));
  HEXIR_RETURN_IF_ERROR(check_param_count(kTopK, params, 4));
  HEXIR_RETURN_IF_ERROR(check_axis_param(kTopK, params[0], x.rank()));
  const size_t axis = static_cast<size_t>(params[0]);
  if (params[1] < 0 || params[1] > x.dims[axis])
    return invalid_argument(prefix(kTopK) + "k " + std::to_string(params[1]) + " must be in [0, " +
                            std::to_string(x.dims[axis]) + "], the axis of " + x.to_string());
  if ((params[2] != 0 && params[2] != 1) || (params[3] != 0 && params[3] != 1))
    return invalid_argument(prefix(kTopK) + "largest and sorted must be 0 or 1, got " +
                            shape_str(params.subspan(2)));
  TensorType values = x;
  values.dims[axis] = params[1];
  TensorType indices{DType::kI64, values.dims};
  return std::vector<TensorType>{std::move(values), std::move(indices)};
}

// Sorting each row: n log k comparisons.
uint64_t flops_top_k(std::span<const TensorType> in, std::span<const TensorType>,
                     std::span<const int64_t> params) {
  const uint64_t k = static_cast<uint64_t>(std::max<int64_t>(param_at(params, 1), 1));
  return mul_sat(elements_sat(in[0]), static_cast<uint64_t>(std::bit_width(k)));
}

void fill_top_k(const PlanInput& op, TopKPlan& p) {
  const auto& dims = op.inputs[0].dims;
  const size_t axis = static_cast<size_t>(op.params[0]);
  p.outer = dims_product(dims, 0, axis);
  p.length = dims[axis];
  p.inner = dims_product(dims, axis + 1, dims.size());
  p.k = op.params[1];
  p.largest = static_cast<int32_t>(op.params[2]);
}

void plan_top_k(const PlanInput& op, OpPlan& out) { fill_top_k(op, out.start<TopKPlan>()); }

// The cpu kernel orders one row's indices in place: an i64 per axis element.
uint64_t workspace_top_k(const PlanInput& op) {
  TopKPlan p{};
  fill_top_k(op, p);
  return static_cast<uint64_t>(p.length) * sizeof(int64_t);
}

// ---- cumsum -------------------------------------------------------------------

Result<std::vector<int64_t>> lower_cumsum(std::span<const TensorType> in, const AttrMap& attrs,
                                          std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kCumSum, attrs, {"axis", "exclusive", "reverse"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, int_attr(kCumSum, attrs, "axis", 0));
  HEXIR_ASSIGN_OR_RETURN(axis, normalize_axis(kCumSum, axis, in[0].rank(), "axis"));
  HEXIR_ASSIGN_OR_RETURN(int64_t exclusive, flag_attr(kCumSum, attrs, "exclusive", 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t reverse, flag_attr(kCumSum, attrs, "reverse", 0));
  return std::vector<int64_t>{axis, exclusive, reverse};
}

AttrMap raise_cumsum(std::span<const TensorType>, std::span<const int64_t> params) {
  return {{"axis", AttrValue{param_at(params, 0)}},
          {"exclusive", AttrValue{param_at(params, 1)}},
          {"reverse", AttrValue{param_at(params, 2)}}};
}

Result<std::vector<TensorType>> infer_cumsum(std::span<const TensorType> in,
                                             std::span<const int64_t> params) {
  const TensorType& x = in[0];
  HEXIR_RETURN_IF_ERROR(check_param_count(kCumSum, params, 3));
  HEXIR_RETURN_IF_ERROR(check_axis_param(kCumSum, params[0], x.rank()));
  if ((params[1] != 0 && params[1] != 1) || (params[2] != 0 && params[2] != 1))
    return invalid_argument(prefix(kCumSum) + "exclusive and reverse must be 0 or 1, got " +
                            shape_str(params.subspan(1)));
  if (x.dtype != DType::kF32 && x.dtype != DType::kI32 && x.dtype != DType::kI64 && !is_half(x.dtype))
    return invalid_argument(prefix(kCumSum) + "operand is " + x.to_string() +
                            ", expected f32 (or f16, bf16), i32 or i64");
  return one(x);
}

void plan_cumsum(const PlanInput& op, OpPlan& out) {
  CumSumPlan& p = out.start<CumSumPlan>();
  const auto& dims = op.inputs[0].dims;
  const size_t axis = static_cast<size_t>(op.params[0]);
  p.outer = dims_product(dims, 0, axis);
  p.length = dims[axis];
  p.inner = dims_product(dims, axis + 1, dims.size());
  p.exclusive = static_cast<int32_t>(op.params[1]);
  p.reverse = static_cast<int32_t>(op.params[2]);
}

constexpr OpDef kDefs[] = {
    {kSoftmax, "softmax", 1, 1, 1, 1, true, true, false, 0, lower_axis<kSoftmax>, raise_axis,
     infer_softmax<kSoftmax>, flops_softmax, workspace_softmax, plan_softmax},
    {kLayernorm, "layernorm", 3, 3, 1, 1, true, false, false, 0, lower_layernorm, raise_layernorm,
     infer_layernorm, flops_layernorm, nullptr, plan_layernorm},
    {kReduceSum, "reduce_sum", 1, 1, 1, 1, false, false, false, 0, lower_reduce<kReduceSum>, raise_reduce,
     infer_reduce<kReduceSum>, flops_reduce, nullptr, plan_reduce<kReduceSum>},
    {kReduceMean, "reduce_mean", 1, 1, 1, 1, true, false, false, 0, lower_reduce<kReduceMean>, raise_reduce,
     infer_reduce<kReduceMean>, flops_reduce, nullptr, plan_reduce<kReduceMean>},
    {kReduceMax, "reduce_max", 1, 1, 1, 1, false, false, false, 0, lower_reduce<kReduceMax>, raise_reduce,
     infer_reduce<kReduceMax>, flops_reduce, nullptr, plan_reduce<kReduceMax>},
    {kGroupNorm, "group_norm", 3, 3, 1, 1, true, false, false, 0, lower_group_norm, raise_group_norm,
     infer_group_norm, flops_layernorm, nullptr, plan_group_norm},
    {kArgMax, "argmax", 1, 1, 1, 1, false, false, false, 0, lower_argmax<kArgMax>, raise_argmax,
     infer_argmax<kArgMax>, flops_reduce, nullptr, plan_argmax<kArgMax>},
#define HEXIR_REDUCE_DEF(id, name)                                                                  \
  {                                                                                                 \
    id, name, 1, 1, 1, 1, false, false, false, 0, lower_reduce<id>, raise_reduce, infer_reduce<id>, \
        flops_reduce, nullptr, plan_reduce<id>                                                      \
  }
    HEXIR_REDUCE_DEF(kReduceMin, "reduce_min"),
    HEXIR_REDUCE_DEF(kReduceProd, "reduce_prod"),
    HEXIR_REDUCE_DEF(kReduceL1, "reduce_l1"),
    HEXIR_REDUCE_DEF(kReduceL2, "reduce_l2"),
    HEXIR_REDUCE_DEF(kReduceLogSumExp, "reduce_log_sum_exp"),
    HEXIR_REDUCE_DEF(kReduceSumSquare, "reduce_sum_square"),
    HEXIR_REDUCE_DEF(kReduceLogSum, "reduce_log_sum"),
#undef HEXIR_REDUCE_DEF
    {kArgMin, "argmin", 1, 1, 1, 1, false, false, false, 0, lower_argmax<kArgMin>, raise_argmax,
     infer_argmax<kArgMin>, flops_reduce, nullptr, plan_argmax<kArgMin>},
    {kLogSoftmax, "log_softmax", 1, 1, 1, 1, true, true, false, 0, lower_axis<kLogSoftmax>, raise_axis,
     infer_softmax<kLogSoftmax>, flops_softmax, workspace_softmax, plan_softmax},
    {kHardmax, "hardmax", 1, 1, 1, 1, true, false, false, 0, lower_axis<kHardmax>, raise_axis,
     infer_softmax<kHardmax>, flops_reduce, nullptr, plan_hardmax},
    {kTopK, "top_k", 1, 1, 2, 2, false, false, false, 0, lower_top_k, raise_top_k, infer_top_k, flops_top_k,
     workspace_top_k, plan_top_k},
    {kCumSum, "cumsum", 1, 1, 1, 1, false, false, false, 0, lower_cumsum, raise_cumsum, infer_cumsum,
     flops_per_element, nullptr, plan_cumsum},
};

}  // namespace

std::span<const OpDef> normalization_ops() { return kDefs; }

}  // namespace hexir::ops::internal
