// Operators that move bytes without arithmetic, for any dtype: transpose,
// reshape (a view), concat, split, copy, gather, slice, pad, expand, and the
// run-time windows dynamic_slice and update_slice, scatter_nd and scatter_elements,
// gather_elements and gather_nd.
#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>

#include "hexir/base/half.h"
#include "util.h"

namespace hexir::ops::internal {
namespace {

using enum OpId;

// ---- transpose ----------------------------------------------------------------

Result<std::vector<int64_t>> lower_transpose(std::span<const TensorType> in, const AttrMap& attrs,
                                             std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kTranspose, attrs, {"perm"}));
  const size_t rank = in[0].rank();
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> perm, int_list_attr(kTranspose, attrs, "perm"));
  if (!find_attr(attrs, "perm"))  // numpy default: reverse the axes
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  if (perm.size() != rank)
    return invalid_argument(prefix(kTranspose) + "attribute 'perm' has " + std::to_string(perm.size()) +
                            " entries, operand has rank " + std::to_string(rank));
  for (int64_t& p : perm) {
    HEXIR_ASSIGN_OR_RETURN(p, normalize_axis(kTranspose, p, rank, "perm entry"));
  }
  return perm;
}

AttrMap raise_transpose(std::span<const TensorType>, std::span<const int64_t> params) {
  return {{"perm", int_list_value(params)}};
}

Result<std::vector<TensorType>> infer_transpose(std::span<const TensorType> in,
                                                std::span<const int64_t> params) {
  const TensorType& x = in[0];
  const size_t rank = x.rank();
  HEXIR_RETURN_IF_ERROR(check_param_count(kTranspose, params, rank));
  TensorType out{x.dtype, {}};
  bool seen[kMaxRank] = {};
  for (size_t i = 0; i < rank; ++i) {
    if (params[i] < 0 || params[i] >= static_cast<int64_t>(rank) || seen[params[i]])
      return invalid_argument(prefix(kTranspose) + "perm " + shape_str(params) +
                              " is not a permutation of 0.." + std::to_string(rank ? rank - 1 : 0));
    seen[params[i]] = true;
    out.dims.push_back(x.dims[static_cast<size_t>(params[i])]);
  }
  return one(std::move(out));
}

void plan_transpose(const PlanInput& op, OpPlan& out) {
  StridedPlan& p = out.start<StridedPlan>();
  const TensorType& x = op.inputs[0];
  int64_t strides[kMaxRank];
  row_major_strides(x.dims, strides);
  p.rank = static_cast<int32_t>(x.rank());
  p.element_size = static_cast<int32_t>(dtype_size(x.dtype));
  for (size_t i = 0; i < x.rank(); ++i) {
    p.out_dims[i] = x.dims[static_cast<size_t>(op.params[i])];
    p.in_stride[i] = strides[op.params[i]];
  }
  p.n = count_of(op.outputs[0]);
}

// ---- reshape (view) -------------------------------------------------------------

Result<std::vector<int64_t>> lower_reshape(std::span<const TensorType>, const AttrMap& attrs,
                                           std::span<const TensorType> declared) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kReshape, attrs, {}));
  if (declared.size() != 1) return invalid_argument(prefix(kReshape) + "needs its result type stated");
  return declared[0].dims;
}

Result<std::vector<TensorType>> infer_reshape(std::span<const TensorType> in,
                                              std::span<const int64_t> params) {
  const TensorType& x = in[0];
  if (params.size() > static_cast<size_t>(kMaxRank))
    return invalid_argument(prefix(kReshape) + "result rank exceeds " + std::to_string(kMaxRank));
  HEXIR_ASSIGN_OR_RETURN(uint64_t from, element_count(x.dims.data(), x.rank()));
  HEXIR_ASSIGN_OR_RETURN(uint64_t to, element_count(params.data(), params.size()));
  if (from != to)
    return invalid_argument(prefix(kReshape) + "cannot reshape " + shape_str(x.dims) + " (" +
                            std::to_string(from) + " elements) to " + shape_str(params) + " (" +
                            std::to_string(to) + " elements)");
  return one({x.dtype, std::vector<int64_t>(params.begin(), params.end())});
}

// ---- concat -------------------------------------------------------------------

template <OpId kId>
Result<std::vector<int64_t>> lower_axis(std::span<const TensorType> in, const AttrMap& attrs,
                                        int64_t fallback) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kId, attrs, {"axis"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, int_attr(kId, attrs, "axis", fallback));
  HEXIR_ASSIGN_OR_RETURN(int64_t norm, normalize_axis(kId, axis, in[0].rank(), "axis"));
  return std::vector<int64_t>{norm};
}

AttrMap raise_axis(std::span<const TensorType>, std::span<const int64_t> params) {
  return {{"axis", AttrValue{param_at(params, 0)}}};
}

Result<std::vector<int64_t>> lower_concat(std::span<const TensorType> in, const AttrMap& attrs,
                                          std::span<const TensorType>) {
  return lower_axis<kConcat>(in, attrs, -1);
}

Result<std::vector<TensorType>> infer_concat(std::span<const TensorType> in,
                                             std::span<const int64_t> params) {
  const TensorType& x = in[0];
  HEXIR_RETURN_IF_ERROR(check_param_count(kConcat, params, 1));
  HEXIR_RETURN_IF_ERROR(check_axis_param(kConcat, params[0], x.rank()));
  const size_t axis = static_cast<size_t>(params[0]);
  TensorType out = x;
  for (size_t i = 1; i < in.size(); ++i) {
    const TensorType& t = in[i];
    bool compatible = t.dtype == x.dtype && t.rank() == x.rank();
    for (size_t d = 0; compatible && d < x.rank(); ++d) compatible = d == axis || t.dims[d] == x.dims[d];
    if (!compatible)
      return invalid_argument(prefix(kConcat) + "operand " + std::to_string(i) + " " + t.to_string() +
                              " does not match " + x.to_string() + " outside axis " + std::to_string(axis));
    if (out.dims[axis] > (int64_t{1} << 62) - t.dims[axis])
      return invalid_argument(prefix(kConcat) + "size overflows");
    out.dims[axis] += t.dims[axis];
  }
  return one(std::move(out));
}

void plan_concat(const PlanInput& op, OpPlan& out) {
  const size_t axis = static_cast<size_t>(op.params[0]);
  ConcatPlan& p = out.start<ConcatPlan>(op.inputs.size());
  const TensorType& result = op.outputs[0];
  const int64_t element = dtype_size(result.dtype);
  p.outer = dims_product(result.dims, 0, axis);
  p.out_row_bytes = dims_product(result.dims, axis, result.rank()) * element;
  p.input_count = static_cast<int64_t>(op.inputs.size());
  int64_t* row_bytes = out.tail<ConcatPlan>();
  for (size_t k = 0; k < op.inputs.size(); ++k)
    row_bytes[k] = dims_product(op.inputs[k].dims, axis, op.inputs[k].rank()) * element;
}

