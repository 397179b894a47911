// The operator table and the entry points every consumer calls: common
// checks first, then the operator's own rule.
#include <array>

#include "hexir/ops/widen.h"
#include "util.h"

namespace hexir::ops {
namespace internal {

std::string shape_str(std::span<const int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string prefix(OpId id) { return std::string("@") + op_def(id).name + ": "; }

Result<int64_t> normalize_axis(OpId id, int64_t axis, size_t rank, const char* what) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r || r == 0)
    return invalid_argument(prefix(id) + what + " " + std::to_string(axis) + " is out of range for rank " +
                            std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

const AttrValue* find_attr(const AttrMap& attrs, std::string_view name) {
  auto it = attrs.find(name);
  return it == attrs.end() ? nullptr : &it->second;
}

Status check_attr_names(OpId id, const AttrMap& attrs, std::initializer_list<std::string_view> allowed) {
  for (const auto& [name, value] : attrs) {
    bool known = false;
    for (std::string_view a : allowed) known = known || a == name;
    if (known) continue;
    std::string list;
    for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    return invalid_argument(
        prefix(id) + "unknown attribute '" + name + "'" +
        (list.empty() ? " (this kernel takes none)" : " (expected one of: " + list + ")"));
  }
  return ok_status();
}

Result<int64_t> int_attr(OpId id, const AttrMap& attrs, std::string_view name, int64_t fallback) {
  const AttrValue* v = find_attr(attrs, name);
  if (!v) return fallback;
  if (auto* i = std::get_if<int64_t>(&v->value)) return *i;
  return invalid_argument(prefix(id) + "attribute '" + std::string(name) + "' must be an integer");
}

Result<double> float_attr(OpId id, const AttrMap& attrs, std::string_view name, double fallback) {
  const AttrValue* v = find_attr(attrs, name);
  if (!v) return fallback;
  if (auto* d = std::get_if<double>(&v->value)) return *d;
  if (auto* i = std::get_if<int64_t>(&v->value)) return static_cast<double>(*i);
  return invalid_argument(prefix(id) + "attribute '" + std::string(name) + "' must be a number");
}

Result<std::vector<int64_t>> int_list_attr(OpId id, const AttrMap& attrs, std::string_view name) {
  const AttrValue* v = find_attr(attrs, name);
  std::vector<int64_t> out;
  if (!v) return out;
  if (auto* i = std::get_if<int64_t>(&v->value)) return std::vector<int64_t>{*i};
  auto* list = std::get_if<std::vector<AttrValue>>(&v->value);
  const std::string what = prefix(id) + "attribute '" + std::string(name) + "' must be a list of integers";
  if (!list) return invalid_argument(what);
  for (const AttrValue& e : *list) {
    auto* i = std::get_if<int64_t>(&e.value);
    if (!i) return invalid_argument(what);
    out.push_back(*i);
  }
  return out;
}

Status check_param_count(OpId id, std::span<const int64_t> params, size_t expected) {
  if (params.size() != expected)
    return invalid_argument(prefix(id) + "expects " + std::to_string(expected) + " parameter word(s), got " +
                            std::to_string(params.size()));
  return ok_status();
}

Status check_axis_param(OpId id, int64_t axis, size_t rank) {
  if (axis < 0 || axis >= static_cast<int64_t>(rank))
    return invalid_argument(prefix(id) + "axis parameter " + std::to_string(axis) +
                            " out of range for rank " + std::to_string(rank));
  return ok_status();
}

void row_major_strides(std::span<const int64_t> dims, int64_t* strides) {
  int64_t stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= dims[i];
  }
}

void broadcast_strides(std::span<const int64_t> dims, size_t out_rank, int64_t* strides) {
  int64_t stride = 1;
  for (size_t i = out_rank; i-- > 0;) {
    const int64_t axis = static_cast<int64_t>(i) - static_cast<int64_t>(out_rank - dims.size());
    if (axis >= 0 && dims[static_cast<size_t>(axis)] != 1) {
      strides[i] = stride;
      stride *= dims[static_cast<size_t>(axis)];
    } else {
      strides[i] = 0;
    }
  }
}

Result<std::vector<int64_t>> no_attributes(OpId id, const AttrMap& attrs) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(id, attrs, {}));
  return std::vector<int64_t>{};
}

