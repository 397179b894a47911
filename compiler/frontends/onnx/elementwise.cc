// Elementwise operators: the arithmetic (binary and variadic), comparisons,
// unary maps, Clip, Pow, Cast, CastLike, Where, and Identity and Dropout (no node).
#include "frontends/onnx/handlers.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace hexir::compiler::onnx_import {

namespace {

ops::OpId binary_op(const std::string& op) {
  if (op == "Add" || op == "Sum" || op == "Mean") return ops::OpId::kAdd;
  if (op == "Sub") return ops::OpId::kSub;
  if (op == "Mul") return ops::OpId::kMul;
  if (op == "Div") return ops::OpId::kDiv;
  if (op == "Max") return ops::OpId::kMaximum;
  return ops::OpId::kMinimum;
}

// a op b op c ... (Mean: then / count), one node per step: each step folded
// by the CPU kernel when its operands are held constants it serves; a chain
// of held constants no kernel serves (i64 shape arithmetic, DOUBLE) folded
// by the host folder.
Status chain(Importer& im, const NodeCtx& n, const std::string& op) {
  std::vector<std::optional<Ref>> refs;
  for (int i = 0; i < n.node.input_size(); ++i) {
    HEXIR_ASSIGN_OR_RETURN(Ref r, im.input(n, i));
    refs.push_back(r);
  }
  if (refs.size() == 1) {
    im.define(n, 0, *refs[0]);
    return ok_status();
  }
  const ops::OpId id = binary_op(op);
  // The steps: (operator, right operand); the left one is the previous step's result.
  std::vector<std::pair<ops::OpId, Ref>> steps;
  for (size_t i = 1; i < refs.size(); ++i) steps.push_back({id, *refs[i]});
  if (op == "Mean")
    steps.push_back({ops::OpId::kDiv, im.scalar_const(static_cast<double>(refs.size()), im.info(*refs[0]).type,
                                                      im.helper_name(n, "count"), n.loc)});
  std::vector<std::string> names;
  for (size_t i = 0; i < steps.size(); ++i)
    names.push_back(i + 1 == steps.size() ? im.result_name(n) : im.helper_name(n, std::to_string(i + 1)));

  std::vector<HostPtr> hs;
  HEXIR_ASSIGN_OR_RETURN(bool all_held, im.hosts(refs, hs));
  if (all_held) {
    Ref acc = *refs[0];
    bool folded = true;
    for (size_t i = 0; i < steps.size() && folded; ++i) {
      HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> r, im.fold(n, steps[i].first, {acc, steps[i].second}, {}, names[i]));
      folded = r.has_value();
      if (r) acc = *r;
    }
    if (folded) {
      im.define(n, 0, acc);
      return ok_status();
    }
    HostTensor host = *hs[0];
    Status s;
    for (size_t i = 1; i < hs.size() && s.ok(); ++i) {
      Result<HostTensor> next = fold_arith(n.loc, op, host, *hs[i], im.fold_max_bytes());
      if (!next.ok()) s = next.status();
      else host = std::move(*next);
    }
    if (s.ok() && op == "Mean") {
      HostTensor count = make_host(host.type, {});
      count.set_f(0, static_cast<double>(hs.size()));
      Result<HostTensor> mean = fold_arith(n.loc, "Div", host, count, im.fold_max_bytes());
      if (!mean.ok()) s = mean.status();
      else host = std::move(*mean);
    }
    if (s.ok()) {
      im.define(n, 0, im.new_const(names.back(), std::move(host), n.loc));
      return ok_status();
    }
    if (!too_large(s)) return s;
  }
  Ref acc = *refs[0];
  for (size_t i = 0; i < steps.size(); ++i) {
    HEXIR_ASSIGN_OR_RETURN(acc, im.emit1(n, steps[i].first, {acc, steps[i].second}, {}, names[i]));
  }
  im.define(n, 0, acc);
  return ok_status();
}

}  // namespace

