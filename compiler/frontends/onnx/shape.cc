// Shapes and indexing: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat,
// Pad, Split, Slice, Gather, Expand, ScatterND, ScatterElements (Scatter), and
// the shape queries and generators (Shape, Size, Range, ConstantOfShape),
// which fold at import; GatherElements, GatherND, and the compositions of
// existing operators: Trilu, Tile, DepthToSpace, SpaceToDepth, OneHot, EyeLike.
#include "frontends/onnx/handlers.h"

#include <algorithm>
#include <cmath>

namespace hexir::compiler::onnx_import {

Status op_reshape(Importer& im, const NodeCtx& n) {
  std::vector<int64_t> shape;
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  int64_t allowzero = 0;
  if (im.opset() < 5) {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"shape", "consumed_inputs"}));
    HEXIR_ASSIGN_OR_RETURN(auto s, im.attr_ints(n, "shape"));
    if (!s) return error_at(n.loc, "attribute 'shape' is missing");
    shape = *s;
  } else {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"allowzero"}));
    HEXIR_ASSIGN_OR_RETURN(allowzero, im.attr_int(n, "allowzero", 0));
    HEXIR_ASSIGN_OR_RETURN(Ref s, im.input(n, 1));
    HEXIR_ASSIGN_OR_RETURN(shape, im.const_ints(n, s, 1, "the shape"));
  }
  const Info xi = im.info(x);
  std::vector<int64_t> dims;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d == 0 && !allowzero) {
      if (i >= xi.dims.size())
        return error_at(n.loc, "shape " + shape_text(shape) + " copies dim " + std::to_string(i) + " of " +
                                   shape_text(xi.dims) + ", which has none");
      d = xi.dims[i];
    } else if (d == -1) {
      if (infer >= 0) return error_at(n.loc, "shape " + shape_text(shape) + " has more than one -1");
      infer = static_cast<int>(i);
      d = 1;
    } else if (d < -1) {
      return error_at(n.loc, "shape " + shape_text(shape) + " has a negative dim");
    }
    dims.push_back(d);
  }
  const int64_t total = xi.count();
  if (infer >= 0) {
    const int64_t known = product(dims, 0, dims.size());
    if (known == 0 || total % known != 0)
      return error_at(n.loc, "cannot reshape " + shape_text(xi.dims) + " to " + shape_text(shape));
    dims[static_cast<size_t>(infer)] = total / known;
  }
  if (product(dims, 0, dims.size()) != total)
    return error_at(n.loc, "cannot reshape " + shape_text(xi.dims) + " (" + std::to_string(total) +
                               " elements) to " + shape_text(shape) + " = " + shape_text(dims));
  HEXIR_ASSIGN_OR_RETURN(Ref r, im.reshape(n, x, dims, im.result_name(n)));
  im.define(n, 0, r);
  return ok_status();
}

Status op_flatten(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis"}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const Info xi = im.info(x);
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, im.attr_int(n, "axis", 1));
  const int64_t rank = static_cast<int64_t>(xi.dims.size());
  if (axis < -rank || axis > rank)
    return error_at(n.loc,
                    "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  const std::vector<int64_t> dims{product(xi.dims, 0, static_cast<size_t>(axis)),
                                  product(xi.dims, static_cast<size_t>(axis), xi.dims.size())};
  HEXIR_ASSIGN_OR_RETURN(Ref r, im.reshape(n, x, dims, im.result_name(n)));
  im.define(n, 0, r);
  return ok_status();
}

namespace {

// Axes of Squeeze/Unsqueeze: an attribute before opset 13, an input from it.
Result<std::optional<std::vector<int64_t>>> axes_of(Importer& im, const NodeCtx& n) {
  if (im.opset() < 13) {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axes"}));
    return im.attr_ints(n, "axes");
  }
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> a, im.optional_input(n, 1));
  if (!a) return std::optional<std::vector<int64_t>>();
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> v, im.const_ints(n, *a, 1, "axes"));
  return std::optional<std::vector<int64_t>>(std::move(v));
}

}  // namespace

Status op_squeeze(Importer& im, const NodeCtx& n) {
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(auto axes, axes_of(im, n));
  const Info xi = im.info(x);
  std::vector<bool> drop(xi.dims.size(), false);
  if (axes) {
    for (int64_t a : *axes) {
      HEXIR_ASSIGN_OR_RETURN(int64_t d, norm_axis(n, a, xi.dims.size()));
      if (xi.dims[static_cast<size_t>(d)] != 1)
        return error_at(n.loc, "cannot squeeze axis " + std::to_string(a) + " of " + shape_text(xi.dims) +
                                   ": its size is not 1");
      drop[static_cast<size_t>(d)] = true;
    }
  } else {
    for (size_t d = 0; d < xi.dims.size(); ++d) drop[d] = xi.dims[d] == 1;
  }
  std::vector<int64_t> dims;
  for (size_t d = 0; d < xi.dims.size(); ++d)
    if (!drop[d]) dims.push_back(xi.dims[d]);
  HEXIR_ASSIGN_OR_RETURN(Ref r, im.reshape(n, x, dims, im.result_name(n)));
  im.define(n, 0, r);
  return ok_status();
}

Status op_unsqueeze(Importer& im, const NodeCtx& n) {
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(auto axes, axes_of(im, n));
  if (!axes) return error_at(n.loc, "axes are missing");
  const Info xi = im.info(x);
  const size_t rank = xi.dims.size() + axes->size();
  std::vector<bool> inserted(rank, false);
  for (int64_t a : *axes) {
    HEXIR_ASSIGN_OR_RETURN(int64_t d, norm_axis(n, a, rank));
    if (inserted[static_cast<size_t>(d)])
      return error_at(n.loc, "axes list axis " + std::to_string(a) + " twice");
    inserted[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> dims;
  size_t next = 0;
  for (size_t d = 0; d < rank; ++d) dims.push_back(inserted[d] ? 1 : xi.dims[next++]);
  HEXIR_ASSIGN_OR_RETURN(Ref r, im.reshape(n, x, dims, im.result_name(n)));
  im.define(n, 0, r);
  return ok_status();
}

// Transposes `x` (folded when it is a held constant, e.g. Gemm's weights with transB).
Result<Ref> transpose(Importer& im, const NodeCtx& n, Ref x, const std::vector<int64_t>& perm,
                      const std::string& name) {
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(x));
  if (h) {
    HostTensor out = transpose_host(*h, perm);
    im.mark_used(name);
    return im.new_const(name, std::move(out), n.loc);
  }
  ops::AttrMap attrs;
  attrs["perm"] = int_list(perm);
  return im.emit1(n, ops::OpId::kTranspose, {x}, attrs, name);
}

Status op_transpose(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"perm"}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const size_t rank = im.info(x).dims.size();
  HEXIR_ASSIGN_OR_RETURN(auto p, im.attr_ints(n, "perm"));
  std::vector<int64_t> perm;
  if (p) {
    perm = *p;
  } else {
    for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  std::vector<bool> seen(rank, false);
  if (perm.size() != rank)
    return error_at(n.loc, "perm " + shape_text(perm) + " does not match rank " + std::to_string(rank));
  for (int64_t& v : perm) {
    HEXIR_ASSIGN_OR_RETURN(v, norm_axis(n, v, rank, "perm entry"));
    if (seen[static_cast<size_t>(v)])
      return error_at(n.loc, "perm " + shape_text(*p) + " is not a permutation");
    seen[static_cast<size_t>(v)] = true;
  }
  if (x.is_const()) {
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(x));
    if (h) {
      im.define_folded(n, 0, transpose_host(*h, perm));
      return ok_status();
    }
  }
  ops::AttrMap attrs;
  attrs["perm"] = int_list(perm);
  return im.emit_result(n, ops::OpId::kTranspose, {x}, attrs);
}

