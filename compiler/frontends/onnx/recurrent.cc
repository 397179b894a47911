// Recurrent operators: RNN, GRU and LSTM over their static sequence length,
// unrolled or as a loop. One reader for the three nodes' attributes and inputs,
// one driver for the directions and outputs; only the step differs.
#include <algorithm>
#include <cctype>

#include "frontends/onnx/handlers.h"

namespace hexir::compiler::onnx_import {

namespace {

// ---- helpers that fold when their operands are held constants ----

// x[index] along axis 0, that axis dropped.
Result<Ref> take0(Importer& im, const NodeCtx& n, Ref x, int64_t index, const std::string& name) {
  const Info xi = im.info(x);
  std::vector<int64_t> dims(xi.dims.begin() + 1, xi.dims.end());
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(x));
  if (h) {
    std::vector<int64_t> starts(xi.dims.size(), 0), steps(xi.dims.size(), 1), sizes = xi.dims;
    starts[0] = index;
    sizes[0] = 1;
    HostTensor t = slice_host(*h, starts, steps, sizes);
    t.dims = dims;
    im.mark_used(name);
    return im.new_const(name, std::move(t), n.loc);
  }
  ops::AttrMap attrs;
  attrs["starts"] = int_list({index});
  attrs["ends"] = int_list({index + 1});
  attrs["axes"] = int_list({0});
  HEXIR_ASSIGN_OR_RETURN(Ref r, im.emit1(n, ops::OpId::kSlice, {x}, attrs, im.fresh(name + "_slice")));
  return im.reshape(n, r, dims, name);
}

// Parts of the given sizes along `axis`.
Result<std::vector<Ref>> split_sizes(Importer& im, const NodeCtx& n, Ref x, int64_t axis,
                                     const std::vector<int64_t>& sizes, const std::string& hint) {
  const Info xi = im.info(x);
  std::vector<Ref> out;
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(x));
  if (h) {
    int64_t begin = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::vector<int64_t> starts(xi.dims.size(), 0), steps(xi.dims.size(), 1), part = xi.dims;
      starts[static_cast<size_t>(axis)] = begin;
      part[static_cast<size_t>(axis)] = sizes[i];
      begin += sizes[i];
      out.push_back(im.new_const(im.fresh(hint + std::to_string(i)), slice_host(*h, starts, steps, part), n.loc));
    }
    return out;
  }
  ops::AttrMap attrs;
  attrs["axis"] = ops::AttrValue{axis};
  attrs["sizes"] = int_list(sizes);
  std::vector<std::string> names;
  for (size_t i = 0; i < sizes.size(); ++i) names.push_back(im.fresh(hint + std::to_string(i)));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int> ids, im.emit(n, ops::OpId::kSplit, {x}, attrs, names));
  for (int id : ids) out.push_back(Ref{id, -1});
  return out;
}

// Equal parts along `axis`.
Result<std::vector<Ref>> split_ref(Importer& im, const NodeCtx& n, Ref x, int64_t axis, int parts,
                                   const std::string& hint) {
  const int64_t size = im.info(x).dims[static_cast<size_t>(axis)] / parts;
  return split_sizes(im, n, x, axis, std::vector<int64_t>(static_cast<size_t>(parts), size), hint);
}

// `parts` joined along `axis` (folded when all are constants).
Result<Ref> concat(Importer& im, const NodeCtx& n, const std::vector<Ref>& parts, int64_t axis,
                   const std::string& name) {
  ops::AttrMap attrs;
  attrs["axis"] = ops::AttrValue{axis};
  return im.emit1(n, ops::OpId::kConcat, parts, attrs, name);
}

// a + b, folded when both are held.
Result<Ref> add(Importer& im, const NodeCtx& n, Ref a, Ref b, const std::string& name) {
  std::vector<HostPtr> hs;
  HEXIR_ASSIGN_OR_RETURN(bool held, im.hosts({a, b}, hs));
  if (held) {
    Result<HostTensor> out = fold_arith(n.loc, "Add", *hs[0], *hs[1], im.fold_max_bytes());
    if (out.ok()) {
      im.mark_used(name);
      return im.new_const(name, std::move(*out), n.loc);
    }
    if (!too_large(out.status())) return out.status();
  }
  return im.emit1(n, ops::OpId::kAdd, {a, b}, {}, name);
}

// ---- the node: attributes and inputs ----

enum class Cell { kRnn, kGru, kLstm };

// An activation function of the ONNX recurrent operators, with the alpha
// and beta it consumed.
struct Activation {
  std::string name;  // as spelled in the model
  std::string kind;  // lower case
  double alpha = 0, beta = 0;
};

// A recurrent node, checked: its attributes, the activations of each
// direction and its inputs, X sequence-major.
struct Recurrent {
  Cell cell = Cell::kLstm;
  int64_t gates = 4;  // RNN 1 (i), GRU 3 (z, r, h), LSTM 4 (i, o, f, c)
  std::string direction;
  int dirs = 1;
  int64_t hidden = 0, layout = 0;
  std::vector<std::vector<Activation>> act;  // per direction, in the operator's order (f, g, h)
  std::optional<double> clip;
  bool input_forget = false;         // LSTM: f = 1 - i
  bool linear_before_reset = false;  // GRU: r applied after the recurrent matmul
  Ref x, w, r;
  std::optional<Ref> bias, h0, c0, peep;
  int64_t seq = 0, batch = 0, in = 0;
};

// What an activation takes: alpha, beta, and their defaults (those of the
// ONNX operator of that name, as the spec says; onnxruntime takes 0 for
// ThresholdedRelu's. Affine and ScaledTanh have no operator: their values
// must be given rather than made 0, which makes them constant).
struct ActivationParams {
  int count;  // 0, 1 (alpha) or 2 (alpha, beta)
  std::optional<double> alpha, beta;
};

