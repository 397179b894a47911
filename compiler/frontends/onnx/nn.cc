// Neural-network operators: MatMul, Gemm, ArgMax/ArgMin, Softmax, LogSoftmax,
// Hardmax, TopK, the normalizations, reductions, pooling, Resize/Upsample,
// Conv and ConvTranspose; CumSum; the losses NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss (compositions).
#include "frontends/onnx/handlers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hexir::compiler::onnx_import {

// ---- contractions, ArgMax, Softmax, normalizations ----
Status op_matmul(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref a, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref b, im.input(n, 1));
  return im.emit_result(n, ops::OpId::kMatmul, {a, b}, {});
}

Status op_gemm(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"alpha", "beta", "transA", "transB", "broadcast"}));
  HEXIR_ASSIGN_OR_RETURN(double alpha, im.attr_float(n, "alpha", 1.0));
  HEXIR_ASSIGN_OR_RETURN(double beta, im.attr_float(n, "beta", 1.0));
  HEXIR_ASSIGN_OR_RETURN(int64_t trans_a, im.attr_int(n, "transA", 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t trans_b, im.attr_int(n, "transB", 0));
  HEXIR_ASSIGN_OR_RETURN(Ref a, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref b, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> c, im.optional_input(n, 2));
  if (im.info(a).dims.size() != 2 || im.info(b).dims.size() != 2)
    return error_at(n.loc, "A and B must be matrices, got " + shape_text(im.info(a).dims) + " and " +
                               shape_text(im.info(b).dims));
  if (trans_a) {
    HEXIR_ASSIGN_OR_RETURN(a, transpose(im, n, a, {1, 0}, im.helper_name(n, "A_T")));
  }
  // B^T is read where B lies (matmul's transpose_b): a fully connected
  // layer's weights are never transposed, at compile time or per invoke.
  ops::AttrMap matmul_attrs;
  if (trans_b) matmul_attrs["transpose_b"] = ops::AttrValue{int64_t{1}};
  const bool scale = alpha != 1.0, add_c = c && beta != 0.0;
  HEXIR_ASSIGN_OR_RETURN(Ref y, im.emit1(n, ops::OpId::kMatmul, {a, b}, matmul_attrs,
                                      scale || add_c ? im.helper_name(n, "matmul") : im.result_name(n)));
  if (scale) {
    Ref s = im.scalar_const(alpha, kFloat, im.helper_name(n, "alpha"), n.loc);
    HEXIR_ASSIGN_OR_RETURN(
        y, im.emit1(n, ops::OpId::kMul, {y, s}, {}, add_c ? im.helper_name(n, "scaled") : im.result_name(n)));
  }
  if (add_c) {
    Ref cc = *c;
    if (beta != 1.0) {
      HEXIR_ASSIGN_OR_RETURN(HostPtr ch, im.host(cc));
      Ref s = im.scalar_const(beta, kFloat, im.helper_name(n, "beta"), n.loc);
      if (ch) {
        HEXIR_ASSIGN_OR_RETURN(HostTensor scaled,
                               fold_arith(n.loc, "Mul", *ch, *im.host(s).value(), im.fold_max_bytes()));
        cc = im.new_const(im.helper_name(n, "beta_C"), std::move(scaled), n.loc);
      } else {
        HEXIR_ASSIGN_OR_RETURN(cc, im.emit1(n, ops::OpId::kMul, {cc, s}, {}, im.helper_name(n, "beta_C")));
      }
    }
    HEXIR_ASSIGN_OR_RETURN(y, im.emit1(n, ops::OpId::kAdd, {y, cc}, {}, im.result_name(n)));
  }
  im.define(n, 0, y);
  return ok_status();
}

// ArgMax, ArgMin: the operator's own attributes and defaults (axis 0,
// keepdims 1, select_last_index 0); an f32, i32 or i64 input, an i64 result.
Status op_argmax(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis", "keepdims", "select_last_index"}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  ops::AttrMap attrs;
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, im.attr_int(n, "axis", 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t keepdims, im.attr_int(n, "keepdims", 1));
  HEXIR_ASSIGN_OR_RETURN(int64_t last, im.attr_int(n, "select_last_index", 0));
  attrs["axis"] = ops::AttrValue{axis};
  attrs["keepdims"] = ops::AttrValue{keepdims};
  attrs["select_last_index"] = ops::AttrValue{last};
  return im.emit_result(n, n.op == "ArgMin" ? ops::OpId::kArgMin : ops::OpId::kArgMax, {x}, attrs);
}

// Softmax, LogSoftmax, Hardmax: one axis (opset 13 on), or (before 13) the
// input coerced to 2-D at `axis`.
Status op_softmax(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis"}));
  const ops::OpId id = n.op == "LogSoftmax" ? ops::OpId::kLogSoftmax
                       : n.op == "Hardmax"  ? ops::OpId::kHardmax
                                            : ops::OpId::kSoftmax;
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const Info xi = im.info(x);
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, im.attr_int(n, "axis", im.opset() < 13 ? 1 : -1));
  HEXIR_ASSIGN_OR_RETURN(axis, norm_axis(n, axis, xi.dims.size()));
  ops::AttrMap attrs;
  if (im.opset() >= 13 || axis + 1 == static_cast<int64_t>(xi.dims.size())) {
    attrs["axis"] = ops::AttrValue{axis};
    HEXIR_ASSIGN_OR_RETURN(Ref r, im.emit1(n, id, {x}, attrs, im.result_name(n)));
    im.define(n, 0, r);
    return ok_status();
  }
  // Before opset 13: over the input coerced to 2-D at `axis`.
  const std::vector<int64_t> flat{product(xi.dims, 0, static_cast<size_t>(axis)),
                                  product(xi.dims, static_cast<size_t>(axis), xi.dims.size())};
  HEXIR_ASSIGN_OR_RETURN(Ref x2, im.reshape(n, x, flat, im.helper_name(n, "2d")));
  attrs["axis"] = ops::AttrValue{int64_t{1}};
  HEXIR_ASSIGN_OR_RETURN(Ref s, im.emit1(n, id, {x2}, attrs, im.helper_name(n, "2d_result")));
  HEXIR_ASSIGN_OR_RETURN(Ref r, im.reshape(n, s, xi.dims, im.result_name(n)));
  im.define(n, 0, r);
  return ok_status();
}

namespace {

// `r` as exactly `dims` (same element count: a reshape; a held constant
// that broadcasts: expanded at import).
Result<Ref> as_shape(Importer& im, const NodeCtx& n, Ref r, const std::vector<int64_t>& dims,
                     const std::string& what) {
  const Info ri = im.info(r);
  if (ri.dims == dims) return r;
  if (ri.count() == product(dims, 0, dims.size())) return im.reshape(n, r, dims, im.helper_name(n, what));
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(r));
  auto b = ops::broadcast_shapes(ri.dims, dims);
  if (h && b && *b == dims) {
    HEXIR_ASSIGN_OR_RETURN(HostTensor e, expand_host(*h, dims, im.fold_max_bytes()));
    return im.new_const(im.helper_name(n, what), std::move(e), n.loc);
  }
  return error_at(n.loc, what + " has shape " + shape_text(ri.dims) + ", expected " + shape_text(dims));
}

}  // namespace