Status op_concat(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis"}));
  const auto* axis_attr = find_attribute(n.node, "axis");
  if (!axis_attr && im.opset() >= 4) return error_at(n.loc, "attribute 'axis' is missing");
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, im.attr_int(n, "axis", 1));
  std::vector<std::optional<Ref>> refs;
  std::vector<Ref> plain;
  for (int i = 0; i < n.node.input_size(); ++i) {
    HEXIR_ASSIGN_OR_RETURN(Ref r, im.input(n, i));
    refs.push_back(r);
    plain.push_back(r);
  }
  if (plain.empty()) return error_at(n.loc, "takes at least one input");
  const Info first = im.info(plain[0]);
  HEXIR_ASSIGN_OR_RETURN(axis, norm_axis(n, axis, first.dims.size()));
  std::vector<HostPtr> hs;
  HEXIR_ASSIGN_OR_RETURN(bool held, im.hosts(refs, hs));
  if (held) {
    std::vector<int64_t> dims = first.dims;
    dims[static_cast<size_t>(axis)] = 0;
    for (const HostPtr& h : hs) {
      if (h->type != first.type || h->dims.size() != dims.size())
        return error_at(n.loc, "inputs differ in type or rank");
      for (size_t d = 0; d < dims.size(); ++d)
        if (d != static_cast<size_t>(axis) && h->dims[d] != first.dims[d])
          return error_at(n.loc, "input shapes " + shape_text(first.dims) + " and " + shape_text(h->dims) +
                                     " differ outside axis " + std::to_string(axis));
      dims[static_cast<size_t>(axis)] += h->dims[static_cast<size_t>(axis)];
    }
    Status limit = fold_limit(first.type, dims, im.fold_max_bytes());
    if (limit.ok()) {
      im.define_folded(n, 0, concat_host(hs, axis, dims));
      return ok_status();
    }
  }
  for (Ref r : plain)
    if (im.info(r).bounded == axis) return concat_bounded(im, n, plain, axis);
  if (plain.size() == 1) {
    im.define(n, 0, plain[0]);
    return ok_status();
  }
  ops::AttrMap attrs;
  attrs["axis"] = ops::AttrValue{axis};
  return im.emit_result(n, ops::OpId::kConcat, plain, attrs);
}

namespace {

// What a Pad node asks for: the mode, the constant mode's element (of the
// input's type) and, per axis of the input, the pads before and after it
// (negative: a crop).
struct PadSpec {
  std::string mode;
  HostTensor value;
  std::vector<int64_t> before, after;
};

// The pads, the value and the axes (attributes before opset 11, inputs from
// it) and the mode of a Pad of an input of `xi`.
Result<PadSpec> read_pad(Importer& im, const NodeCtx& n, const Info& xi) {
  const size_t rank = xi.dims.size();
  std::vector<int64_t> pads;
  PadSpec spec;
  spec.mode = "constant";
  spec.value = make_host(xi.type, {});  // zero
  std::vector<int64_t> axes;
  if (im.opset() < 11) {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"mode", "pads", "paddings", "value"}));
    HEXIR_ASSIGN_OR_RETURN(auto p, im.attr_ints(n, im.opset() < 2 ? "paddings" : "pads"));
    if (!p) return error_at(n.loc, "attribute 'pads' is missing");
    pads = *p;
    HEXIR_ASSIGN_OR_RETURN(double v, im.attr_float(n, "value", 0.0));
    spec.value.set_f(0, v);
  } else {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"mode"}));
    HEXIR_ASSIGN_OR_RETURN(Ref p, im.input(n, 1));
    HEXIR_ASSIGN_OR_RETURN(pads, im.const_ints(n, p, 1, "pads"));
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> v, im.optional_input(n, 2));
    if (v) {
      HEXIR_ASSIGN_OR_RETURN(HostPtr hv, im.host(*v));
      if (!hv || hv->count() != 1)
        return error_at(n.loc, "constant_value (input 2) must be a constant scalar");
      if (hv->is_float())
        spec.value.set_f(0, hv->f(0));
      else
        spec.value.set_i(0, hv->i(0));
    }
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> a, im.optional_input(n, 3));
    if (a) {
      HEXIR_ASSIGN_OR_RETURN(axes, im.const_ints(n, *a, 3, "axes"));
    }
  }
  HEXIR_ASSIGN_OR_RETURN(spec.mode, im.attr_string(n, "mode", "constant"));
  const std::string& mode = spec.mode;
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return error_at(n.loc, "mode '" + mode + "' is not supported by the ONNX importer");
  if (axes.empty())
    for (size_t d = 0; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  if (pads.size() != 2 * axes.size())
    return error_at(
        n.loc, "pads " + shape_text(pads) + " need 2 values per axis (" + std::to_string(axes.size()) + ")");
  spec.before.assign(rank, 0);
  spec.after.assign(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    HEXIR_ASSIGN_OR_RETURN(int64_t d, norm_axis(n, axes[i], rank));
    spec.before[static_cast<size_t>(d)] = pads[i];
    spec.after[static_cast<size_t>(d)] = pads[axes.size() + i];
  }
  return spec;
}

// Which input element each of the dim + b + e elements along a padded axis
// of size `dim` reads, for mode reflect, edge or wrap.
std::vector<int64_t> pad_source_index(const std::string& mode, int64_t dim, int64_t b, int64_t e) {
  std::vector<int64_t> index;
  for (int64_t i = -b; i < dim + e; ++i) {
    int64_t j = i;
    if (mode == "edge") j = std::clamp<int64_t>(i, 0, dim - 1);
    else if (mode == "wrap") j = ((i % dim) + dim) % dim;
    else j = i < 0 ? -i : i >= dim ? 2 * (dim - 1) - i : i;  // reflect
    index.push_back(j);
  }
  return index;
}

