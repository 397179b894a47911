// The handler table: every ONNX op type the importer maps, and its handler
// (handlers.h). docs/onnx.md lists the same operators. Keep one entry a
// line, as written: scripts/real-models/harness.mjs reads the op types from
// this file's text to name every operator a model lacks.
#include <map>
#include <string>

#include "frontends/onnx/handlers.h"

namespace hexir::compiler::onnx_import {

Handler find_handler(std::string_view op_type) {
  static const std::map<std::string, Handler, std::less<>> kHandlers = {
      // elementwise.cc
      {"Add", op_binary},
      {"Sub", op_binary},
      {"Mul", op_binary},
      {"Div", op_binary},
      {"Max", op_variadic},
      {"Min", op_variadic},
      {"Sum", op_variadic},
      {"Mean", op_variadic},
      {"Equal", op_compare},
      {"Less", op_compare},
      {"Greater", op_compare},
      {"LessOrEqual", op_compare},
      {"GreaterOrEqual", op_compare},
      {"And", op_logical},
      {"Or", op_logical},
      {"Xor", op_logical},
      {"Mod", op_mod},
      {"Sign", op_unary},
      {"Round", op_unary},
      {"Not", op_unary},
      {"Relu", op_unary},
      {"Sigmoid", op_unary},
      {"Tanh", op_unary},
      {"Exp", op_unary},
      {"Sqrt", op_unary},
      {"Neg", op_unary},
      {"Reciprocal", op_unary},
      {"Softplus", op_unary},
      {"Abs", op_unary},
      {"Floor", op_unary},
      {"Ceil", op_unary},
      {"Gelu", op_unary},
      {"Erf", op_unary},
      {"Log", op_unary},
      {"LeakyRelu", op_unary},
      {"HardSigmoid", op_unary},
      {"HardSwish", op_unary},
      {"Clip", op_clip},
      {"Pow", op_pow},
      {"Cast", op_cast},
      {"Where", op_where},
      {"Identity", op_identity},
      {"Dropout", op_dropout},
      // nn.cc
      {"MatMul", op_matmul},
      {"Gemm", op_gemm},
      {"ArgMax", op_argmax},
      {"Softmax", op_softmax},
      {"LayerNormalization", op_layernorm},
      {"BatchNormalization", op_batchnorm},
      {"ReduceMean", op_reduce},
      {"ReduceSum", op_reduce},
      {"ReduceMax", op_reduce},
      {"MaxPool", op_pool},
      {"AveragePool", op_pool},
      {"GlobalAveragePool", op_global_average_pool},
      {"Resize", op_resize},
      {"Upsample", op_resize},
      {"Conv", op_conv},
      {"ConvTranspose", op_conv_transpose},
      // einsum.cc
      {"Einsum", op_einsum},
      // shape.cc
      {"Reshape", op_reshape},
      {"Flatten", op_flatten},
      {"Squeeze", op_squeeze},
      {"Unsqueeze", op_unsqueeze},
      {"Transpose", op_transpose},
      {"Concat", op_concat},
      {"Pad", op_pad},
      {"Split", op_split},
      {"Slice", op_slice},
      {"Gather", op_gather},
      {"ScatterND", op_scatter_nd},
      {"ScatterElements", op_scatter_elements},
      {"Scatter", op_scatter_elements},
      {"Expand", op_expand},
      {"Shape", op_shape},
      {"Size", op_size},
      {"Range", op_range},
      {"ConstantOfShape", op_constant_of_shape},
      // recurrent.cc
      {"LSTM", op_lstm},
      {"GRU", op_gru},
      {"RNN", op_rnn},
      // control_flow.cc
      {"If", op_if},
      {"Loop", op_loop},
      // constants.cc
      {"Constant", op_constant},
  };
  auto it = kHandlers.find(op_type);
  return it == kHandlers.end() ? nullptr : it->second;
}

}  // namespace hexir::compiler::onnx_import