Status op_binary(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  if (n.node.input_size() != 2)
    return error_at(n.loc, "takes 2 inputs, got " + std::to_string(n.node.input_size()));
  return chain(im, n, n.op);
}

Status op_variadic(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  if (n.node.input_size() < 1) return error_at(n.loc, "takes at least one input");
  return chain(im, n, n.op);
}

namespace {

// A comparison or logical map of x and y (integers compared exactly).
template <typename T>
bool compare_values(std::string_view op, T x, T y) {
  if (op == "Equal") return x == y;
  if (op == "Less") return x < y;
  if (op == "Greater") return x > y;
  if (op == "LessOrEqual") return x <= y;
  if (op == "GreaterOrEqual") return x >= y;
  if (op == "And") return x != 0 && y != 0;
  if (op == "Or") return x != 0 || y != 0;
  return (x != 0) != (y != 0);  // Xor
}

// A node of two inputs with a bool result: folded on held constants (the
// kernel first, the host folder where no kernel serves), else the Hexir
// operator `name`.
Status bool_binary(Importer& im, const NodeCtx& n, const char* name) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref a, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref b, im.input(n, 1));
  const std::string& op = n.op;
  HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, name));
  return fold_or_emit(im, n, id, {a, b}, {}, [&](const std::vector<HostPtr>& hs) {
    return fold_binary(
        n.loc, *hs[0], *hs[1], kBool,
        [&](int64_t x, int64_t y) -> Result<double> { return compare_values(op, x, y); },
        [&](double x, double y) -> double { return compare_values(op, x, y); }, im.fold_max_bytes());
  });
}

}  // namespace

// Equal/Less/Greater/LessOrEqual/GreaterOrEqual: folded on constants, else
// the Hexir comparison (NaN compares false in each, so LessOrEqual is its own
// operator, not Not(Greater)).
Status op_compare(Importer& im, const NodeCtx& n) {
  static const std::map<std::string, const char*, std::less<>> kNames = {
      {"Equal", "equal"},
      {"Less", "less"},
      {"Greater", "greater"},
      {"LessOrEqual", "less_or_equal"},
      {"GreaterOrEqual", "greater_or_equal"},
  };
  return bool_binary(im, n, kNames.at(n.op));
}

// And/Or/Xor on bool: folded on constants, else @and/@or/@xor.
Status op_logical(Importer& im, const NodeCtx& n) {
  return bool_binary(im, n, n.op == "And" ? "and" : n.op == "Or" ? "or" : "xor");
}

// Mod: folded on constants, else @mod with its fmod attribute (0: the
// divisor's sign, integers only, as ONNX; 1: C's fmod).
Status op_mod(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"fmod"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t fmod, im.attr_int(n, "fmod", 0));
  if (fmod != 0 && fmod != 1) return error_at(n.loc, "attribute 'fmod' must be 0 or 1");
  HEXIR_ASSIGN_OR_RETURN(Ref a, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref b, im.input(n, 1));
  ops::AttrMap attrs;
  attrs["fmod"] = ops::AttrValue{fmod};
  // (@mod's type rule refuses floats with fmod = 0 when not folded.)
  return fold_or_emit(im, n, ops::OpId::kMod, {a, b}, attrs, [&](const std::vector<HostPtr>& hs) -> Result<HostTensor> {
    if (hs[0]->is_float() && fmod == 0) return error_at(n.loc, "floating-point operands need fmod = 1");
    return fold_binary(
        n.loc, *hs[0], *hs[1], hs[0]->type,
        [&](int64_t x, int64_t y) -> Result<double> {
          if (y == 0) return invalid_argument("integer division by zero");
          return static_cast<double>(ops::int_mod_of(x, y, static_cast<int32_t>(fmod)));
        },
        [](double x, double y) { return std::fmod(x, y); }, im.fold_max_bytes());
  });
}