// Pad where this build has no @pad: per padded axis, a crop (negative
// pads) by slice, then `constant` as a concat with fills,
// `reflect`/`edge`/`wrap` as a gather of constant indices along the axis.
// Exact for every dtype.
Result<Ref> pad_by_parts(Importer& im, const NodeCtx& n, Ref x, const Info& xi, const PadSpec& spec,
                         const std::vector<size_t>& padded) {
  const std::string& mode = spec.mode;
  for (size_t k = 0; k < padded.size(); ++k) {
    const size_t d = padded[k];
    const bool last = k + 1 == padded.size();
    std::vector<int64_t> dims = im.info(x).dims;
    const int64_t crop_b = std::max<int64_t>(0, -spec.before[d]),
                  crop_e = std::max<int64_t>(0, -spec.after[d]);
    const int64_t b = std::max<int64_t>(0, spec.before[d]), e = std::max<int64_t>(0, spec.after[d]);
    if (crop_b + crop_e > dims[d])
      return error_at(n.loc, "negative pads remove more than dim " + std::to_string(d));
    if (crop_b || crop_e) {
      ops::AttrMap attrs;
      attrs["starts"] = int_list({crop_b});
      attrs["ends"] = int_list({dims[d] - crop_e});
      attrs["axes"] = int_list({static_cast<int64_t>(d)});
      const bool done = last && b == 0 && e == 0;
      HEXIR_ASSIGN_OR_RETURN(x, im.emit1(n, ops::OpId::kSlice, {x}, attrs,
                                         done ? im.result_name(n) : im.helper_name(n, "crop")));
      dims[d] -= crop_b + crop_e;
    }
    if (b == 0 && e == 0) continue;
    const std::string name = last ? im.result_name(n) : im.helper_name(n, "axis" + std::to_string(d));
    if (mode == "constant") {
      std::vector<Ref> parts;
      for (int64_t width : {b, e}) {
        if (width == 0) continue;
        std::vector<int64_t> fill_dims = dims;
        fill_dims[d] = width;
        parts.push_back(
            im.fill_const(xi.type, fill_dims, spec.value.bytes, im.helper_name(n, "fill"), n.loc));
      }
      parts.insert(parts.begin() + (b ? 1 : 0), x);
      ops::AttrMap attrs;
      attrs["axis"] = ops::AttrValue{static_cast<int64_t>(d)};
      HEXIR_ASSIGN_OR_RETURN(x, im.emit1(n, ops::OpId::kConcat, parts, attrs, name));
      continue;
    }
    const int64_t dim = dims[d];
    if (dim == 0 || (mode == "reflect" && (dim < 2 || b >= dim || e >= dim)))
      return error_at(n.loc, "mode '" + mode + "' pads of " + std::to_string(b) + ", " + std::to_string(e) +
                                 " do not fit dim " + std::to_string(d) + " of size " + std::to_string(dim));
    Ref ix = im.new_const(im.helper_name(n, "index" + std::to_string(d)),
                          host_i64(pad_source_index(mode, dim, b, e)), n.loc);
    ops::AttrMap attrs;
    attrs["axis"] = ops::AttrValue{static_cast<int64_t>(d)};
    HEXIR_ASSIGN_OR_RETURN(x, im.emit1(n, ops::OpId::kGather, {x, ix}, attrs, name));
  }
  return x;
}

}  // namespace

// Pad: this build's @pad (ONNX's modes and pads, the constant as its
// attribute), else pad_by_parts.
Status op_pad(Importer& im, const NodeCtx& n) {
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const Info xi = im.info(x);
  HEXIR_ASSIGN_OR_RETURN(PadSpec spec, read_pad(im, n, xi));
  std::vector<size_t> padded;
  for (size_t d = 0; d < xi.dims.size(); ++d)
    if (spec.before[d] != 0 || spec.after[d] != 0) padded.push_back(d);
  if (padded.empty()) {
    im.define(n, 0, x);
    return ok_status();
  }
  if (std::optional<ops::OpId> pad = ops::find_op("pad")) {  // this build's @pad
    ops::AttrMap attrs;
    attrs["mode"] = ops::AttrValue{spec.mode};
    std::vector<int64_t> all(spec.before);
    all.insert(all.end(), spec.after.begin(), spec.after.end());
    attrs["pads"] = int_list(all);
    if (spec.mode == "constant") {
      if (spec.value.is_float())
        attrs["value"] = real(spec.value.f(0));
      else
        attrs["value"] = ops::AttrValue{spec.value.i(0)};
    }
    HEXIR_ASSIGN_OR_RETURN(Ref r, im.emit1(n, *pad, {x}, attrs, im.result_name(n)));
    im.define(n, 0, r);
    return ok_status();
  }
  HEXIR_ASSIGN_OR_RETURN(Ref r, pad_by_parts(im, n, x, xi, spec, padded));
  im.define(n, 0, r);
  return ok_status();
}

Status op_split(Importer& im, const NodeCtx& n) {
  if (im.opset() >= 18) {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis", "num_outputs"}));
  } else if (im.opset() >= 13) {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis"}));
  } else {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis", "split"}));
  }
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const Info xi = im.info(x);
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, im.attr_int(n, "axis", 0));
  HEXIR_ASSIGN_OR_RETURN(axis, norm_axis(n, axis, xi.dims.size()));
  const int64_t dim = xi.dims[static_cast<size_t>(axis)];
  std::vector<int64_t> sizes;
  if (im.opset() < 13) {
    HEXIR_ASSIGN_OR_RETURN(auto s, im.attr_ints(n, "split"));
    if (s) sizes = *s;
  } else {
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> s, im.optional_input(n, 1));
    if (s) {
      HEXIR_ASSIGN_OR_RETURN(sizes, im.const_ints(n, *s, 1, "split"));
    }
  }
  const int64_t parts = n.node.output_size();
  if (sizes.empty()) {
    HEXIR_ASSIGN_OR_RETURN(int64_t num, im.attr_int(n, "num_outputs", parts));
    if (num != parts)
      return error_at(n.loc,
                      "num_outputs " + std::to_string(num) + " but " + std::to_string(parts) + " outputs");
    if (parts < 1) return error_at(n.loc, "has no outputs");
    if (im.opset() >= 18) {
      const int64_t each = (dim + parts - 1) / parts;
      for (int64_t i = 0; i < parts; ++i)
        sizes.push_back(std::max<int64_t>(0, std::min(each, dim - i * each)));
    } else {
      if (dim % parts != 0)
        return error_at(n.loc, "axis of size " + std::to_string(dim) + " does not split into " +
                                   std::to_string(parts) + " equal parts");
      sizes.assign(static_cast<size_t>(parts), dim / parts);
    }
  }
  if (static_cast<int64_t>(sizes.size()) != parts)
    return error_at(n.loc, "split " + shape_text(sizes) + " has " + std::to_string(sizes.size()) +
                               " sizes for " + std::to_string(parts) + " outputs");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return error_at(n.loc, "split " + shape_text(sizes) + " has a negative size");
    total += s;
  }
  if (total != dim)
    return error_at(n.loc, "split " + shape_text(sizes) + " adds up to " + std::to_string(total) +
                               ", not the axis size " + std::to_string(dim));
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(x));
  if (h) {
    int64_t start = 0;
    for (int64_t i = 0; i < parts; ++i) {
      std::vector<int64_t> starts(xi.dims.size(), 0), steps(xi.dims.size(), 1), dims = xi.dims;
      starts[static_cast<size_t>(axis)] = start;
      dims[static_cast<size_t>(axis)] = sizes[static_cast<size_t>(i)];
      start += sizes[static_cast<size_t>(i)];
      im.define_folded(n, static_cast<int>(i), slice_host(*h, starts, steps, dims));
    }
    return ok_status();
  }
  if (parts == 1) {
    im.define(n, 0, x);
    return ok_status();
  }
  ops::AttrMap attrs;
  attrs["axis"] = ops::AttrValue{axis};
  attrs["sizes"] = int_list(sizes);
  std::vector<std::string> names;
  for (int i = 0; i < parts; ++i) names.push_back(im.result_name(n, i));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int> ids, im.emit(n, ops::OpId::kSplit, {x}, attrs, names));
  for (int i = 0; i < parts; ++i) im.define(n, i, Ref{ids[static_cast<size_t>(i)], -1});
  return ok_status();
}