// ---- split --------------------------------------------------------------------

Result<std::vector<int64_t>> lower_split(std::span<const TensorType> in, const AttrMap& attrs,
                                         std::span<const TensorType> declared) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kSplit, attrs, {"axis", "sizes"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, int_attr(kSplit, attrs, "axis", 0));
  HEXIR_ASSIGN_OR_RETURN(axis, normalize_axis(kSplit, axis, in[0].rank(), "axis"));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, int_list_attr(kSplit, attrs, "sizes"));
  const int64_t dim = in[0].dims[static_cast<size_t>(axis)];
  if (sizes.empty()) {  // equal parts, one per stated result
    const int64_t parts = static_cast<int64_t>(declared.size());
    if (parts < 1) return invalid_argument(prefix(kSplit) + "needs attribute 'sizes' or stated result types");
    if (dim % parts != 0)
      return invalid_argument(prefix(kSplit) + "axis of size " + std::to_string(dim) +
                              " does not split into " + std::to_string(parts) + " equal parts");
    sizes.assign(static_cast<size_t>(parts), dim / parts);
  }
  std::vector<int64_t> params{axis};
  params.insert(params.end(), sizes.begin(), sizes.end());
  return params;
}

AttrMap raise_split(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs{{"axis", AttrValue{param_at(params, 0)}}};
  if (params.size() > 1) attrs["sizes"] = int_list_value(params.subspan(1));
  return attrs;
}

Result<std::vector<TensorType>> infer_split(std::span<const TensorType> in, std::span<const int64_t> params) {
  const TensorType& x = in[0];
  if (params.size() < 2)
    return invalid_argument(prefix(kSplit) + "needs [axis, size...] with at least one size");
  HEXIR_RETURN_IF_ERROR(check_axis_param(kSplit, params[0], x.rank()));
  const size_t axis = static_cast<size_t>(params[0]);
  std::vector<TensorType> out;
  int64_t total = 0;
  for (size_t i = 1; i < params.size(); ++i) {
    if (params[i] < 0 || params[i] > x.dims[axis] - total)
      return invalid_argument(prefix(kSplit) + "sizes " + shape_str(params.subspan(1)) +
                              " do not add up to " + std::to_string(x.dims[axis]));
    total += params[i];
    out.push_back(x);
    out.back().dims[axis] = params[i];
  }
  if (total != x.dims[axis])
    return invalid_argument(prefix(kSplit) + "sizes " + shape_str(params.subspan(1)) + " add up to " +
                            std::to_string(total) + ", not the axis size " + std::to_string(x.dims[axis]));
  return out;
}

void plan_split(const PlanInput& op, OpPlan& out) {
  const size_t axis = static_cast<size_t>(op.params[0]);
  SplitPlan& p = out.start<SplitPlan>(op.outputs.size());
  const TensorType& x = op.inputs[0];
  const int64_t element = dtype_size(x.dtype);
  p.outer = dims_product(x.dims, 0, axis);
  p.in_row_bytes = dims_product(x.dims, axis, x.rank()) * element;
  p.output_count = static_cast<int64_t>(op.outputs.size());
  int64_t* row_bytes = out.tail<SplitPlan>();
  for (size_t k = 0; k < op.outputs.size(); ++k)
    row_bytes[k] = dims_product(op.outputs[k].dims, axis, op.outputs[k].rank()) * element;
}

// ---- copy ---------------------------------------------------------------------

Result<std::vector<int64_t>> lower_copy(std::span<const TensorType>, const AttrMap& attrs,
                                        std::span<const TensorType>) {
  return no_attributes(kCopy, attrs);
}

Result<std::vector<TensorType>> infer_copy(std::span<const TensorType> in, std::span<const int64_t> params) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kCopy, params, 0));
  return one(in[0]);
}

void plan_copy(const PlanInput& op, OpPlan& out) {
  CopyPlan& p = out.start<CopyPlan>();
  p.bytes = static_cast<int64_t>(*byte_size(op.inputs[0]));
  if (op.input_strides.empty() || op.input_strides[0].empty()) return;
  // A strided view materialized: the gather transpose and slice run.
  const TensorType& x = op.inputs[0];
  p.strided = 1;
  p.gather.n = count_of(x);
  p.gather.rank = static_cast<int32_t>(x.rank());
  p.gather.element_size = static_cast<int32_t>(dtype_size(x.dtype));
  for (size_t d = 0; d < x.rank(); ++d) {
    p.gather.out_dims[d] = x.dims[d];
    p.gather.in_stride[d] = op.input_strides[0][d];
  }
}

// ---- gather -------------------------------------------------------------------

Result<std::vector<int64_t>> lower_gather(std::span<const TensorType> in, const AttrMap& attrs,
                                          std::span<const TensorType>) {
  return lower_axis<kGather>(in, attrs, 0);
}

Result<std::vector<TensorType>> infer_gather(std::span<const TensorType> in,
                                             std::span<const int64_t> params) {
  const TensorType& data = in[0];
  const TensorType& indices = in[1];
  HEXIR_RETURN_IF_ERROR(check_param_count(kGather, params, 1));
  HEXIR_RETURN_IF_ERROR(check_axis_param(kGather, params[0], data.rank()));
  if (indices.dtype != DType::kI32 && indices.dtype != DType::kI64)
    return invalid_argument(prefix(kGather) + "indices are " + indices.to_string() + ", expected i32 or i64");
  const size_t axis = static_cast<size_t>(params[0]);
  if (data.dims[axis] == 0 && count_of(indices) > 0)
    return invalid_argument(prefix(kGather) + "gathers from an empty axis");
  TensorType out{data.dtype, {}};
  out.dims.assign(data.dims.begin(), data.dims.begin() + static_cast<std::ptrdiff_t>(axis));
  out.dims.insert(out.dims.end(), indices.dims.begin(), indices.dims.end());
  out.dims.insert(out.dims.end(), data.dims.begin() + static_cast<std::ptrdiff_t>(axis) + 1, data.dims.end());
  return one(std::move(out));
}

void plan_gather(const PlanInput& op, OpPlan& out) {
  GatherPlan& p = out.start<GatherPlan>();
  const TensorType& data = op.inputs[0];
  const size_t axis = static_cast<size_t>(op.params[0]);
  p.outer = dims_product(data.dims, 0, axis);
  p.axis_dim = data.dims[axis];
  p.inner_bytes = dims_product(data.dims, axis + 1, data.rank()) * dtype_size(data.dtype);
  p.index_count = count_of(op.inputs[1]);
  p.index_i64 = op.inputs[1].dtype == DType::kI64;
}

// ---- slice --------------------------------------------------------------------

constexpr int64_t kMaxStep = int64_t{1} << 62;

