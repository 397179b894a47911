// Windows over images: conv2d, separable_conv2d, conv_transpose, the 2-D pools and resize
// (NCHW; conv2d also channels-last).
#include <algorithm>
#include <bit>
#include <initializer_list>
#include <optional>
#include <utility>

#include "hexir/ops/widen.h"
#include "util.h"

namespace hexir::ops::internal {

using enum OpId;

namespace {

// ---- conv2d -----------------------------------------------------------------

enum ConvParam {
  kStrideH,
  kStrideW,
  kPadTop,
  kPadLeft,
  kPadBottom,
  kPadRight,
  kDilationH,
  kDilationW,
  kGroups,
  kConvParamCount
};

// A 2-D attribute (h, w): one value stands for both; absent gives
// {fallback, fallback}, or an error naming it when fallback < 0 (required).
Result<std::vector<int64_t>> pair_attr(OpId id, const AttrMap& attrs, const char* name, int64_t fallback) {
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> v, int_list_attr(id, attrs, name));
  if (v.empty()) {
    if (fallback < 0) return invalid_argument(prefix(id) + "needs attribute '" + name + "'");
    return std::vector<int64_t>{fallback, fallback};
  }
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2)
    return invalid_argument(prefix(id) + "attribute '" + name + "' takes 1 or 2 values, got " +
                            std::to_string(v.size()));
  return v;
}

Result<std::vector<int64_t>> lower_conv2d(std::span<const TensorType>, const AttrMap& attrs,
                                          std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(
      kConv2d, attrs,
      {"strides", "pads", "dilations", "groups", "activation", "activation_alpha", "activation_beta",
       "channels_last", "winograd"}));
  auto pair = [&](const char* name, int64_t fallback) { return pair_attr(kConv2d, attrs, name, fallback); };
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> strides, pair("strides", 1));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, pair("dilations", 1));
  // pads: ONNX order [top, left, bottom, right]; one value pads all sides, two are (h, w).
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> pads, int_list_attr(kConv2d, attrs, "pads"));
  if (pads.empty())
    pads = {0, 0, 0, 0};
  else if (pads.size() == 1)
    pads = {pads[0], pads[0], pads[0], pads[0]};
  else if (pads.size() == 2)
    pads = {pads[0], pads[1], pads[0], pads[1]};
  else if (pads.size() != 4)
    return invalid_argument(prefix(kConv2d) + "attribute 'pads' takes 1, 2 or 4 values, got " +
                            std::to_string(pads.size()));
  HEXIR_ASSIGN_OR_RETURN(int64_t groups, int_attr(kConv2d, attrs, "groups", 1));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> epilogue, lower_epilogue(kConv2d, attrs));
  HEXIR_ASSIGN_OR_RETURN(int64_t channels_last, int_attr(kConv2d, attrs, "channels_last", 0));
  if (channels_last != 0 && channels_last != 1)
    return invalid_argument(prefix(kConv2d) + "attribute 'channels_last' must be 0 or 1");
  HEXIR_ASSIGN_OR_RETURN(int64_t winograd, int_attr(kConv2d, attrs, "winograd", 0));
  // 1: F(2x2, 3x3) (layout word 2); 4: F(4x4, 3x3) (layout word 3).
  if (winograd != 0 && winograd != 1 && winograd != 4)
    return invalid_argument(prefix(kConv2d) + "attribute 'winograd' must be 0, 1 (F(2x2, 3x3)) or 4 (F(4x4, 3x3))");
  if (winograd && !channels_last)
    return invalid_argument(prefix(kConv2d) + "attribute 'winograd' needs channels_last = 1");
  std::vector<int64_t> words{strides[0], strides[1],   pads[0],      pads[1], pads[2],
                             pads[3],    dilations[0], dilations[1], groups};
  words.insert(words.end(), epilogue.begin(), epilogue.end());
  if (channels_last) words.push_back(winograd == 4 ? 3 : winograd ? 2 : 1);
  return words;
}

// strides, pads, dilations of conv2d, separable_conv2d and conv_transpose (its first eight words).
void raise_conv_window(std::span<const int64_t> p, AttrMap& attrs) {
  attrs["strides"] = param_list_value(p, {kStrideH, kStrideW});
  attrs["pads"] = param_list_value(p, {kPadTop, kPadLeft, kPadBottom, kPadRight});
  attrs["dilations"] = param_list_value(p, {kDilationH, kDilationW});
}

AttrMap raise_conv2d(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs;
  raise_conv_window(params, attrs);
  attrs["groups"] = AttrValue{param_at(params, kGroups)};
  if (conv2d_channels_last(params)) attrs["channels_last"] = AttrValue{int64_t{1}};
  if (conv2d_winograd(params)) attrs["winograd"] = AttrValue{int64_t{conv2d_winograd_tile(params) == 4 ? 4 : 1}};
  raise_epilogue(params, kConvParamCount, attrs);
  return attrs;
}

// conv2d: each output element sums C/groups * KH * KW taps (w [K, C/g, KH, KW]);
// conv_transpose: each input element scatters into K/groups * KH * KW (w [C, K/g, KH, KW]).
// 2 per tap, then one per output element for the bias and epilogue.
template <OpId kId>
uint64_t flops_conv(std::span<const TensorType> in, std::span<const TensorType> out,
                    std::span<const int64_t>) {
  const uint64_t n = output_elements_sat(out);
  if (in.size() < 2 || in[1].dims.size() != 4) return n;
  const uint64_t taps = tail_product_sat(in[1], 1);
  const uint64_t points = kId == kConv2d ? n : elements_sat(in[0]);
  return add_sat(mul_sat(mul_sat(points, 2), taps), n);
}

