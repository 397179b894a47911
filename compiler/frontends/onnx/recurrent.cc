// Recurrent operators: LSTM, unrolled over its static sequence length.
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

// Equal parts along `axis`.
Result<std::vector<Ref>> split_ref(Importer& im, const NodeCtx& n, Ref x, int64_t axis, int parts,
                                   const std::string& hint) {
  const Info xi = im.info(x);
  const int64_t size = xi.dims[static_cast<size_t>(axis)] / parts;
  std::vector<Ref> out;
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(x));
  if (h) {
    for (int i = 0; i < parts; ++i) {
      std::vector<int64_t> starts(xi.dims.size(), 0), steps(xi.dims.size(), 1), sizes = xi.dims;
      starts[static_cast<size_t>(axis)] = i * size;
      sizes[static_cast<size_t>(axis)] = size;
      out.push_back(
          im.new_const(im.fresh(hint + std::to_string(i)), slice_host(*h, starts, steps, sizes), n.loc));
    }
    return out;
  }
  ops::AttrMap attrs;
  attrs["axis"] = ops::AttrValue{axis};
  attrs["sizes"] = int_list(std::vector<int64_t>(static_cast<size_t>(parts), size));
  std::vector<std::string> names;
  for (int i = 0; i < parts; ++i) names.push_back(im.fresh(hint + std::to_string(i)));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int> ids, im.emit(n, ops::OpId::kSplit, {x}, attrs, names));
  for (int id : ids) out.push_back(Ref{id, -1});
  return out;
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

// ---- LSTM ----

// An LSTM node, checked: its attributes, the activations f, g, h (one set
// for both directions) and its inputs, X sequence-major.
struct Lstm {
  std::string direction;
  int dirs = 1;
  int64_t hidden = 0, layout = 0;
  std::vector<ops::OpId> act;
  Ref x, w, r;
  std::optional<Ref> bias, h0, c0, peep;
  int64_t seq = 0, batch = 0, in = 0;
};

// The attributes: direction, hidden_size, layout, the activations; what is
// not supported fails here.
Status read_lstm_attributes(Importer& im, const NodeCtx& n, Lstm& s) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"activation_alpha", "activation_beta", "activations", "clip",
                                           "direction", "hidden_size", "input_forget", "layout"}));
  HEXIR_ASSIGN_OR_RETURN(s.direction, im.attr_string(n, "direction", "forward"));
  HEXIR_ASSIGN_OR_RETURN(s.hidden, im.attr_int(n, "hidden_size", 0));
  HEXIR_ASSIGN_OR_RETURN(s.layout, im.attr_int(n, "layout", 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t input_forget, im.attr_int(n, "input_forget", 0));
  if (input_forget) return error_at(n.loc, "input_forget = 1 is not supported by the ONNX importer");
  if (find_attribute(n.node, "clip"))
    return error_at(n.loc, "attribute 'clip' is not supported by the ONNX importer");
  if (find_attribute(n.node, "activation_alpha") || find_attribute(n.node, "activation_beta"))
    return error_at(n.loc, "activation_alpha/beta are not supported by the ONNX importer");
  const std::string& direction = s.direction;
  s.dirs = direction == "bidirectional" ? 2 : 1;
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return error_at(n.loc, "direction '" + direction + "' is not forward, reverse or bidirectional");
  s.act = {ops::OpId::kSigmoid, ops::OpId::kTanh, ops::OpId::kTanh};
  if (const auto* a = find_attribute(n.node, "activations")) {
    if (a->strings_size() != 3 * s.dirs) return error_at(n.loc, "activations needs 3 names per direction");
    for (int i = 0; i < a->strings_size(); ++i) {
      const std::string& f = a->strings(i);
      const ops::OpId id = f == "Sigmoid" ? ops::OpId::kSigmoid : f == "Tanh" ? ops::OpId::kTanh
                           : f == "Relu"  ? ops::OpId::kRelu : ops::OpId::kCount;
      if (id == ops::OpId::kCount || (i >= 3 && id != s.act[static_cast<size_t>(i - 3)]))
        return error_at(n.loc,
                        "activation '" + f + "' is not supported by the ONNX importer (Sigmoid, Tanh, Relu)");
      if (i < 3) s.act[static_cast<size_t>(i)] = id;
    }
  }
  return ok_status();
}

