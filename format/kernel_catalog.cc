#include "hexir/format/kernel_catalog.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace hexir::format {
namespace {

using enum KernelId;
constexpr KernelClass kBin = KernelClass::kElementwiseBinary;
constexpr KernelClass kUn = KernelClass::kElementwiseUnary;
constexpr KernelClass kOth = KernelClass::kOther;

// Ordered by KernelId; checked by a static_assert-like loop in kernel_info.
constexpr KernelInfo kKernels[kKernelCount] = {
    {kAdd, "add", kBin, 2, 2, true, false, false},
    {kSub, "sub", kBin, 2, 2, true, false, false},
    {kMul, "mul", kBin, 2, 2, true, false, false},
    {kDiv, "div", kBin, 2, 2, true, false, false},
    {kMaximum, "maximum", kBin, 2, 2, true, false, false},
    {kMinimum, "minimum", kBin, 2, 2, true, false, false},
    {kRelu, "relu", kUn, 1, 1, true, false, false},
    {kGelu, "gelu", kUn, 1, 1, true, false, false},
    {kSilu, "silu", kUn, 1, 1, true, false, false},
    {kSigmoid, "sigmoid", kUn, 1, 1, true, false, false},
    {kTanh, "tanh", kUn, 1, 1, true, false, false},
    {kExp, "exp", kUn, 1, 1, true, false, false},
    {kSqrt, "sqrt", kUn, 1, 1, true, false, false},
    {kRsqrt, "rsqrt", kUn, 1, 1, true, false, false},
    {kNeg, "neg", kUn, 1, 1, true, false, false},
    {kMatmul, "matmul", kOth, 2, 2, false, false, false},
    {kSoftmax, "softmax", kOth, 1, 1, true, false, false},
    {kLayernorm, "layernorm", kOth, 3, 3, false, false, false},
    {kTranspose, "transpose", kOth, 1, 1, false, false, true},
    {kReshape, "reshape", kOth, 1, 1, false, true, true},
    {kReduceSum, "reduce_sum", kOth, 1, 1, false, false, false},
    {kReduceMean, "reduce_mean", kOth, 1, 1, false, false, false},
    {kConcat, "concat", kOth, 1, -1, false, false, true},
    {kCopy, "copy", kOth, 1, 1, false, false, true},
};

constexpr bool catalog_is_ordered() {
  for (int i = 0; i < kKernelCount; ++i)
    if (static_cast<int>(kKernels[i].id) != i) return false;
  return true;
}
static_assert(catalog_is_ordered(), "kKernels must be ordered by KernelId");

std::string shape_str(std::span<const int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string kernel_prefix(KernelId id) { return std::string("@") + kernel_info(id).name + ": "; }

// Turns a possibly negative axis into 0..rank-1.
Result<int64_t> normalize_axis(KernelId id, int64_t axis, size_t rank, const char* what) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r || r == 0)
    return invalid_argument(kernel_prefix(id) + what + " " + std::to_string(axis) + " is out of range for rank " +
                            std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

const AttrValue* find_attr(const AttrMap& attrs, std::string_view name) {
  auto it = attrs.find(name);
  return it == attrs.end() ? nullptr : &it->second;
}

Status check_attr_names(KernelId id, const AttrMap& attrs, std::initializer_list<std::string_view> allowed) {
  for (const auto& [name, value] : attrs) {
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      return invalid_argument(kernel_prefix(id) + "unknown attribute '" + name + "'" +
                              (list.empty() ? " (this kernel takes none)" : " (expected one of: " + list + ")"));
    }
  }
  return ok_status();
}

Result<int64_t> int_attr(KernelId id, const AttrMap& attrs, std::string_view name, int64_t fallback) {
  const AttrValue* v = find_attr(attrs, name);
  if (!v) return fallback;
  if (auto* i = std::get_if<int64_t>(&v->value)) return *i;
  return invalid_argument(kernel_prefix(id) + "attribute '" + std::string(name) + "' must be an integer");
}

Result<std::vector<int64_t>> int_list_attr(KernelId id, const AttrMap& attrs, std::string_view name) {
  const AttrValue* v = find_attr(attrs, name);
  std::vector<int64_t> out;
  if (!v) return out;
  if (auto* i = std::get_if<int64_t>(&v->value)) return std::vector<int64_t>{*i};
  auto* list = std::get_if<std::vector<AttrValue>>(&v->value);
  if (!list) return invalid_argument(kernel_prefix(id) + "attribute '" + std::string(name) + "' must be a list of integers");
  for (const AttrValue& e : *list) {
    auto* i = std::get_if<int64_t>(&e.value);
    if (!i) return invalid_argument(kernel_prefix(id) + "attribute '" + std::string(name) + "' must be a list of integers");
    out.push_back(*i);
  }
  return out;
}

Status check_operand_count(KernelId id, size_t n) {
  const KernelInfo& k = kernel_info(id);
  if (static_cast<int>(n) < k.min_inputs || (k.max_inputs >= 0 && static_cast<int>(n) > k.max_inputs)) {
    std::string expected = k.max_inputs < 0 ? "at least " + std::to_string(k.min_inputs)
                           : k.min_inputs == k.max_inputs ? std::to_string(k.min_inputs)
                                                          : std::to_string(k.min_inputs) + ".." + std::to_string(k.max_inputs);
    return invalid_argument(kernel_prefix(id) + "expects " + expected + " operand(s), got " + std::to_string(n));
  }
  return ok_status();
}

Status check_param_count(KernelId id, std::span<const int64_t> params, size_t expected) {
  if (params.size() != expected)
    return invalid_argument(kernel_prefix(id) + "expects " + std::to_string(expected) + " parameter word(s), got " +
                            std::to_string(params.size()));
  return ok_status();
}

Status check_axis_param(KernelId id, int64_t axis, size_t rank) {
  if (axis < 0 || axis >= static_cast<int64_t>(rank))
    return invalid_argument(kernel_prefix(id) + "axis parameter " + std::to_string(axis) + " out of range for rank " +
                            std::to_string(rank));
  return ok_status();
}

constexpr size_t kMaxRank = 8;

}  // namespace