std::optional<ActivationParams> activation_params(const std::string& kind) {
  if (kind == "relu" || kind == "tanh" || kind == "sigmoid" || kind == "softsign" || kind == "softplus")
    return ActivationParams{0, {}, {}};
  if (kind == "leakyrelu") return ActivationParams{1, 0.01, {}};
  if (kind == "thresholdedrelu") return ActivationParams{1, 1.0, {}};
  if (kind == "hardsigmoid") return ActivationParams{2, 0.2, 0.5};
  if (kind == "affine" || kind == "scaledtanh") return ActivationParams{2, {}, {}};
  return std::nullopt;  // Elu and anything unknown
}

// The activations: the defaults of the cell, or the attribute's names (one
// set per direction, or one set for both), each consuming the next
// activation_alpha/beta when it takes them.
Status read_activations(const NodeCtx& n, Recurrent& s) {
  static const std::vector<std::vector<std::string>> kDefaults = {
      {"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
  const std::vector<std::string>& defaults = kDefaults[static_cast<size_t>(s.cell)];
  const size_t per_dir = defaults.size();
  std::vector<std::string> names;
  if (const auto* a = find_attribute(n.node, "activations")) {
    for (const std::string& f : a->strings()) names.push_back(f);
    if (names.size() == per_dir && s.dirs == 2) {
      const std::vector<std::string> one_set = names;
      names.insert(names.end(), one_set.begin(), one_set.end());
    }
    if (names.size() != per_dir * static_cast<size_t>(s.dirs))
      return error_at(n.loc, "activations has " + std::to_string(a->strings_size()) + " names; " + n.op + " takes " +
                                 std::to_string(per_dir) + " per direction");
  } else {
    for (int d = 0; d < s.dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  }
  std::vector<float> alphas, betas;
  if (const auto* a = find_attribute(n.node, "activation_alpha")) alphas.assign(a->floats().begin(), a->floats().end());
  if (const auto* a = find_attribute(n.node, "activation_beta")) betas.assign(a->floats().begin(), a->floats().end());
  size_t next_alpha = 0, next_beta = 0;
  s.act.assign(static_cast<size_t>(s.dirs), {});
  for (size_t i = 0; i < names.size(); ++i) {
    Activation a{names[i], names[i]};
    std::transform(a.kind.begin(), a.kind.end(), a.kind.begin(), [](unsigned char c) { return std::tolower(c); });
    const std::optional<ActivationParams> params = activation_params(a.kind);
    if (!params)
      return error_at(n.loc, "activation '" + a.name +
                                 "' is not supported by the ONNX importer (Relu, Tanh, "
                                 "Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, "
                                 "HardSigmoid, Softsign, Softplus; not Elu)");
    if (params->count >= 1) {
      if (next_alpha < alphas.size()) {
        a.alpha = alphas[next_alpha++];
      } else if (params->alpha) {
        a.alpha = *params->alpha;
      } else {
        return error_at(n.loc, "activation '" + a.name + "' needs a value in activation_alpha (it has no default)");
      }
    }
    if (params->count >= 2) {
      if (next_beta < betas.size()) {
        a.beta = betas[next_beta++];
      } else if (params->beta) {
        a.beta = *params->beta;
      } else {
        return error_at(n.loc, "activation '" + a.name + "' needs a value in activation_beta (it has no default)");
      }
    }
    s.act[i / per_dir].push_back(a);
  }
  if (next_alpha != alphas.size() || next_beta != betas.size())
    return error_at(n.loc, "activation_alpha/beta have more values than the activations take (" +
                               std::to_string(next_alpha) + " alpha, " + std::to_string(next_beta) + " beta)");
  return ok_status();
}

// The attributes; what is not supported fails here, naming it.
Status read_attributes(Importer& im, const NodeCtx& n, Recurrent& s) {
  switch (s.cell) {
    case Cell::kRnn:
      HEXIR_RETURN_IF_ERROR(im.check_attrs(
          n, {"activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout"}));
      s.gates = 1;
      break;
    case Cell::kGru: {
      HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"activation_alpha", "activation_beta", "activations", "clip",
                                               "direction", "hidden_size", "layout", "linear_before_reset"}));
      s.gates = 3;
      HEXIR_ASSIGN_OR_RETURN(int64_t lbr, im.attr_int(n, "linear_before_reset", 0));
      s.linear_before_reset = lbr != 0;
      break;
    }
    case Cell::kLstm: {
      HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"activation_alpha", "activation_beta", "activations", "clip",
                                               "direction", "hidden_size", "input_forget", "layout"}));
      s.gates = 4;
      HEXIR_ASSIGN_OR_RETURN(int64_t input_forget, im.attr_int(n, "input_forget", 0));
      s.input_forget = input_forget != 0;
      break;
    }
  }
  HEXIR_ASSIGN_OR_RETURN(s.direction, im.attr_string(n, "direction", "forward"));
  HEXIR_ASSIGN_OR_RETURN(s.hidden, im.attr_int(n, "hidden_size", 0));
  HEXIR_ASSIGN_OR_RETURN(s.layout, im.attr_int(n, "layout", 0));
  if (s.layout != 0 && s.layout != 1) return error_at(n.loc, "layout " + std::to_string(s.layout) + " is not 0 or 1");
  if (find_attribute(n.node, "clip")) {
    HEXIR_ASSIGN_OR_RETURN(double clip, im.attr_float(n, "clip", 0));
    if (!(clip >= 0)) return error_at(n.loc, "clip " + std::to_string(clip) + " is not a non-negative threshold");
    s.clip = static_cast<float>(clip);
  }
  const std::string& direction = s.direction;
  s.dirs = direction == "bidirectional" ? 2 : 1;
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return error_at(n.loc, "direction '" + direction + "' is not forward, reverse or bidirectional");
  return read_activations(n, s);
}

