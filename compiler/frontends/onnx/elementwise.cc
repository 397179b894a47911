// Elementwise operators: the arithmetic (binary and variadic), comparisons,
// unary maps, Clip, Pow, Cast, Where, and Identity and Dropout (no node).
#include "frontends/onnx/handlers.h"

#include <algorithm>
#include <cmath>

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

// a op b op c ...: folded when every input is a held constant.
Status chain(Importer& im, const NodeCtx& n, const std::string& op) {
  std::vector<std::optional<Ref>> refs;
  for (int i = 0; i < n.node.input_size(); ++i) {
    HEXIR_ASSIGN_OR_RETURN(Ref r, im.input(n, i));
    refs.push_back(r);
  }
  std::vector<HostPtr> hs;
  HEXIR_ASSIGN_OR_RETURN(bool all_held, im.hosts(refs, hs));
  if (all_held) {
    HostTensor acc = *hs[0];
    Status s;
    for (size_t i = 1; i < hs.size() && s.ok(); ++i) {
      Result<HostTensor> next = fold_arith(n.loc, op, acc, *hs[i], im.fold_max_bytes());
      if (!next.ok()) s = next.status();
      else acc = std::move(*next);
    }
    if (s.ok() && op == "Mean") {
      HostTensor count = make_host(acc.type, {});
      count.set_f(0, static_cast<double>(hs.size()));
      Result<HostTensor> mean = fold_arith(n.loc, "Div", acc, count, im.fold_max_bytes());
      if (!mean.ok()) s = mean.status();
      else acc = std::move(*mean);
    }
    if (s.ok()) {
      im.define_folded(n, 0, std::move(acc));
      return ok_status();
    }
    if (!too_large(s)) return s;
  }
  if (refs.size() == 1) {
    im.define(n, 0, *refs[0]);
    return ok_status();
  }
  const ops::OpId id = binary_op(op);
  Ref acc = *refs[0];
  for (size_t i = 1; i < refs.size(); ++i) {
    const bool last = i + 1 == refs.size() && op != "Mean";
    HEXIR_ASSIGN_OR_RETURN(acc, im.emit1(n, id, {acc, *refs[i]}, {},
                                         last ? im.result_name(n) : im.helper_name(n, std::to_string(i))));
  }
  if (op == "Mean") {
    Ref count = im.scalar_const(static_cast<double>(refs.size()), im.info(acc).type,
                                im.helper_name(n, "count"), n.loc);
    HEXIR_ASSIGN_OR_RETURN(acc, im.emit1(n, ops::OpId::kDiv, {acc, count}, {}, im.result_name(n)));
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

// A node of two inputs with a bool result, folded on held constants, else the
// Hexir operator `name`.
Status bool_binary(Importer& im, const NodeCtx& n, const char* name) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref a, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref b, im.input(n, 1));
  std::vector<HostPtr> hs;
  HEXIR_ASSIGN_OR_RETURN(bool held, im.hosts({a, b}, hs));
  const std::string& op = n.op;
  if (held) {
    Result<HostTensor> out = fold_binary(
        n.loc, *hs[0], *hs[1], kBool,
        [&](int64_t x, int64_t y) -> Result<double> { return compare_values(op, x, y); },
        [&](double x, double y) -> double { return compare_values(op, x, y); }, im.fold_max_bytes());
    if (out.ok()) {
      im.define_folded(n, 0, std::move(*out));
      return ok_status();
    }
    if (!too_large(out.status())) return out.status();
  }
  HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, name));
  return im.emit_result(n, id, {a, b}, {});
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
  std::vector<HostPtr> hs;
  HEXIR_ASSIGN_OR_RETURN(bool held, im.hosts({a, b}, hs));
  if (held) {
    if (hs[0]->is_float() && fmod == 0) return error_at(n.loc, "floating-point operands need fmod = 1");
    Result<HostTensor> out = fold_binary(
        n.loc, *hs[0], *hs[1], hs[0]->type,
        [&](int64_t x, int64_t y) -> Result<double> {
          if (y == 0) return invalid_argument("integer division by zero");
          return static_cast<double>(ops::int_mod_of(x, y, static_cast<int32_t>(fmod)));
        },
        [](double x, double y) { return std::fmod(x, y); }, im.fold_max_bytes());
    if (out.ok()) {
      im.define_folded(n, 0, std::move(*out));
      return ok_status();
    }
    if (!too_large(out.status())) return out.status();
  }
  ops::AttrMap attrs;
  attrs["fmod"] = ops::AttrValue{fmod};
  return im.emit_result(n, ops::OpId::kMod, {a, b}, attrs);
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
  } else {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  }
  // ONNX float attributes are floats: the same value the kernels would see.
  alpha = static_cast<float>(alpha);
  beta = static_cast<float>(beta);
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(x));
  if (h && op != "Gelu") {
    im.define_folded(n, 0, fold_unary(op, *h, alpha, beta));
    return ok_status();
  }
  static const std::map<std::string, const char*, std::less<>> kUnary = {
      {"Relu", "relu"},        {"Sigmoid", "sigmoid"},     {"Tanh", "tanh"},
      {"Exp", "exp"},          {"Sqrt", "sqrt"},           {"Neg", "neg"},
      {"Gelu", "gelu"},        {"Abs", "abs"},             {"Reciprocal", "reciprocal"}, {"Softplus", "softplus"},
      {"Erf", "erf"},          {"Log", "log"},             {"Not", "not"},
      {"LeakyRelu", "leaky_relu"}, {"HardSigmoid", "hard_sigmoid"}, {"HardSwish", "hard_swish"},
      {"Sign", "sign"},        {"Ceil", "ceil"},           {"Floor", "floor"},           {"Round", "round"},
  };
  auto it = kUnary.find(op);
  std::optional<ops::OpId> id = it == kUnary.end() ? std::nullopt : ops::find_op(it->second);
  if (!id && op == "Reciprocal") {  // 1 / x
    Ref one = im.scalar_const(1.0, im.info(x).type, im.helper_name(n, "one"), n.loc);
    HEXIR_ASSIGN_OR_RETURN(Ref r, im.emit1(n, ops::OpId::kDiv, {one, x}, {}, im.result_name(n)));
    im.define(n, 0, r);
    return ok_status();
  }
  if (!id) {
    return error_at(
        n.loc, "is supported only on constants (folded at import): this build of Hexir has no run-time " +
                   op + " operator");
  }
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
  }
  return im.emit_result(n, *id, {x}, attrs);
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
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(x));
  if (h) {
    im.define_folded(n, 0, fold_clip(*h, lo, hi));
    return ok_status();
  }
  HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, "clip"));
  ops::AttrMap attrs;
  if (!std::isinf(lo)) attrs["min"] = real(lo);
  if (!std::isinf(hi)) attrs["max"] = real(hi);
  return im.emit_result(n, id, {x}, attrs);
}