// ONNX Slice semantics: negative starts/ends count from the end and are
// clamped to the dim; a negative step walks backwards.
Result<std::vector<int64_t>> lower_slice(std::span<const TensorType> in, const AttrMap& attrs,
                                         std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kSlice, attrs, {"starts", "ends", "axes", "steps"}));
  const TensorType& x = in[0];
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> starts, int_list_attr(kSlice, attrs, "starts"));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> ends, int_list_attr(kSlice, attrs, "ends"));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> axes, int_list_attr(kSlice, attrs, "axes"));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> steps, int_list_attr(kSlice, attrs, "steps"));
  if (starts.size() != ends.size())
    return invalid_argument(prefix(kSlice) + "'starts' has " + std::to_string(starts.size()) +
                            " entries, 'ends' " + std::to_string(ends.size()));
  if (!find_attr(attrs, "axes"))
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (!find_attr(attrs, "steps")) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    return invalid_argument(prefix(kSlice) + "'starts', 'ends', 'axes' and 'steps' must have one length");
  std::vector<int64_t> params;
  for (int64_t d : x.dims) params.insert(params.end(), {0, 1, d});
  std::vector<bool> seen(x.rank(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    HEXIR_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(kSlice, axes[i], x.rank(), "axis"));
    if (seen[static_cast<size_t>(axis)])
      return invalid_argument(prefix(kSlice) + "'axes' lists an axis twice");
    seen[static_cast<size_t>(axis)] = true;
    const int64_t dim = x.dims[static_cast<size_t>(axis)];
    const int64_t step = steps[i];
    if (step == 0 || step > kMaxStep || step < -kMaxStep)
      return invalid_argument(prefix(kSlice) + "step " + std::to_string(step) +
                              " must be non-zero (and below 2^62)");
    const SliceBounds bounds = slice_bounds(starts[i], ends[i], step, dim);
    params[3 * static_cast<size_t>(axis)] = bounds.start;
    params[3 * static_cast<size_t>(axis) + 1] = step;
    params[3 * static_cast<size_t>(axis) + 2] = bounds.size;
  }
  return params;
}

// The dims a slice narrows, as ONNX starts, ends, axes and steps (every list
// empty when it narrows none).
AttrMap raise_slice(std::span<const TensorType> in, std::span<const int64_t> p) {
  const TensorType& x = in[0];
  std::vector<int64_t> starts, ends, axes, steps;
  for (size_t d = 0; d < x.rank() && 3 * d + 2 < p.size(); ++d) {
    const int64_t start = p[3 * d], step = p[3 * d + 1], size = p[3 * d + 2], dim = x.dims[d];
    if (start == 0 && step == 1 && size == dim) continue;
    int64_t end = size == 0 ? 0 : start + size * step;
    const int64_t first = size == 0 ? 0 : start;
    if (step < 0 && end < 0) end = -dim - 1;  // reads back as "before index 0"
    starts.push_back(first);
    ends.push_back(end);
    axes.push_back(static_cast<int64_t>(d));
    steps.push_back(size == 0 ? 1 : step);
  }
  return {{"starts", int_list_value(starts)},
          {"ends", int_list_value(ends)},
          {"axes", int_list_value(axes)},
          {"steps", int_list_value(steps)}};
}

Result<std::vector<TensorType>> infer_slice(std::span<const TensorType> in, std::span<const int64_t> params) {
  const TensorType& x = in[0];
  HEXIR_RETURN_IF_ERROR(check_param_count(kSlice, params, 3 * x.rank()));
  TensorType out{x.dtype, {}};
  for (size_t d = 0; d < x.rank(); ++d) {
    const int64_t start = params[3 * d], step = params[3 * d + 1], size = params[3 * d + 2];
    const int64_t dim = x.dims[d];
    // Every index start + i * step (i < size) must lie in [0, dim).
    bool ok = step != 0 && step <= kMaxStep && step >= -kMaxStep && size >= 0 && size <= dim;
    if (ok && size == 0) ok = start >= 0 && start <= dim;  // normalized (lowering writes 0)
    if (ok && size > 0) {
      const __int128 last = static_cast<__int128>(start) + static_cast<__int128>(size - 1) * step;
      ok = start >= 0 && start < dim && last >= 0 && last < dim;
    }
    if (!ok)
      return invalid_argument(prefix(kSlice) + "dim " + std::to_string(d) + ": start " +
                              std::to_string(start) + ", step " + std::to_string(step) + ", size " +
                              std::to_string(size) + " reach outside [0, " + std::to_string(dim) + ")");
    out.dims.push_back(size);
  }
  return one(std::move(out));
}

void plan_slice(const PlanInput& op, OpPlan& out) {
  StridedPlan& p = out.start<StridedPlan>();
  const TensorType& x = op.inputs[0];
  int64_t strides[kMaxRank];
  row_major_strides(x.dims, strides);
  p.rank = static_cast<int32_t>(x.rank());
  p.element_size = static_cast<int32_t>(dtype_size(x.dtype));
  for (size_t d = 0; d < x.rank(); ++d) {
    const int64_t size = op.params[3 * d + 2];
    if (size == 0) continue;  // nothing is read: offset and strides stay 0
    // start < dim and |step| * (size - 1) < dim: both products stay within the tensor.
    p.offset += op.params[3 * d] * strides[d];
    p.in_stride[d] = size > 1 ? op.params[3 * d + 1] * strides[d] : 0;
    p.out_dims[d] = size;
  }
  p.n = count_of(op.outputs[0]);
}

// ---- pad ------------------------------------------------------------------------

enum PadMode { kPadConstant = 0, kPadReflect = 1, kPadEdge = 2, kPadWrap = 3 };
constexpr int64_t kMaxPad = int64_t{1} << 48;

// The constant as the element bytes of `dtype`, zero-extended into a word.
Result<int64_t> pad_value_word(DType dtype, const AttrValue* v) {
  if (!v) return int64_t{0};
  const int64_t* i = std::get_if<int64_t>(&v->value);
  const double* f = std::get_if<double>(&v->value);
  if (!i && !f) return invalid_argument(prefix(kPad) + "attribute 'value' must be a number");
  const double d = i ? static_cast<double>(*i) : *f;
  switch (dtype) {
    case DType::kF32:
      return int64_t{std::bit_cast<uint32_t>(static_cast<float>(d))};
    case DType::kF16:
      return int64_t{float_to_half_bits(static_cast<float>(d))};
    case DType::kBF16:
      return int64_t{float_to_bfloat16_bits(static_cast<float>(d))};
    case DType::kBool:
      if (std::isnan(d)) return invalid_argument(prefix(kPad) + "a bool constant cannot be NaN");
      return int64_t{d != 0.0};
    default:
      break;
  }
  // Integers: the value must be one of the dtype.
  int64_t value = 0;
  if (i) {
    value = *i;
  } else if (std::isfinite(d) && std::trunc(d) == d && std::fabs(d) < 9.2e18) {
    value = static_cast<int64_t>(d);
  } else {
    return invalid_argument(prefix(kPad) + "value " + std::to_string(d) + " is not an integer");
  }
  int64_t min = 0, max = 0;
  switch (dtype) {
    case DType::kI8:
      min = -128, max = 127;
      break;
    case DType::kU8:
      min = 0, max = 255;
      break;
    case DType::kI32:
      min = INT32_MIN, max = INT32_MAX;
      break;
    default:
      return value;  // i64
  }
  if (value < min || value > max)
    return invalid_argument(prefix(kPad) + "value " + std::to_string(value) + " is out of range for " +
                            dtype_name(dtype));
  const int bits = static_cast<int>(dtype_size(dtype)) * 8;
  return static_cast<int64_t>(static_cast<uint64_t>(value) & ((uint64_t{1} << bits) - 1));
}