const KernelInfo& kernel_info(KernelId id) { return kKernels[static_cast<int>(id)]; }

std::optional<KernelId> find_kernel(std::string_view name) {
  for (const KernelInfo& k : kKernels)
    if (name == k.name) return k.id;
  return std::nullopt;
}

uint64_t kernel_workspace_bytes(KernelId id, std::span<const TensorType> inputs,
                                std::span<const int64_t> params) {
  // softmax over a non-last axis walks its rows with a stride; with one
  // double sum and one float max per column of the inner block it runs
  // unit-stride instead (same arithmetic per element, same results).
  if (id == KernelId::kSoftmax && inputs.size() == 1 && !params.empty() && params[0] >= 0 &&
      static_cast<uint64_t>(params[0]) + 1 < inputs[0].dims.size()) {
    uint64_t inner = 1;
    for (size_t d = static_cast<size_t>(params[0]) + 1; d < inputs[0].dims.size(); ++d) {
      const int64_t dim = inputs[0].dims[d];
      if (dim <= 0) return 0;
      if (__builtin_mul_overflow(inner, static_cast<uint64_t>(dim), &inner)) return 0;
    }
    uint64_t bytes = 0;
    if (inner <= 1 || __builtin_mul_overflow(inner, uint64_t{sizeof(double) + sizeof(float)}, &bytes))
      return 0;
    return bytes;
  }
  return 0;
}

std::optional<std::vector<int64_t>> broadcast_shapes(std::span<const int64_t> a, std::span<const int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) out[i] = da;
    else if (da == 1) out[i] = db;
    else return std::nullopt;
  }
  return out;
}