Status op_layernorm(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis", "epsilon", "stash_type"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t stash, im.attr_int(n, "stash_type", 1));
  if (stash != 1)
    return error_at(n.loc, "stash_type " + std::to_string(stash) +
                               " is not supported by the ONNX importer (only 1, float)");
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref scale, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> bias, im.optional_input(n, 2));
  const Info xi = im.info(x);
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, im.attr_int(n, "axis", -1));
  HEXIR_ASSIGN_OR_RETURN(axis, norm_axis(n, axis, xi.dims.size()));
  HEXIR_ASSIGN_OR_RETURN(double epsilon, im.attr_float(n, "epsilon", 1e-5));
  const std::vector<int64_t> norm(xi.dims.begin() + axis, xi.dims.end());
  HEXIR_ASSIGN_OR_RETURN(scale, as_shape(im, n, scale, norm, "scale"));
  Ref b;
  if (bias) {
    HEXIR_ASSIGN_OR_RETURN(b, as_shape(im, n, *bias, norm, "bias"));
  } else {
    b = im.fill_const(xi.type, norm, std::vector<uint8_t>(onnx_element_size(xi.type), 0),
                      im.helper_name(n, "zero_bias"), n.loc);
  }
  ops::AttrMap attrs;
  attrs["axis"] = ops::AttrValue{axis};
  attrs["epsilon"] = ops::AttrValue{static_cast<double>(static_cast<float>(epsilon))};
  HEXIR_ASSIGN_OR_RETURN(Ref r, im.emit1(n, ops::OpId::kLayernorm, {x, scale, b}, attrs, im.result_name(n)));
  im.define(n, 0, r);
  // Mean and InvStdDev (outputs 1 and 2, shaped [d0..d(axis-1), 1, ...]), when read:
  // computed beside the fused kernel from the same definition, in f32 (stash_type 1).
  auto wanted = [&](int i) { return !im.out_name(n, i).empty() && im.is_needed(im.out_name(n, i)); };
  if (!wanted(1) && !wanted(2)) return ok_status();
  if (xi.type != kFloat)
    return error_at(n.loc, "outputs Mean and InvStdDev of a " + onnx_type_name(xi.type) +
                               " input are not supported by the ONNX importer (only float)");
  ops::AttrMap reduce;
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < static_cast<int64_t>(xi.dims.size()); ++d) axes.push_back(d);
  reduce["axes"] = int_list(axes);
  reduce["keepdims"] = ops::AttrValue{int64_t{1}};
  HEXIR_ASSIGN_OR_RETURN(Ref mean, im.emit1(n, ops::OpId::kReduceMean, {x}, reduce,
                                         wanted(1) ? im.result_name(n, 1) : im.helper_name(n, "mean")));
  im.define(n, 1, mean);
  if (!wanted(2)) return ok_status();
  HEXIR_ASSIGN_OR_RETURN(Ref centered,
                         im.emit1(n, ops::OpId::kSub, {x, mean}, {}, im.helper_name(n, "centered")));
  HEXIR_ASSIGN_OR_RETURN(Ref square,
                         im.emit1(n, ops::OpId::kMul, {centered, centered}, {}, im.helper_name(n, "square")));
  HEXIR_ASSIGN_OR_RETURN(
      Ref variance, im.emit1(n, ops::OpId::kReduceMean, {square}, reduce, im.helper_name(n, "variance")));
  const float eps = static_cast<float>(epsilon);
  std::vector<uint8_t> eps_bytes(4);
  std::memcpy(eps_bytes.data(), &eps, 4);
  const Ref eps_ref = im.fill_const(kFloat, {}, std::move(eps_bytes), im.helper_name(n, "epsilon"), n.loc);
  HEXIR_ASSIGN_OR_RETURN(Ref shifted,
                         im.emit1(n, ops::OpId::kAdd, {variance, eps_ref}, {}, im.helper_name(n, "shifted")));
  HEXIR_ASSIGN_OR_RETURN(Ref inv, im.emit1(n, ops::OpId::kRsqrt, {shifted}, {}, im.result_name(n, 2)));
  im.define(n, 2, inv);
  return ok_status();
}

// Inference-mode batch normalization: y = x * a + b with a = scale / sqrt(var + eps), b = B - mean * a.
Status op_batchnorm(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"epsilon", "momentum", "training_mode", "spatial"}));
  HEXIR_RETURN_IF_ERROR(im.only_first_outputs(n, 1));
  HEXIR_ASSIGN_OR_RETURN(int64_t training, im.attr_int(n, "training_mode", 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t spatial, im.attr_int(n, "spatial", 1));
  if (training)
    return error_at(n.loc, "training_mode must be 0: training is not supported by the ONNX importer");
  if (!spatial) return error_at(n.loc, "spatial = 0 is not supported by the ONNX importer");
  HEXIR_ASSIGN_OR_RETURN(double epsilon, im.attr_float(n, "epsilon", 1e-5));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const Info xi = im.info(x);
  if (xi.dims.size() < 2) return error_at(n.loc, "input must have rank >= 2, got " + shape_text(xi.dims));
  const int64_t channels = xi.dims[1];
  std::vector<HostPtr> p;
  for (int i = 1; i <= 4; ++i) {
    HEXIR_ASSIGN_OR_RETURN(Ref r, im.input(n, i));
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(r));
    if (!h)
      return error_at(n.loc,
                      "input " + std::to_string(i) + " ('" + n.node.input(i) +
                          "') must be a constant: batch normalization is folded into a scale and a shift");
    if (h->count() != channels)
      return error_at(n.loc, "input " + std::to_string(i) + " has " + std::to_string(h->count()) +
                                 " elements, the input has " + std::to_string(channels) + " channels");
    p.push_back(h);
  }
  std::vector<int64_t> dims(xi.dims.size() - 1, 1);
  dims[0] = channels;
  HostTensor a = make_host(xi.type, dims), b = make_host(xi.type, dims);
  for (int64_t c = 0; c < channels; ++c) {
    const double s = p[0]->f(c) / std::sqrt(p[3]->f(c) + static_cast<double>(static_cast<float>(epsilon)));
    a.set_f(c, s);
    b.set_f(c, p[1]->f(c) - p[2]->f(c) * s);
  }
  Ref ar = im.new_const(im.helper_name(n, "scale"), std::move(a), n.loc);
  Ref br = im.new_const(im.helper_name(n, "shift"), std::move(b), n.loc);
  HEXIR_ASSIGN_OR_RETURN(Ref y, im.emit1(n, ops::OpId::kMul, {x, ar}, {}, im.helper_name(n, "scaled")));
  HEXIR_ASSIGN_OR_RETURN(y, im.emit1(n, ops::OpId::kAdd, {y, br}, {}, im.result_name(n)));
  im.define(n, 0, y);
  return ok_status();
}

// TopK: k a constant (input 1 from opset 10, the attribute before); two
// results, values and i64 indices, always sorted.
namespace {

// TopK reading across a bounded dim or taking K at run time: the plain
// top_k of the stored rows (the padding never chosen) at K's upper bound,
// both results bounded at the count actually asked for, min(K, extent).
Status top_k_bounded(Importer& im, const NodeCtx& n, Ref x, std::optional<Ref> run_time_k, int64_t k,
                     int64_t axis, int64_t largest) {
  const Info xi = im.info(x);
  HEXIR_ASSIGN_OR_RETURN(axis, norm_axis(n, axis, xi.dims.size()));
  const int64_t dim = xi.dims[static_cast<size_t>(axis)];
  if (xi.bounded >= 0 && xi.bounded != axis)
    return error_at(n.loc, "x's bounded dim " + std::to_string(xi.bounded) + " is not the axis " +
                               std::to_string(axis) + " (not supported)");
  if (run_time_k) {
    const std::optional<Importer::ShapeFact> fact = shape_fact(im, *run_time_k);
    k = fact && fact->upper.size() == 1 ? fact->upper[0] : dim;  // no bound known: every row
  }
  k = std::clamp<int64_t>(k, 0, dim);
  Ref xs = x;
  if (xi.bounded >= 0) {
    HEXIR_ASSIGN_OR_RETURN(xs, unbound_rows(im, n, x, largest ? RowPadding::kLowest : RowPadding::kHighest));
  }
  ops::AttrMap attrs;
  attrs["axis"] = ops::AttrValue{axis};
  attrs["k"] = ops::AttrValue{k};
  attrs["largest"] = ops::AttrValue{largest};
  attrs["sorted"] = ops::AttrValue{int64_t{1}};
  HEXIR_ASSIGN_OR_RETURN(std::vector<int> ids, im.emit(n, ops::OpId::kTopK, {xs}, attrs,
                                                       {im.helper_name(n, "values"), im.helper_name(n, "indices")}));
  Ref count = run_time_k ? *run_time_k : im.scalar_const(static_cast<double>(k), kInt64, im.helper_name(n, "k"), n.loc);
  if (im.info(count).dims.size() == 1) {
    HEXIR_ASSIGN_OR_RETURN(count, im.reshape(n, count, {}, im.helper_name(n, "k")));
  }
  if (xi.bounded >= 0) {
    HEXIR_ASSIGN_OR_RETURN(count, im.emit1(n, ops::OpId::kMinimum, {count, extent_of(im, x)}, {},
                                           im.helper_name(n, "count")));
  }
  for (int i = 0; i < 2; ++i) {
    HEXIR_ASSIGN_OR_RETURN(Ref r, bound_rows(im, n, Ref{ids[static_cast<size_t>(i)], -1}, static_cast<int>(axis),
                                             count, im.result_name(n, i)));
    im.define(n, i, r);
  }
  return ok_status();
}

}  // namespace

