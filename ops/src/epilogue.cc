// Fused epilogues (op.h "A fused epilogue"; declared in util.h): the three words
// [activation, alpha, beta] that conv2d, separable_conv2d, matmul, add and mul take
// after their own parameters.
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "util.h"

namespace hexir::ops::internal {

using enum OpId;

// One row per Activation (plans.h), in its order: the unary operator it
// applies, its `variant` parameter (gelu's), its float parameter count, the
// .hxir name, and whether its floats may be infinite (clip's bounds).
constexpr ActivationInfo kActivations[] = {
    {Activation::kRelu, kRelu, -1, 0, "relu", false},
    {Activation::kGeluErf, kGelu, 0, 0, "gelu", false},
    {Activation::kGeluTanh, kGelu, 1, 0, "gelu_tanh", false},
    {Activation::kSilu, kSilu, -1, 0, "silu", false},
    {Activation::kSigmoid, kSigmoid, -1, 0, "sigmoid", false},
    {Activation::kTanh, kTanh, -1, 0, "tanh", false},
    {Activation::kLeakyRelu, kLeakyRelu, -1, 1, "leaky_relu", false},
    {Activation::kClip, kClip, -1, 2, "clip", true},
    {Activation::kHardSigmoid, kHardSigmoid, -1, 2, "hard_sigmoid", false},
    {Activation::kHardSwish, kHardSwish, -1, 0, "hard_swish", false},
    // No unary operator: a mul by a one-element constant and an add of one (fusion.h).
    {Activation::kAffine, kCount, -1, 2, "affine", false},
};
const ActivationInfo* activation_info(int64_t word) {
  for (const ActivationInfo& a : kActivations)
    if (static_cast<int64_t>(a.activation) == word) return &a;
  return nullptr;
}

// activation = "name", activation_alpha, activation_beta: the three words, or none.
Result<std::vector<int64_t>> lower_epilogue(OpId id, const AttrMap& attrs) {
  const AttrValue* v = find_attr(attrs, "activation");
  if (!v) {
    if (find_attr(attrs, "activation_alpha") || find_attr(attrs, "activation_beta"))
      return invalid_argument(prefix(id) + "activation_alpha and activation_beta need an 'activation'");
    return std::vector<int64_t>{};
  }
  const auto* name = std::get_if<std::string>(&v->value);
  const ActivationInfo* info = nullptr;
  for (const ActivationInfo& a : kActivations)
    if (name && *name == a.name) info = &a;
  if (!info) {
    std::string names;
    for (const ActivationInfo& a : kActivations) names += std::string(names.empty() ? "" : ", ") + a.name;
    return invalid_argument(prefix(id) + "attribute 'activation' must be one of " + names);
  }
  // The operator's own defaults (leaky_relu 0.01, clip unbounded, hard_sigmoid 0.2, 0.5).
  const double inf = std::numeric_limits<double>::infinity();
  double defaults[2] = {0.0, 0.0};
  if (info->activation == Activation::kLeakyRelu) defaults[0] = 0.01;
  if (info->activation == Activation::kClip) defaults[0] = -inf, defaults[1] = inf;
  if (info->activation == Activation::kHardSigmoid) defaults[0] = 0.2, defaults[1] = 0.5;
  if (info->activation == Activation::kAffine) defaults[0] = 1.0;
  std::vector<int64_t> words{static_cast<int64_t>(info->activation), 0, 0};
  const char* names[2] = {"activation_alpha", "activation_beta"};
  for (int i = 0; i < 2; ++i) {
    if (i >= info->floats) {
      if (find_attr(attrs, names[i]))
        return invalid_argument(prefix(id) + "activation '" + info->name + "' takes no '" + names[i] + "'");
      continue;
    }
    HEXIR_ASSIGN_OR_RETURN(double value, float_attr(id, attrs, names[i], defaults[i]));
    if (std::isnan(value) || (!info->infinite_ok && std::isinf(value)))
      return invalid_argument(prefix(id) + "attribute '" + names[i] + "' must be a " +
                              (info->infinite_ok ? "number, not NaN" : "finite number"));
    words[1 + static_cast<size_t>(i)] = float_word(value);
  }
  return words;
}

void raise_epilogue(std::span<const int64_t> params, size_t offset, AttrMap& attrs, const std::string& name) {
  if (params.size() < offset + kEpilogueWords) return;
  const ActivationInfo* info = activation_info(params[offset]);
  if (!info) return;
  attrs[name] = AttrValue{std::string(info->name)};
  if (info->floats > 0) attrs[name + "_alpha"] = AttrValue{float_param(params[offset + 1])};
  if (info->floats > 1) attrs[name + "_beta"] = AttrValue{float_param(params[offset + 2])};
}

// Validates the epilogue words of a conv2d or matmul (untrusted files).
Status check_epilogue(OpId id, std::span<const int64_t> words) {
  const ActivationInfo* info = activation_info(words[0]);
  if (!info)
    return invalid_argument(prefix(id) + "epilogue activation " + std::to_string(words[0]) + " is unknown");
  // The affine epilogue belongs to the elementwise kernels (hal/cpu/elementwise.cc).
  if (info->activation == Activation::kAffine && id != kAdd && id != kMul)
    return invalid_argument(prefix(id) + "epilogue activation 'affine' is for add and mul only");
  for (int i = 0; i < 2; ++i) {
    const int64_t word = words[1 + static_cast<size_t>(i)];
    if (i >= info->floats) {
      if (word != 0)
        return invalid_argument(prefix(id) + "epilogue activation '" + info->name + "' takes " +
                                std::to_string(info->floats) + " parameters; parameter " +
                                std::to_string(i) + " must be 0");
      continue;
    }
    const double v = float_param(word);
    if (std::isnan(v) || (!info->infinite_ok && std::isinf(v)))
      return invalid_argument(prefix(id) + "epilogue parameter " + std::to_string(v) + " must be " +
                              (info->infinite_ok ? "a number, not NaN" : "finite"));
  }
  return ok_status();
}

Epilogue plan_epilogue(std::span<const int64_t> params, size_t offset) {
  Epilogue e{};
  if (params.size() < offset + kEpilogueWords) return e;
  e.activation = static_cast<int32_t>(params[offset]);
  e.a = static_cast<float>(float_param(params[offset + 1]));
  e.b = static_cast<float>(float_param(params[offset + 2]));
  return e;
}

}  // namespace hexir::ops::internal

