// QDQ and the quantized operators: QuantizeLinear and DequantizeLinear
// (opset 10-19: per tensor and per axis, int8 and uint8 zero points; i32 to
// dequantize), DynamicQuantizeLinear, and QLinearMatMul, QLinearConv,
// MatMulInteger, ConvInteger composed from them around the float operator
// (dequantize, compute in f32, quantize). A large int8 constant that is
// dequantized (a weight) stays int8 in the file: its dequantize_linear runs
// at run time, never folded into an f32 copy four times its size.
#include <cstring>

#include "frontends/onnx/handlers.h"

namespace hexir::compiler::onnx_import {
namespace {

// Integer constants up to this many elements are dequantized at compile time
// (biases, zero points); larger ones and 8-bit matrices of any size
// (weights: the integer convolutions read them as they are, passes/quantized.h)
// are kept as they are stored.
constexpr int64_t kFoldedDequantizeMax = 1024;

bool is_8bit(int32_t type) { return type == kInt8 || type == kUint8; }

// Input `i` when present, else a zero of `type` shaped like `scale` (ONNX's
// default zero point).
Result<Ref> zero_point(Importer& im, const NodeCtx& n, int i, Ref scale, int32_t type) {
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> z, im.optional_input(n, i));
  if (z) {
    if (im.info(*z).type != type)
      return error_at(n.loc, "zero point (input " + std::to_string(i) + ") is " + onnx_type_name(im.info(*z).type) +
                                 ", expected " + onnx_type_name(type));
    return *z;
  }
  return im.fill_const(type, im.info(scale).dims, std::vector<uint8_t>(onnx_element_size(type), 0),
                       im.helper_name(n, "zero_point"), n.loc);
}

// A scale of ones shaped like `like` (the integer operators' unscaled inputs).
Ref ones_like(Importer& im, const NodeCtx& n, Ref like) {
  const float one = 1.0f;
  std::vector<uint8_t> bytes(4);
  std::memcpy(bytes.data(), &one, 4);
  return im.fill_const(kFloat, im.info(like).dims, std::move(bytes), im.helper_name(n, "unit_scale"), n.loc);
}

Status check_scale(const NodeCtx& n, const Info& scale, int i) {
  if (scale.type != kFloat)
    return error_at(n.loc, "scale (input " + std::to_string(i) + ") is " + onnx_type_name(scale.type) +
                               "; only f32 scales are supported");
  if (scale.dims.size() > 1)
    return error_at(n.loc, "scale (input " + std::to_string(i) + ") " + shape_text(scale.dims) +
                               " is neither a scalar nor 1-D (blocked quantization is not supported)");
  return ok_status();
}

// dequantize_linear(x, scale, zero) {axis}: at run time when x is a large
// int8 constant (kept int8 in the file), folded when small or computed.
Result<Ref> dequantize(Importer& im, const NodeCtx& n, Ref x, Ref scale, Ref zero, int64_t axis,
                       const std::string& name) {
  const Info xi = im.info(x);
  if (!is_8bit(xi.type) && xi.type != kInt32)
    return error_at(n.loc, "cannot dequantize " + onnx_type_name(xi.type) + " (int8, uint8 and int32 only)");
  ops::AttrMap attrs;
  attrs["axis"] = ops::AttrValue{axis};
  if (x.is_const() && is_8bit(xi.type) && (xi.count() > kFoldedDequantizeMax || xi.dims.size() >= 2)) {
    HEXIR_ASSIGN_OR_RETURN(std::vector<int> ids, im.emit(n, ops::OpId::kDequantizeLinear, {x, scale, zero}, attrs, {name}));
    return Ref{ids[0], -1};
  }
  return im.emit1(n, ops::OpId::kDequantizeLinear, {x, scale, zero}, attrs, name);
}

Result<Ref> quantize(Importer& im, const NodeCtx& n, Ref x, Ref scale, Ref zero, int64_t axis,
                     const std::string& name) {
  if (!is_8bit(im.info(zero).type))
    return error_at(n.loc, "cannot quantize to " + onnx_type_name(im.info(zero).type) + " (int8 and uint8 only)");
  if (im.info(x).type != kFloat)
    return error_at(n.loc, "cannot quantize " + onnx_type_name(im.info(x).type) + " (f32 only)");
  ops::AttrMap attrs;
  attrs["axis"] = ops::AttrValue{axis};
  return im.emit1(n, ops::OpId::kQuantizeLinear, {x, scale, zero}, attrs, name);
}

// Inputs `first` (x), first + 1 (scale), first + 2 (zero point) dequantized
// along `axis` (per tensor when the scale holds one element).
Result<Ref> dequantized_input(Importer& im, const NodeCtx& n, int first, int64_t axis, const std::string& what) {
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, first));
  HEXIR_ASSIGN_OR_RETURN(Ref scale, im.input(n, first + 1));
  HEXIR_RETURN_IF_ERROR(check_scale(n, im.info(scale), first + 1));
  HEXIR_ASSIGN_OR_RETURN(Ref zero, zero_point(im, n, first + 2, scale, im.info(x).type));
  return dequantize(im, n, x, scale, zero, axis, im.helper_name(n, what));
}

