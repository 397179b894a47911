// Attribute sets for every operator, with operands they fit: what the tests
// lower to representative parameter words (the ops round trip in
// raise_test.cc, the .hxir printer's in tests/compiler/frontends/hxir/printer_test.cc).
// A new operator needs at least one sample here; both tests say which is missing.
#pragma once

#include <string>
#include <vector>

#include "hexir/ops/op.h"

namespace hexir::ops::testing {

struct OpSample {
  OpId op;
  std::vector<TensorType> inputs;
  AttrMap attrs;
  // Stated result types, where lowering takes something from them (reshape's
  // shape, split's part count); empty otherwise.
  std::vector<TensorType> declared;
};

inline std::vector<OpSample> op_samples() {
  using enum OpId;
  auto t = [](DType dtype, std::vector<int64_t> dims) { return TensorType{dtype, std::move(dims)}; };
  auto f32 = [&](std::vector<int64_t> dims) { return t(DType::kF32, std::move(dims)); };
  auto i64 = [](int64_t v) { return AttrValue{v}; };
  auto f64 = [](double v) { return AttrValue{v}; };
  auto str = [](const char* v) { return AttrValue{std::string(v)}; };
  auto list = [](std::vector<int64_t> v) {
    std::vector<AttrValue> out;
    for (int64_t x : v) out.emplace_back().value = x;
    return AttrValue{std::move(out)};
  };
  auto floats = [](std::vector<double> v) {
    std::vector<AttrValue> out;
    for (double x : v) out.emplace_back().value = x;
    return AttrValue{std::move(out)};
  };
  const TensorType scalar_i64 = t(DType::kI64, {});
  std::vector<OpSample> s;
  // Elementwise: binary and unary without parameters.
  for (OpId op : {kAdd, kSub, kMul, kDiv, kMaximum, kMinimum, kPow})
    s.push_back({op, {f32({2, 3}), f32({3})}, {}, {}});
  for (OpId op : {kRelu, kGelu, kSilu, kSigmoid, kTanh, kExp, kSqrt, kRsqrt, kNeg, kHardSwish, kErf, kLog,
                  kAbs, kReciprocal, kSoftplus})
    s.push_back({op, {f32({2, 3})}, {}, {}});
  // add and mul with a fused epilogue (fusion.h), the affine one included.
  s.push_back({kAdd, {f32({2, 3}), f32({2, 3})}, {{"activation", str("relu")}}, {}});
  s.push_back(
      {kAdd,
       {f32({2, 3}), f32({3})},
       {{"activation", str("affine")}, {"activation_alpha", f64(0.5)}, {"activation_beta", f64(-1.25)}},
       {}});
  s.push_back({kMul,
               {f32({2, 3}), f32({})},
               {{"activation", str("leaky_relu")}, {"activation_alpha", f64(0.3)}},
               {}});
  s.push_back({kGelu, {f32({4})}, {{"approximate", str("tanh")}}, {}});
  s.push_back({kLeakyRelu, {f32({4})}, {{"alpha", f64(0.125)}}, {}});
  s.push_back({kClip, {f32({4})}, {{"min", f64(-1.5)}, {"max", f64(6.0)}}, {}});
  s.push_back({kClip, {f32({4})}, {{"max", f64(6.0)}}, {}});  // min unbounded
  s.push_back({kHardSigmoid, {f32({4})}, {{"alpha", f64(0.25)}, {"beta", f64(0.375)}}, {}});
  for (OpId op : {kEqual, kLess, kGreater})
    s.push_back({op, {t(DType::kI32, {2, 3}), t(DType::kI32, {2, 1})}, {}, {}});
  s.push_back({kNot, {t(DType::kBool, {5})}, {}, {}});
  // Integer and boolean arithmetic, rounding.
  for (OpId op : {kAdd, kSub, kMul, kDiv, kMaximum, kMinimum})
    s.push_back({op, {t(DType::kI64, {2, 3}), t(DType::kI64, {3})}, {}, {}});
  s.push_back({kNeg, {t(DType::kI32, {4})}, {}, {}});
  s.push_back({kAbs, {t(DType::kI64, {4})}, {}, {}});
  s.push_back({kMod, {t(DType::kI32, {2, 3}), t(DType::kI32, {3})}, {}, {}});
  s.push_back({kMod, {f32({2, 3}), f32({1})}, {{"fmod", i64(1)}}, {}});
  for (OpId op : {kLessOrEqual, kGreaterOrEqual})
    s.push_back({op, {t(DType::kI64, {2, 3}), t(DType::kI64, {})}, {}, {}});
  for (OpId op : {kAnd, kOr, kXor}) s.push_back({op, {t(DType::kBool, {2, 3}), t(DType::kBool, {3})}, {}, {}});
  s.push_back({kSign, {t(DType::kI32, {4})}, {}, {}});
  for (OpId op : {kSign, kCeil, kFloor, kRound}) s.push_back({op, {f32({2, 3})}, {}, {}});
  s.push_back({kWhere, {t(DType::kBool, {2, 3}), f32({2, 3}), f32({3})}, {}, {}});
  s.push_back({kCast, {f32({2, 3})}, {{"to", str("i32")}}, {}});
  s.push_back({kCast, {t(DType::kI64, {2})}, {{"to", str("f16")}}, {}});
  // Contractions and windows.
  s.push_back({kMatmul, {f32({2, 4}), f32({4, 3})}, {}, {}});
  s.push_back({kMatmul, {f32({2, 2, 4}), f32({3, 4}), f32({3})}, {{"transpose_b", i64(1)}}, {}});
  s.push_back({kMatmul,
               {f32({2, 4}), f32({4, 3})},
               {{"activation", str("clip")}, {"activation_alpha", f64(0.0)}, {"activation_beta", f64(6.0)}},
               {}});
  s.push_back({kMatmul, {f32({4}), f32({4, 3})}, {{"activation", str("gelu_tanh")}}, {}});
  s.push_back({kConv2d, {f32({1, 2, 5, 5}), f32({4, 2, 3, 3})}, {}, {}});
  s.push_back({kConv2d,
               {f32({1, 2, 7, 6}), f32({4, 1, 3, 2}), f32({4})},
               {{"strides", list({2, 1})},
                {"pads", list({1, 0, 2, 1})},
                {"dilations", list({1, 2})},
                {"groups", i64(2)},
                {"activation", str("hard_sigmoid")},
                {"activation_alpha", f64(0.5)},
                {"activation_beta", f64(0.25)}},
               {}});
  s.push_back({kConv2d,
               {f32({1, 6, 6, 3}), f32({8, 3, 3, 3}), f32({8})},
               {{"channels_last", i64(1)}, {"pads", list({1})}, {"activation", str("silu")}},
               {}});
  s.push_back({kConv2d, {f32({1, 5, 5, 3}), f32({2, 3, 1, 1})}, {{"channels_last", i64(1)}}, {}});
  s.push_back({kSeparableConv2d,
               {f32({1, 3, 6, 6}), f32({3, 1, 3, 3}), f32({5, 3, 1, 1}), f32({3}), f32({5})},
               {{"pads", list({1, 1, 1, 1})},
                {"depthwise_activation", str("clip")},
                {"depthwise_activation_alpha", f64(0.0)},
                {"depthwise_activation_beta", f64(6.0)},
                {"activation", str("relu")}},
               {}});
  s.push_back({kSeparableConv2d,
               {f32({1, 3, 6, 6}), f32({3, 1, 3, 3}), f32({5, 3, 1, 1}), f32({5}), f32({1, 5, 2, 2})},
               {{"strides", list({2, 2})}, {"biases", list({0, 1})}},
               {}});
  s.push_back({kConvTranspose,
               {f32({1, 2, 3, 3}), f32({2, 3, 3, 3}), f32({3})},
               {{"strides", list({2, 2})}, {"pads", list({1, 1, 0, 0})}, {"output_padding", list({1, 0})}},
               {}});
  s.push_back(
      {kMaxPool, {f32({1, 2, 6, 6})}, {{"kernel_shape", list({2, 2})}, {"strides", list({2, 2})}}, {}});
  s.push_back({kMaxPool,
               {f32({1, 6, 6, 2})},
               {{"kernel_shape", list({2, 2})}, {"strides", list({2, 2})}, {"channels_last", i64(1)}},
               {}});
  s.push_back({kMaxPool,
               {f32({1, 1, 7, 7})},
               {{"kernel_shape", list({3, 2})}, {"dilations", list({2, 1})}, {"ceil_mode", i64(1)}},
               {}});
  s.push_back({kAveragePool,
               {f32({1, 2, 5, 5})},
               {{"kernel_shape", list({3, 3})},
                {"pads", list({1, 1, 1, 1})},
                {"strides", list({2, 2})},
                {"count_include_pad", i64(1)}},
               {}});
  s.push_back({kResize,
               {f32({1, 2, 4, 4})},
               {{"mode", str("linear")},
                {"coordinate_transformation_mode", str("align_corners")},
                {"sizes", list({8, 6})}},
               {}});
  s.push_back({kResize,
               {f32({1, 1, 4, 5})},
               {{"nearest_mode", str("floor")}, {"scales", floats({1.0, 1.0, 0.6, 1.5})}},
               {}});  // 4 * 0.6 is not whole: the scale words stay
  // Row-wise.
  s.push_back({kSoftmax, {f32({2, 5})}, {}, {}});
  s.push_back({kQuantizeLinear, {f32({2, 3, 4}), f32({3}), t(DType::kI8, {3})}, {{"axis", i64(1)}}, {}});
  s.push_back({kQuantizeLinear, {f32({5}), f32({}), t(DType::kU8, {})}, {}, {}});
  s.push_back({kDequantizeLinear, {t(DType::kU8, {2, 3}), f32({1}), t(DType::kU8, {1})}, {}, {}});
  s.push_back({kDequantizeLinear, {t(DType::kI32, {4, 3}), f32({3}), t(DType::kI32, {3})}, {{"axis", i64(-1)}}, {}});
  s.push_back({kQuantizedMatmul, {f32({2, 3, 8}), t(DType::kI8, {5, 8}), f32({5})}, {}, {}});
  s.push_back({kQuantizedMatmul, {f32({8}), t(DType::kI8, {5, 8}), f32({5}), f32({5})}, {}, {}});
  s.push_back({kInt4Matmul, {f32({2, 3, 64}), t(DType::kU8, {5, 32}), t(DType::kF16, {5, 2})}, {}, {}});
  s.push_back({kInt4Matmul, {f32({64}), t(DType::kU8, {5, 32}), t(DType::kF16, {5, 1}), f32({5})}, {}, {}});
  s.push_back({kDequantizeInt4, {t(DType::kU8, {2, 3, 48}), t(DType::kF16, {2, 3, 3})}, {}, {}});
  s.push_back({kIntegerMatmul, {t(DType::kU8, {2, 3, 70}), t(DType::kI8, {5, 70}), t(DType::kU8, {})}, {}, {}});
  s.push_back({kQuantizedConv2d,
               {t(DType::kU8, {1, 6, 5, 8}), t(DType::kI8, {2, 1, 9, 16, 4}), t(DType::kI32, {12}), f32({12})},
               {{"kernel", list({3, 3})}, {"pads", list({1, 1, 1, 1})}, {"groups", i64(2)}, {"x_zero", i64(128)},
                {"y_zero", i64(3)}, {"y_min", i64(3)}},
               {}});
  s.push_back({kQuantizedAdd, {t(DType::kU8, {2, 3, 4}), t(DType::kU8, {2, 3, 4})},
               {{"a_zero", i64(128)}, {"b_zero", i64(3)}, {"y_zero", i64(7)}, {"y_min", i64(7)},
                {"a_scale", f64(0.05)}, {"b_scale", f64(0.125)}, {"y_scale", f64(0.1)}},
               {}});
  s.push_back({kLstmCell, {f32({2, 12}), f32({2, 3})}, {}, {}});
  s.push_back({kQuantizedConv2d, {t(DType::kU8, {1, 6, 5, 8}), t(DType::kI8, {9, 8}), t(DType::kI32, {8}), f32({8})},
               {{"kernel", list({3, 3})}, {"strides", list({2, 2})}, {"groups", i64(8)}}, {}});
  s.push_back({kAttention, {f32({2, 3, 1, 8}), f32({2, 3, 10, 8}), f32({2, 3, 10, 4}), t(DType::kI64, {1})},
               {{"scale", f64(0.125)}, {"offset", i64(1)}}, {}});
  s.push_back({kSoftmax, {f32({2, 5, 3})}, {{"axis", i64(1)}}, {}});
  s.push_back({kLayernorm,
               {f32({2, 3, 4}), f32({3, 4}), f32({3, 4})},
               {{"axis", i64(1)}, {"epsilon", f64(1e-3)}},
               {}});
  for (OpId op : {kReduceSum, kReduceMean, kReduceMax, kReduceMin, kReduceProd, kReduceL1, kReduceL2,
                  kReduceLogSumExp, kReduceSumSquare, kReduceLogSum}) {
    s.push_back({op, {f32({2, 3, 4})}, {{"axes", list({-1, 0})}, {"keepdims", i64(1)}}, {}});
    s.push_back({op, {f32({2, 3})}, {}, {}});  // every axis
  }
  s.push_back({kReduceMin, {t(DType::kI64, {2, 3})}, {{"axes", list({1})}}, {}});
  s.push_back({kArgMin, {t(DType::kI32, {2, 3, 4})}, {{"axis", i64(1)}, {"keepdims", i64(1)}}, {}});
  s.push_back({kLogSoftmax, {f32({2, 5, 3})}, {{"axis", i64(1)}}, {}});
  s.push_back({kHardmax, {f32({2, 5})}, {}, {}});
  s.push_back({kTopK, {f32({2, 5})}, {{"k", i64(3)}}, {}});
  s.push_back({kTopK, {t(DType::kI64, {4, 5})}, {{"k", i64(2)}, {"axis", i64(0)}, {"largest", i64(0)}}, {}});
  s.push_back({kArgMax,
               {f32({2, 3, 4})},
               {{"axis", i64(-2)}, {"keepdims", i64(0)}, {"select_last_index", i64(1)}},
               {}});
  // Data movement.
  s.push_back({kTranspose, {f32({2, 3, 4})}, {{"perm", list({1, 2, 0})}}, {}});
  s.push_back({kTranspose, {t(DType::kU8, {2, 3})}, {}, {}});
  s.push_back({kReshape, {f32({2, 3})}, {}, {f32({3, 2})}});
  s.push_back({kConcat, {f32({2, 3}), f32({2, 1}), f32({2, 2})}, {{"axis", i64(1)}}, {}});
  s.push_back({kCopy, {t(DType::kI64, {3})}, {}, {}});
  s.push_back({kSplit, {f32({2, 6})}, {{"axis", i64(1)}, {"sizes", list({1, 2, 3})}}, {}});
  s.push_back({kSplit, {f32({4, 2})}, {}, {f32({2, 2}), f32({2, 2})}});  // equal parts
  s.push_back({kGather, {f32({4, 3}), t(DType::kI64, {2})}, {{"axis", i64(0)}}, {}});
  s.push_back({kGather, {t(DType::kI32, {4, 3}), t(DType::kI32, {2, 2})}, {{"axis", i64(-1)}}, {}});
  s.push_back({kSlice,
               {f32({4, 6, 3})},
               {{"starts", list({1, -1})},
                {"ends", list({3, -100})},
                {"axes", list({0, 1})},
                {"steps", list({1, -2})}},
               {}});
  s.push_back({kSlice, {f32({4, 6})}, {{"starts", list({2})}, {"ends", list({2})}}, {}});  // an empty dim
  s.push_back({kPad, {f32({2, 3})}, {{"pads", list({1, 0, 0, 2})}, {"value", f64(1.5)}}, {}});
  s.push_back({kPad, {t(DType::kI8, {3})}, {{"pads", list({2, -1})}, {"value", i64(-3)}}, {}});
  s.push_back({kPad, {t(DType::kF16, {3})}, {{"pads", list({1, 1})}, {"value", f64(-0.5)}}, {}});
  s.push_back({kPad, {f32({3, 4})}, {{"mode", str("reflect")}, {"pads", list({1, 2, 1, 2})}}, {}});
  s.push_back({kExpand, {f32({3, 1})}, {{"shape", list({2, 3, 4})}}, {}});
  s.push_back({kDynamicSlice, {f32({4, 5}), scalar_i64, scalar_i64}, {{"sizes", list({2, 3})}}, {}});
  s.push_back({kUpdateSlice, {f32({4, 5}), f32({2, 3}), scalar_i64, scalar_i64}, {}, {}});
  s.push_back(
      {kScatterND, {f32({4, 5}), t(DType::kI64, {2, 1}), f32({2, 5})}, {{"reduction", str("add")}}, {}});
  s.push_back({kScatterND, {t(DType::kI32, {4, 5}), t(DType::kI32, {3, 2}), t(DType::kI32, {3})}, {}, {}});
  s.push_back({kScatterElements,
               {f32({4, 5}), t(DType::kI64, {4, 2}), f32({4, 2})},
               {{"axis", i64(-1)}, {"reduction", str("max")}},
               {}});
  // The unary math, the ONNX activations, prelu and group_norm.
  for (OpId op : {kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh, kIsNaN, kMish,
                  kSoftsign})
    s.push_back({op, {f32({2, 3})}, {}, {}});
  s.push_back({kIsInf, {f32({4})}, {{"detect_positive", i64(0)}, {"detect_negative", i64(1)}}, {}});
  s.push_back({kElu, {f32({4})}, {{"alpha", f64(0.5)}}, {}});
  s.push_back({kSelu, {f32({4})}, {{"alpha", f64(1.5)}, {"gamma", f64(2.0)}}, {}});
  s.push_back({kCelu, {f32({4})}, {{"alpha", f64(2.0)}}, {}});
  s.push_back({kThresholdedRelu, {f32({4})}, {{"alpha", f64(0.25)}}, {}});
  s.push_back({kShrink, {f32({4})}, {{"lambd", f64(1.5)}, {"bias", f64(0.5)}}, {}});
  s.push_back({kPRelu, {f32({2, 3, 4}), f32({3, 1})}, {}, {}});
  s.push_back({kGroupNorm, {f32({2, 6, 3, 3}), f32({6}), f32({6})}, {{"groups", i64(3)}, {"epsilon", f64(1e-3)}}, {}});
  s.push_back({kGatherElements, {f32({4, 5}), t(DType::kI64, {6, 2})}, {{"axis", i64(0)}}, {}});
  s.push_back(
      {kGatherND, {t(DType::kF16, {2, 3, 4}), t(DType::kI32, {2, 5, 1})}, {{"batch_dims", i64(1)}}, {}});
  s.push_back({kCumSum,
               {t(DType::kI64, {3, 4})},
               {{"axis", i64(-1)}, {"exclusive", i64(1)}, {"reverse", i64(1)}},
               {}});
  s.push_back({kNonZero, {f32({3, 4})}, {}, {}});
  s.push_back({kNonZero, {f32({3, 4})}, {{"bound", i64(5)}}, {}});
  s.push_back({kCompress, {f32({3, 4}), t(DType::kBool, {3})}, {{"axis", i64(0)}, {"bound", i64(2)}}, {}});
  s.push_back({kNonMaxSuppression,
               {f32({2, 10, 4}), f32({2, 3, 10}), scalar_i64, f32({}), f32({})},
               {{"center_point_box", i64(1)}, {"max_output_boxes_per_class", i64(4)}},
               {}});
  s.push_back({kCompress, {f32({3, 4}), t(DType::kBool, {3})}, {{"axis", i64(0)}}, {}});
  s.push_back({kCompress, {f32({3, 4}), t(DType::kBool, {5})}, {}, {}});
  s.push_back({kCompact, {TensorType{DType::kI64, {2, 5}, 1}, scalar_i64}, {}, {}});
  s.push_back({OpId::kBound, {f32({3, 4}), scalar_i64}, {{"dim", i64(1)}}, {}});
  s.push_back({OpId::kUnbound, {TensorType{DType::kF32, {6, 4}, 0}}, {}, {}});
  return s;
}

}  // namespace hexir::ops::testing
