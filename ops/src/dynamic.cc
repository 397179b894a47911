// Bounded dynamic shapes (docs/design-notes.md): the operators whose result
// size along one dim is data (nonzero, non_max_suppression, compress), each
// planned at an upper bound and giving its actual extent as a last i64[]
// result, and compact, which lays a padded bounded value out row-major.
#include <algorithm>

#include "util.h"

namespace hexir::ops::internal {
namespace {

constexpr OpId kNonZero = OpId::kNonZero;
constexpr OpId kNms = OpId::kNonMaxSuppression;
constexpr OpId kCompress = OpId::kCompress;
constexpr OpId kCompact = OpId::kCompact;
constexpr OpId kBound = OpId::kBound;
constexpr OpId kUnbound = OpId::kUnbound;

TensorType count_type() { return TensorType{DType::kI64, {}}; }

// ---- nonzero ------------------------------------------------------------------

// A bound given at compile time (--dim-bound), within [0, derived]: the
// optional last parameter word of the operators that make a bounded dim.
Result<int64_t> given_bound(OpId id, std::span<const int64_t> params, size_t at, int64_t derived) {
  if (params.size() <= at) return derived;
  if (params[at] < 0 || params[at] > derived)
    return invalid_argument(prefix(id) + "bound " + std::to_string(params[at]) + " is not in [0, " +
                            std::to_string(derived) + "]");
  return params[at];
}

Result<std::vector<int64_t>> lower_given_bound(OpId id, const AttrMap& attrs, std::vector<int64_t> words) {
  if (!find_attr(attrs, "bound")) return words;
  HEXIR_ASSIGN_OR_RETURN(int64_t bound, int_attr(id, attrs, "bound", 0));
  words.push_back(bound);
  return words;
}

Result<std::vector<TensorType>> infer_nonzero(std::span<const TensorType> in, std::span<const int64_t> params) {
  if (params.size() > 1) return invalid_argument(prefix(kNonZero) + "takes at most one parameter word (its bound)");
  const TensorType& x = in[0];
  if (x.rank() == 0) return invalid_argument(prefix(kNonZero) + "x is a scalar, expected rank >= 1");
  HEXIR_ASSIGN_OR_RETURN(int64_t bound, given_bound(kNonZero, params, 0, count_of(x)));
  TensorType indices{DType::kI64, {static_cast<int64_t>(x.rank()), bound}, 1};
  return std::vector<TensorType>{indices, count_type()};
}

void plan_nonzero(const PlanInput& op, OpPlan& out) {
  NonZeroPlan& p = out.start<NonZeroPlan>();
  const TensorType& x = op.inputs[0];
  p.count = count_of(x);
  p.bound = op.outputs[0].dims[1];
  p.rank = static_cast<int64_t>(x.rank());
  p.element_size = dtype_size(x.dtype);
  p.float_sign = x.dtype == DType::kF32 || x.dtype == DType::kF16 || x.dtype == DType::kBF16;
  for (size_t d = 0; d < x.rank(); ++d) p.dims[d] = x.dims[d];
}

// ---- non_max_suppression ------------------------------------------------------

Result<std::vector<int64_t>> lower_nms(std::span<const TensorType> in, const AttrMap& attrs,
                                       std::span<const TensorType> declared) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kNms, attrs, {"center_point_box", "max_output_boxes_per_class", "bound"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t center, int_attr(kNms, attrs, "center_point_box", 0));
  const int64_t boxes = in[0].rank() == 3 ? in[0].dims[1] : 0;
  // The bound per class: the attribute, else what the stated result says, else every box.
  int64_t per_class = boxes;
  const int64_t pairs = in[1].rank() == 3 ? in[1].dims[0] * in[1].dims[1] : 0;
  if (!declared.empty() && declared[0].rank() == 2 && pairs > 0) per_class = declared[0].dims[0] / pairs;
  HEXIR_ASSIGN_OR_RETURN(per_class, int_attr(kNms, attrs, "max_output_boxes_per_class", per_class));
  return lower_given_bound(kNms, attrs, {center, std::clamp<int64_t>(per_class, 0, boxes)});
}

AttrMap raise_nms(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs;
  attrs["center_point_box"].value = param_at(params, 0);
  attrs["max_output_boxes_per_class"].value = param_at(params, 1);
  if (params.size() > 2) attrs["bound"].value = params[2];
  return attrs;
}

Result<std::vector<TensorType>> infer_nms(std::span<const TensorType> in, std::span<const int64_t> params) {
  if (params.size() != 2 && params.size() != 3)
    return invalid_argument(prefix(kNms) + "expected 2 or 3 parameter words, got " + std::to_string(params.size()));
  const TensorType &boxes = in[0], &scores = in[1];
  if (boxes.dtype != DType::kF32 || boxes.rank() != 3 || boxes.dims[2] != 4)
    return invalid_argument(prefix(kNms) + "boxes are " + boxes.to_string() + ", expected f32[B,N,4]");
  if (scores.dtype != DType::kF32 || scores.rank() != 3 || scores.dims[0] != boxes.dims[0] ||
      scores.dims[2] != boxes.dims[1])
    return invalid_argument(prefix(kNms) + "scores are " + scores.to_string() + ", expected f32[" +
                            std::to_string(boxes.dims[0]) + ",C," + std::to_string(boxes.dims[1]) + "]");
  const DType scalar_types[] = {DType::kI64, DType::kF32, DType::kF32};
  const char* names[] = {"max_output_boxes_per_class", "iou_threshold", "score_threshold"};
  for (size_t i = 2; i < 5; ++i)
    if (in[i].dtype != scalar_types[i - 2] || count_of(in[i]) != 1)
      return invalid_argument(prefix(kNms) + names[i - 2] + " is " + in[i].to_string() + ", expected " +
                              dtype_name(scalar_types[i - 2]) + "[] (one element)");
  if (params[0] != 0 && params[0] != 1)
    return invalid_argument(prefix(kNms) + "center_point_box is " + std::to_string(params[0]) + ", expected 0 or 1");
  if (params[1] < 0 || params[1] > boxes.dims[1])
    return invalid_argument(prefix(kNms) + "bound per class " + std::to_string(params[1]) + " is not in [0, " +
                            std::to_string(boxes.dims[1]) + "]");
  const uint64_t rows = static_cast<uint64_t>(boxes.dims[0]) * static_cast<uint64_t>(scores.dims[1]) *
                        static_cast<uint64_t>(params[1]);
  if (rows > (uint64_t{1} << 40)) return invalid_argument(prefix(kNms) + "too many result rows");
  HEXIR_ASSIGN_OR_RETURN(int64_t bound, given_bound(kNms, params, 2, static_cast<int64_t>(rows)));
  TensorType selected{DType::kI64, {bound, 3}, 0};
  return std::vector<TensorType>{selected, count_type()};
}

void plan_nms(const PlanInput& op, OpPlan& out) {
  NmsPlan& p = out.start<NmsPlan>();
  p.batches = op.inputs[0].dims[0];
  p.boxes = op.inputs[0].dims[1];
  p.classes = op.inputs[1].dims[1];
  p.center_point_box = op.params[0];
  p.per_class = op.params[1];
  p.rows = op.outputs[0].dims[0];
}

uint64_t flops_nms(std::span<const TensorType> in, std::span<const TensorType>, std::span<const int64_t> params) {
  // Each kept box is tested against the ones kept before it, per batch and class.
  const uint64_t pairs = mul_sat(static_cast<uint64_t>(in[1].dims[0]), static_cast<uint64_t>(in[1].dims[1]));
  const uint64_t k = static_cast<uint64_t>(param_at(params, 1));
  return mul_sat(pairs, add_sat(mul_sat(k, elements_sat(in[0]) / 4 + 1), 0));
}

// nms scratch, per box: the candidates' order and the kept boxes' indices
// (cpu and CUDA), and the cpu's cached corners of every box and of the kept ones.
uint64_t workspace_nms(const PlanInput& op) {
  return static_cast<uint64_t>(op.inputs[0].dims[1]) * (sizeof(int64_t) * 2 + sizeof(NmsBox) * 2);
}

// ---- compress -----------------------------------------------------------------

Result<std::vector<int64_t>> lower_compress(std::span<const TensorType> in, const AttrMap& attrs,
                                            std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kCompress, attrs, {"axis", "bound"}));
  if (!find_attr(attrs, "axis")) return lower_given_bound(kCompress, attrs, {-1});
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, int_attr(kCompress, attrs, "axis", 0));
  HEXIR_ASSIGN_OR_RETURN(axis, normalize_axis(kCompress, axis, in[0].rank(), "axis"));
  return lower_given_bound(kCompress, attrs, {axis});
}

