// The wire-format scan (wire.h).
#include "frontends/onnx/wire.h"

#include <google/protobuf/descriptor.h>
#include <onnx/onnx_pb.h>

namespace hexir::compiler::onnx_import {

namespace {

class WireReader {
 public:
  WireReader(const uint8_t* begin, const uint8_t* end) : p_(begin), end_(end) {}
  bool done() const { return p_ >= end_; }
  const uint8_t* pos() const { return p_; }
  bool varint(uint64_t* out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return false;
      const uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *out = v;
        return true;
      }
    }
    return false;
  }
  // One field: its number, wire type and (for length-delimited fields) payload.
  bool field(uint32_t* number, uint32_t* wire, const uint8_t** payload, uint64_t* size,
             const uint8_t** start) {
    *start = p_;
    uint64_t tag = 0;
    if (!varint(&tag)) return false;
    *number = static_cast<uint32_t>(tag >> 3);
    *wire = static_cast<uint32_t>(tag & 7);
    uint64_t skip = 0;
    switch (*wire) {
      case 0: {
        uint64_t ignored;
        return varint(&ignored);
      }
      case 1:
        skip = 8;
        break;
      case 5:
        skip = 4;
        break;
      case 2:
        if (!varint(&skip)) return false;
        *payload = p_;
        *size = skip;
        break;
      default:
        return false;  // groups (3, 4) are not used by ONNX
    }
    if (skip > static_cast<uint64_t>(end_ - p_)) return false;
    p_ += skip;
    return true;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_length_delimited(std::string& out, uint32_t number, const std::string& payload) {
  put_varint(out, (static_cast<uint64_t>(number) << 3) | 2);
  put_varint(out, payload.size());
  out += payload;
}

// The messages the scan descends into: ModelProto.graph (7) -> GraphProto.initializer (5)
// and GraphProto.node (1) -> NodeProto.attribute (5) -> AttributeProto.t (5).
enum class WireMessage { kModel, kGraph, kInitializer, kNode, kAttribute, kAttributeTensor };

// Copies the message [begin, end) to `out`, dropping TensorProto.raw_data (9)
// of initializers and of tensor attributes of top-level nodes and recording
// its place in the file in `spans`: protobuf never copies the weights.
// `node` / `attribute`: the indices of the node and attribute being copied.
bool strip_message(const uint8_t* file_begin, const uint8_t* begin, const uint8_t* end, WireMessage kind,
                   std::string& out, RawSpans& spans, int node = -1, int attribute = -1) {
  WireReader reader(begin, end);
  std::optional<FileSpan> raw;
  int nodes = 0, attributes = 0;
  while (!reader.done()) {
    uint32_t number = 0, wire = 0;
    const uint8_t *payload = nullptr, *start = nullptr;
    uint64_t size = 0;
    if (!reader.field(&number, &wire, &payload, &size, &start)) return false;
    std::optional<WireMessage> inner_kind;
    int inner_node = node, inner_attribute = attribute;
    if (wire == 2) {
      if (kind == WireMessage::kModel && number == 7) inner_kind = WireMessage::kGraph;
      if (kind == WireMessage::kGraph && number == 5) inner_kind = WireMessage::kInitializer;
      if (kind == WireMessage::kGraph && number == 1) inner_kind = WireMessage::kNode, inner_node = nodes++;
      if (kind == WireMessage::kNode && number == 5)
        inner_kind = WireMessage::kAttribute, inner_attribute = attributes++;
      if (kind == WireMessage::kAttribute && number == 5) inner_kind = WireMessage::kAttributeTensor;
    }
    const bool tensor = kind == WireMessage::kInitializer || kind == WireMessage::kAttributeTensor;
    if (inner_kind) {
      std::string inner;
      if (!strip_message(file_begin, payload, payload + size, *inner_kind, inner, spans, inner_node,
                         inner_attribute))
        return false;
      put_length_delimited(out, number, inner);
    } else if (tensor && number == 9 && wire == 2) {
      raw = FileSpan{static_cast<uint64_t>(payload - file_begin), size};
    } else {
      out.append(reinterpret_cast<const char*>(start), static_cast<size_t>(reader.pos() - start));
    }
  }
  if (kind == WireMessage::kInitializer) spans.initializers.push_back(raw);
  if (kind == WireMessage::kAttributeTensor && raw) spans.node_tensors[{node, attribute}] = *raw;
  return true;
}

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// Occurrences are counted for field numbers below this (ONNX's go up to 25).
constexpr uint32_t kCountedFields = 64;

// What check_message found, and where: "graph.node[0].attribute[0]" (empty
// when at the top, and for nesting, whose path would be a hundred fields long).
struct FieldProblem {
  std::string what;
  std::string where;
  bool located = true;
};

// Checks the message [begin, end) of `type`, nested `depth` deep (the model
// is 0), inside `subgraphs` GraphProtos below the model's own.
std::optional<FieldProblem> check_message(const uint8_t* begin, const uint8_t* end, const Descriptor* type,
                                          int depth, int subgraphs) {
  static const Descriptor* const kGraph = onnx::GraphProto::descriptor();
  WireReader reader(begin, end);
  uint32_t counts[kCountedFields] = {};
  while (!reader.done()) {
    uint32_t number = 0, wire = 0;
    const uint8_t *payload = nullptr, *start = nullptr;
    uint64_t size = 0;
    if (!reader.field(&number, &wire, &payload, &size, &start))
      return FieldProblem{"malformed protobuf in a " + type->name(), "", false};
    const uint32_t seen = number < kCountedFields ? counts[number]++ : 0;
    const FieldDescriptor* field = type->FindFieldByNumber(static_cast<int>(number));
    if (!field || wire != 2 || field->type() != FieldDescriptor::TYPE_MESSAGE) continue;
    if (!field->is_repeated() && seen > 0)
      return FieldProblem{"field '" + field->name() + "' of " + type->name() +
                              " is given more than once (protobuf would merge the occurrences into one)",
                          ""};
    const Descriptor* inner = field->message_type();
    const int inner_subgraphs = subgraphs + (inner == kGraph ? 1 : 0);
    if (depth + 1 > kMaxMessageNesting)
      return FieldProblem{"its messages are nested deeper than protobuf's recursion limit of " +
                              std::to_string(kMaxMessageNesting) + " (If/Loop subgraphs nested " +
                              std::to_string(inner_subgraphs - 1) + " deep or more; about " +
                              std::to_string(kMaxMessageNesting / 3 - 1) + " fit)",
                          "", false};
    std::optional<FieldProblem> problem = check_message(payload, payload + size, inner, depth + 1, inner_subgraphs);
    if (problem) {
      if (problem->located) {
        const std::string frame = field->is_repeated() ? field->name() + "[" + std::to_string(seen) + "]" : field->name();
        problem->where = problem->where.empty() ? frame : frame + "." + problem->where;
      }
      return problem;
    }
  }
  return std::nullopt;
}

}  // namespace

std::string check_model_fields(const uint8_t* begin, const uint8_t* end) {
  std::optional<FieldProblem> problem = check_message(begin, end, onnx::ModelProto::descriptor(), 0, 0);
  if (!problem) return {};
  return problem->where.empty() ? problem->what : problem->what + " at " + problem->where;
}

bool strip_model(const uint8_t* begin, const uint8_t* end, std::string& out, RawSpans& spans) {
  return strip_message(begin, begin, end, WireMessage::kModel, out, spans);
}

}  // namespace hexir::compiler::onnx_import
