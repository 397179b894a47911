// Operators whose result size is data (docs/design-notes.md): NonZero,
// NonMaxSuppression and Compress become operators with a bounded dim, the
// buffer planned at the bound and the actual extent a second result the
// importer keeps to itself (the builder ties it to the value).
#include <algorithm>
#include <cmath>
#include <limits>

#include "handlers.h"

namespace hexir::compiler::onnx_import {

namespace {

// `op` on `inputs` as the node's output 0; its count result gets a helper name.
Status emit_bounded(Importer& im, const NodeCtx& n, ops::OpId op, const std::vector<Ref>& inputs,
                    const ops::AttrMap& attrs) {
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
  ops::AttrMap attrs;
  attrs["center_point_box"] = ops::AttrValue{center};
  attrs["max_output_boxes_per_class"] = ops::AttrValue{per_class};
  return emit_bounded(im, n, ops::OpId::kNonMaxSuppression, {boxes, scores, k, t, s}, attrs);
}

}  // namespace hexir::compiler::onnx_import