Status op_top_k(Importer& im, const NodeCtx& n) {
  const bool k_input = im.opset() >= 10;
  if (k_input) {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis", "largest", "sorted"}));
  } else {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis", "k"}));
  }
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, im.attr_int(n, "axis", -1));
  HEXIR_ASSIGN_OR_RETURN(int64_t largest, im.attr_int(n, "largest", 1));
  int64_t k = 0;
  if (k_input) {
    HEXIR_ASSIGN_OR_RETURN(Ref kr, im.input(n, 1));
    if (im.info(kr).count() != 1)
      return error_at(n.loc, "input 'K' must hold one value, got " + std::to_string(im.info(kr).count()));
    HEXIR_ASSIGN_OR_RETURN(HostPtr held, im.host(kr));
    if (!held) return top_k_bounded(im, n, x, kr, 0, axis, largest);
    HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> ks, im.const_ints(n, kr, 1, "K"));
    k = ks[0];
  } else {
    HEXIR_ASSIGN_OR_RETURN(auto ka, im.attr_int(n, "k", -1));
    k = ka;
  }
  if (im.info(x).bounded >= 0) return top_k_bounded(im, n, x, std::nullopt, k, axis, largest);
  ops::AttrMap attrs;
  attrs["axis"] = ops::AttrValue{axis};
  attrs["k"] = ops::AttrValue{k};
  attrs["largest"] = ops::AttrValue{largest};
  attrs["sorted"] = ops::AttrValue{int64_t{1}};  // sorted = 0 leaves the order open: sorted is one
  HEXIR_ASSIGN_OR_RETURN(std::vector<int> ids, im.emit(n, ops::OpId::kTopK, {x}, attrs,
                                                       {im.result_name(n, 0), im.result_name(n, 1)}));
  for (int i = 0; i < 2; ++i) im.define(n, i, Ref{ids[static_cast<size_t>(i)], -1});
  return ok_status();
}

// ---- reductions, pooling, resizing, convolutions ----

// The reductions, one hexir operator each (reduce_sum's family).
Result<ops::OpId> reduce_op(const NodeCtx& n) {
  static constexpr std::pair<std::string_view, ops::OpId> kReductions[] = {
      {"ReduceSum", ops::OpId::kReduceSum},
      {"ReduceMean", ops::OpId::kReduceMean},
      {"ReduceMax", ops::OpId::kReduceMax},
      {"ReduceMin", ops::OpId::kReduceMin},
      {"ReduceProd", ops::OpId::kReduceProd},
      {"ReduceL1", ops::OpId::kReduceL1},
      {"ReduceL2", ops::OpId::kReduceL2},
      {"ReduceLogSumExp", ops::OpId::kReduceLogSumExp},
      {"ReduceSumSquare", ops::OpId::kReduceSumSquare},
      {"ReduceLogSum", ops::OpId::kReduceLogSum},
  };
  for (const auto& [name, id] : kReductions)
    if (n.op == name) return id;
  return error_at(n.loc, "'" + n.op + "' is not a reduction");
}

namespace {

// A reduction of a value with a bounded dim. Over it: the stored rows with
// the padding set to the reduction's identity (a mean divides the sum by
// the actual count). Over other dims: the plain reduction of the stored
// rows, its result bounded again at the extent.
Status reduce_bounded(Importer& im, const NodeCtx& n, ops::OpId id, Ref x, std::vector<int64_t> axes,
                      bool keepdims, const ops::AttrMap& attrs) {
  const Info xi = im.info(x);
  const int64_t rank = static_cast<int64_t>(xi.dims.size());
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  for (int64_t& a : axes) {
    HEXIR_ASSIGN_OR_RETURN(a, norm_axis(n, a, xi.dims.size(), "axes"));
  }
  const bool across = std::find(axes.begin(), axes.end(), int64_t{xi.bounded}) != axes.end();
  if (!across) {
    HEXIR_ASSIGN_OR_RETURN(Ref plain, unbound_rows(im, n, x, RowPadding::kZero));
    HEXIR_ASSIGN_OR_RETURN(Ref y, im.emit1(n, id, {plain}, attrs, im.helper_name(n, "rows")));
    int dim = xi.bounded;
    if (!keepdims)
      for (int64_t a : axes) dim -= a < xi.bounded ? 1 : 0;
    HEXIR_ASSIGN_OR_RETURN(Ref r, bound_rows(im, n, y, dim, extent_of(im, x), im.result_name(n)));
    im.define(n, 0, r);
    return ok_status();
  }
  RowPadding pad = RowPadding::kZero;  // sums, L1, L2, sum of squares, log of the sum
  if (id == ops::OpId::kReduceMax || id == ops::OpId::kReduceLogSumExp) pad = RowPadding::kLowest;
  if (id == ops::OpId::kReduceMin) pad = RowPadding::kHighest;
  if (id == ops::OpId::kReduceProd) pad = RowPadding::kOne;
  HEXIR_ASSIGN_OR_RETURN(Ref plain, unbound_rows(im, n, x, pad));
  if (id != ops::OpId::kReduceMean) return im.emit_result(n, id, {plain}, attrs);
  if (xi.type != kFloat && xi.type != kFloat16 && xi.type != kBFloat16)
    return error_at(n.loc, "a mean across a bounded dim of " + onnx_type_name(xi.type) + " is not supported");
  HEXIR_ASSIGN_OR_RETURN(Ref sum, im.emit1(n, ops::OpId::kReduceSum, {plain}, attrs, im.helper_name(n, "sum")));
  int64_t others = 1;  // the reduced elements per bounded row
  for (int64_t a : axes) others *= a == xi.bounded ? 1 : xi.dims[static_cast<size_t>(a)];
  Ref per_row = im.scalar_const(static_cast<double>(others), kInt64, im.helper_name(n, "per_row"), n.loc);
  HEXIR_ASSIGN_OR_RETURN(Ref count, im.emit1(n, ops::OpId::kMul, {extent_of(im, x), per_row}, {},
                                             im.helper_name(n, "count")));
  ops::AttrMap to;
  to["to"] = ops::AttrValue{std::string(dtype_name(im.builder().value(sum.value).type.dtype))};
  HEXIR_ASSIGN_OR_RETURN(Ref divisor, im.emit1(n, ops::OpId::kCast, {count}, to, im.helper_name(n, "divisor")));
  return im.emit_result(n, ops::OpId::kDiv, {sum, divisor}, {});
}

}  // namespace

Status op_reduce(Importer& im, const NodeCtx& n) {
  HEXIR_ASSIGN_OR_RETURN(const ops::OpId id, reduce_op(n));
  const bool axes_input = n.op == "ReduceSum" ? im.opset() >= 13 : im.opset() >= 18;  // the others: 18
  if (axes_input) {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"keepdims", "noop_with_empty_axes"}));
  } else {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"keepdims", "axes"}));
  }
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t keepdims, im.attr_int(n, "keepdims", 1));
  HEXIR_ASSIGN_OR_RETURN(int64_t noop, im.attr_int(n, "noop_with_empty_axes", 0));
  std::vector<int64_t> axes;
  if (axes_input) {
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> a, im.optional_input(n, 1));
    if (a) {
      HEXIR_ASSIGN_OR_RETURN(axes, im.const_ints(n, *a, 1, "axes"));
    }
  } else {
    HEXIR_ASSIGN_OR_RETURN(auto a, im.attr_ints(n, "axes"));
    if (a) axes = *a;
  }
  if (axes.empty() && noop) {
    im.define(n, 0, x);
    return ok_status();
  }
  ops::AttrMap attrs;
  if (!axes.empty()) attrs["axes"] = int_list(axes);
  attrs["keepdims"] = ops::AttrValue{keepdims ? int64_t{1} : int64_t{0}};
  if (im.info(x).bounded >= 0) return reduce_bounded(im, n, id, x, axes, keepdims != 0, attrs);
  return im.emit_result(n, id, {x}, attrs);
}