// Pow: folded on constants; else @pow (f32), an integer exponent constant converted to f32.
Status op_pow(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref y, im.input(n, 1));
  std::vector<HostPtr> hs;
  HEXIR_ASSIGN_OR_RETURN(bool held, im.hosts({x, y}, hs));
  if (held) {
    Result<HostTensor> out = fold_binary(
        n.loc, *hs[0], *hs[1], hs[0]->type,
        [](int64_t a, int64_t b) -> Result<double> {
          return std::pow(static_cast<double>(a), static_cast<double>(b));
        },
        [](double a, double b) { return std::pow(a, b); }, im.fold_max_bytes());
    if (out.ok()) {
      im.define_folded(n, 0, std::move(*out));
      return ok_status();
    }
    if (!too_large(out.status())) return out.status();
  }
  const Info xi = im.info(x), yi = im.info(y);
  if (yi.type != xi.type) {
    HEXIR_ASSIGN_OR_RETURN(HostPtr hy, im.host(y));
    if (!hy)
      return error_at(n.loc, "the exponent is " + onnx_type_name(yi.type) + ", the base " +
                                 onnx_type_name(xi.type) + ": only a constant exponent is converted");
    HostTensor converted = make_host(xi.type, hy->dims);
    for (int64_t i = 0; i < hy->count(); ++i) converted.set_f(i, hy->f(i));
    y = im.new_const(im.helper_name(n, "exponent"), std::move(converted), n.loc);
  }
  HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, "pow"));
  return im.emit_result(n, id, {x, y}, {});
}

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
  if (onnx_element_size(to) == 0)
    return error_at(n.loc, "cast to " + onnx_type_name(to) + " is not supported");
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(x));
  if (h) {
    im.define_folded(n, 0, fold_cast(*h, to));
    return ok_status();
  }
  if (im.info(x).type == to) {
    im.define(n, 0, x);
    return ok_status();
  }
  const std::optional<DType> dtype = dtype_from_onnx(to);
  if (!dtype) return error_at(n.loc, "cast to " + onnx_type_name(to) + " is not supported at run time");
  ops::AttrMap attrs;
  attrs["to"] = ops::AttrValue{std::string(dtype_name(*dtype))};
  return im.emit_result(n, ops::OpId::kCast, {x}, attrs);
}

Status op_where(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref c, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(Ref y, im.input(n, 2));
  std::vector<HostPtr> hs;
  HEXIR_ASSIGN_OR_RETURN(bool held, im.hosts({c, x, y}, hs));
  if (held) {
    const HostTensor &hc = *hs[0], &hx = *hs[1], &hy = *hs[2];
    auto xy = ops::broadcast_shapes(hx.dims, hy.dims);
    auto dims = xy ? ops::broadcast_shapes(hc.dims, *xy) : std::nullopt;
    if (!dims || hx.type != hy.type) return error_at(n.loc, "operands do not broadcast or differ in type");
    Status limit = fold_limit(hx.type, *dims, im.fold_max_bytes());
    if (limit.ok()) {
      im.define_folded(n, 0, fold_where(hc, hx, hy, *dims));
      return ok_status();
    }
  }
  return im.emit_result(n, ops::OpId::kWhere, {c, x, y}, {});
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
    if (!h || h->count() != 1 || h->i(0) != 0)
      return error_at(n.loc, "training_mode must be a constant false (inference only)");
  }
  im.define(n, 0, x);
  return ok_status();
}

}  // namespace hexir::compiler::onnx_import