// The inputs, X made sequence-major (layout 1), and their shapes checked.
Status read_inputs(Importer& im, const NodeCtx& n, Recurrent& s) {
  HEXIR_ASSIGN_OR_RETURN(s.x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(s.w, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(s.r, im.input(n, 2));
  HEXIR_ASSIGN_OR_RETURN(s.bias, im.optional_input(n, 3));
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> seq_lens, im.optional_input(n, 4));
  HEXIR_ASSIGN_OR_RETURN(s.h0, im.optional_input(n, 5));
  if (s.cell == Cell::kLstm) {
    HEXIR_ASSIGN_OR_RETURN(s.c0, im.optional_input(n, 6));
    HEXIR_ASSIGN_OR_RETURN(s.peep, im.optional_input(n, 7));
  }
  for (const std::optional<Ref>& r :
       {std::optional<Ref>(s.x), std::optional<Ref>(s.w), std::optional<Ref>(s.r), s.bias, s.h0, s.c0, s.peep})
    if (r && im.info(*r).type != kFloat)
      return error_at(
          n.loc, n.op + " takes float (f32) inputs only in the ONNX importer, got " + onnx_type_name(im.info(*r).type));
  if (s.layout == 1) {  // [batch, seq, input] -> [seq, batch, input]; initial states [batch, dirs, H]
    HEXIR_ASSIGN_OR_RETURN(s.x, transpose(im, n, s.x, {1, 0, 2}, im.helper_name(n, "x_seq_major")));
    if (s.h0) {
      HEXIR_ASSIGN_OR_RETURN(s.h0, transpose(im, n, *s.h0, {1, 0, 2}, im.helper_name(n, "h0_dir_major")));
    }
    if (s.c0) {
      HEXIR_ASSIGN_OR_RETURN(s.c0, transpose(im, n, *s.c0, {1, 0, 2}, im.helper_name(n, "c0_dir_major")));
    }
  }
  const Info xi = im.info(s.x), wi = im.info(s.w);
  if (xi.dims.size() != 3 || wi.dims.size() != 3)
    return error_at(n.loc, "X and W must have rank 3, got " + shape_text(xi.dims) + " and " + shape_text(wi.dims));
  s.seq = xi.dims[0];
  s.batch = xi.dims[1];
  s.in = xi.dims[2];
  if (s.hidden == 0) s.hidden = wi.dims[1] / s.gates;
  const int64_t dirs = s.dirs, hidden = s.hidden, g = s.gates;
  if (wi.dims != std::vector<int64_t>{dirs, g * hidden, s.in} ||
      im.info(s.r).dims != std::vector<int64_t>{dirs, g * hidden, hidden})
    return error_at(n.loc, "W " + shape_text(wi.dims) + " and R " + shape_text(im.info(s.r).dims) +
                               " do not match hidden_size " + std::to_string(hidden) + " and the input " +
                               shape_text(xi.dims));
  if (s.bias && im.info(*s.bias).dims != std::vector<int64_t>{dirs, 2 * g * hidden})
    return error_at(n.loc, "B " + shape_text(im.info(*s.bias).dims) + " is not [" + std::to_string(dirs) + ", " +
                               std::to_string(2 * g * hidden) + "]");
  const std::vector<int64_t> state{dirs, s.batch, hidden};
  for (const auto& [r, what] : {std::pair{s.h0, "initial_h"}, std::pair{s.c0, "initial_c"}})
    if (r && im.info(*r).dims != state)
      return error_at(n.loc, std::string(what) + " " + shape_text(im.info(*r).dims) + " is not " + shape_text(state));
  if (s.peep && im.info(*s.peep).dims != std::vector<int64_t>{dirs, 3 * hidden})
    return error_at(n.loc, "P " + shape_text(im.info(*s.peep).dims) + " is not [" + std::to_string(dirs) + ", " +
                               std::to_string(3 * hidden) + "]");
  if (seq_lens) {
    HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> lens, im.const_ints(n, *seq_lens, 4, "sequence_lens"));
    for (int64_t l : lens)
      if (l != s.seq)
        return error_at(n.loc, "sequence_lens shorter than the sequence (" + std::to_string(l) + " of " +
                                   std::to_string(s.seq) +
                                   ") are not supported by the ONNX importer: the unrolled steps are static");
  }
  return ok_status();
}

// ---- activations ----

Ref scalar(Importer& im, const NodeCtx& n, double v, const std::string& hint) {
  return im.scalar_const(static_cast<float>(v), kFloat, hint, n.loc);
}

// f(x) for one of the recurrent operators' activation functions.
Result<Ref> activate(Importer& im, const NodeCtx& n, const Activation& a, Ref x, const std::string& name) {
  using ops::OpId;
  const std::string& k = a.kind;
  if (k == "relu") return im.emit1(n, OpId::kRelu, {x}, {}, name);
  if (k == "tanh") return im.emit1(n, OpId::kTanh, {x}, {}, name);
  if (k == "sigmoid") return im.emit1(n, OpId::kSigmoid, {x}, {}, name);
  if (k == "softplus") return im.emit1(n, OpId::kSoftplus, {x}, {}, name);
  if (k == "leakyrelu") {
    ops::AttrMap attrs;
    attrs["alpha"] = real(a.alpha);
    return im.emit1(n, OpId::kLeakyRelu, {x}, attrs, name);
  }
  if (k == "hardsigmoid") {
    ops::AttrMap attrs;
    attrs["alpha"] = real(a.alpha);
    attrs["beta"] = real(a.beta);
    return im.emit1(n, OpId::kHardSigmoid, {x}, attrs, name);
  }
  if (k == "softsign") {  // x / (1 + |x|)
    HEXIR_ASSIGN_OR_RETURN(Ref abs, im.emit1(n, OpId::kAbs, {x}, {}, im.fresh(name + "_abs")));
    HEXIR_ASSIGN_OR_RETURN(
        Ref den, im.emit1(n, OpId::kAdd, {abs, scalar(im, n, 1, name + "_one")}, {}, im.fresh(name + "_den")));
    return im.emit1(n, OpId::kDiv, {x, den}, {}, name);
  }
  if (k == "affine") {  // alpha x + beta
    HEXIR_ASSIGN_OR_RETURN(
        Ref ax, im.emit1(n, OpId::kMul, {x, scalar(im, n, a.alpha, name + "_alpha")}, {}, im.fresh(name + "_ax")));
    return im.emit1(n, OpId::kAdd, {ax, scalar(im, n, a.beta, name + "_beta")}, {}, name);
  }
  if (k == "scaledtanh") {  // alpha tanh(beta x)
    HEXIR_ASSIGN_OR_RETURN(
        Ref bx, im.emit1(n, OpId::kMul, {x, scalar(im, n, a.beta, name + "_beta")}, {}, im.fresh(name + "_bx")));
    HEXIR_ASSIGN_OR_RETURN(Ref t, im.emit1(n, OpId::kTanh, {bx}, {}, im.fresh(name + "_tanh")));
    return im.emit1(n, OpId::kMul, {t, scalar(im, n, a.alpha, name + "_alpha")}, {}, name);
  }
  // thresholdedrelu: x where x > alpha, else 0
  HEXIR_ASSIGN_OR_RETURN(Ref above, im.emit1(n, OpId::kGreater, {x, scalar(im, n, a.alpha, name + "_alpha")}, {},
                                             im.fresh(name + "_above")));
  return im.emit1(n, OpId::kWhere, {above, x, scalar(im, n, 0, name + "_zero")}, {}, name);
}