namespace {

// `v` with the reshapes (views: Unsqueeze, Squeeze, Reshape) in front of it looked through.
int through_views(const GraphBuilder& b, int v) {
  for (;;) {
    const Value& val = b.value(v);
    if (val.kind != ValueKind::kResult || val.node < 0) return v;
    const Node& node = b.node(val.node);
    if (node.kind != NodeKind::kOp || node.op != ops::OpId::kReshape) return v;
    v = node.inputs[0];
  }
}

// The value of `v` when it is a one-element integer constant of the module.
Result<std::optional<int64_t>> constant_integer(Importer& im, int v) {
  const Value& val = im.builder().value(v);
  if (val.kind != ValueKind::kConstant) return std::optional<int64_t>();
  const std::optional<Ref> c = im.module_const(val.constant);
  if (!c || im.info(*c).count() != 1) return std::optional<int64_t>();
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(*c));
  if (!h || h->is_float()) return std::optional<int64_t>();
  return std::optional<int64_t>(h->i(0));
}

// A Slice of one axis whose run-time bounds are `ends = starts + c` (c a
// constant: a Loop's window at its iteration number, test_loop11): a
// dynamic_slice of extent c there. Its start is clamped to [0, dim - c]
// (dynamic_slice's rule), where ONNX would count a negative start from the
// end or cut the window short at the end: the extent is static here.
// nullopt when the bounds are not of that form (the caller says why).
Result<std::optional<Ref>> windowed_slice(Importer& im, const NodeCtx& n, Ref x, Ref s, Ref e) {
  const std::optional<Ref> kNotAWindow;
  const GraphBuilder& b = im.builder();
  const Info xi = im.info(x), si = im.info(s);
  if (s.is_const() || e.is_const() || si.count() != 1 || im.info(e).count() != 1) return kNotAWindow;
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> a, im.optional_input(n, 3));
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> st, im.optional_input(n, 4));
  int64_t axis = 0;
  if (a) {
    HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> axes, im.const_ints(n, *a, 3, "axes"));
    if (axes.size() != 1) return kNotAWindow;
    axis = axes[0];
  }
  if (st) {
    HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> steps, im.const_ints(n, *st, 4, "steps"));
    if (steps.size() != 1 || steps[0] != 1) return kNotAWindow;
  }
  HEXIR_ASSIGN_OR_RETURN(axis, norm_axis(n, axis, xi.dims.size()));
  const Value& end = b.value(through_views(b, e.value));
  if (end.kind != ValueKind::kResult || end.node < 0) return kNotAWindow;
  const Node& add = b.node(end.node);
  if (add.kind != NodeKind::kOp || add.op != ops::OpId::kAdd || add.inputs.size() != 2) return kNotAWindow;
  const int start = through_views(b, s.value);
  std::optional<int64_t> extent;
  for (size_t i = 0; i < 2 && !extent; ++i)
    if (through_views(b, add.inputs[i]) == start) {
      HEXIR_ASSIGN_OR_RETURN(extent, constant_integer(im, add.inputs[1 - i]));
    }
  if (!extent) return kNotAWindow;
  // dynamic_slice's start indices: i64[] scalars, 0 but on the axis.
  std::vector<Ref> operands{x};
  std::vector<int64_t> sizes = xi.dims;
  const int64_t dim = xi.dims[static_cast<size_t>(axis)];
  sizes[static_cast<size_t>(axis)] = std::clamp<int64_t>(*extent, 0, dim);
  for (size_t d = 0; d < xi.dims.size(); ++d) {
    if (static_cast<int64_t>(d) != axis) {
      operands.push_back(im.scalar_const(0, kInt64, im.helper_name(n, "start"), n.loc));
      continue;
    }
    HEXIR_ASSIGN_OR_RETURN(Ref at, im.reshape(n, s, {}, im.helper_name(n, "start")));
    if (si.type != kInt64) {
      ops::AttrMap to;
      to["to"] = ops::AttrValue{std::string("i64")};
      HEXIR_ASSIGN_OR_RETURN(at, im.emit1(n, ops::OpId::kCast, {at}, to, im.helper_name(n, "start_i64")));
    }
    operands.push_back(at);
  }
  ops::AttrMap attrs;
  attrs["sizes"] = int_list(sizes);
  HEXIR_ASSIGN_OR_RETURN(Ref r, im.emit1(n, ops::OpId::kDynamicSlice, operands, attrs, im.result_name(n)));
  return std::optional<Ref>(r);
}

}  // namespace

namespace {

// A Slice cutting a bounded dim (entry `cut` of the lists), forwards from a
// start counted from the first row: the stored rows sliced, bounded again
// at min(max(extent - start, 0), end - start).
Status slice_bounded(Importer& im, const NodeCtx& n, Ref x, std::vector<int64_t> starts, std::vector<int64_t> ends,
                     const std::vector<int64_t>& axes, const std::vector<int64_t>& steps, size_t cut) {
  const Info xi = im.info(x);
  const int64_t bound = xi.dims[static_cast<size_t>(xi.bounded)];
  if (steps[cut] != 1 || starts[cut] < 0 || ends[cut] < 0)
    return error_at(n.loc, "a slice of bounded dim " + std::to_string(xi.bounded) +
                               " with a negative start or end, or a step other than 1, is not supported");
  const int64_t start = std::min(starts[cut], bound), end = std::clamp(ends[cut], start, bound);
  starts[cut] = start;
  ends[cut] = end;
  HEXIR_ASSIGN_OR_RETURN(Ref plain, unbound_rows(im, n, x, RowPadding::kZero));
  ops::AttrMap attrs;
  attrs["starts"] = int_list(starts);
  attrs["ends"] = int_list(ends);
  attrs["axes"] = int_list(axes);
  attrs["steps"] = int_list(steps);
  HEXIR_ASSIGN_OR_RETURN(Ref rows, im.emit1(n, ops::OpId::kSlice, {plain}, attrs, im.helper_name(n, "rows")));
  auto scalar = [&](int64_t v, const char* what) {
    return im.scalar_const(static_cast<double>(v), kInt64, im.helper_name(n, what), n.loc);
  };
  Ref count = extent_of(im, x);
  if (start > 0) {
    HEXIR_ASSIGN_OR_RETURN(count, im.emit1(n, ops::OpId::kSub, {count, scalar(start, "start")}, {},
                                           im.helper_name(n, "after_start")));
    HEXIR_ASSIGN_OR_RETURN(count, im.emit1(n, ops::OpId::kMaximum, {count, scalar(0, "zero")}, {},
                                           im.helper_name(n, "rows_left")));
  }
  HEXIR_ASSIGN_OR_RETURN(count, im.emit1(n, ops::OpId::kMinimum, {count, scalar(end - start, "size")}, {},
                                         im.helper_name(n, "count")));
  HEXIR_ASSIGN_OR_RETURN(Ref y, bound_rows(im, n, rows, xi.bounded, count, im.result_name(n)));
  im.define(n, 0, y);
  return ok_status();
}

}  // namespace