AttrMap raise_none(std::span<const TensorType>, std::span<const int64_t>) { return {}; }

AttrValue int_list_value(std::span<const int64_t> values) {
  std::vector<AttrValue> list(values.size());
  for (size_t i = 0; i < values.size(); ++i) list[i].value = values[i];
  return AttrValue{std::move(list)};
}

AttrValue param_list_value(std::span<const int64_t> params, std::initializer_list<int> indices) {
  std::vector<int64_t> words;
  for (int i : indices) words.push_back(param_at(params, static_cast<size_t>(i)));
  return int_list_value(words);
}

}  // namespace internal

namespace {

using namespace internal;

struct OpTable {
  std::array<const OpDef*, kOpCount> defs{};
  OpTable() {
    for (std::span<const OpDef> family :
         {elementwise_ops(), matmul_ops(), spatial_ops(), normalization_ops(), layout_ops(), dynamic_ops()})
      for (const OpDef& def : family) defs[static_cast<size_t>(def.id)] = &def;
  }
};

const OpTable& table() {
  static const OpTable t;  // immutable after construction
  return t;
}

Status check_operands(OpId id, std::span<const TensorType> inputs) {
  const OpDef& def = op_def(id);
  const int n = static_cast<int>(inputs.size());
  if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs)) {
    const std::string expected = def.max_inputs < 0 ? "at least " + std::to_string(def.min_inputs)
                                 : def.min_inputs == def.max_inputs
                                     ? std::to_string(def.min_inputs)
                                     : std::to_string(def.min_inputs) + ".." + std::to_string(def.max_inputs);
    return invalid_argument(prefix(id) + "expects " + expected + " operand(s), got " + std::to_string(n));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].rank() > static_cast<size_t>(kMaxRank))
      return invalid_argument(prefix(id) + "operand " + std::to_string(i) + " has rank " +
                              std::to_string(inputs[i].rank()) + ", more than the supported " +
                              std::to_string(kMaxRank));
    // f32_only: float operands (f32, or f16 / bf16 through the f32 kernels, ops/widen.h), of one dtype.
    if (def.f32_only && (!is_float(inputs[i].dtype) || inputs[i].dtype != inputs[0].dtype))
      return invalid_argument(prefix(id) + "operand " + std::to_string(i) + " is " + inputs[i].to_string() +
                              (is_float(inputs[i].dtype) ? ", operand 0 is " + inputs[0].to_string() +
                                                               ": the float operands must have one dtype"
                                                         : ", only f32, f16 and bf16 are supported"));
    HEXIR_RETURN_IF_ERROR(byte_size(inputs[i]).status());
  }
  return ok_status();
}

}  // namespace

const OpDef& op_def(OpId id) { return *table().defs[static_cast<size_t>(id)]; }

std::optional<OpId> find_op(std::string_view name) {
  for (const OpDef* def : table().defs)
    if (name == def->name) return def->id;
  return std::nullopt;
}

Result<std::vector<int64_t>> lower_attributes(OpId id, std::span<const TensorType> inputs,
                                              const AttrMap& attrs, std::span<const TensorType> declared) {
  if (static_cast<int>(id) >= kOpCount) return invalid_argument("unknown operator id");
  HEXIR_RETURN_IF_ERROR(check_operands(id, inputs));
  return op_def(id).lower(inputs, attrs, declared);
}

AttrMap raise_attributes(OpId id, std::span<const TensorType> inputs, std::span<const int64_t> params) {
  if (static_cast<int>(id) >= kOpCount) return {};
  const OpDef& def = op_def(id);
  const int n = static_cast<int>(inputs.size());
  if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs)) return {};
  return def.raise(inputs, params);
}