Result<std::vector<TensorType>> infer_conv2d(std::span<const TensorType> in, std::span<const int64_t> p) {
  const bool channels_last = conv2d_channels_last(p);
  const size_t words = p.size() - (channels_last ? 1 : 0);
  if (p.size() == kConvParamCount + 1 || p.size() == kConvParamCount + kEpilogueWords + 1) {
    if (!channels_last)
      return invalid_argument(prefix(kConv2d) + "layout word " + std::to_string(p.back()) + " must be 1, 2 or 3");
  }
  if (words != kConvParamCount + kEpilogueWords)
    HEXIR_RETURN_IF_ERROR(check_param_count(kConv2d, p.first(words), kConvParamCount));
  else
    HEXIR_RETURN_IF_ERROR(check_epilogue(kConv2d, p.subspan(kConvParamCount, kEpilogueWords)));
  // Channels-last: the same checks on [N, H, W, C] read as [N, C, H, W].
  TensorType x = in[0];
  const TensorType& w = in[1];
  if (x.rank() != 4)
    return invalid_argument(prefix(kConv2d) + "input " + x.to_string() + " is not " +
                            (channels_last ? "[N,H,W,C]" : "[N,C,H,W]"));
  if (channels_last) x.dims = {x.dims[0], x.dims[3], x.dims[1], x.dims[2]};
  if (w.rank() != 4)
    return invalid_argument(prefix(kConv2d) + "weights " + w.to_string() + " are not [K,C/groups,KH,KW]");
  for (int i : {kStrideH, kStrideW, kDilationH, kDilationW})
    if (p[i] < 1 || p[i] > (int64_t{1} << 30))
      return invalid_argument(prefix(kConv2d) + "strides and dilations must be in 1..2^30");
  for (int i : {kPadTop, kPadLeft, kPadBottom, kPadRight})
    if (p[i] < 0 || p[i] > (int64_t{1} << 30))
      return invalid_argument(prefix(kConv2d) + "pads must be in 0..2^30");
  const int64_t groups = p[kGroups];
  const int64_t c = x.dims[1], k = w.dims[0];
  // At most one group per input channel (one group when there are none): the
  // kernels loop over groups, so an unbounded count is a hang, not an error.
  if (groups < 1 || groups > std::max<int64_t>(c, 1) || c % groups != 0 || k % groups != 0)
    return invalid_argument(prefix(kConv2d) + "groups " + std::to_string(groups) + " must divide the " +
                            std::to_string(c) + " input and " + std::to_string(k) + " output channels");
  if (w.dims[1] != c / groups)
    return invalid_argument(prefix(kConv2d) + "weights " + w.to_string() + " take " +
                            std::to_string(w.dims[1]) + " channels per group, the input gives " +
                            std::to_string(c / groups));
  if (conv2d_winograd(p) && (w.dims[2] != 3 || w.dims[3] != 3 || p[kStrideH] != 1 || p[kStrideW] != 1 ||
                             p[kDilationH] != 1 || p[kDilationW] != 1 || groups != 1))
    return invalid_argument(prefix(kConv2d) + "winograd (layout word 2 or 3) takes a 3x3 kernel at stride 1, dilation 1, " +
                            "one group; got weights " + w.to_string() + ", strides " + std::to_string(p[kStrideH]) +
                            "x" + std::to_string(p[kStrideW]) + ", dilations " + std::to_string(p[kDilationH]) + "x" +
                            std::to_string(p[kDilationW]) + ", " + std::to_string(groups) + " groups");
  if (in.size() >= 3 && (in[2].rank() != 1 || in[2].dims[0] != k))
    return invalid_argument(prefix(kConv2d) + "bias " + in[2].to_string() + " is not [" + std::to_string(k) +
                            "]");
  int64_t out_hw[2];
  for (int d = 0; d < 2; ++d) {
    const int64_t extent = x.dims[2 + d] + p[kPadTop + d] + p[kPadBottom + d];  // dims <= 2^62, pads <= 2^30
    // The dilated window, computed only when it cannot overflow (it must fit the extent anyway).
    const bool fits = w.dims[2 + d] >= 1 && w.dims[2 + d] - 1 <= (extent - 1) / p[kDilationH + d];
    const int64_t window = fits ? p[kDilationH + d] * (w.dims[2 + d] - 1) + 1 : extent + 1;
    if (!fits || window > extent)
      return invalid_argument(prefix(kConv2d) + "the " + std::to_string(w.dims[2 + d]) +
                              "-wide kernel (dilated " + std::to_string(window) +
                              ") does not fit the padded input extent " + std::to_string(extent));
    out_hw[d] = (extent - window) / p[kStrideH + d] + 1;
  }
  // The patch matrix (C/groups * KH * KW rows, OH * OW columns) the GEMM walks must be addressable.
  uint64_t col = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(w.dims[1] * w.dims[2] * w.dims[3]),
                             static_cast<uint64_t>(out_hw[0]) * static_cast<uint64_t>(out_hw[1]), &col) ||
      col > (uint64_t{1} << 60))
    return invalid_argument(prefix(kConv2d) + "the convolution's patch matrix is too large");
  const TensorType result{x.dtype, channels_last ? std::vector<int64_t>{x.dims[0], out_hw[0], out_hw[1], k}
                                                    : std::vector<int64_t>{x.dims[0], k, out_hw[0], out_hw[1]}};
  if (in.size() == 4 && !(in[3] == result))
    return invalid_argument(prefix(kConv2d) + "residual " + in[3].to_string() + " is not the result's type " +
                            result.to_string());
  return one(result);
}

void fill_conv2d(const PlanInput& op, Conv2dPlan& p) {
  const auto& x = op.inputs[0].dims;
  const auto& w = op.inputs[1].dims;
  const auto& o = op.outputs[0].dims;
  p.channels_last = conv2d_channels_last(op.params) ? 1 : 0;
  if (p.channels_last) {
    p.n = x[0], p.h = x[1], p.w = x[2], p.c = x[3];
    p.oh = o[1], p.ow = o[2];
  } else {
    p.n = x[0], p.c = x[1], p.h = x[2], p.w = x[3];
    p.oh = o[2], p.ow = o[3];
  }
  p.k = w[0], p.kh = w[2], p.kw = w[3];
  p.stride_h = op.params[kStrideH], p.stride_w = op.params[kStrideW];
  p.pad_top = op.params[kPadTop], p.pad_left = op.params[kPadLeft];
  p.dilation_h = op.params[kDilationH], p.dilation_w = op.params[kDilationW];
  p.groups = op.params[kGroups];
  p.c_per_group = p.c / p.groups;
  p.k_per_group = p.k / p.groups;
  p.has_bias = op.inputs.size() >= 3;
  p.has_residual = op.inputs.size() == 4;
  p.epilogue = plan_epilogue(op.params, kConvParamCount);
  p.winograd = conv2d_winograd_tile(op.params);
}

void plan_conv2d(const PlanInput& op, OpPlan& out) { fill_conv2d(op, out.start<Conv2dPlan>()); }

// ---- separable_conv2d -----------------------------------------------------------------

// Its words (op.h): the depthwise conv2d's nine, its epilogue, the 1x1's epilogue.
constexpr size_t kSeparableDepthwiseEpilogue = kConvParamCount;
constexpr size_t kSeparablePointwiseEpilogue = kConvParamCount + kEpilogueWords;
constexpr size_t kSeparableBiases = kConvParamCount + 2 * kEpilogueWords;
constexpr size_t kSeparableParamCount = kSeparableBiases + 1;

// The conv2d words of each stage (an epilogue whose activation is 0 left out).
std::vector<int64_t> separable_depthwise_words(std::span<const int64_t> p) {
  std::vector<int64_t> words(p.begin(), p.begin() + kConvParamCount);
  if (p[kSeparableDepthwiseEpilogue] != 0)
    words.insert(words.end(), p.begin() + kSeparableDepthwiseEpilogue, p.begin() + kSeparablePointwiseEpilogue);
  return words;
}
std::vector<int64_t> separable_pointwise_words(std::span<const int64_t> p) {
  std::vector<int64_t> words{1, 1, 0, 0, 0, 0, 1, 1, 1};
  if (p[kSeparablePointwiseEpilogue] != 0)
    words.insert(words.end(), p.begin() + kSeparablePointwiseEpilogue, p.begin() + kSeparableBiases);
  return words;
}

// Each stage's operands as its conv2d takes them: (x, w[, bias][, residual]).
struct SeparableOperands {
  std::vector<TensorType> depthwise, pointwise;  // the pointwise's input 0 left out
};
SeparableOperands separable_operands(std::span<const TensorType> in, int64_t biases) {
  SeparableOperands o;
  size_t next = 3;
  o.depthwise = {in[0], in[1]};
  if (biases & 1) o.depthwise.push_back(in[next++]);
  o.pointwise = {in[2]};
  if (biases & 2) o.pointwise.push_back(in[next++]);
  if (next < in.size()) o.pointwise.push_back(in[next]);
  return o;
}

// A stage's conv2d error, said of separable_conv2d.
Status separable_error(const Status& s, const char* stage) {
  std::string message = s.message();
  const std::string conv = prefix(kConv2d);
  if (message.rfind(conv, 0) == 0) message.erase(0, conv.size());
  return invalid_argument(prefix(kSeparableConv2d) + stage + message);
}

// strides, pads, dilations (the depthwise's, as conv2d's), depthwise_activation
// (+ _alpha, _beta) and activation (+ _alpha, _beta): the 1x1's.
Result<std::vector<int64_t>> lower_separable_conv2d(std::span<const TensorType> in, const AttrMap& attrs,
                                                    std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(
      kSeparableConv2d, attrs,
      {"strides", "pads", "dilations", "activation", "activation_alpha", "activation_beta", "depthwise_activation",
       "depthwise_activation_alpha", "depthwise_activation_beta", "biases"}));
  // biases = [depthwise, pointwise] (0 or 1 each; default both).
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> biases, int_list_attr(kSeparableConv2d, attrs, "biases"));
  if (biases.empty()) biases = {1, 1};
  if (biases.size() != 2 || (biases[0] != 0 && biases[0] != 1) || (biases[1] != 0 && biases[1] != 1))
    return invalid_argument(prefix(kSeparableConv2d) + "attribute 'biases' takes two values, 0 or 1");
  if (in.empty() || in[0].rank() != 4)
    return invalid_argument(prefix(kSeparableConv2d) + "input " + (in.empty() ? std::string("(none)") : in[0].to_string()) +
                            " is not [N,C,H,W]");
  AttrMap depthwise, pointwise;
  for (const char* name : {"strides", "pads", "dilations"})
    if (const AttrValue* v = find_attr(attrs, name)) depthwise[name] = *v;
  for (const char* name : {"activation", "activation_alpha", "activation_beta"}) {
    if (const AttrValue* v = find_attr(attrs, std::string("depthwise_") + name)) depthwise[name] = *v;
    if (const AttrValue* v = find_attr(attrs, name)) pointwise[name] = *v;
  }
  depthwise["groups"] = AttrValue{in[0].dims[1]};
  Result<std::vector<int64_t>> words = lower_conv2d(in.first(1), depthwise, {});
  if (!words.ok()) return separable_error(words.status(), "depthwise: ");
  words->resize(kSeparablePointwiseEpilogue, 0);  // no depthwise activation: three zero words
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> epilogue, lower_epilogue(kSeparableConv2d, pointwise));
  epilogue.resize(kEpilogueWords, 0);
  words->insert(words->end(), epilogue.begin(), epilogue.end());
  words->push_back(biases[0] | biases[1] << 1);
  return std::move(*words);
}