namespace hexir::ops {

std::optional<std::vector<int64_t>> epilogue_words(OpId op, std::span<const int64_t> params) {
  using namespace internal;
  for (const ActivationInfo& a : kActivations) {
    if (a.op != op) continue;
    if (a.variant >= 0 && (params.size() != 1 || params[0] != a.variant)) continue;
    if (a.variant < 0 && params.size() != static_cast<size_t>(a.floats)) return std::nullopt;
    std::vector<int64_t> words{static_cast<int64_t>(a.activation), 0, 0};
    for (int i = 0; i < a.floats; ++i) words[1 + static_cast<size_t>(i)] = params[static_cast<size_t>(i)];
    if (!check_epilogue(op, words).ok()) return std::nullopt;
    return words;
  }
  return std::nullopt;
}

std::optional<std::pair<OpId, std::vector<int64_t>>> epilogue_op(std::span<const int64_t> words) {
  using namespace internal;
  if (words.size() != kEpilogueWords) return std::nullopt;
  const ActivationInfo* a = activation_info(words[0]);
  if (!a) return std::nullopt;
  std::vector<int64_t> params;
  if (a->variant >= 0) params.push_back(a->variant);
  for (int i = 0; i < a->floats; ++i) params.push_back(words[1 + static_cast<size_t>(i)]);
  return std::make_pair(a->op, std::move(params));
}

const char* activation_name(int64_t activation, int* floats) {
  const internal::ActivationInfo* a = internal::activation_info(activation);
  if (floats) *floats = a ? a->floats : 0;
  return a ? a->name : nullptr;
}

}  // namespace hexir::ops
