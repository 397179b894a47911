// The wire-format scan of a model file: the metadata protobuf parses, with
// the raw_data of initializers and of top-level Constant tensors left in the
// file (their places recorded), so protobuf never copies the weights.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hexir::compiler::onnx_import {

struct FileSpan {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// Where the raw_data of the model's tensors is in the file: one entry per
// initializer (nullopt: no raw_data), and the `value` tensor of top-level
// nodes (Constant) by (node index, attribute index).
struct RawSpans {
  std::vector<std::optional<FileSpan>> initializers;
  std::map<std::pair<int, int>, FileSpan> node_tensors;
};

// Copies the ModelProto [begin, end) (a whole file) to `out` without the
// raw_data of initializers and of tensor attributes of top-level nodes,
// recording where those are in `spans`. False: malformed protobuf.
bool strip_model(const uint8_t* begin, const uint8_t* end, std::string& out, RawSpans& spans);

}  // namespace hexir::compiler::onnx_import