// Unary maps: folded on held constants, else the Hexir operator.
Status op_unary(Importer& im, const NodeCtx& n) {
  const std::string& op = n.op;
  double alpha = 0, beta = 0;
  if (op == "Gelu") {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"approximate"}));
  } else if (op == "LeakyRelu") {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"alpha"}));
    HEXIR_ASSIGN_OR_RETURN(alpha, im.attr_float(n, "alpha", 0.01));
  } else if (op == "HardSigmoid") {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"alpha", "beta"}));
    HEXIR_ASSIGN_OR_RETURN(alpha, im.attr_float(n, "alpha", 0.2));
    HEXIR_ASSIGN_OR_RETURN(beta, im.attr_float(n, "beta", 0.5));
  } else if (op == "Elu" || op == "Celu" || op == "ThresholdedRelu") {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"alpha"}));
    HEXIR_ASSIGN_OR_RETURN(alpha, im.attr_float(n, "alpha", 1.0));
  } else if (op == "Selu") {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"alpha", "gamma"}));
    HEXIR_ASSIGN_OR_RETURN(alpha, im.attr_float(n, "alpha", 1.67326319217681884765625));
    HEXIR_ASSIGN_OR_RETURN(beta, im.attr_float(n, "gamma", 1.05070102214813232421875));
  } else if (op == "Shrink") {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"lambd", "bias"}));
    HEXIR_ASSIGN_OR_RETURN(alpha, im.attr_float(n, "lambd", 0.5));
    HEXIR_ASSIGN_OR_RETURN(beta, im.attr_float(n, "bias", 0.0));
  } else if (op == "IsInf") {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"detect_positive", "detect_negative"}));
  } else {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  }
  // ONNX float attributes are floats: the same value the kernels would see.
  alpha = static_cast<float>(alpha);
  beta = static_cast<float>(beta);
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  static const std::map<std::string, const char*, std::less<>> kUnary = {
      {"Relu", "relu"},        {"Sigmoid", "sigmoid"},     {"Tanh", "tanh"},
      {"Exp", "exp"},          {"Sqrt", "sqrt"},           {"Neg", "neg"},
      {"Gelu", "gelu"},        {"Abs", "abs"},             {"Reciprocal", "reciprocal"}, {"Softplus", "softplus"},
      {"Erf", "erf"},          {"Log", "log"},             {"Not", "not"},
      {"LeakyRelu", "leaky_relu"}, {"HardSigmoid", "hard_sigmoid"}, {"HardSwish", "hard_swish"},
      {"Sign", "sign"},        {"Ceil", "ceil"},           {"Floor", "floor"},           {"Round", "round"},
      {"Sin", "sin"},          {"Cos", "cos"},             {"Tan", "tan"},               {"Asin", "asin"},
      {"Acos", "acos"},        {"Atan", "atan"},           {"Sinh", "sinh"},             {"Cosh", "cosh"},
      {"Asinh", "asinh"},      {"Acosh", "acosh"},         {"Atanh", "atanh"},           {"IsInf", "is_inf"},
      {"IsNaN", "is_nan"},     {"Elu", "elu"},             {"Selu", "selu"},             {"Celu", "celu"},
      {"Mish", "mish"},        {"Softsign", "softsign"},   {"ThresholdedRelu", "thresholded_relu"},
      {"Shrink", "shrink"},
  };
  // Folded by the CPU kernel only (f32): the host folder has no rule for these.
  static const std::set<std::string, std::less<>> kKernelOnly = {
      "Gelu", "Sin",   "Cos",   "Tan",   "Asin", "Acos", "Atan",  "Sinh",     "Cosh",            "Asinh",
      "Acosh", "Atanh", "IsInf", "IsNaN", "Elu",  "Selu", "Celu",  "Mish",     "Softsign",        "ThresholdedRelu",
      "Shrink"};
  auto it = kUnary.find(op);
  std::optional<ops::OpId> id = it == kUnary.end() ? std::nullopt : ops::find_op(it->second);
  ops::AttrMap attrs;
  if (op == "Gelu") {
    HEXIR_ASSIGN_OR_RETURN(std::string approx, im.attr_string(n, "approximate", "none"));
    if (approx != "none" && approx != "tanh")
      return error_at(n.loc, "attribute 'approximate' = '" + approx + "' is not 'none' or 'tanh'");
    if (approx == "tanh") attrs["approximate"] = ops::AttrValue{std::string("tanh")};
  } else if (op == "LeakyRelu") {
    attrs["alpha"] = real(alpha);
  } else if (op == "HardSigmoid") {
    attrs["alpha"] = real(alpha);
    attrs["beta"] = real(beta);
  } else if (op == "Elu" || op == "Celu" || op == "ThresholdedRelu") {
    attrs["alpha"] = real(alpha);
  } else if (op == "Selu") {
    attrs["alpha"] = real(alpha);
    attrs["gamma"] = real(beta);
  } else if (op == "Shrink") {
    attrs["lambd"] = real(alpha);
    attrs["bias"] = real(beta);
  } else if (op == "IsInf") {
    for (const char* flag : {"detect_positive", "detect_negative"}) {
      HEXIR_ASSIGN_OR_RETURN(int64_t v, im.attr_int(n, flag, 1));
      if (v != 0 && v != 1) return error_at(n.loc, "attribute '" + std::string(flag) + "' must be 0 or 1");
      attrs[flag] = ops::AttrValue{v};
    }
  }
  // The host folder for the dtypes no kernel serves (kKernelOnly: none; the kernel folds f32).
  HostFold host_fold;
  if (!kKernelOnly.count(op))
    host_fold = [&](const std::vector<HostPtr>& hs) { return fold_unary(n.loc, op, *hs[0], alpha, beta); };
  if (id) return fold_or_emit(im, n, *id, {x}, attrs, host_fold);
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(x));
  if (h) {
    HEXIR_ASSIGN_OR_RETURN(HostTensor t, fold_unary(n.loc, op, *h, alpha, beta));
    im.define_folded(n, 0, std::move(t));
    return ok_status();
  }
  if (op == "Reciprocal") {  // 1 / x
    Ref one = im.scalar_const(1.0, im.info(x).type, im.helper_name(n, "one"), n.loc);
    HEXIR_ASSIGN_OR_RETURN(Ref r, im.emit1(n, ops::OpId::kDiv, {one, x}, {}, im.result_name(n)));
    im.define(n, 0, r);
    return ok_status();
  }
  return error_at(n.loc, "is supported only on constants (folded at import): this build of Hexir has no run-time " +
                             op + " operator");
}

