// The ONNX front end (docs/onnx.md): an .onnx model to the compiler's graph
// (graph.h), built through GraphBuilder like the .hxir parser, so every node
// gets the same checks and errors name the model and the ONNX node
// ("model.onnx: node 'conv1' (Conv): ...").
//
// Every value must have a static shape: the model's dynamic input dims are
// fixed by `input_shapes`, scalar inputs can be bound to constants, and
// whatever is computable at import (shape subgraphs, constant arithmetic on
// small tensors, transposes of weights) is folded into constants. Anything
// the importer cannot map is an error naming the node, its op type and what
// is missing; it never builds a silently different graph.
//
// Initializers stored inline (raw_data) are not copied: the model file is
// scanned once, their bytes are left out of what protobuf parses, and each
// becomes a constant reading its byte range of the .onnx file (a FileRange),
// like an external-data initializer reads its own file.
//
// Built without ONNX (meson -Donnx=disabled, or libonnx-dev missing),
// import_onnx and the tensor helpers fail with "built without ONNX support".
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/base/types.h"
#include "hexir/compiler/graph.h"

namespace onnx {  // ONNX_NAMESPACE=onnx
class TensorProto;
}

namespace hexir::compiler {

// Whether this build has the ONNX front end.
bool onnx_supported();

// A tensor's type and its bytes (little-endian, C order).
struct OnnxTensor {
  TensorType type;
  std::vector<uint8_t> bytes;
};

struct OnnxImportOptions {
  // Shapes for model inputs (by name), replacing what the model declares;
  // every dynamic dim (a dim_param or an unknown dim) must be fixed here.
  std::map<std::string, std::vector<int64_t>, std::less<>> input_shapes;
  // Inputs holding one element that become constants of their dtype (the
  // value converted to it), e.g. a sequence length or a flag. They leave the
  // function's signature.
  std::map<std::string, double, std::less<>> binds;
  // Inputs given whole values (any shape, the input's dtype): they become
  // constants too, so e.g. a Reshape's shape fed as an input folds. The
  // ONNX node tests feed such inputs from their .pb files.
  std::map<std::string, OnnxTensor, std::less<>> input_values;
  // Bounds of data-dependent dims, by the ONNX name of the NonZero,
  // NonMaxSuppression or Compress output whose size is data: its buffer is
  // planned at the bound given here instead of the derived one (at most
  // it); an invoke that finds more rows fails on the cpu (CUDA keeps the
  // first ones). A name that is no such output is an error.
  std::map<std::string, int64_t, std::less<>> dim_bounds;
  // Name of the function made of the graph ("main").
  std::string function_name = "main";
  // Nodes whose inputs are all constants are evaluated at import when their
  // result holds at most this many bytes (larger ones run in the executable).
  uint64_t fold_max_bytes = uint64_t{64} << 20;
};

// Imports the model at `path`. Errors name the model and the node.
Result<Module> import_onnx(const std::filesystem::path& path, const OnnxImportOptions& options = {});

// Parses "NAME=1x3x224x224" (a scalar: "NAME=" or "NAME=scalar") into `options.input_shapes`,
// and "NAME=VALUE" into `options.binds`. The name is everything before the last '='.
Status parse_input_shape_option(std::string_view text, OnnxImportOptions& options);
Status parse_bind_option(std::string_view text, OnnxImportOptions& options);
// "NAME=N" into `options.dim_bounds`.
Status parse_dim_bound_option(std::string_view text, OnnxImportOptions& options);

// ONNX TensorProto.DataType to a Hexir dtype (FLOAT f32, FLOAT16 f16,
// BFLOAT16 bf16, INT32 i32, INT64 i64, INT8 i8, UINT8 u8, BOOL bool);
// nullopt for the others.
std::optional<DType> dtype_from_onnx(int32_t data_type);
// The ONNX name of a TensorProto.DataType ("FLOAT", "DOUBLE", ...), for messages.
std::string onnx_type_name(int32_t data_type);

// The contents of a TensorProto: raw_data, the typed fields (float_data,
// int32_data for i32/f16/bf16/i8/u8/bool, int64_data), or external data
// (`location` relative to `base_dir`, `offset`, `length`). Errors name the
// tensor and what is wrong (an unsupported dtype, a size that does not match).
Result<OnnxTensor> tensor_from_proto(const onnx::TensorProto& tensor,
                                     const std::filesystem::path& base_dir = {});
// A serialized TensorProto file (the node tests' test_data_set_N/input_N.pb).
Result<OnnxTensor> read_onnx_tensor_file(const std::filesystem::path& path);

}  // namespace hexir::compiler
