// ONNX element types as the importer sees them (TensorProto.DataType codes),
// without protobuf: the front end's files and its always-built API share them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hexir/base/types.h"

namespace hexir::compiler::onnx_import {

// TensorProto.DataType values.
constexpr int32_t kFloat = 1, kUint8 = 2, kInt8 = 3, kUint16 = 4, kInt16 = 5, kInt32 = 6, kInt64 = 7,
                  kString = 8, kBool = 9, kFloat16 = 10, kDouble = 11, kUint32 = 12, kUint64 = 13,
                  kBFloat16 = 16;

// Bytes per element of an ONNX type; 0 for types without a fixed-size element.
inline uint32_t onnx_element_size(int32_t type) {
  switch (type) {
    case kUint8:
    case kInt8:
    case kBool:
      return 1;
    case kUint16:
    case kInt16:
    case kFloat16:
    case kBFloat16:
      return 2;
    case kFloat:
    case kInt32:
    case kUint32:
      return 4;
    case kInt64:
    case kDouble:
    case kUint64:
      return 8;
    default:
      return 0;
  }
}

// The ONNX type of a Hexir dtype.
inline int32_t onnx_type_of(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return kFloat;
    case DType::kF16:
      return kFloat16;
    case DType::kBF16:
      return kBFloat16;
    case DType::kI32:
      return kInt32;
    case DType::kI64:
      return kInt64;
    case DType::kI8:
      return kInt8;
    case DType::kU8:
      return kUint8;
    case DType::kBool:
      return kBool;
  }
  return 0;
}

// "[1,3,224,224]", for messages.
inline std::string shape_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace hexir::compiler::onnx_import