// PRelu: @prelu; the slope broadcasts to x (ONNX's unidirectional broadcasting).
Status op_prelu(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref slope, im.input(n, 1));
  const Info xi = im.info(x), si = im.info(slope);
  auto dims = ops::broadcast_shapes(xi.dims, si.dims);
  if (!dims || *dims != xi.dims)
    return error_at(n.loc, "slope " + shape_text(si.dims) + " does not broadcast to x " + shape_text(xi.dims));
  return fold_or_emit(im, n, ops::OpId::kPRelu, {x, slope}, {}, nullptr);
}

// Clip: min/max attributes before opset 11, constant inputs from it; @clip.
Status op_clip(Importer& im, const NodeCtx& n) {
  double lo = -INFINITY, hi = INFINITY;
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  if (im.opset() < 11) {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"min", "max", "consumed_inputs"}));
    HEXIR_ASSIGN_OR_RETURN(lo, im.attr_float(n, "min", -INFINITY));
    HEXIR_ASSIGN_OR_RETURN(hi, im.attr_float(n, "max", INFINITY));
  } else {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
    for (int i = 1; i <= 2; ++i) {
      HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> r, im.optional_input(n, i));
      if (!r) continue;
      HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(*r));
      if (!h || h->count() != 1)
        return error_at(n.loc, std::string(i == 1 ? "min" : "max") + " (input " + std::to_string(i) +
                                   ") must be a constant scalar");
      (i == 1 ? lo : hi) = h->f(0);
    }
  }
  if (std::isnan(lo) || std::isnan(hi)) return error_at(n.loc, "min and max must not be NaN");
  HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, "clip"));
  ops::AttrMap attrs;
  if (!std::isinf(lo)) attrs["min"] = real(lo);
  if (!std::isinf(hi)) attrs["max"] = real(hi);
  return fold_or_emit(im, n, id, {x}, attrs,
                      [&](const std::vector<HostPtr>& hs) -> Result<HostTensor> { return fold_clip(*hs[0], lo, hi); });
}