// The inputs, X made sequence-major (layout 1), and their shapes checked.
Status read_lstm_inputs(Importer& im, const NodeCtx& n, Lstm& s) {
  HEXIR_ASSIGN_OR_RETURN(s.x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(s.w, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(s.r, im.input(n, 2));
  HEXIR_ASSIGN_OR_RETURN(s.bias, im.optional_input(n, 3));
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> seq_lens, im.optional_input(n, 4));
  HEXIR_ASSIGN_OR_RETURN(s.h0, im.optional_input(n, 5));
  HEXIR_ASSIGN_OR_RETURN(s.c0, im.optional_input(n, 6));
  HEXIR_ASSIGN_OR_RETURN(s.peep, im.optional_input(n, 7));
  if (s.layout == 1) {  // [batch, seq, input] -> [seq, batch, input]
    HEXIR_ASSIGN_OR_RETURN(s.x, transpose(im, n, s.x, {1, 0, 2}, im.helper_name(n, "x_seq_major")));
  }
  const Info xi = im.info(s.x), wi = im.info(s.w);
  if (xi.dims.size() != 3 || wi.dims.size() != 3)
    return error_at(n.loc,
                    "X and W must have rank 3, got " + shape_text(xi.dims) + " and " + shape_text(wi.dims));
  s.seq = xi.dims[0];
  s.batch = xi.dims[1];
  s.in = xi.dims[2];
  if (s.hidden == 0) s.hidden = wi.dims[1] / 4;
  const int64_t dirs = s.dirs, hidden = s.hidden;
  if (wi.dims != std::vector<int64_t>{dirs, 4 * hidden, s.in} ||
      im.info(s.r).dims != std::vector<int64_t>{dirs, 4 * hidden, hidden})
    return error_at(n.loc, "W " + shape_text(wi.dims) + " and R " + shape_text(im.info(s.r).dims) +
                               " do not match hidden_size " + std::to_string(hidden) + " and the input " +
                               shape_text(xi.dims));
  if (seq_lens) {
    HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> lens, im.const_ints(n, *seq_lens, 4, "sequence_lens"));
    for (int64_t l : lens)
      if (l != s.seq)
        return error_at(n.loc,
                        "sequence_lens shorter than the sequence are not supported by the ONNX importer");
  }
  return ok_status();
}

// One direction's operands: R transposed, the peepholes, every step's input
// projection xw [seq, batch, 4H], and the state (h, c) it starts from.
struct LstmDirection {
  std::string tag;  // the prefix of its values' names
  Ref rt;
  std::vector<Ref> p;  // peepholes i, o, f
  Ref xw;
  Ref h, c;
};