Status op_slice(Importer& im, const NodeCtx& n) {
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const Info xi = im.info(x);
  std::vector<int64_t> starts, ends, axes, steps;
  if (im.opset() < 10) {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"starts", "ends", "axes"}));
    HEXIR_ASSIGN_OR_RETURN(auto s, im.attr_ints(n, "starts"));
    HEXIR_ASSIGN_OR_RETURN(auto e, im.attr_ints(n, "ends"));
    HEXIR_ASSIGN_OR_RETURN(auto a, im.attr_ints(n, "axes"));
    if (!s || !e) return error_at(n.loc, "attributes 'starts' and 'ends' are required");
    starts = *s;
    ends = *e;
    if (a) axes = *a;
  } else {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
    HEXIR_ASSIGN_OR_RETURN(Ref s, im.input(n, 1));
    HEXIR_ASSIGN_OR_RETURN(Ref e, im.input(n, 2));
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> window, windowed_slice(im, n, x, s, e));
    if (window) {
      im.define(n, 0, *window);
      return ok_status();
    }
    HEXIR_ASSIGN_OR_RETURN(starts, im.const_ints(n, s, 1, "starts"));
    HEXIR_ASSIGN_OR_RETURN(ends, im.const_ints(n, e, 2, "ends"));
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> a, im.optional_input(n, 3));
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> st, im.optional_input(n, 4));
    if (a) {
      HEXIR_ASSIGN_OR_RETURN(axes, im.const_ints(n, *a, 3, "axes"));
    }
    if (st) {
      HEXIR_ASSIGN_OR_RETURN(steps, im.const_ints(n, *st, 4, "steps"));
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return error_at(n.loc, "starts, ends, axes and steps differ in length");
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(x));
  if (h) {
    // The same bounds as @slice (ONNX semantics).
    std::vector<int64_t> st(xi.dims.size(), 0), sp(xi.dims.size(), 1), sz = xi.dims;
    for (size_t i = 0; i < starts.size(); ++i) {
      HEXIR_ASSIGN_OR_RETURN(int64_t axis, norm_axis(n, axes[i], xi.dims.size()));
      const int64_t dim = xi.dims[static_cast<size_t>(axis)], step = steps[i];
      if (step == 0) return error_at(n.loc, "a step is 0");
      const ops::SliceBounds bounds = ops::slice_bounds(starts[i], ends[i], step, dim);
      st[static_cast<size_t>(axis)] = bounds.start;
      sp[static_cast<size_t>(axis)] = step;
      sz[static_cast<size_t>(axis)] = bounds.size;
    }
    im.define_folded(n, 0, slice_host(*h, st, sp, sz));
    return ok_status();
  }
  for (size_t i = 0; i < starts.size() && xi.bounded >= 0; ++i) {
    HEXIR_ASSIGN_OR_RETURN(int64_t axis, norm_axis(n, axes[i], xi.dims.size()));
    if (axis == xi.bounded) return slice_bounded(im, n, x, starts, ends, axes, steps, i);
  }
  ops::AttrMap attrs;
  attrs["starts"] = int_list(starts);
  attrs["ends"] = int_list(ends);
  attrs["axes"] = int_list(axes);
  attrs["steps"] = int_list(steps);
  return im.emit_result(n, ops::OpId::kSlice, {x}, attrs);
}

Status op_gather(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis"}));
  HEXIR_ASSIGN_OR_RETURN(Ref data, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref indices, im.input(n, 1));
  const Info di = im.info(data);
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, im.attr_int(n, "axis", 0));
  HEXIR_ASSIGN_OR_RETURN(axis, norm_axis(n, axis, di.dims.size()));
  std::vector<HostPtr> hs;
  HEXIR_ASSIGN_OR_RETURN(bool held, im.hosts({data, indices}, hs));
  if (held) {
    const HostTensor& d = *hs[0];
    const HostTensor& ix = *hs[1];
    if (ix.is_float()) return error_at(n.loc, "indices must be integers");
    std::vector<int64_t> dims(d.dims.begin(), d.dims.begin() + axis);
    dims.insert(dims.end(), ix.dims.begin(), ix.dims.end());
    dims.insert(dims.end(), d.dims.begin() + axis + 1, d.dims.end());
    Status limit = fold_limit(d.type, dims, im.fold_max_bytes());
    if (limit.ok()) {
      HEXIR_ASSIGN_OR_RETURN(HostTensor out, gather_host(n.loc, d, ix, axis, dims));
      im.define_folded(n, 0, std::move(out));
      return ok_status();
    }
  }
  ops::AttrMap attrs;
  attrs["axis"] = ops::AttrValue{axis};
  return im.emit_result(n, ops::OpId::kGather, {data, indices}, attrs);
}

// ScatterND (reduction: opset 16 add and mul, 18 max and min), and
// ScatterElements with its opset-9 name Scatter: the result may take data's
// buffer (in place), so a KV-cache write costs the rows it writes.
Status op_scatter_nd(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"reduction"}));
  HEXIR_ASSIGN_OR_RETURN(Ref data, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref indices, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(Ref updates, im.input(n, 2));
  HEXIR_ASSIGN_OR_RETURN(std::string reduction, im.attr_string(n, "reduction", "none"));
  ops::AttrMap attrs;
  attrs["reduction"] = ops::AttrValue{reduction};
  return im.emit_result(n, ops::OpId::kScatterND, {data, indices, updates}, attrs);
}

Status op_scatter_elements(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis", "reduction"}));
  HEXIR_ASSIGN_OR_RETURN(Ref data, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref indices, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(Ref updates, im.input(n, 2));
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, im.attr_int(n, "axis", 0));
  HEXIR_ASSIGN_OR_RETURN(axis, norm_axis(n, axis, im.info(data).dims.size()));
  HEXIR_ASSIGN_OR_RETURN(std::string reduction, im.attr_string(n, "reduction", "none"));
  ops::AttrMap attrs;
  attrs["axis"] = ops::AttrValue{axis};
  attrs["reduction"] = ops::AttrValue{reduction};
  return im.emit_result(n, ops::OpId::kScatterElements, {data, indices, updates}, attrs);
}