// Pow: folded on constants; else @pow (f32), mixed dtypes through f32 (below).
Status op_pow(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref y, im.input(n, 1));
  std::vector<HostPtr> hs;
  HEXIR_ASSIGN_OR_RETURN(bool held, im.hosts({x, y}, hs));
  auto host_pow = [&](const std::vector<HostPtr>& hs) {
    return fold_binary(
        n.loc, *hs[0], *hs[1], hs[0]->type,
        [](int64_t a, int64_t b) -> Result<double> {
          return std::pow(static_cast<double>(a), static_cast<double>(b));
        },
        [](double a, double b) { return std::pow(a, b); }, im.fold_max_bytes());
  };
  if (held && hs[0]->type == hs[1]->type) {
    HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, "pow"));
    return fold_or_emit(im, n, id, {x, y}, {}, host_pow);
  }
  if (held) {
    Result<HostTensor> out = host_pow(hs);
    if (out.ok()) {
      im.define_folded(n, 0, std::move(*out));
      return ok_status();
    }
    if (!too_large(out.status())) return out.status();
  }
  const Info xi = im.info(x), yi = im.info(y);
  HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, "pow"));
  if (yi.type == xi.type) return im.emit_result(n, id, {x, y}, {});
  // Mixed dtypes (ONNX: the result has the base's type). A constant exponent
  // is converted here; a run-time one is cast to f32 by a node. An integer
  // base is raised in f32 and the result truncated back to its type, as
  // ONNX's reference does (numpy.power(x, y).astype(x.dtype)).
  auto cast_to = [&](Ref v, DType to, const std::string& what) -> Result<Ref> {
    ops::AttrMap attrs;
    attrs["to"] = ops::AttrValue{std::string(dtype_name(to))};
    return im.emit1(n, ops::OpId::kCast, {v}, attrs, im.helper_name(n, what));
  };
  if (xi.type != kFloat && !dtype_from_onnx(xi.type))
    return error_at(n.loc, "the base is " + onnx_type_name(xi.type) + ": not supported");
  HEXIR_ASSIGN_OR_RETURN(HostPtr hy, im.host(y));
  if (hy && xi.type == kFloat) {
    HostTensor converted = make_host(xi.type, hy->dims);
    for (int64_t i = 0; i < hy->count(); ++i) converted.set_f(i, hy->f(i));
    y = im.new_const(im.helper_name(n, "exponent"), std::move(converted), n.loc);
  } else if (yi.type != kFloat) {
    if (!dtype_from_onnx(yi.type))
      return error_at(n.loc, "the exponent is " + onnx_type_name(yi.type) + ": not supported");
    HEXIR_ASSIGN_OR_RETURN(y, cast_to(y, DType::kF32, "exponent_f32"));
  }
  if (xi.type == kFloat) return im.emit_result(n, id, {x, y}, {});
  HEXIR_ASSIGN_OR_RETURN(Ref base, cast_to(x, DType::kF32, "base_f32"));
  HEXIR_ASSIGN_OR_RETURN(Ref power, im.emit1(n, id, {base, y}, {}, im.helper_name(n, "power_f32")));
  ops::AttrMap back;
  back["to"] = ops::AttrValue{std::string(dtype_name(*dtype_from_onnx(xi.type)))};
  return im.emit_result(n, ops::OpId::kCast, {power}, back);
}