Result<LstmDirection> lstm_direction(Importer& im, const NodeCtx& n, const Lstm& s, int d) {
  LstmDirection dir;
  const std::string& tag = dir.tag = im.helper_name(n, "d" + std::to_string(d));
  HEXIR_ASSIGN_OR_RETURN(Ref wd, take0(im, n, s.w, d, im.fresh(tag + "/W")));
  HEXIR_ASSIGN_OR_RETURN(Ref rd, take0(im, n, s.r, d, im.fresh(tag + "/R")));
  HEXIR_ASSIGN_OR_RETURN(Ref wt, transpose(im, n, wd, {1, 0}, im.fresh(tag + "/W_T")));      // [I, 4H]
  HEXIR_ASSIGN_OR_RETURN(dir.rt, transpose(im, n, rd, {1, 0}, im.fresh(tag + "/R_T")));  // [H, 4H]
  std::optional<Ref> b;
  if (s.bias) {
    HEXIR_ASSIGN_OR_RETURN(Ref bd, take0(im, n, *s.bias, d, im.fresh(tag + "/B")));
    HEXIR_ASSIGN_OR_RETURN(std::vector<Ref> wb_rb, split_ref(im, n, bd, 0, 2, tag + "/B"));
    HEXIR_ASSIGN_OR_RETURN(b, add(im, n, wb_rb[0], wb_rb[1], im.fresh(tag + "/bias")));
  }
  if (s.peep) {
    HEXIR_ASSIGN_OR_RETURN(Ref pd, take0(im, n, *s.peep, d, im.fresh(tag + "/P")));
    HEXIR_ASSIGN_OR_RETURN(dir.p, split_ref(im, n, pd, 0, 3, tag + "/P"));
  }
  // Every step's input projection at once: [seq * batch, I] x [I, 4H] (+ bias).
  HEXIR_ASSIGN_OR_RETURN(Ref x2, im.reshape(n, s.x, {s.seq * s.batch, s.in}, im.fresh(tag + "/x2d")));
  HEXIR_ASSIGN_OR_RETURN(dir.xw, im.emit1(n, ops::OpId::kMatmul, {x2, wt}, {}, im.fresh(tag + "/xw")));
  if (b) {
    HEXIR_ASSIGN_OR_RETURN(dir.xw, im.emit1(n, ops::OpId::kAdd, {dir.xw, *b}, {}, im.fresh(tag + "/xwb")));
  }
  HEXIR_ASSIGN_OR_RETURN(dir.xw,
                         im.reshape(n, dir.xw, {s.seq, s.batch, 4 * s.hidden}, im.fresh(tag + "/xw3d")));
  const std::vector<int64_t> state_dims{s.batch, s.hidden};
  const std::vector<uint8_t> zero(4, 0);
  if (s.h0) {
    HEXIR_ASSIGN_OR_RETURN(dir.h, take0(im, n, *s.h0, d, im.fresh(tag + "/h0")));
  } else {
    dir.h = im.fill_const(kFloat, state_dims, zero, im.fresh(tag + "/h0"), n.loc);
  }
  if (s.c0) {
    HEXIR_ASSIGN_OR_RETURN(dir.c, take0(im, n, *s.c0, d, im.fresh(tag + "/c0")));
  } else {
    dir.c = im.fill_const(kFloat, state_dims, zero, im.fresh(tag + "/c0"), n.loc);
  }
  return dir;
}