AttrMap raise_compress(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs;
  if (param_at(params, 0) >= 0) attrs["axis"].value = param_at(params, 0);
  if (params.size() > 1) attrs["bound"].value = params[1];
  return attrs;
}

Result<std::vector<TensorType>> infer_compress(std::span<const TensorType> in, std::span<const int64_t> params) {
  if (params.size() != 1 && params.size() != 2)
    return invalid_argument(prefix(kCompress) + "expected [axis] or [axis, bound]");
  const TensorType &x = in[0], &cond = in[1];
  if (cond.dtype != DType::kBool || cond.rank() != 1)
    return invalid_argument(prefix(kCompress) + "condition is " + cond.to_string() + ", expected bool[L]");
  if (params[0] < -1 || params[0] >= static_cast<int64_t>(x.rank()))
    return invalid_argument(prefix(kCompress) + "axis " + std::to_string(params[0]) + " out of range for rank " +
                            std::to_string(x.rank()));
  TensorType y{x.dtype, {count_of(x)}, 0};
  if (params[0] >= 0) y = TensorType{x.dtype, x.dims, static_cast<int32_t>(params[0])};
  int64_t& dim = y.dims[static_cast<size_t>(y.bounded)];
  HEXIR_ASSIGN_OR_RETURN(dim, given_bound(kCompress, params, 1, std::min(dim, cond.dims[0])));
  return std::vector<TensorType>{y, count_type()};
}