Result<std::vector<TensorType>> infer_result_types(OpId id, std::span<const TensorType> inputs,
                                                   std::span<const int64_t> params) {
  if (static_cast<int>(id) >= kOpCount) return invalid_argument("unknown operator id");
  HEXIR_RETURN_IF_ERROR(check_operands(id, inputs));
  const OpDef& def = op_def(id);
  HEXIR_ASSIGN_OR_RETURN(std::vector<TensorType> results, def.infer(inputs, params));
  HEXIR_RETURN_IF_ERROR(mark_bounds(id, inputs, params, results));
  const int n = static_cast<int>(results.size());
  if (n < def.min_outputs || (def.max_outputs >= 0 && n > def.max_outputs))
    return invalid_argument(prefix(id) + "gives " + std::to_string(n) + " results");
  for (const TensorType& r : results) {
    if (r.rank() > static_cast<size_t>(kMaxRank))
      return invalid_argument(prefix(id) + "result rank " + std::to_string(r.rank()) + " exceeds " +
                              std::to_string(kMaxRank));
    HEXIR_RETURN_IF_ERROR(byte_size(r).status().annotate(prefix(id) + "result"));
  }
  return results;
}

Result<TensorType> infer_result_type(OpId id, std::span<const TensorType> inputs,
                                     std::span<const int64_t> params) {
  HEXIR_ASSIGN_OR_RETURN(std::vector<TensorType> results, infer_result_types(id, inputs, params));
  if (results.size() != 1)
    return invalid_argument(prefix(id) + "gives " + std::to_string(results.size()) + " results, not one");
  return std::move(results[0]);
}

namespace {

uint64_t align_up(uint64_t bytes) { return (bytes + 63) & ~uint64_t{63}; }

// A widened dispatch's header: which operands are staged where, how much
// scratch the f32 kernel keeps after the copies.
WidenPlan widen_plan(OpId id, std::span<const TensorType> inputs, std::span<const TensorType> outputs,
                     std::span<const int64_t> params) {
  WidenPlan w{};
  w.input_count = static_cast<int32_t>(inputs.size());
  w.output_count = static_cast<int32_t>(outputs.size());
  w.map_arity = elementwise_map_arity(id);
  uint64_t offset = 0;
  auto stage = [&](const TensorType& t, WidenOperand& o) {
    o.dtype = static_cast<int32_t>(t.dtype);
    o.count = count_of(t);
    if (!is_half(t.dtype)) return;
    o.staged = 1;
    o.offset = offset;
    offset += align_up(static_cast<uint64_t>(o.count) * sizeof(float));
  };
  for (size_t i = 0; i < inputs.size(); ++i) stage(inputs[i], w.operands[i]);
  for (size_t j = 0; j < outputs.size(); ++j) stage(outputs[j], w.operands[inputs.size() + j]);
  w.staging_bytes = offset;
  const OpDef& def = op_def(id);
  if (def.workspace) {
    const std::vector<TensorType> in32 = widened_types(inputs), out32 = widened_types(outputs);
    w.inner_workspace = def.workspace(PlanInput{in32, out32, params});
  }
  return w;
}

}  // namespace

uint64_t workspace_bytes(OpId id, std::span<const TensorType> inputs, std::span<const int64_t> params) {
  if (static_cast<int>(id) >= kOpCount) return 0;
  const OpDef& def = op_def(id);
  if (!def.workspace && !widens_halves(id)) return 0;
  Result<std::vector<TensorType>> outputs = infer_result_types(id, inputs, params);
  if (!outputs.ok()) return 0;
  if (is_widened(id, inputs, *outputs)) {
    if (inputs.size() + outputs->size() > static_cast<size_t>(kMaxWidenOperands)) return 0;
    const WidenPlan w = widen_plan(id, inputs, *outputs, params);
    return w.staging_bytes + w.inner_workspace;
  }
  if (!def.workspace) return 0;
  return def.workspace(PlanInput{inputs, *outputs, params});
}

