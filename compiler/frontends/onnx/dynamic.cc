// Operators whose result size is data (docs/design-notes.md): NonZero,
// NonMaxSuppression and Compress become operators with a bounded dim, the
// buffer planned at the bound and the actual extent a second result the
// importer keeps to itself (the builder ties it to the value).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "handlers.h"

namespace hexir::compiler::onnx_import {

// ---- reading across a bounded dim (docs/design-notes.md) --------------------------
// An operator that mixes data across a bounded dim (a TopK, a reduction, a
// Concat or Slice along it, an NMS of bounded boxes) is composed from the
// plain operator on `unbound(x)` (the stored rows, the padding set to what
// cannot change the result) and `bound(y, count)` (its rows past the run-time
// count zeroed, the count its extent).

Ref extent_of(Importer& im, Ref x) { return Ref{im.builder().value(x.value).extent, -1}; }

Result<Ref> bound_rows(Importer& im, const NodeCtx& n, Ref plain, int dim, Ref count, const std::string& name) {
  if (!im.info(count).dims.empty()) {
    HEXIR_ASSIGN_OR_RETURN(count, im.reshape(n, count, {}, im.helper_name(n, "count")));
  }
  // An extent is computed at run time (it lives in the context's extent
  // table): a constant, an input or a view of one is copied first.
  const Value* cv = count.is_const() ? nullptr : &im.builder().value(count.value);
  if (!cv || cv->kind != ValueKind::kResult || ops::op_def(im.builder().node(cv->node).op).is_view) {
    HEXIR_ASSIGN_OR_RETURN(std::vector<int> copy, im.emit(n, ops::OpId::kCopy, {count}, {}, {im.helper_name(n, "count")}));
    count = Ref{copy[0], -1};
  }
  ops::AttrMap attrs;
  attrs["dim"] = ops::AttrValue{int64_t{dim}};
  HEXIR_ASSIGN_OR_RETURN(std::vector<int> ids, im.emit(n, ops::OpId::kBound, {plain, count}, attrs, {name}));
  return Ref{ids[0], -1};
}

namespace {

// True below x's extent: a bool of x's rank, 1 but along its bounded dim
// (`flat`: the bounded dim alone).
Result<Ref> valid_rows(Importer& im, const NodeCtx& n, Ref x, bool flat = false) {
  const Info xi = im.info(x);
  const size_t d = static_cast<size_t>(xi.bounded);
  std::vector<int64_t> dims(flat ? 1 : xi.dims.size(), 1);
  dims[flat ? 0 : d] = xi.dims[d];
  Ref all = im.fill_const(kBool, dims, {1}, im.helper_name(n, "all_rows"), n.loc);
  HEXIR_ASSIGN_OR_RETURN(Ref rows, bound_rows(im, n, all, flat ? 0 : xi.bounded, extent_of(im, x),
                                             im.helper_name(n, "rows")));
  return im.emit1(n, ops::OpId::kUnbound, {rows}, {}, im.helper_name(n, "valid"));
}

// One element of `type` that no real element passes: the lowest (or highest) value.
Result<Ref> extreme_const(Importer& im, const NodeCtx& n, int32_t type, RowPadding pad) {
  HostTensor h = make_host(type, {});
  const bool low = pad == RowPadding::kLowest;
  switch (type) {
    case kFloat:
    case kFloat16:
    case kBFloat16:
      h.set_f(0, pad == RowPadding::kNaN ? std::numeric_limits<double>::quiet_NaN()
                 : low                   ? -std::numeric_limits<double>::infinity()
                                         : std::numeric_limits<double>::infinity());
      break;
    case kInt32:
      h.set_i(0, low ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max());
      break;
    case kInt64:
      h.set_i(0, low ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max());
      break;
    default:
      return error_at(n.loc, "a " + onnx_type_name(type) + " value with a bounded dim cannot be read across it");
  }
  return im.new_const(im.helper_name(n, "padding"), std::move(h), n.loc);
}

}  // namespace

Result<Ref> unbound_rows(Importer& im, const NodeCtx& n, Ref x, RowPadding pad) {
  HEXIR_ASSIGN_OR_RETURN(Ref plain, im.emit1(n, ops::OpId::kUnbound, {x}, {}, im.helper_name(n, "unbound")));
  if (pad == RowPadding::kZero) return plain;  // what the producers store there
  HEXIR_ASSIGN_OR_RETURN(Ref valid, valid_rows(im, n, x));
  Ref fill;
  if (pad == RowPadding::kOne) {
    HostTensor one = make_host(im.info(x).type, {});
    one.set_f(0, 1.0);
    fill = im.new_const(im.helper_name(n, "padding"), std::move(one), n.loc);
  } else {
    HEXIR_ASSIGN_OR_RETURN(fill, extreme_const(im, n, im.info(x).type, pad));
  }
  return im.emit1(n, ops::OpId::kWhere, {valid, plain, fill}, {}, im.helper_name(n, "masked"));
}

// ---- shape facts ------------------------------------------------------------------

std::optional<Importer::ShapeFact> shape_fact(Importer& im, Ref r) {
  if (!r.is_const()) {
    auto it = im.shape_facts().find(r.value);
    if (it == im.shape_facts().end()) return std::nullopt;
    return it->second;
  }
  Result<HostPtr> h = im.host(r);
  if (!h.ok() || !*h || (*h)->is_float() || (*h)->count() > 64) return std::nullopt;
  Importer::ShapeFact f;
  for (int64_t i = 0; i < (*h)->count(); ++i) {
    f.upper.push_back((*h)->i(i));
    f.exact.push_back(true);
    f.extent.push_back(-1);
  }
  return f;
}

namespace {

// Facts of the node's output 0 from those of its inputs, for the operators
// shape arithmetic uses; nullopt where none follow.
std::optional<Importer::ShapeFact> derive_fact(Importer& im, const NodeCtx& n,
                                               const std::vector<std::optional<Importer::ShapeFact>>& in) {
  using Fact = Importer::ShapeFact;
  const std::string& op = n.op;
  auto first = [&]() -> std::optional<Fact> { return in.empty() ? std::nullopt : in[0]; };
  if (op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Identity" || op == "Cast" ||
      op == "Flatten")
    return first();
  if (op == "Gather") {
    if (in.size() < 2 || !in[0] || !in[1]) return std::nullopt;
    Fact f;
    for (size_t k = 0; k < in[1]->upper.size(); ++k) {
      if (!in[1]->exact[k]) return std::nullopt;
      int64_t i = in[1]->upper[k];
      const int64_t size = static_cast<int64_t>(in[0]->upper.size());
      if (i < 0) i += size;
      if (i < 0 || i >= size) return std::nullopt;
      f.upper.push_back(in[0]->upper[static_cast<size_t>(i)]);
      f.exact.push_back(in[0]->exact[static_cast<size_t>(i)]);
      f.extent.push_back(in[0]->extent[static_cast<size_t>(i)]);
    }
    return f;
  }
  if (op == "Concat") {
    Fact f;
    for (const auto& part : in) {
      if (!part) return std::nullopt;
      f.upper.insert(f.upper.end(), part->upper.begin(), part->upper.end());
      f.exact.insert(f.exact.end(), part->exact.begin(), part->exact.end());
      f.extent.insert(f.extent.end(), part->extent.begin(), part->extent.end());
    }
    return f;
  }
  const bool is_min = op == "ReduceMin" || op == "Min", is_max = op == "ReduceMax" || op == "Max";
  const bool is_prod = op == "ReduceProd" || op == "Mul", is_sum = op == "ReduceSum" || op == "Add";
  if (!is_min && !is_max && !is_prod && !is_sum) return std::nullopt;
  // Upper bounds combine for dims (none negative); a min takes the least upper bound.
  auto combine = [&](int64_t a, int64_t b) {
    if (is_min) return std::min(a, b);
    if (is_max) return std::max(a, b);
    if (is_prod) return a * b;
    return a + b;
  };
  std::vector<std::pair<int64_t, bool>> terms;
  if (op.rfind("Reduce", 0) == 0) {
    if (!first() || in.size() > 1) return std::nullopt;  // axes as an input: a partial reduction
    for (size_t k = 0; k < in[0]->upper.size(); ++k) terms.emplace_back(in[0]->upper[k], in[0]->exact[k]);
  } else {
    if (in.size() != 2 || !in[0] || !in[1] || in[0]->upper.size() != 1 || in[1]->upper.size() != 1)
      return std::nullopt;
    terms = {{in[0]->upper[0], in[0]->exact[0]}, {in[1]->upper[0], in[1]->exact[0]}};
  }
  if (terms.empty()) return std::nullopt;
  int64_t upper = terms[0].first;
  bool exact = terms[0].second;
  for (const auto& [u, e] : terms) {
    if (u < 0 || u > (int64_t{1} << 40)) return std::nullopt;
    exact = exact && e;
  }
  for (size_t k = 1; k < terms.size(); ++k) upper = combine(upper, terms[k].first);
  const bool one = op.rfind("Reduce", 0) == 0 && terms.size() == 1;  // a reduction of one element is it
  return Fact{{upper}, {exact}, {one ? in[0]->extent[0] : -1}};
}

}  // namespace

void note_shape_facts(Importer& im, const NodeCtx& n) {
  if (n.node.output_size() < 1 || n.node.output(0).empty()) return;
  const std::optional<Ref> out = im.lookup(n.node.output(0));
  if (!out || out->is_const() || im.shape_facts().count(out->value)) return;
  const Info oi = im.info(*out);
  if ((oi.type != kInt64 && oi.type != kInt32) || oi.dims.size() > 1 || oi.count() > 64) return;
  std::vector<std::optional<Importer::ShapeFact>> in;
  bool any_run_time = false;
  for (int i = 0; i < n.node.input_size(); ++i) {
    const std::optional<Ref> r = n.node.input(i).empty() ? std::nullopt : im.lookup(n.node.input(i));
    in.push_back(r ? shape_fact(im, *r) : std::nullopt);
    any_run_time = any_run_time || (r && !r->is_const() && in.back());
  }
  if (!any_run_time) return;
  std::optional<Importer::ShapeFact> f = derive_fact(im, n, in);
  if (f && static_cast<int64_t>(f->upper.size()) == oi.count()) im.shape_facts()[out->value] = std::move(*f);
}

Result<Ref> runtime_shape(Importer& im, const NodeCtx& n, Ref x, int64_t start, int64_t end,
                          const std::string& name) {
  const Info xi = im.info(x);
  std::vector<Ref> parts;
  std::vector<int64_t> run;
  Importer::ShapeFact fact;
  auto flush = [&] {
    if (run.empty()) return;
    parts.push_back(im.new_const(im.helper_name(n, "dims"), host_i64(run), n.loc));
    run.clear();
  };
  for (int64_t d = start; d < end; ++d) {
    fact.upper.push_back(xi.dims[static_cast<size_t>(d)]);
    fact.exact.push_back(d != xi.bounded);
    fact.extent.push_back(d != xi.bounded ? -1 : extent_of(im, x).value);
    if (d != xi.bounded) {
      run.push_back(xi.dims[static_cast<size_t>(d)]);
      continue;
    }
    flush();
    HEXIR_ASSIGN_OR_RETURN(Ref e, im.reshape(n, extent_of(im, x), {1}, im.helper_name(n, "extent")));
    parts.push_back(e);
  }
  flush();
  Ref shape = parts[0];
  if (parts.size() > 1) {
    ops::AttrMap attrs;
    attrs["axis"] = ops::AttrValue{int64_t{0}};
    HEXIR_ASSIGN_OR_RETURN(shape, im.emit1(n, ops::OpId::kConcat, parts, attrs, name));
  }
  if (!shape.is_const()) im.shape_facts()[shape.value] = std::move(fact);
  return shape;
}

// A Concat along a bounded dim: the inputs' stored rows side by side, then
// gathered by the row numbers of the real ones (a nonzero of their masks),
// so the result holds every real row in order, bounded by the bounds' sum.
Status concat_bounded(Importer& im, const NodeCtx& n, const std::vector<Ref>& parts, int64_t axis) {
  std::vector<Ref> rows, masks;
  std::vector<int64_t> key;  // per part: its extent value (-1: none) and its size
  int64_t total = 0;
  for (Ref r : parts) {
    const Info ri = im.info(r);
    const int64_t dim = ri.dims[static_cast<size_t>(axis)];
    total += dim;
    key.push_back(ri.bounded >= 0 ? extent_of(im, r).value : -1);
    key.push_back(dim);
    if (ri.bounded < 0) {
      rows.push_back(r);
      masks.push_back(im.fill_const(kBool, {dim}, {1}, im.helper_name(n, "all_rows"), n.loc));
      continue;
    }
    if (ri.bounded != axis)
      return error_at(n.loc, "an input's bounded dim " + std::to_string(ri.bounded) + " is not the axis " +
                                 std::to_string(axis) + " (not supported)");
    HEXIR_ASSIGN_OR_RETURN(Ref plain, unbound_rows(im, n, r, RowPadding::kZero));
    rows.push_back(plain);
    masks.push_back(r);
  }
  ops::AttrMap along, first;
  along["axis"] = ops::AttrValue{axis};
  first["axis"] = ops::AttrValue{int64_t{0}};
  HEXIR_ASSIGN_OR_RETURN(Ref stored, im.emit1(n, ops::OpId::kConcat, rows, along, im.helper_name(n, "stored")));
  auto cached = im.row_indices().find(key);
  Ref index{cached == im.row_indices().end() ? -1 : cached->second, -1};
  if (index.value < 0) {
    for (Ref& m : masks) {
      if (m.is_const()) continue;  // a bounded part: true below its extent
      HEXIR_ASSIGN_OR_RETURN(m, valid_rows(im, n, m, /*flat=*/true));
    }
    HEXIR_ASSIGN_OR_RETURN(Ref mask, im.emit1(n, ops::OpId::kConcat, masks, first, im.helper_name(n, "mask")));
    HEXIR_ASSIGN_OR_RETURN(std::vector<int> nz, im.emit(n, ops::OpId::kNonZero, {mask}, {},
                                                        {im.helper_name(n, "real_rows"), im.helper_name(n, "count")}));
    HEXIR_ASSIGN_OR_RETURN(index, im.emit1(n, ops::OpId::kReshape, {Ref{nz[0], -1}}, {}, im.helper_name(n, "index"),
                                           {TensorType{DType::kI64, {total}, 0}}));
    im.row_indices()[key] = index.value;
  }
  return im.emit_result(n, ops::OpId::kGather, {stored, index}, along);
}

namespace {

// `op` on `inputs` as the node's output 0; its count result gets a helper
// name. A bound given for the output (--dim-bound) is the operator's.
Status emit_bounded(Importer& im, const NodeCtx& n, ops::OpId op, const std::vector<Ref>& inputs,
                    ops::AttrMap attrs) {
  if (const std::optional<int64_t> bound = im.given_dim_bound(im.out_name(n, 0))) attrs["bound"] = ops::AttrValue{*bound};
  HEXIR_ASSIGN_OR_RETURN(std::vector<int> ids,
                         im.emit(n, op, inputs, attrs, {im.result_name(n), im.helper_name(n, "count")}));
  im.define(n, 0, Ref{ids[0], -1});
  return ok_status();
}

}  // namespace

Status op_nonzero(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  return emit_bounded(im, n, ops::OpId::kNonZero, {x}, {});
}

Status op_compress(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis"}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref condition, im.input(n, 1));
  ops::AttrMap attrs;  // no axis: x flattened
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, im.attr_int(n, "axis", std::numeric_limits<int64_t>::min()));
  if (axis != std::numeric_limits<int64_t>::min()) attrs["axis"] = ops::AttrValue{axis};
  return emit_bounded(im, n, ops::OpId::kCompress, {x, condition}, attrs);
}