// f(clip(x)): a gate's activation of its pre-activation, clipped first when
// the node has `clip`.
Result<Ref> gate(Importer& im, const NodeCtx& n, const Recurrent& s, const Activation& a, Ref x,
                 const std::string& name) {
  if (s.clip) {
    ops::AttrMap attrs;
    attrs["min"] = real(-*s.clip);
    attrs["max"] = real(*s.clip);
    HEXIR_ASSIGN_OR_RETURN(x, im.emit1(n, ops::OpId::kClip, {x}, attrs, im.fresh(name + "_clip")));
  }
  return activate(im, n, a, x, name);
}

// ---- one direction ----

// One direction's operands: every step's input projection xw [seq, batch,
// G*H] (with the biases that add linearly), the recurrent weights
// transposed, and the state it starts from.
struct Direction {
  std::string tag;  // the prefix of its values' names
  const std::vector<Activation>* act = nullptr;
  Ref xw;
  Ref rt;                  // R^T [H, G*H]; GRU without linear_before_reset: [H, 2H] (z, r)
  std::optional<Ref> rht;  // GRU without linear_before_reset: Rh^T [H, H]
  std::optional<Ref> rbh;  // GRU with linear_before_reset: Rbh [H], added to h Rh^T
  std::vector<Ref> p;      // LSTM peepholes i, o, f
  Ref h;
  std::optional<Ref> c;  // LSTM
};

// Direction d's initial state `which` (h0 / c0), or zeros.
Result<Ref> initial_state(Importer& im, const NodeCtx& n, const Recurrent& s, const std::optional<Ref>& given, int d,
                          const std::string& name) {
  if (given) return take0(im, n, *given, d, name);
  return im.fill_const(kFloat, {s.batch, s.hidden}, std::vector<uint8_t>(4, 0), name, n.loc);
}

// The bias added to the input projection, and (GRU with
// linear_before_reset) Rbh kept apart: Wb + Rb for every gate but that one.
Status direction_bias(Importer& im, const NodeCtx& n, const Recurrent& s, int d, Direction& dir,
                      std::optional<Ref>& b) {
  if (!s.bias) return ok_status();
  const std::string& tag = dir.tag;
  HEXIR_ASSIGN_OR_RETURN(Ref bd, take0(im, n, *s.bias, d, im.fresh(tag + "/B")));
  HEXIR_ASSIGN_OR_RETURN(std::vector<Ref> wb_rb, split_ref(im, n, bd, 0, 2, tag + "/B"));
  Ref rb = wb_rb[1];
  if (s.cell == Cell::kGru && s.linear_before_reset) {
    HEXIR_ASSIGN_OR_RETURN(std::vector<Ref> zr_h, split_sizes(im, n, rb, 0, {2 * s.hidden, s.hidden}, tag + "/Rb"));
    dir.rbh = zr_h[1];
    Ref zero = im.fill_const(kFloat, {s.hidden}, std::vector<uint8_t>(4, 0), im.fresh(tag + "/Rb_none"), n.loc);
    HEXIR_ASSIGN_OR_RETURN(rb, concat(im, n, {zr_h[0], zero}, 0, im.fresh(tag + "/Rb_zr")));
  }
  HEXIR_ASSIGN_OR_RETURN(b, add(im, n, wb_rb[0], rb, im.fresh(tag + "/bias")));
  return ok_status();
}

// The recurrent weights, transposed: R^T, or for a GRU without
// linear_before_reset R^T's z and r columns and Rh^T apart (Rh multiplies r h).
Status direction_weights(Importer& im, const NodeCtx& n, const Recurrent& s, int d, Direction& dir) {
  const std::string& tag = dir.tag;
  HEXIR_ASSIGN_OR_RETURN(Ref rd, take0(im, n, s.r, d, im.fresh(tag + "/R")));
  if (s.cell == Cell::kGru && !s.linear_before_reset) {
    HEXIR_ASSIGN_OR_RETURN(std::vector<Ref> zr_h, split_sizes(im, n, rd, 0, {2 * s.hidden, s.hidden}, tag + "/R"));
    HEXIR_ASSIGN_OR_RETURN(dir.rt, transpose(im, n, zr_h[0], {1, 0}, im.fresh(tag + "/Rzr_T")));  // [H, 2H]
    HEXIR_ASSIGN_OR_RETURN(dir.rht, transpose(im, n, zr_h[1], {1, 0}, im.fresh(tag + "/Rh_T")));  // [H, H]
    return ok_status();
  }
  HEXIR_ASSIGN_OR_RETURN(dir.rt, transpose(im, n, rd, {1, 0}, im.fresh(tag + "/R_T")));  // [H, G*H]
  return ok_status();
}