// MaxPool/AveragePool, 2-D (1-D as a 2-D view): @max_pool/@average_pool
// when this build has them; the attributes pass through (ONNX's own).
Status op_pool(Importer& im, const NodeCtx& n) {
  const bool is_max = n.op == "MaxPool";
  if (is_max) {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(
        n, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}));
  } else {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(
        n, {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"}));
  }
  HEXIR_RETURN_IF_ERROR(im.only_first_outputs(n, 1));
  HEXIR_ASSIGN_OR_RETURN(int64_t storage_order, im.attr_int(n, "storage_order", 0));
  if (storage_order != 0) return error_at(n.loc, "storage_order 1 is not supported by the ONNX importer");
  HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, is_max ? "max_pool" : "average_pool"));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const Info xi = im.info(x);
  if (xi.dims.size() != 4 && xi.dims.size() != 3)
    return error_at(n.loc,
                    "a " + std::to_string(static_cast<int64_t>(xi.dims.size()) - 2) +
                        "-D pooling is not supported by the ONNX importer (only 1-D and 2-D); the input is " +
                        shape_text(xi.dims));
  const bool one_d = xi.dims.size() == 3;
  // 1-D: the spatial lists get a leading 1 (pads [b, e] -> [0, b, 0, e]).
  auto widen = [&](const char* name, int64_t fill, bool pads) -> Result<std::optional<std::vector<int64_t>>> {
    HEXIR_ASSIGN_OR_RETURN(auto v, im.attr_ints(n, name));
    if (!v || !one_d) return v;
    if (pads) {
      if (v->size() != 2) return error_at(n.loc, "attribute 'pads' needs 2 values for a 1-D pool");
      return std::optional<std::vector<int64_t>>(std::vector<int64_t>{0, (*v)[0], 0, (*v)[1]});
    }
    if (v->size() != 1)
      return error_at(n.loc, "attribute '" + std::string(name) + "' needs 1 value for a 1-D pool");
    return std::optional<std::vector<int64_t>>(std::vector<int64_t>{fill, (*v)[0]});
  };
  ops::AttrMap attrs;
  for (const char* name : {"kernel_shape", "strides", "dilations", "pads"}) {
    HEXIR_ASSIGN_OR_RETURN(auto v, widen(name, 1, std::string_view(name) == "pads"));
    if (v) attrs[name] = int_list(*v);
  }
  if (!attrs.count("kernel_shape")) return error_at(n.loc, "attribute 'kernel_shape' is missing");
  for (const char* name : {"ceil_mode", "count_include_pad"}) {
    HEXIR_ASSIGN_OR_RETURN(int64_t v, im.attr_int(n, name, 0));
    if (v) attrs[name] = ops::AttrValue{v};
  }
  HEXIR_ASSIGN_OR_RETURN(std::string auto_pad, im.attr_string(n, "auto_pad", "NOTSET"));
  if (auto_pad != "NOTSET") attrs["auto_pad"] = ops::AttrValue{auto_pad};
  if (one_d) {
    HEXIR_ASSIGN_OR_RETURN(
        x, im.reshape(n, x, {xi.dims[0], xi.dims[1], 1, xi.dims[2]}, im.helper_name(n, "x2d")));
  }
  HEXIR_ASSIGN_OR_RETURN(
      Ref r, im.emit1(n, id, {x}, attrs, one_d ? im.helper_name(n, "pool2d") : im.result_name(n)));
  if (one_d) {
    const std::vector<int64_t> dims = im.info(r).dims;
    HEXIR_ASSIGN_OR_RETURN(r, im.reshape(n, r, {dims[0], dims[1], dims[3]}, im.result_name(n)));
  }
  im.define(n, 0, r);
  return ok_status();
}

// Resize (opset 10+) and Upsample (7-9): the H and W of [N,C,H,W], scales or
// sizes known at import. Before opset 11 coordinates are asymmetric and
// nearest takes the floor going up (onnxruntime's legacy rule).
Status op_resize(Importer& im, const NodeCtx& n) {
  const bool legacy = n.op == "Upsample" || im.opset() < 11;
  if (legacy) {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"mode", "scales"}));
  } else {
    HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"mode", "coordinate_transformation_mode", "nearest_mode",
                                          "cubic_coeff_a", "exclude_outside", "extrapolation_value",
                                          "antialias", "axes", "keep_aspect_ratio_policy"}));
  }
  HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, "resize"));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const Info xi = im.info(x);
  if (xi.dims.size() != 4)
    return error_at(n.loc,
                    "resizing a rank-" + std::to_string(xi.dims.size()) +
                        " tensor is not supported by the ONNX importer (only [N,C,H,W]); the input is " +
                        shape_text(xi.dims));
  HEXIR_ASSIGN_OR_RETURN(std::string mode, im.attr_string(n, "mode", "nearest"));
  if (mode == "bilinear") mode = "linear";  // Upsample-7's spelling
  if (mode != "nearest" && mode != "linear")
    return error_at(n.loc,
                    "mode '" + mode + "' is not supported by the ONNX importer (nearest and linear are)");
  ops::AttrMap attrs;
  attrs["mode"] = ops::AttrValue{mode};
  if (!legacy) {
    HEXIR_ASSIGN_OR_RETURN(int64_t antialias, im.attr_int(n, "antialias", 0));
    if (antialias != 0) return error_at(n.loc, "antialias is not supported by the ONNX importer");
    HEXIR_ASSIGN_OR_RETURN(auto axes, im.attr_ints(n, "axes"));
    if (axes && *axes != std::vector<int64_t>{2, 3} && *axes != std::vector<int64_t>{-2, -1})
      return error_at(n.loc, "axes " + shape_text(*axes) +
                                 " is not supported by the ONNX importer (only the last two, H and W)");
    HEXIR_ASSIGN_OR_RETURN(std::string policy, im.attr_string(n, "keep_aspect_ratio_policy", "stretch"));
    if (policy != "stretch")
      return error_at(n.loc,
                      "keep_aspect_ratio_policy '" + policy + "' is not supported by the ONNX importer");
    HEXIR_ASSIGN_OR_RETURN(std::string coordinate,
                           im.attr_string(n, "coordinate_transformation_mode", "half_pixel"));
    if (coordinate == "tf_crop_and_resize")
      return error_at(
          n.loc, "coordinate_transformation_mode 'tf_crop_and_resize' is not supported by the ONNX importer");
    attrs["coordinate_transformation_mode"] = ops::AttrValue{coordinate};
    HEXIR_ASSIGN_OR_RETURN(std::string nearest, im.attr_string(n, "nearest_mode", "round_prefer_floor"));
    if (mode == "nearest") attrs["nearest_mode"] = ops::AttrValue{nearest};
  } else {
    attrs["coordinate_transformation_mode"] = ops::AttrValue{std::string("asymmetric")};
  }
  // Scales: an attribute (Upsample-7), input 1 (Upsample-9, Resize-10) or
  // input 2 (Resize-11+, may be empty when sizes, input 3, is given).
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (n.op == "Upsample" && im.opset() < 9) {
    const auto* a = find_attribute(n.node, "scales");
    if (!a) return error_at(n.loc, "attribute 'scales' is missing");
    for (float f : a->floats()) scales.push_back(f);
  } else {
    const int scales_at = legacy ? 1 : 2;
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> sr, im.optional_input(n, scales_at));
    if (sr) {
      HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(*sr));
      if (!h)
        return error_at(n.loc, "scales (input " + std::to_string(scales_at) +
                                   ") must be a constant (computable at import); it is computed at run time");
      for (int64_t i = 0; i < h->count(); ++i) scales.push_back(h->f(i));
    }
    if (!legacy) {
      HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> zr, im.optional_input(n, 3));
      if (zr) {
        HEXIR_ASSIGN_OR_RETURN(sizes, im.const_ints(n, *zr, 3, "sizes"));
      }
    }
  }
  if (!sizes.empty()) {
    if (sizes.size() != 4 && sizes.size() != 2)
      return error_at(n.loc, "sizes " + shape_text(sizes) + " does not have one entry per resized axis");
    attrs["sizes"] = int_list(sizes);
  } else if (!scales.empty()) {
    if (scales.size() != 4 && scales.size() != 2)
      return error_at(n.loc, "scales has " + std::to_string(scales.size()) + " values, expected 4");
    if (scales.size() == 4 && (scales[0] != 1.0 || scales[1] != 1.0))
      return error_at(n.loc, "scaling N or C is not supported by the ONNX importer (only H and W)");
    std::vector<ops::AttrValue> list;
    for (double v : scales) list.push_back(ops::AttrValue{v});
    attrs["scales"] = ops::AttrValue{std::move(list)};
    if (legacy && mode == "nearest") {
      // onnxruntime before opset 11: truncation going up, ceil going down.
      const bool down_h = scales[scales.size() - 2] < 1.0, down_w = scales.back() < 1.0;
      if (down_h != down_w)
        return error_at(
            n.loc, "nearest resizing up on one axis and down on the other is not supported before opset 11");
      attrs["nearest_mode"] = ops::AttrValue{std::string(down_h ? "ceil" : "floor")};
    }
  } else {
    return error_at(n.loc, "needs scales or sizes (both are missing or empty)");
  }
  return im.emit_result(n, id, {x}, attrs);
}