AttrMap raise_separable_conv2d(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs;
  raise_conv_window(params, attrs);
  // groups is x's channel count; the two epilogues as conv2d's, the depthwise's with a prefix.
  if (params.size() == kSeparableParamCount) {
    const int64_t biases = params[kSeparableBiases];
    const int64_t present[] = {biases & 1, biases >> 1 & 1};
    attrs["biases"] = int_list_value(present);
  }
  raise_epilogue(params, kSeparableDepthwiseEpilogue, attrs, "depthwise_activation");
  raise_epilogue(params, kSeparablePointwiseEpilogue, attrs, "activation");
  return attrs;
}

// The depthwise's KH * KW taps per element of its result [N, C, OH, OW]
// (out / K * C elements), then the 1x1's C per output element; 2 per tap.
uint64_t flops_separable_conv2d(std::span<const TensorType> in, std::span<const TensorType> out,
                                std::span<const int64_t>) {
  const uint64_t n = output_elements_sat(out);
  if (in.size() < 3 || in[0].dims.size() != 4 || in[1].dims.size() != 4 || in[2].dims.size() != 4 ||
      in[2].dims[0] <= 0 || in[0].dims[1] < 0)
    return n;
  const uint64_t c = static_cast<uint64_t>(in[0].dims[1]);
  const uint64_t mid = mul_sat(n / static_cast<uint64_t>(in[2].dims[0]), c);
  return add_sat(mul_sat(mul_sat(mid, 2), tail_product_sat(in[1], 2)), mul_sat(mul_sat(n, 2), c));
}

Result<std::vector<TensorType>> infer_separable_conv2d(std::span<const TensorType> in, std::span<const int64_t> p) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kSeparableConv2d, p, kSeparableParamCount));
  for (size_t e : {kSeparableDepthwiseEpilogue, kSeparablePointwiseEpilogue})
    if (p[e] == 0 && (p[e + 1] != 0 || p[e + 2] != 0))
      return invalid_argument(prefix(kSeparableConv2d) + "an epilogue without an activation must have parameters 0");
  const TensorType& x = in[0];
  if (x.rank() != 4) return invalid_argument(prefix(kSeparableConv2d) + "input " + x.to_string() + " is not [N,C,H,W]");
  const int64_t c = x.dims[1];
  if (p[kGroups] != c || in[1].rank() != 4 || in[1].dims[0] != c || in[1].dims[1] != 1)
    return invalid_argument(prefix(kSeparableConv2d) + "depthwise weights " + in[1].to_string() + " with groups " +
                            std::to_string(p[kGroups]) + " are not [C,1,KH,KW] with groups C = " + std::to_string(c));
  const int64_t biases = p[kSeparableBiases];
  const size_t bias_count = static_cast<size_t>((biases & 1) + (biases >> 1 & 1));
  if (biases < 0 || biases > 3 || in.size() < 3 + bias_count || in.size() > 4 + bias_count ||
      (in.size() == 4 + bias_count && !(biases & 2)))
    return invalid_argument(prefix(kSeparableConv2d) + "bias word " + std::to_string(biases) + " and " +
                            std::to_string(in.size()) +
                            " operands: (x, dw_w, pw_w) then the biases it names (bit 0 dw_bias, bit 1 pw_bias), "
                            "then a residual (with pw_bias only)");
  SeparableOperands o = separable_operands(in, biases);
  Result<std::vector<TensorType>> mid = infer_conv2d(o.depthwise, separable_depthwise_words(p));
  if (!mid.ok()) return separable_error(mid.status(), "depthwise: ");
  const TensorType& y = (*mid)[0];
  if (in[2].rank() != 4 || in[2].dims[1] != c || in[2].dims[2] != 1 || in[2].dims[3] != 1)
    return invalid_argument(prefix(kSeparableConv2d) + "pointwise weights " + in[2].to_string() + " are not [K," +
                            std::to_string(c) + ",1,1]");
  o.pointwise.insert(o.pointwise.begin(), y);
  Result<std::vector<TensorType>> out = infer_conv2d(o.pointwise, separable_pointwise_words(p));
  if (!out.ok()) return separable_error(out.status(), "pointwise: ");
  if (c > kSeparableMaxRowFloats / std::max<int64_t>(y.dims[3], 1))
    return invalid_argument(prefix(kSeparableConv2d) + "a row of the depthwise result (" + std::to_string(c) +
                            " channels x " + std::to_string(y.dims[3]) + " columns) is more than " +
                            std::to_string(kSeparableMaxRowFloats) + " floats");
  return out;
}

void plan_separable_conv2d(const PlanInput& op, OpPlan& out) {
  SeparableConv2dPlan& plan = out.start<SeparableConv2dPlan>();
  const std::vector<int64_t> depthwise_words = separable_depthwise_words(op.params);
  const std::vector<int64_t> pointwise_words = separable_pointwise_words(op.params);
  const std::vector<int64_t>& out_dims = op.outputs[0].dims;
  const TensorType mid{DType::kF32, {out_dims[0], op.inputs[0].dims[1], out_dims[2], out_dims[3]}};
  SeparableOperands o = separable_operands(op.inputs, op.params[kSeparableBiases]);
  fill_conv2d(PlanInput{o.depthwise, std::span(&mid, 1), depthwise_words}, plan.depthwise);
  o.pointwise.insert(o.pointwise.begin(), mid);
  fill_conv2d(PlanInput{o.pointwise, op.outputs, pointwise_words}, plan.pointwise);
}

// ---- conv_transpose -------------------------------------------------------------------

enum ConvTransposeParam { kOutPadH = kConvParamCount, kOutPadW, kConvTransposeParamCount };

Result<std::vector<int64_t>> lower_conv_transpose(std::span<const TensorType> in, const AttrMap& attrs,
                                                  std::span<const TensorType>) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(kConvTranspose, attrs,
                                         {"strides", "pads", "dilations", "groups", "output_padding",
                                          "kernel_shape", "output_shape", "auto_pad"}));
  auto pair = [&](const char* name, int64_t fallback) {
    return pair_attr(kConvTranspose, attrs, name, fallback);
  };
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> strides, pair("strides", 1));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, pair("dilations", 1));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> output_padding, pair("output_padding", 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t groups, int_attr(kConvTranspose, attrs, "groups", 1));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> pads, int_list_attr(kConvTranspose, attrs, "pads"));
  if (pads.empty())
    pads = {0, 0, 0, 0};
  else if (pads.size() == 1)
    pads = {pads[0], pads[0], pads[0], pads[0]};
  else if (pads.size() == 2)
    pads = {pads[0], pads[1], pads[0], pads[1]};
  else if (pads.size() != 4)
    return invalid_argument(prefix(kConvTranspose) + "attribute 'pads' takes 1, 2 or 4 values, got " +
                            std::to_string(pads.size()));
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  if (x.rank() != 4 || w.rank() != 4)
    return invalid_argument(prefix(kConvTranspose) +
                            "input and weights must be [N,C,H,W] and [C,K/groups,KH,KW]");
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> kernel_shape,
                         int_list_attr(kConvTranspose, attrs, "kernel_shape"));
  if (!kernel_shape.empty() && kernel_shape != std::vector<int64_t>{w.dims[2], w.dims[3]})
    return invalid_argument(prefix(kConvTranspose) + "kernel_shape " + shape_str(kernel_shape) +
                            " does not match the weights " + w.to_string());
  std::string auto_pad = "NOTSET";
  if (const AttrValue* v = find_attr(attrs, "auto_pad")) {
    auto* s = std::get_if<std::string>(&v->value);
    if (!s || (*s != "NOTSET" && *s != "VALID" && *s != "SAME_UPPER" && *s != "SAME_LOWER"))
      return invalid_argument(prefix(kConvTranspose) +
                              "attribute 'auto_pad' must be NOTSET, VALID, SAME_UPPER or SAME_LOWER");
    auto_pad = *s;
  }
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> output_shape,
                         int_list_attr(kConvTranspose, attrs, "output_shape"));
  if (output_shape.size() == 4) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (auto_pad == "VALID") pads = {0, 0, 0, 0};
  if (!output_shape.empty() || same) {
    // ONNX: the pads that give the stated output shape (SAME: in * stride);
    // SAME_UPPER puts the larger half at the end, otherwise at the beginning.
    if (!output_shape.empty() && output_shape.size() != 2)
      return invalid_argument(prefix(kConvTranspose) + "attribute 'output_shape' takes 2 or 4 values");
    for (int d = 0; d < 2; ++d) {
      const int64_t s = strides[d], k = w.dims[2 + d], dil = dilations[d], size = x.dims[2 + d];
      if (s < 1 || s > (int64_t{1} << 30) || dil < 1 || dil > (int64_t{1} << 30) ||
          size > (int64_t{1} << 31) || k > (int64_t{1} << 31) || output_padding[d] < 0 ||
          output_padding[d] > (int64_t{1} << 30))
        return invalid_argument(prefix(kConvTranspose) + "strides, dilations or sizes out of range");
      if (output_shape.size() < 2) output_shape.push_back(size * s);
      const int64_t total = s * (size - 1) + output_padding[d] + (k - 1) * dil + 1 - output_shape[d];
      if (total < 0) {  // a larger output: more output padding (as onnxruntime does)
        pads[d] = pads[2 + d] = 0;
        output_padding[d] -= total;
        continue;
      }
      pads[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[2 + d] = total - pads[d];
    }
  }
  return std::vector<int64_t>{strides[0], strides[1],        pads[0],          pads[1],
                              pads[2],    pads[3],           dilations[0],     dilations[1],
                              groups,     output_padding[0], output_padding[1]};
}