Result<std::vector<int64_t>> lower_pad(std::span<const TensorType> in, const AttrMap& attrs,
                                       std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kPad, attrs, {"mode", "pads", "value", "axes"}));
  const TensorType& x = in[0];
  const size_t rank = x.rank();
  int64_t mode = kPadConstant;
  if (const AttrValue* v = find_attr(attrs, "mode")) {
    auto* m = std::get_if<std::string>(&v->value);
    if (!m || (*m != "constant" && *m != "reflect" && *m != "edge" && *m != "wrap"))
      return invalid_argument(prefix(kPad) +
                              "attribute 'mode' must be \"constant\", \"reflect\", \"edge\" or \"wrap\"");
    mode = *m == "constant"  ? kPadConstant
           : *m == "reflect" ? kPadReflect
           : *m == "edge"    ? kPadEdge
                             : kPadWrap;
  }
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> pads, int_list_attr(kPad, attrs, "pads"));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> axes, int_list_attr(kPad, attrs, "axes"));
  if (!find_attr(attrs, "axes"))
    for (size_t d = 0; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  if (!find_attr(attrs, "pads")) pads.assign(2 * axes.size(), 0);
  if (pads.size() != 2 * axes.size())
    return invalid_argument(prefix(kPad) + "attribute 'pads' has " + std::to_string(pads.size()) +
                            " entries, expected " + std::to_string(2 * axes.size()) +
                            " (begin for each axis, then end for each)");
  std::vector<int64_t> begin(rank, 0), end(rank, 0);
  std::vector<bool> seen(rank, false);
  for (size_t k = 0; k < axes.size(); ++k) {
    HEXIR_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(kPad, axes[k], rank, "axis"));
    if (seen[static_cast<size_t>(axis)]) return invalid_argument(prefix(kPad) + "'axes' lists an axis twice");
    seen[static_cast<size_t>(axis)] = true;
    begin[static_cast<size_t>(axis)] = pads[k];
    end[static_cast<size_t>(axis)] = pads[axes.size() + k];
  }
  const AttrValue* value = find_attr(attrs, "value");
  if (value && mode != kPadConstant) {
    HEXIR_ASSIGN_OR_RETURN(int64_t word, pad_value_word(x.dtype, value));
    if (word != 0) return invalid_argument(prefix(kPad) + "attribute 'value' is for mode \"constant\" only");
  }
  int64_t word = 0;
  if (mode == kPadConstant) {
    HEXIR_ASSIGN_OR_RETURN(word, pad_value_word(x.dtype, value));
  }
  std::vector<int64_t> params{mode, word};
  params.insert(params.end(), begin.begin(), begin.end());
  params.insert(params.end(), end.begin(), end.end());
  return params;
}

// The value word as the number that lowers to it for x's dtype (absent when 0).
AttrMap raise_pad(std::span<const TensorType> in, std::span<const int64_t> p) {
  AttrMap attrs;
  if (p.size() < 2) return attrs;
  static const char* const kModes[] = {"constant", "reflect", "edge", "wrap"};
  const int64_t mode = p[0];
  if (mode >= kPadConstant && mode <= kPadWrap) attrs["mode"] = AttrValue{std::string(kModes[mode])};
  attrs["pads"] = int_list_value(p.subspan(2));
  const uint64_t word = static_cast<uint64_t>(p[1]);
  if (mode != kPadConstant || word == 0) return attrs;
  switch (in[0].dtype) {
    case DType::kF32:
      attrs["value"] = AttrValue{static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(word)))};
      break;
    case DType::kF16:
      attrs["value"] = AttrValue{static_cast<double>(half_bits_to_float(static_cast<uint16_t>(word)))};
      break;
    case DType::kBF16:
      attrs["value"] =
          AttrValue{static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(word) << 16))};
      break;
    case DType::kI8:
      attrs["value"] = AttrValue{int64_t{static_cast<int8_t>(word)}};
      break;
    case DType::kI32:
      attrs["value"] = AttrValue{int64_t{static_cast<int32_t>(word)}};
      break;
    default:  // u8, bool, i64
      attrs["value"] = AttrValue{static_cast<int64_t>(word)};
      break;
  }
  return attrs;
}

Result<std::vector<TensorType>> infer_pad(std::span<const TensorType> in, std::span<const int64_t> params) {
  const TensorType& x = in[0];
  const size_t rank = x.rank();
  HEXIR_RETURN_IF_ERROR(check_param_count(kPad, params, 2 + 2 * rank));
  const int64_t mode = params[0], value = params[1];
  if (mode < kPadConstant || mode > kPadWrap)
    return invalid_argument(prefix(kPad) + "mode " + std::to_string(mode) + " is not 0..3");
  const uint32_t size = dtype_size(x.dtype);
  const bool fits = x.dtype == DType::kBool ? (value == 0 || value == 1)
                    : size >= 8             ? true
                                            : (static_cast<uint64_t>(value) >> (8 * size)) == 0;
  if (!fits || (mode != kPadConstant && value != 0))
    return invalid_argument(prefix(kPad) + "value word " + std::to_string(value) + " is not a " +
                            dtype_name(x.dtype) + " element" + (mode != kPadConstant ? " (nor 0)" : ""));
  TensorType out{x.dtype, {}};
  for (size_t d = 0; d < rank; ++d) {
    const int64_t b = params[2 + d], e = params[2 + rank + d], dim = x.dims[d];
    if (b < -kMaxPad || b > kMaxPad || e < -kMaxPad || e > kMaxPad)
      return invalid_argument(prefix(kPad) + "pads must be within +-2^48");
    const int64_t kept = dim - std::max<int64_t>(0, -b) - std::max<int64_t>(0, -e);  // dim < 2^62
    if (kept < 0)
      return invalid_argument(prefix(kPad) + "dim " + std::to_string(d) + " of " + std::to_string(dim) +
                              " cannot lose " + std::to_string(-std::min<int64_t>(b, 0)) + " + " +
                              std::to_string(-std::min<int64_t>(e, 0)) + " elements");
    const int64_t size_d = dim + b + e;
    if (mode != kPadConstant && kept == 0 && size_d > 0)
      return invalid_argument(prefix(kPad) + "dim " + std::to_string(d) +
                              " has no elements to reflect, repeat or wrap");
    out.dims.push_back(size_d);
  }
  return one(std::move(out));
}