// The shape of a value with a bounded dim is computed at run time
// (runtime_shape: its extent in place of the bound), with what is known of
// it at compile time kept for the nodes reading it (Importer::ShapeFact).
Status op_shape(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"start", "end"}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const Info xi = im.info(x);
  const std::vector<int64_t>& dims = xi.dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  HEXIR_ASSIGN_OR_RETURN(int64_t start, im.attr_int(n, "start", 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t end, im.attr_int(n, "end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  if (xi.bounded >= start && xi.bounded < end) {
    HEXIR_ASSIGN_OR_RETURN(Ref shape, runtime_shape(im, n, x, start, end, im.result_name(n)));
    im.define(n, 0, shape);
    return ok_status();
  }
  im.define_folded(n, 0, host_i64(std::vector<int64_t>(dims.begin() + start, dims.begin() + end)));
  return ok_status();
}

Status op_size(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const Info xi = im.info(x);
  if (xi.bounded >= 0) {  // the extent times the other dims
    const int64_t bound = xi.dims[static_cast<size_t>(xi.bounded)];
    Ref rest = im.scalar_const(static_cast<double>(bound == 0 ? 0 : xi.count() / bound), kInt64,
                               im.helper_name(n, "other_dims"), n.loc);
    HEXIR_ASSIGN_OR_RETURN(Ref size, im.emit1(n, ops::OpId::kMul, {extent_of(im, x), rest}, {}, im.result_name(n)));
    if (!size.is_const()) im.shape_facts()[size.value] = Importer::ShapeFact{{xi.count()}, {false}, {-1}};
    im.define(n, 0, size);
    return ok_status();
  }
  im.define_folded(n, 0, host_i64({xi.count()}, true));
  return ok_status();
}

// A shape computed at run time from a bounded value's (Importer::ShapeFact):
// every dim known but one, whose upper bound is the buffer's and whose
// run-time value the result's extent.
Status constant_of_runtime_shape(Importer& im, const NodeCtx& n, Ref s, const HostTensor& value) {
  const std::optional<Importer::ShapeFact> fact = shape_fact(im, s);
  if (!fact)
    return error_at(n.loc, "the shape ('" + n.node.input(0) +
                               "') is computed at run time and is not a shape read from a bounded value");
  int run_time = -1;
  for (size_t d = 0; d < fact->exact.size(); ++d)
    if (!fact->exact[d]) {
      if (run_time >= 0) return error_at(n.loc, "the shape has more than one dim known at run time only");
      run_time = static_cast<int>(d);
    }
  const std::string o = im.out_name(n, 0);
  Ref fill = im.fill_const(value.type, fact->upper, value.bytes, run_time < 0 ? im.claim(o) : im.helper_name(n, "fill"),
                           n.loc);
  if (run_time < 0) {
    im.define(n, 0, fill);
    return ok_status();
  }
  // The extent of the value the dim was read from, where it is known: the
  // result is bounded alike (and combines with it elementwise).
  Ref count{fact->extent[static_cast<size_t>(run_time)], -1};
  if (count.value < 0) {
    ops::AttrMap attrs;
    attrs["starts"] = int_list({run_time});
    attrs["ends"] = int_list({run_time + 1});
    attrs["axes"] = int_list({0});
    attrs["steps"] = int_list({1});
    HEXIR_ASSIGN_OR_RETURN(count, im.emit1(n, ops::OpId::kSlice, {s}, attrs, im.helper_name(n, "extent")));
  }
  HEXIR_ASSIGN_OR_RETURN(Ref y, bound_rows(im, n, fill, run_time, count, im.result_name(n)));
  im.define(n, 0, y);
  return ok_status();
}

Status op_constant_of_shape(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"value"}));
  HEXIR_ASSIGN_OR_RETURN(Ref s, im.input(n, 0));
  HostTensor value = make_host(kFloat, {1});
  if (const auto* a = find_attribute(n.node, "value")) {
    HEXIR_ASSIGN_OR_RETURN(value, im.attribute_contents(n, *a));
    if (value.count() != 1) return error_at(n.loc, "attribute 'value' must hold one element");
  }
  if (!s.is_const()) return constant_of_runtime_shape(im, n, s, value);
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> dims, im.const_ints(n, s, 0, "the shape"));
  for (int64_t d : dims)
    if (d < 0) return error_at(n.loc, "shape " + shape_text(dims) + " has a negative dim");
  const std::string o = im.out_name(n, 0);
  if (o.empty()) return ok_status();
  if (fold_limit(value.type, dims, im.fold_max_bytes()).ok()) {
    HEXIR_ASSIGN_OR_RETURN(HostTensor out,
                           expand_host(HostTensor{value.type, {}, value.bytes}, dims, im.fold_max_bytes()));
    im.define_folded(n, 0, std::move(out));
  } else {
    im.define(n, 0, im.fill_const(value.type, dims, value.bytes, im.claim(o), n.loc));
  }
  return ok_status();
}

Status op_range(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  std::vector<HostPtr> hs;
  std::vector<std::optional<Ref>> refs;
  for (int i = 0; i < 3; ++i) {
    HEXIR_ASSIGN_OR_RETURN(Ref r, im.input(n, i));
    refs.push_back(r);
  }
  HEXIR_ASSIGN_OR_RETURN(bool held, im.hosts(refs, hs));
  if (!held)
    return error_at(n.loc,
                    "start, limit and delta must be constants: the length of a Range on run-time values "
                    "is not known at compile time (Range folds at import only)");
  for (const HostPtr& h : hs)
    if (h->count() != 1) return error_at(n.loc, "start, limit and delta must be scalars");
  const int32_t type = hs[0]->type;
  int64_t count = 0;
  if (hs[0]->is_float()) {
    const double start = hs[0]->f(0), limit = hs[1]->f(0), delta = hs[2]->f(0);
    if (delta == 0) return error_at(n.loc, "delta is 0");
    count = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
    HEXIR_RETURN_IF_ERROR(fold_limit(type, {count}, im.fold_max_bytes()));
    HostTensor out = make_host(type, {count});
    for (int64_t i = 0; i < count; ++i) out.set_f(i, start + static_cast<double>(i) * delta);
    im.define_folded(n, 0, std::move(out));
  } else {
    const int64_t start = hs[0]->i(0), limit = hs[1]->i(0), delta = hs[2]->i(0);
    if (delta == 0) return error_at(n.loc, "delta is 0");
    const __int128 span = static_cast<__int128>(limit) - start;
    count = span <= 0 && delta > 0 ? 0 : span >= 0 && delta < 0 ? 0
            : static_cast<int64_t>((span + (delta > 0 ? delta - 1 : delta + 1)) / delta);
    if (fold_limit(type, {count}, im.fold_max_bytes()).code() != StatusCode::kOk)
      return error_at(n.loc, "the range is too long to fold");
    HostTensor out = make_host(type, {count});
    for (int64_t i = 0; i < count; ++i) out.set_i(i, start + i * delta);
    im.define_folded(n, 0, std::move(out));
  }
  return ok_status();
}