namespace {

// `x` cast to ONNX type `to` as the node's output 0 (Cast, CastLike).
Status cast_to(Importer& im, const NodeCtx& n, Ref x, int32_t to) {
  if (onnx_element_size(to) == 0)
    return error_at(n.loc, "cast to " + onnx_type_name(to) + " is not supported");
  const std::optional<DType> dtype = dtype_from_onnx(to);
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(x));
  // To a type Hexir has no dtype for: the host folder only; to its own type:
  // the same bytes under the output's name.
  if (h && (!dtype || h->type == to)) {
    im.define_folded(n, 0, fold_cast(*h, to));
    return ok_status();
  }
  if (im.info(x).type == to) {
    im.define(n, 0, x);
    return ok_status();
  }
  if (!dtype) return error_at(n.loc, "cast to " + onnx_type_name(to) + " is not supported at run time");
  ops::AttrMap attrs;
  attrs["to"] = ops::AttrValue{std::string(dtype_name(*dtype))};
  return fold_or_emit(im, n, ops::OpId::kCast, {x}, attrs,
                      [&](const std::vector<HostPtr>& hs) -> Result<HostTensor> { return fold_cast(*hs[0], to); });
}

}  // namespace

Status op_cast(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"to", "saturate"}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const auto* to_attr = find_attribute(n.node, "to");
  if (!to_attr) return error_at(n.loc, "attribute 'to' is missing");
  int32_t to = 0;
  if (to_attr->type() == onnx::AttributeProto::INT) {
    to = static_cast<int32_t>(to_attr->i());
  } else if (to_attr->type() == onnx::AttributeProto::STRING) {  // opset 1: a type name
    for (int32_t t = 1; t <= kBFloat16; ++t)
      if (onnx_type_name(t) == to_attr->s()) to = t;
  }
  return cast_to(im, n, x, to);
}

// CastLike: Cast to the type of input 1 (its values are not read).
Status op_cast_like(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"saturate"}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref like, im.input(n, 1));
  return cast_to(im, n, x, im.info(like).type);
}

Status op_where(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref c, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(Ref y, im.input(n, 2));
  return fold_or_emit(im, n, ops::OpId::kWhere, {c, x, y}, {},
                      [&](const std::vector<HostPtr>& hs) -> Result<HostTensor> {
                        const HostTensor &hc = *hs[0], &hx = *hs[1], &hy = *hs[2];
                        auto xy = ops::broadcast_shapes(hx.dims, hy.dims);
                        auto dims = xy ? ops::broadcast_shapes(hc.dims, *xy) : std::nullopt;
                        if (!dims || hx.type != hy.type)
                          return error_at(n.loc, "operands do not broadcast or differ in type");
                        HEXIR_RETURN_IF_ERROR(fold_limit(hx.type, *dims, im.fold_max_bytes()));
                        return fold_where(hc, hx, hy, *dims);
                      });
}

// ---- no node: Identity, Dropout ----
Status op_identity(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  im.define(n, 0, x);
  return ok_status();
}

Status op_dropout(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"ratio", "seed", "is_test", "consumed_inputs"}));
  HEXIR_RETURN_IF_ERROR(im.only_first_outputs(n, 1));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> training, im.optional_input(n, 2));
  if (training) {
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(*training));
    if (!h || h->count() != 1)
      return error_at(n.loc, "training_mode must be a constant false (inference only)");
    if (h->i(0) != 0) {
      // Training mode with a constant ratio of 0 keeps every element and
      // scales by 1 (torchvision's swin exports its attention dropout so).
      HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> ratio, im.optional_input(n, 1));
      HostPtr r;
      if (ratio) {
        HEXIR_ASSIGN_OR_RETURN(r, im.host(*ratio));
      }
      if (!r || r->count() != 1 || r->f(0) != 0.0)
        return error_at(n.loc, "training_mode is true with a ratio other than a constant 0 (inference only)");
    }
  }
  im.define(n, 0, x);
  return ok_status();
}

}  // namespace hexir::compiler::onnx_import