void plan_pad(const PlanInput& op, OpPlan& out) {
  PadPlan& p = out.start<PadPlan>();
  const TensorType& x = op.inputs[0];
  const size_t rank = x.rank();
  p.n = count_of(op.outputs[0]);
  p.rank = static_cast<int32_t>(rank);
  p.element_size = static_cast<int32_t>(dtype_size(x.dtype));
  p.mode = static_cast<int32_t>(op.params[0]);
  p.value = op.params[1];
  row_major_strides(x.dims, p.in_stride);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t b = op.params[2 + d], e = op.params[2 + rank + d];
    p.out_dims[d] = op.outputs[0].dims[d];
    p.begin[d] = b;
    p.lo[d] = std::max<int64_t>(0, -b);
    p.hi[d] = x.dims[d] - std::max<int64_t>(0, -e);
  }
}

// ---- expand -----------------------------------------------------------------------

Result<std::vector<int64_t>> lower_expand(std::span<const TensorType> in, const AttrMap& attrs,
                                          std::span<const TensorType> declared) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kExpand, attrs, {"shape"}));
  std::vector<int64_t> shape;
  if (find_attr(attrs, "shape")) {
    HEXIR_ASSIGN_OR_RETURN(shape, int_list_attr(kExpand, attrs, "shape"));
  } else if (declared.size() == 1) {
    shape = declared[0].dims;
  } else {
    return invalid_argument(prefix(kExpand) + "needs attribute 'shape' or a stated result type");
  }
  for (int64_t d : shape)
    if (d < 0) return invalid_argument(prefix(kExpand) + "shape " + shape_str(shape) + " has a negative dim");
  auto result = broadcast_shapes(in[0].dims, shape);
  if (!result)
    return invalid_argument(prefix(kExpand) + "shape " + shape_str(in[0].dims) + " does not broadcast with " +
                            shape_str(shape));
  return *result;
}

Result<std::vector<TensorType>> infer_expand(std::span<const TensorType> in,
                                             std::span<const int64_t> params) {
  const TensorType& x = in[0];
  if (params.size() > static_cast<size_t>(kMaxRank) || params.size() < x.rank())
    return invalid_argument(prefix(kExpand) + "result rank " + std::to_string(params.size()) + " is not in " +
                            std::to_string(x.rank()) + ".." + std::to_string(kMaxRank));
  for (int64_t d : params)
    if (d < 0)
      return invalid_argument(prefix(kExpand) + "result dims " + shape_str(params) + " are negative");
  auto result = broadcast_shapes(x.dims, params);
  if (!result || !std::equal(result->begin(), result->end(), params.begin(), params.end()))
    return invalid_argument(prefix(kExpand) + "shape " + shape_str(x.dims) + " does not broadcast to " +
                            shape_str(params));
  return one({x.dtype, std::vector<int64_t>(params.begin(), params.end())});
}

// A strided gather with stride 0 along the broadcast dims.
void plan_expand(const PlanInput& op, OpPlan& out) {
  StridedPlan& p = out.start<StridedPlan>();
  const TensorType& result = op.outputs[0];
  p.rank = static_cast<int32_t>(result.rank());
  p.element_size = static_cast<int32_t>(dtype_size(result.dtype));
  broadcast_strides(op.inputs[0].dims, result.rank(), p.in_stride);
  for (size_t d = 0; d < result.rank(); ++d) p.out_dims[d] = result.dims[d];
  p.n = count_of(result);
}

// ---- dynamic_slice, update_slice ------------------------------------------------

// Operands from `first` on are the start indices, one i64[] per dim of x.
Status check_start_indices(OpId id, std::span<const TensorType> in, size_t first) {
  const size_t rank = in[0].rank();
  if (in.size() != first + rank)
    return invalid_argument(prefix(id) + "expects " + std::to_string(first) + " tensor operand(s) and " +
                            std::to_string(rank) + " start indices (one i64[] per dim of " +
                            in[0].to_string() + "), got " + std::to_string(in.size()) + " operands");
  for (size_t d = 0; d < rank; ++d) {
    const TensorType& s = in[first + d];
    if (s.dtype != DType::kI64 || s.rank() != 0)
      return invalid_argument(prefix(id) + "start index " + std::to_string(d) + " is " + s.to_string() +
                              ", expected i64[]");
  }
  return ok_status();
}

void plan_window(const TensorType& x, std::span<const int64_t> window, OpPlan& out, int32_t out_of_range = kWindowClamp) {
  WindowPlan& p = out.start<WindowPlan>();
  p.out_of_range = out_of_range;
  p.rank = static_cast<int32_t>(x.rank());
  p.element_size = static_cast<int32_t>(dtype_size(x.dtype));
  p.x_bytes = static_cast<int64_t>(*byte_size(x));
  row_major_strides(x.dims, p.stride);
  for (size_t d = 0; d < x.rank(); ++d) {
    p.dims[d] = x.dims[d];
    p.window[d] = window[d];
  }
  p.n = dims_product(window, 0, window.size());
}

Result<std::vector<int64_t>> lower_dynamic_slice(std::span<const TensorType> in, const AttrMap& attrs,
                                                 std::span<const TensorType> declared) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kDynamicSlice, attrs, {"sizes"}));
  if (find_attr(attrs, "sizes")) return int_list_attr(kDynamicSlice, attrs, "sizes");
  if (declared.size() == 1 && declared[0].rank() == in[0].rank()) return declared[0].dims;
  return invalid_argument(prefix(kDynamicSlice) + "needs attribute 'sizes' or a stated result type");
}

AttrMap raise_dynamic_slice(std::span<const TensorType>, std::span<const int64_t> params) {
  return {{"sizes", int_list_value(params)}};
}

Result<std::vector<TensorType>> infer_dynamic_slice(std::span<const TensorType> in,
                                                    std::span<const int64_t> params) {
  const TensorType& x = in[0];
  HEXIR_RETURN_IF_ERROR(check_start_indices(kDynamicSlice, in, 1));
  HEXIR_RETURN_IF_ERROR(check_param_count(kDynamicSlice, params, x.rank()));
  for (size_t d = 0; d < x.rank(); ++d)
    if (params[d] < 0 || params[d] > x.dims[d])
      return invalid_argument(prefix(kDynamicSlice) + "sizes " + shape_str(params) + " do not fit in " +
                              x.to_string());
  return one({x.dtype, std::vector<int64_t>(params.begin(), params.end())});
}

void plan_dynamic_slice(const PlanInput& op, OpPlan& out) { plan_window(op.inputs[0], op.params, out); }