Result<std::vector<int64_t>> lower_attributes(KernelId id, std::span<const TensorType> inputs, const AttrMap& attrs,
                                              const TensorType& result) {
  HEXIR_RETURN_IF_ERROR(check_operand_count(id, inputs.size()));
  const size_t rank = inputs[0].rank();
  switch (id) {
    case kGelu: {
      HEXIR_RETURN_IF_ERROR(check_attr_names(id, attrs, {"approximate"}));
      const AttrValue* v = find_attr(attrs, "approximate");
      if (!v) return std::vector<int64_t>{0};
      auto* s = std::get_if<std::string>(&v->value);
      if (!s || (*s != "none" && *s != "tanh" && *s != "erf"))
        return invalid_argument(kernel_prefix(id) + "attribute 'approximate' must be \"none\" or \"tanh\"");
      return std::vector<int64_t>{*s == "tanh" ? 1 : 0};
    }
    case kSoftmax:
    case kConcat: {
      HEXIR_RETURN_IF_ERROR(check_attr_names(id, attrs, {"axis"}));
      HEXIR_ASSIGN_OR_RETURN(int64_t axis, int_attr(id, attrs, "axis", -1));
      HEXIR_ASSIGN_OR_RETURN(int64_t norm, normalize_axis(id, axis, rank, "axis"));
      return std::vector<int64_t>{norm};
    }
    case kLayernorm: {
      HEXIR_RETURN_IF_ERROR(check_attr_names(id, attrs, {"axis", "epsilon"}));
      HEXIR_ASSIGN_OR_RETURN(int64_t axis, int_attr(id, attrs, "axis", -1));
      HEXIR_ASSIGN_OR_RETURN(int64_t norm, normalize_axis(id, axis, rank, "axis"));
      double epsilon = 1e-5;
      if (const AttrValue* v = find_attr(attrs, "epsilon")) {
        if (auto* d = std::get_if<double>(&v->value)) epsilon = *d;
        else if (auto* i = std::get_if<int64_t>(&v->value)) epsilon = static_cast<double>(*i);
        else return invalid_argument(kernel_prefix(id) + "attribute 'epsilon' must be a number");
      }
      if (!(epsilon >= 0) || !std::isfinite(epsilon))
        return invalid_argument(kernel_prefix(id) + "attribute 'epsilon' must be finite and >= 0");
      return std::vector<int64_t>{norm, std::bit_cast<int64_t>(epsilon)};
    }
    case kTranspose: {
      HEXIR_RETURN_IF_ERROR(check_attr_names(id, attrs, {"perm"}));
      HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> perm, int_list_attr(id, attrs, "perm"));
      if (!find_attr(attrs, "perm"))  // numpy default: reverse the axes
        for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
      if (perm.size() != rank)
        return invalid_argument(kernel_prefix(id) + "attribute 'perm' has " + std::to_string(perm.size()) +
                                " entries, operand has rank " + std::to_string(rank));
      for (int64_t& p : perm) {
        HEXIR_ASSIGN_OR_RETURN(p, normalize_axis(id, p, rank, "perm entry"));
      }
      return perm;
    }
    case kReshape:
      HEXIR_RETURN_IF_ERROR(check_attr_names(id, attrs, {}));
      return result.dims;
    case kReduceSum:
    case kReduceMean: {
      HEXIR_RETURN_IF_ERROR(check_attr_names(id, attrs, {"axes", "keepdims"}));
      HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> axes, int_list_attr(id, attrs, "axes"));
      int64_t keepdims = 0;
      if (const AttrValue* v = find_attr(attrs, "keepdims")) {
        auto* i = std::get_if<int64_t>(&v->value);
        if (!i || (*i != 0 && *i != 1))
          return invalid_argument(kernel_prefix(id) + "attribute 'keepdims' must be 0 or 1");
        keepdims = *i;
      }
      for (int64_t& a : axes) {
        HEXIR_ASSIGN_OR_RETURN(a, normalize_axis(id, a, rank, "axis"));
      }
      std::sort(axes.begin(), axes.end());
      if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
        return invalid_argument(kernel_prefix(id) + "attribute 'axes' lists an axis twice");
      std::vector<int64_t> params{keepdims};
      params.insert(params.end(), axes.begin(), axes.end());
      return params;
    }
    default:
      HEXIR_RETURN_IF_ERROR(check_attr_names(id, attrs, {}));
      return std::vector<int64_t>{};
  }
}