Result<Direction> direction(Importer& im, const NodeCtx& n, const Recurrent& s, int d) {
  Direction dir;
  const std::string& tag = dir.tag = im.helper_name(n, "d" + std::to_string(d));
  dir.act = &s.act[static_cast<size_t>(d)];
  const int64_t width = s.gates * s.hidden;
  HEXIR_ASSIGN_OR_RETURN(Ref wd, take0(im, n, s.w, d, im.fresh(tag + "/W")));
  HEXIR_ASSIGN_OR_RETURN(Ref wt, transpose(im, n, wd, {1, 0}, im.fresh(tag + "/W_T")));  // [I, G*H]
  HEXIR_RETURN_IF_ERROR(direction_weights(im, n, s, d, dir));
  std::optional<Ref> b;
  HEXIR_RETURN_IF_ERROR(direction_bias(im, n, s, d, dir, b));
  if (s.peep) {
    HEXIR_ASSIGN_OR_RETURN(Ref pd, take0(im, n, *s.peep, d, im.fresh(tag + "/P")));
    HEXIR_ASSIGN_OR_RETURN(dir.p, split_ref(im, n, pd, 0, 3, tag + "/P"));
  }
  // Every step's input projection at once: [seq * batch, I] x [I, G*H] (+ bias).
  HEXIR_ASSIGN_OR_RETURN(Ref x2, im.reshape(n, s.x, {s.seq * s.batch, s.in}, im.fresh(tag + "/x2d")));
  HEXIR_ASSIGN_OR_RETURN(dir.xw, im.emit1(n, ops::OpId::kMatmul, {x2, wt}, {}, im.fresh(tag + "/xw")));
  if (b) {
    HEXIR_ASSIGN_OR_RETURN(dir.xw, im.emit1(n, ops::OpId::kAdd, {dir.xw, *b}, {}, im.fresh(tag + "/xwb")));
  }
  HEXIR_ASSIGN_OR_RETURN(dir.xw, im.reshape(n, dir.xw, {s.seq, s.batch, width}, im.fresh(tag + "/xw3d")));
  HEXIR_ASSIGN_OR_RETURN(dir.h, initial_state(im, n, s, s.h0, d, im.fresh(tag + "/h0")));
  if (s.cell == Cell::kLstm) {
    HEXIR_ASSIGN_OR_RETURN(dir.c, initial_state(im, n, s, s.c0, d, im.fresh(tag + "/c0")));
  }
  return dir;
}

// ---- the steps: from xw[t] and the state, the new state in `dir` ----

Result<Ref> op2(Importer& im, const NodeCtx& n, ops::OpId op, Ref a, Ref b, const std::string& name) {
  return im.emit1(n, op, {a, b}, {}, im.fresh(name));
}

// RNN: h = f(xw[t] + h R^T).
Status rnn_step(Importer& im, const NodeCtx& n, const Recurrent& s, Direction& dir, Ref xw_t, const std::string& st) {
  HEXIR_ASSIGN_OR_RETURN(Ref hr, op2(im, n, ops::OpId::kMatmul, dir.h, dir.rt, st + "/hr"));
  HEXIR_ASSIGN_OR_RETURN(Ref g, op2(im, n, ops::OpId::kAdd, xw_t, hr, st + "/gate"));
  HEXIR_ASSIGN_OR_RETURN(dir.h, gate(im, n, s, (*dir.act)[0], g, im.fresh(st + "/H")));
  return ok_status();
}

// GRU: z and r = f(xw[t] + h R^T) for the first two gates (one activation
// over both), the candidate g(xh + (r h) Rh^T), or with linear_before_reset
// g(xh + r (h Rh^T + Rbh)); then h = n + z (h - n), ONNX's (1 - z) n + z h.
Status gru_step(Importer& im, const NodeCtx& n, const Recurrent& s, Direction& dir, Ref xw_t, const std::string& st) {
  using ops::OpId;
  const int64_t H = s.hidden;
  HEXIR_ASSIGN_OR_RETURN(std::vector<Ref> x_parts, split_sizes(im, n, xw_t, 1, {2 * H, H}, st + "/x"));
  HEXIR_ASSIGN_OR_RETURN(Ref hr, op2(im, n, OpId::kMatmul, dir.h, dir.rt, st + "/hr"));
  Ref hr_zr = hr, hh = hr;
  if (s.linear_before_reset) {
    HEXIR_ASSIGN_OR_RETURN(std::vector<Ref> h_parts, split_sizes(im, n, hr, 1, {2 * H, H}, st + "/hr"));
    hr_zr = h_parts[0];
    hh = h_parts[1];
  }
  HEXIR_ASSIGN_OR_RETURN(Ref pre_zr, op2(im, n, OpId::kAdd, x_parts[0], hr_zr, st + "/zr_pre"));
  HEXIR_ASSIGN_OR_RETURN(Ref zr, gate(im, n, s, (*dir.act)[0], pre_zr, im.fresh(st + "/zr")));
  HEXIR_ASSIGN_OR_RETURN(std::vector<Ref> z_r, split_ref(im, n, zr, 1, 2, st + "/zr"));
  Ref z = z_r[0], r = z_r[1];
  Ref recurrent;  // what the reset gate makes of the previous state
  if (s.linear_before_reset) {
    if (dir.rbh) {
      HEXIR_ASSIGN_OR_RETURN(hh, op2(im, n, OpId::kAdd, hh, *dir.rbh, st + "/hh_b"));
    }
    HEXIR_ASSIGN_OR_RETURN(recurrent, op2(im, n, OpId::kMul, r, hh, st + "/r_hh"));
  } else {
    HEXIR_ASSIGN_OR_RETURN(Ref rh, op2(im, n, OpId::kMul, r, dir.h, st + "/r_h"));
    HEXIR_ASSIGN_OR_RETURN(recurrent, op2(im, n, OpId::kMatmul, rh, *dir.rht, st + "/r_h_R"));
  }
  HEXIR_ASSIGN_OR_RETURN(Ref pre_n, op2(im, n, OpId::kAdd, x_parts[1], recurrent, st + "/n_pre"));
  HEXIR_ASSIGN_OR_RETURN(Ref cand, gate(im, n, s, (*dir.act)[1], pre_n, im.fresh(st + "/n")));
  HEXIR_ASSIGN_OR_RETURN(Ref diff, op2(im, n, OpId::kSub, dir.h, cand, st + "/h_n"));
  HEXIR_ASSIGN_OR_RETURN(Ref zd, op2(im, n, OpId::kMul, z, diff, st + "/z_h_n"));
  HEXIR_ASSIGN_OR_RETURN(dir.h, op2(im, n, OpId::kAdd, cand, zd, st + "/H"));
  return ok_status();
}