AttrMap raise_conv_transpose(std::span<const TensorType>, std::span<const int64_t> params) {
  AttrMap attrs;
  raise_conv_window(params, attrs);
  attrs["groups"] = AttrValue{param_at(params, kGroups)};
  attrs["output_padding"] = param_list_value(params, {kOutPadH, kOutPadW});
  return attrs;
}

Result<std::vector<TensorType>> infer_conv_transpose(std::span<const TensorType> in,
                                                     std::span<const int64_t> p) {
  HEXIR_RETURN_IF_ERROR(check_param_count(kConvTranspose, p, kConvTransposeParamCount));
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  if (x.rank() != 4)
    return invalid_argument(prefix(kConvTranspose) + "input " + x.to_string() + " is not [N,C,H,W]");
  if (w.rank() != 4)
    return invalid_argument(prefix(kConvTranspose) + "weights " + w.to_string() +
                            " are not [C,K/groups,KH,KW]");
  for (int i : {kStrideH, kStrideW, kDilationH, kDilationW})
    if (p[i] < 1 || p[i] > (int64_t{1} << 30))
      return invalid_argument(prefix(kConvTranspose) + "strides and dilations must be in 1..2^30");
  for (int i : {kPadTop, kPadLeft, kPadBottom, kPadRight})
    if (p[i] < 0 || p[i] > (int64_t{1} << 30))
      return invalid_argument(prefix(kConvTranspose) + "pads must be in 0..2^30");
  for (int d = 0; d < 2; ++d)
    if (p[kOutPadH + d] < 0 || p[kOutPadH + d] >= std::max(p[kStrideH + d], p[kDilationH + d]))
      return invalid_argument(prefix(kConvTranspose) + "output_padding " + std::to_string(p[kOutPadH + d]) +
                              " must be below the stride or the dilation");
  const int64_t groups = p[kGroups];
  const int64_t c = x.dims[1];
  if (groups < 1 || groups > std::max<int64_t>(c, 1) || c % groups != 0)
    return invalid_argument(prefix(kConvTranspose) + "groups " + std::to_string(groups) +
                            " must divide the " + std::to_string(c) + " input channels");
  if (w.dims[0] != c)
    return invalid_argument(prefix(kConvTranspose) + "weights " + w.to_string() + " must have " +
                            std::to_string(c) + " input channels first");
  __int128 k = static_cast<__int128>(w.dims[1]) * groups;
  if (k > (int64_t{1} << 40)) return invalid_argument(prefix(kConvTranspose) + "too many output channels");
  if (in.size() == 3 && (in[2].rank() != 1 || in[2].dims[0] != static_cast<int64_t>(k)))
    return invalid_argument(prefix(kConvTranspose) + "bias " + in[2].to_string() + " is not [" +
                            std::to_string(static_cast<int64_t>(k)) + "]");
  int64_t out_hw[2];
  for (int d = 0; d < 2; ++d) {
    const int64_t size = x.dims[2 + d], kernel = w.dims[2 + d];
    if (size < 1 || kernel < 1)
      return invalid_argument(prefix(kConvTranspose) + "input and kernel spatial dims must be at least 1");
    const __int128 out = static_cast<__int128>(p[kStrideH + d]) * (size - 1) + p[kOutPadH + d] +
                         static_cast<__int128>(p[kDilationH + d]) * (kernel - 1) + 1 - p[kPadTop + d] -
                         p[kPadBottom + d];
    if (out < 1 || out > (int64_t{1} << 62))
      return invalid_argument(prefix(kConvTranspose) + "the output dim " +
                              std::to_string(static_cast<int64_t>(out)) +
                              " is not in 1..2^62 (pads too large?)");
    out_hw[d] = static_cast<int64_t>(out);
  }
  return one({x.dtype, {x.dims[0], static_cast<int64_t>(k), out_hw[0], out_hw[1]}});
}

// The cpu kernel's scratch (hal/cpu/spatial.cc): the weights of one group
// transposed, [k/groups * kh * kw, c/groups] floats, then its GEMM's result over
// a band of input rows, [k/groups * kh * kw, rows * w]: all h rows when that
// takes at most 1 MiB, else the rows that fit in 1 MiB but at least those one
// output row reads. 0 (the kernel's direct loop) past 256 MiB.
uint64_t workspace_conv_transpose(const PlanInput& op) {
  const auto& x = op.inputs[0].dims;
  const auto& w = op.inputs[1].dims;
  const double taps = static_cast<double>(w[1]) * static_cast<double>(w[2]) * static_cast<double>(w[3]);
  const double row = taps * static_cast<double>(x[3]) * sizeof(float);  // bytes per input row
  const double h = static_cast<double>(x[2]);
  if (row <= 0.0 || h <= 0.0) return 0;
  const double reach = static_cast<double>((w[2] - 1) * op.params[kDilationH] / op.params[kStrideH] + 1);
  const double fit = static_cast<double>(static_cast<int64_t>(1048576.0 / row));  // whole rows in 1 MiB
  const double rows = std::max(std::min(h, reach), std::min(h, fit));
  const double bytes = taps * static_cast<double>(x[1] / op.params[kGroups]) * sizeof(float) + row * rows;
  return bytes > 268435456.0 ? 0 : static_cast<uint64_t>(bytes);
}

void plan_conv_transpose(const PlanInput& op, OpPlan& out) {
  ConvTransposePlan& p = out.start<ConvTransposePlan>();
  const auto& x = op.inputs[0].dims;
  const auto& w = op.inputs[1].dims;
  const auto& o = op.outputs[0].dims;
  p.n = x[0], p.c = x[1], p.h = x[2], p.w = x[3];
  p.k = o[1], p.oh = o[2], p.ow = o[3];
  p.kh = w[2], p.kw = w[3];
  p.stride_h = op.params[kStrideH], p.stride_w = op.params[kStrideW];
  p.pad_top = op.params[kPadTop], p.pad_left = op.params[kPadLeft];
  p.dilation_h = op.params[kDilationH], p.dilation_w = op.params[kDilationW];
  p.groups = op.params[kGroups];
  p.c_per_group = p.c / p.groups;
  p.k_per_group = w[1];
  p.has_bias = op.inputs.size() == 3;
}

// ---- max_pool, average_pool ------------------------------------------------------