// ConvTranspose (1-D as a view of 2-D); the operator lowers output_shape and auto_pad itself.
Status op_conv_transpose(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                                        "output_shape", "pads", "strides"}));
  HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, "conv_transpose"));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref w, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> bias, im.optional_input(n, 2));
  const Info xi = im.info(x), wi = im.info(w);
  if ((xi.dims.size() != 4 && xi.dims.size() != 3) || wi.dims.size() != xi.dims.size())
    return error_at(n.loc, "a transposed convolution of input " + shape_text(xi.dims) + " and weights " +
                               shape_text(wi.dims) +
                               " is not supported by the ONNX importer (only 1-D and 2-D)");
  const bool one_d = xi.dims.size() == 3;
  ops::AttrMap attrs;
  for (const char* name :
       {"strides", "dilations", "pads", "output_padding", "kernel_shape", "output_shape"}) {
    HEXIR_ASSIGN_OR_RETURN(auto v, im.attr_ints(n, name));
    if (!v) continue;
    const bool pads = std::string_view(name) == "pads";
    if (one_d) {
      const size_t want = pads ? 2 : std::string_view(name) == "output_shape" && v->size() == 3 ? 3 : 1;
      if (v->size() != want)
        return error_at(n.loc, "attribute '" + std::string(name) + "' has " + std::to_string(v->size()) +
                                   " values, expected " + std::to_string(want) + " for a 1-D convolution");
      if (pads) *v = {0, (*v)[0], 0, (*v)[1]};
      else if (want == 3) *v = {(*v)[0], (*v)[1], 1, (*v)[2]};
      else *v = {std::string_view(name) == "output_padding" ? 0 : 1, (*v)[0]};
    }
    attrs[name] = int_list(*v);
  }
  HEXIR_ASSIGN_OR_RETURN(int64_t group, im.attr_int(n, "group", 1));
  attrs["groups"] = ops::AttrValue{group};
  HEXIR_ASSIGN_OR_RETURN(std::string auto_pad, im.attr_string(n, "auto_pad", "NOTSET"));
  if (auto_pad != "NOTSET") attrs["auto_pad"] = ops::AttrValue{auto_pad};
  if (one_d) {
    HEXIR_ASSIGN_OR_RETURN(
        x, im.reshape(n, x, {xi.dims[0], xi.dims[1], 1, xi.dims[2]}, im.helper_name(n, "x2d")));
    HEXIR_ASSIGN_OR_RETURN(
        w, im.reshape(n, w, {wi.dims[0], wi.dims[1], 1, wi.dims[2]}, im.helper_name(n, "w2d")));
  }
  std::vector<Ref> operands{x, w};
  if (bias) operands.push_back(*bias);
  HEXIR_ASSIGN_OR_RETURN(
      Ref r, im.emit1(n, id, operands, attrs, one_d ? im.helper_name(n, "conv2d") : im.result_name(n)));
  if (one_d) {
    const std::vector<int64_t> dims = im.info(r).dims;
    HEXIR_ASSIGN_OR_RETURN(r, im.reshape(n, r, {dims[0], dims[1], dims[3]}, im.result_name(n)));
  }
  im.define(n, 0, r);
  return ok_status();
}

namespace {

// GlobalAveragePool / GlobalMaxPool: the reduction over the spatial dims, kept.
Status global_pool(Importer& im, const NodeCtx& n, ops::OpId reduction) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const size_t rank = im.info(x).dims.size();
  if (rank < 3) return error_at(n.loc, "input must be [N,C,...], got " + shape_text(im.info(x).dims));
  std::vector<int64_t> axes;
  for (size_t d = 2; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  ops::AttrMap attrs;
  attrs["axes"] = int_list(axes);
  attrs["keepdims"] = ops::AttrValue{int64_t{1}};
  return im.emit_result(n, reduction, {x}, attrs);
}

}  // namespace

Status op_global_average_pool(Importer& im, const NodeCtx& n) {
  return global_pool(im, n, ops::OpId::kReduceMean);
}

Status op_global_max_pool(Importer& im, const NodeCtx& n) { return global_pool(im, n, ops::OpId::kReduceMax); }

namespace {

// @group_norm of x [N, C, ...] with per-channel scale and bias [C].
Status emit_group_norm(Importer& im, const NodeCtx& n, Ref x, Ref scale, Ref bias, int64_t groups,
                       double epsilon) {
  ops::AttrMap attrs;
  attrs["groups"] = ops::AttrValue{groups};
  attrs["epsilon"] = real(static_cast<float>(epsilon));  // an ONNX float attribute
  return im.emit_result(n, ops::OpId::kGroupNorm, {x, scale, bias}, attrs);
}

// x [N, C, ...] with its dims known, C its channels.
Result<int64_t> channels_of(Importer& im, const NodeCtx& n, Ref x) {
  const Info xi = im.info(x);
  if (xi.dims.size() < 2) return error_at(n.loc, "input must be [N,C,...], got " + shape_text(xi.dims));
  return xi.dims[1];
}

}  // namespace

// InstanceNormalization: @group_norm with a group per channel.
Status op_instance_norm(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"epsilon"}));
  HEXIR_ASSIGN_OR_RETURN(double epsilon, im.attr_float(n, "epsilon", 1e-5));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref scale, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(Ref bias, im.input(n, 2));
  HEXIR_ASSIGN_OR_RETURN(int64_t channels, channels_of(im, n, x));
  return emit_group_norm(im, n, x, scale, bias, channels, epsilon);
}

// GroupNormalization: @group_norm. Opset 18's scale and bias are per group
// ([num_groups]); each is repeated over its group's channels (reshape to
// [G, 1], expand to [G, C / G], reshape to [C]); opset 21's are per channel.
Status op_group_norm(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"epsilon", "num_groups", "stash_type"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t stash, im.attr_int(n, "stash_type", 1));
  if (stash != 1)
    return error_at(n.loc, "stash_type " + std::to_string(stash) +
                               " is not supported by the ONNX importer (only 1, float)");
  HEXIR_ASSIGN_OR_RETURN(double epsilon, im.attr_float(n, "epsilon", 1e-5));
  HEXIR_ASSIGN_OR_RETURN(int64_t groups, im.attr_int(n, "num_groups", 0));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t channels, channels_of(im, n, x));
  if (groups < 1 || channels % groups != 0)
    return error_at(n.loc, "num_groups " + std::to_string(groups) + " does not divide the " +
                               std::to_string(channels) + " channels");
  Ref params[2];
  for (int i = 0; i < 2; ++i) {
    HEXIR_ASSIGN_OR_RETURN(Ref p, im.input(n, i + 1));
    const std::vector<int64_t> dims = im.info(p).dims;
    const char* what = i == 0 ? "scale" : "bias";
    if (dims == std::vector<int64_t>{groups} && groups != channels) {
      HEXIR_ASSIGN_OR_RETURN(p, im.reshape(n, p, {groups, 1}, im.helper_name(n, std::string(what) + "_groups")));
      ops::AttrMap expand;
      expand["shape"] = int_list({groups, channels / groups});
      HEXIR_ASSIGN_OR_RETURN(
          p, im.emit1(n, ops::OpId::kExpand, {p}, expand, im.helper_name(n, std::string(what) + "_repeated")));
      HEXIR_ASSIGN_OR_RETURN(p, im.reshape(n, p, {channels}, im.helper_name(n, std::string(what) + "_channels")));
    } else if (dims != std::vector<int64_t>{channels}) {
      return error_at(n.loc, std::string(what) + " has shape " + shape_text(dims) + ", expected [" +
                                 std::to_string(groups) + "] or [" + std::to_string(channels) + "]");
    }
    params[i] = p;
  }
  return emit_group_norm(im, n, x, params[0], params[1], groups, epsilon);
}