// LSTM: the gates from xw[t] and h R^T (i, o, f, c, with the peepholes and
// input_forget's f = 1 - i), then the new c and h.
Status lstm_step(Importer& im, const NodeCtx& n, const Recurrent& s, Direction& dir, Ref xw_t, const std::string& st) {
  using ops::OpId;
  const std::vector<Activation>& act = *dir.act;
  const std::vector<Ref>& p = dir.p;
  Ref& c_state = *dir.c;
  HEXIR_ASSIGN_OR_RETURN(Ref hr, op2(im, n, OpId::kMatmul, dir.h, dir.rt, st + "/hr"));
  HEXIR_ASSIGN_OR_RETURN(Ref g, op2(im, n, OpId::kAdd, xw_t, hr, st + "/gates"));
  if (!s.peep && !s.input_forget && !s.clip && act[0].kind == "sigmoid" && act[1].kind == "tanh" &&
      act[2].kind == "tanh") {
    // ONNX's default cell: one lstm_cell, the bits of the operators below
    // in one dispatch a step where they took nine (the zoo's 2-layer
    // bidirectional LSTM 1.87 -> 1.81 ms), its c in the loop's own buffer.
    HEXIR_ASSIGN_OR_RETURN(std::vector<int> ch, im.emit(n, OpId::kLstmCell, {g, c_state}, {},
                                                        {im.fresh(st + "/C"), im.fresh(st + "/H")}));
    c_state = Ref{ch[0], -1};
    dir.h = Ref{ch[1], -1};
    return ok_status();
  }
  HEXIR_ASSIGN_OR_RETURN(std::vector<Ref> gates, split_ref(im, n, g, 1, 4, st + "/g"));  // i, o, f, c
  Ref gi = gates[0], go = gates[1], gf = gates[2], gc = gates[3];
  if (s.peep) {
    HEXIR_ASSIGN_OR_RETURN(Ref pi, op2(im, n, OpId::kMul, c_state, p[0], st + "/pi"));
    HEXIR_ASSIGN_OR_RETURN(gi, op2(im, n, OpId::kAdd, gi, pi, st + "/i_p"));
  }
  HEXIR_ASSIGN_OR_RETURN(Ref i_t, gate(im, n, s, act[0], gi, im.fresh(st + "/i")));
  Ref f_t;
  if (s.input_forget) {
    HEXIR_ASSIGN_OR_RETURN(f_t, op2(im, n, OpId::kSub, scalar(im, n, 1, st + "/one"), i_t, st + "/f"));
  } else {
    if (s.peep) {
      HEXIR_ASSIGN_OR_RETURN(Ref pf, op2(im, n, OpId::kMul, c_state, p[2], st + "/pf"));
      HEXIR_ASSIGN_OR_RETURN(gf, op2(im, n, OpId::kAdd, gf, pf, st + "/f_p"));
    }
    HEXIR_ASSIGN_OR_RETURN(f_t, gate(im, n, s, act[0], gf, im.fresh(st + "/f")));
  }
  HEXIR_ASSIGN_OR_RETURN(Ref c_t, gate(im, n, s, act[1], gc, im.fresh(st + "/c")));
  HEXIR_ASSIGN_OR_RETURN(Ref fc, op2(im, n, OpId::kMul, f_t, c_state, st + "/fc"));
  HEXIR_ASSIGN_OR_RETURN(Ref ic, op2(im, n, OpId::kMul, i_t, c_t, st + "/ic"));
  HEXIR_ASSIGN_OR_RETURN(c_state, op2(im, n, OpId::kAdd, fc, ic, st + "/C"));
  if (s.peep) {
    HEXIR_ASSIGN_OR_RETURN(Ref po, op2(im, n, OpId::kMul, c_state, p[1], st + "/po"));
    HEXIR_ASSIGN_OR_RETURN(go, op2(im, n, OpId::kAdd, go, po, st + "/o_p"));
  }
  HEXIR_ASSIGN_OR_RETURN(Ref o_t, gate(im, n, s, act[0], go, im.fresh(st + "/o")));
  HEXIR_ASSIGN_OR_RETURN(Ref hc, activate(im, n, act[2], c_state, im.fresh(st + "/hc")));
  HEXIR_ASSIGN_OR_RETURN(dir.h, op2(im, n, OpId::kMul, o_t, hc, st + "/H"));
  return ok_status();
}

// ---- the node's results ----

// One direction's results: Y [seq, 1, batch, H] (nullopt when output 0 is
// not read), Y_h and (LSTM) Y_c [1, batch, H].
struct Results {
  std::optional<Ref> y;
  Ref h;
  std::optional<Ref> c;
};