// out_of_range: "clamp" (no word, XLA's DynamicUpdateSlice), "skip" (one
// word, kWindowSkip: a window that would leave x writes nothing; the
// rewritten where(iota == p, new, cache), which matches no row for such a p)
// or "fail" (kWindowFail: negative starts from the end, outside fails; the
// rewritten ScatterElements).
Result<std::vector<int64_t>> lower_update_slice(std::span<const TensorType>, const AttrMap& attrs,
                                                std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kUpdateSlice, attrs, {"out_of_range"}));
  const AttrValue* v = find_attr(attrs, "out_of_range");
  if (!v) return std::vector<int64_t>{};
  const auto* mode = std::get_if<std::string>(&v->value);
  if (mode && *mode == "clamp") return std::vector<int64_t>{};
  if (mode && *mode == "skip") return std::vector<int64_t>{kWindowSkip};
  if (mode && *mode == "fail") return std::vector<int64_t>{kWindowFail};
  return invalid_argument(prefix(kUpdateSlice) +
                          "attribute 'out_of_range' must be \"clamp\", \"skip\" or \"fail\"");
}

AttrMap raise_update_slice(std::span<const TensorType>, std::span<const int64_t> params) {
  if (params.size() == 1 && params[0] == kWindowSkip) return {{"out_of_range", AttrValue{std::string("skip")}}};
  if (params.size() == 1 && params[0] == kWindowFail) return {{"out_of_range", AttrValue{std::string("fail")}}};
  return {};
}

Result<std::vector<TensorType>> infer_update_slice(std::span<const TensorType> in,
                                                   std::span<const int64_t> params) {
  const TensorType& x = in[0];
  if (!(params.empty() || (params.size() == 1 && (params[0] == kWindowSkip || params[0] == kWindowFail))))
    return invalid_argument(prefix(kUpdateSlice) +
                            "expects no parameter word or one: 1 (out_of_range skip) or 2 (fail)");
  HEXIR_RETURN_IF_ERROR(check_start_indices(kUpdateSlice, in, 2));
  const TensorType& update = in[1];
  bool fits = update.dtype == x.dtype && update.rank() == x.rank();
  for (size_t d = 0; fits && d < x.rank(); ++d) fits = update.dims[d] <= x.dims[d];
  if (!fits)
    return invalid_argument(prefix(kUpdateSlice) + "update " + update.to_string() + " does not fit in " +
                            x.to_string() + " (same dtype and rank, no dim larger)");
  return one(x);
}

void plan_update_slice(const PlanInput& op, OpPlan& out) {
  plan_window(op.inputs[0], op.inputs[1].dims, out,
              op.params.size() == 1 ? static_cast<int32_t>(op.params[0]) : kWindowClamp);
}

// ---- scatter_nd, scatter_elements ------------------------------------------------

constexpr const char* kScatterReductions[] = {"none", "add", "mul", "max", "min"};

Result<int64_t> lower_reduction(OpId id, const AttrMap& attrs) {
  const AttrValue* v = find_attr(attrs, "reduction");
  if (!v) return int64_t{kScatterNone};
  if (const auto* name = std::get_if<std::string>(&v->value))
    for (int64_t r = kScatterNone; r <= kScatterMin; ++r)
      if (*name == kScatterReductions[r]) return r;
  return invalid_argument(prefix(id) +
                          "attribute 'reduction' must be \"none\", \"add\", \"mul\", \"max\" or \"min\"");
}

AttrValue reduction_value(int64_t word) {
  return AttrValue{std::string(word >= kScatterNone && word <= kScatterMin ? kScatterReductions[word] : "?")};
}

// The reduction word, and the dtypes its arithmetic is defined for.
Status check_reduction(OpId id, int64_t word, DType dtype) {
  if (word < kScatterNone || word > kScatterMin)
    return invalid_argument(prefix(id) + "reduction " + std::to_string(word) + " is not 0..4");
  if (word != kScatterNone && dtype != DType::kF32 && dtype != DType::kI32 && dtype != DType::kI64)
    return invalid_argument(prefix(id) + "reduction \"" + kScatterReductions[word] + "\" on " +
                            std::string(dtype_name(dtype)) +
                            " data: only none moves any dtype; the others take f32, i32 or i64");
  return ok_status();
}

Status check_scatter_indices(OpId id, const TensorType& indices) {
  if (indices.dtype != DType::kI32 && indices.dtype != DType::kI64)
    return invalid_argument(prefix(id) + "indices are " + indices.to_string() + ", expected i32 or i64");
  return ok_status();
}

Result<std::vector<int64_t>> lower_scatter_nd(std::span<const TensorType>, const AttrMap& attrs,
                                              std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kScatterND, attrs, {"reduction"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t reduction, lower_reduction(kScatterND, attrs));
  return std::vector<int64_t>{reduction};
}

AttrMap raise_scatter_nd(std::span<const TensorType>, std::span<const int64_t> params) {
  return {{"reduction", reduction_value(param_at(params, 0))}};
}

Result<std::vector<TensorType>> infer_scatter_nd(std::span<const TensorType> in,
                                                 std::span<const int64_t> params) {
  const TensorType& data = in[0];
  const TensorType& indices = in[1];
  const TensorType& updates = in[2];
  HEXIR_RETURN_IF_ERROR(check_param_count(kScatterND, params, 1));
  HEXIR_RETURN_IF_ERROR(check_reduction(kScatterND, params[0], data.dtype));
  HEXIR_RETURN_IF_ERROR(check_scatter_indices(kScatterND, indices));
  const int64_t depth = indices.rank() == 0 ? 0 : indices.dims.back();
  if (depth < 1 || depth > static_cast<int64_t>(data.rank()))
    return invalid_argument(prefix(kScatterND) + "indices " + indices.to_string() +
                            ": the last dim (the indices per tuple) must be 1.." +
                            std::to_string(data.rank()) + " for data " + data.to_string());
  std::vector<int64_t> want(indices.dims.begin(), indices.dims.end() - 1);
  want.insert(want.end(), data.dims.begin() + depth, data.dims.end());
  if (updates.dtype != data.dtype || updates.dims != want)
    return invalid_argument(prefix(kScatterND) + "updates are " + updates.to_string() + ", expected " +
                            TensorType{data.dtype, want}.to_string() +
                            " (indices' dims but the last, then data's from " + std::to_string(depth) +
                            " on)");
  return one(data);
}

void plan_scatter_common(const PlanInput& op, ScatterPlan& p) {
  const TensorType& data = op.inputs[0];
  p.data_bytes = static_cast<int64_t>(*byte_size(data));
  p.n = count_of(op.inputs[2]);
  p.rank = static_cast<int32_t>(data.rank());
  p.element_size = static_cast<int32_t>(dtype_size(data.dtype));
  p.dtype = static_cast<int32_t>(data.dtype);
  p.index_i64 = op.inputs[1].dtype == DType::kI64;
  row_major_strides(data.dims, p.data_stride);
  for (size_t d = 0; d < data.rank(); ++d) p.data_dims[d] = data.dims[d];
}