// Bidirectional broadcast to a constant shape: folded for held constants,
// else where(true[shape], x, x), which broadcasts any dtype.
Status op_expand(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref s, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> shape, im.const_ints(n, s, 1, "the shape"));
  const Info xi = im.info(x);
  auto dims = ops::broadcast_shapes(xi.dims, shape);
  if (!dims) return error_at(n.loc, "cannot expand " + shape_text(xi.dims) + " to " + shape_text(shape));
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(x));
  if (h && fold_limit(xi.type, *dims, im.fold_max_bytes()).ok()) {
    HEXIR_ASSIGN_OR_RETURN(HostTensor out, expand_host(*h, *dims, im.fold_max_bytes()));
    im.define_folded(n, 0, std::move(out));
    return ok_status();
  }
  if (*dims == xi.dims) {
    im.define(n, 0, x);
    return ok_status();
  }
  if (std::optional<ops::OpId> expand = ops::find_op("expand")) {  // this build's @expand
    ops::AttrMap attrs;
    attrs["shape"] = int_list(shape);
    HEXIR_ASSIGN_OR_RETURN(Ref r, im.emit1(n, *expand, {x}, attrs, im.result_name(n)));
    im.define(n, 0, r);
    return ok_status();
  }
  Ref cond = im.fill_const(kBool, *dims, {1}, im.helper_name(n, "true"), n.loc);
  return im.emit_result(n, ops::OpId::kWhere, {cond, x, x}, {});
}

// ---- indexing and layout ------------------------------------------------------------

Status op_gather_elements(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis"}));
  HEXIR_ASSIGN_OR_RETURN(Ref data, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref indices, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, im.attr_int(n, "axis", 0));
  HEXIR_ASSIGN_OR_RETURN(axis, norm_axis(n, axis, im.info(data).dims.size()));
  ops::AttrMap attrs;
  attrs["axis"] = ops::AttrValue{axis};
  return im.emit_result(n, ops::OpId::kGatherElements, {data, indices}, attrs);
}

Status op_gather_nd(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"batch_dims"}));
  HEXIR_ASSIGN_OR_RETURN(Ref data, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref indices, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(int64_t batch_dims, im.attr_int(n, "batch_dims", 0));
  ops::AttrMap attrs;
  attrs["batch_dims"] = ops::AttrValue{batch_dims};
  return im.emit_result(n, ops::OpId::kGatherND, {data, indices}, attrs);
}

namespace {

// The one integer of a constant scalar input (k, depth, axis), of any numeric type.
Result<int64_t> const_scalar_int(Importer& im, const NodeCtx& n, Ref r, int index, const char* what) {
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(r));
  if (!h || h->count() != 1)
    return error_at(n.loc, std::string(what) + " (input " + std::to_string(index) +
                               ") must be a constant with one element; it is computed at run time");
  return h->is_float() ? static_cast<int64_t>(h->f(0)) : h->i(0);
}

}  // namespace

// Trilu: where(mask, x, 0) with the constant [rows, cols] mask of the kept
// triangle, broadcast over the batch: one pass over x, as a kernel of its own would be.
Status op_trilu(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"upper"}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t upper, im.attr_int(n, "upper", 1));
  int64_t k = 0;
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> kr, im.optional_input(n, 1));
  if (kr) {
    HEXIR_ASSIGN_OR_RETURN(k, const_scalar_int(im, n, *kr, 1, "k"));
  }
  const Info xi = im.info(x);
  if (xi.dims.size() < 2) return error_at(n.loc, "input " + shape_text(xi.dims) + " has rank below 2");
  const int64_t rows = xi.dims[xi.dims.size() - 2], cols = xi.dims.back();
  HostTensor mask = make_host(kBool, {rows, cols});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t diagonal = j - i;  // j - i >= k: upper; <= k: lower (ONNX, numpy.triu / tril)
      mask.set_i(i * cols + j, upper ? diagonal >= k : diagonal <= k);
    }
  Ref m = im.new_const(im.helper_name(n, "mask"), std::move(mask), n.loc);
  Ref zero = im.new_const(im.helper_name(n, "zero"), make_host(xi.type, {}), n.loc);
  return im.emit_result(n, ops::OpId::kWhere, {m, x, zero}, {});
}

// Tile: x viewed with a size-1 dim before each repeated dim, expanded to the
// repeats there (a strided gather, stride 0 along them), then merged back:
// reshapes are views, so the expand is the only pass over the data.
Status op_tile(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref r, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, im.const_ints(n, r, 1, "repeats"));
  const Info xi = im.info(x);
  if (repeats.size() != xi.dims.size())
    return error_at(
        n.loc, "repeats " + shape_text(repeats) + " do not match rank " + std::to_string(xi.dims.size()));
  std::vector<int64_t> viewed, expanded, result;
  bool plain_run = false;  // the last viewed dim is a run of unrepeated dims
  for (size_t d = 0; d < xi.dims.size(); ++d) {
    if (repeats[d] < 0) return error_at(n.loc, "repeats " + shape_text(repeats) + " has a negative entry");
    result.push_back(xi.dims[d] * repeats[d]);
    if (repeats[d] == 1 && plain_run) {
      viewed.back() *= xi.dims[d];
      expanded.back() *= xi.dims[d];
      continue;
    }
    if (repeats[d] != 1) {
      viewed.push_back(1);
      expanded.push_back(repeats[d]);
    }
    viewed.push_back(xi.dims[d]);
    expanded.push_back(xi.dims[d]);
    plain_run = repeats[d] == 1;
  }
  if (result == xi.dims) {
    im.define(n, 0, x);
    return ok_status();
  }
  if (expanded.size() > static_cast<size_t>(ops::kMaxRank))
    return error_at(n.loc, "tiling " + shape_text(xi.dims) + " by " + shape_text(repeats) + " needs rank " +
                               std::to_string(expanded.size()) + ", above " + std::to_string(ops::kMaxRank));
  HEXIR_ASSIGN_OR_RETURN(Ref v, im.reshape(n, x, viewed, im.helper_name(n, "view")));
  ops::AttrMap attrs;
  attrs["shape"] = int_list(expanded);
  HEXIR_ASSIGN_OR_RETURN(Ref e, im.emit1(n, ops::OpId::kExpand, {v}, attrs, im.helper_name(n, "expand")));
  HEXIR_ASSIGN_OR_RETURN(Ref out, im.reshape(n, e, result, im.result_name(n)));
  im.define(n, 0, out);
  return ok_status();
}