// NonMaxSuppression: the absent optional inputs as the operator's defaults
// (no box kept, IoU 0, no score threshold); the bound per class is a constant
// max_output_boxes_per_class (at most the boxes), else every box.
Status op_non_max_suppression(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"center_point_box"}));
  HEXIR_ASSIGN_OR_RETURN(Ref boxes, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref scores, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> max_output, im.optional_input(n, 2));
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> iou, im.optional_input(n, 3));
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> score, im.optional_input(n, 4));
  HEXIR_ASSIGN_OR_RETURN(int64_t center, im.attr_int(n, "center_point_box", 0));
  const Info bi = im.info(boxes);
  const int64_t box_count = bi.dims.size() == 3 ? bi.dims[1] : 0;
  int64_t per_class = max_output ? box_count : 0;
  if (max_output) {
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(*max_output));
    if (h) {
      HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> k, im.const_ints(n, *max_output, 2, "max_output_boxes_per_class"));
      if (k.size() != 1) return error_at(n.loc, "max_output_boxes_per_class holds " + std::to_string(k.size()) + " values, expected 1");
      per_class = std::clamp<int64_t>(k[0], 0, box_count);
    }
  }
  // Scalars of one element: ONNX allows [1] as well as [].
  auto scalar = [&](std::optional<Ref> r, double fallback, int32_t type, const char* what) -> Result<Ref> {
    if (!r) return im.scalar_const(fallback, type, im.helper_name(n, what), n.loc);
    if (im.info(*r).dims.empty()) return *r;
    return im.reshape(n, *r, {}, im.helper_name(n, what));
  };
  HEXIR_ASSIGN_OR_RETURN(Ref k, scalar(max_output, 0, kInt64, "max_output"));
  HEXIR_ASSIGN_OR_RETURN(Ref t, scalar(iou, 0, kFloat, "iou_threshold"));
  HEXIR_ASSIGN_OR_RETURN(Ref s, scalar(score, -std::numeric_limits<double>::infinity(), kFloat, "score_threshold"));
  // Bounded boxes (the rows of a detector's earlier selection): the stored
  // ones, the padding's scores NaN (never above a threshold: never chosen).
  const Info si = im.info(scores);
  if (bi.bounded >= 0 || si.bounded >= 0) {
    if (bi.bounded != 1 || si.bounded != 2)
      return error_at(n.loc, "boxes " + im.builder().value(boxes.value).type.to_string() + " and scores " +
                                 im.builder().value(scores.value).type.to_string() +
                                 " must both be bounded along the boxes (not supported otherwise)");
    HEXIR_ASSIGN_OR_RETURN(boxes, unbound_rows(im, n, boxes, RowPadding::kZero));
    HEXIR_ASSIGN_OR_RETURN(scores, unbound_rows(im, n, scores, RowPadding::kNaN));
  }
  ops::AttrMap attrs;
  attrs["center_point_box"] = ops::AttrValue{center};
  attrs["max_output_boxes_per_class"] = ops::AttrValue{per_class};
  return emit_bounded(im, n, ops::OpId::kNonMaxSuppression, {boxes, scores, k, t, s}, attrs);
}

}  // namespace hexir::compiler::onnx_import