void plan_compress(const PlanInput& op, OpPlan& out) {
  CompressPlan& p = out.start<CompressPlan>();
  const TensorType& x = op.inputs[0];
  const int64_t axis = op.params[0];
  const int64_t elem = dtype_size(x.dtype);
  if (axis < 0) {
    p.outer = 1, p.axis_dim = count_of(x), p.inner_bytes = elem;
  } else {
    const size_t a = static_cast<size_t>(axis);
    p.outer = dims_product(x.dims, 0, a);
    p.axis_dim = x.dims[a];
    p.inner_bytes = dims_product(x.dims, a + 1, x.rank()) * elem;
  }
  p.cond_len = std::min(p.axis_dim, op.inputs[1].dims[0]);
  p.bound = op.outputs[0].dims[axis < 0 ? 0 : static_cast<size_t>(axis)];
}

// ---- compact ------------------------------------------------------------------

Result<std::vector<TensorType>> infer_compact(std::span<const TensorType> in, std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kCompact, params, 0));
  if (!in[0].has_bound()) return invalid_argument(prefix(kCompact) + in[0].to_string() + " has no bounded dim");
  if (in[1].dtype != DType::kI64 || in[1].rank() != 0)
    return invalid_argument(prefix(kCompact) + "extent is " + in[1].to_string() + ", expected i64[]");
  return one(in[0]);
}

// x as [outer, bound, inner_bytes] around dim d (compact's and bound's geometry).
void plan_rows(const TensorType& x, size_t d, OpPlan& out) {
  CompactPlan& p = out.start<CompactPlan>();
  p.outer = dims_product(x.dims, 0, d);
  p.bound = x.dims[d];
  p.inner_bytes = dims_product(x.dims, d + 1, x.rank()) * dtype_size(x.dtype);
}

void plan_compact(const PlanInput& op, OpPlan& out) {
  plan_rows(op.inputs[0], static_cast<size_t>(op.inputs[0].bounded), out);
}

// ---- bound and unbound --------------------------------------------------------