// An integer operator's input `i` minus its zero point (input `zero_input`,
// optional) as f32: dequantized with unit scales, exact.
Result<Ref> unscaled_input(Importer& im, const NodeCtx& n, int i, int zero_input, int64_t axis,
                           const std::string& what) {
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, i));
  if (!is_8bit(im.info(x).type))
    return error_at(n.loc, "input " + std::to_string(i) + " is " + onnx_type_name(im.info(x).type) +
                               ", expected int8 or uint8");
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> z, im.optional_input(n, zero_input));
  const Ref scale = z ? ones_like(im, n, *z) : im.scalar_const(1.0, kFloat, im.helper_name(n, "unit_scale"), n.loc);
  HEXIR_ASSIGN_OR_RETURN(Ref zero, zero_point(im, n, zero_input, scale, im.info(x).type));
  // A zero point of one element per row or column: along `axis`; a scalar: per tensor.
  return dequantize(im, n, x, scale, zero, im.info(zero).count() == 1 ? 0 : axis, im.helper_name(n, what));
}

// The axis a per-row (left operand) or per-column (right operand) scale of
// a matmul runs along.
int64_t matmul_axis(const Info& operand, bool right) {
  const int64_t rank = static_cast<int64_t>(operand.dims.size());
  return right ? rank - 1 : std::max<int64_t>(rank - 2, 0);
}

// The QLinear operators' result: f32 `y` quantized by y_scale (input 6) and
// y_zero_point (input 7, default a zero of `type`) as the node's output.
Status define_requantized(Importer& im, const NodeCtx& n, Ref y, int32_t type) {
  HEXIR_ASSIGN_OR_RETURN(Ref y_scale, im.input(n, 6));
  HEXIR_RETURN_IF_ERROR(check_scale(n, im.info(y_scale), 6));
  HEXIR_ASSIGN_OR_RETURN(Ref y_zero, zero_point(im, n, 7, y_scale, type));
  HEXIR_ASSIGN_OR_RETURN(Ref r, quantize(im, n, y, y_scale, y_zero, 0, im.result_name(n)));
  im.define(n, 0, r);
  return ok_status();
}

}  // namespace

Status op_dequantize_linear(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis", "block_size"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t block_size, im.attr_int(n, "block_size", 0));
  if (block_size != 0) return error_at(n.loc, "blocked quantization (block_size) is not supported");
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, im.attr_int(n, "axis", 1));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref scale, im.input(n, 1));
  HEXIR_RETURN_IF_ERROR(check_scale(n, im.info(scale), 1));
  HEXIR_ASSIGN_OR_RETURN(Ref zero, zero_point(im, n, 2, scale, im.info(x).type));
  HEXIR_ASSIGN_OR_RETURN(Ref r, dequantize(im, n, x, scale, zero, axis, im.result_name(n)));
  im.define(n, 0, r);
  return ok_status();
}