// LRN: x / (bias + alpha / size * square_sum) ^ beta, the sum over `size`
// neighbouring channels. x^2 reshaped to [N, 1, C, rest] is average-pooled
// over a (size, 1) window padded with zeros (counted: the sum / size), then
// mul, add, pow and div as written.
Status op_lrn(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"alpha", "beta", "bias", "size"}));
  HEXIR_ASSIGN_OR_RETURN(double alpha, im.attr_float(n, "alpha", 1e-4));
  HEXIR_ASSIGN_OR_RETURN(double beta, im.attr_float(n, "beta", 0.75));
  HEXIR_ASSIGN_OR_RETURN(double bias, im.attr_float(n, "bias", 1.0));
  HEXIR_ASSIGN_OR_RETURN(int64_t size, im.attr_int(n, "size", 0));
  if (size < 1) return error_at(n.loc, "attribute 'size' must be at least 1");
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const Info xi = im.info(x);
  if (xi.dims.size() < 3) return error_at(n.loc, "input must be [N,C,D1,...], got " + shape_text(xi.dims));
  const int64_t rest = product(xi.dims, 2, xi.dims.size());
  HEXIR_ASSIGN_OR_RETURN(Ref square, im.emit1(n, ops::OpId::kMul, {x, x}, {}, im.helper_name(n, "square")));
  HEXIR_ASSIGN_OR_RETURN(square,
                         im.reshape(n, square, {xi.dims[0], 1, xi.dims[1], rest}, im.helper_name(n, "square_4d")));
  ops::AttrMap pool;
  pool["kernel_shape"] = int_list({size, 1});
  pool["pads"] = int_list({(size - 1) / 2, 0, size - 1 - (size - 1) / 2, 0});
  pool["count_include_pad"] = ops::AttrValue{int64_t{1}};
  HEXIR_ASSIGN_OR_RETURN(Ref mean, im.emit1(n, ops::OpId::kAveragePool, {square}, pool, im.helper_name(n, "mean")));
  HEXIR_ASSIGN_OR_RETURN(mean, im.reshape(n, mean, xi.dims, im.helper_name(n, "mean_nd")));
  auto scalar = [&](double v, const char* what) {
    return im.scalar_const(static_cast<float>(v), xi.type, im.helper_name(n, what), n.loc);
  };
  HEXIR_ASSIGN_OR_RETURN(Ref scaled,
                         im.emit1(n, ops::OpId::kMul, {mean, scalar(alpha, "alpha")}, {}, im.helper_name(n, "scaled")));
  HEXIR_ASSIGN_OR_RETURN(Ref base,
                         im.emit1(n, ops::OpId::kAdd, {scaled, scalar(bias, "bias")}, {}, im.helper_name(n, "base")));
  HEXIR_ASSIGN_OR_RETURN(Ref divisor,
                         im.emit1(n, ops::OpId::kPow, {base, scalar(beta, "beta")}, {}, im.helper_name(n, "divisor")));
  return im.emit_result(n, ops::OpId::kDiv, {x, divisor}, {});
}

// MeanVarianceNormalization: (x - mean) / (sqrt(variance) + 1e-9) over
// `axes` (default [0, 2, 3]), as ONNX's function body; the variance as the
// mean of the squared deviations (no cancellation).
Status op_mvn(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axes"}));
  HEXIR_ASSIGN_OR_RETURN(auto axes, im.attr_ints(n, "axes"));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  const Info xi = im.info(x);
  ops::AttrMap reduce;
  reduce["axes"] = int_list(axes ? *axes : std::vector<int64_t>{0, 2, 3});
  reduce["keepdims"] = ops::AttrValue{int64_t{1}};
  HEXIR_ASSIGN_OR_RETURN(Ref mean, im.emit1(n, ops::OpId::kReduceMean, {x}, reduce, im.helper_name(n, "mean")));
  HEXIR_ASSIGN_OR_RETURN(Ref centered, im.emit1(n, ops::OpId::kSub, {x, mean}, {}, im.helper_name(n, "centered")));
  HEXIR_ASSIGN_OR_RETURN(Ref square,
                         im.emit1(n, ops::OpId::kMul, {centered, centered}, {}, im.helper_name(n, "square")));
  HEXIR_ASSIGN_OR_RETURN(Ref variance,
                         im.emit1(n, ops::OpId::kReduceMean, {square}, reduce, im.helper_name(n, "variance")));
  HEXIR_ASSIGN_OR_RETURN(Ref deviation,
                         im.emit1(n, ops::OpId::kSqrt, {variance}, {}, im.helper_name(n, "deviation")));
  Ref epsilon = im.scalar_const(1e-9, xi.type, im.helper_name(n, "epsilon"), n.loc);
  HEXIR_ASSIGN_OR_RETURN(Ref divisor,
                         im.emit1(n, ops::OpId::kAdd, {deviation, epsilon}, {}, im.helper_name(n, "divisor")));
  return im.emit_result(n, ops::OpId::kDiv, {centered, divisor}, {});
}

Status op_conv(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(
      im.check_attrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref w, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> bias, im.optional_input(n, 2));
  HEXIR_ASSIGN_OR_RETURN(Ref r, conv_of(im, n, x, w, bias, im.result_name(n)));
  im.define(n, 0, r);
  return ok_status();
}

namespace {

// A's slice [start, start + (count - 1) * step] along `axis`, folded when A is a held constant.
Result<Ref> slice_axis(Importer& im, const NodeCtx& n, Ref a, int64_t axis, int64_t start, int64_t count,
                       int64_t step, const std::string& name) {
  const Info ai = im.info(a);
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(a));
  if (h) {
    std::vector<int64_t> starts(ai.dims.size(), 0), steps(ai.dims.size(), 1), sizes = ai.dims;
    starts[static_cast<size_t>(axis)] = start;
    steps[static_cast<size_t>(axis)] = step;
    sizes[static_cast<size_t>(axis)] = count;
    im.mark_used(name);
    return im.new_const(name, slice_host(*h, starts, steps, sizes), n.loc);
  }
  ops::AttrMap attrs;
  attrs["starts"] = int_list({start});
  attrs["ends"] = int_list({start + (count - 1) * step + 1});
  attrs["axes"] = int_list({axis});
  attrs["steps"] = int_list({step});
  return im.emit1(n, ops::OpId::kSlice, {a}, attrs, name);
}

// x ([N, C, T, H, W]) as [N, T, C, H, W] frames without a transpose, when
// it is a 3-D convolution's result (Importer::conv3d_frames) or an
// elementwise map of such results of x's shape (a video ResNet's relu and
// residual add between its 3-D convolutions): the map again on the frames.
// The [N, C, T, H, W] form and its transposes are left to the dead-code pass
// when nothing else reads them. Each is made once (a residual block's input
// is read by its first convolution and its add; an input that is no such
// result is transposed once for every 3-D convolution reading it).
// At the top level only: a map made again inside a loop's or a branch's
// body would be that body's value, which a later reader outside cannot see.
std::optional<Ref> conv3d_frames_of(Importer& im, const NodeCtx& n, Ref x, int depth = 0) {
  if (x.is_const() || im.builder().open_regions() > 0) return std::nullopt;
  auto& frames = im.conv3d_frames();
  if (auto it = frames.find(x.value); it != frames.end()) return it->second;
  const Value& v = im.builder().value(x.value);
  if (depth > 8 || v.kind != ValueKind::kResult || v.node < 0) return std::nullopt;
  const Node& node = im.builder().node(v.node);
  const int arity = node.kind == NodeKind::kOp ? ops::elementwise_map_arity(node.op) : 0;
  if (arity < 1 || node.inputs.size() != static_cast<size_t>(arity) || !node.params.empty()) return std::nullopt;
  // Copies: the maps made below grow the builder's nodes and values.
  const ops::OpId op = node.op;
  const std::vector<int> operands = node.inputs;
  const Info xi = im.info(x);
  std::vector<Ref> inputs;
  for (int in : operands) {
    const Ref r{in, -1};
    const Info ri = im.info(r);
    if (ri.dims != xi.dims || ri.type != xi.type) return std::nullopt;  // no broadcast
    std::optional<Ref> f = conv3d_frames_of(im, n, r, depth + 1);
    if (!f) return std::nullopt;
    inputs.push_back(*f);
  }
  Result<Ref> y = im.emit1(n, op, inputs, {}, im.helper_name(n, "frames_map"));
  if (!y.ok()) return std::nullopt;
  frames[x.value] = *y;
  return *y;
}