Status run_step(Importer& im, const NodeCtx& n, const Recurrent& s, Direction& dir, Ref xw_t, const std::string& st) {
  switch (s.cell) {
    case Cell::kRnn:
      return rnn_step(im, n, s, dir, xw_t, st);
    case Cell::kGru:
      return gru_step(im, n, s, dir, xw_t, st);
    case Cell::kLstm:
      return lstm_step(im, n, s, dir, xw_t, st);
  }
  return ok_status();
}

// Runs direction d over the sequence (backwards for reverse, and for the
// second direction of bidirectional).
Result<Results> run_direction(Importer& im, const NodeCtx& n, const Recurrent& s, int d) {
  const bool reverse = s.direction == "reverse" || d == 1;
  HEXIR_ASSIGN_OR_RETURN(Direction dir, direction(im, n, s, d));
  const std::string& tag = dir.tag;
  std::vector<Ref> steps(static_cast<size_t>(s.seq));
  for (int64_t k = 0; k < s.seq; ++k) {
    const int64_t t = reverse ? s.seq - 1 - k : k;
    const std::string st = tag + "/t" + std::to_string(t);
    HEXIR_ASSIGN_OR_RETURN(Ref xw_t, take0(im, n, dir.xw, t, im.fresh(st + "/xw")));
    HEXIR_RETURN_IF_ERROR(run_step(im, n, s, dir, xw_t, st));
    steps[static_cast<size_t>(t)] = dir.h;
  }
  Results out;
  if (!im.out_name(n, 0).empty()) {
    std::vector<Ref> rows;
    for (int64_t t = 0; t < s.seq; ++t) {
      HEXIR_ASSIGN_OR_RETURN(Ref row, im.reshape(n, steps[static_cast<size_t>(t)], {1, 1, s.batch, s.hidden},
                                                 im.fresh(tag + "/y" + std::to_string(t))));
      rows.push_back(row);
    }
    Ref y = rows[0];
    if (rows.size() > 1) {
      HEXIR_ASSIGN_OR_RETURN(y, concat(im, n, rows, 0, im.fresh(tag + "/Y")));
    }
    out.y = y;
  }
  HEXIR_ASSIGN_OR_RETURN(out.h, im.reshape(n, dir.h, {1, s.batch, s.hidden}, im.fresh(tag + "/Y_h")));
  if (dir.c) {
    HEXIR_ASSIGN_OR_RETURN(out.c, im.reshape(n, *dir.c, {1, s.batch, s.hidden}, im.fresh(tag + "/Y_c")));
  }
  return out;
}

// `x` [seq, ...] with its steps in the opposite order (a gather of
// constant indices seq-1 .. 0).
Result<Ref> reverse_steps(Importer& im, const NodeCtx& n, Ref x, const std::string& name) {
  const int64_t seq = im.info(x).dims[0];
  std::vector<int64_t> order(static_cast<size_t>(seq));
  for (int64_t t = 0; t < seq; ++t) order[static_cast<size_t>(t)] = seq - 1 - t;
  const Ref indices = im.new_const(im.fresh(name + "_order"), host_i64(order), n.loc);
  ops::AttrMap attrs;
  attrs["axis"] = ops::AttrValue{int64_t{0}};
  return im.emit1(n, ops::OpId::kGather, {x, indices}, attrs, im.fresh(name));
}

// Runs direction d as a counted loop (a `for` of the graph): step t reads
// xw[t] by the induction variable (xw's steps reversed first for a
// backward direction), carries h (and c), and writes h as row t of Y's
// buffer in place; Y is reversed back afterwards.
Result<Results> run_direction_loop(Importer& im, const NodeCtx& n, const Recurrent& s, int d) {
  const bool reverse = s.direction == "reverse" || d == 1;
  HEXIR_ASSIGN_OR_RETURN(Direction dir, direction(im, n, s, d));
  const std::string& tag = dir.tag;
  Ref xw = dir.xw;
  if (reverse) {
    HEXIR_ASSIGN_OR_RETURN(xw, reverse_steps(im, n, xw, tag + "/xw_reversed"));
  }
  const bool want_y = !im.out_name(n, 0).empty();
  std::vector<Ref> inits{dir.h};
  std::vector<std::string> names{im.fresh(tag + "/h")};
  if (dir.c) {
    inits.push_back(*dir.c);
    names.push_back(im.fresh(tag + "/c"));
  }
  if (want_y) {
    inits.push_back(im.fill_const(kFloat, {s.seq, s.batch, s.hidden}, std::vector<uint8_t>(4, 0),
                                  im.fresh(tag + "/y_rows"), n.loc));
    names.push_back(im.fresh(tag + "/y"));
  }
  GraphBuilder::LoopSpec spec;
  HEXIR_ASSIGN_OR_RETURN(spec.start, im.materialize(im.scalar_const(0, kInt64, tag + "/start", n.loc), n.loc));
  HEXIR_ASSIGN_OR_RETURN(
      spec.trip, im.materialize(im.scalar_const(static_cast<double>(s.seq), kInt64, tag + "/steps", n.loc), n.loc));
  for (Ref r : inits) {
    HEXIR_ASSIGN_OR_RETURN(int v, im.materialize(r, n.loc));
    spec.inits.push_back(v);
  }
  spec.induction_name = im.fresh(tag + "/t");
  spec.carried_names = names;
  spec.loc = n.loc;
  HEXIR_ASSIGN_OR_RETURN(std::vector<int> values, im.builder().begin_loop(std::move(spec)));
  const Ref t{values[0], -1};
  dir.h = Ref{values[1], -1};
  if (dir.c) dir.c = Ref{values[2], -1};
  const std::string st = tag + "/step";
  ops::AttrMap axis0;
  axis0["axis"] = ops::AttrValue{int64_t{0}};
  HEXIR_ASSIGN_OR_RETURN(Ref xw_t, im.emit1(n, ops::OpId::kGather, {xw, t}, axis0, im.fresh(st + "/xw")));
  HEXIR_RETURN_IF_ERROR(run_step(im, n, s, dir, xw_t, st));
  std::vector<Ref> next{dir.h};
  if (dir.c) next.push_back(*dir.c);
  if (want_y) {
    HEXIR_ASSIGN_OR_RETURN(Ref row, im.reshape(n, dir.h, {1, s.batch, s.hidden}, im.fresh(st + "/y_row")));
    const Ref zero = im.scalar_const(0, kInt64, st + "/zero", n.loc);
    HEXIR_ASSIGN_OR_RETURN(Ref written,
                           im.emit1(n, ops::OpId::kUpdateSlice, {Ref{values.back(), -1}, row, t, zero, zero}, {},
                                    im.fresh(st + "/y_write")));
    next.push_back(written);
  }
  std::vector<int> yielded;
  for (Ref r : next) {
    HEXIR_ASSIGN_OR_RETURN(int v, im.materialize(r, n.loc));
    yielded.push_back(v);
  }
  HEXIR_ASSIGN_OR_RETURN(std::vector<int> results, im.builder().end_loop(yielded, {}, n.loc));
  Results out;
  HEXIR_ASSIGN_OR_RETURN(out.h, im.reshape(n, Ref{results[0], -1}, {1, s.batch, s.hidden}, im.fresh(tag + "/Y_h")));
  if (dir.c) {
    HEXIR_ASSIGN_OR_RETURN(out.c, im.reshape(n, Ref{results[1], -1}, {1, s.batch, s.hidden}, im.fresh(tag + "/Y_c")));
  }
  if (want_y) {
    Ref y{results.back(), -1};
    if (reverse) {
      HEXIR_ASSIGN_OR_RETURN(y, reverse_steps(im, n, y, tag + "/y_in_order"));
    }
    HEXIR_ASSIGN_OR_RETURN(out.y, im.reshape(n, y, {s.seq, 1, s.batch, s.hidden}, im.fresh(tag + "/Y")));
  }
  return out;
}