// Step t of a direction: the gates from xw[t] and h R^T (i, o, f, c, with
// the peepholes), then the new c and h in `dir`.
Status lstm_step(Importer& im, const NodeCtx& n, const Lstm& s, LstmDirection& dir, int64_t t) {
  const std::vector<ops::OpId>& act = s.act;
  const std::vector<Ref>& p = dir.p;
  Ref& h_state = dir.h;
  Ref& c_state = dir.c;
  const std::string st = dir.tag + "/t" + std::to_string(t);
  HEXIR_ASSIGN_OR_RETURN(Ref xw_t, take0(im, n, dir.xw, t, im.fresh(st + "/xw")));
  HEXIR_ASSIGN_OR_RETURN(Ref hr,
                         im.emit1(n, ops::OpId::kMatmul, {h_state, dir.rt}, {}, im.fresh(st + "/hr")));
  HEXIR_ASSIGN_OR_RETURN(Ref g, im.emit1(n, ops::OpId::kAdd, {xw_t, hr}, {}, im.fresh(st + "/gates")));
  HEXIR_ASSIGN_OR_RETURN(std::vector<Ref> gate, split_ref(im, n, g, 1, 4, st + "/g"));  // i, o, f, c
  Ref gi = gate[0], go = gate[1], gf = gate[2], gc = gate[3];
  if (s.peep) {
    HEXIR_ASSIGN_OR_RETURN(Ref pi, im.emit1(n, ops::OpId::kMul, {c_state, p[0]}, {}, im.fresh(st + "/pi")));
    HEXIR_ASSIGN_OR_RETURN(gi, im.emit1(n, ops::OpId::kAdd, {gi, pi}, {}, im.fresh(st + "/i_p")));
    HEXIR_ASSIGN_OR_RETURN(Ref pf, im.emit1(n, ops::OpId::kMul, {c_state, p[2]}, {}, im.fresh(st + "/pf")));
    HEXIR_ASSIGN_OR_RETURN(gf, im.emit1(n, ops::OpId::kAdd, {gf, pf}, {}, im.fresh(st + "/f_p")));
  }
  HEXIR_ASSIGN_OR_RETURN(Ref i_t, im.emit1(n, act[0], {gi}, {}, im.fresh(st + "/i")));
  HEXIR_ASSIGN_OR_RETURN(Ref f_t, im.emit1(n, act[0], {gf}, {}, im.fresh(st + "/f")));
  HEXIR_ASSIGN_OR_RETURN(Ref c_t, im.emit1(n, act[1], {gc}, {}, im.fresh(st + "/c")));
  HEXIR_ASSIGN_OR_RETURN(Ref fc, im.emit1(n, ops::OpId::kMul, {f_t, c_state}, {}, im.fresh(st + "/fc")));
  HEXIR_ASSIGN_OR_RETURN(Ref ic, im.emit1(n, ops::OpId::kMul, {i_t, c_t}, {}, im.fresh(st + "/ic")));
  HEXIR_ASSIGN_OR_RETURN(c_state, im.emit1(n, ops::OpId::kAdd, {fc, ic}, {}, im.fresh(st + "/C")));
  if (s.peep) {
    HEXIR_ASSIGN_OR_RETURN(Ref po, im.emit1(n, ops::OpId::kMul, {c_state, p[1]}, {}, im.fresh(st + "/po")));
    HEXIR_ASSIGN_OR_RETURN(go, im.emit1(n, ops::OpId::kAdd, {go, po}, {}, im.fresh(st + "/o_p")));
  }
  HEXIR_ASSIGN_OR_RETURN(Ref o_t, im.emit1(n, act[0], {go}, {}, im.fresh(st + "/o")));
  HEXIR_ASSIGN_OR_RETURN(Ref hc, im.emit1(n, act[2], {c_state}, {}, im.fresh(st + "/hc")));
  HEXIR_ASSIGN_OR_RETURN(h_state, im.emit1(n, ops::OpId::kMul, {o_t, hc}, {}, im.fresh(st + "/H")));
  return ok_status();
}

// One direction's results: Y [seq, 1, batch, H] (nullopt when output 0 is
// not read), Y_h and Y_c [1, batch, H].
struct LstmResults {
  std::optional<Ref> y;
  Ref h, c;
};

// Runs direction d over the sequence (backwards for reverse, and for the
// second direction of bidirectional).
Result<LstmResults> lstm_run(Importer& im, const NodeCtx& n, const Lstm& s, int d) {
  const bool reverse = s.direction == "reverse" || d == 1;
  HEXIR_ASSIGN_OR_RETURN(LstmDirection dir, lstm_direction(im, n, s, d));
  const std::string& tag = dir.tag;
  std::vector<Ref> steps(static_cast<size_t>(s.seq));
  for (int64_t k = 0; k < s.seq; ++k) {
    const int64_t t = reverse ? s.seq - 1 - k : k;
    HEXIR_RETURN_IF_ERROR(lstm_step(im, n, s, dir, t));
    steps[static_cast<size_t>(t)] = dir.h;
  }
  LstmResults out;
  if (!im.out_name(n, 0).empty()) {
    std::vector<Ref> rows;
    for (int64_t t = 0; t < s.seq; ++t) {
      HEXIR_ASSIGN_OR_RETURN(Ref row, im.reshape(n, steps[static_cast<size_t>(t)], {1, 1, s.batch, s.hidden},
                                                 im.fresh(tag + "/y" + std::to_string(t))));
      rows.push_back(row);
    }
    ops::AttrMap attrs;
    attrs["axis"] = ops::AttrValue{int64_t{0}};
    Ref y = rows[0];
    if (rows.size() > 1) {
      HEXIR_ASSIGN_OR_RETURN(y, im.emit1(n, ops::OpId::kConcat, rows, attrs, im.fresh(tag + "/Y")));
    }
    out.y = y;
  }
  HEXIR_ASSIGN_OR_RETURN(out.h, im.reshape(n, dir.h, {1, s.batch, s.hidden}, im.fresh(tag + "/Y_h")));
  HEXIR_ASSIGN_OR_RETURN(out.c, im.reshape(n, dir.c, {1, s.batch, s.hidden}, im.fresh(tag + "/Y_c")));
  return out;
}