Result<std::vector<int64_t>> lower_bound(std::span<const TensorType> in, const AttrMap& attrs,
                                         std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kBound, attrs, {"dim"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t dim, int_attr(kBound, attrs, "dim", 0));
  HEXIR_ASSIGN_OR_RETURN(dim, normalize_axis(kBound, dim, in[0].rank(), "dim"));
  return std::vector<int64_t>{dim};
}

AttrMap raise_bound(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs;
  attrs["dim"].value = param_at(params, 0);
  return attrs;
}

Result<std::vector<TensorType>> infer_bound(std::span<const TensorType> in, std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kBound, params, 1));
  const TensorType &x = in[0], &n = in[1];
  HEXIR_RETURN_IF_ERROR(check_axis_param(kBound, params[0], x.rank()));
  if (n.dtype != DType::kI64 || n.rank() != 0)
    return invalid_argument(prefix(kBound) + "extent is " + n.to_string() + ", expected i64[]");
  TensorType y = x;
  y.bounded = static_cast<int32_t>(params[0]);
  return one(y);
}

void plan_bound(const PlanInput& op, OpPlan& out) { plan_rows(op.inputs[0], static_cast<size_t>(op.params[0]), out); }

Result<std::vector<TensorType>> infer_unbound(std::span<const TensorType> in, std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kUnbound, params, 0));
  if (!in[0].has_bound()) return invalid_argument(prefix(kUnbound) + in[0].to_string() + " has no bounded dim");
  TensorType y = in[0];
  y.bounded = -1;
  return one(y);
}

void plan_unbound(const PlanInput& op, OpPlan& out) {
  out.start<CopyPlan>().bytes = count_of(op.inputs[0]) * dtype_size(op.inputs[0].dtype);
}

Result<std::vector<int64_t>> lower_nonzero(std::span<const TensorType>, const AttrMap& attrs,
                                           std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kNonZero, attrs, {"bound"}));
  return lower_given_bound(kNonZero, attrs, {});
}

AttrMap raise_nonzero(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs;
  if (!params.empty()) attrs["bound"].value = params[0];
  return attrs;
}
Result<std::vector<int64_t>> lower_plain_compact(std::span<const TensorType>, const AttrMap& attrs,
                                                 std::span<const TensorType>) {
  return no_attributes(kCompact, attrs);
}
Result<std::vector<int64_t>> lower_plain_unbound(std::span<const TensorType>, const AttrMap& attrs,
                                                 std::span<const TensorType>) {
  return no_attributes(kUnbound, attrs);
}

constexpr OpDef kDefs[] = {
    {kNonZero, "nonzero", 1, 1, 2, 2, false, false, false, 0, lower_nonzero, raise_nonzero, infer_nonzero,
     flops_per_element, nullptr, plan_nonzero},
    {kNms, "non_max_suppression", 5, 5, 2, 2, false, false, false, 0, lower_nms, raise_nms, infer_nms, flops_nms,
     workspace_nms, plan_nms},
    {kCompress, "compress", 2, 2, 2, 2, false, false, false, 0, lower_compress, raise_compress, infer_compress,
     flops_per_element, nullptr, plan_compress},
    // Reads its extent (input 1) of input 0's bounded dim.
    {kCompact, "compact", 2, 2, 1, 1, false, false, false, 0, lower_plain_compact, raise_none, infer_compact,
     flops_per_element, nullptr, plan_compact, ~0u, 0, /*extent_input=*/1, /*extent_of=*/0},
    // In place on x: the rows past the extent are zeroed where they are.
    {kBound, "bound", 2, 2, 1, 1, false, true, false, 0, lower_bound, raise_bound, infer_bound, flops_per_element,
     nullptr, plan_bound, /*in_place_inputs=*/1u},
    {kUnbound, "unbound", 1, 1, 1, 1, false, false, false, 0, lower_plain_unbound, raise_none, infer_unbound,
     flops_per_element, nullptr, plan_unbound},
};

}  // namespace

std::span<const OpDef> dynamic_ops() { return kDefs; }

}  // namespace hexir::ops::internal