void plan_scatter_nd(const PlanInput& op, OpPlan& out) {
  ScatterPlan& p = out.start<ScatterPlan>();
  plan_scatter_common(op, p);
  const TensorType& indices = op.inputs[1];
  const size_t depth = static_cast<size_t>(indices.dims.back());
  p.depth = static_cast<int32_t>(depth);
  p.reduction = static_cast<int32_t>(op.params[0]);
  p.tuples = dims_product(indices.dims, 0, indices.rank() - 1);
  p.slice = dims_product(op.inputs[0].dims, depth, op.inputs[0].rank());
}

Result<std::vector<int64_t>> lower_scatter_elements(std::span<const TensorType> in, const AttrMap& attrs,
                                                    std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kScatterElements, attrs, {"axis", "reduction"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, int_attr(kScatterElements, attrs, "axis", 0));
  HEXIR_ASSIGN_OR_RETURN(axis, normalize_axis(kScatterElements, axis, in[0].rank(), "axis"));
  HEXIR_ASSIGN_OR_RETURN(int64_t reduction, lower_reduction(kScatterElements, attrs));
  return std::vector<int64_t>{axis, reduction};
}

AttrMap raise_scatter_elements(std::span<const TensorType>, std::span<const int64_t> params) {
  return {{"axis", AttrValue{param_at(params, 0)}}, {"reduction", reduction_value(param_at(params, 1))}};
}

Result<std::vector<TensorType>> infer_scatter_elements(std::span<const TensorType> in,
                                                       std::span<const int64_t> params) {
  const TensorType& data = in[0];
  const TensorType& indices = in[1];
  const TensorType& updates = in[2];
  HEXIR_RETURN_IF_ERROR(check_param_count(kScatterElements, params, 2));
  HEXIR_RETURN_IF_ERROR(check_axis_param(kScatterElements, params[0], data.rank()));
  HEXIR_RETURN_IF_ERROR(check_reduction(kScatterElements, params[1], data.dtype));
  HEXIR_RETURN_IF_ERROR(check_scatter_indices(kScatterElements, indices));
  const size_t axis = static_cast<size_t>(params[0]);
  bool fits = indices.rank() == data.rank();
  for (size_t d = 0; fits && d < data.rank(); ++d) fits = d == axis || indices.dims[d] <= data.dims[d];
  if (!fits)
    return invalid_argument(prefix(kScatterElements) + "indices " + indices.to_string() +
                            " do not fit data " + data.to_string() +
                            " (same rank, no dim larger but along axis " + std::to_string(axis) + ")");
  if (updates.dtype != data.dtype || updates.dims != indices.dims)
    return invalid_argument(prefix(kScatterElements) + "updates are " + updates.to_string() + ", expected " +
                            TensorType{data.dtype, indices.dims}.to_string() +
                            " (data's dtype, indices' dims)");
  if (data.dims[axis] == 0 && count_of(indices) > 0)
    return invalid_argument(prefix(kScatterElements) + "scatters into an empty axis");
  return one(data);
}

void plan_scatter_elements(const PlanInput& op, OpPlan& out) {
  ScatterPlan& p = out.start<ScatterPlan>();
  plan_scatter_common(op, p);
  const TensorType& indices = op.inputs[1];
  p.axis = static_cast<int32_t>(op.params[0]);
  p.reduction = static_cast<int32_t>(op.params[1]);
  for (size_t d = 0; d < indices.rank(); ++d) p.index_dims[d] = indices.dims[d];
}

// ---- gather_elements, gather_nd ---------------------------------------------------
//
// The gathers are the scatters read the other way: their plan is ScatterPlan
// (the result element i reads where scatter_elements' update i lands; a
// gather_nd tuple reads the slice a scatter_nd tuple writes).

Result<std::vector<int64_t>> lower_gather_elements(std::span<const TensorType> in, const AttrMap& attrs,
                                                   std::span<const TensorType>) {
  return lower_axis<kGatherElements>(in, attrs, 0);
}

Result<std::vector<TensorType>> infer_gather_elements(std::span<const TensorType> in,
                                                      std::span<const int64_t> params) {
  const TensorType& data = in[0];
  const TensorType& indices = in[1];
  HEXIR_RETURN_IF_ERROR(check_param_count(kGatherElements, params, 1));
  HEXIR_RETURN_IF_ERROR(check_axis_param(kGatherElements, params[0], data.rank()));
  HEXIR_RETURN_IF_ERROR(check_scatter_indices(kGatherElements, indices));
  const size_t axis = static_cast<size_t>(params[0]);
  bool fits = indices.rank() == data.rank();
  for (size_t d = 0; fits && d < data.rank(); ++d) fits = d == axis || indices.dims[d] <= data.dims[d];
  if (!fits)
    return invalid_argument(prefix(kGatherElements) + "indices " + indices.to_string() + " do not fit data " +
                            data.to_string() + " (same rank, no dim larger but along axis " +
                            std::to_string(axis) + ")");
  if (data.dims[axis] == 0 && count_of(indices) > 0)
    return invalid_argument(prefix(kGatherElements) + "gathers from an empty axis");
  return one({data.dtype, indices.dims});
}

void plan_gather_elements(const PlanInput& op, OpPlan& out) {
  ScatterPlan& p = out.start<ScatterPlan>();
  const TensorType& data = op.inputs[0];
  const TensorType& indices = op.inputs[1];
  p.n = count_of(indices);
  p.rank = static_cast<int32_t>(data.rank());
  p.element_size = static_cast<int32_t>(dtype_size(data.dtype));
  p.dtype = static_cast<int32_t>(data.dtype);
  p.index_i64 = indices.dtype == DType::kI64;
  p.axis = static_cast<int32_t>(op.params[0]);
  row_major_strides(data.dims, p.data_stride);
  for (size_t d = 0; d < data.rank(); ++d) {
    p.data_dims[d] = data.dims[d];
    p.index_dims[d] = indices.dims[d];
  }
}

Result<std::vector<int64_t>> lower_gather_nd(std::span<const TensorType>, const AttrMap& attrs,
                                             std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kGatherND, attrs, {"batch_dims"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t batch_dims, int_attr(kGatherND, attrs, "batch_dims", 0));
  return std::vector<int64_t>{batch_dims};
}

AttrMap raise_gather_nd(std::span<const TensorType>, std::span<const int64_t> params) {
  return {{"batch_dims", AttrValue{param_at(params, 0)}}};
}