// Output `index`, when read: the directions' `parts` joined along `axis`
// (a concat, or a view of the one), then layout 1's order (`perm`).
Status lstm_output(Importer& im, const NodeCtx& n, const Lstm& s, const std::vector<Ref>& parts, int64_t axis,
                   int index, const std::vector<int64_t>& perm) {
  if (im.out_name(n, index).empty()) return ok_status();
  const bool permute = s.layout == 1;
  Ref v = parts[0];
  if (parts.size() > 1) {
    ops::AttrMap attrs;
    attrs["axis"] = ops::AttrValue{axis};
    HEXIR_ASSIGN_OR_RETURN(v, im.emit1(n, ops::OpId::kConcat, parts, attrs,
                                       permute ? im.fresh(im.out_name(n, index) + "/joined")
                                               : im.result_name(n, index)));
  } else if (!permute) {
    const std::vector<int64_t> dims = im.info(v).dims;
    HEXIR_ASSIGN_OR_RETURN(v, im.emit1(n, ops::OpId::kReshape, {v}, {}, im.result_name(n, index),
                                       {TensorType{DType::kF32, dims}}));
  }
  if (permute) {
    ops::AttrMap attrs;
    attrs["perm"] = int_list(perm);
    HEXIR_ASSIGN_OR_RETURN(v, im.emit1(n, ops::OpId::kTranspose, {v}, attrs, im.result_name(n, index)));
  }
  im.define(n, index, v);
  return ok_status();
}

}  // namespace

// LSTM unrolled over its static sequence length: per step a matmul with
// the recurrent weights, a split into the i, o, f, c gates, the
// activations and the state update, all in Hexir operators; the input
// projection of every step is one matmul up front. Forward, reverse and
// bidirectional; peepholes; initial states; layout 0 and 1.
Status op_lstm(Importer& im, const NodeCtx& n) {
  Lstm s;
  HEXIR_RETURN_IF_ERROR(read_lstm_attributes(im, n, s));
  HEXIR_RETURN_IF_ERROR(read_lstm_inputs(im, n, s));
  std::vector<Ref> ys, hs, cs;  // per direction: Y [seq, 1, batch, H], Y_h [1, batch, H], Y_c
  for (int d = 0; d < s.dirs; ++d) {
    HEXIR_ASSIGN_OR_RETURN(LstmResults r, lstm_run(im, n, s, d));
    if (r.y) ys.push_back(*r.y);
    hs.push_back(r.h);
    cs.push_back(r.c);
  }
  HEXIR_RETURN_IF_ERROR(lstm_output(im, n, s, ys, 1, 0, {2, 0, 1, 3}));
  HEXIR_RETURN_IF_ERROR(lstm_output(im, n, s, hs, 0, 1, {1, 0, 2}));
  HEXIR_RETURN_IF_ERROR(lstm_output(im, n, s, cs, 0, 2, {1, 0, 2}));
  return ok_status();
}

}  // namespace hexir::compiler::onnx_import
