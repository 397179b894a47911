// Helpers shared by the operator definitions (internal to ops/).
#pragma once

#include <bit>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hexir/ops/op.h"

namespace hexir::ops::internal {

// Fused epilogues (epilogue.cc; op.h "A fused epilogue"): three words
// [activation, alpha, beta] after an operator's own parameters.
inline constexpr size_t kEpilogueWords = 3;
struct ActivationInfo {
  Activation activation;
  OpId op;
  int64_t variant;  // -1: the operator has no variant word
  int floats;
  const char* name;
  bool infinite_ok;
};
const ActivationInfo* activation_info(int64_t word);
// activation = "name", activation_alpha, activation_beta: the three words, or none.
Result<std::vector<int64_t>> lower_epilogue(OpId id, const AttrMap& attrs);
// The inverse of lower_epilogue: the words params[offset, offset + 3) as
// `name` ("relu", ...), `name`_alpha and `name`_beta as the activation takes
// them; nothing when the words are absent or name no activation.
void raise_epilogue(std::span<const int64_t> params, size_t offset, AttrMap& attrs,
                    const std::string& name = "activation");
// Validates the three words (untrusted files).
Status check_epilogue(OpId id, std::span<const int64_t> words);
// The plan's Epilogue from params[offset, offset + 3), or none when absent.
Epilogue plan_epilogue(std::span<const int64_t> params, size_t offset);

std::string shape_str(std::span<const int64_t> dims);
std::string prefix(OpId id);  // "@name: "

// Turns a possibly negative axis into 0..rank-1.
Result<int64_t> normalize_axis(OpId id, int64_t axis, size_t rank, const char* what);

const AttrValue* find_attr(const AttrMap& attrs, std::string_view name);
Status check_attr_names(OpId id, const AttrMap& attrs, std::initializer_list<std::string_view> allowed);
Result<int64_t> int_attr(OpId id, const AttrMap& attrs, std::string_view name, int64_t fallback);
// A number (an integer is taken as its value); `fallback` when absent.
Result<double> float_attr(OpId id, const AttrMap& attrs, std::string_view name, double fallback);
// An integer or a list of integers; empty when absent.
Result<std::vector<int64_t>> int_list_attr(OpId id, const AttrMap& attrs, std::string_view name);

Status check_param_count(OpId id, std::span<const int64_t> params, size_t expected);
// A parameter word holding the bits of a double (see layernorm's epsilon).
inline double float_param(int64_t word) { return std::bit_cast<double>(word); }
inline int64_t float_word(double value) { return std::bit_cast<int64_t>(value); }
Status check_axis_param(OpId id, int64_t axis, size_t rank);

inline std::vector<TensorType> one(TensorType t) { return {std::move(t)}; }

// Product of dims[begin, end).
inline int64_t dims_product(std::span<const int64_t> dims, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= dims[i];
  return n;
}
inline int64_t count_of(const TensorType& t) { return dims_product(t.dims, 0, t.dims.size()); }

// Row-major element strides of `dims`.
void row_major_strides(std::span<const int64_t> dims, int64_t* strides);

// Element strides of a tensor of `dims` viewed with `out_rank` dims, numpy's
// right alignment; broadcast (size-1 or missing) dims get stride 0.
void broadcast_strides(std::span<const int64_t> dims, size_t out_rank, int64_t* strides);

// Lowering for operators without attributes.
Result<std::vector<int64_t>> no_attributes(OpId id, const AttrMap& attrs);
// Its inverse (OpDef::raise): no attributes.
AttrMap raise_none(std::span<const TensorType> inputs, std::span<const int64_t> params);
// A parameter word, 0 past the end (raise reads words a rule would refuse too).
inline int64_t param_at(std::span<const int64_t> params, size_t i) {
  return i < params.size() ? params[i] : 0;
}
// An attribute holding a list of integers: `values`, or the words `indices` of `params` (param_at).
AttrValue int_list_value(std::span<const int64_t> values);
AttrValue param_list_value(std::span<const int64_t> params, std::initializer_list<int> indices);

// ---- FLOPs (cost.cc): arithmetic that saturates at UINT64_MAX ----------------

uint64_t mul_sat(uint64_t a, uint64_t b);
uint64_t add_sat(uint64_t a, uint64_t b);
// Elements of `t` (a negative dim counts as 0).
uint64_t elements_sat(const TensorType& t);
// The product of dims [from, rank) of `t` (1 when none).
uint64_t tail_product_sat(const TensorType& t, size_t from);
// The elements of every output together.
uint64_t output_elements_sat(std::span<const TensorType> outputs);
// OpDef::flops shared by many: one per output element (elementwise maps and
// data movement), and none (views: nothing runs).
uint64_t flops_per_element(std::span<const TensorType> inputs, std::span<const TensorType> outputs,
                           std::span<const int64_t> params);
uint64_t flops_none(std::span<const TensorType> inputs, std::span<const TensorType> outputs,
                    std::span<const int64_t> params);

// The families' definitions, each a span in OpId order of its own ids.
std::span<const OpDef> elementwise_ops();
std::span<const OpDef> matmul_ops();
std::span<const OpDef> spatial_ops();
std::span<const OpDef> normalization_ops();
std::span<const OpDef> layout_ops();
std::span<const OpDef> dynamic_ops();  // bounded dynamic shapes (dynamic.cc)

// infer_result_types' last step (bounds.cc): marks each result's bounded dim
// by the one rule for every operator; refuses operands it cannot take.
Status mark_bounds(OpId id, std::span<const TensorType> in, std::span<const int64_t> params,
                   std::vector<TensorType>& out);

}  // namespace hexir::ops::internal