// A 3-D convolution, x [N, C, T, H, W], w [K, C / groups, KT, KH, KW], as
// KT 2-D convolutions over the frames with time folded into the batch:
// output frame t sums, over kt, conv2d(input frame t * st - pt + kt * dt,
// w[:, :, kt]); frames past the ends are zeros (concatenated). The first
// carries the bias and the others a zero bias (a fill: no bytes) and add to
// it, so that the fusion pass makes each add the next convolution's residual
// (it takes one after a bias). Torchvision's video ResNets (r3d_18, mc3_18,
// r2plus1d_18) are Conv3d, batch norms folded into them, relu, add.
Result<Ref> conv3d_of(Importer& im, const NodeCtx& n, Ref x, Ref w, std::optional<Ref> bias,
                      const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                      const std::vector<int64_t>& pads, int64_t group, const std::string& name) {
  const Info xi = im.info(x), wi = im.info(w);
  const int64_t batch = xi.dims[0], c = xi.dims[1], k = wi.dims[0], kt_count = wi.dims[2];
  for (int64_t pad : pads)
    if (pad < 0) return error_at(n.loc, "a 3-D convolution's pads must be >= 0");
  if (kt_count < 1 || wi.dims[3] < 1 || wi.dims[4] < 1)
    return error_at(n.loc, "the 3-D convolution's window " + shape_text(wi.dims) + " has an empty dim");
  // Zero frames are concatenated for the time pads: no more than the window spans (a frame of pads alone
  // would be the bias), which also bounds the copies.
  const int64_t span = dilations[0] * (kt_count - 1);
  if (pads[0] > span || pads[3] > span)
    return error_at(n.loc, "the 3-D convolution's time pads " + std::to_string(pads[0]) + ", " +
                               std::to_string(pads[3]) + " are wider than its window's " +
                               std::to_string(span) + " (not supported)");
  const int64_t padded = xi.dims[2] + pads[0] + pads[3];
  const int64_t frames = (padded - span - 1) / strides[0] + 1;
  if (frames < 1)
    return error_at(n.loc, "the 3-D convolution's window (" + std::to_string(kt_count) +
                               " frames, dilation " + std::to_string(dilations[0]) + ") is longer than the " +
                               std::to_string(padded) + " padded frames of " + shape_text(xi.dims));
  std::optional<Ref> framed = conv3d_frames_of(im, n, x);
  if (!framed) {  // once for every 3-D convolution reading x
    HEXIR_ASSIGN_OR_RETURN(framed, transpose(im, n, x, {0, 2, 1, 3, 4}, im.helper_name(n, "frames")));
    if (!x.is_const() && !framed->is_const() && im.builder().open_regions() == 0) im.conv3d_frames()[x.value] = *framed;
  }
  Ref xt = *framed;
  const std::vector<uint8_t> zero(onnx_element_size(xi.type), 0);
  if (pads[0] > 0 || pads[3] > 0) {
    std::vector<Ref> parts;
    for (int64_t width : {pads[0], pads[3]}) {
      if (width == 0) continue;
      parts.push_back(im.fill_const(xi.type, {batch, width, c, xi.dims[3], xi.dims[4]}, zero,
                                    im.helper_name(n, "zero_frames"), n.loc));
    }
    parts.insert(parts.begin() + (pads[0] > 0 ? 1 : 0), xt);
    ops::AttrMap attrs;
    attrs["axis"] = ops::AttrValue{int64_t{1}};
    HEXIR_ASSIGN_OR_RETURN(xt,
                           im.emit1(n, ops::OpId::kConcat, parts, attrs, im.helper_name(n, "padded_frames")));
  }
  ops::AttrMap attrs;
  attrs["strides"] = int_list({strides[1], strides[2]});
  attrs["dilations"] = int_list({dilations[1], dilations[2]});
  attrs["pads"] = int_list({pads[1], pads[2], pads[4], pads[5]});
  attrs["groups"] = ops::AttrValue{group};
  std::optional<Ref> sum, zero_bias;  // one zero bias for the taps after the first
  for (int64_t kt = 0; kt < kt_count; ++kt) {
    const std::string tap = std::to_string(kt);
    HEXIR_ASSIGN_OR_RETURN(Ref xs, slice_axis(im, n, xt, 1, kt * dilations[0], frames, strides[0],
                                              im.helper_name(n, "frames_" + tap)));
    HEXIR_ASSIGN_OR_RETURN(xs, im.reshape(n, xs, {batch * frames, c, xi.dims[3], xi.dims[4]},
                                          im.helper_name(n, "frames2d_" + tap)));
    HEXIR_ASSIGN_OR_RETURN(Ref wk, slice_axis(im, n, w, 2, kt, 1, 1, im.helper_name(n, "w_" + tap)));
    HEXIR_ASSIGN_OR_RETURN(
        wk, im.reshape(n, wk, {k, wi.dims[1], wi.dims[3], wi.dims[4]}, im.helper_name(n, "w2d_" + tap)));
    std::vector<Ref> operands{xs, wk};
    if (kt == 0 && bias) {
      operands.push_back(*bias);
    } else if (kt > 0) {
      if (!zero_bias) zero_bias = im.fill_const(xi.type, {k}, zero, im.helper_name(n, "zero_bias"), n.loc);
      operands.push_back(*zero_bias);
    }
    HEXIR_ASSIGN_OR_RETURN(
        Ref y, im.emit1(n, ops::OpId::kConv2d, operands, attrs, im.helper_name(n, "conv2d_" + tap)));
    if (sum) {
      HEXIR_ASSIGN_OR_RETURN(y, im.emit1(n, ops::OpId::kAdd, {*sum, y}, {}, im.helper_name(n, "sum_" + tap)));
    }
    sum = y;
  }
  const std::vector<int64_t> dims = im.info(*sum).dims;  // [N * frames, K, OH, OW]
  HEXIR_ASSIGN_OR_RETURN(Ref y,
                         im.reshape(n, *sum, {batch, frames, k, dims[2], dims[3]}, im.helper_name(n, "y5d")));
  HEXIR_ASSIGN_OR_RETURN(Ref out, transpose(im, n, y, {0, 2, 1, 3, 4}, name));
  if (!out.is_const() && !y.is_const() && im.builder().open_regions() == 0) im.conv3d_frames()[out.value] = y;
  return out;
}

}  // namespace

Result<Ref> conv_of(Importer& im, const NodeCtx& n, Ref x, Ref w, std::optional<Ref> bias,
                    const std::string& name) {
  const Info xi = im.info(x), wi = im.info(w);
  if (xi.dims.size() != 4 && xi.dims.size() != 3 && xi.dims.size() != 5)
    return error_at(
        n.loc,
        "a " + std::to_string(static_cast<int64_t>(xi.dims.size()) - 2) +
            "-D convolution is not supported by the ONNX importer (only 1-D, 2-D and 3-D); the input is " +
            shape_text(xi.dims));
  if (wi.dims.size() != xi.dims.size())
    return error_at(n.loc, "weights " + shape_text(wi.dims) + " do not match the input's rank");
  const size_t spatial = xi.dims.size() - 2;
  auto list = [&](const char* name, int64_t fallback, size_t count) -> Result<std::vector<int64_t>> {
    HEXIR_ASSIGN_OR_RETURN(auto v, im.attr_ints(n, name));
    if (!v) return std::vector<int64_t>(count, fallback);
    if (v->size() != count)
      return error_at(n.loc, "attribute '" + std::string(name) + "' has " + std::to_string(v->size()) +
                                 " values, expected " + std::to_string(count));
    return *v;
  };
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> strides, list("strides", 1, spatial));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, list("dilations", 1, spatial));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> pads, list("pads", 0, 2 * spatial));
  HEXIR_ASSIGN_OR_RETURN(int64_t group, im.attr_int(n, "group", 1));
  HEXIR_ASSIGN_OR_RETURN(auto kernel, im.attr_ints(n, "kernel_shape"));
  const std::vector<int64_t> kdims(wi.dims.begin() + 2, wi.dims.end());
  if (kernel && *kernel != kdims)
    return error_at(
        n.loc, "kernel_shape " + shape_text(*kernel) + " does not match the weights " + shape_text(wi.dims));
  HEXIR_ASSIGN_OR_RETURN(std::string auto_pad, im.attr_string(n, "auto_pad", "NOTSET"));
  for (int64_t v : strides)
    if (v < 1) return error_at(n.loc, "strides must be >= 1");
  for (int64_t v : dilations)
    if (v < 1) return error_at(n.loc, "dilations must be >= 1");
  if (auto_pad == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t d = 0; d < spatial; ++d) {
      const int64_t in = xi.dims[2 + d], s = strides[d];
      const int64_t out = (in + s - 1) / s;
      const int64_t window = (kdims[d] - 1) * dilations[d] + 1;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + window - in);
      const int64_t small = total / 2, large = total - small;
      pads[d] = auto_pad == "SAME_UPPER" ? small : large;
      pads[spatial + d] = auto_pad == "SAME_UPPER" ? large : small;
    }
  } else if (auto_pad != "NOTSET") {
    return error_at(n.loc, "auto_pad '" + auto_pad + "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  }
  if (spatial == 3) return conv3d_of(im, n, x, w, bias, strides, dilations, pads, group, name);
  std::vector<int64_t> stride2 = strides, dil2 = dilations, pad2;
  if (spatial == 1) {  // [N,C,L] as [N,C,1,L]
    stride2 = {1, strides[0]};
    dil2 = {1, dilations[0]};
    pad2 = {0, pads[0], 0, pads[1]};
    HEXIR_ASSIGN_OR_RETURN(
        x, im.reshape(n, x, {xi.dims[0], xi.dims[1], 1, xi.dims[2]}, im.helper_name(n, "x2d")));
    HEXIR_ASSIGN_OR_RETURN(
        w, im.reshape(n, w, {wi.dims[0], wi.dims[1], 1, wi.dims[2]}, im.helper_name(n, "w2d")));
  } else {
    pad2 = pads;
  }
  ops::AttrMap attrs;
  attrs["strides"] = int_list(stride2);
  attrs["dilations"] = int_list(dil2);
  attrs["pads"] = int_list(pad2);
  attrs["groups"] = ops::AttrValue{group};
  std::vector<Ref> operands{x, w};
  if (bias) operands.push_back(*bias);
  HEXIR_ASSIGN_OR_RETURN(Ref r, im.emit1(n, ops::OpId::kConv2d, operands, attrs,
                                      spatial == 1 ? im.helper_name(n, "conv2d") : name));
  if (spatial == 1) {
    const std::vector<int64_t> dims = im.info(r).dims;
    HEXIR_ASSIGN_OR_RETURN(r, im.reshape(n, r, {dims[0], dims[1], dims[3]}, name));
  }
  return r;
}

// ---- CumSum, the losses ----------------------------------------------------------

Status op_cumsum(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"exclusive", "reverse"}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref a, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> axis, im.const_ints(n, a, 1, "axis"));
  if (axis.size() != 1) return error_at(n.loc, "axis (input 1) must hold one integer");
  HEXIR_ASSIGN_OR_RETURN(int64_t exclusive, im.attr_int(n, "exclusive", 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t reverse, im.attr_int(n, "reverse", 0));
  ops::AttrMap attrs;
  attrs["axis"] = ops::AttrValue{axis[0]};
  attrs["exclusive"] = ops::AttrValue{exclusive};
  attrs["reverse"] = ops::AttrValue{reverse};
  return im.emit_result(n, ops::OpId::kCumSum, {x}, attrs);
}