Result<std::vector<TensorType>> infer_gather_nd(std::span<const TensorType> in,
                                                std::span<const int64_t> params) {
  const TensorType& data = in[0];
  const TensorType& indices = in[1];
  HEXIR_RETURN_IF_ERROR(check_param_count(kGatherND, params, 1));
  HEXIR_RETURN_IF_ERROR(check_scatter_indices(kGatherND, indices));
  const int64_t batch = params[0];
  const int64_t rank = static_cast<int64_t>(data.rank());
  if (indices.rank() < 1 || batch < 0 || batch >= static_cast<int64_t>(indices.rank()) || batch >= rank)
    return invalid_argument(prefix(kGatherND) + "batch_dims " + std::to_string(batch) +
                            " must be below the ranks of data " + data.to_string() + " and indices " +
                            indices.to_string());
  const size_t b = static_cast<size_t>(batch);
  for (size_t d = 0; d < b; ++d)
    if (indices.dims[d] != data.dims[d])
      return invalid_argument(prefix(kGatherND) + "the " + std::to_string(batch) + " batch dims of indices " +
                              indices.to_string() + " differ from data's " + data.to_string());
  const int64_t depth = indices.dims.back();
  if (depth < 1 || depth > rank - batch)
    return invalid_argument(prefix(kGatherND) + "indices " + indices.to_string() +
                            ": the last dim (the indices per tuple) must be 1.." +
                            std::to_string(rank - batch) + " for data " + data.to_string() +
                            " and batch_dims " + std::to_string(batch));
  for (size_t d = b; d < b + static_cast<size_t>(depth); ++d)
    if (data.dims[d] == 0 && count_of(indices) > 0)
      return invalid_argument(prefix(kGatherND) + "gathers from an empty dim of " + data.to_string());
  std::vector<int64_t> dims(indices.dims.begin(), indices.dims.end() - 1);
  dims.insert(dims.end(), data.dims.begin() + batch + depth, data.dims.end());
  if (dims.size() > static_cast<size_t>(kMaxRank))
    return invalid_argument(prefix(kGatherND) + "result rank exceeds " + std::to_string(kMaxRank));
  return one({data.dtype, std::move(dims)});
}

void plan_gather_nd(const PlanInput& op, OpPlan& out) {
  ScatterPlan& p = out.start<ScatterPlan>();
  const TensorType& data = op.inputs[0];
  const TensorType& indices = op.inputs[1];
  const size_t batch = static_cast<size_t>(op.params[0]);
  const size_t depth = static_cast<size_t>(indices.dims.back());
  p.n = count_of(op.outputs[0]);
  p.element_size = static_cast<int32_t>(dtype_size(data.dtype));
  p.dtype = static_cast<int32_t>(data.dtype);
  p.index_i64 = indices.dtype == DType::kI64;
  p.depth = static_cast<int32_t>(depth);
  p.tuples = dims_product(indices.dims, 0, indices.rank() - 1);
  p.slice = dims_product(data.dims, batch + depth, data.rank());
  // The dims after the batch dims, as scatter_nd's data dims.
  const std::span<const int64_t> inner(data.dims.data() + batch, data.rank() - batch);
  p.rank = static_cast<int32_t>(inner.size());
  row_major_strides(inner, p.data_stride);
  for (size_t d = 0; d < inner.size(); ++d) p.data_dims[d] = inner[d];
  if (batch > 0) {
    p.batch_tuples = dims_product(indices.dims, batch, indices.rank() - 1);
    p.batch_stride = dims_product(data.dims, batch, data.rank());
  }
}

// Data movement: one FLOP per element written (a copy is work a
// recomputation repeats); reshape, a view, none.
constexpr OpDef kDefs[] = {
    {kTranspose, "transpose", 1, 1, 1, 1, false, false, false, 0, lower_transpose, raise_transpose,
     infer_transpose, flops_per_element, nullptr, plan_transpose},
    {kReshape, "reshape", 1, 1, 1, 1, false, false, true, 0, lower_reshape, raise_none, infer_reshape,
     flops_none, nullptr, nullptr},
    {kConcat, "concat", 1, -1, 1, 1, false, false, false, 0, lower_concat, raise_axis, infer_concat,
     flops_per_element, nullptr, plan_concat},
    {kCopy, "copy", 1, 1, 1, 1, false, false, false, 0, lower_copy, raise_none, infer_copy, flops_per_element,
     nullptr, plan_copy},
    {kSplit, "split", 1, 1, 1, -1, false, false, false, 0, lower_split, raise_split, infer_split,
     flops_per_element, nullptr, plan_split},
    {kGather, "gather", 2, 2, 1, 1, false, false, false, 0, lower_gather, raise_axis, infer_gather,
     flops_per_element, nullptr, plan_gather},
    {kSlice, "slice", 1, 1, 1, 1, false, false, false, 0, lower_slice, raise_slice, infer_slice,
     flops_per_element, nullptr, plan_slice},
    {kPad, "pad", 1, 1, 1, 1, false, false, false, 0, lower_pad, raise_pad, infer_pad, flops_per_element,
     nullptr, plan_pad},
    {kExpand, "expand", 1, 1, 1, 1, false, false, false, 0, lower_expand, raise_none, infer_expand,
     flops_per_element, nullptr, plan_expand},
    {kDynamicSlice, "dynamic_slice", 1, -1, 1, 1, false, false, false, 0, lower_dynamic_slice,
     raise_dynamic_slice, infer_dynamic_slice, flops_per_element, nullptr, plan_dynamic_slice},
    // In place on x only: update and the start indices are read while the result is written.
    {kUpdateSlice, "update_slice", 2, -1, 1, 1, false, true, false, 0, lower_update_slice, raise_update_slice,
     infer_update_slice, flops_per_element, nullptr, plan_update_slice, /*in_place_inputs=*/1u},
    // In place on data only: indices and updates are read while the result is written.
    {kScatterND, "scatter_nd", 3, 3, 1, 1, false, true, false, 0, lower_scatter_nd, raise_scatter_nd,
     infer_scatter_nd, flops_per_element, nullptr, plan_scatter_nd, /*in_place_inputs=*/1u,
     /*read_while_writing=*/6u},
    {kScatterElements, "scatter_elements", 3, 3, 1, 1, false, true, false, 0, lower_scatter_elements,
     raise_scatter_elements, infer_scatter_elements, flops_per_element, nullptr, plan_scatter_elements,
     /*in_place_inputs=*/1u, /*read_while_writing=*/6u},
    {kGatherElements, "gather_elements", 2, 2, 1, 1, false, false, false, 0, lower_gather_elements,
     raise_axis, infer_gather_elements, flops_per_element, nullptr, plan_gather_elements},
    {kGatherND, "gather_nd", 2, 2, 1, 1, false, false, false, 0, lower_gather_nd, raise_gather_nd,
     infer_gather_nd, flops_per_element, nullptr, plan_gather_nd},
};

}  // namespace

std::span<const OpDef> layout_ops() { return kDefs; }

}  // namespace hexir::ops::internal

namespace hexir::ops {

SliceBounds slice_bounds(int64_t start, int64_t end, int64_t step, int64_t dim) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  int64_t size = 0;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    if (end > start) size = (end - start + step - 1) / step;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    if (start > end) size = (start - end + (-step) - 1) / (-step);
  }
  return {size == 0 ? 0 : start, size};
}

}  // namespace hexir::ops
