// Row-wise operators: softmax, layernorm, the reductions (sum, mean, max), argmax and cumsum.
#include <algorithm>
#include <bit>
#include <cmath>

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

Result<std::vector<TensorType>> infer_softmax(std::span<const TensorType> in,
                                              std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kSoftmax, params, 1));
  HEXIR_RETURN_IF_ERROR(check_axis_param(kSoftmax, params[0], in[0].rank()));
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

// softmax over a non-last axis walks its rows with a stride; with one double
// sum and one float max per column of the inner block it runs unit-stride
// instead (same arithmetic per element, same results).
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

template <OpId kId>
Result<std::vector<TensorType>> infer_reduce(std::span<const TensorType> in,
                                             std::span<const int64_t> params) {
  const TensorType& x = in[0];
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
  p.mean = kId == kReduceMean;
  p.max = kId == kReduceMax;
}

// ---- argmax -----------------------------------------------------------------

Result<int64_t> flag_attr(OpId id, const AttrMap& attrs, std::string_view name, int64_t fallback) {
  HEXIR_ASSIGN_OR_RETURN(int64_t v, int_attr(id, attrs, name, fallback));
  if (v != 0 && v != 1)
    return invalid_argument(prefix(id) + "attribute '" + std::string(name) + "' must be 0 or 1");
  return v;
}

Result<std::vector<int64_t>> lower_argmax(std::span<const TensorType> in, const AttrMap& attrs,
                                          std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kArgMax, attrs, {"axis", "keepdims", "select_last_index"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, int_attr(kArgMax, attrs, "axis", 0));
  HEXIR_ASSIGN_OR_RETURN(axis, normalize_axis(kArgMax, axis, in[0].rank(), "axis"));
  HEXIR_ASSIGN_OR_RETURN(int64_t keepdims, flag_attr(kArgMax, attrs, "keepdims", 1));
  HEXIR_ASSIGN_OR_RETURN(int64_t last, flag_attr(kArgMax, attrs, "select_last_index", 0));
  return std::vector<int64_t>{axis, keepdims, last};
}

AttrMap raise_argmax(std::span<const TensorType>, std::span<const int64_t> params) {
  return {{"axis", AttrValue{param_at(params, 0)}},
          {"keepdims", AttrValue{param_at(params, 1)}},
          {"select_last_index", AttrValue{param_at(params, 2)}}};
}

Result<std::vector<TensorType>> infer_argmax(std::span<const TensorType> in,
                                             std::span<const int64_t> params) {
  const TensorType& x = in[0];
  HEXIR_RETURN_IF_ERROR(check_param_count(kArgMax, params, 3));
  HEXIR_RETURN_IF_ERROR(check_axis_param(kArgMax, params[0], x.rank()));
  if ((params[1] != 0 && params[1] != 1) || (params[2] != 0 && params[2] != 1))
    return invalid_argument(prefix(kArgMax) + "keepdims and select_last_index must be 0 or 1, got " +
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
    return invalid_argument(prefix(kArgMax) + "axis " + std::to_string(axis) + " of " + x.to_string() +
                            " is empty: no element to pick");
  return one(std::move(out));
}

void plan_argmax(const PlanInput& op, OpPlan& out) {
  ArgmaxPlan& p = out.start<ArgmaxPlan>();
  const auto& dims = op.inputs[0].dims;
  const size_t axis = static_cast<size_t>(op.params[0]);
  p.outer = dims_product(dims, 0, axis);
  p.length = dims[axis];
  p.inner = dims_product(dims, axis + 1, dims.size());
  p.select_last = static_cast<int32_t>(op.params[2]);
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
  if (x.dtype != DType::kF32 && x.dtype != DType::kI32 && x.dtype != DType::kI64)
    return invalid_argument(prefix(kCumSum) + "operand is " + x.to_string() + ", expected f32, i32 or i64");
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
    {kSoftmax, "softmax", 1, 1, 1, 1, true, true, false, 0, lower_axis<kSoftmax>, raise_axis, infer_softmax,
     flops_softmax, workspace_softmax, plan_softmax},
    {kLayernorm, "layernorm", 3, 3, 1, 1, true, false, false, 0, lower_layernorm, raise_layernorm,
     infer_layernorm, flops_layernorm, nullptr, plan_layernorm},
    {kReduceSum, "reduce_sum", 1, 1, 1, 1, true, false, false, 0, lower_reduce<kReduceSum>, raise_reduce,
     infer_reduce<kReduceSum>, flops_reduce, nullptr, plan_reduce<kReduceSum>},
    {kReduceMean, "reduce_mean", 1, 1, 1, 1, true, false, false, 0, lower_reduce<kReduceMean>, raise_reduce,
     infer_reduce<kReduceMean>, flops_reduce, nullptr, plan_reduce<kReduceMean>},
    {kReduceMax, "reduce_max", 1, 1, 1, 1, true, false, false, 0, lower_reduce<kReduceMax>, raise_reduce,
     infer_reduce<kReduceMax>, flops_reduce, nullptr, plan_reduce<kReduceMax>},
    {kArgMax, "argmax", 1, 1, 1, 1, true, false, false, 0, lower_argmax, raise_argmax, infer_argmax,
     flops_reduce, nullptr, plan_argmax},
    {kCumSum, "cumsum", 1, 1, 1, 1, false, false, false, 0, lower_cumsum, raise_cumsum, infer_cumsum,
     flops_per_element, nullptr, plan_cumsum},
};

}  // namespace

std::span<const OpDef> normalization_ops() { return kDefs; }

}  // namespace hexir::ops::internal