enum PoolParam {
  kKernelH,
  kKernelW,
  kPoolStrideH,
  kPoolStrideW,
  kPoolPadTop,
  kPoolPadLeft,
  kPoolPadBottom,
  kPoolPadRight,
  kPoolDilationH,
  kPoolDilationW,
  kCeilMode,
  kCountIncludePad,
  kPoolParamCount
};

constexpr int64_t kPoolLimit = int64_t{1} << 30;

// One output dim of a pool: ONNX's floor((extent - window) / stride) + 1, or
// with ceil_mode the ceiling, less the last window when it would start past
// the input and its leading pad (as PyTorch and onnxruntime do). Operands
// bounded by the rule (pads, kernel, stride, dilation <= 2^30; dim < 2^62).
int64_t pool_out_dim(int64_t in, int64_t k, int64_t stride, int64_t pad_begin, int64_t pad_end,
                     int64_t dilation, bool ceil_mode) {
  const int64_t extent = in + pad_begin + pad_end;
  const int64_t window = dilation * (k - 1) + 1;
  int64_t out = (extent - window + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

template <OpId kId>
Result<std::vector<int64_t>> lower_pool(std::span<const TensorType> in, const AttrMap& attrs,
                                        std::span<const TensorType>) {
  constexpr bool kMax = kId == kMaxPool;
  if (kMax)
    HEXIR_RETURN_IF_ERROR(check_attr_names(
        kId, attrs,
        {"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "auto_pad", "channels_last"}));
  else
    HEXIR_RETURN_IF_ERROR(check_attr_names(kId, attrs,
                                           {"kernel_shape", "strides", "pads", "dilations", "ceil_mode",
                                            "count_include_pad", "auto_pad", "channels_last"}));
  auto pair = [&](const char* name, int64_t fallback) { return pair_attr(kId, attrs, name, fallback); };
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, pair("kernel_shape", -1));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> strides, pair("strides", 1));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, pair("dilations", 1));
  auto flag = [&](const char* name) -> Result<int64_t> {
    HEXIR_ASSIGN_OR_RETURN(int64_t v, int_attr(kId, attrs, name, 0));
    if (v != 0 && v != 1) return invalid_argument(prefix(kId) + "attribute '" + name + "' must be 0 or 1");
    return v;
  };
  HEXIR_ASSIGN_OR_RETURN(int64_t ceil_mode, flag("ceil_mode"));
  HEXIR_ASSIGN_OR_RETURN(int64_t count_include_pad, flag("count_include_pad"));
  HEXIR_ASSIGN_OR_RETURN(int64_t channels_last, flag("channels_last"));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> pads, int_list_attr(kId, attrs, "pads"));
  if (pads.empty())
    pads = {0, 0, 0, 0};
  else if (pads.size() == 1)
    pads = {pads[0], pads[0], pads[0], pads[0]};
  else if (pads.size() == 2)
    pads = {pads[0], pads[1], pads[0], pads[1]};
  else if (pads.size() != 4)
    return invalid_argument(prefix(kId) + "attribute 'pads' takes 1, 2 or 4 values, got " +
                            std::to_string(pads.size()));
  // ONNX auto_pad: SAME_* pads so that the output is ceil(in / stride); VALID is no padding.
  if (const AttrValue* v = find_attr(attrs, "auto_pad")) {
    auto* mode = std::get_if<std::string>(&v->value);
    if (!mode || (*mode != "NOTSET" && *mode != "VALID" && *mode != "SAME_UPPER" && *mode != "SAME_LOWER"))
      return invalid_argument(prefix(kId) +
                              "attribute 'auto_pad' must be NOTSET, VALID, SAME_UPPER or SAME_LOWER");
    if (*mode != "NOTSET" && find_attr(attrs, "pads"))
      return invalid_argument(prefix(kId) + "attribute 'pads' and auto_pad " + *mode + " exclude each other");
    if (*mode == "SAME_UPPER" || *mode == "SAME_LOWER") {
      if (in[0].rank() != 4)
        return invalid_argument(prefix(kId) + "input " + in[0].to_string() + " is not [N,C,H,W]");
      for (int d = 0; d < 2; ++d) {
        const int64_t size = in[0].dims[(channels_last ? 1 : 2) + d], s = strides[d], k = kernel[d],
                      dil = dilations[d];
        if (s < 1 || s > kPoolLimit || k < 1 || k > kPoolLimit || dil < 1 || dil > kPoolLimit)
          return invalid_argument(prefix(kId) + "kernel_shape, strides and dilations must be in 1..2^30");
        const int64_t out = (size + s - 1) / s;
        const int64_t total = std::max<int64_t>(0, (out - 1) * s + dil * (k - 1) + 1 - size);
        pads[d] = *mode == "SAME_UPPER" ? total / 2 : total - total / 2;
        pads[2 + d] = total - pads[d];
      }
    }
  }
  std::vector<int64_t> words{kernel[0], kernel[1], strides[0],   strides[1],   pads[0],   pads[1],
                             pads[2],   pads[3],   dilations[0], dilations[1], ceil_mode, count_include_pad};
  if (channels_last) words.push_back(1);
  return words;
}

template <OpId kId>
AttrMap raise_pool(std::span<const TensorType>, std::span<const int64_t> p) {
  AttrMap attrs;
  attrs["kernel_shape"] = param_list_value(p, {kKernelH, kKernelW});
  attrs["strides"] = param_list_value(p, {kPoolStrideH, kPoolStrideW});
  attrs["pads"] = param_list_value(p, {kPoolPadTop, kPoolPadLeft, kPoolPadBottom, kPoolPadRight});
  attrs["dilations"] = param_list_value(p, {kPoolDilationH, kPoolDilationW});
  attrs["ceil_mode"] = AttrValue{param_at(p, kCeilMode)};
  if (kId == kAveragePool) attrs["count_include_pad"] = AttrValue{param_at(p, kCountIncludePad)};
  if (pool2d_channels_last(p)) attrs["channels_last"] = AttrValue{int64_t{1}};
  return attrs;
}

// KH * KW taps per output element.
uint64_t flops_pool(std::span<const TensorType>, std::span<const TensorType> out,
                    std::span<const int64_t> p) {
  const uint64_t taps = p.size() >= 2 && p[kKernelH] > 0 && p[kKernelW] > 0
                            ? mul_sat(static_cast<uint64_t>(p[kKernelH]), static_cast<uint64_t>(p[kKernelW]))
                            : 1;
  return mul_sat(output_elements_sat(out), taps);
}

template <OpId kId>
Result<std::vector<TensorType>> infer_pool(std::span<const TensorType> in, std::span<const int64_t> p) {
  const bool channels_last = p.size() == kPoolParamCount + 1;
  if (channels_last && p.back() != 1)
    return invalid_argument(prefix(kId) + "layout word " + std::to_string(p.back()) + " must be 1");
  HEXIR_RETURN_IF_ERROR(check_param_count(kId, p.first(p.size() - (channels_last ? 1 : 0)), kPoolParamCount));
  // Channels-last: the same checks on [N, H, W, C] read as [N, C, H, W].
  TensorType x = in[0];
  if (kId == kMaxPool && !is_float(x.dtype) && x.dtype != DType::kU8)
    return invalid_argument(prefix(kId) + "operand 0 is " + x.to_string() + ", only f32, f16, bf16 and u8 are supported");
  if (x.rank() != 4)
    return invalid_argument(prefix(kId) + "input " + x.to_string() + " is not " +
                            (channels_last ? "[N,H,W,C]" : "[N,C,H,W]"));
  if (channels_last) x.dims = {x.dims[0], x.dims[3], x.dims[1], x.dims[2]};
  for (int i : {kKernelH, kKernelW, kPoolStrideH, kPoolStrideW, kPoolDilationH, kPoolDilationW})
    if (p[i] < 1 || p[i] > kPoolLimit)
      return invalid_argument(prefix(kId) + "kernel_shape, strides and dilations must be in 1..2^30");
  for (int d = 0; d < 2; ++d)
    for (int i : {kPoolPadTop + d, kPoolPadBottom + d})
      if (p[i] < 0 || p[i] >= p[kKernelH + d])
        return invalid_argument(prefix(kId) + "pad " + std::to_string(p[i]) +
                                " must be in 0..kernel size - 1 (" + std::to_string(p[kKernelH + d] - 1) +
                                ")");
  if ((p[kCeilMode] != 0 && p[kCeilMode] != 1) || (p[kCountIncludePad] != 0 && p[kCountIncludePad] != 1))
    return invalid_argument(prefix(kId) + "ceil_mode and count_include_pad must be 0 or 1");
  if (kId == kMaxPool && p[kCountIncludePad] != 0)
    return invalid_argument(prefix(kId) + "count_include_pad is for average_pool only");
  int64_t out_hw[2];
  for (int d = 0; d < 2; ++d) {
    const int64_t extent = x.dims[2 + d] + p[kPoolPadTop + d] + p[kPoolPadBottom + d];
    const int64_t window = p[kPoolDilationH + d] * (p[kKernelH + d] - 1) + 1;  // <= 2^60
    if (window > extent)
      return invalid_argument(prefix(kId) + "the window of " + std::to_string(window) +
                              " does not fit the padded input extent " + std::to_string(extent));
    out_hw[d] = pool_out_dim(x.dims[2 + d], p[kKernelH + d], p[kPoolStrideH + d], p[kPoolPadTop + d],
                             p[kPoolPadBottom + d], p[kPoolDilationH + d], p[kCeilMode] == 1);
  }
  if (channels_last) return one({x.dtype, {x.dims[0], out_hw[0], out_hw[1], x.dims[1]}});
  return one({x.dtype, {x.dims[0], x.dims[1], out_hw[0], out_hw[1]}});
}

template <OpId kId>
void plan_pool(const PlanInput& op, OpPlan& out) {
  Pool2dPlan& p = out.start<Pool2dPlan>();
  const auto& x = op.inputs[0].dims;
  const auto& o = op.outputs[0].dims;
  p.channels_last = pool2d_channels_last(op.params) ? 1 : 0;
  if (p.channels_last) {
    p.n = x[0], p.h = x[1], p.w = x[2], p.c = x[3];
    p.oh = o[1], p.ow = o[2];
  } else {
    p.n = x[0], p.c = x[1], p.h = x[2], p.w = x[3];
    p.oh = o[2], p.ow = o[3];
  }
  p.kh = op.params[kKernelH], p.kw = op.params[kKernelW];
  p.stride_h = op.params[kPoolStrideH], p.stride_w = op.params[kPoolStrideW];
  p.pad_top = op.params[kPoolPadTop], p.pad_left = op.params[kPoolPadLeft];
  p.pad_bottom = op.params[kPoolPadBottom], p.pad_right = op.params[kPoolPadRight];
  p.dilation_h = op.params[kPoolDilationH], p.dilation_w = op.params[kPoolDilationW];
  p.count_include_pad = op.params[kCountIncludePad];
  p.is_max = kId == kMaxPool;
}

// ---- resize -------------------------------------------------------------------------

// The scale words are optional: present when the scales were stated (ONNX maps
// coordinates with the stated scale, not out / in, e.g. 0.6 over 4 rows gives 2 rows
// sampled at 1/0.6 steps); the bits of a double each.
enum ResizeParam { kResizeMode, kCoordinateMode, kNearestMode, kOutH, kOutW, kResizeParamCount, kScaleH = kResizeParamCount, kScaleW, kResizeParamCountWithScales };
constexpr int64_t kMaxResizeDim = int64_t{1} << 40;

// The index of `s` in `names`, or an error naming them.
Result<int64_t> enum_attr(const AttrMap& attrs, const char* name, std::initializer_list<const char*> names,
                          int64_t fallback) {
  const AttrValue* v = find_attr(attrs, name);
  if (!v) return fallback;
  auto* s = std::get_if<std::string>(&v->value);
  std::string list;
  int64_t index = 0;
  for (const char* n : names) {
    if (s && *s == n) return index;
    list += (index++ ? ", " : "") + std::string(n);
  }
  return invalid_argument(prefix(kResize) + "attribute '" + name + "' must be one of: " + list);
}

Result<std::vector<int64_t>> lower_resize(std::span<const TensorType> in, const AttrMap& attrs,
                                          std::span<const TensorType> declared) {
  HEXIR_RETURN_IF_ERROR(check_attr_names(
      kResize, attrs, {"mode", "coordinate_transformation_mode", "nearest_mode", "sizes", "scales"}));
  const TensorType& x = in[0];
  if (x.rank() != 4)
    return invalid_argument(prefix(kResize) + "input " + x.to_string() + " is not [N,C,H,W]");
  HEXIR_ASSIGN_OR_RETURN(int64_t mode, enum_attr(attrs, "mode", {"nearest", "linear"}, 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t coordinate, enum_attr(attrs, "coordinate_transformation_mode",
                                                       {"half_pixel", "align_corners", "asymmetric",
                                                        "pytorch_half_pixel", "tf_half_pixel_for_nn"},
                                                       0));
  HEXIR_ASSIGN_OR_RETURN(
      int64_t nearest,
      enum_attr(attrs, "nearest_mode", {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}, 0));
  if (mode == 1) nearest = 0;
  std::vector<int64_t> out;
  std::optional<std::pair<double, double>> stated_scales;
  if (find_attr(attrs, "sizes")) {
    HEXIR_ASSIGN_OR_RETURN(out, int_list_attr(kResize, attrs, "sizes"));
    if (out.size() == 2) out.insert(out.begin(), {x.dims[0], x.dims[1]});
  } else if (const AttrValue* v = find_attr(attrs, "scales")) {
    // ONNX: each output dim is floor(in * scale); the kernels use out / in as the scale.
    std::vector<double> scales;
    auto number = [](const AttrValue& a) -> std::optional<double> {
      if (auto* d = std::get_if<double>(&a.value)) return *d;
      if (auto* i = std::get_if<int64_t>(&a.value)) return static_cast<double>(*i);
      return std::nullopt;
    };
    if (auto* list = std::get_if<std::vector<AttrValue>>(&v->value)) {
      for (const AttrValue& e : *list) {
        auto d = number(e);
        if (!d) return invalid_argument(prefix(kResize) + "attribute 'scales' must be a list of numbers");
        scales.push_back(*d);
      }
    }
    if (scales.size() == 2) scales.insert(scales.begin(), {1.0, 1.0});
    if (scales.size() != 4)
      return invalid_argument(prefix(kResize) + "attribute 'scales' takes 2 or 4 numbers");
    for (size_t d = 0; d < 4; ++d) {
      const double size = static_cast<double>(x.dims[d]) * scales[d];
      if (!(scales[d] > 0) || !(size < static_cast<double>(kMaxResizeDim)))
        return invalid_argument(prefix(kResize) + "scale " + std::to_string(scales[d]) + " is not usable");
      out.push_back(static_cast<int64_t>(size));  // floor: size >= 0
    }
    stated_scales = {scales[2], scales[3]};
  } else if (declared.size() == 1) {
    out = declared[0].dims;
  } else {
    return invalid_argument(prefix(kResize) + "needs attribute 'sizes' or 'scales', or a stated result type");
  }
  if (out.size() != 4 || out[0] != x.dims[0] || out[1] != x.dims[1])
    return invalid_argument(prefix(kResize) + "the result " + shape_str(out) + " must be [" +
                            std::to_string(x.dims[0]) + "," + std::to_string(x.dims[1]) +
                            ",H,W]: only H and W are resized");
  std::vector<int64_t> params{mode, coordinate, nearest, out[2], out[3]};
  if (stated_scales && (static_cast<double>(out[2]) != static_cast<double>(x.dims[2]) * stated_scales->first ||
                        static_cast<double>(out[3]) != static_cast<double>(x.dims[3]) * stated_scales->second)) {
    params.push_back(std::bit_cast<int64_t>(stated_scales->first));
    params.push_back(std::bit_cast<int64_t>(stated_scales->second));
  }
  return params;
}

// Stated scales (the scale words) print as scales, from which the sizes follow; else the sizes.
AttrMap raise_resize(std::span<const TensorType>, std::span<const int64_t> p) {
  AttrMap attrs;
  if (p.size() < kResizeParamCount) return attrs;
  static const char* const kModes[] = {"nearest", "linear"};
  static const char* const kCoordinates[] = {"half_pixel", "align_corners", "asymmetric",
                                             "pytorch_half_pixel", "tf_half_pixel_for_nn"};
  static const char* const kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  const int64_t mode = p[kResizeMode], coordinate = p[kCoordinateMode], nearest = p[kNearestMode];
  if (mode >= 0 && mode < 2) attrs["mode"] = AttrValue{std::string(kModes[mode])};
  if (coordinate >= 0 && coordinate < 5)
    attrs["coordinate_transformation_mode"] = AttrValue{std::string(kCoordinates[coordinate])};
  if (mode == 0 && nearest >= 0 && nearest < 4)
    attrs["nearest_mode"] = AttrValue{std::string(kNearest[nearest])};
  if (p.size() >= kResizeParamCountWithScales) {
    std::vector<AttrValue> scales{AttrValue{1.0}, AttrValue{1.0},
                                  AttrValue{std::bit_cast<double>(p[kScaleH])},
                                  AttrValue{std::bit_cast<double>(p[kScaleW])}};
    attrs["scales"] = AttrValue{std::move(scales)};
  } else {
    attrs["sizes"] = int_list_value(p.subspan(kOutH, 2));
  }
  return attrs;
}

Result<std::vector<TensorType>> infer_resize(std::span<const TensorType> in, std::span<const int64_t> p) {
  if (p.size() != kResizeParamCountWithScales)
    HEXIR_RETURN_IF_ERROR(check_param_count(kResize, p, kResizeParamCount));
  const TensorType& x = in[0];
  if (p.size() == kResizeParamCountWithScales)
    for (int d = 0; d < 2; ++d) {
      const double scale = std::bit_cast<double>(p[kScaleH + d]);
      if (!(scale > 0) || !(scale < static_cast<double>(kMaxResizeDim)))
        return invalid_argument(prefix(kResize) + "scale word " + std::to_string(d) + " is not a positive number");
    }
  if (x.rank() != 4)
    return invalid_argument(prefix(kResize) + "input " + x.to_string() + " is not [N,C,H,W]");
  if (p[kResizeMode] < 0 || p[kResizeMode] > 1 || p[kCoordinateMode] < 0 || p[kCoordinateMode] > 4 ||
      p[kNearestMode] < 0 || p[kNearestMode] > 3 || (p[kResizeMode] == 1 && p[kNearestMode] != 0))
    return invalid_argument(prefix(kResize) + "mode words " + shape_str(p.first(3)) + " are out of range");
  for (int d = 0; d < 2; ++d) {
    const int64_t size = p[kOutH + d];
    if (size < 0 || size > kMaxResizeDim)
      return invalid_argument(prefix(kResize) + "result dim " + std::to_string(size) + " is not in 0..2^40");
    if (size > 0 && x.dims[2 + d] == 0)
      return invalid_argument(prefix(kResize) + "an empty input dim cannot be resized to " +
                              std::to_string(size));
  }
  return one({x.dtype, {x.dims[0], x.dims[1], p[kOutH], p[kOutW]}});
}

void plan_resize(const PlanInput& op, OpPlan& out) {
  ResizePlan& p = out.start<ResizePlan>();
  const auto& x = op.inputs[0].dims;
  p.n = x[0], p.c = x[1], p.h = x[2], p.w = x[3];
  p.oh = op.params[kOutH], p.ow = op.params[kOutW];
  p.mode = static_cast<int32_t>(op.params[kResizeMode]);
  p.coordinate_mode = static_cast<int32_t>(op.params[kCoordinateMode]);
  p.nearest_mode = static_cast<int32_t>(op.params[kNearestMode]);
  p.scale_h = p.h > 0 ? static_cast<double>(p.oh) / static_cast<double>(p.h) : 1.0;
  p.scale_w = p.w > 0 ? static_cast<double>(p.ow) / static_cast<double>(p.w) : 1.0;
  if (op.params.size() == kResizeParamCountWithScales) {
    p.scale_h = std::bit_cast<double>(op.params[kScaleH]);
    p.scale_w = std::bit_cast<double>(op.params[kScaleW]);
  }
}


// ---- quantized_conv2d -------------------------------------------------------------

enum QuantizedConvParam {
  kQKernelH,
  kQKernelW,
  kQStrideH,
  kQStrideW,
  kQPadTop,
  kQPadLeft,
  kQPadBottom,
  kQPadRight,
  kQDilationH,
  kQDilationW,
  kQGroups,
  kQXZero,
  kQYZero,
  kQYMin,
  kQYMax,
  kQuantizedConvParamCount
};

Result<std::vector<int64_t>> lower_quantized_conv2d(std::span<const TensorType>, const AttrMap& attrs,
                                                    std::span<const TensorType>) {
  constexpr OpId id = kQuantizedConv2d;
  HEXIR_RETURN_IF_ERROR(check_attr_names(
      id, attrs, {"kernel", "strides", "pads", "dilations", "groups", "x_zero", "y_zero", "y_min", "y_max"}));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, pair_attr(id, attrs, "kernel", -1));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> strides, pair_attr(id, attrs, "strides", 1));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, pair_attr(id, attrs, "dilations", 1));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> pads, int_list_attr(id, attrs, "pads"));
  if (pads.empty()) pads = {0, 0, 0, 0};
  if (pads.size() != 4) return invalid_argument(prefix(id) + "attribute 'pads' takes 4 values [top, left, bottom, right]");
  HEXIR_ASSIGN_OR_RETURN(int64_t groups, int_attr(id, attrs, "groups", 1));
  HEXIR_ASSIGN_OR_RETURN(int64_t x_zero, int_attr(id, attrs, "x_zero", 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t y_zero, int_attr(id, attrs, "y_zero", 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t y_min, int_attr(id, attrs, "y_min", 0));
  HEXIR_ASSIGN_OR_RETURN(int64_t y_max, int_attr(id, attrs, "y_max", 255));
  return std::vector<int64_t>{kernel[0], kernel[1], strides[0], strides[1], pads[0], pads[1], pads[2],
                              pads[3],   dilations[0], dilations[1], groups, x_zero, y_zero, y_min, y_max};
}

AttrMap raise_quantized_conv2d(std::span<const TensorType>, std::span<const int64_t> p) {
  AttrMap attrs;
  attrs["kernel"] = param_list_value(p, {kQKernelH, kQKernelW});
  attrs["strides"] = param_list_value(p, {kQStrideH, kQStrideW});
  attrs["pads"] = param_list_value(p, {kQPadTop, kQPadLeft, kQPadBottom, kQPadRight});
  attrs["dilations"] = param_list_value(p, {kQDilationH, kQDilationW});
  attrs["groups"] = AttrValue{param_at(p, kQGroups)};
  attrs["x_zero"] = AttrValue{param_at(p, kQXZero)};
  attrs["y_zero"] = AttrValue{param_at(p, kQYZero)};
  attrs["y_min"] = AttrValue{param_at(p, kQYMin)};
  attrs["y_max"] = AttrValue{param_at(p, kQYMax)};
  return attrs;
}

uint64_t flops_quantized_conv2d(std::span<const TensorType> in, std::span<const TensorType> out,
                                std::span<const int64_t> p) {
  const uint64_t n = output_elements_sat(out);
  if (in.empty() || in[0].rank() != 4 || p.size() != kQuantizedConvParamCount || p[kQGroups] < 1) return n;
  const uint64_t taps = mul_sat(static_cast<uint64_t>(std::max<int64_t>(p[kQKernelH], 0)),
                                static_cast<uint64_t>(std::max<int64_t>(p[kQKernelW], 0)));
  const uint64_t per_group = static_cast<uint64_t>(std::max<int64_t>(in[0].dims[3] / p[kQGroups], 0));
  return add_sat(mul_sat(mul_sat(n, 2), mul_sat(taps, per_group)), n);
}

Result<std::vector<TensorType>> infer_quantized_conv2d(std::span<const TensorType> in, std::span<const int64_t> p) {
  constexpr OpId id = kQuantizedConv2d;
  HEXIR_RETURN_IF_ERROR(check_param_count(id, p, kQuantizedConvParamCount));
  const TensorType &x = in[0], &w = in[1], &bias = in[2], &multiplier = in[3];
  if (x.dtype != DType::kU8 || x.rank() != 4)
    return invalid_argument(prefix(id) + "input " + x.to_string() + " is not u8[N,H,W,C]");
  if (bias.dtype != DType::kI32 || bias.rank() != 1 || multiplier.dtype != DType::kF32 || !(multiplier.dims == bias.dims))
    return invalid_argument(prefix(id) + "bias " + bias.to_string() + " and multiplier " + multiplier.to_string() +
                            " are not i32[K] and f32[K]");
  for (int i : {kQKernelH, kQKernelW, kQStrideH, kQStrideW, kQDilationH, kQDilationW})
    if (p[i] < 1 || p[i] > (int64_t{1} << 30))
      return invalid_argument(prefix(id) + "kernel sizes, strides and dilations must be in 1..2^30");
  for (int i : {kQPadTop, kQPadLeft, kQPadBottom, kQPadRight})
    if (p[i] < 0 || p[i] > (int64_t{1} << 30)) return invalid_argument(prefix(id) + "pads must be in 0..2^30");
  for (int i : {kQXZero, kQYZero, kQYMin, kQYMax})
    if (p[i] < 0 || p[i] > 255) return invalid_argument(prefix(id) + "zero points and bounds must be in 0..255");
  if (p[kQYMin] > p[kQYMax])
    return invalid_argument(prefix(id) + "y_min " + std::to_string(p[kQYMin]) + " is above y_max " +
                            std::to_string(p[kQYMax]));
  const int64_t c = x.dims[3], k = bias.dims[0], groups = p[kQGroups];
  if (groups < 1 || groups > std::max<int64_t>(c, 1) || c % groups != 0 || k % groups != 0)
    return invalid_argument(prefix(id) + "groups " + std::to_string(groups) + " must divide the " + std::to_string(c) +
                            " input and " + std::to_string(k) + " output channels");
  const int64_t taps = p[kQKernelH] * p[kQKernelW];  // each <= 2^30
  const bool depthwise = groups == c && groups == k && c > 0;
  const int64_t per_group = c / groups;
  if (taps > kQuantizedConvMaxDepth || per_group > kQuantizedConvMaxDepth || taps * per_group > kQuantizedConvMaxDepth)
    return invalid_argument(prefix(id) + "the window sums " + std::to_string(taps) + " taps of " +
                            std::to_string(per_group) + " channels: over " + std::to_string(kQuantizedConvMaxDepth) +
                            " (int32 sums would overflow)");
  const int64_t depth = (taps * per_group + 3) / 4 * 4;
  const std::vector<int64_t> weights =
      depthwise ? std::vector<int64_t>{taps, c}
                : std::vector<int64_t>{groups, (k / groups + kQuantizedConvBlock - 1) / kQuantizedConvBlock, depth / 4,
                                       kQuantizedConvBlock, 4};
  if (w.dtype != DType::kI8 || !(w.dims == weights))
    return invalid_argument(prefix(id) + "weights " + w.to_string() + " are not i8" + shape_str(weights) +
                            (depthwise ? " (depthwise: [taps, C])" : " ([groups, ceil(K/groups/16), depth/4, 16, 4])"));
  int64_t out_hw[2];
  for (int d = 0; d < 2; ++d) {
    const int64_t extent = x.dims[1 + d] + p[kQPadTop + d] + p[kQPadBottom + d];
    const int64_t kernel = p[kQKernelH + d], dilation = p[kQDilationH + d];
    const bool fits = kernel - 1 <= (extent - 1) / dilation;
    const int64_t window = fits ? dilation * (kernel - 1) + 1 : extent + 1;
    if (extent < 1 || !fits || window > extent)
      return invalid_argument(prefix(id) + "the " + std::to_string(kernel) + "-wide kernel (dilated " +
                              std::to_string(window) + ") does not fit the padded input extent " +
                              std::to_string(extent));
    out_hw[d] = (extent - window) / p[kQStrideH + d] + 1;
  }
  return one({DType::kU8, {x.dims[0], out_hw[0], out_hw[1], k}});
}

void plan_quantized_conv2d(const PlanInput& op, OpPlan& out) {
  QuantizedConv2dPlan& p = out.start<QuantizedConv2dPlan>();
  const auto& x = op.inputs[0].dims;
  const auto& o = op.outputs[0].dims;
  const auto& params = op.params;
  p.n = x[0], p.h = x[1], p.w = x[2], p.c = x[3];
  p.k = o[3], p.oh = o[1], p.ow = o[2];
  p.kh = params[kQKernelH], p.kw = params[kQKernelW];
  p.stride_h = params[kQStrideH], p.stride_w = params[kQStrideW];
  p.pad_top = params[kQPadTop], p.pad_left = params[kQPadLeft];
  p.dilation_h = params[kQDilationH], p.dilation_w = params[kQDilationW];
  p.groups = params[kQGroups];
  p.c_per_group = p.c / p.groups;
  p.k_per_group = p.k / p.groups;
  p.depthwise = p.groups == p.c && p.groups == p.k ? 1 : 0;
  p.depth = (p.kh * p.kw * p.c_per_group + 3) / 4 * 4;
  p.x_zero = static_cast<int32_t>(params[kQXZero]);
  p.y_zero = static_cast<int32_t>(params[kQYZero]);
  p.y_min = static_cast<int32_t>(params[kQYMin]);
  p.y_max = static_cast<int32_t>(params[kQYMax]);
}

constexpr OpDef kDefs[] = {
    {kConv2d, "conv2d", 2, 4, 1, 1, true, false, false, 0, lower_conv2d, raise_conv2d, infer_conv2d,
     flops_conv<kConv2d>, nullptr, plan_conv2d},
    // max_pool: float, or u8 (its rule checks: a QDQ model's pool on quantized values).
    {kMaxPool, "max_pool", 1, 1, 1, 1, false, false, false, 0, lower_pool<kMaxPool>, raise_pool<kMaxPool>,
     infer_pool<kMaxPool>, flops_pool, nullptr, plan_pool<kMaxPool>},
    {kAveragePool, "average_pool", 1, 1, 1, 1, true, false, false, 0, lower_pool<kAveragePool>,
     raise_pool<kAveragePool>, infer_pool<kAveragePool>, flops_pool, nullptr, plan_pool<kAveragePool>},
    // resize: one per element written (the taps it blends are not counted).
    {kResize, "resize", 1, 1, 1, 1, true, false, false, 0, lower_resize, raise_resize, infer_resize,
     flops_per_element, nullptr, plan_resize},
    {kConvTranspose, "conv_transpose", 2, 3, 1, 1, true, false, false, 0, lower_conv_transpose,
     raise_conv_transpose, infer_conv_transpose, flops_conv<kConvTranspose>, workspace_conv_transpose,
     plan_conv_transpose},
    {kSeparableConv2d, "separable_conv2d", 3, 6, 1, 1, true, false, false, 0, lower_separable_conv2d,
     raise_separable_conv2d, infer_separable_conv2d, flops_separable_conv2d, nullptr, plan_separable_conv2d},
    {kQuantizedConv2d, "quantized_conv2d", 4, 4, 1, 1, false, false, false, 0, lower_quantized_conv2d,
     raise_quantized_conv2d, infer_quantized_conv2d, flops_quantized_conv2d, nullptr, plan_quantized_conv2d},
};

}  // namespace