Result<TensorType> infer_result_type(KernelId id, std::span<const TensorType> inputs, std::span<const int64_t> params) {
  if (static_cast<int>(id) >= kKernelCount) return invalid_argument("unknown kernel id");
  HEXIR_RETURN_IF_ERROR(check_operand_count(id, inputs.size()));
  const KernelInfo& info = kernel_info(id);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].rank() > kMaxRank)
      return invalid_argument(kernel_prefix(id) + "operand " + std::to_string(i) + " has rank " +
                              std::to_string(inputs[i].rank()) + ", more than the supported " + std::to_string(kMaxRank));
    if (!info.any_dtype && inputs[i].dtype != DType::kF32)
      return invalid_argument(kernel_prefix(id) + "operand " + std::to_string(i) + " is " + inputs[i].to_string() +
                              ", only f32 is supported");
    HEXIR_RETURN_IF_ERROR(byte_size(inputs[i]).status());
  }
  const TensorType& x = inputs[0];
  const size_t rank = x.rank();
  TensorType out{x.dtype, {}};
  switch (info.klass) {
    case KernelClass::kElementwiseBinary: {
      HEXIR_RETURN_IF_ERROR(check_param_count(id, params, 0));
      auto dims = broadcast_shapes(inputs[0].dims, inputs[1].dims);
      if (!dims)
        return invalid_argument(kernel_prefix(id) + "shapes " + shape_str(inputs[0].dims) + " and " +
                                shape_str(inputs[1].dims) + " do not broadcast");
      out.dims = *dims;
      return out;
    }
    case KernelClass::kElementwiseUnary:
      if (id == kGelu) {
        HEXIR_RETURN_IF_ERROR(check_param_count(id, params, 1));
        if (params[0] != 0 && params[0] != 1) return invalid_argument(kernel_prefix(id) + "approximate parameter must be 0 or 1");
      } else {
        HEXIR_RETURN_IF_ERROR(check_param_count(id, params, 0));
      }
      out.dims = x.dims;
      return out;
    case KernelClass::kOther:
      break;
  }
  switch (id) {
    case kMatmul: {
      HEXIR_RETURN_IF_ERROR(check_param_count(id, params, 0));
      std::vector<int64_t> a = inputs[0].dims, b = inputs[1].dims;
      if (a.empty() || b.empty()) return invalid_argument(kernel_prefix(id) + "operands must have rank >= 1");
      const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
      if (a_vec) a.insert(a.begin(), 1);
      if (b_vec) b.push_back(1);
      if (a.back() != b[b.size() - 2])
        return invalid_argument(kernel_prefix(id) + "contraction dims differ: " + shape_str(inputs[0].dims) + " x " +
                                shape_str(inputs[1].dims));
      auto batch = broadcast_shapes(std::span(a).first(a.size() - 2), std::span(b).first(b.size() - 2));
      if (!batch)
        return invalid_argument(kernel_prefix(id) + "batch dims of " + shape_str(inputs[0].dims) + " and " +
                                shape_str(inputs[1].dims) + " do not broadcast");
      out.dims = *batch;
      if (!a_vec) out.dims.push_back(a[a.size() - 2]);
      if (!b_vec) out.dims.push_back(b.back());
      return out;
    }
    case kSoftmax:
      HEXIR_RETURN_IF_ERROR(check_param_count(id, params, 1));
      HEXIR_RETURN_IF_ERROR(check_axis_param(id, params[0], rank));
      out.dims = x.dims;
      return out;
    case kLayernorm: {
      HEXIR_RETURN_IF_ERROR(check_param_count(id, params, 2));
      HEXIR_RETURN_IF_ERROR(check_axis_param(id, params[0], rank));
      double epsilon = std::bit_cast<double>(params[1]);
      if (!(epsilon >= 0) || !std::isfinite(epsilon))
        return invalid_argument(kernel_prefix(id) + "epsilon must be finite and >= 0");
      std::vector<int64_t> norm_dims(x.dims.begin() + params[0], x.dims.end());
      for (int i = 1; i <= 2; ++i)
        if (inputs[i].dims != norm_dims)
          return invalid_argument(kernel_prefix(id) + (i == 1 ? "gamma" : "beta") + " has shape " +
                                  shape_str(inputs[i].dims) + ", expected " + shape_str(norm_dims));
      out.dims = x.dims;
      return out;
    }
    case kTranspose: {
      HEXIR_RETURN_IF_ERROR(check_param_count(id, params, rank));
      std::vector<bool> seen(rank, false);
      for (size_t i = 0; i < rank; ++i) {
        if (params[i] < 0 || params[i] >= static_cast<int64_t>(rank) || seen[params[i]])
          return invalid_argument(kernel_prefix(id) + "perm " + shape_str(params) + " is not a permutation of 0.." +
                                  std::to_string(rank ? rank - 1 : 0));
        seen[params[i]] = true;
        out.dims.push_back(x.dims[params[i]]);
      }
      return out;
    }
    case kReshape: {
      if (params.size() > kMaxRank) return invalid_argument(kernel_prefix(id) + "result rank exceeds " + std::to_string(kMaxRank));
      HEXIR_ASSIGN_OR_RETURN(uint64_t from, element_count(x.dims.data(), rank));
      HEXIR_ASSIGN_OR_RETURN(uint64_t to, element_count(params.data(), params.size()));
      if (from != to)
        return invalid_argument(kernel_prefix(id) + "cannot reshape " + shape_str(x.dims) + " (" + std::to_string(from) +
                                " elements) to " + shape_str(params) + " (" + std::to_string(to) + " elements)");
      out.dims.assign(params.begin(), params.end());
      return out;
    }
    case kReduceSum:
    case kReduceMean: {
      if (params.empty() || (params[0] != 0 && params[0] != 1))
        return invalid_argument(kernel_prefix(id) + "first parameter (keepdims) must be 0 or 1");
      const bool keepdims = params[0] == 1;
      std::vector<bool> reduced(rank, params.size() == 1);  // no axes listed: all
      for (size_t i = 1; i < params.size(); ++i) {
        if (params[i] < 0 || params[i] >= static_cast<int64_t>(rank) || (i > 1 && params[i] <= params[i - 1]))
          return invalid_argument(kernel_prefix(id) + "axes " + shape_str(params.subspan(1)) +
                                  " must be sorted, unique and below rank " + std::to_string(rank));
        reduced[params[i]] = true;
      }
      for (size_t d = 0; d < rank; ++d) {
        if (!reduced[d]) out.dims.push_back(x.dims[d]);
        else if (keepdims) out.dims.push_back(1);
      }
      return out;
    }
    case kConcat: {
      HEXIR_RETURN_IF_ERROR(check_param_count(id, params, 1));
      HEXIR_RETURN_IF_ERROR(check_axis_param(id, params[0], rank));
      const size_t axis = static_cast<size_t>(params[0]);
      out.dims = x.dims;
      for (size_t i = 1; i < inputs.size(); ++i) {
        const TensorType& t = inputs[i];
        bool compatible = t.dtype == x.dtype && t.rank() == rank;
        for (size_t d = 0; compatible && d < rank; ++d) compatible = d == axis || t.dims[d] == x.dims[d];
        if (!compatible)
          return invalid_argument(kernel_prefix(id) + "operand " + std::to_string(i) + " " + t.to_string() +
                                  " does not match " + x.to_string() + " outside axis " + std::to_string(axis));
        if (out.dims[axis] > (int64_t{1} << 62) - t.dims[axis]) return invalid_argument(kernel_prefix(id) + "size overflows");
        out.dims[axis] += t.dims[axis];
      }
      return out;
    }
    case kCopy:
      HEXIR_RETURN_IF_ERROR(check_param_count(id, params, 0));
      out.dims = x.dims;
      return out;
    default:
      return internal_error(kernel_prefix(id) + "no shape rule");
  }
}

}  // namespace hexir::format