Status op_quantize_linear(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"axis", "saturate", "block_size", "output_dtype"}));
  HEXIR_ASSIGN_OR_RETURN(int64_t block_size, im.attr_int(n, "block_size", 0));
  if (block_size != 0) return error_at(n.loc, "blocked quantization (block_size) is not supported");
  HEXIR_ASSIGN_OR_RETURN(int64_t output_dtype, im.attr_int(n, "output_dtype", 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t axis, im.attr_int(n, "axis", 1));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref scale, im.input(n, 1));
  HEXIR_RETURN_IF_ERROR(check_scale(n, im.info(scale), 1));
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> given, im.optional_input(n, 2));
  const int32_t type = given ? im.info(*given).type : output_dtype ? static_cast<int32_t>(output_dtype) : kUint8;
  HEXIR_ASSIGN_OR_RETURN(Ref zero, zero_point(im, n, 2, scale, type));
  HEXIR_ASSIGN_OR_RETURN(Ref r, quantize(im, n, x, scale, zero, axis, im.result_name(n)));
  im.define(n, 0, r);
  return ok_status();
}

// y_scale = (max(x, 0) - min(x, 0)) / 255, y_zero_point = round(-min / scale)
// saturated to uint8 (a quantize_linear of -min), y = quantize_linear(x).
Status op_dynamic_quantize_linear(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, im.input(n, 0));
  if (im.info(x).type != kFloat) return error_at(n.loc, "x is " + onnx_type_name(im.info(x).type) + ", expected f32");
  using ops::OpId;
  const ops::AttrMap all;  // every axis, keepdims 0
  Ref zero_f = im.scalar_const(0.0, kFloat, im.helper_name(n, "zero"), n.loc);
  HEXIR_ASSIGN_OR_RETURN(Ref lo, im.emit1(n, OpId::kReduceMin, {x}, all, im.helper_name(n, "min")));
  HEXIR_ASSIGN_OR_RETURN(lo, im.emit1(n, OpId::kMinimum, {lo, zero_f}, {}, im.helper_name(n, "min0")));
  HEXIR_ASSIGN_OR_RETURN(Ref hi, im.emit1(n, OpId::kReduceMax, {x}, all, im.helper_name(n, "max")));
  HEXIR_ASSIGN_OR_RETURN(hi, im.emit1(n, OpId::kMaximum, {hi, zero_f}, {}, im.helper_name(n, "max0")));
  HEXIR_ASSIGN_OR_RETURN(Ref range, im.emit1(n, OpId::kSub, {hi, lo}, {}, im.helper_name(n, "range")));
  Ref levels = im.scalar_const(255.0, kFloat, im.helper_name(n, "levels"), n.loc);
  HEXIR_ASSIGN_OR_RETURN(Ref scale, im.emit1(n, OpId::kDiv, {range, levels}, {}, im.result_name(n, 1)));
  HEXIR_ASSIGN_OR_RETURN(Ref neg_lo, im.emit1(n, OpId::kNeg, {lo}, {}, im.helper_name(n, "neg_min")));
  Ref no_zero = im.fill_const(kUint8, {}, {0}, im.helper_name(n, "u8_zero"), n.loc);
  HEXIR_ASSIGN_OR_RETURN(Ref zero, quantize(im, n, neg_lo, scale, no_zero, 0, im.result_name(n, 2)));
  HEXIR_ASSIGN_OR_RETURN(Ref y, quantize(im, n, x, scale, zero, 0, im.result_name(n, 0)));
  im.define(n, 0, y);
  im.define(n, 1, scale);
  im.define(n, 2, zero);
  return ok_status();
}