// Output `index`, when read: the directions' `parts` joined along `axis`
// (a concat, or a view of the one), then layout 1's order (`perm`).
Status define_output(Importer& im, const NodeCtx& n, const Recurrent& s, const std::vector<Ref>& parts, int64_t axis,
                     int index, const std::vector<int64_t>& perm) {
  if (im.out_name(n, index).empty()) return ok_status();
  const bool permute = s.layout == 1;
  Ref v = parts[0];
  if (parts.size() > 1) {
    HEXIR_ASSIGN_OR_RETURN(v, concat(im, n, parts, axis,
                                     permute ? im.fresh(im.out_name(n, index) + "/joined") : im.result_name(n, index)));
  } else if (!permute) {
    const std::vector<int64_t> dims = im.info(v).dims;
    HEXIR_ASSIGN_OR_RETURN(
        v, im.emit1(n, ops::OpId::kReshape, {v}, {}, im.result_name(n, index), {TensorType{DType::kF32, dims}}));
  }
  if (permute) {
    ops::AttrMap attrs;
    attrs["perm"] = int_list(perm);
    HEXIR_ASSIGN_OR_RETURN(v, im.emit1(n, ops::OpId::kTranspose, {v}, attrs, im.result_name(n, index)));
  }
  im.define(n, index, v);
  return ok_status();
}

// Sequences up to this many steps are unrolled, longer ones run as a loop
// (docs/design-notes.md, "Recurrent operators: unrolled or a loop"): the
// unrolled steps are 4-12% faster (no gather, row write or loop control per
// step) for about 2 KB of instructions per step and direction; past 64 steps
// the time difference is within 1% and the loop keeps the file and the
// compile time independent of the length.
constexpr int64_t kUnrollMaxSteps = 64;

// The node: each direction's steps, then Y [seq, dirs, batch, H],
// Y_h and (LSTM) Y_c [dirs, batch, H] (batch first with layout 1).
Status import_recurrent(Importer& im, const NodeCtx& n, Cell cell) {
  Recurrent s;
  s.cell = cell;
  HEXIR_RETURN_IF_ERROR(read_attributes(im, n, s));
  HEXIR_RETURN_IF_ERROR(read_inputs(im, n, s));
  HEXIR_RETURN_IF_ERROR(im.only_first_outputs(n, cell == Cell::kLstm ? 3 : 2));
  std::vector<Ref> ys, hs, cs;
  for (int d = 0; d < s.dirs; ++d) {
    HEXIR_ASSIGN_OR_RETURN(Results r,
                           s.seq <= kUnrollMaxSteps ? run_direction(im, n, s, d) : run_direction_loop(im, n, s, d));
    if (r.y) ys.push_back(*r.y);
    hs.push_back(r.h);
    if (r.c) cs.push_back(*r.c);
  }
  HEXIR_RETURN_IF_ERROR(define_output(im, n, s, ys, 1, 0, {2, 0, 1, 3}));
  HEXIR_RETURN_IF_ERROR(define_output(im, n, s, hs, 0, 1, {1, 0, 2}));
  if (cell == Cell::kLstm) {
    HEXIR_RETURN_IF_ERROR(define_output(im, n, s, cs, 0, 2, {1, 0, 2}));
  }
  return ok_status();
}

}  // namespace

// The recurrent operators over the static sequence length, unrolled (up to
// kUnrollMaxSteps) or as a counted loop: the input projection of every step
// is one matmul up front; per step a matmul with the recurrent weights (the
// same constant each step: the VM prepares it once), the gates' split,
// activations and state update, all in Hexir operators. Forward, reverse and bidirectional; biases; initial
// states; layout 0 and 1; clip; the activations with their alpha/beta.
Status op_rnn(Importer& im, const NodeCtx& n) { return import_recurrent(im, n, Cell::kRnn); }
Status op_gru(Importer& im, const NodeCtx& n) { return import_recurrent(im, n, Cell::kGru); }
Status op_lstm(Importer& im, const NodeCtx& n) { return import_recurrent(im, n, Cell::kLstm); }

}  // namespace hexir::compiler::onnx_import
