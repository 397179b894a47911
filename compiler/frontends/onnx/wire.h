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

// Protobuf's recursion limit (its default, which ParseFromString applies):
// messages nested deeper than this do not parse. An If or Loop subgraph
// nests three deep (node, attribute, graph), so about 32 levels of them fit.
constexpr int kMaxMessageNesting = 100;

// Why the ModelProto [begin, end) cannot be read as one consistent model, or
// "" when it can: a singular message field given more than once (protobuf
// merges the occurrences, which the scan above and the importer would read
// one by one: `graph` twice, a Constant's `t` twice), or messages nested
// deeper than kMaxMessageNesting. Walks every message (its own recursion
// bounded by that limit) but never the bytes of a string or a packed field.
std::string check_model_fields(const uint8_t* begin, const uint8_t* end);

}  // namespace hexir::compiler::onnx_import