// a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
Status op_qlinear_matmul(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref a_q, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref b_q, im.input(n, 3));
  HEXIR_ASSIGN_OR_RETURN(Ref a, dequantized_input(im, n, 0, matmul_axis(im.info(a_q), false), "a"));
  HEXIR_ASSIGN_OR_RETURN(Ref b, dequantized_input(im, n, 3, matmul_axis(im.info(b_q), true), "b"));
  HEXIR_ASSIGN_OR_RETURN(Ref y, im.emit1(n, ops::OpId::kMatmul, {a, b}, {}, im.helper_name(n, "matmul")));
  return define_requantized(im, n, y, im.info(a_q).type);
}

// x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point,
// B (int32, scaled by x_scale * w_scale).
Status op_qlinear_conv(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(
      im.check_attrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  HEXIR_ASSIGN_OR_RETURN(Ref x_q, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref x, dequantized_input(im, n, 0, 1, "x"));
  HEXIR_ASSIGN_OR_RETURN(Ref w, dequantized_input(im, n, 3, 0, "w"));  // per output channel
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> b_q, im.optional_input(n, 8));
  std::optional<Ref> bias;
  if (b_q) {
    HEXIR_ASSIGN_OR_RETURN(Ref x_scale, im.input(n, 1));
    HEXIR_ASSIGN_OR_RETURN(Ref w_scale, im.input(n, 4));
    HEXIR_ASSIGN_OR_RETURN(Ref b_scale,
                           im.emit1(n, ops::OpId::kMul, {x_scale, w_scale}, {}, im.helper_name(n, "bias_scale")));
    Ref b_zero = im.fill_const(kInt32, im.info(b_scale).dims, std::vector<uint8_t>(4, 0),
                               im.helper_name(n, "bias_zero"), n.loc);
    HEXIR_ASSIGN_OR_RETURN(bias, dequantize(im, n, *b_q, b_scale, b_zero, 0, im.helper_name(n, "bias")));
  }
  HEXIR_ASSIGN_OR_RETURN(Ref y, conv_of(im, n, x, w, bias, im.helper_name(n, "conv")));
  return define_requantized(im, n, y, im.info(x_q).type);
}

// A, B, a_zero_point (scalar or per row), b_zero_point (scalar or per
// column) -> int32 (A - a_zp) x (B - b_zp). Summed in f32: exact while the
// sums stay below 2^24 in magnitude (integer kernels are the next step).
Status op_matmul_integer(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {}));
  HEXIR_ASSIGN_OR_RETURN(Ref a_q, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(Ref b_q, im.input(n, 1));
  HEXIR_ASSIGN_OR_RETURN(Ref a, unscaled_input(im, n, 0, 2, matmul_axis(im.info(a_q), false), "a"));
  HEXIR_ASSIGN_OR_RETURN(Ref b, unscaled_input(im, n, 1, 3, matmul_axis(im.info(b_q), true), "b"));
  HEXIR_ASSIGN_OR_RETURN(Ref y, im.emit1(n, ops::OpId::kMatmul, {a, b}, {}, im.helper_name(n, "matmul")));
  ops::AttrMap to_i32;
  to_i32["to"] = ops::AttrValue{std::string("i32")};
  return im.emit_result(n, ops::OpId::kCast, {y}, to_i32);
}

// x, w, x_zero_point (scalar), w_zero_point (scalar or per output channel) -> int32.
Status op_conv_integer(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(
      im.check_attrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  HEXIR_ASSIGN_OR_RETURN(Ref x, unscaled_input(im, n, 0, 2, 1, "x"));
  HEXIR_ASSIGN_OR_RETURN(Ref w, unscaled_input(im, n, 1, 3, 0, "w"));
  HEXIR_ASSIGN_OR_RETURN(Ref y, conv_of(im, n, x, w, std::nullopt, im.helper_name(n, "conv")));
  ops::AttrMap to_i32;
  to_i32["to"] = ops::AttrValue{std::string("i32")};
  return im.emit_result(n, ops::OpId::kCast, {y}, to_i32);
}

}  // namespace hexir::compiler::onnx_import