namespace {

// A scalar constant of ONNX type `type` holding `v`.
Ref scalar_of(Importer& im, const NodeCtx& n, int32_t type, int64_t v, const std::string& what) {
  HostTensor h = make_host(type, {});
  h.set_i(0, v);
  return im.new_const(im.helper_name(n, what), std::move(h), n.loc);
}

// The loss of each element: -log_prob[n, target, d...] * weight[target],
// 0 where target is ignore_index, then the reduction (ONNX's reference:
// mean divides by the sum of the weights taken, which are 1 without
// weights and 0 at ignored targets). log_prob [N, C, d...], target [N, d...].
Status negative_log_likelihood(Importer& im, const NodeCtx& n, Ref log_prob, Ref target,
                               std::optional<Ref> weight) {
  HEXIR_ASSIGN_OR_RETURN(std::string reduction, im.attr_string(n, "reduction", "mean"));
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return error_at(n.loc, "reduction '" + reduction + "' is not none, sum or mean");
  const Info li = im.info(log_prob), ti = im.info(target);
  bool fits = li.dims.size() >= 2 && ti.dims.size() + 1 == li.dims.size() && li.dims[0] == ti.dims[0];
  for (size_t d = 1; fits && d < ti.dims.size(); ++d) fits = ti.dims[d] == li.dims[d + 1];
  if (!fits)
    return error_at(n.loc, "target " + shape_text(ti.dims) + " does not match input " + shape_text(li.dims) +
                               " ([N, C, d...] and [N, d...])");
  std::optional<Ref> kept;  // bool: the target is not ignore_index
  Ref t = target;
  if (find_attribute(n.node, "ignore_index")) {
    HEXIR_ASSIGN_OR_RETURN(int64_t ignore, im.attr_int(n, "ignore_index", 0));
    Ref ii = scalar_of(im, n, ti.type, ignore, "ignore_index");
    HEXIR_ASSIGN_OR_RETURN(Ref ignored,
                           im.emit1(n, ops::OpId::kEqual, {t, ii}, {}, im.helper_name(n, "ignored")));
    HEXIR_ASSIGN_OR_RETURN(kept, im.emit1(n, ops::OpId::kNot, {ignored}, {}, im.helper_name(n, "kept")));
    // An ignored target may lie outside [0, C): it reads class 0 instead, then counts nothing.
    Ref first = scalar_of(im, n, ti.type, 0, "class0");
    HEXIR_ASSIGN_OR_RETURN(
        t, im.emit1(n, ops::OpId::kWhere, {*kept, t, first}, {}, im.helper_name(n, "target")));
  }
  std::vector<int64_t> column = ti.dims;
  column.insert(column.begin() + 1, 1);
  HEXIR_ASSIGN_OR_RETURN(Ref t1, im.reshape(n, t, column, im.helper_name(n, "target_column")));
  ops::AttrMap class_axis;
  class_axis["axis"] = ops::AttrValue{int64_t{1}};
  HEXIR_ASSIGN_OR_RETURN(Ref picked, im.emit1(n, ops::OpId::kGatherElements, {log_prob, t1}, class_axis,
                                              im.helper_name(n, "picked")));
  HEXIR_ASSIGN_OR_RETURN(picked, im.reshape(n, picked, ti.dims, im.helper_name(n, "picked_flat")));
  HEXIR_ASSIGN_OR_RETURN(Ref loss, im.emit1(n, ops::OpId::kNeg, {picked}, {}, im.helper_name(n, "neg")));
  Ref zero = im.new_const(im.helper_name(n, "zero"), make_host(li.type, {}), n.loc);
  std::optional<Ref> taken;  // the weight of each element, when not all 1
  if (weight) {
    ops::AttrMap first_axis;
    first_axis["axis"] = ops::AttrValue{int64_t{0}};
    HEXIR_ASSIGN_OR_RETURN(
        taken, im.emit1(n, ops::OpId::kGather, {*weight, t}, first_axis, im.helper_name(n, "weights")));
    if (kept) {
      HEXIR_ASSIGN_OR_RETURN(taken, im.emit1(n, ops::OpId::kWhere, {*kept, *taken, zero}, {},
                                             im.helper_name(n, "weights_kept")));
    }
    HEXIR_ASSIGN_OR_RETURN(loss,
                           im.emit1(n, ops::OpId::kMul, {*taken, loss}, {}, im.helper_name(n, "weighted")));
  } else if (kept) {
    ops::AttrMap to;
    to["to"] = ops::AttrValue{std::string(dtype_name(*dtype_from_onnx(li.type)))};
    HEXIR_ASSIGN_OR_RETURN(taken, im.emit1(n, ops::OpId::kCast, {*kept}, to, im.helper_name(n, "weights")));
    HEXIR_ASSIGN_OR_RETURN(loss,
                           im.emit1(n, ops::OpId::kMul, {*taken, loss}, {}, im.helper_name(n, "weighted")));
  }
  if (reduction == "none") {
    im.define(n, 0, loss);
    return ok_status();
  }
  ops::AttrMap all;
  all["keepdims"] = ops::AttrValue{int64_t{0}};
  if (reduction == "mean" && !taken) return im.emit_result(n, ops::OpId::kReduceMean, {loss}, all);
  if (reduction == "sum") return im.emit_result(n, ops::OpId::kReduceSum, {loss}, all);
  HEXIR_ASSIGN_OR_RETURN(Ref total,
                         im.emit1(n, ops::OpId::kReduceSum, {loss}, all, im.helper_name(n, "total")));
  HEXIR_ASSIGN_OR_RETURN(Ref weights,
                         im.emit1(n, ops::OpId::kReduceSum, {*taken}, all, im.helper_name(n, "weight_sum")));
  return im.emit_result(n, ops::OpId::kDiv, {total, weights}, {});
}

// log(softmax(x)) along axis 1.
Result<Ref> log_softmax_classes(Importer& im, const NodeCtx& n, Ref x, const std::string& name) {
  ops::AttrMap axis;
  axis["axis"] = ops::AttrValue{int64_t{1}};
  return im.emit1(n, ops::OpId::kLogSoftmax, {x}, axis, name);
}

}  // namespace

Status op_nll_loss(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"reduction", "ignore_index"}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref target, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> weight, im.optional_input(n, 2));
  return negative_log_likelihood(im, n, x, target, weight);
}

// SoftmaxCrossEntropyLoss: the log-probabilities (output 1 when asked for),
// then NegativeLogLikelihoodLoss over them.
Status op_softmax_cross_entropy(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"reduction", "ignore_index"}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref target, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> weight, im.optional_input(n, 2));
  const bool wants_log_prob = !im.out_name(n, 1).empty();
  HEXIR_ASSIGN_OR_RETURN(
      Ref log_prob,
      log_softmax_classes(im, n, x, wants_log_prob ? im.result_name(n, 1) : im.helper_name(n, "log_prob")));
  if (wants_log_prob) im.define(n, 1, log_prob);
  return negative_log_likelihood(im, n, log_prob, target, weight);
}

}  // namespace hexir::compiler::onnx_import