// DepthToSpace and SpaceToDepth, NCHW: a view of rank 6, one transpose (the
// strided gather), a view back. The reshapes cost nothing, so this is the
// one pass a kernel of their own would make.
Status op_depth_to_space(Importer& im, const NodeCtx& n) {
  const bool to_space = n.op == "DepthToSpace";
  if (to_space) {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"blocksize", "mode"}));
  } else {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"blocksize"}));
  }
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t b, im.attr_int(n, "blocksize", 0));
  HEXIR_ASSIGN_OR_RETURN(std::string mode, im.attr_string(n, "mode", "DCR"));
  const Info xi = im.info(x);
  if (xi.dims.size() != 4) return error_at(n.loc, "input " + shape_text(xi.dims) + " is not 4-D (NCHW)");
  if (b < 1) return error_at(n.loc, "blocksize " + std::to_string(b) + " must be positive");
  if (mode != "DCR" && mode != "CRD") return error_at(n.loc, "mode '" + mode + "' is not DCR or CRD");
  const int64_t N = xi.dims[0], C = xi.dims[1], H = xi.dims[2], W = xi.dims[3];
  std::vector<int64_t> view, perm, result;
  if (to_space) {
    if (C % (b * b) != 0)
      return error_at(
          n.loc, "channels " + std::to_string(C) + " do not divide by blocksize^2 " + std::to_string(b * b));
    const int64_t c = C / (b * b);
    if (mode == "DCR") {
      view = {N, b, b, c, H, W};
      perm = {0, 3, 4, 1, 5, 2};
    } else {
      view = {N, c, b, b, H, W};
      perm = {0, 1, 4, 2, 5, 3};
    }
    result = {N, c, H * b, W * b};
  } else {
    if (H % b != 0 || W % b != 0)
      return error_at(n.loc, "height " + std::to_string(H) + " and width " + std::to_string(W) +
                                 " do not divide by blocksize " + std::to_string(b));
    view = {N, C, H / b, b, W / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    result = {N, C * b * b, H / b, W / b};
  }
  HEXIR_ASSIGN_OR_RETURN(Ref v, im.reshape(n, x, view, im.helper_name(n, "view")));
  HEXIR_ASSIGN_OR_RETURN(Ref t, transpose(im, n, v, perm, im.helper_name(n, "transpose")));
  HEXIR_ASSIGN_OR_RETURN(Ref out, im.reshape(n, t, result, im.result_name(n)));
  im.define(n, 0, out);
  return ok_status();
}

// OneHot with constant depth and values: equal(mod(indices, depth), 0..depth-1)
// with the new axis inserted, then where(that, on, off). Indices wrap as the
// ONNX reference's numpy.mod does ([-depth, depth) as the operator states);
// float indices are truncated to i64 first.
Status op_one_hot(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis"}));
  HEXIR_ASSIGN_OR_RETURN(Ref indices, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref depth_ref, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(Ref values_ref, im.input(n, 2));
  HEXIR_ASSIGN_OR_RETURN(int64_t depth, const_scalar_int(im, n, depth_ref, 1, "depth"));
  if (depth < 1) return error_at(n.loc, "depth " + std::to_string(depth) + " must be positive");
  HEXIR_ASSIGN_OR_RETURN(HostPtr values, im.host(values_ref));
  if (!values || values->count() != 2)
    return error_at(n.loc, "values (input 2) must be a constant [off, on]; it is computed at run time");
  const Info ii = im.info(indices);
  const size_t rank = ii.dims.size() + 1;
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, im.attr_int(n, "axis", -1));
  HEXIR_ASSIGN_OR_RETURN(axis, norm_axis(n, axis, rank));
  Ref idx = indices;
  int32_t index_type = ii.type;
  if (index_type != kInt32 && index_type != kInt64) {
    ops::AttrMap cast;
    cast["to"] = ops::AttrValue{std::string("i64")};
    HEXIR_ASSIGN_OR_RETURN(idx, im.emit1(n, ops::OpId::kCast, {idx}, cast, im.helper_name(n, "i64")));
    index_type = kInt64;
  }
  HostTensor d = make_host(index_type, {});
  d.set_i(0, depth);
  Ref depth_const = im.new_const(im.helper_name(n, "depth"), std::move(d), n.loc);
  ops::AttrMap python_mod;
  python_mod["fmod"] = ops::AttrValue{int64_t{0}};
  HEXIR_ASSIGN_OR_RETURN(Ref wrapped, im.emit1(n, ops::OpId::kMod, {idx, depth_const}, python_mod,
                                               im.helper_name(n, "wrapped")));
  std::vector<int64_t> with_axis = ii.dims, targets_dims(rank, 1);
  with_axis.insert(with_axis.begin() + axis, 1);
  targets_dims[static_cast<size_t>(axis)] = depth;
  HEXIR_ASSIGN_OR_RETURN(Ref column, im.reshape(n, wrapped, with_axis, im.helper_name(n, "column")));
  HostTensor targets = make_host(index_type, targets_dims);
  for (int64_t i = 0; i < depth; ++i) targets.set_i(i, i);
  Ref t = im.new_const(im.helper_name(n, "targets"), std::move(targets), n.loc);
  HEXIR_ASSIGN_OR_RETURN(Ref hot, im.emit1(n, ops::OpId::kEqual, {column, t}, {}, im.helper_name(n, "hot")));
  HostTensor off = make_host(values->type, {}), on = make_host(values->type, {});
  const uint32_t esize = values->esize();
  std::copy_n(values->bytes.begin(), esize, off.bytes.begin());
  std::copy_n(values->bytes.begin() + esize, esize, on.bytes.begin());
  Ref on_ref = im.new_const(im.helper_name(n, "on"), std::move(on), n.loc);
  Ref off_ref = im.new_const(im.helper_name(n, "off"), std::move(off), n.loc);
  return im.emit_result(n, ops::OpId::kWhere, {hot, on_ref, off_ref}, {});
}

// EyeLike: equal(row + k, column) over constant index grids, cast to the
// dtype; folded at import within the fold limit (docs/onnx.md), else those
// two kernels run.
Status op_eye_like(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"dtype", "k"}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const Info xi = im.info(x);
  if (xi.dims.size() != 2) return error_at(n.loc, "input " + shape_text(xi.dims) + " is not 2-D");
  HEXIR_ASSIGN_OR_RETURN(int64_t type, im.attr_int(n, "dtype", xi.type));
  HEXIR_ASSIGN_OR_RETURN(int64_t k, im.attr_int(n, "k", 0));
  const std::optional<DType> dtype = dtype_from_onnx(static_cast<int32_t>(type));
  if (!dtype)
    return error_at(n.loc, "dtype " + onnx_type_name(static_cast<int32_t>(type)) + " is not supported");
  const int64_t rows = xi.dims[0], cols = xi.dims[1];
  HostTensor row = make_host(kInt64, {rows, 1}), column = make_host(kInt64, {1, cols});
  for (int64_t i = 0; i < rows; ++i) row.set_i(i, i + k);
  for (int64_t j = 0; j < cols; ++j) column.set_i(j, j);
  Ref r = im.new_const(im.helper_name(n, "row"), std::move(row), n.loc);
  Ref c = im.new_const(im.helper_name(n, "column"), std::move(column), n.loc);
  HEXIR_ASSIGN_OR_RETURN(Ref diagonal,
                         im.emit1(n, ops::OpId::kEqual, {r, c}, {}, im.helper_name(n, "diagonal")));
  ops::AttrMap cast;
  cast["to"] = ops::AttrValue{std::string(dtype_name(*dtype))};
  return im.emit_result(n, ops::OpId::kCast, {diagonal}, cast);
}

}  // namespace hexir::compiler::onnx_import