Result<OpPlan> plan_op(OpId id, std::span<const TensorType> inputs, std::span<const TensorType> outputs,
                       std::span<const int64_t> params, std::span<const std::vector<int64_t>> input_strides) {
  HEXIR_ASSIGN_OR_RETURN(std::vector<TensorType> expected, infer_result_types(id, inputs, params));
  if (!input_strides.empty() && input_strides.size() != inputs.size())
    return invalid_argument(prefix(id) + "strides given for " + std::to_string(input_strides.size()) + " of " +
                            std::to_string(inputs.size()) + " inputs");
  bool any_strided = false;
  for (size_t i = 0; i < input_strides.size(); ++i) {
    if (input_strides[i].empty()) continue;
    if (!accepts_strided_layout(id, i, inputs[i].dims, input_strides[i]))
      return invalid_argument(prefix(id) + "input " + std::to_string(i) + " must be row-major, not a strided view");
    if (input_strides[i].size() != inputs[i].rank())
      return invalid_argument(prefix(id) + "input " + std::to_string(i) + " has " +
                              std::to_string(input_strides[i].size()) + " strides for rank " +
                              std::to_string(inputs[i].rank()));
    any_strided = true;
  }
  if (!any_strided) input_strides = {};
  const OpDef& def = op_def(id);
  if (expected.size() != outputs.size())
    return invalid_argument(prefix(id) + "gives " + std::to_string(expected.size()) + " results, " +
                            std::to_string(outputs.size()) + " outputs given");
  for (size_t i = 0; i < outputs.size(); ++i)
    if (expected[i] != outputs[i])
      return invalid_argument(prefix(id) + "result " + std::to_string(i) + " is " + expected[i].to_string() +
                              ", output given as " + outputs[i].to_string());
  OpPlan plan;
  if (is_widened(id, inputs, outputs)) {
    // The f32 plan of the same operands typed f32, behind the staging header.
    if (inputs.size() + outputs.size() > static_cast<size_t>(kMaxWidenOperands))
      return invalid_argument(prefix(id) + "more than " + std::to_string(kMaxWidenOperands) +
                              " operands on half-precision operands");
    for (size_t i = 0; i < input_strides.size(); ++i)
      if (!input_strides[i].empty() && is_half(inputs[i].dtype))
        return invalid_argument(prefix(id) + "input " + std::to_string(i) +
                                " is half precision: it must be row-major, not a strided view");
    const std::vector<TensorType> in32 = widened_types(inputs), out32 = widened_types(outputs);
    OpPlan inner;
    if (def.plan) def.plan(PlanInput{in32, out32, params, input_strides}, inner);
    WidenPlan& w = plan.start<WidenPlan>(inner.words().size());
    w = widen_plan(id, inputs, outputs, params);
    w.inner_words = static_cast<int64_t>(inner.words().size());
    int64_t* tail = plan.tail<WidenPlan>();
    for (size_t i = 0; i < inner.words().size(); ++i) tail[i] = static_cast<int64_t>(inner.words()[i]);
    return plan;
  }
  if (def.plan) def.plan(PlanInput{inputs, outputs, params, input_strides}, plan);
  return plan;
}

KernelKey kernel_key(OpId id, std::span<const TensorType> inputs, std::span<const TensorType> outputs) {
  const OpDef& def = op_def(id);
  KernelKey key;
  key.op = id;
  if (def.key_input >= 0 && static_cast<size_t>(def.key_input) < inputs.size())
    key.input = inputs[static_cast<size_t>(def.key_input)].dtype;
  if (!outputs.empty()) key.output = outputs[0].dtype;
  return key;
}

std::optional<std::vector<int64_t>> broadcast_shapes(std::span<const int64_t> a, std::span<const int64_t> b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1)
      out[i] = da;
    else if (da == 1)
      out[i] = db;
    else
      return std::nullopt;
  }
  return out;
}

}  // namespace hexir::ops