std::span<const OpDef> spatial_ops() { return kDefs; }

}  // namespace hexir::ops::internal

namespace hexir::ops {

// conv2d's words: the 9 of kConvParamCount, then the epilogue's 3 (when
// fused), then the layout word when channels-last (1; 2: by Winograd's
// F(2x2, 3x3); 3: by F(4x4, 3x3)): 9, 12, 10 or 13 words. Files written before channels-last
// have 9 or 12: unchanged.
bool pool2d_channels_last(std::span<const int64_t> params) {
  return params.size() == internal::kPoolParamCount + 1 && params.back() == 1;
}

bool conv2d_channels_last(std::span<const int64_t> params) {
  using internal::kConvParamCount, internal::kEpilogueWords;
  return (params.size() == kConvParamCount + 1 || params.size() == kConvParamCount + kEpilogueWords + 1) &&
         (params.back() >= 1 && params.back() <= 3);
}

bool conv2d_winograd(std::span<const int64_t> params) { return conv2d_winograd_tile(params) != 0; }

int64_t conv2d_winograd_tile(std::span<const int64_t> params) {
  if (!conv2d_channels_last(params)) return 0;
  return params.back() == 2 ? 2 : params.back() == 3 ? 4 : 0;
}

size_t epilogue_offset(OpId op) {
  return op == OpId::kConv2d ? internal::kConvParamCount : op == OpId::kMatmul ? 1 : 0;  // matmul: transpose_b; add, mul: 0
}

}  // namespace hexir::ops
