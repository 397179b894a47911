// The node handlers, one free function per ONNX operator (or a few alike),
// by family; registry.cc maps op types to them. A handler reads the node's
// inputs and attributes through the Importer, folds what it can
// (folding.h), adds Hexir nodes and defines the node's outputs.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "frontends/onnx/importer.h"

namespace hexir::compiler::onnx_import {

using Handler = Status (*)(Importer&, const NodeCtx&);

// The handler of ONNX op type `op_type`; nullptr when the importer has none (registry.cc).
Handler find_handler(std::string_view op_type);

// elementwise.cc
Status op_binary(Importer& im, const NodeCtx& n);
Status op_variadic(Importer& im, const NodeCtx& n);
Status op_compare(Importer& im, const NodeCtx& n);
Status op_logical(Importer& im, const NodeCtx& n);
Status op_mod(Importer& im, const NodeCtx& n);
Status op_unary(Importer& im, const NodeCtx& n);
Status op_prelu(Importer& im, const NodeCtx& n);
Status op_clip(Importer& im, const NodeCtx& n);
Status op_pow(Importer& im, const NodeCtx& n);
Status op_cast(Importer& im, const NodeCtx& n);
Status op_cast_like(Importer& im, const NodeCtx& n);
Status op_where(Importer& im, const NodeCtx& n);
Status op_identity(Importer& im, const NodeCtx& n);
Status op_dropout(Importer& im, const NodeCtx& n);

// nn.cc
Status op_matmul(Importer& im, const NodeCtx& n);
Status op_gemm(Importer& im, const NodeCtx& n);
Status op_argmax(Importer& im, const NodeCtx& n);
Status op_softmax(Importer& im, const NodeCtx& n);
Status op_layernorm(Importer& im, const NodeCtx& n);
Status op_batchnorm(Importer& im, const NodeCtx& n);
Status op_reduce(Importer& im, const NodeCtx& n);
Status op_top_k(Importer& im, const NodeCtx& n);
Status op_pool(Importer& im, const NodeCtx& n);
Status op_global_average_pool(Importer& im, const NodeCtx& n);
Status op_global_max_pool(Importer& im, const NodeCtx& n);
Status op_instance_norm(Importer& im, const NodeCtx& n);
Status op_group_norm(Importer& im, const NodeCtx& n);
Status op_lrn(Importer& im, const NodeCtx& n);
Status op_mvn(Importer& im, const NodeCtx& n);
Status op_resize(Importer& im, const NodeCtx& n);
Status op_conv(Importer& im, const NodeCtx& n);
// Conv's computation on x, w and the bias (the node's conv attributes: QLinearConv,
// ConvInteger share them) as a value named `name`.
Result<Ref> conv_of(Importer& im, const NodeCtx& n, Ref x, Ref w, std::optional<Ref> bias, const std::string& name);
Status op_conv_transpose(Importer& im, const NodeCtx& n);
Status op_cumsum(Importer& im, const NodeCtx& n);
Status op_nll_loss(Importer& im, const NodeCtx& n);
Status op_softmax_cross_entropy(Importer& im, const NodeCtx& n);

// quantize.cc: QDQ and the quantized operators
Status op_quantize_linear(Importer& im, const NodeCtx& n);
Status op_dequantize_linear(Importer& im, const NodeCtx& n);
Status op_dynamic_quantize_linear(Importer& im, const NodeCtx& n);
Status op_qlinear_matmul(Importer& im, const NodeCtx& n);
Status op_qlinear_conv(Importer& im, const NodeCtx& n);
Status op_matmul_integer(Importer& im, const NodeCtx& n);
Status op_conv_integer(Importer& im, const NodeCtx& n);

// einsum.cc
Status op_einsum(Importer& im, const NodeCtx& n);

// shape.cc
Status op_reshape(Importer& im, const NodeCtx& n);
Status op_flatten(Importer& im, const NodeCtx& n);
Status op_squeeze(Importer& im, const NodeCtx& n);
Status op_unsqueeze(Importer& im, const NodeCtx& n);
Status op_transpose(Importer& im, const NodeCtx& n);
Status op_concat(Importer& im, const NodeCtx& n);
Status op_pad(Importer& im, const NodeCtx& n);
Status op_split(Importer& im, const NodeCtx& n);
Status op_slice(Importer& im, const NodeCtx& n);
Status op_gather(Importer& im, const NodeCtx& n);
Status op_scatter_nd(Importer& im, const NodeCtx& n);
Status op_scatter_elements(Importer& im, const NodeCtx& n);
// dynamic.cc: bounded dynamic shapes
// Reading across a bounded dim: x's stored rows as a plain value, the
// padding set to what cannot change the result (kZero: as stored).
enum class RowPadding { kZero, kOne, kLowest, kHighest, kNaN };
Result<Ref> unbound_rows(Importer& im, const NodeCtx& n, Ref x, RowPadding pad);
// `plain` with dim `dim` bounded at run-time extent `count` (i64[] or i64[1]).
Result<Ref> bound_rows(Importer& im, const NodeCtx& n, Ref plain, int dim, Ref count, const std::string& name);
// The extent value (i64[]) of bounded value x.
Ref extent_of(Importer& im, Ref x);
// What is known of a small integer vector: a held constant's values, or
// the facts of a run-time shape (Importer::ShapeFact).
std::optional<Importer::ShapeFact> shape_fact(Importer& im, Ref r);
// After a node: the facts its output 0 inherits (Gather, Concat, Min, ...).
void note_shape_facts(Importer& im, const NodeCtx& n);
// Concat along the bounded dim of some of `parts`.
Status concat_bounded(Importer& im, const NodeCtx& n, const std::vector<Ref>& parts, int64_t axis);
// dims [start, end) of bounded value x at run time: i64[end - start].
Result<Ref> runtime_shape(Importer& im, const NodeCtx& n, Ref x, int64_t start, int64_t end,
                          const std::string& name);
Status op_nonzero(Importer& im, const NodeCtx& n);
Status op_compress(Importer& im, const NodeCtx& n);
Status op_non_max_suppression(Importer& im, const NodeCtx& n);
Status op_expand(Importer& im, const NodeCtx& n);
Status op_shape(Importer& im, const NodeCtx& n);
Status op_size(Importer& im, const NodeCtx& n);
Status op_range(Importer& im, const NodeCtx& n);
Status op_constant_of_shape(Importer& im, const NodeCtx& n);
Status op_gather_elements(Importer& im, const NodeCtx& n);
Status op_gather_nd(Importer& im, const NodeCtx& n);
Status op_trilu(Importer& im, const NodeCtx& n);
Status op_tile(Importer& im, const NodeCtx& n);
Status op_depth_to_space(Importer& im, const NodeCtx& n);  // and SpaceToDepth
Status op_one_hot(Importer& im, const NodeCtx& n);
Status op_eye_like(Importer& im, const NodeCtx& n);
// Transposes `x` (folded when it is a held constant, e.g. Gemm's weights
// with transB); Gemm and LSTM use it too.
Result<Ref> transpose(Importer& im, const NodeCtx& n, Ref x, const std::vector<int64_t>& perm,
                      const std::string& name);

// recurrent.cc
Status op_rnn(Importer& im, const NodeCtx& n);
Status op_gru(Importer& im, const NodeCtx& n);
Status op_lstm(Importer& im, const NodeCtx& n);

// control_flow.cc
Status op_if(Importer& im, const NodeCtx& n);
Status op_loop(Importer& im, const NodeCtx& n);

// constants.cc
Status op_constant(Importer& im, const NodeCtx& n);

}  // namespace hexir::compiler::onnx_import
