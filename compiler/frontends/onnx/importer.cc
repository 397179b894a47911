// The ONNX front end; see hexir/compiler/onnx.h and docs/onnx.md.
#include "hexir/compiler/onnx.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <set>

#include "hexir/base/half.h"

#if HEXIR_HAVE_ONNX
#include <onnx/onnx_pb.h>

#include "hexir/base/mapped_file.h"
#include "hexir/format/prelude.h"
#include "passes/fusion.h"
#endif

namespace hexir::compiler {

namespace {

// TensorProto.DataType values.
constexpr int32_t kFloat = 1, kUint8 = 2, kInt8 = 3, kUint16 = 4, kInt16 = 5, kInt32 = 6, kInt64 = 7,
                  kString = 8, kBool = 9, kFloat16 = 10, kDouble = 11, kUint32 = 12, kUint64 = 13,
                  kBFloat16 = 16;

// Bytes per element of an ONNX type; 0 for types without a fixed-size element.
uint32_t onnx_element_size(int32_t type) {
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

int32_t onnx_type_of(DType dtype) {
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

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

bool onnx_supported() { return HEXIR_HAVE_ONNX != 0; }

std::optional<DType> dtype_from_onnx(int32_t data_type) {
  switch (data_type) {
    case kFloat:
      return DType::kF32;
    case kFloat16:
      return DType::kF16;
    case kBFloat16:
      return DType::kBF16;
    case kInt32:
      return DType::kI32;
    case kInt64:
      return DType::kI64;
    case kInt8:
      return DType::kI8;
    case kUint8:
      return DType::kU8;
    case kBool:
      return DType::kBool;
    default:
      return std::nullopt;
  }
}

std::string onnx_type_name(int32_t data_type) {
  static const char* const kNames[] = {"UNDEFINED", "FLOAT",  "UINT8",  "INT8",   "UINT16",    "INT16",
                                       "INT32",     "INT64",  "STRING", "BOOL",   "FLOAT16",   "DOUBLE",
                                       "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  if (data_type >= 0 && data_type < static_cast<int32_t>(std::size(kNames))) return kNames[data_type];
  return "type " + std::to_string(data_type);
}

Status parse_input_shape_option(std::string_view text, OnnxImportOptions& options) {
  const size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0)
    return invalid_argument("--input-shape expects NAME=D0xD1x... (e.g. x=1x3x224x224), got '" +
                            std::string(text) + "'");
  const std::string name(text.substr(0, eq));
  const std::string_view spec = text.substr(eq + 1);
  std::vector<int64_t> dims;
  if (!spec.empty() && spec != "scalar") {
    size_t pos = 0;
    while (true) {
      const size_t x = spec.find('x', pos);
      const std::string_view part = spec.substr(pos, x == std::string_view::npos ? spec.npos : x - pos);
      int64_t d = -1;
      auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), d);
      if (part.empty() || ec != std::errc() || end != part.data() + part.size() || d < 0)
        return invalid_argument("--input-shape " + name + ": '" + std::string(spec) +
                                "' is not a shape like 1x3x224x224 (non-negative integers joined by 'x')");
      dims.push_back(d);
      if (x == std::string_view::npos) break;
      pos = x + 1;
    }
  }
  if (!options.input_shapes.emplace(name, std::move(dims)).second)
    return invalid_argument("--input-shape for '" + name + "' is given twice");
  return ok_status();
}

Status parse_bind_option(std::string_view text, OnnxImportOptions& options) {
  const size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
    return invalid_argument("--bind expects NAME=VALUE (e.g. seq_len=128), got '" + std::string(text) + "'");
  const std::string name(text.substr(0, eq));
  const std::string value(text.substr(eq + 1));
  double v = 0;
  if (value == "true" || value == "false") {
    v = value == "true" ? 1 : 0;
  } else {
    char* end = nullptr;
    v = std::strtod(value.c_str(), &end);
    if (end != value.c_str() + value.size())
      return invalid_argument("--bind " + name + ": '" + value + "' is not a number");
  }
  if (!options.binds.emplace(name, v).second)
    return invalid_argument("--bind for '" + name + "' is given twice");
  return ok_status();
}

#if !HEXIR_HAVE_ONNX

namespace {
Status no_onnx(const std::string& what) {
  return unimplemented(what +
                       ": hexir was built without ONNX support (install libonnx-dev libprotobuf-dev "
                       "protobuf-compiler and reconfigure with meson -Donnx=enabled)");
}
}  // namespace

Result<Module> import_onnx(const std::filesystem::path& path, const OnnxImportOptions&) {
  return no_onnx("cannot import '" + path.string() + "'");
}
Result<OnnxTensor> tensor_from_proto(const onnx::TensorProto&, const std::filesystem::path&) {
  return no_onnx("cannot read an ONNX tensor");
}
Result<OnnxTensor> read_onnx_tensor_file(const std::filesystem::path& path) {
  return no_onnx("cannot read '" + path.string() + "'");
}

#else  // HEXIR_HAVE_ONNX

namespace {

// ---- tensors on the host ------------------------------------------------------

// A tensor of any fixed-size ONNX type, held in memory: initializers' and
// Constant nodes' contents, and what folding computes.
struct HostTensor {
  int32_t type = kFloat;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;

  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  uint32_t esize() const { return onnx_element_size(type); }
  bool is_float() const { return type == kFloat || type == kFloat16 || type == kBFloat16 || type == kDouble; }

  double f(int64_t i) const {
    const uint8_t* p = bytes.data() + static_cast<size_t>(i) * esize();
    switch (type) {
      case kFloat: {
        float v;
        std::memcpy(&v, p, 4);
        return v;
      }
      case kDouble: {
        double v;
        std::memcpy(&v, p, 8);
        return v;
      }
      case kFloat16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return half_bits_to_float(h);
      }
      case kBFloat16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
      }
      default:
        return static_cast<double>(this->i(i));
    }
  }

  int64_t i(int64_t index) const {
    const uint8_t* p = bytes.data() + static_cast<size_t>(index) * esize();
    switch (type) {
      case kUint8:
        return *p;
      case kInt8:
        return static_cast<int8_t>(*p);
      case kBool:
        return *p != 0;
      case kUint16: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return v;
      }
      case kInt16: {
        int16_t v;
        std::memcpy(&v, p, 2);
        return v;
      }
      case kInt32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        return v;
      }
      case kUint32: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        return v;
      }
      case kInt64:
      case kUint64: {
        int64_t v;
        std::memcpy(&v, p, 8);
        return v;
      }
      default: {  // a float type: truncate toward zero, saturate, NaN to 0
        const double d = f(index);
        if (std::isnan(d)) return 0;
        if (d >= 9.2233720368547758e18) return INT64_MAX;
        if (d <= -9.2233720368547758e18) return INT64_MIN;
        return static_cast<int64_t>(d);
      }
    }
  }

  void set_f(int64_t index, double v) {
    uint8_t* p = bytes.data() + static_cast<size_t>(index) * esize();
    switch (type) {
      case kFloat: {
        const float x = static_cast<float>(v);
        std::memcpy(p, &x, 4);
        return;
      }
      case kDouble:
        std::memcpy(p, &v, 8);
        return;
      case kFloat16: {
        const uint16_t h = float_to_half_bits(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        return;
      }
      case kBFloat16: {
        const uint16_t h = float_to_bfloat16_bits(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        return;
      }
      case kBool:
        *p = v != 0;
        return;
      default: {
        int64_t x = 0;
        if (!std::isnan(v))
          x = v >= 9.2233720368547758e18    ? INT64_MAX
              : v <= -9.2233720368547758e18 ? INT64_MIN
                                            : static_cast<int64_t>(v);
        set_i(index, x);
        return;
      }
    }
  }

  void set_i(int64_t index, int64_t v) {
    if (is_float()) return set_f(index, static_cast<double>(v));
    uint8_t* p = bytes.data() + static_cast<size_t>(index) * esize();
    if (type == kBool) {
      *p = v != 0;
      return;
    }
    std::memcpy(p, &v, esize());  // little-endian: the low bytes (wraps)
  }
};

using HostPtr = std::shared_ptr<const HostTensor>;
// Contents read from a file (or moved into the module) stay in memory only up to this size.
constexpr uint64_t kKeepBytes = uint64_t{1} << 20;

HostTensor make_host(int32_t type, std::vector<int64_t> dims) {
  HostTensor t;
  t.type = type;
  t.dims = std::move(dims);
  t.bytes.assign(static_cast<size_t>(t.count()) * t.esize(), 0);
  return t;
}

HostTensor host_i64(const std::vector<int64_t>& values, bool scalar = false) {
  HostTensor t = make_host(kInt64, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{int64_t(values.size())});
  std::memcpy(t.bytes.data(), values.data(), values.size() * 8);
  return t;
}

std::vector<int64_t> row_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

// The element of an input of `in_dims` (right-aligned, broadcast) read for
// output coordinates `coord` of an output of rank coord.size().
int64_t broadcast_source(const std::vector<int64_t>& coord, const std::vector<int64_t>& in_dims,
                         const std::vector<int64_t>& in_strides) {
  const size_t off = coord.size() - in_dims.size();
  int64_t index = 0;
  for (size_t d = 0; d < in_dims.size(); ++d)
    if (in_dims[d] != 1) index += coord[off + d] * in_strides[d];
  return index;
}

// Calls fn(out_index, coords) for every element of `dims` in row-major order.
void for_each_coord(const std::vector<int64_t>& dims, const std::function<void(int64_t, const std::vector<int64_t>&)>& fn) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<int64_t> coord(dims.size(), 0);
  for (int64_t o = 0; o < n; ++o) {
    fn(o, coord);
    for (size_t d = dims.size(); d-- > 0;) {
      if (++coord[d] < dims[d]) break;
      coord[d] = 0;
    }
  }
}

// ---- the wire-format scan: initializers' raw_data stay in the file ----------

struct FileSpan {
  uint64_t offset = 0;
  uint64_t size = 0;
};

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

// Where the raw_data of the model's tensors is in the file: one entry per
// initializer (nullopt: no raw_data), and the `value` tensor of top-level
// nodes (Constant) by (node index, attribute index).
struct RawSpans {
  std::vector<std::optional<FileSpan>> initializers;
  std::map<std::pair<int, int>, FileSpan> node_tensors;
};

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
      if (kind == WireMessage::kNode && number == 5) inner_kind = WireMessage::kAttribute, inner_attribute = attributes++;
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

// ---- attributes ---------------------------------------------------------------

const onnx::AttributeProto* find_attribute(const onnx::NodeProto& node, std::string_view name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// A constant of the graph: an initializer, a Constant node, a folded result
// or a constant the importer needs (a scale, a splat). Becomes a module
// constant only when something reads it at run time.
struct ConstRecord {
  std::string name;
  int32_t type = kFloat;
  std::vector<int64_t> dims;
  std::optional<FileRange> file;                   // its bytes in a file (raw_data, external data)
  std::shared_ptr<HostTensor> host;                // its contents, when held (dims may differ: a reshape)
  std::optional<std::vector<uint8_t>> fill;        // one element repeated
  int module_index = -1;                           // in the builder, once added
  Location loc;

  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  uint64_t bytes() const { return static_cast<uint64_t>(count()) * onnx_element_size(type); }
};

// A graph value: a value of the function (a builder id) or a constant record.
struct Ref {
  int value = -1;
  int konst = -1;
  bool is_const() const { return konst >= 0; }
};

// A value's ONNX element type and dims.
struct Info {
  int32_t type = kFloat;
  std::vector<int64_t> dims;
  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

// Status code reserved for "too large to fold": the node then runs instead.
bool too_large(const Status& s) { return s.code() == StatusCode::kResourceExhausted; }

struct NodeCtx {
  const onnx::NodeProto& node;
  Location loc;
  const std::string& op;
  int top_index = -1;  // its index in the model's graph; -1 inside an inlined branch
};

class Importer {
 public:
  Importer(std::filesystem::path path, const OnnxImportOptions& options)
      : path_(std::move(path)),
        base_dir_(path_.parent_path()),
        file_(std::make_shared<const std::string>(path_.string())),
        options_(options) {}

  Result<Module> run() {
    HEXIR_RETURN_IF_ERROR(load());
    const onnx::GraphProto& graph = model_.graph();
    builder_.set_module_name(graph.name().empty() ? path_.stem().string() : graph.name());
    HEXIR_RETURN_IF_ERROR(read_opsets());
    reserve_names(graph);
    HEXIR_RETURN_IF_ERROR(read_initializers(graph));
    HEXIR_RETURN_IF_ERROR(builder_.begin_function(options_.function_name, Location::imported(file_, "", "")));
    HEXIR_RETURN_IF_ERROR(read_inputs(graph));
    mark_needed(graph);
    for (int i = 0; i < graph.node_size(); ++i) {
      if (!needed_node_[static_cast<size_t>(i)]) continue;
      HEXIR_RETURN_IF_ERROR(import_node(graph.node(i), i));
    }
    HEXIR_RETURN_IF_ERROR(set_outputs(graph));
    HEXIR_RETURN_IF_ERROR(builder_.end_function());
    HEXIR_ASSIGN_OR_RETURN(Module module, builder_.finish());
    recognize_exported_gelu(module);  // exporters spell GELU out in five nodes
    recognize_exported_hard_swish(module);  // and the hard swish in four
    return module;
  }

 private:
  // ---- loading ----------------------------------------------------------------
  Status load() {
    HEXIR_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::open(path_.string()));
    const uint8_t* begin = mapped.data();
    std::string stripped;
    if (!strip_message(begin, begin, begin + mapped.size(), WireMessage::kModel, stripped, raw_spans_))
      return invalid_argument(path_.string() + ": not an ONNX model (malformed protobuf)");
    if (stripped.size() > static_cast<size_t>(INT32_MAX))
      return invalid_argument(path_.string() + ": the model's metadata exceeds 2 GiB");
    if (!model_.ParseFromString(stripped))
      return invalid_argument(path_.string() + ": not an ONNX model (protobuf parse failed)");
    if (!model_.has_graph()) return invalid_argument(path_.string() + ": the model has no graph");
    if (static_cast<size_t>(model_.graph().initializer_size()) != raw_spans_.initializers.size())
      return internal_error(path_.string() + ": initializer scan found " + std::to_string(raw_spans_.initializers.size()) +
                            " initializers, protobuf " + std::to_string(model_.graph().initializer_size()));
    return ok_status();
  }

  Status read_opsets() {
    opset_ = -1;
    for (const auto& o : model_.opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
    if (opset_ < 0) opset_ = model_.opset_import_size() == 0 ? 1 : -1;
    return ok_status();
  }

  void reserve_names(const onnx::GraphProto& graph) {
    for (const auto& v : graph.input()) reserved_.insert(v.name());
    for (const auto& v : graph.output()) reserved_.insert(v.name());
    for (const auto& t : graph.initializer()) reserved_.insert(t.name());
    for (const auto& n : graph.node()) {
      for (const auto& o : n.output()) reserved_.insert(o);
      for (const auto& a : n.attribute()) {  // subgraphs (If branches)
        if (a.has_g()) reserve_names(a.g());
        for (const auto& g : a.graphs()) reserve_names(g);
      }
    }
  }

  // A name no ONNX value has and nothing made here has taken.
  std::string fresh(const std::string& hint) {
    std::string name = hint;
    for (int k = 1; reserved_.count(name) || used_.count(name); ++k) name = hint + "_" + std::to_string(k);
    used_.insert(name);
    return name;
  }
  // The ONNX name itself when it is free (an output named twice gets a fresh one).
  std::string claim(const std::string& onnx_name) {
    if (!used_.count(onnx_name)) {
      used_.insert(onnx_name);
      return onnx_name;
    }
    return fresh(onnx_name);
  }

  Location graph_loc(const std::string& what) const { return Location::imported(file_, what, ""); }

  Status read_initializers(const onnx::GraphProto& graph) {
    if (graph.sparse_initializer_size() > 0)
      return error_at(graph_loc(graph.sparse_initializer(0).values().name()),
                      "sparse initializers are not supported by the ONNX importer");
    for (int i = 0; i < graph.initializer_size(); ++i) {
      const onnx::TensorProto& t = graph.initializer(i);
      const Location loc = Location::imported(file_, t.name(), "initializer");
      ConstRecord c;
      c.name = claim(t.name());
      c.type = t.data_type();
      c.dims.assign(t.dims().begin(), t.dims().end());
      c.loc = loc;
      if (onnx_element_size(c.type) == 0)
        return error_at(loc, "initializer of type " + onnx_type_name(c.type) + " is not supported");
      for (int64_t d : c.dims)
        if (d < 0) return error_at(loc, "negative dim in " + shape_text(c.dims));
      const std::optional<FileSpan>& raw = raw_spans_.initializers[static_cast<size_t>(i)];
      if (t.data_location() == onnx::TensorProto::EXTERNAL) {
        HEXIR_ASSIGN_OR_RETURN(c.file, external_range(t, c.bytes(), loc));
      } else if (raw) {
        if (raw->size != c.bytes())
          return error_at(loc, "raw_data holds " + std::to_string(raw->size) + " bytes, " +
                                   onnx_type_name(c.type) + shape_text(c.dims) + " needs " +
                                   std::to_string(c.bytes()));
        c.file = FileRange{path_, raw->offset};
      } else {
        HEXIR_ASSIGN_OR_RETURN(HostTensor h, typed_contents(t, loc));
        c.host = std::make_shared<HostTensor>(std::move(h));
      }
      const int index = static_cast<int>(consts_.size());
      consts_.push_back(std::move(c));
      entries_[t.name()] = Ref{-1, index};
      initializer_names_.insert(t.name());
    }
    return ok_status();
  }

  Result<FileRange> external_range(const onnx::TensorProto& t, uint64_t bytes, const Location& loc) const {
    std::string location;
    uint64_t offset = 0;
    std::optional<uint64_t> length;
    for (const auto& kv : t.external_data()) {
      if (kv.key() == "location") {
        location = kv.value();
      } else if (kv.key() == "offset" || kv.key() == "length") {
        uint64_t v = 0;
        auto [end, ec] = std::from_chars(kv.value().data(), kv.value().data() + kv.value().size(), v);
        if (ec != std::errc() || end != kv.value().data() + kv.value().size())
          return error_at(loc, "external data " + kv.key() + " '" + kv.value() + "' is not a number");
        (kv.key() == "offset" ? offset : length.emplace()) = v;
      }
    }
    if (location.empty()) return error_at(loc, "external data without a 'location'");
    if (std::filesystem::path(location).is_absolute() || location.find("..") != std::string::npos)
      return error_at(loc, "external data location '" + location +
                               "' must be a relative path below the model's directory");
    if (length && *length != bytes)
      return error_at(loc, "external data length " + std::to_string(*length) + " does not match the " +
                               std::to_string(bytes) + " bytes of its type");
    return FileRange{base_dir_ / location, offset};
  }

  // ---- graph inputs -------------------------------------------------------------
  Status read_inputs(const onnx::GraphProto& graph) {
    std::set<std::string, std::less<>> seen_options;
    std::vector<std::string> open;
    for (const auto& in : graph.input()) {
      if (initializer_names_.count(in.name())) continue;  // an initializer (IR < 4 lists them as inputs too)
      const Location loc = Location::imported(file_, in.name(), "input");
      if (!in.type().has_tensor_type())
        return error_at(loc, "input '" + in.name() + "' is not a tensor (sequences and maps are not supported)");
      const auto& tt = in.type().tensor_type();
      const std::optional<DType> dtype = dtype_from_onnx(tt.elem_type());
      if (!dtype)
        return error_at(loc, "input '" + in.name() + "' has element type " + onnx_type_name(tt.elem_type()) +
                                 ", which Hexir does not support");
      std::vector<int64_t> dims;
      std::string open_dims;
      for (int d = 0; d < tt.shape().dim_size(); ++d) {
        const auto& dim = tt.shape().dim(d);
        if (dim.has_dim_value() && dim.dim_value() >= 0) {
          dims.push_back(dim.dim_value());
        } else {
          dims.push_back(-1);
          open_dims += std::string(open_dims.empty() ? "" : ", ") + std::to_string(d) +
                       (dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : " (unknown)");
        }
      }
      if (auto it = options_.input_shapes.find(in.name()); it != options_.input_shapes.end()) {
        seen_options.insert(in.name());
        if (tt.has_shape() && it->second.size() != dims.size())
          return error_at(loc, "--input-shape gives input '" + in.name() + "' rank " +
                                   std::to_string(it->second.size()) + ", the model declares rank " +
                                   std::to_string(dims.size()) + " " + shape_text(dims));
        for (size_t d = 0; d < dims.size(); ++d)
          if (dims[d] >= 0 && dims[d] != it->second[d])
            return error_at(loc, "--input-shape gives input '" + in.name() + "' dim " + std::to_string(d) + " = " +
                                     std::to_string(it->second[d]) + ", the model fixes it to " +
                                     std::to_string(dims[d]));
        dims = it->second;
        open_dims.clear();
        shapes_overridden_ = true;
      } else if (!tt.has_shape()) {
        open_dims = "all (no shape)";
      }
      if (auto it = options_.input_values.find(in.name()); it != options_.input_values.end()) {
        seen_options.insert(in.name());
        const OnnxTensor& value = it->second;
        if (value.type.dtype != *dtype)
          return error_at(loc, "the value given for input '" + in.name() + "' is " + value.type.to_string() +
                                   ", the input is " + dtype_name(*dtype));
        bool fits = !tt.has_shape() || value.type.dims.size() == dims.size();
        for (size_t d = 0; fits && d < dims.size(); ++d) fits = dims[d] < 0 || dims[d] == value.type.dims[d];
        Result<uint64_t> size = byte_size(value.type);
        if (!fits || !size.ok() || *size != value.bytes.size())
          return error_at(loc, "the value given for input '" + in.name() + "' (" + value.type.to_string() + ", " +
                                   std::to_string(value.bytes.size()) + " bytes) does not fit its shape " +
                                   shape_text(dims));
        HostTensor h = make_host(tt.elem_type(), value.type.dims);
        h.bytes = value.bytes;
        entries_[in.name()] = new_const(claim(in.name()), std::move(h), loc);
        continue;
      }
      const bool bound = options_.binds.count(in.name()) > 0;
      if (!open_dims.empty() && !bound) {
        open.push_back("'" + in.name() + "' dims " + open_dims);
        continue;
      }
      if (bound) {
        seen_options.insert(in.name());
        if (!open_dims.empty()) std::replace(dims.begin(), dims.end(), int64_t{-1}, int64_t{1});
        int64_t count = 1;
        for (int64_t d : dims) count *= d;
        if (count != 1)
          return error_at(loc, "--bind " + in.name() + ": the input is " + std::string(dtype_name(*dtype)) +
                                   shape_text(dims) + "; only an input of one element can be bound");
        HostTensor h = make_host(tt.elem_type(), dims);
        h.set_f(0, options_.binds.find(in.name())->second);
        entries_[in.name()] = new_const(claim(in.name()), std::move(h), loc);
        continue;
      }
      HEXIR_ASSIGN_OR_RETURN(int id, builder_.add_input(claim(in.name()), TensorType{*dtype, dims}, false, loc));
      entries_[in.name()] = Ref{id, -1};
    }
    std::vector<std::string> unknown;
    for (const auto& [name, dims] : options_.input_shapes)
      if (!seen_options.count(name)) unknown.push_back(name);
    for (const auto& [name, value] : options_.binds)
      if (!seen_options.count(name)) unknown.push_back(name);
    for (const auto& [name, value] : options_.input_values)
      if (!seen_options.count(name)) unknown.push_back(name);
    if (!unknown.empty()) {
      std::string inputs;
      for (const auto& in : graph.input())
        if (!initializer_names_.count(in.name())) inputs += (inputs.empty() ? "'" : ", '") + in.name() + "'";
      return invalid_argument(path_.string() + ": no model input named '" + unknown.front() +
                              "' (the inputs are " + (inputs.empty() ? "none" : inputs) + ")");
    }
    if (!open.empty()) {
      std::string msg = "dynamic dims must be fixed with --input-shape NAME=D0xD1x...: input ";
      for (size_t i = 0; i < open.size(); ++i) msg += (i ? "; input " : "") + open[i];
      return invalid_argument(path_.string() + ": " + msg);
    }
    return ok_status();
  }

  // ---- which nodes matter -------------------------------------------------------
  void mark_needed(const onnx::GraphProto& graph) {
    needed_node_ = needed_nodes(graph);
  }

  // Which nodes of `graph` its outputs need (walking backwards); adds every
  // name they read to needed_names_. A node with subgraphs needs every name
  // read inside them too (their implicit inputs).
  std::vector<bool> needed_nodes(const onnx::GraphProto& graph) {
    std::set<std::string, std::less<>> need;
    for (const auto& o : graph.output()) need.insert(o.name());
    std::vector<bool> needed(static_cast<size_t>(graph.node_size()), false);
    for (int i = graph.node_size(); i-- > 0;) {
      const auto& n = graph.node(i);
      bool used = false;
      for (const auto& o : n.output()) used |= !o.empty() && need.count(o) > 0;
      if (!used) continue;
      needed[static_cast<size_t>(i)] = true;
      for (const auto& in : n.input())
        if (!in.empty()) need.insert(in);
      for (const auto& a : n.attribute()) {
        if (a.has_g()) read_names(a.g(), need);
        for (const auto& g : a.graphs()) read_names(g, need);
      }
    }
    needed_names_.insert(need.begin(), need.end());
    return needed;
  }
  static void read_names(const onnx::GraphProto& graph, std::set<std::string, std::less<>>& out) {
    for (const auto& o : graph.output()) out.insert(o.name());
    for (const auto& n : graph.node()) {
      for (const auto& in : n.input())
        if (!in.empty()) out.insert(in);
      for (const auto& a : n.attribute()) {
        if (a.has_g()) read_names(a.g(), out);
        for (const auto& g : a.graphs()) read_names(g, out);
      }
    }
  }

  // ---- constants ------------------------------------------------------------------
  Ref new_const(std::string name, HostTensor host, const Location& loc) {
    ConstRecord c;
    c.name = std::move(name);
    c.type = host.type;
    c.dims = host.dims;
    c.host = std::make_shared<HostTensor>(std::move(host));
    c.loc = loc;
    consts_.push_back(std::move(c));
    return Ref{-1, static_cast<int>(consts_.size()) - 1};
  }
  // The same bytes under other dims (a reshape of a constant costs nothing).
  Ref reshaped_const(Ref r, std::vector<int64_t> dims, std::string name, const Location& loc) {
    ConstRecord c = consts_[static_cast<size_t>(r.konst)];
    c.name = std::move(name);
    c.dims = std::move(dims);
    c.module_index = -1;
    c.loc = loc;
    consts_.push_back(std::move(c));
    return Ref{-1, static_cast<int>(consts_.size()) - 1};
  }
  Ref scalar_const(double v, int32_t type, const std::string& hint, const Location& loc) {
    HostTensor h = make_host(type, {});
    h.set_f(0, v);
    return new_const(fresh(hint), std::move(h), loc);
  }
  Ref fill_const(int32_t type, std::vector<int64_t> dims, std::vector<uint8_t> element, std::string name,
                 const Location& loc) {
    ConstRecord c;
    c.name = std::move(name);
    c.type = type;
    c.dims = std::move(dims);
    c.fill = std::move(element);
    c.loc = loc;
    consts_.push_back(std::move(c));
    return Ref{-1, static_cast<int>(consts_.size()) - 1};
  }

  Info info(Ref r) const {
    if (r.is_const()) {
      const ConstRecord& c = consts_[static_cast<size_t>(r.konst)];
      return {c.type, c.dims};
    }
    const TensorType& t = builder_.value(r.value).type;
    return {onnx_type_of(t.dtype), t.dims};
  }

  // The contents of a constant when they are (or can be) held: at most
  // fold_max_bytes. nullptr for a run-time value or a larger constant.
  // Contents read from a file are kept for later nodes only when small.
  Result<HostPtr> host(Ref r) {
    if (!r.is_const()) return HostPtr();
    ConstRecord& c = consts_[static_cast<size_t>(r.konst)];
    HostPtr h = c.host;
    if (!h) {
      if (c.bytes() > options_.fold_max_bytes) return HostPtr();
      auto loaded = std::make_shared<HostTensor>(make_host(c.type, c.dims));
      HostTensor& t = *loaded;
      if (c.fill) {
        for (size_t at = 0; at < t.bytes.size(); at += c.fill->size())
          std::memcpy(t.bytes.data() + at, c.fill->data(), c.fill->size());
      } else if (c.file) {
        std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(c.file->path.c_str(), "rb"), std::fclose);
        if (!f) return error_at(c.loc, "cannot open '" + c.file->path.string() + "': " + std::strerror(errno));
        if (fseeko(f.get(), static_cast<off_t>(c.file->offset), SEEK_SET) != 0 ||
            std::fread(t.bytes.data(), 1, t.bytes.size(), f.get()) != t.bytes.size())
          return error_at(c.loc, "cannot read " + std::to_string(t.bytes.size()) + " bytes at offset " +
                                     std::to_string(c.file->offset) + " of '" + c.file->path.string() + "'");
      } else if (c.module_index >= 0) {  // moved into the module when it was first used
        const auto& bytes = std::get<InlineBytes>(builder_.constant(c.module_index).source).bytes;
        if (!t.bytes.empty()) std::memcpy(t.bytes.data(), bytes.data(), t.bytes.size());  // empty: may be null
      }
      if (t.bytes.size() <= kKeepBytes) c.host = loaded;
      h = std::move(loaded);
    }
    if (h->dims != c.dims) {  // a reshaped record sharing its source's contents
      auto view = std::make_shared<HostTensor>(*h);
      view->dims = c.dims;
      h = std::move(view);
    }
    return h;
  }

  // The value of `r` in the function: a constant becomes a module constant
  // (once) and is used here. Called in operand order right before its node,
  // like the .hxir parser does, so both number values alike.
  Result<int> materialize(Ref r, const Location& loc) {
    if (!r.is_const()) return r.value;
    ConstRecord& c = consts_[static_cast<size_t>(r.konst)];
    if (c.module_index < 0) {
      const std::optional<DType> dtype = dtype_from_onnx(c.type);
      if (!dtype)
        return error_at(loc, "constant '" + c.name + "' is " + onnx_type_name(c.type) +
                                 ", which Hexir does not support at run time");
      TensorType type{*dtype, c.dims};
      ConstantSource source;
      if (c.fill) {
        source = FillPattern{*c.fill};
      } else if (c.file) {
        source = *c.file;
      } else if (c.host.use_count() == 1 && c.host->bytes.size() > kKeepBytes && tentative_ == 0) {
        // A large folded result (transposed weights): its bytes move into the
        // module; host() reads them back from there if a later fold needs them.
        // (Not in a branch being tried: a rollback would lose them.)
        source = InlineBytes{std::move(c.host->bytes)};
        c.host.reset();
      } else {
        source = InlineBytes{c.host->bytes};
      }
      HEXIR_ASSIGN_OR_RETURN(c.module_index, builder_.add_constant(c.name, std::move(type), std::move(source), c.loc));
    }
    return builder_.use_constant(c.module_index, loc);
  }

  // ---- node plumbing --------------------------------------------------------------
  Result<Ref> input(const NodeCtx& n, int i) {
    if (i >= n.node.input_size() || n.node.input(i).empty())
      return error_at(n.loc, "input " + std::to_string(i) + " is missing");
    auto it = entries_.find(n.node.input(i));
    if (it == entries_.end())
      return error_at(n.loc, "input '" + n.node.input(i) +
                                 "' is not defined before this node (nodes must be in topological order)");
    return it->second;
  }
  Result<std::optional<Ref>> optional_input(const NodeCtx& n, int i) {
    if (i >= n.node.input_size() || n.node.input(i).empty()) return std::optional<Ref>();
    HEXIR_ASSIGN_OR_RETURN(Ref r, input(n, i));
    return std::optional<Ref>(r);
  }
  std::string out_name(const NodeCtx& n, int i) const {
    return i < n.node.output_size() ? n.node.output(i) : std::string();
  }
  // Output i of the node is `r`.
  void define(const NodeCtx& n, int i, Ref r) {
    if (i < n.node.output_size() && !n.node.output(i).empty()) entries_[n.node.output(i)] = r;
  }
  // A result that is not computed must not be read.
  Status only_first_outputs(const NodeCtx& n, int count) {
    for (int i = count; i < n.node.output_size(); ++i)
      if (!n.node.output(i).empty() && needed_names_.count(n.node.output(i)))
        return error_at(n.loc, "output " + std::to_string(i) + " ('" + n.node.output(i) +
                                   "') is used, but only the first " + std::to_string(count) +
                                   " output(s) are supported");
    return ok_status();
  }

  Status check_attrs(const NodeCtx& n, std::initializer_list<std::string_view> allowed) {
    for (const auto& a : n.node.attribute())
      if (std::find(allowed.begin(), allowed.end(), a.name()) == allowed.end())
        return error_at(n.loc, "attribute '" + a.name() + "' is not supported by the ONNX importer (opset " +
                                   std::to_string(opset_) + ")");
    return ok_status();
  }
  Result<int64_t> attr_int(const NodeCtx& n, std::string_view name, int64_t fallback) {
    const auto* a = find_attribute(n.node, name);
    if (!a) return fallback;
    if (a->type() != onnx::AttributeProto::INT)
      return error_at(n.loc, "attribute '" + std::string(name) + "' must be an integer");
    return a->i();
  }
  Result<double> attr_float(const NodeCtx& n, std::string_view name, double fallback) {
    const auto* a = find_attribute(n.node, name);
    if (!a) return fallback;
    if (a->type() == onnx::AttributeProto::FLOAT) return static_cast<double>(a->f());
    if (a->type() == onnx::AttributeProto::INT) return static_cast<double>(a->i());
    return error_at(n.loc, "attribute '" + std::string(name) + "' must be a float");
  }
  Result<std::optional<std::vector<int64_t>>> attr_ints(const NodeCtx& n, std::string_view name) {
    const auto* a = find_attribute(n.node, name);
    if (!a) return std::optional<std::vector<int64_t>>();
    if (a->type() != onnx::AttributeProto::INTS && a->type() != onnx::AttributeProto::INT)
      return error_at(n.loc, "attribute '" + std::string(name) + "' must be a list of integers");
    if (a->type() == onnx::AttributeProto::INT) return std::optional<std::vector<int64_t>>(std::vector<int64_t>{a->i()});
    return std::optional<std::vector<int64_t>>(std::vector<int64_t>(a->ints().begin(), a->ints().end()));
  }
  Result<std::string> attr_string(const NodeCtx& n, std::string_view name, std::string fallback) {
    const auto* a = find_attribute(n.node, name);
    if (!a) return fallback;
    if (a->type() != onnx::AttributeProto::STRING)
      return error_at(n.loc, "attribute '" + std::string(name) + "' must be a string");
    return a->s();
  }

  // The integers of a constant input (shapes, axes, starts, ...).
  Result<std::vector<int64_t>> const_ints(const NodeCtx& n, Ref r, int index, const char* what) {
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(r));
    if (!h)
      return error_at(n.loc, std::string(what) + " (input " + std::to_string(index) + ", '" +
                                 n.node.input(index) +
                                 "') must be a constant (computable at import); it is computed at run time");
    if (h->is_float())
      return error_at(n.loc, std::string(what) + " (input " + std::to_string(index) + ") must be integers, not " +
                                 onnx_type_name(h->type));
    std::vector<int64_t> v(static_cast<size_t>(h->count()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = h->i(static_cast<int64_t>(i));
    return v;
  }

  // Adds a node; `names` one per result (claimed or fresh by the caller).
  Result<std::vector<int>> emit(const NodeCtx& n, ops::OpId op, const std::vector<Ref>& inputs,
                                const ops::AttrMap& attrs, std::vector<std::string> names,
                                std::vector<TensorType> declared = {}) {
    NodeSpec spec;
    spec.op = op;
    for (Ref r : inputs) {
      HEXIR_ASSIGN_OR_RETURN(int v, materialize(r, n.loc));
      spec.inputs.push_back(v);
    }
    spec.attrs = attrs;
    spec.declared = std::move(declared);
    spec.names = std::move(names);
    spec.locs.node = n.loc;
    return builder_.add_node(std::move(spec));
  }
  // One-result node named for output `out` of the ONNX node (or a fresh helper name).
  Result<Ref> emit1(const NodeCtx& n, ops::OpId op, const std::vector<Ref>& inputs, const ops::AttrMap& attrs,
                    const std::string& name, std::vector<TensorType> declared = {}) {
    HEXIR_ASSIGN_OR_RETURN(std::vector<int> ids, emit(n, op, inputs, attrs, {name}, std::move(declared)));
    return Ref{ids[0], -1};
  }
  // The name of the node's output i as a value (claimed), or a helper name.
  std::string result_name(const NodeCtx& n, int i = 0) {
    const std::string o = out_name(n, i);
    return o.empty() ? fresh(n.op + "_" + std::to_string(i)) : claim(o);
  }
  std::string helper_name(const NodeCtx& n, const std::string& what) {
    const std::string base = out_name(n, 0).empty() ? n.op : out_name(n, 0);
    return fresh(base + "/" + what);
  }

  Result<Ref> reshape(const NodeCtx& n, Ref x, const std::vector<int64_t>& dims, const std::string& name) {
    Info xi = info(x);
    if (x.is_const()) return reshaped_const(x, dims, name, n.loc);
    if (xi.dims == dims) {
      used_.erase(name);  // nothing was made under it
      return x;
    }
    const TensorType& t = builder_.value(x.value).type;
    return emit1(n, ops::OpId::kReshape, {x}, {}, name, {TensorType{t.dtype, dims}});
  }

  // ---- folding ----------------------------------------------------------------------
  Status fold_limit(int32_t type, const std::vector<int64_t>& dims) const {
    uint64_t n = onnx_element_size(type);
    for (int64_t d : dims) {
      if (d < 0) return invalid_argument("negative dim");
      if (d != 0 && n > options_.fold_max_bytes / static_cast<uint64_t>(d))
        return resource_exhausted("too large to fold");
      n *= static_cast<uint64_t>(d);
    }
    if (n > options_.fold_max_bytes) return resource_exhausted("too large to fold");
    return ok_status();
  }

  // Holds the contents of every input in `refs` (nullptr entries stay
  // absent); false when one is a run-time value or too large.
  Result<bool> hosts(const std::vector<std::optional<Ref>>& refs, std::vector<HostPtr>& out) {
    out.clear();
    for (const auto& r : refs) {
      if (!r) {
        out.push_back(nullptr);
        continue;
      }
      HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(*r));
      if (!h) return false;
      out.push_back(h);
    }
    return true;
  }

  // Folded result `t` becomes output i.
  void define_folded(const NodeCtx& n, int i, HostTensor t) {
    const std::string o = out_name(n, i);
    if (o.empty()) return;
    define(n, i, new_const(claim(o), std::move(t), n.loc));
  }

  // ---- the nodes ------------------------------------------------------------------------
  // `scope`: where an unnamed node is ("" at the top, "If_3/then_branch/" inside an inlined branch).
  Status import_node(const onnx::NodeProto& node, int index, const std::string& scope = {}) {
    const std::string label = node.name().empty() ? scope + "#" + std::to_string(index) : node.name();
    const NodeCtx n{node, Location::imported(file_, label, node.op_type()), node.op_type(),
                    scope.empty() ? index : -1};
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      return error_at(n.loc, "operator domain '" + node.domain() + "' is not supported (only the default ONNX domain)");
    if (opset_ < 0) return error_at(n.loc, "the model imports no opset of the default ONNX domain");
    const std::string& op = node.op_type();
    using Handler = Status (Importer::*)(const NodeCtx&);
    static const std::map<std::string, Handler, std::less<>> kHandlers = {
        {"Add", &Importer::op_binary},       {"Sub", &Importer::op_binary},
        {"Mul", &Importer::op_binary},       {"Div", &Importer::op_binary},
        {"Max", &Importer::op_variadic},     {"Min", &Importer::op_variadic},
        {"Sum", &Importer::op_variadic},     {"Mean", &Importer::op_variadic},
        {"Equal", &Importer::op_compare},    {"Less", &Importer::op_compare},
        {"Greater", &Importer::op_compare},  {"Not", &Importer::op_unary},
        {"Relu", &Importer::op_unary},       {"Sigmoid", &Importer::op_unary},
        {"Tanh", &Importer::op_unary},       {"Exp", &Importer::op_unary},
        {"Sqrt", &Importer::op_unary},       {"Neg", &Importer::op_unary},
        {"Reciprocal", &Importer::op_unary}, {"Abs", &Importer::op_unary},
        {"Floor", &Importer::op_unary},      {"Ceil", &Importer::op_unary},
        {"Gelu", &Importer::op_unary},       {"MatMul", &Importer::op_matmul},
        {"Erf", &Importer::op_unary},        {"Log", &Importer::op_unary},
        {"LeakyRelu", &Importer::op_unary},  {"HardSigmoid", &Importer::op_unary},
        {"HardSwish", &Importer::op_unary},  {"Clip", &Importer::op_clip},
        {"Pow", &Importer::op_pow},
        {"Gemm", &Importer::op_gemm},        {"Softmax", &Importer::op_softmax},
        {"LayerNormalization", &Importer::op_layernorm},
        {"BatchNormalization", &Importer::op_batchnorm},
        {"ReduceMean", &Importer::op_reduce}, {"ReduceSum", &Importer::op_reduce},
        {"ReduceMax", &Importer::op_reduce},  {"MaxPool", &Importer::op_pool},
        {"AveragePool", &Importer::op_pool},  {"Pad", &Importer::op_pad},
        {"LSTM", &Importer::op_lstm},        {"If", &Importer::op_if},
        {"GlobalAveragePool", &Importer::op_global_average_pool},
        {"Reshape", &Importer::op_reshape},  {"Flatten", &Importer::op_flatten},
        {"Squeeze", &Importer::op_squeeze},  {"Unsqueeze", &Importer::op_unsqueeze},
        {"Transpose", &Importer::op_transpose}, {"Concat", &Importer::op_concat},
        {"Split", &Importer::op_split},      {"Slice", &Importer::op_slice},
        {"Gather", &Importer::op_gather},    {"Cast", &Importer::op_cast},
        {"Where", &Importer::op_where},      {"Conv", &Importer::op_conv},
        {"Identity", &Importer::op_identity}, {"Dropout", &Importer::op_dropout},
        {"Constant", &Importer::op_constant}, {"Shape", &Importer::op_shape},
        {"Size", &Importer::op_size},        {"ConstantOfShape", &Importer::op_constant_of_shape},
        {"Range", &Importer::op_range},      {"Expand", &Importer::op_expand},
        {"Resize", &Importer::op_resize},    {"Upsample", &Importer::op_resize},
        {"ConvTranspose", &Importer::op_conv_transpose},
        {"ArgMax", &Importer::op_argmax},    {"Loop", &Importer::op_loop},
    };
    auto it = kHandlers.find(op);
    if (op != "If" && op != "Loop")
      for (const auto& a : node.attribute())
        if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS)
          return error_at(n.loc, "subgraphs are supported in If and Loop only");
    if (it == kHandlers.end())
      return error_at(n.loc, "operator '" + op + "' is not supported by the ONNX importer (docs/onnx.md lists what is)");
    Status s = (this->*(it->second))(n);
    return s;
  }

  // What importing a branch or a trial loop body changes (the builder, the
  // names, constants made or moved into the module), to undo it. Between
  // begin_attempt and end_attempt, large folded constants are
  // copied into the module rather than moved (an undo would lose them).
  struct Attempt {
    GraphBuilder::Checkpoint builder;
    std::map<std::string, Ref, std::less<>> entries;
    std::vector<int> module_index;  // per constant record then
  };
  Attempt begin_attempt() {
    Attempt a{builder_.checkpoint(), entries_, {}};
    for (const ConstRecord& c : consts_) a.module_index.push_back(c.module_index);
    ++tentative_;
    return a;
  }
  void end_attempt() { --tentative_; }
  void undo(const Attempt& a) {
    builder_.rollback(a.builder);
    entries_ = a.entries;
    consts_.resize(a.module_index.size());
    for (size_t k = 0; k < consts_.size(); ++k) consts_[k].module_index = a.module_index[k];
  }

  // If. A condition known at import (after input shapes and binds): the
  // branch taken is imported in place of the node; the other is never read.
  // A run-time condition: an if of the graph, each branch built in its
  // region. A branch that cannot be built at the compiled shapes (silero
  // VAD v5's 8 kHz branch when the input holds 512 samples) becomes a fail
  // holding the importer's error: the model imports, and running it down
  // that branch stops with that error instead of computing something else.
  Status op_if(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"then_branch", "else_branch"}));
    HEXIR_ASSIGN_OR_RETURN(Ref c, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(c));
    if (h && h->count() == 1) {
      HEXIR_ASSIGN_OR_RETURN(std::vector<Ref> outs, import_branch(n, h->f(0) != 0 ? "then_branch" : "else_branch"));
      for (size_t i = 0; i < outs.size(); ++i) define(n, static_cast<int>(i), outs[i]);
      return ok_status();
    }
    const Info ci = info(c);
    if (ci.type != kBool || ci.count() != 1)
      return error_at(n.loc, "the condition ('" + n.node.input(0) + "') is " + onnx_type_name(ci.type) +
                                 shape_text(ci.dims) + "; an If takes one BOOL");
    Ref cond = c;
    if (!ci.dims.empty()) {
      HEXIR_ASSIGN_OR_RETURN(cond, reshape(n, c, {}, helper_name(n, "condition")));
    }
    HEXIR_ASSIGN_OR_RETURN(int cond_id, materialize(cond, n.loc));
    HEXIR_RETURN_IF_ERROR(builder_.begin_if_untyped(cond_id, n.loc));
    std::vector<std::string> names;
    for (int i = 0; i < n.node.output_size(); ++i) names.push_back(result_name(n, i));
    std::string failed[2];
    std::vector<int> results;
    for (int b = 0; b < 2; ++b) {
      const char* branch = b == 0 ? "then_branch" : "else_branch";
      const Attempt attempt = begin_attempt();  // undone when the branch cannot be built
      Status status = ok_status();
      {
        Result<std::vector<Ref>> outs = import_branch(n, branch);
        std::vector<int> yielded;
        if (outs.ok())
          for (Ref r : *outs) {
            Result<int> v = materialize(r, n.loc);
            if (!v.ok()) {
              status = v.status();
              break;
            }
            yielded.push_back(*v);
          }
        else
          status = outs.status();
        if (status.ok() && b == 0) status = builder_.else_branch(yielded, n.loc);
        if (status.ok() && b == 1) {
          Result<std::vector<int>> ids = builder_.end_if(yielded, names, n.loc);
          if (ids.ok()) results = *ids;
          status = ids.status();
        }
      }
      end_attempt();
      if (status.ok()) continue;
      undo(attempt);
      failed[b] = std::string(branch) + " of If node '" + n.loc.node + "' cannot be built at the compiled shapes: " +
                  status.message();
      if (failed[b].size() > format::kMaxFailMessageBytes) failed[b].resize(format::kMaxFailMessageBytes);
      HEXIR_RETURN_IF_ERROR(builder_.fail(failed[b], n.loc));
      if (b == 0) {
        HEXIR_RETURN_IF_ERROR(builder_.else_branch({}, n.loc));
      } else {
        if (!failed[0].empty())
          return error_at(n.loc, "neither branch can be built: " + failed[0] + "; " + failed[1]);
        HEXIR_ASSIGN_OR_RETURN(results, builder_.end_if({}, names, n.loc));
      }
    }
    for (size_t i = 0; i < results.size(); ++i) define(n, static_cast<int>(i), Ref{results[i], -1});
    return ok_status();
  }

  // Loop as a counted `for` (docs/onnx.md): the trip count M an i64 of one
  // element (known at import or a run-time value); `cond` absent or true at
  // import, and the body's condition output true or its input passed on (a
  // while loop, which stops on a computed condition, is not supported).
  // Carried values keep their types. Scan outputs (one tensor per iteration,
  // stacked) need M at import: each is a carried [M, ...] buffer of zeros,
  // row i written by update_slice in iteration i (in place, no copy: the
  // carried-update pass writes the buffer itself).
  Status op_loop(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"body"}));
    const auto* attr = find_attribute(n.node, "body");
    if (!attr || attr->type() != onnx::AttributeProto::GRAPH) return error_at(n.loc, "attribute 'body' is missing");
    const onnx::GraphProto& body = attr->g();
    const int carried = n.node.input_size() - 2;
    if (carried < 0) return error_at(n.loc, "a Loop has inputs M, cond and the carried values");
    if (body.input_size() != carried + 2)
      return error_at(n.loc, "the body takes " + std::to_string(body.input_size()) + " inputs, expected " +
                                 std::to_string(carried + 2) + " (iteration number, condition, " +
                                 std::to_string(carried) + " carried values)");
    const int scans = body.output_size() - 1 - carried;
    if (scans < 0)
      return error_at(n.loc, "the body gives " + std::to_string(body.output_size()) + " outputs, fewer than 1 + " +
                                 std::to_string(carried) + " carried values");
    if (body.sparse_initializer_size() > 0)
      return error_at(n.loc, "sparse initializers are not supported by the ONNX importer");
    if (n.node.input(0).empty())
      return error_at(n.loc, "a Loop without a trip count M (a while loop) is not supported");
    HEXIR_ASSIGN_OR_RETURN(Ref m, input(n, 0));
    const Info mi = info(m);
    if (mi.type != kInt64 || mi.count() != 1)
      return error_at(n.loc, "the trip count ('" + n.node.input(0) + "') is " + onnx_type_name(mi.type) +
                                 shape_text(mi.dims) + "; a Loop takes one INT64");
    HEXIR_ASSIGN_OR_RETURN(HostPtr mh, host(m));
    std::optional<int64_t> trips;
    if (mh) trips = std::max<int64_t>(0, static_cast<int64_t>(mh->f(0)));
    if (n.node.input_size() > 1 && !n.node.input(1).empty()) {
      HEXIR_ASSIGN_OR_RETURN(Ref c, input(n, 1));
      HEXIR_ASSIGN_OR_RETURN(HostPtr ch, host(c));
      if (!ch || ch->count() != 1)
        return error_at(n.loc, "the condition ('" + n.node.input(1) +
                                   "') is computed at run time: a while loop is not supported, only a counted one");
      if (ch->f(0) == 0) trips = 0;  // runs no iteration
    }
    if (scans > 0 && !trips)
      return error_at(n.loc, "scan outputs need the trip count M known at import (fix it with --bind or "
                             "--input-shape)");
    Ref trip = trips ? scalar_const(static_cast<double>(*trips), kInt64, helper_name(n, "trip"), n.loc) : m;
    if (!trips && !mi.dims.empty()) {
      HEXIR_ASSIGN_OR_RETURN(trip, reshape(n, m, {}, helper_name(n, "trip")));
    }
    const Ref start = scalar_const(0, kInt64, helper_name(n, "start"), n.loc);
    std::vector<Ref> inits;
    for (int k = 0; k < carried; ++k) {
      HEXIR_ASSIGN_OR_RETURN(Ref v, input(n, 2 + k));
      inits.push_back(v);
    }
    // With scan outputs, the body is built once to learn their types, then
    // rolled back and built again with a buffer for each.
    std::vector<Info> scan_types;
    if (scans > 0) {
      const Attempt attempt = begin_attempt();
      std::vector<int> values;
      Result<std::vector<Ref>> outs = build_loop_body(n, body, start, trip, inits, values);
      end_attempt();
      HEXIR_RETURN_IF_ERROR(outs.status());
      for (int s = 0; s < scans; ++s) scan_types.push_back(info((*outs)[static_cast<size_t>(carried + s)]));
      undo(attempt);
      for (const Info& t : scan_types) {
        std::vector<int64_t> dims = {*trips};
        dims.insert(dims.end(), t.dims.begin(), t.dims.end());
        inits.push_back(fill_const(t.type, dims, std::vector<uint8_t>(onnx_element_size(t.type), 0),
                                   helper_name(n, "scan"), n.loc));
      }
    }
    std::vector<int> values;  // [induction, carried...]
    HEXIR_ASSIGN_OR_RETURN(std::vector<Ref> outs, build_loop_body(n, body, start, trip, inits, values));
    std::vector<int> yielded;
    for (int k = 0; k < carried; ++k) {
      HEXIR_ASSIGN_OR_RETURN(int v, materialize(outs[static_cast<size_t>(k)], n.loc));
      yielded.push_back(v);
    }
    if (scans > 0) {
      const Ref zero = scalar_const(0, kInt64, helper_name(n, "zero"), n.loc);
      for (int s = 0; s < scans; ++s) {
        const Info t = scan_types[static_cast<size_t>(s)];
        Ref row = outs[static_cast<size_t>(carried + s)];
        if (info(row).dims != t.dims)
          return error_at(n.loc, "scan output " + std::to_string(s) + " changes shape between builds of the body");
        std::vector<int64_t> dims = {1};
        dims.insert(dims.end(), t.dims.begin(), t.dims.end());
        HEXIR_ASSIGN_OR_RETURN(row, reshape(n, row, dims, helper_name(n, "scan_row")));
        std::vector<Ref> operands = {Ref{values[static_cast<size_t>(1 + carried + s)], -1}, row,
                                     Ref{values[0], -1}};
        for (size_t d = 0; d < t.dims.size(); ++d) operands.push_back(zero);
        HEXIR_ASSIGN_OR_RETURN(Ref written, emit1(n, ops::OpId::kUpdateSlice, operands, {},
                                                  helper_name(n, "scan_write")));
        yielded.push_back(written.value);
      }
    }
    std::vector<std::string> names;
    for (int k = 0; k < carried + scans; ++k) names.push_back(result_name(n, k));
    HEXIR_ASSIGN_OR_RETURN(std::vector<int> results, builder_.end_loop(yielded, names, n.loc));
    for (size_t k = 0; k < results.size(); ++k) define(n, static_cast<int>(k), Ref{results[k], -1});
    return ok_status();
  }

  // Opens the loop (begin_loop) and imports its body: the iteration number
  // is the induction variable, the condition a constant true, the carried
  // values the loop's. Returns the body's outputs after the condition
  // (carried, then scan); `loop_values` gets [induction, carried...].
  Result<std::vector<Ref>> build_loop_body(const NodeCtx& n, const onnx::GraphProto& body, Ref start, Ref trip,
                                           const std::vector<Ref>& inits, std::vector<int>& loop_values) {
    GraphBuilder::LoopSpec spec;
    HEXIR_ASSIGN_OR_RETURN(spec.start, materialize(start, n.loc));
    HEXIR_ASSIGN_OR_RETURN(spec.trip, materialize(trip, n.loc));
    for (Ref r : inits) {
      HEXIR_ASSIGN_OR_RETURN(int v, materialize(r, n.loc));
      spec.inits.push_back(v);
    }
    spec.induction_name = fresh(body.input(0).name());
    for (size_t k = 0; k < inits.size(); ++k)
      spec.carried_names.push_back(fresh(k + 2 < static_cast<size_t>(body.input_size()) ? body.input(static_cast<int>(k) + 2).name()
                                                                                   : n.loc.node + "/scan"));
    spec.loc = n.loc;
    HEXIR_ASSIGN_OR_RETURN(loop_values, builder_.begin_loop(std::move(spec)));
    Ref induction{loop_values[0], -1};
    const auto& iteration = body.input(0);
    if (iteration.type().tensor_type().shape().dim_size() == 1) {  // declared [1]
      HEXIR_ASSIGN_OR_RETURN(induction, reshape(n, induction, {1}, helper_name(n, "iteration")));
    }
    entries_[iteration.name()] = induction;
    HostTensor truth = make_host(kBool, {});
    truth.set_f(0, 1);
    const Ref cond_in = new_const(fresh(body.input(1).name()), std::move(truth), n.loc);
    entries_[body.input(1).name()] = cond_in;
    for (int k = 2; k < body.input_size(); ++k)
      entries_[body.input(k).name()] = Ref{loop_values[static_cast<size_t>(k) - 1], -1};
    for (const auto& t : body.initializer()) {
      HEXIR_ASSIGN_OR_RETURN(HostTensor contents, proto_contents(t, n.loc));
      entries_[t.name()] = new_const(claim(t.name()), std::move(contents), n.loc);
    }
    const std::vector<bool> needed = needed_nodes(body);
    const std::string scope = n.loc.node + "/body/";
    for (int i = 0; i < body.node_size(); ++i)
      if (needed[static_cast<size_t>(i)]) HEXIR_RETURN_IF_ERROR(import_node(body.node(i), i, scope));
    std::vector<Ref> outs;
    for (int i = 0; i < body.output_size(); ++i) {
      auto it = entries_.find(body.output(i).name());
      if (it == entries_.end())
        return error_at(n.loc, "body output '" + body.output(i).name() + "' is not computed");
      outs.push_back(it->second);
    }
    HEXIR_ASSIGN_OR_RETURN(HostPtr cond_out, host(outs[0]));
    if (!cond_out || cond_out->count() != 1 || cond_out->f(0) == 0)
      return error_at(n.loc, "the body's condition output ('" + body.output(0).name() +
                                 "') is not true at import: a while loop is not supported, only a counted one");
    outs.erase(outs.begin());
    return outs;
  }

  // The values a branch (then_branch or else_branch) of an If gives, its
  // nodes imported into the open region.
  Result<std::vector<Ref>> import_branch(const NodeCtx& n, const char* taken) {
    const std::string& label = n.loc.node;
    const auto* branch = find_attribute(n.node, taken);
    if (!branch || branch->type() != onnx::AttributeProto::GRAPH)
      return error_at(n.loc, std::string("attribute '") + taken + "' is missing");
    const onnx::GraphProto& g = branch->g();
    if (g.output_size() != n.node.output_size())
      return error_at(n.loc, std::string(taken) + " has " + std::to_string(g.output_size()) + " outputs, the node " +
                                 std::to_string(n.node.output_size()));
    if (g.sparse_initializer_size() > 0) return error_at(n.loc, "sparse initializers are not supported by the ONNX importer");
    for (const auto& t : g.initializer()) {
      HEXIR_ASSIGN_OR_RETURN(HostTensor contents, proto_contents(t, n.loc));
      entries_[t.name()] = new_const(claim(t.name()), std::move(contents), n.loc);
    }
    const std::vector<bool> needed = needed_nodes(g);
    const std::string scope = label + "/" + taken + "/";
    for (int i = 0; i < g.node_size(); ++i)
      if (needed[static_cast<size_t>(i)]) HEXIR_RETURN_IF_ERROR(import_node(g.node(i), i, scope));
    std::vector<Ref> outs;
    for (int i = 0; i < g.output_size(); ++i) {
      auto it = entries_.find(g.output(i).name());
      if (it == entries_.end())
        return error_at(n.loc, std::string(taken) + " output '" + g.output(i).name() + "' is not computed");
      outs.push_back(it->second);
    }
    return outs;
  }

  // -- elementwise -----------------------------------------------------------------------
  static double apply_binary(const std::string& op, double a, double b) {
    if (op == "Add" || op == "Sum" || op == "Mean") return a + b;
    if (op == "Sub") return a - b;
    if (op == "Mul") return a * b;
    if (op == "Div") return a / b;
    if (op == "Max") return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);  // Min
  }
  static Result<int64_t> apply_binary_int(const std::string& op, int64_t a, int64_t b) {
    auto wrap = [](uint64_t v) { return static_cast<int64_t>(v); };
    if (op == "Add" || op == "Sum" || op == "Mean") return wrap(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    if (op == "Sub") return wrap(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
    if (op == "Mul") return wrap(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    if (op == "Div") {
      if (b == 0) return invalid_argument("integer division by zero");
      if (a == INT64_MIN && b == -1) return INT64_MIN;
      return a / b;
    }
    if (op == "Max") return std::max(a, b);
    return std::min(a, b);
  }

  // Broadcasting binary evaluation into an output of `out_type`.
  Result<HostTensor> fold_binary(const NodeCtx& n, const HostTensor& a, const HostTensor& b, int32_t out_type,
                                 const std::function<Result<double>(int64_t, int64_t)>& int_fn,
                                 const std::function<double(double, double)>& float_fn) {
    auto dims = ops::broadcast_shapes(a.dims, b.dims);
    if (!dims)
      return error_at(n.loc, "shapes " + shape_text(a.dims) + " and " + shape_text(b.dims) + " do not broadcast");
    HEXIR_RETURN_IF_ERROR(fold_limit(out_type, *dims));
    HostTensor out = make_host(out_type, *dims);
    const auto sa = row_strides(a.dims), sb = row_strides(b.dims);
    const bool as_float = a.is_float() || b.is_float();
    Status failed;
    for_each_coord(*dims, [&](int64_t o, const std::vector<int64_t>& c) {
      const int64_t ia = broadcast_source(c, a.dims, sa), ib = broadcast_source(c, b.dims, sb);
      if (as_float) {
        out.set_f(o, float_fn(a.f(ia), b.f(ib)));
      } else {
        Result<double> v = int_fn(a.i(ia), b.i(ib));
        if (!v.ok()) {
          failed = v.status();
          return;
        }
        out.set_f(o, *v);
      }
    });
    if (!failed.ok()) return error_at(n.loc, failed.message());
    return out;
  }
  Result<HostTensor> fold_arith(const NodeCtx& n, const std::string& op, const HostTensor& a, const HostTensor& b) {
    if (a.type != b.type)
      return error_at(n.loc, "operands are " + onnx_type_name(a.type) + " and " + onnx_type_name(b.type));
    auto dims = ops::broadcast_shapes(a.dims, b.dims);
    if (!dims)
      return error_at(n.loc, "shapes " + shape_text(a.dims) + " and " + shape_text(b.dims) + " do not broadcast");
    HEXIR_RETURN_IF_ERROR(fold_limit(a.type, *dims));
    HostTensor out = make_host(a.type, *dims);
    const auto sa = row_strides(a.dims), sb = row_strides(b.dims);
    Status failed;
    for_each_coord(*dims, [&](int64_t o, const std::vector<int64_t>& c) {
      const int64_t ia = broadcast_source(c, a.dims, sa), ib = broadcast_source(c, b.dims, sb);
      if (a.is_float()) {
        out.set_f(o, apply_binary(op, a.f(ia), b.f(ib)));
      } else {
        Result<int64_t> v = apply_binary_int(op, a.i(ia), b.i(ib));
        if (!v.ok()) {
          failed = v.status();
          return;
        }
        out.set_i(o, *v);
      }
    });
    if (!failed.ok()) return error_at(n.loc, failed.message());
    return out;
  }

  static ops::OpId binary_op(const std::string& op) {
    if (op == "Add" || op == "Sum" || op == "Mean") return ops::OpId::kAdd;
    if (op == "Sub") return ops::OpId::kSub;
    if (op == "Mul") return ops::OpId::kMul;
    if (op == "Div") return ops::OpId::kDiv;
    if (op == "Max") return ops::OpId::kMaximum;
    return ops::OpId::kMinimum;
  }

  Status op_binary(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {}));
    if (n.node.input_size() != 2) return error_at(n.loc, "takes 2 inputs, got " + std::to_string(n.node.input_size()));
    return chain(n, n.op);
  }
  Status op_variadic(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {}));
    if (n.node.input_size() < 1) return error_at(n.loc, "takes at least one input");
    return chain(n, n.op);
  }
  // a op b op c ...: folded when every input is a held constant.
  Status chain(const NodeCtx& n, const std::string& op) {
    std::vector<std::optional<Ref>> refs;
    for (int i = 0; i < n.node.input_size(); ++i) {
      HEXIR_ASSIGN_OR_RETURN(Ref r, input(n, i));
      refs.push_back(r);
    }
    std::vector<HostPtr> hs;
    HEXIR_ASSIGN_OR_RETURN(bool all_held, hosts(refs, hs));
    if (all_held) {
      HostTensor acc = *hs[0];
      Status s;
      for (size_t i = 1; i < hs.size() && s.ok(); ++i) {
        Result<HostTensor> next = fold_arith(n, op, acc, *hs[i]);
        if (!next.ok()) s = next.status();
        else acc = std::move(*next);
      }
      if (s.ok() && op == "Mean") {
        HostTensor count = make_host(acc.type, {});
        count.set_f(0, static_cast<double>(hs.size()));
        Result<HostTensor> mean = fold_arith(n, "Div", acc, count);
        if (!mean.ok()) s = mean.status();
        else acc = std::move(*mean);
      }
      if (s.ok()) {
        define_folded(n, 0, std::move(acc));
        return ok_status();
      }
      if (!too_large(s)) return s;
    }
    if (refs.size() == 1) {
      define(n, 0, *refs[0]);
      return ok_status();
    }
    const ops::OpId id = binary_op(op);
    Ref acc = *refs[0];
    for (size_t i = 1; i < refs.size(); ++i) {
      const bool last = i + 1 == refs.size() && op != "Mean";
      HEXIR_ASSIGN_OR_RETURN(acc, emit1(n, id, {acc, *refs[i]}, {}, last ? result_name(n) : helper_name(n, std::to_string(i))));
    }
    if (op == "Mean") {
      Ref count = scalar_const(static_cast<double>(refs.size()), info(acc).type, helper_name(n, "count"), n.loc);
      HEXIR_ASSIGN_OR_RETURN(acc, emit1(n, ops::OpId::kDiv, {acc, count}, {}, result_name(n)));
    }
    define(n, 0, acc);
    return ok_status();
  }

  // An operator another part of Hexir may or may not have in this build,
  // found by its .hxir name (so the importer builds either way).
  Result<ops::OpId> hexir_op(const NodeCtx& n, const char* name) {
    std::optional<ops::OpId> op = ops::find_op(name);
    if (!op)
      return error_at(n.loc, "is supported only on constants (folded at import): this build of Hexir has no @" +
                                 std::string(name) + " operator");
    return *op;
  }

  // Equal/Less/Greater: folded on constants, else @equal/@less/@greater.
  Status op_compare(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {}));
    HEXIR_ASSIGN_OR_RETURN(Ref a, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(Ref b, input(n, 1));
    std::vector<HostPtr> hs;
    HEXIR_ASSIGN_OR_RETURN(bool held, hosts({a, b}, hs));
    const std::string& op = n.op;
    if (held) {
      auto cmp = [&](double x, double y) -> double { return op == "Equal" ? x == y : op == "Less" ? x < y : x > y; };
      Result<HostTensor> out = fold_binary(
          n, *hs[0], *hs[1], kBool,
          [&](int64_t x, int64_t y) -> Result<double> { return op == "Equal" ? x == y : op == "Less" ? x < y : x > y; },
          cmp);
      if (out.ok()) {
        define_folded(n, 0, std::move(*out));
        return ok_status();
      }
      if (!too_large(out.status())) return out.status();
    }
    HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, op == "Equal" ? "equal" : op == "Less" ? "less" : "greater"));
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, id, {a, b}, {}, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  static ops::AttrValue real(double v) {
    ops::AttrValue a;
    a.value = v;
    return a;
  }

  // Unary maps: folded on held constants, else the Hexir operator.
  Status op_unary(const NodeCtx& n) {
    const std::string& op = n.op;
    double alpha = 0, beta = 0;
    if (op == "Gelu") {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"approximate"}));
    } else if (op == "LeakyRelu") {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"alpha"}));
      HEXIR_ASSIGN_OR_RETURN(alpha, attr_float(n, "alpha", 0.01));
    } else if (op == "HardSigmoid") {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"alpha", "beta"}));
      HEXIR_ASSIGN_OR_RETURN(alpha, attr_float(n, "alpha", 0.2));
      HEXIR_ASSIGN_OR_RETURN(beta, attr_float(n, "beta", 0.5));
    } else {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {}));
    }
    // ONNX float attributes are floats: the same value the kernels would see.
    alpha = static_cast<float>(alpha);
    beta = static_cast<float>(beta);
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(x));
    if (h && op != "Gelu") {
      HostTensor out = make_host(op == "Not" ? kBool : h->type, h->dims);
      for (int64_t i = 0; i < h->count(); ++i) {
        if (!h->is_float() && (op == "Neg" || op == "Abs" || op == "Relu" || op == "Not" || op == "Floor" ||
                               op == "Ceil")) {  // exact on integers
          const int64_t v = h->i(i);
          const int64_t negated = static_cast<int64_t>(0 - static_cast<uint64_t>(v));
          out.set_i(i, op == "Neg"    ? negated
                       : op == "Abs"  ? (v < 0 ? negated : v)
                       : op == "Relu" ? std::max<int64_t>(v, 0)
                       : op == "Not"  ? v == 0
                                      : v);
          continue;
        }
        const double v = h->f(i);
        double r = v;
        if (op == "Neg") r = -v;
        else if (op == "Abs") r = std::fabs(v);
        else if (op == "Relu") r = v > 0 ? v : 0;
        else if (op == "Sigmoid") r = 1 / (1 + std::exp(-v));
        else if (op == "Tanh") r = std::tanh(v);
        else if (op == "Exp") r = std::exp(v);
        else if (op == "Log") r = std::log(v);
        else if (op == "Erf") r = std::erf(v);
        else if (op == "Sqrt") r = std::sqrt(v);
        else if (op == "Reciprocal") r = 1 / v;
        else if (op == "Floor") r = std::floor(v);
        else if (op == "Ceil") r = std::ceil(v);
        else if (op == "Not") r = v == 0;
        else if (op == "LeakyRelu") r = v < 0 ? alpha * v : v;
        else if (op == "HardSigmoid") r = std::max(0.0, std::min(1.0, alpha * v + beta));
        else if (op == "HardSwish") r = v * std::max(0.0, std::min(1.0, v / 6 + 0.5));
        out.set_f(i, r);
      }
      define_folded(n, 0, std::move(out));
      return ok_status();
    }
    static const std::map<std::string, const char*, std::less<>> kUnary = {
        {"Relu", "relu"},        {"Sigmoid", "sigmoid"},     {"Tanh", "tanh"},
        {"Exp", "exp"},          {"Sqrt", "sqrt"},           {"Neg", "neg"},
        {"Gelu", "gelu"},        {"Abs", "abs"},             {"Reciprocal", "reciprocal"},
        {"Erf", "erf"},          {"Log", "log"},             {"Not", "not"},
        {"LeakyRelu", "leaky_relu"}, {"HardSigmoid", "hard_sigmoid"}, {"HardSwish", "hard_swish"},
    };
    auto it = kUnary.find(op);
    std::optional<ops::OpId> id = it == kUnary.end() ? std::nullopt : ops::find_op(it->second);
    if (!id && op == "Reciprocal") {  // 1 / x
      Ref one = scalar_const(1.0, info(x).type, helper_name(n, "one"), n.loc);
      HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, ops::OpId::kDiv, {one, x}, {}, result_name(n)));
      define(n, 0, r);
      return ok_status();
    }
    if (!id) {
      return error_at(n.loc, "is supported only on constants (folded at import): this build of Hexir has no run-time " +
                                 op + " operator");
    }
    ops::AttrMap attrs;
    if (op == "Gelu") {
      HEXIR_ASSIGN_OR_RETURN(std::string approx, attr_string(n, "approximate", "none"));
      if (approx != "none" && approx != "tanh")
        return error_at(n.loc, "attribute 'approximate' = '" + approx + "' is not 'none' or 'tanh'");
      if (approx == "tanh") attrs["approximate"] = ops::AttrValue{std::string("tanh")};
    } else if (op == "LeakyRelu") {
      attrs["alpha"] = real(alpha);
    } else if (op == "HardSigmoid") {
      attrs["alpha"] = real(alpha);
      attrs["beta"] = real(beta);
    }
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, *id, {x}, attrs, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  // Clip: min/max attributes before opset 11, constant inputs from it; @clip.
  Status op_clip(const NodeCtx& n) {
    double lo = -INFINITY, hi = INFINITY;
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    if (opset_ < 11) {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"min", "max", "consumed_inputs"}));
      HEXIR_ASSIGN_OR_RETURN(lo, attr_float(n, "min", -INFINITY));
      HEXIR_ASSIGN_OR_RETURN(hi, attr_float(n, "max", INFINITY));
    } else {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {}));
      for (int i = 1; i <= 2; ++i) {
        HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> r, optional_input(n, i));
        if (!r) continue;
        HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(*r));
        if (!h || h->count() != 1)
          return error_at(n.loc, std::string(i == 1 ? "min" : "max") + " (input " + std::to_string(i) +
                                     ") must be a constant scalar");
        (i == 1 ? lo : hi) = h->f(0);
      }
    }
    if (std::isnan(lo) || std::isnan(hi)) return error_at(n.loc, "min and max must not be NaN");
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(x));
    if (h) {
      HostTensor out = make_host(h->type, h->dims);
      for (int64_t i = 0; i < h->count(); ++i) {
        const double v = h->f(i);
        out.set_f(i, std::isnan(v) ? v : std::min(std::max(v, lo), hi));
      }
      define_folded(n, 0, std::move(out));
      return ok_status();
    }
    HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, "clip"));
    ops::AttrMap attrs;
    if (!std::isinf(lo)) attrs["min"] = real(lo);
    if (!std::isinf(hi)) attrs["max"] = real(hi);
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, id, {x}, attrs, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  // Pow: folded on constants; else @pow (f32), an integer exponent constant converted to f32.
  Status op_pow(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {}));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(Ref y, input(n, 1));
    std::vector<HostPtr> hs;
    HEXIR_ASSIGN_OR_RETURN(bool held, hosts({x, y}, hs));
    if (held) {
      Result<HostTensor> out = fold_binary(
          n, *hs[0], *hs[1], hs[0]->type,
          [](int64_t a, int64_t b) -> Result<double> { return std::pow(static_cast<double>(a), static_cast<double>(b)); },
          [](double a, double b) { return std::pow(a, b); });
      if (out.ok()) {
        define_folded(n, 0, std::move(*out));
        return ok_status();
      }
      if (!too_large(out.status())) return out.status();
    }
    const Info xi = info(x), yi = info(y);
    if (yi.type != xi.type) {
      HEXIR_ASSIGN_OR_RETURN(HostPtr hy, host(y));
      if (!hy)
        return error_at(n.loc, "the exponent is " + onnx_type_name(yi.type) + ", the base " +
                                   onnx_type_name(xi.type) + ": only a constant exponent is converted");
      HostTensor converted = make_host(xi.type, hy->dims);
      for (int64_t i = 0; i < hy->count(); ++i) converted.set_f(i, hy->f(i));
      y = new_const(helper_name(n, "exponent"), std::move(converted), n.loc);
    }
    HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, "pow"));
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, id, {x, y}, {}, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  // -- contractions ------------------------------------------------------------------------
  Status op_matmul(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {}));
    HEXIR_ASSIGN_OR_RETURN(Ref a, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(Ref b, input(n, 1));
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, ops::OpId::kMatmul, {a, b}, {}, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  // Transposes `x` (folded when it is a held constant, e.g. Gemm's weights with transB).
  Result<Ref> transpose(const NodeCtx& n, Ref x, const std::vector<int64_t>& perm, const std::string& name) {
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(x));
    if (h) {
      HostTensor out = transpose_host(*h, perm);
      used_.insert(name);
      return new_const(name, std::move(out), n.loc);
    }
    ops::AttrMap attrs;
    attrs["perm"] = int_list(perm);
    return emit1(n, ops::OpId::kTranspose, {x}, attrs, name);
  }

  static HostTensor transpose_host(const HostTensor& h, const std::vector<int64_t>& perm) {
    std::vector<int64_t> dims;
    for (int64_t p : perm) dims.push_back(h.dims[static_cast<size_t>(p)]);
    HostTensor out = make_host(h.type, dims);
    const auto in_strides = row_strides(h.dims);
    const size_t es = h.esize();
    for_each_coord(dims, [&](int64_t o, const std::vector<int64_t>& c) {
      int64_t src = 0;
      for (size_t d = 0; d < c.size(); ++d) src += c[d] * in_strides[static_cast<size_t>(perm[d])];
      std::memcpy(out.bytes.data() + static_cast<size_t>(o) * es, h.bytes.data() + static_cast<size_t>(src) * es, es);
    });
    return out;
  }

  static ops::AttrValue int_list(const std::vector<int64_t>& v) {
    std::vector<ops::AttrValue> list;
    for (int64_t x : v) {
      ops::AttrValue item;
      item.value = x;
      list.push_back(std::move(item));
    }
    return ops::AttrValue{std::move(list)};
  }

  Status op_gemm(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"alpha", "beta", "transA", "transB", "broadcast"}));
    HEXIR_ASSIGN_OR_RETURN(double alpha, attr_float(n, "alpha", 1.0));
    HEXIR_ASSIGN_OR_RETURN(double beta, attr_float(n, "beta", 1.0));
    HEXIR_ASSIGN_OR_RETURN(int64_t trans_a, attr_int(n, "transA", 0));
    HEXIR_ASSIGN_OR_RETURN(int64_t trans_b, attr_int(n, "transB", 0));
    HEXIR_ASSIGN_OR_RETURN(Ref a, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(Ref b, input(n, 1));
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> c, optional_input(n, 2));
    if (info(a).dims.size() != 2 || info(b).dims.size() != 2)
      return error_at(n.loc, "A and B must be matrices, got " + shape_text(info(a).dims) + " and " +
                                 shape_text(info(b).dims));
    if (trans_a) {
      HEXIR_ASSIGN_OR_RETURN(a, transpose(n, a, {1, 0}, helper_name(n, "A_T")));
    }
    if (trans_b) {
      HEXIR_ASSIGN_OR_RETURN(b, transpose(n, b, {1, 0}, helper_name(n, "B_T")));
    }
    const bool scale = alpha != 1.0, add_c = c && beta != 0.0;
    HEXIR_ASSIGN_OR_RETURN(Ref y, emit1(n, ops::OpId::kMatmul, {a, b}, {},
                                        scale || add_c ? helper_name(n, "matmul") : result_name(n)));
    if (scale) {
      Ref s = scalar_const(alpha, kFloat, helper_name(n, "alpha"), n.loc);
      HEXIR_ASSIGN_OR_RETURN(y, emit1(n, ops::OpId::kMul, {y, s}, {}, add_c ? helper_name(n, "scaled") : result_name(n)));
    }
    if (add_c) {
      Ref cc = *c;
      if (beta != 1.0) {
        HEXIR_ASSIGN_OR_RETURN(HostPtr ch, host(cc));
        Ref s = scalar_const(beta, kFloat, helper_name(n, "beta"), n.loc);
        if (ch) {
          HEXIR_ASSIGN_OR_RETURN(HostTensor scaled, fold_arith(n, "Mul", *ch, *host(s).value()));
          cc = new_const(helper_name(n, "beta_C"), std::move(scaled), n.loc);
        } else {
          HEXIR_ASSIGN_OR_RETURN(cc, emit1(n, ops::OpId::kMul, {cc, s}, {}, helper_name(n, "beta_C")));
        }
      }
      HEXIR_ASSIGN_OR_RETURN(y, emit1(n, ops::OpId::kAdd, {y, cc}, {}, result_name(n)));
    }
    define(n, 0, y);
    return ok_status();
  }

  static Result<int64_t> norm_axis(const NodeCtx& n, int64_t axis, size_t rank, const char* what = "axis") {
    const int64_t r = static_cast<int64_t>(rank);
    if (axis < -r || axis >= r)
      return error_at(n.loc, std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                                 std::to_string(rank));
    return axis < 0 ? axis + r : axis;
  }

  static int64_t product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
    int64_t p = 1;
    for (size_t i = begin; i < end; ++i) p *= dims[i];
    return p;
  }

  // ArgMax: the operator's own attributes and defaults (axis 0, keepdims 1,
  // select_last_index 0); an f32 input, an i64 result.
  Status op_argmax(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"axis", "keepdims", "select_last_index"}));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    ops::AttrMap attrs;
    HEXIR_ASSIGN_OR_RETURN(int64_t axis, attr_int(n, "axis", 0));
    HEXIR_ASSIGN_OR_RETURN(int64_t keepdims, attr_int(n, "keepdims", 1));
    HEXIR_ASSIGN_OR_RETURN(int64_t last, attr_int(n, "select_last_index", 0));
    attrs["axis"] = ops::AttrValue{axis};
    attrs["keepdims"] = ops::AttrValue{keepdims};
    attrs["select_last_index"] = ops::AttrValue{last};
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, ops::OpId::kArgMax, {x}, attrs, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  Status op_softmax(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"axis"}));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    const Info xi = info(x);
    HEXIR_ASSIGN_OR_RETURN(int64_t axis, attr_int(n, "axis", opset_ < 13 ? 1 : -1));
    HEXIR_ASSIGN_OR_RETURN(axis, norm_axis(n, axis, xi.dims.size()));
    ops::AttrMap attrs;
    if (opset_ >= 13 || axis + 1 == static_cast<int64_t>(xi.dims.size())) {
      attrs["axis"] = ops::AttrValue{axis};
      HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, ops::OpId::kSoftmax, {x}, attrs, result_name(n)));
      define(n, 0, r);
      return ok_status();
    }
    // Before opset 13: over the input coerced to 2-D at `axis`.
    const std::vector<int64_t> flat{product(xi.dims, 0, static_cast<size_t>(axis)),
                                    product(xi.dims, static_cast<size_t>(axis), xi.dims.size())};
    HEXIR_ASSIGN_OR_RETURN(Ref x2, reshape(n, x, flat, helper_name(n, "2d")));
    attrs["axis"] = ops::AttrValue{int64_t{1}};
    HEXIR_ASSIGN_OR_RETURN(Ref s, emit1(n, ops::OpId::kSoftmax, {x2}, attrs, helper_name(n, "softmax")));
    HEXIR_ASSIGN_OR_RETURN(Ref r, reshape(n, s, xi.dims, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  // `r` as exactly `dims` (same element count: a reshape; a held constant
  // that broadcasts: expanded at import).
  Result<Ref> as_shape(const NodeCtx& n, Ref r, const std::vector<int64_t>& dims, const std::string& what) {
    const Info ri = info(r);
    if (ri.dims == dims) return r;
    if (ri.count() == product(dims, 0, dims.size())) return reshape(n, r, dims, helper_name(n, what));
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(r));
    auto b = ops::broadcast_shapes(ri.dims, dims);
    if (h && b && *b == dims) {
      HEXIR_ASSIGN_OR_RETURN(HostTensor e, expand_host(*h, dims));
      return new_const(helper_name(n, what), std::move(e), n.loc);
    }
    return error_at(n.loc, what + " has shape " + shape_text(ri.dims) + ", expected " + shape_text(dims));
  }

  Result<HostTensor> expand_host(const HostTensor& h, const std::vector<int64_t>& dims) {
    HEXIR_RETURN_IF_ERROR(fold_limit(h.type, dims));
    HostTensor out = make_host(h.type, dims);
    const auto s = row_strides(h.dims);
    const size_t es = h.esize();
    for_each_coord(dims, [&](int64_t o, const std::vector<int64_t>& c) {
      const int64_t src = broadcast_source(c, h.dims, s);
      std::memcpy(out.bytes.data() + static_cast<size_t>(o) * es, h.bytes.data() + static_cast<size_t>(src) * es, es);
    });
    return out;
  }

  Status op_layernorm(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"axis", "epsilon", "stash_type"}));
    HEXIR_ASSIGN_OR_RETURN(int64_t stash, attr_int(n, "stash_type", 1));
    if (stash != 1)
      return error_at(n.loc, "stash_type " + std::to_string(stash) + " is not supported by the ONNX importer (only 1, float)");
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(Ref scale, input(n, 1));
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> bias, optional_input(n, 2));
    const Info xi = info(x);
    HEXIR_ASSIGN_OR_RETURN(int64_t axis, attr_int(n, "axis", -1));
    HEXIR_ASSIGN_OR_RETURN(axis, norm_axis(n, axis, xi.dims.size()));
    HEXIR_ASSIGN_OR_RETURN(double epsilon, attr_float(n, "epsilon", 1e-5));
    const std::vector<int64_t> norm(xi.dims.begin() + axis, xi.dims.end());
    HEXIR_ASSIGN_OR_RETURN(scale, as_shape(n, scale, norm, "scale"));
    Ref b;
    if (bias) {
      HEXIR_ASSIGN_OR_RETURN(b, as_shape(n, *bias, norm, "bias"));
    } else {
      b = fill_const(xi.type, norm, std::vector<uint8_t>(onnx_element_size(xi.type), 0), helper_name(n, "zero_bias"), n.loc);
    }
    ops::AttrMap attrs;
    attrs["axis"] = ops::AttrValue{axis};
    attrs["epsilon"] = ops::AttrValue{static_cast<double>(static_cast<float>(epsilon))};
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, ops::OpId::kLayernorm, {x, scale, b}, attrs, result_name(n)));
    define(n, 0, r);
    // Mean and InvStdDev (outputs 1 and 2, shaped [d0..d(axis-1), 1, ...]), when read:
    // computed beside the fused kernel from the same definition, in f32 (stash_type 1).
    auto wanted = [&](int i) { return !out_name(n, i).empty() && needed_names_.count(out_name(n, i)) > 0; };
    if (!wanted(1) && !wanted(2)) return ok_status();
    if (xi.type != kFloat)
      return error_at(n.loc, "outputs Mean and InvStdDev of a " + onnx_type_name(xi.type) +
                                 " input are not supported by the ONNX importer (only float)");
    ops::AttrMap reduce;
    std::vector<int64_t> axes;
    for (int64_t d = axis; d < static_cast<int64_t>(xi.dims.size()); ++d) axes.push_back(d);
    reduce["axes"] = int_list(axes);
    reduce["keepdims"] = ops::AttrValue{int64_t{1}};
    HEXIR_ASSIGN_OR_RETURN(Ref mean, emit1(n, ops::OpId::kReduceMean, {x}, reduce,
                                           wanted(1) ? result_name(n, 1) : helper_name(n, "mean")));
    define(n, 1, mean);
    if (!wanted(2)) return ok_status();
    HEXIR_ASSIGN_OR_RETURN(Ref centered, emit1(n, ops::OpId::kSub, {x, mean}, {}, helper_name(n, "centered")));
    HEXIR_ASSIGN_OR_RETURN(Ref square, emit1(n, ops::OpId::kMul, {centered, centered}, {}, helper_name(n, "square")));
    HEXIR_ASSIGN_OR_RETURN(Ref variance, emit1(n, ops::OpId::kReduceMean, {square}, reduce, helper_name(n, "variance")));
    const float eps = static_cast<float>(epsilon);
    std::vector<uint8_t> eps_bytes(4);
    std::memcpy(eps_bytes.data(), &eps, 4);
    const Ref eps_ref = fill_const(kFloat, {}, std::move(eps_bytes), helper_name(n, "epsilon"), n.loc);
    HEXIR_ASSIGN_OR_RETURN(Ref shifted, emit1(n, ops::OpId::kAdd, {variance, eps_ref}, {}, helper_name(n, "shifted")));
    HEXIR_ASSIGN_OR_RETURN(Ref inv, emit1(n, ops::OpId::kRsqrt, {shifted}, {}, result_name(n, 2)));
    define(n, 2, inv);
    return ok_status();
  }

  // Inference-mode batch normalization: y = x * a + b with a = scale / sqrt(var + eps), b = B - mean * a.
  Status op_batchnorm(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"epsilon", "momentum", "training_mode", "spatial"}));
    HEXIR_RETURN_IF_ERROR(only_first_outputs(n, 1));
    HEXIR_ASSIGN_OR_RETURN(int64_t training, attr_int(n, "training_mode", 0));
    HEXIR_ASSIGN_OR_RETURN(int64_t spatial, attr_int(n, "spatial", 1));
    if (training) return error_at(n.loc, "training_mode must be 0: training is not supported by the ONNX importer");
    if (!spatial) return error_at(n.loc, "spatial = 0 is not supported by the ONNX importer");
    HEXIR_ASSIGN_OR_RETURN(double epsilon, attr_float(n, "epsilon", 1e-5));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    const Info xi = info(x);
    if (xi.dims.size() < 2) return error_at(n.loc, "input must have rank >= 2, got " + shape_text(xi.dims));
    const int64_t channels = xi.dims[1];
    std::vector<HostPtr> p;
    for (int i = 1; i <= 4; ++i) {
      HEXIR_ASSIGN_OR_RETURN(Ref r, input(n, i));
      HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(r));
      if (!h)
        return error_at(n.loc, "input " + std::to_string(i) + " ('" + n.node.input(i) +
                                   "') must be a constant: batch normalization is folded into a scale and a shift");
      if (h->count() != channels)
        return error_at(n.loc, "input " + std::to_string(i) + " has " + std::to_string(h->count()) +
                                   " elements, the input has " + std::to_string(channels) + " channels");
      p.push_back(h);
    }
    std::vector<int64_t> dims(xi.dims.size() - 1, 1);
    dims[0] = channels;
    HostTensor a = make_host(xi.type, dims), b = make_host(xi.type, dims);
    for (int64_t c = 0; c < channels; ++c) {
      const double s = p[0]->f(c) / std::sqrt(p[3]->f(c) + static_cast<double>(static_cast<float>(epsilon)));
      a.set_f(c, s);
      b.set_f(c, p[1]->f(c) - p[2]->f(c) * s);
    }
    Ref ar = new_const(helper_name(n, "scale"), std::move(a), n.loc);
    Ref br = new_const(helper_name(n, "shift"), std::move(b), n.loc);
    HEXIR_ASSIGN_OR_RETURN(Ref y, emit1(n, ops::OpId::kMul, {x, ar}, {}, helper_name(n, "scaled")));
    HEXIR_ASSIGN_OR_RETURN(y, emit1(n, ops::OpId::kAdd, {y, br}, {}, result_name(n)));
    define(n, 0, y);
    return ok_status();
  }

  // -- reductions ---------------------------------------------------------------------------
  Status op_reduce(const NodeCtx& n) {
    const bool axes_input = n.op == "ReduceSum" ? opset_ >= 13 : opset_ >= 18;  // ReduceMean, ReduceMax: 18
    if (axes_input) {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"keepdims", "noop_with_empty_axes"}));
    } else {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"keepdims", "axes"}));
    }
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(int64_t keepdims, attr_int(n, "keepdims", 1));
    HEXIR_ASSIGN_OR_RETURN(int64_t noop, attr_int(n, "noop_with_empty_axes", 0));
    std::vector<int64_t> axes;
    if (axes_input) {
      HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> a, optional_input(n, 1));
      if (a) {
        HEXIR_ASSIGN_OR_RETURN(axes, const_ints(n, *a, 1, "axes"));
      }
    } else {
      HEXIR_ASSIGN_OR_RETURN(auto a, attr_ints(n, "axes"));
      if (a) axes = *a;
    }
    if (axes.empty() && noop) {
      define(n, 0, x);
      return ok_status();
    }
    ops::AttrMap attrs;
    if (!axes.empty()) attrs["axes"] = int_list(axes);
    attrs["keepdims"] = ops::AttrValue{keepdims ? int64_t{1} : int64_t{0}};
    ops::OpId id = n.op == "ReduceSum" ? ops::OpId::kReduceSum : ops::OpId::kReduceMean;
    if (n.op == "ReduceMax") {
      HEXIR_ASSIGN_OR_RETURN(id, hexir_op(n, "reduce_max"));
    }
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, id, {x},
                                        attrs, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  // MaxPool/AveragePool, 2-D (1-D as a 2-D view): @max_pool/@average_pool
  // when this build has them; the attributes pass through (ONNX's own).
  Status op_pool(const NodeCtx& n) {
    const bool is_max = n.op == "MaxPool";
    if (is_max) {
      HEXIR_RETURN_IF_ERROR(
          check_attrs(n, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}));
    } else {
      HEXIR_RETURN_IF_ERROR(check_attrs(
          n, {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"}));
    }
    HEXIR_RETURN_IF_ERROR(only_first_outputs(n, 1));
    HEXIR_ASSIGN_OR_RETURN(int64_t storage_order, attr_int(n, "storage_order", 0));
    if (storage_order != 0) return error_at(n.loc, "storage_order 1 is not supported by the ONNX importer");
    HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, is_max ? "max_pool" : "average_pool"));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    const Info xi = info(x);
    if (xi.dims.size() != 4 && xi.dims.size() != 3)
      return error_at(n.loc, "a " + std::to_string(static_cast<int64_t>(xi.dims.size()) - 2) +
                                 "-D pooling is not supported by the ONNX importer (only 1-D and 2-D); the input is " +
                                 shape_text(xi.dims));
    const bool one_d = xi.dims.size() == 3;
    // 1-D: the spatial lists get a leading 1 (pads [b, e] -> [0, b, 0, e]).
    auto widen = [&](const char* name, int64_t fill, bool pads) -> Result<std::optional<std::vector<int64_t>>> {
      HEXIR_ASSIGN_OR_RETURN(auto v, attr_ints(n, name));
      if (!v || !one_d) return v;
      if (pads) {
        if (v->size() != 2) return error_at(n.loc, "attribute 'pads' needs 2 values for a 1-D pool");
        return std::optional<std::vector<int64_t>>(std::vector<int64_t>{0, (*v)[0], 0, (*v)[1]});
      }
      if (v->size() != 1) return error_at(n.loc, "attribute '" + std::string(name) + "' needs 1 value for a 1-D pool");
      return std::optional<std::vector<int64_t>>(std::vector<int64_t>{fill, (*v)[0]});
    };
    ops::AttrMap attrs;
    for (const char* name : {"kernel_shape", "strides", "dilations", "pads"}) {
      HEXIR_ASSIGN_OR_RETURN(auto v, widen(name, 1, std::string_view(name) == "pads"));
      if (v) attrs[name] = int_list(*v);
    }
    if (!attrs.count("kernel_shape")) return error_at(n.loc, "attribute 'kernel_shape' is missing");
    for (const char* name : {"ceil_mode", "count_include_pad"}) {
      HEXIR_ASSIGN_OR_RETURN(int64_t v, attr_int(n, name, 0));
      if (v) attrs[name] = ops::AttrValue{v};
    }
    HEXIR_ASSIGN_OR_RETURN(std::string auto_pad, attr_string(n, "auto_pad", "NOTSET"));
    if (auto_pad != "NOTSET") attrs["auto_pad"] = ops::AttrValue{auto_pad};
    if (one_d) {
      HEXIR_ASSIGN_OR_RETURN(x, reshape(n, x, {xi.dims[0], xi.dims[1], 1, xi.dims[2]}, helper_name(n, "x2d")));
    }
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, id, {x}, attrs, one_d ? helper_name(n, "pool2d") : result_name(n)));
    if (one_d) {
      const std::vector<int64_t> dims = info(r).dims;
      HEXIR_ASSIGN_OR_RETURN(r, reshape(n, r, {dims[0], dims[1], dims[3]}, result_name(n)));
    }
    define(n, 0, r);
    return ok_status();
  }

  // Resize (opset 10+) and Upsample (7-9): the H and W of [N,C,H,W], scales or
  // sizes known at import. Before opset 11 coordinates are asymmetric and
  // nearest takes the floor going up (onnxruntime's legacy rule).
  Status op_resize(const NodeCtx& n) {
    const bool legacy = n.op == "Upsample" || opset_ < 11;
    if (legacy) {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"mode", "scales"}));
    } else {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"mode", "coordinate_transformation_mode", "nearest_mode",
                                            "cubic_coeff_a", "exclude_outside", "extrapolation_value",
                                            "antialias", "axes", "keep_aspect_ratio_policy"}));
    }
    HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, "resize"));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    const Info xi = info(x);
    if (xi.dims.size() != 4)
      return error_at(n.loc, "resizing a rank-" + std::to_string(xi.dims.size()) +
                                 " tensor is not supported by the ONNX importer (only [N,C,H,W]); the input is " +
                                 shape_text(xi.dims));
    HEXIR_ASSIGN_OR_RETURN(std::string mode, attr_string(n, "mode", "nearest"));
    if (mode == "bilinear") mode = "linear";  // Upsample-7's spelling
    if (mode != "nearest" && mode != "linear")
      return error_at(n.loc, "mode '" + mode + "' is not supported by the ONNX importer (nearest and linear are)");
    ops::AttrMap attrs;
    attrs["mode"] = ops::AttrValue{mode};
    if (!legacy) {
      HEXIR_ASSIGN_OR_RETURN(int64_t antialias, attr_int(n, "antialias", 0));
      if (antialias != 0) return error_at(n.loc, "antialias is not supported by the ONNX importer");
      HEXIR_ASSIGN_OR_RETURN(auto axes, attr_ints(n, "axes"));
      if (axes && *axes != std::vector<int64_t>{2, 3} && *axes != std::vector<int64_t>{-2, -1})
        return error_at(n.loc, "axes " + shape_text(*axes) +
                                   " is not supported by the ONNX importer (only the last two, H and W)");
      HEXIR_ASSIGN_OR_RETURN(std::string policy, attr_string(n, "keep_aspect_ratio_policy", "stretch"));
      if (policy != "stretch")
        return error_at(n.loc, "keep_aspect_ratio_policy '" + policy + "' is not supported by the ONNX importer");
      HEXIR_ASSIGN_OR_RETURN(std::string coordinate, attr_string(n, "coordinate_transformation_mode", "half_pixel"));
      if (coordinate == "tf_crop_and_resize")
        return error_at(n.loc, "coordinate_transformation_mode 'tf_crop_and_resize' is not supported by the ONNX importer");
      attrs["coordinate_transformation_mode"] = ops::AttrValue{coordinate};
      HEXIR_ASSIGN_OR_RETURN(std::string nearest, attr_string(n, "nearest_mode", "round_prefer_floor"));
      if (mode == "nearest") attrs["nearest_mode"] = ops::AttrValue{nearest};
    } else {
      attrs["coordinate_transformation_mode"] = ops::AttrValue{std::string("asymmetric")};
    }
    // Scales: an attribute (Upsample-7), input 1 (Upsample-9, Resize-10) or
    // input 2 (Resize-11+, may be empty when sizes, input 3, is given).
    std::vector<double> scales;
    std::vector<int64_t> sizes;
    if (n.op == "Upsample" && opset_ < 9) {
      const auto* a = find_attribute(n.node, "scales");
      if (!a) return error_at(n.loc, "attribute 'scales' is missing");
      for (float f : a->floats()) scales.push_back(f);
    } else {
      const int scales_at = legacy ? 1 : 2;
      HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> sr, optional_input(n, scales_at));
      if (sr) {
        HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(*sr));
        if (!h)
          return error_at(n.loc, "scales (input " + std::to_string(scales_at) +
                                     ") must be a constant (computable at import); it is computed at run time");
        for (int64_t i = 0; i < h->count(); ++i) scales.push_back(h->f(i));
      }
      if (!legacy) {
        HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> zr, optional_input(n, 3));
        if (zr) {
          HEXIR_ASSIGN_OR_RETURN(sizes, const_ints(n, *zr, 3, "sizes"));
        }
      }
    }
    if (!sizes.empty()) {
      if (sizes.size() != 4 && sizes.size() != 2)
        return error_at(n.loc, "sizes " + shape_text(sizes) + " does not have one entry per resized axis");
      attrs["sizes"] = int_list(sizes);
    } else if (!scales.empty()) {
      if (scales.size() != 4 && scales.size() != 2)
        return error_at(n.loc, "scales has " + std::to_string(scales.size()) + " values, expected 4");
      if (scales.size() == 4 && (scales[0] != 1.0 || scales[1] != 1.0))
        return error_at(n.loc, "scaling N or C is not supported by the ONNX importer (only H and W)");
      std::vector<ops::AttrValue> list;
      for (double v : scales) list.push_back(ops::AttrValue{v});
      attrs["scales"] = ops::AttrValue{std::move(list)};
      if (legacy && mode == "nearest") {
        // onnxruntime before opset 11: truncation going up, ceil going down.
        const bool down_h = scales[scales.size() - 2] < 1.0, down_w = scales.back() < 1.0;
        if (down_h != down_w)
          return error_at(n.loc, "nearest resizing up on one axis and down on the other is not supported before opset 11");
        attrs["nearest_mode"] = ops::AttrValue{std::string(down_h ? "ceil" : "floor")};
      }
    } else {
      return error_at(n.loc, "needs scales or sizes (both are missing or empty)");
    }
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, id, {x}, attrs, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  // ConvTranspose (1-D as a view of 2-D); the operator lowers output_shape and auto_pad itself.
  Status op_conv_transpose(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                                          "output_shape", "pads", "strides"}));
    HEXIR_ASSIGN_OR_RETURN(ops::OpId id, hexir_op(n, "conv_transpose"));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(Ref w, input(n, 1));
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> bias, optional_input(n, 2));
    const Info xi = info(x), wi = info(w);
    if ((xi.dims.size() != 4 && xi.dims.size() != 3) || wi.dims.size() != xi.dims.size())
      return error_at(n.loc, "a transposed convolution of input " + shape_text(xi.dims) + " and weights " +
                                 shape_text(wi.dims) + " is not supported by the ONNX importer (only 1-D and 2-D)");
    const bool one_d = xi.dims.size() == 3;
    ops::AttrMap attrs;
    for (const char* name : {"strides", "dilations", "pads", "output_padding", "kernel_shape", "output_shape"}) {
      HEXIR_ASSIGN_OR_RETURN(auto v, attr_ints(n, name));
      if (!v) continue;
      const bool pads = std::string_view(name) == "pads";
      if (one_d) {
        const size_t want = pads ? 2 : std::string_view(name) == "output_shape" && v->size() == 3 ? 3 : 1;
        if (v->size() != want)
          return error_at(n.loc, "attribute '" + std::string(name) + "' has " + std::to_string(v->size()) +
                                     " values, expected " + std::to_string(want) + " for a 1-D convolution");
        if (pads) *v = {0, (*v)[0], 0, (*v)[1]};
        else if (want == 3) *v = {(*v)[0], (*v)[1], 1, (*v)[2]};
        else *v = {std::string_view(name) == "output_padding" ? 0 : 1, (*v)[0]};
      }
      attrs[name] = int_list(*v);
    }
    HEXIR_ASSIGN_OR_RETURN(int64_t group, attr_int(n, "group", 1));
    attrs["groups"] = ops::AttrValue{group};
    HEXIR_ASSIGN_OR_RETURN(std::string auto_pad, attr_string(n, "auto_pad", "NOTSET"));
    if (auto_pad != "NOTSET") attrs["auto_pad"] = ops::AttrValue{auto_pad};
    if (one_d) {
      HEXIR_ASSIGN_OR_RETURN(x, reshape(n, x, {xi.dims[0], xi.dims[1], 1, xi.dims[2]}, helper_name(n, "x2d")));
      HEXIR_ASSIGN_OR_RETURN(w, reshape(n, w, {wi.dims[0], wi.dims[1], 1, wi.dims[2]}, helper_name(n, "w2d")));
    }
    std::vector<Ref> operands{x, w};
    if (bias) operands.push_back(*bias);
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, id, operands, attrs, one_d ? helper_name(n, "conv2d") : result_name(n)));
    if (one_d) {
      const std::vector<int64_t> dims = info(r).dims;
      HEXIR_ASSIGN_OR_RETURN(r, reshape(n, r, {dims[0], dims[1], dims[3]}, result_name(n)));
    }
    define(n, 0, r);
    return ok_status();
  }

  Status op_global_average_pool(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {}));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    const size_t rank = info(x).dims.size();
    if (rank < 3) return error_at(n.loc, "input must be [N,C,...], got " + shape_text(info(x).dims));
    std::vector<int64_t> axes;
    for (size_t d = 2; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
    ops::AttrMap attrs;
    attrs["axes"] = int_list(axes);
    attrs["keepdims"] = ops::AttrValue{int64_t{1}};
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, ops::OpId::kReduceMean, {x}, attrs, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  // -- shapes and views ------------------------------------------------------------------------
  Status op_reshape(const NodeCtx& n) {
    std::vector<int64_t> shape;
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    int64_t allowzero = 0;
    if (opset_ < 5) {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"shape", "consumed_inputs"}));
      HEXIR_ASSIGN_OR_RETURN(auto s, attr_ints(n, "shape"));
      if (!s) return error_at(n.loc, "attribute 'shape' is missing");
      shape = *s;
    } else {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"allowzero"}));
      HEXIR_ASSIGN_OR_RETURN(allowzero, attr_int(n, "allowzero", 0));
      HEXIR_ASSIGN_OR_RETURN(Ref s, input(n, 1));
      HEXIR_ASSIGN_OR_RETURN(shape, const_ints(n, s, 1, "the shape"));
    }
    const Info xi = info(x);
    std::vector<int64_t> dims;
    int infer = -1;
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t d = shape[i];
      if (d == 0 && !allowzero) {
        if (i >= xi.dims.size())
          return error_at(n.loc, "shape " + shape_text(shape) + " copies dim " + std::to_string(i) + " of " +
                                     shape_text(xi.dims) + ", which has none");
        d = xi.dims[i];
      } else if (d == -1) {
        if (infer >= 0) return error_at(n.loc, "shape " + shape_text(shape) + " has more than one -1");
        infer = static_cast<int>(i);
        d = 1;
      } else if (d < -1) {
        return error_at(n.loc, "shape " + shape_text(shape) + " has a negative dim");
      }
      dims.push_back(d);
    }
    const int64_t total = xi.count();
    if (infer >= 0) {
      const int64_t known = product(dims, 0, dims.size());
      if (known == 0 || total % known != 0)
        return error_at(n.loc, "cannot reshape " + shape_text(xi.dims) + " to " + shape_text(shape));
      dims[static_cast<size_t>(infer)] = total / known;
    }
    if (product(dims, 0, dims.size()) != total)
      return error_at(n.loc, "cannot reshape " + shape_text(xi.dims) + " (" + std::to_string(total) +
                                 " elements) to " + shape_text(shape) + " = " + shape_text(dims));
    HEXIR_ASSIGN_OR_RETURN(Ref r, reshape(n, x, dims, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  Status op_flatten(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"axis"}));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    const Info xi = info(x);
    HEXIR_ASSIGN_OR_RETURN(int64_t axis, attr_int(n, "axis", 1));
    const int64_t rank = static_cast<int64_t>(xi.dims.size());
    if (axis < -rank || axis > rank)
      return error_at(n.loc, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    if (axis < 0) axis += rank;
    const std::vector<int64_t> dims{product(xi.dims, 0, static_cast<size_t>(axis)),
                                    product(xi.dims, static_cast<size_t>(axis), xi.dims.size())};
    HEXIR_ASSIGN_OR_RETURN(Ref r, reshape(n, x, dims, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  // Axes of Squeeze/Unsqueeze: an attribute before opset 13, an input from it.
  Result<std::optional<std::vector<int64_t>>> axes_of(const NodeCtx& n) {
    if (opset_ < 13) {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"axes"}));
      return attr_ints(n, "axes");
    }
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {}));
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> a, optional_input(n, 1));
    if (!a) return std::optional<std::vector<int64_t>>();
    HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> v, const_ints(n, *a, 1, "axes"));
    return std::optional<std::vector<int64_t>>(std::move(v));
  }

  Status op_squeeze(const NodeCtx& n) {
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(auto axes, axes_of(n));
    const Info xi = info(x);
    std::vector<bool> drop(xi.dims.size(), false);
    if (axes) {
      for (int64_t a : *axes) {
        HEXIR_ASSIGN_OR_RETURN(int64_t d, norm_axis(n, a, xi.dims.size()));
        if (xi.dims[static_cast<size_t>(d)] != 1)
          return error_at(n.loc, "cannot squeeze axis " + std::to_string(a) + " of " + shape_text(xi.dims) +
                                     ": its size is not 1");
        drop[static_cast<size_t>(d)] = true;
      }
    } else {
      for (size_t d = 0; d < xi.dims.size(); ++d) drop[d] = xi.dims[d] == 1;
    }
    std::vector<int64_t> dims;
    for (size_t d = 0; d < xi.dims.size(); ++d)
      if (!drop[d]) dims.push_back(xi.dims[d]);
    HEXIR_ASSIGN_OR_RETURN(Ref r, reshape(n, x, dims, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  Status op_unsqueeze(const NodeCtx& n) {
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(auto axes, axes_of(n));
    if (!axes) return error_at(n.loc, "axes are missing");
    const Info xi = info(x);
    const size_t rank = xi.dims.size() + axes->size();
    std::vector<bool> inserted(rank, false);
    for (int64_t a : *axes) {
      HEXIR_ASSIGN_OR_RETURN(int64_t d, norm_axis(n, a, rank));
      if (inserted[static_cast<size_t>(d)]) return error_at(n.loc, "axes list axis " + std::to_string(a) + " twice");
      inserted[static_cast<size_t>(d)] = true;
    }
    std::vector<int64_t> dims;
    size_t next = 0;
    for (size_t d = 0; d < rank; ++d) dims.push_back(inserted[d] ? 1 : xi.dims[next++]);
    HEXIR_ASSIGN_OR_RETURN(Ref r, reshape(n, x, dims, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  Status op_transpose(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"perm"}));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    const size_t rank = info(x).dims.size();
    HEXIR_ASSIGN_OR_RETURN(auto p, attr_ints(n, "perm"));
    std::vector<int64_t> perm;
    if (p) {
      perm = *p;
    } else {
      for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    }
    std::vector<bool> seen(rank, false);
    if (perm.size() != rank) return error_at(n.loc, "perm " + shape_text(perm) + " does not match rank " + std::to_string(rank));
    for (int64_t& v : perm) {
      HEXIR_ASSIGN_OR_RETURN(v, norm_axis(n, v, rank, "perm entry"));
      if (seen[static_cast<size_t>(v)]) return error_at(n.loc, "perm " + shape_text(*p) + " is not a permutation");
      seen[static_cast<size_t>(v)] = true;
    }
    const std::string o = out_name(n, 0);
    if (x.is_const()) {
      HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(x));
      if (h) {
        define_folded(n, 0, transpose_host(*h, perm));
        return ok_status();
      }
    }
    ops::AttrMap attrs;
    attrs["perm"] = int_list(perm);
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, ops::OpId::kTranspose, {x}, attrs, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  Status op_concat(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"axis"}));
    const auto* axis_attr = find_attribute(n.node, "axis");
    if (!axis_attr && opset_ >= 4) return error_at(n.loc, "attribute 'axis' is missing");
    HEXIR_ASSIGN_OR_RETURN(int64_t axis, attr_int(n, "axis", 1));
    std::vector<std::optional<Ref>> refs;
    std::vector<Ref> plain;
    for (int i = 0; i < n.node.input_size(); ++i) {
      HEXIR_ASSIGN_OR_RETURN(Ref r, input(n, i));
      refs.push_back(r);
      plain.push_back(r);
    }
    if (plain.empty()) return error_at(n.loc, "takes at least one input");
    const Info first = info(plain[0]);
    HEXIR_ASSIGN_OR_RETURN(axis, norm_axis(n, axis, first.dims.size()));
    std::vector<HostPtr> hs;
    HEXIR_ASSIGN_OR_RETURN(bool held, hosts(refs, hs));
    if (held) {
      std::vector<int64_t> dims = first.dims;
      dims[static_cast<size_t>(axis)] = 0;
      for (const HostPtr& h : hs) {
        if (h->type != first.type || h->dims.size() != dims.size())
          return error_at(n.loc, "inputs differ in type or rank");
        for (size_t d = 0; d < dims.size(); ++d)
          if (d != static_cast<size_t>(axis) && h->dims[d] != first.dims[d])
            return error_at(n.loc, "input shapes " + shape_text(first.dims) + " and " + shape_text(h->dims) +
                                       " differ outside axis " + std::to_string(axis));
        dims[static_cast<size_t>(axis)] += h->dims[static_cast<size_t>(axis)];
      }
      Status limit = fold_limit(first.type, dims);
      if (limit.ok()) {
        HostTensor out = make_host(first.type, dims);
        const size_t es = out.esize();
        const int64_t outer = product(dims, 0, static_cast<size_t>(axis));
        size_t at = 0;
        for (int64_t o = 0; o < outer; ++o)
          for (const HostPtr& h : hs) {
            const size_t row = static_cast<size_t>(product(h->dims, static_cast<size_t>(axis), h->dims.size())) * es;
            if (row) std::memcpy(out.bytes.data() + at, h->bytes.data() + static_cast<size_t>(o) * row, row);
            at += row;  // an empty part: no copy (its data may be null)
          }
        define_folded(n, 0, std::move(out));
        return ok_status();
      }
    }
    if (plain.size() == 1) {
      define(n, 0, plain[0]);
      return ok_status();
    }
    ops::AttrMap attrs;
    attrs["axis"] = ops::AttrValue{axis};
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, ops::OpId::kConcat, plain, attrs, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  // Pad, as what Hexir has: per padded axis, a crop (negative pads) by
  // slice, then `constant` as a concat with fills, `reflect`/`edge`/`wrap` as
  // a gather of constant indices along the axis. Exact for every dtype.
  Status op_pad(const NodeCtx& n) {
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    const Info xi = info(x);
    const size_t rank = xi.dims.size();
    std::vector<int64_t> pads;
    std::string mode = "constant";
    HostTensor value = make_host(xi.type, {});  // zero
    std::vector<int64_t> axes;
    if (opset_ < 11) {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"mode", "pads", "paddings", "value"}));
      HEXIR_ASSIGN_OR_RETURN(auto p, attr_ints(n, opset_ < 2 ? "paddings" : "pads"));
      if (!p) return error_at(n.loc, "attribute 'pads' is missing");
      pads = *p;
      HEXIR_ASSIGN_OR_RETURN(double v, attr_float(n, "value", 0.0));
      value.set_f(0, v);
    } else {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"mode"}));
      HEXIR_ASSIGN_OR_RETURN(Ref p, input(n, 1));
      HEXIR_ASSIGN_OR_RETURN(pads, const_ints(n, p, 1, "pads"));
      HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> v, optional_input(n, 2));
      if (v) {
        HEXIR_ASSIGN_OR_RETURN(HostPtr hv, host(*v));
        if (!hv || hv->count() != 1) return error_at(n.loc, "constant_value (input 2) must be a constant scalar");
        if (hv->is_float())
          value.set_f(0, hv->f(0));
        else
          value.set_i(0, hv->i(0));
      }
      HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> a, optional_input(n, 3));
      if (a) {
        HEXIR_ASSIGN_OR_RETURN(axes, const_ints(n, *a, 3, "axes"));
      }
    }
    HEXIR_ASSIGN_OR_RETURN(mode, attr_string(n, "mode", "constant"));
    if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
      return error_at(n.loc, "mode '" + mode + "' is not supported by the ONNX importer");
    if (axes.empty())
      for (size_t d = 0; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
    if (pads.size() != 2 * axes.size())
      return error_at(n.loc, "pads " + shape_text(pads) + " need 2 values per axis (" + std::to_string(axes.size()) + ")");
    std::vector<int64_t> before(rank, 0), after(rank, 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      HEXIR_ASSIGN_OR_RETURN(int64_t d, norm_axis(n, axes[i], rank));
      before[static_cast<size_t>(d)] = pads[i];
      after[static_cast<size_t>(d)] = pads[axes.size() + i];
    }
    std::vector<size_t> padded;
    for (size_t d = 0; d < rank; ++d)
      if (before[d] != 0 || after[d] != 0) padded.push_back(d);
    if (padded.empty()) {
      define(n, 0, x);
      return ok_status();
    }
    if (std::optional<ops::OpId> pad = ops::find_op("pad")) {  // this build's @pad
      ops::AttrMap attrs;
      attrs["mode"] = ops::AttrValue{mode};
      std::vector<int64_t> all(before);
      all.insert(all.end(), after.begin(), after.end());
      attrs["pads"] = int_list(all);
      if (mode == "constant") {
        if (value.is_float())
          attrs["value"] = real(value.f(0));
        else
          attrs["value"] = ops::AttrValue{value.i(0)};
      }
      HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, *pad, {x}, attrs, result_name(n)));
      define(n, 0, r);
      return ok_status();
    }
    const std::string out = out_name(n, 0);
    for (size_t k = 0; k < padded.size(); ++k) {
      const size_t d = padded[k];
      const bool last = k + 1 == padded.size();
      std::vector<int64_t> dims = info(x).dims;
      const int64_t crop_b = std::max<int64_t>(0, -before[d]), crop_e = std::max<int64_t>(0, -after[d]);
      const int64_t b = std::max<int64_t>(0, before[d]), e = std::max<int64_t>(0, after[d]);
      if (crop_b + crop_e > dims[d]) return error_at(n.loc, "negative pads remove more than dim " + std::to_string(d));
      if (crop_b || crop_e) {
        ops::AttrMap attrs;
        attrs["starts"] = int_list({crop_b});
        attrs["ends"] = int_list({dims[d] - crop_e});
        attrs["axes"] = int_list({static_cast<int64_t>(d)});
        const bool done = last && b == 0 && e == 0;
        HEXIR_ASSIGN_OR_RETURN(x, emit1(n, ops::OpId::kSlice, {x}, attrs, done ? result_name(n) : helper_name(n, "crop")));
        dims[d] -= crop_b + crop_e;
      }
      if (b == 0 && e == 0) continue;
      const std::string name = last ? result_name(n) : helper_name(n, "axis" + std::to_string(d));
      if (mode == "constant") {
        std::vector<Ref> parts;
        for (int64_t width : {b, e}) {
          if (width == 0) continue;
          std::vector<int64_t> fill_dims = dims;
          fill_dims[d] = width;
          parts.push_back(fill_const(xi.type, fill_dims, value.bytes, helper_name(n, "fill"), n.loc));
        }
        parts.insert(parts.begin() + (b ? 1 : 0), x);
        ops::AttrMap attrs;
        attrs["axis"] = ops::AttrValue{static_cast<int64_t>(d)};
        HEXIR_ASSIGN_OR_RETURN(x, emit1(n, ops::OpId::kConcat, parts, attrs, name));
        continue;
      }
      const int64_t dim = dims[d];
      if (dim == 0 || (mode == "reflect" && (dim < 2 || b >= dim || e >= dim)))
        return error_at(n.loc, "mode '" + mode + "' pads of " + std::to_string(b) + ", " + std::to_string(e) +
                                   " do not fit dim " + std::to_string(d) + " of size " + std::to_string(dim));
      std::vector<int64_t> index;
      for (int64_t i = -b; i < dim + e; ++i) {
        int64_t j = i;
        if (mode == "edge") j = std::clamp<int64_t>(i, 0, dim - 1);
        else if (mode == "wrap") j = ((i % dim) + dim) % dim;
        else j = i < 0 ? -i : i >= dim ? 2 * (dim - 1) - i : i;  // reflect
        index.push_back(j);
      }
      Ref ix = new_const(helper_name(n, "index" + std::to_string(d)), host_i64(index), n.loc);
      ops::AttrMap attrs;
      attrs["axis"] = ops::AttrValue{static_cast<int64_t>(d)};
      HEXIR_ASSIGN_OR_RETURN(x, emit1(n, ops::OpId::kGather, {x, ix}, attrs, name));
    }
    (void)out;
    define(n, 0, x);
    return ok_status();
  }

  // ---- helpers that fold when their operands are held constants ----
  // x[index] along axis 0, that axis dropped.
  Result<Ref> take0(const NodeCtx& n, Ref x, int64_t index, const std::string& name) {
    const Info xi = info(x);
    std::vector<int64_t> dims(xi.dims.begin() + 1, xi.dims.end());
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(x));
    if (h) {
      std::vector<int64_t> starts(xi.dims.size(), 0), steps(xi.dims.size(), 1), sizes = xi.dims;
      starts[0] = index;
      sizes[0] = 1;
      HostTensor t = slice_host(*h, starts, steps, sizes);
      t.dims = dims;
      used_.insert(name);
      return new_const(name, std::move(t), n.loc);
    }
    ops::AttrMap attrs;
    attrs["starts"] = int_list({index});
    attrs["ends"] = int_list({index + 1});
    attrs["axes"] = int_list({0});
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, ops::OpId::kSlice, {x}, attrs, fresh(name + "_slice")));
    return reshape(n, r, dims, name);
  }
  // Equal parts along `axis`.
  Result<std::vector<Ref>> split_ref(const NodeCtx& n, Ref x, int64_t axis, int parts, const std::string& hint) {
    const Info xi = info(x);
    const int64_t size = xi.dims[static_cast<size_t>(axis)] / parts;
    std::vector<Ref> out;
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(x));
    if (h) {
      for (int i = 0; i < parts; ++i) {
        std::vector<int64_t> starts(xi.dims.size(), 0), steps(xi.dims.size(), 1), sizes = xi.dims;
        starts[static_cast<size_t>(axis)] = i * size;
        sizes[static_cast<size_t>(axis)] = size;
        out.push_back(new_const(fresh(hint + std::to_string(i)), slice_host(*h, starts, steps, sizes), n.loc));
      }
      return out;
    }
    ops::AttrMap attrs;
    attrs["axis"] = ops::AttrValue{axis};
    attrs["sizes"] = int_list(std::vector<int64_t>(static_cast<size_t>(parts), size));
    std::vector<std::string> names;
    for (int i = 0; i < parts; ++i) names.push_back(fresh(hint + std::to_string(i)));
    HEXIR_ASSIGN_OR_RETURN(std::vector<int> ids, emit(n, ops::OpId::kSplit, {x}, attrs, names));
    for (int id : ids) out.push_back(Ref{id, -1});
    return out;
  }
  // a OP b (Add, Sub, Mul, Div), folded when both are held.
  Result<Ref> arith(const NodeCtx& n, const std::string& op, Ref a, Ref b, const std::string& name) {
    std::vector<HostPtr> hs;
    HEXIR_ASSIGN_OR_RETURN(bool held, hosts({a, b}, hs));
    if (held) {
      Result<HostTensor> out = fold_arith(n, op, *hs[0], *hs[1]);
      if (out.ok()) {
        used_.insert(name);
        return new_const(name, std::move(*out), n.loc);
      }
      if (!too_large(out.status())) return out.status();
    }
    return emit1(n, binary_op(op), {a, b}, {}, name);
  }

  // LSTM unrolled over its static sequence length: per step a matmul with
  // the recurrent weights, a split into the i, o, f, c gates, the
  // activations and the state update, all in Hexir operators; the input
  // projection of every step is one matmul up front. Forward, reverse and
  // bidirectional; peepholes; initial states; layout 0 and 1.
  Status op_lstm(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"activation_alpha", "activation_beta", "activations", "clip", "direction",
                                          "hidden_size", "input_forget", "layout"}));
    HEXIR_ASSIGN_OR_RETURN(std::string direction, attr_string(n, "direction", "forward"));
    HEXIR_ASSIGN_OR_RETURN(int64_t hidden, attr_int(n, "hidden_size", 0));
    HEXIR_ASSIGN_OR_RETURN(int64_t layout, attr_int(n, "layout", 0));
    HEXIR_ASSIGN_OR_RETURN(int64_t input_forget, attr_int(n, "input_forget", 0));
    if (input_forget) return error_at(n.loc, "input_forget = 1 is not supported by the ONNX importer");
    if (find_attribute(n.node, "clip")) return error_at(n.loc, "attribute 'clip' is not supported by the ONNX importer");
    if (find_attribute(n.node, "activation_alpha") || find_attribute(n.node, "activation_beta"))
      return error_at(n.loc, "activation_alpha/beta are not supported by the ONNX importer");
    const int dirs = direction == "bidirectional" ? 2 : 1;
    if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
      return error_at(n.loc, "direction '" + direction + "' is not forward, reverse or bidirectional");
    std::vector<ops::OpId> act = {ops::OpId::kSigmoid, ops::OpId::kTanh, ops::OpId::kTanh};
    if (const auto* a = find_attribute(n.node, "activations")) {
      if (a->strings_size() != 3 * dirs) return error_at(n.loc, "activations needs 3 names per direction");
      for (int i = 0; i < a->strings_size(); ++i) {
        const std::string& f = a->strings(i);
        const ops::OpId id = f == "Sigmoid" ? ops::OpId::kSigmoid : f == "Tanh" ? ops::OpId::kTanh
                             : f == "Relu"  ? ops::OpId::kRelu : ops::OpId::kCount;
        if (id == ops::OpId::kCount || (i >= 3 && id != act[static_cast<size_t>(i - 3)]))
          return error_at(n.loc, "activation '" + f + "' is not supported by the ONNX importer (Sigmoid, Tanh, Relu)");
        if (i < 3) act[static_cast<size_t>(i)] = id;
      }
    }
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(Ref w, input(n, 1));
    HEXIR_ASSIGN_OR_RETURN(Ref r, input(n, 2));
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> bias, optional_input(n, 3));
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> seq_lens, optional_input(n, 4));
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> h0, optional_input(n, 5));
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> c0, optional_input(n, 6));
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> peep, optional_input(n, 7));
    if (layout == 1) {  // [batch, seq, input] -> [seq, batch, input]
      HEXIR_ASSIGN_OR_RETURN(x, transpose(n, x, {1, 0, 2}, helper_name(n, "x_seq_major")));
    }
    const Info xi = info(x), wi = info(w);
    if (xi.dims.size() != 3 || wi.dims.size() != 3)
      return error_at(n.loc, "X and W must have rank 3, got " + shape_text(xi.dims) + " and " + shape_text(wi.dims));
    const int64_t seq = xi.dims[0], batch = xi.dims[1], in = xi.dims[2];
    if (hidden == 0) hidden = wi.dims[1] / 4;
    if (wi.dims != std::vector<int64_t>{dirs, 4 * hidden, in} || info(r).dims != std::vector<int64_t>{dirs, 4 * hidden, hidden})
      return error_at(n.loc, "W " + shape_text(wi.dims) + " and R " + shape_text(info(r).dims) +
                                 " do not match hidden_size " + std::to_string(hidden) + " and the input " +
                                 shape_text(xi.dims));
    if (seq_lens) {
      HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> lens, const_ints(n, *seq_lens, 4, "sequence_lens"));
      for (int64_t l : lens)
        if (l != seq)
          return error_at(n.loc, "sequence_lens shorter than the sequence are not supported by the ONNX importer");
    }
    const std::vector<int64_t> state_dims{batch, hidden};
    const std::vector<uint8_t> zero(4, 0);
    std::vector<Ref> ys, hs, cs;  // per direction: Y [seq, 1, batch, H], Y_h [1, batch, H], Y_c
    for (int d = 0; d < dirs; ++d) {
      const bool reverse = direction == "reverse" || d == 1;
      const std::string tag = helper_name(n, "d" + std::to_string(d));
      HEXIR_ASSIGN_OR_RETURN(Ref wd, take0(n, w, d, fresh(tag + "/W")));
      HEXIR_ASSIGN_OR_RETURN(Ref rd, take0(n, r, d, fresh(tag + "/R")));
      HEXIR_ASSIGN_OR_RETURN(Ref wt, transpose(n, wd, {1, 0}, fresh(tag + "/W_T")));  // [I, 4H]
      HEXIR_ASSIGN_OR_RETURN(Ref rt, transpose(n, rd, {1, 0}, fresh(tag + "/R_T")));  // [H, 4H]
      std::optional<Ref> b;
      if (bias) {
        HEXIR_ASSIGN_OR_RETURN(Ref bd, take0(n, *bias, d, fresh(tag + "/B")));
        HEXIR_ASSIGN_OR_RETURN(std::vector<Ref> wb_rb, split_ref(n, bd, 0, 2, tag + "/B"));
        HEXIR_ASSIGN_OR_RETURN(b, arith(n, "Add", wb_rb[0], wb_rb[1], fresh(tag + "/bias")));
      }
      std::vector<Ref> p;  // peepholes i, o, f
      if (peep) {
        HEXIR_ASSIGN_OR_RETURN(Ref pd, take0(n, *peep, d, fresh(tag + "/P")));
        HEXIR_ASSIGN_OR_RETURN(p, split_ref(n, pd, 0, 3, tag + "/P"));
      }
      // Every step's input projection at once: [seq * batch, I] x [I, 4H] (+ bias).
      HEXIR_ASSIGN_OR_RETURN(Ref x2, reshape(n, x, {seq * batch, in}, fresh(tag + "/x2d")));
      HEXIR_ASSIGN_OR_RETURN(Ref xw, emit1(n, ops::OpId::kMatmul, {x2, wt}, {}, fresh(tag + "/xw")));
      if (b) {
        HEXIR_ASSIGN_OR_RETURN(xw, emit1(n, ops::OpId::kAdd, {xw, *b}, {}, fresh(tag + "/xwb")));
      }
      HEXIR_ASSIGN_OR_RETURN(xw, reshape(n, xw, {seq, batch, 4 * hidden}, fresh(tag + "/xw3d")));
      Ref h_state, c_state;
      if (h0) {
        HEXIR_ASSIGN_OR_RETURN(h_state, take0(n, *h0, d, fresh(tag + "/h0")));
      } else {
        h_state = fill_const(kFloat, state_dims, zero, fresh(tag + "/h0"), n.loc);
      }
      if (c0) {
        HEXIR_ASSIGN_OR_RETURN(c_state, take0(n, *c0, d, fresh(tag + "/c0")));
      } else {
        c_state = fill_const(kFloat, state_dims, zero, fresh(tag + "/c0"), n.loc);
      }
      std::vector<Ref> steps(static_cast<size_t>(seq));
      for (int64_t k = 0; k < seq; ++k) {
        const int64_t t = reverse ? seq - 1 - k : k;
        const std::string st = tag + "/t" + std::to_string(t);
        HEXIR_ASSIGN_OR_RETURN(Ref xw_t, take0(n, xw, t, fresh(st + "/xw")));
        HEXIR_ASSIGN_OR_RETURN(Ref hr, emit1(n, ops::OpId::kMatmul, {h_state, rt}, {}, fresh(st + "/hr")));
        HEXIR_ASSIGN_OR_RETURN(Ref g, emit1(n, ops::OpId::kAdd, {xw_t, hr}, {}, fresh(st + "/gates")));
        HEXIR_ASSIGN_OR_RETURN(std::vector<Ref> gate, split_ref(n, g, 1, 4, st + "/g"));  // i, o, f, c
        Ref gi = gate[0], go = gate[1], gf = gate[2], gc = gate[3];
        if (peep) {
          HEXIR_ASSIGN_OR_RETURN(Ref pi, emit1(n, ops::OpId::kMul, {c_state, p[0]}, {}, fresh(st + "/pi")));
          HEXIR_ASSIGN_OR_RETURN(gi, emit1(n, ops::OpId::kAdd, {gi, pi}, {}, fresh(st + "/i_p")));
          HEXIR_ASSIGN_OR_RETURN(Ref pf, emit1(n, ops::OpId::kMul, {c_state, p[2]}, {}, fresh(st + "/pf")));
          HEXIR_ASSIGN_OR_RETURN(gf, emit1(n, ops::OpId::kAdd, {gf, pf}, {}, fresh(st + "/f_p")));
        }
        HEXIR_ASSIGN_OR_RETURN(Ref i_t, emit1(n, act[0], {gi}, {}, fresh(st + "/i")));
        HEXIR_ASSIGN_OR_RETURN(Ref f_t, emit1(n, act[0], {gf}, {}, fresh(st + "/f")));
        HEXIR_ASSIGN_OR_RETURN(Ref c_t, emit1(n, act[1], {gc}, {}, fresh(st + "/c")));
        HEXIR_ASSIGN_OR_RETURN(Ref fc, emit1(n, ops::OpId::kMul, {f_t, c_state}, {}, fresh(st + "/fc")));
        HEXIR_ASSIGN_OR_RETURN(Ref ic, emit1(n, ops::OpId::kMul, {i_t, c_t}, {}, fresh(st + "/ic")));
        HEXIR_ASSIGN_OR_RETURN(c_state, emit1(n, ops::OpId::kAdd, {fc, ic}, {}, fresh(st + "/C")));
        if (peep) {
          HEXIR_ASSIGN_OR_RETURN(Ref po, emit1(n, ops::OpId::kMul, {c_state, p[1]}, {}, fresh(st + "/po")));
          HEXIR_ASSIGN_OR_RETURN(go, emit1(n, ops::OpId::kAdd, {go, po}, {}, fresh(st + "/o_p")));
        }
        HEXIR_ASSIGN_OR_RETURN(Ref o_t, emit1(n, act[0], {go}, {}, fresh(st + "/o")));
        HEXIR_ASSIGN_OR_RETURN(Ref hc, emit1(n, act[2], {c_state}, {}, fresh(st + "/hc")));
        HEXIR_ASSIGN_OR_RETURN(h_state, emit1(n, ops::OpId::kMul, {o_t, hc}, {}, fresh(st + "/H")));
        steps[static_cast<size_t>(t)] = h_state;
      }
      if (!out_name(n, 0).empty()) {
        std::vector<Ref> rows;
        for (int64_t t = 0; t < seq; ++t) {
          HEXIR_ASSIGN_OR_RETURN(Ref row, reshape(n, steps[static_cast<size_t>(t)], {1, 1, batch, hidden},
                                                  fresh(tag + "/y" + std::to_string(t))));
          rows.push_back(row);
        }
        ops::AttrMap attrs;
        attrs["axis"] = ops::AttrValue{int64_t{0}};
        Ref y = rows[0];
        if (rows.size() > 1) {
          HEXIR_ASSIGN_OR_RETURN(y, emit1(n, ops::OpId::kConcat, rows, attrs, fresh(tag + "/Y")));
        }
        ys.push_back(y);
      }
      HEXIR_ASSIGN_OR_RETURN(Ref hl, reshape(n, h_state, {1, batch, hidden}, fresh(tag + "/Y_h")));
      HEXIR_ASSIGN_OR_RETURN(Ref cl, reshape(n, c_state, {1, batch, hidden}, fresh(tag + "/Y_c")));
      hs.push_back(hl);
      cs.push_back(cl);
    }
    // Outputs: directions joined (concat, or a view of the one), then layout 1's order.
    auto join = [&](std::vector<Ref>& parts, int64_t axis, int index, const std::vector<int64_t>& perm) -> Status {
      if (out_name(n, index).empty()) return ok_status();
      const bool permute = layout == 1;
      Ref v = parts[0];
      if (parts.size() > 1) {
        ops::AttrMap attrs;
        attrs["axis"] = ops::AttrValue{axis};
        HEXIR_ASSIGN_OR_RETURN(v, emit1(n, ops::OpId::kConcat, parts, attrs,
                                        permute ? fresh(out_name(n, index) + "/joined") : result_name(n, index)));
      } else if (!permute) {
        const std::vector<int64_t> dims = info(v).dims;
        HEXIR_ASSIGN_OR_RETURN(v, emit1(n, ops::OpId::kReshape, {v}, {}, result_name(n, index),
                                        {TensorType{DType::kF32, dims}}));
      }
      if (permute) {
        ops::AttrMap attrs;
        attrs["perm"] = int_list(perm);
        HEXIR_ASSIGN_OR_RETURN(v, emit1(n, ops::OpId::kTranspose, {v}, attrs, result_name(n, index)));
      }
      define(n, index, v);
      return ok_status();
    };
    HEXIR_RETURN_IF_ERROR(join(ys, 1, 0, {2, 0, 1, 3}));
    HEXIR_RETURN_IF_ERROR(join(hs, 0, 1, {1, 0, 2}));
    HEXIR_RETURN_IF_ERROR(join(cs, 0, 2, {1, 0, 2}));
    return ok_status();
  }

  // Elements [start, start + size) along `axis`, every `step`.
  static HostTensor slice_host(const HostTensor& h, const std::vector<int64_t>& starts,
                               const std::vector<int64_t>& steps, const std::vector<int64_t>& sizes) {
    HostTensor out = make_host(h.type, sizes);
    const auto s = row_strides(h.dims);
    const size_t es = h.esize();
    for_each_coord(sizes, [&](int64_t o, const std::vector<int64_t>& c) {
      int64_t src = 0;
      for (size_t d = 0; d < c.size(); ++d) src += (starts[d] + c[d] * steps[d]) * s[d];
      std::memcpy(out.bytes.data() + static_cast<size_t>(o) * es, h.bytes.data() + static_cast<size_t>(src) * es, es);
    });
    return out;
  }

  Status op_split(const NodeCtx& n) {
    if (opset_ >= 18) {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"axis", "num_outputs"}));
    } else if (opset_ >= 13) {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"axis"}));
    } else {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"axis", "split"}));
    }
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    const Info xi = info(x);
    HEXIR_ASSIGN_OR_RETURN(int64_t axis, attr_int(n, "axis", 0));
    HEXIR_ASSIGN_OR_RETURN(axis, norm_axis(n, axis, xi.dims.size()));
    const int64_t dim = xi.dims[static_cast<size_t>(axis)];
    std::vector<int64_t> sizes;
    if (opset_ < 13) {
      HEXIR_ASSIGN_OR_RETURN(auto s, attr_ints(n, "split"));
      if (s) sizes = *s;
    } else {
      HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> s, optional_input(n, 1));
      if (s) {
        HEXIR_ASSIGN_OR_RETURN(sizes, const_ints(n, *s, 1, "split"));
      }
    }
    const int64_t parts = n.node.output_size();
    if (sizes.empty()) {
      HEXIR_ASSIGN_OR_RETURN(int64_t num, attr_int(n, "num_outputs", parts));
      if (num != parts)
        return error_at(n.loc, "num_outputs " + std::to_string(num) + " but " + std::to_string(parts) + " outputs");
      if (parts < 1) return error_at(n.loc, "has no outputs");
      if (opset_ >= 18) {
        const int64_t each = (dim + parts - 1) / parts;
        for (int64_t i = 0; i < parts; ++i) sizes.push_back(std::max<int64_t>(0, std::min(each, dim - i * each)));
      } else {
        if (dim % parts != 0)
          return error_at(n.loc, "axis of size " + std::to_string(dim) + " does not split into " +
                                     std::to_string(parts) + " equal parts");
        sizes.assign(static_cast<size_t>(parts), dim / parts);
      }
    }
    if (static_cast<int64_t>(sizes.size()) != parts)
      return error_at(n.loc, "split " + shape_text(sizes) + " has " + std::to_string(sizes.size()) +
                                 " sizes for " + std::to_string(parts) + " outputs");
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s < 0) return error_at(n.loc, "split " + shape_text(sizes) + " has a negative size");
      total += s;
    }
    if (total != dim)
      return error_at(n.loc, "split " + shape_text(sizes) + " adds up to " + std::to_string(total) +
                                 ", not the axis size " + std::to_string(dim));
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(x));
    if (h) {
      int64_t start = 0;
      for (int64_t i = 0; i < parts; ++i) {
        std::vector<int64_t> starts(xi.dims.size(), 0), steps(xi.dims.size(), 1), dims = xi.dims;
        starts[static_cast<size_t>(axis)] = start;
        dims[static_cast<size_t>(axis)] = sizes[static_cast<size_t>(i)];
        start += sizes[static_cast<size_t>(i)];
        define_folded(n, static_cast<int>(i), slice_host(*h, starts, steps, dims));
      }
      return ok_status();
    }
    if (parts == 1) {
      define(n, 0, x);
      return ok_status();
    }
    ops::AttrMap attrs;
    attrs["axis"] = ops::AttrValue{axis};
    attrs["sizes"] = int_list(sizes);
    std::vector<std::string> names;
    for (int i = 0; i < parts; ++i) names.push_back(result_name(n, i));
    HEXIR_ASSIGN_OR_RETURN(std::vector<int> ids, emit(n, ops::OpId::kSplit, {x}, attrs, names));
    for (int i = 0; i < parts; ++i) define(n, i, Ref{ids[static_cast<size_t>(i)], -1});
    return ok_status();
  }

  Status op_slice(const NodeCtx& n) {
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    const Info xi = info(x);
    std::vector<int64_t> starts, ends, axes, steps;
    if (opset_ < 10) {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {"starts", "ends", "axes"}));
      HEXIR_ASSIGN_OR_RETURN(auto s, attr_ints(n, "starts"));
      HEXIR_ASSIGN_OR_RETURN(auto e, attr_ints(n, "ends"));
      HEXIR_ASSIGN_OR_RETURN(auto a, attr_ints(n, "axes"));
      if (!s || !e) return error_at(n.loc, "attributes 'starts' and 'ends' are required");
      starts = *s;
      ends = *e;
      if (a) axes = *a;
    } else {
      HEXIR_RETURN_IF_ERROR(check_attrs(n, {}));
      HEXIR_ASSIGN_OR_RETURN(Ref s, input(n, 1));
      HEXIR_ASSIGN_OR_RETURN(Ref e, input(n, 2));
      HEXIR_ASSIGN_OR_RETURN(starts, const_ints(n, s, 1, "starts"));
      HEXIR_ASSIGN_OR_RETURN(ends, const_ints(n, e, 2, "ends"));
      HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> a, optional_input(n, 3));
      HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> st, optional_input(n, 4));
      if (a) {
        HEXIR_ASSIGN_OR_RETURN(axes, const_ints(n, *a, 3, "axes"));
      }
      if (st) {
        HEXIR_ASSIGN_OR_RETURN(steps, const_ints(n, *st, 4, "steps"));
      }
    }
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      return error_at(n.loc, "starts, ends, axes and steps differ in length");
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(x));
    if (h) {
      // The same bounds as @slice (ONNX semantics).
      std::vector<int64_t> st(xi.dims.size(), 0), sp(xi.dims.size(), 1), sz = xi.dims;
      for (size_t i = 0; i < starts.size(); ++i) {
        HEXIR_ASSIGN_OR_RETURN(int64_t axis, norm_axis(n, axes[i], xi.dims.size()));
        const int64_t dim = xi.dims[static_cast<size_t>(axis)], step = steps[i];
        if (step == 0) return error_at(n.loc, "a step is 0");
        const ops::SliceBounds bounds = ops::slice_bounds(starts[i], ends[i], step, dim);
        st[static_cast<size_t>(axis)] = bounds.start;
        sp[static_cast<size_t>(axis)] = step;
        sz[static_cast<size_t>(axis)] = bounds.size;
      }
      define_folded(n, 0, slice_host(*h, st, sp, sz));
      return ok_status();
    }
    ops::AttrMap attrs;
    attrs["starts"] = int_list(starts);
    attrs["ends"] = int_list(ends);
    attrs["axes"] = int_list(axes);
    attrs["steps"] = int_list(steps);
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, ops::OpId::kSlice, {x}, attrs, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  Status op_gather(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"axis"}));
    HEXIR_ASSIGN_OR_RETURN(Ref data, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(Ref indices, input(n, 1));
    const Info di = info(data);
    HEXIR_ASSIGN_OR_RETURN(int64_t axis, attr_int(n, "axis", 0));
    HEXIR_ASSIGN_OR_RETURN(axis, norm_axis(n, axis, di.dims.size()));
    std::vector<HostPtr> hs;
    HEXIR_ASSIGN_OR_RETURN(bool held, hosts({data, indices}, hs));
    if (held) {
      const HostTensor& d = *hs[0];
      const HostTensor& ix = *hs[1];
      if (ix.is_float()) return error_at(n.loc, "indices must be integers");
      const size_t a = static_cast<size_t>(axis);
      std::vector<int64_t> dims(d.dims.begin(), d.dims.begin() + axis);
      dims.insert(dims.end(), ix.dims.begin(), ix.dims.end());
      dims.insert(dims.end(), d.dims.begin() + axis + 1, d.dims.end());
      Status limit = fold_limit(d.type, dims);
      if (limit.ok()) {
        HostTensor out = make_host(d.type, dims);
        const int64_t outer = product(d.dims, 0, a), axis_dim = d.dims[a];
        const size_t inner = static_cast<size_t>(product(d.dims, a + 1, d.dims.size())) * d.esize();
        size_t at = 0;
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t k = 0; k < ix.count(); ++k) {
            int64_t i = ix.i(k);
            if (i < 0) i += axis_dim;
            if (i < 0 || i >= axis_dim)
              return error_at(n.loc, "index " + std::to_string(ix.i(k)) + " is out of range for an axis of " +
                                         std::to_string(axis_dim));
            std::memcpy(out.bytes.data() + at, d.bytes.data() + (static_cast<size_t>(o * axis_dim + i)) * inner, inner);
            at += inner;
          }
        define_folded(n, 0, std::move(out));
        return ok_status();
      }
    }
    ops::AttrMap attrs;
    attrs["axis"] = ops::AttrValue{axis};
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, ops::OpId::kGather, {data, indices}, attrs, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  Status op_cast(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"to", "saturate"}));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    const auto* to_attr = find_attribute(n.node, "to");
    if (!to_attr) return error_at(n.loc, "attribute 'to' is missing");
    int32_t to = 0;
    if (to_attr->type() == onnx::AttributeProto::INT) {
      to = static_cast<int32_t>(to_attr->i());
    } else if (to_attr->type() == onnx::AttributeProto::STRING) {  // opset 1: a type name
      for (int32_t t = 1; t <= kBFloat16; ++t)
        if (onnx_type_name(t) == to_attr->s()) to = t;
    }
    if (onnx_element_size(to) == 0) return error_at(n.loc, "cast to " + onnx_type_name(to) + " is not supported");
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(x));
    if (h) {
      HostTensor out = make_host(to, h->dims);
      for (int64_t i = 0; i < h->count(); ++i) {
        if (h->is_float())
          out.set_f(i, h->f(i));
        else
          out.set_i(i, h->i(i));
      }
      define_folded(n, 0, std::move(out));
      return ok_status();
    }
    if (info(x).type == to) {
      define(n, 0, x);
      return ok_status();
    }
    const std::optional<DType> dtype = dtype_from_onnx(to);
    if (!dtype) return error_at(n.loc, "cast to " + onnx_type_name(to) + " is not supported at run time");
    ops::AttrMap attrs;
    attrs["to"] = ops::AttrValue{std::string(dtype_name(*dtype))};
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, ops::OpId::kCast, {x}, attrs, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  Status op_where(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {}));
    HEXIR_ASSIGN_OR_RETURN(Ref c, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 1));
    HEXIR_ASSIGN_OR_RETURN(Ref y, input(n, 2));
    std::vector<HostPtr> hs;
    HEXIR_ASSIGN_OR_RETURN(bool held, hosts({c, x, y}, hs));
    if (held) {
      const HostTensor &hc = *hs[0], &hx = *hs[1], &hy = *hs[2];
      auto xy = ops::broadcast_shapes(hx.dims, hy.dims);
      auto dims = xy ? ops::broadcast_shapes(hc.dims, *xy) : std::nullopt;
      if (!dims || hx.type != hy.type) return error_at(n.loc, "operands do not broadcast or differ in type");
      Status limit = fold_limit(hx.type, *dims);
      if (limit.ok()) {
        HostTensor out = make_host(hx.type, *dims);
        const auto sc = row_strides(hc.dims), sx = row_strides(hx.dims), sy = row_strides(hy.dims);
        const size_t es = out.esize();
        for_each_coord(*dims, [&](int64_t o, const std::vector<int64_t>& co) {
          const bool pick = hc.i(broadcast_source(co, hc.dims, sc)) != 0;
          const HostTensor& src = pick ? hx : hy;
          const int64_t i = broadcast_source(co, src.dims, pick ? sx : sy);
          std::memcpy(out.bytes.data() + static_cast<size_t>(o) * es, src.bytes.data() + static_cast<size_t>(i) * es, es);
        });
        define_folded(n, 0, std::move(out));
        return ok_status();
      }
    }
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, ops::OpId::kWhere, {c, x, y}, {}, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  Status op_conv(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(Ref w, input(n, 1));
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> bias, optional_input(n, 2));
    const Info xi = info(x), wi = info(w);
    if (xi.dims.size() != 4 && xi.dims.size() != 3)
      return error_at(n.loc, "a " + std::to_string(static_cast<int64_t>(xi.dims.size()) - 2) +
                                 "-D convolution is not supported by the ONNX importer (only 1-D and 2-D); the input is " +
                                 shape_text(xi.dims));
    if (wi.dims.size() != xi.dims.size())
      return error_at(n.loc, "weights " + shape_text(wi.dims) + " do not match the input's rank");
    const size_t spatial = xi.dims.size() - 2;
    auto list = [&](const char* name, int64_t fallback, size_t count) -> Result<std::vector<int64_t>> {
      HEXIR_ASSIGN_OR_RETURN(auto v, attr_ints(n, name));
      if (!v) return std::vector<int64_t>(count, fallback);
      if (v->size() != count)
        return error_at(n.loc, "attribute '" + std::string(name) + "' has " + std::to_string(v->size()) +
                                   " values, expected " + std::to_string(count));
      return *v;
    };
    HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> strides, list("strides", 1, spatial));
    HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, list("dilations", 1, spatial));
    HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> pads, list("pads", 0, 2 * spatial));
    HEXIR_ASSIGN_OR_RETURN(int64_t group, attr_int(n, "group", 1));
    HEXIR_ASSIGN_OR_RETURN(auto kernel, attr_ints(n, "kernel_shape"));
    const std::vector<int64_t> kdims(wi.dims.begin() + 2, wi.dims.end());
    if (kernel && *kernel != kdims)
      return error_at(n.loc, "kernel_shape " + shape_text(*kernel) + " does not match the weights " + shape_text(wi.dims));
    HEXIR_ASSIGN_OR_RETURN(std::string auto_pad, attr_string(n, "auto_pad", "NOTSET"));
    for (int64_t v : strides)
      if (v < 1) return error_at(n.loc, "strides must be >= 1");
    for (int64_t v : dilations)
      if (v < 1) return error_at(n.loc, "dilations must be >= 1");
    if (auto_pad == "VALID") {
      std::fill(pads.begin(), pads.end(), 0);
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      for (size_t d = 0; d < spatial; ++d) {
        const int64_t in = xi.dims[2 + d], s = strides[d];
        const int64_t out = (in + s - 1) / s;
        const int64_t window = (kdims[d] - 1) * dilations[d] + 1;
        const int64_t total = std::max<int64_t>(0, (out - 1) * s + window - in);
        const int64_t small = total / 2, large = total - small;
        pads[d] = auto_pad == "SAME_UPPER" ? small : large;
        pads[spatial + d] = auto_pad == "SAME_UPPER" ? large : small;
      }
    } else if (auto_pad != "NOTSET") {
      return error_at(n.loc, "auto_pad '" + auto_pad + "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
    }
    std::vector<int64_t> stride2 = strides, dil2 = dilations, pad2;
    if (spatial == 1) {  // [N,C,L] as [N,C,1,L]
      stride2 = {1, strides[0]};
      dil2 = {1, dilations[0]};
      pad2 = {0, pads[0], 0, pads[1]};
      HEXIR_ASSIGN_OR_RETURN(x, reshape(n, x, {xi.dims[0], xi.dims[1], 1, xi.dims[2]}, helper_name(n, "x2d")));
      HEXIR_ASSIGN_OR_RETURN(w, reshape(n, w, {wi.dims[0], wi.dims[1], 1, wi.dims[2]}, helper_name(n, "w2d")));
    } else {
      pad2 = pads;
    }
    ops::AttrMap attrs;
    attrs["strides"] = int_list(stride2);
    attrs["dilations"] = int_list(dil2);
    attrs["pads"] = int_list(pad2);
    attrs["groups"] = ops::AttrValue{group};
    std::vector<Ref> operands{x, w};
    if (bias) operands.push_back(*bias);
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, ops::OpId::kConv2d, operands, attrs,
                                        spatial == 1 ? helper_name(n, "conv2d") : result_name(n)));
    if (spatial == 1) {
      const std::vector<int64_t> dims = info(r).dims;
      HEXIR_ASSIGN_OR_RETURN(r, reshape(n, r, {dims[0], dims[1], dims[3]}, result_name(n)));
    }
    define(n, 0, r);
    return ok_status();
  }

  // -- vanishing, constants, shapes ------------------------------------------------------------
  Status op_identity(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {}));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    define(n, 0, x);
    return ok_status();
  }

  Status op_dropout(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"ratio", "seed", "is_test", "consumed_inputs"}));
    HEXIR_RETURN_IF_ERROR(only_first_outputs(n, 1));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> training, optional_input(n, 2));
    if (training) {
      HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(*training));
      if (!h || h->count() != 1 || h->i(0) != 0)
        return error_at(n.loc, "training_mode must be a constant false (inference only)");
    }
    define(n, 0, x);
    return ok_status();
  }

  Status op_constant(const NodeCtx& n) {
    if (n.node.attribute_size() != 1) return error_at(n.loc, "needs exactly one value attribute");
    const auto& a = n.node.attribute(0);
    HostTensor h;
    if (a.name() == "value" && n.top_index >= 0 && raw_spans_.node_tensors.count({n.top_index, 0})) {
      // Its raw_data stayed in the file (the scan at load): a constant that reads it there.
      const FileSpan raw = raw_spans_.node_tensors.at({n.top_index, 0});
      const onnx::TensorProto& t = a.t();
      ConstRecord c;
      c.type = t.data_type();
      c.dims.assign(t.dims().begin(), t.dims().end());
      c.loc = n.loc;
      if (onnx_element_size(c.type) == 0)
        return error_at(n.loc, "tensor of type " + onnx_type_name(c.type) + " is not supported");
      for (int64_t d : c.dims)
        if (d < 0) return error_at(n.loc, "negative dim in " + shape_text(c.dims));
      if (raw.size != c.bytes())
        return error_at(n.loc, "raw_data holds " + std::to_string(raw.size) + " bytes, " + onnx_type_name(c.type) +
                                   shape_text(c.dims) + " needs " + std::to_string(c.bytes()));
      const std::string o = out_name(n, 0);
      if (o.empty()) return ok_status();
      c.name = claim(o);
      c.file = FileRange{path_, raw.offset};
      consts_.push_back(std::move(c));
      define(n, 0, Ref{-1, static_cast<int>(consts_.size()) - 1});
      return ok_status();
    }
    if (a.name() == "value") {
      HEXIR_ASSIGN_OR_RETURN(h, proto_contents(a.t(), n.loc));
    } else if (a.name() == "value_float") {
      h = make_host(kFloat, {});
      h.set_f(0, a.f());
    } else if (a.name() == "value_floats") {
      h = make_host(kFloat, {a.floats_size()});
      for (int i = 0; i < a.floats_size(); ++i) h.set_f(i, a.floats(i));
    } else if (a.name() == "value_int") {
      h = host_i64({a.i()}, true);
    } else if (a.name() == "value_ints") {
      h = host_i64(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    } else {
      return error_at(n.loc, "attribute '" + a.name() + "' is not supported by the ONNX importer (strings and sparse tensors)");
    }
    define_folded(n, 0, std::move(h));
    return ok_status();
  }

  // The contents of tensor attribute `a` of node `n`, its raw_data read from the file when the scan left it there.
  Result<HostTensor> attribute_contents(const NodeCtx& n, const onnx::AttributeProto& a) {
    int index = 0;
    while (index < n.node.attribute_size() && &n.node.attribute(index) != &a) ++index;
    auto it = n.top_index >= 0 ? raw_spans_.node_tensors.find({n.top_index, index}) : raw_spans_.node_tensors.end();
    if (it == raw_spans_.node_tensors.end()) return proto_contents(a.t(), n.loc);
    const uint32_t esize = onnx_element_size(a.t().data_type());
    if (esize == 0) return error_at(n.loc, "tensor of type " + onnx_type_name(a.t().data_type()) + " is not supported");
    // Sized against the bytes in the file before anything is allocated.
    uint64_t count = 1;
    for (int64_t d : a.t().dims())
      if (d < 0 || (d > 0 && count > it->second.size / static_cast<uint64_t>(d)))
        return error_at(n.loc, "attribute '" + a.name() + "': dims do not match its " +
                                   std::to_string(it->second.size) + " bytes of raw_data");
      else
        count *= static_cast<uint64_t>(d);
    if (count * esize != it->second.size)
      return error_at(n.loc, "attribute '" + a.name() + "': raw_data holds " + std::to_string(it->second.size) +
                                 " bytes, " + std::to_string(count * esize) + " are needed");
    HostTensor h = make_host(a.t().data_type(), std::vector<int64_t>(a.t().dims().begin(), a.t().dims().end()));
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path_.c_str(), "rb"), std::fclose);
    if (!f || fseeko(f.get(), static_cast<off_t>(it->second.offset), SEEK_SET) != 0 ||
        std::fread(h.bytes.data(), 1, h.bytes.size(), f.get()) != h.bytes.size())
      return error_at(n.loc, "cannot read the raw_data of attribute '" + a.name() + "' from '" + path_.string() + "'");
    return h;
  }

  // The contents of a TensorProto inside the model (a Constant node's value).
  Result<HostTensor> proto_contents(const onnx::TensorProto& t, const Location& loc) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      HostTensor h = make_host(t.data_type(), std::vector<int64_t>(t.dims().begin(), t.dims().end()));
      if (h.esize() == 0) return error_at(loc, "tensor of type " + onnx_type_name(t.data_type()) + " is not supported");
      HEXIR_ASSIGN_OR_RETURN(FileRange range, external_range(t, h.bytes.size(), loc));
      std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(range.path.c_str(), "rb"), std::fclose);
      if (!f || fseeko(f.get(), static_cast<off_t>(range.offset), SEEK_SET) != 0 ||
          std::fread(h.bytes.data(), 1, h.bytes.size(), f.get()) != h.bytes.size())
        return error_at(loc, "cannot read external data from '" + range.path.string() + "'");
      return h;
    }
    return typed_contents(t, loc);
  }

 public:
  // raw_data or the typed fields of a tensor (no external data).
  static Result<HostTensor> typed_contents(const onnx::TensorProto& t, const Location& loc) {
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    for (int64_t d : dims)
      if (d < 0) return error_at(loc, "tensor '" + t.name() + "' has a negative dim in " + shape_text(dims));
    const int32_t type = t.data_type();
    if (onnx_element_size(type) == 0)
      return error_at(loc, "tensor '" + t.name() + "' of type " + onnx_type_name(type) + " is not supported");
    if (t.has_segment()) return error_at(loc, "tensor '" + t.name() + "' is segmented, which is not supported");
    int64_t count = 1;
    for (int64_t d : dims) {
      if (d != 0 && count > (int64_t{1} << 40) / d) return error_at(loc, "tensor '" + t.name() + "' is too large");
      count *= d;
    }
    HostTensor h = make_host(type, dims);
    if (t.has_raw_data()) {
      if (t.raw_data().size() != h.bytes.size())
        return error_at(loc, "tensor '" + t.name() + "' has " + std::to_string(t.raw_data().size()) +
                                 " bytes of raw_data, " + onnx_type_name(type) + shape_text(dims) + " needs " +
                                 std::to_string(h.bytes.size()));
      if (!h.bytes.empty()) std::memcpy(h.bytes.data(), t.raw_data().data(), h.bytes.size());  // empty: may be null
      return h;
    }
    auto check = [&](int64_t got) -> Status {
      if (got != count)
        return error_at(loc, "tensor '" + t.name() + "' holds " + std::to_string(got) + " values, " +
                                 onnx_type_name(type) + shape_text(dims) + " needs " + std::to_string(count));
      return ok_status();
    };
    switch (type) {
      case kFloat:
        HEXIR_RETURN_IF_ERROR(check(t.float_data_size()));
        for (int64_t i = 0; i < count; ++i) h.set_f(i, t.float_data(static_cast<int>(i)));
        break;
      case kDouble:
        HEXIR_RETURN_IF_ERROR(check(t.double_data_size()));
        for (int64_t i = 0; i < count; ++i) h.set_f(i, t.double_data(static_cast<int>(i)));
        break;
      case kInt64:
        HEXIR_RETURN_IF_ERROR(check(t.int64_data_size()));
        for (int64_t i = 0; i < count; ++i) h.set_i(i, t.int64_data(static_cast<int>(i)));
        break;
      case kUint32:
      case kUint64:
        HEXIR_RETURN_IF_ERROR(check(t.uint64_data_size()));
        for (int64_t i = 0; i < count; ++i) h.set_i(i, static_cast<int64_t>(t.uint64_data(static_cast<int>(i))));
        break;
      case kFloat16:
      case kBFloat16: {  // bit patterns in int32_data
        HEXIR_RETURN_IF_ERROR(check(t.int32_data_size()));
        for (int64_t i = 0; i < count; ++i) {
          const uint16_t bits = static_cast<uint16_t>(t.int32_data(static_cast<int>(i)));
          std::memcpy(h.bytes.data() + 2 * i, &bits, 2);
        }
        break;
      }
      default:  // INT32, INT16, INT8, UINT16, UINT8, BOOL in int32_data
        HEXIR_RETURN_IF_ERROR(check(t.int32_data_size()));
        for (int64_t i = 0; i < count; ++i) h.set_i(i, t.int32_data(static_cast<int>(i)));
        break;
    }
    return h;
  }

 private:
  Status op_shape(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"start", "end"}));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    const std::vector<int64_t> dims = info(x).dims;
    const int64_t rank = static_cast<int64_t>(dims.size());
    HEXIR_ASSIGN_OR_RETURN(int64_t start, attr_int(n, "start", 0));
    HEXIR_ASSIGN_OR_RETURN(int64_t end, attr_int(n, "end", rank));
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    define_folded(n, 0, host_i64(std::vector<int64_t>(dims.begin() + start, dims.begin() + end)));
    return ok_status();
  }

  Status op_size(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {}));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    define_folded(n, 0, host_i64({info(x).count()}, true));
    return ok_status();
  }

  Status op_constant_of_shape(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {"value"}));
    HEXIR_ASSIGN_OR_RETURN(Ref s, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> dims, const_ints(n, s, 0, "the shape"));
    for (int64_t d : dims)
      if (d < 0) return error_at(n.loc, "shape " + shape_text(dims) + " has a negative dim");
    HostTensor value = make_host(kFloat, {1});
    if (const auto* a = find_attribute(n.node, "value")) {
      HEXIR_ASSIGN_OR_RETURN(value, attribute_contents(n, *a));
      if (value.count() != 1) return error_at(n.loc, "attribute 'value' must hold one element");
    }
    const std::string o = out_name(n, 0);
    if (o.empty()) return ok_status();
    if (fold_limit(value.type, dims).ok()) {
      HEXIR_ASSIGN_OR_RETURN(HostTensor out, expand_host(HostTensor{value.type, {}, value.bytes}, dims));
      define_folded(n, 0, std::move(out));
    } else {
      define(n, 0, fill_const(value.type, dims, value.bytes, claim(o), n.loc));
    }
    return ok_status();
  }

  Status op_range(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {}));
    std::vector<HostPtr> hs;
    std::vector<std::optional<Ref>> refs;
    for (int i = 0; i < 3; ++i) {
      HEXIR_ASSIGN_OR_RETURN(Ref r, input(n, i));
      refs.push_back(r);
    }
    HEXIR_ASSIGN_OR_RETURN(bool held, hosts(refs, hs));
    if (!held) return error_at(n.loc, "start, limit and delta must be constants (Range folds at import only)");
    for (const HostPtr& h : hs)
      if (h->count() != 1) return error_at(n.loc, "start, limit and delta must be scalars");
    const int32_t type = hs[0]->type;
    int64_t count = 0;
    if (hs[0]->is_float()) {
      const double start = hs[0]->f(0), limit = hs[1]->f(0), delta = hs[2]->f(0);
      if (delta == 0) return error_at(n.loc, "delta is 0");
      count = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
      HEXIR_RETURN_IF_ERROR(fold_limit(type, {count}));
      HostTensor out = make_host(type, {count});
      for (int64_t i = 0; i < count; ++i) out.set_f(i, start + static_cast<double>(i) * delta);
      define_folded(n, 0, std::move(out));
    } else {
      const int64_t start = hs[0]->i(0), limit = hs[1]->i(0), delta = hs[2]->i(0);
      if (delta == 0) return error_at(n.loc, "delta is 0");
      const __int128 span = static_cast<__int128>(limit) - start;
      count = span <= 0 && delta > 0 ? 0 : span >= 0 && delta < 0 ? 0
              : static_cast<int64_t>((span + (delta > 0 ? delta - 1 : delta + 1)) / delta);
      if (fold_limit(type, {count}).code() != StatusCode::kOk) return error_at(n.loc, "the range is too long to fold");
      HostTensor out = make_host(type, {count});
      for (int64_t i = 0; i < count; ++i) out.set_i(i, start + i * delta);
      define_folded(n, 0, std::move(out));
    }
    return ok_status();
  }

  // Bidirectional broadcast to a constant shape: folded for held constants,
  // else where(true[shape], x, x), which broadcasts any dtype.
  Status op_expand(const NodeCtx& n) {
    HEXIR_RETURN_IF_ERROR(check_attrs(n, {}));
    HEXIR_ASSIGN_OR_RETURN(Ref x, input(n, 0));
    HEXIR_ASSIGN_OR_RETURN(Ref s, input(n, 1));
    HEXIR_ASSIGN_OR_RETURN(std::vector<int64_t> shape, const_ints(n, s, 1, "the shape"));
    const Info xi = info(x);
    auto dims = ops::broadcast_shapes(xi.dims, shape);
    if (!dims) return error_at(n.loc, "cannot expand " + shape_text(xi.dims) + " to " + shape_text(shape));
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(x));
    if (h && fold_limit(xi.type, *dims).ok()) {
      HEXIR_ASSIGN_OR_RETURN(HostTensor out, expand_host(*h, *dims));
      define_folded(n, 0, std::move(out));
      return ok_status();
    }
    if (*dims == xi.dims) {
      define(n, 0, x);
      return ok_status();
    }
    if (std::optional<ops::OpId> expand = ops::find_op("expand")) {  // this build's @expand
      ops::AttrMap attrs;
      attrs["shape"] = int_list(shape);
      HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, *expand, {x}, attrs, result_name(n)));
      define(n, 0, r);
      return ok_status();
    }
    Ref cond = fill_const(kBool, *dims, {1}, helper_name(n, "true"), n.loc);
    HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, ops::OpId::kWhere, {cond, x, x}, {}, result_name(n)));
    define(n, 0, r);
    return ok_status();
  }

  // ---- outputs ---------------------------------------------------------------------
  Status set_outputs(const onnx::GraphProto& graph) {
    std::vector<int> values;
    std::set<int> returned;
    for (const auto& out : graph.output()) {
      const Location loc = Location::imported(file_, out.name(), "output");
      auto it = entries_.find(out.name());
      if (it == entries_.end()) return error_at(loc, "output '" + out.name() + "' is not computed by the graph");
      Ref r = it->second;
      const Info ri = info(r);
      if (out.type().has_tensor_type()) {
        const auto& tt = out.type().tensor_type();
        if (tt.elem_type() != 0 && tt.elem_type() != ri.type)
          return error_at(loc, "output '" + out.name() + "' is declared " + onnx_type_name(tt.elem_type()) +
                                   ", the graph computes " + onnx_type_name(ri.type));
        if (tt.has_shape() && !shapes_overridden_) {
          bool match = tt.shape().dim_size() == static_cast<int>(ri.dims.size());
          for (int d = 0; match && d < tt.shape().dim_size(); ++d)
            if (tt.shape().dim(d).has_dim_value()) match = tt.shape().dim(d).dim_value() == ri.dims[static_cast<size_t>(d)];
          if (!match)
            return error_at(loc, "output '" + out.name() + "' is declared with another shape than the graph computes, " +
                                     shape_text(ri.dims));
        }
      }
      HEXIR_ASSIGN_OR_RETURN(int v, materialize(r, loc));
      const Value& value = builder_.value(v);
      const bool renamed = value.name != out.name();
      if (returned.count(v) || renamed) {
        // Another name for a value (an Identity, a second output of one value): a copy named for the output.
        NodeSpec spec;
        spec.op = ops::OpId::kCopy;
        spec.inputs = {v};
        spec.names = {claim(out.name())};
        spec.locs.node = loc;
        HEXIR_ASSIGN_OR_RETURN(std::vector<int> ids, builder_.add_node(std::move(spec)));
        v = ids[0];
      }
      returned.insert(v);
      values.push_back(v);
    }
    if (values.empty()) return invalid_argument(path_.string() + ": the graph has no outputs");
    return builder_.set_outputs(values, Location::imported(file_, "", ""));
  }

  std::filesystem::path path_, base_dir_;
  std::shared_ptr<const std::string> file_;
  const OnnxImportOptions& options_;
  onnx::ModelProto model_;
  RawSpans raw_spans_;
  int64_t opset_ = 0;
  bool shapes_overridden_ = false;
  GraphBuilder builder_;
  std::vector<ConstRecord> consts_;
  std::map<std::string, Ref, std::less<>> entries_;
  std::set<std::string, std::less<>> reserved_, used_, needed_names_, initializer_names_;
  std::vector<bool> needed_node_;
  int tentative_ = 0;  // attempts open (begin_attempt): what they build may be undone
};

}  // namespace

Result<Module> import_onnx(const std::filesystem::path& path, const OnnxImportOptions& options) {
  return Importer(path, options).run();
}

Result<OnnxTensor> tensor_from_proto(const onnx::TensorProto& tensor, const std::filesystem::path& base_dir) {
  const Location loc = Location::imported(std::make_shared<const std::string>(""), tensor.name(), "tensor");
  const std::optional<DType> dtype = dtype_from_onnx(tensor.data_type());
  if (!dtype)
    return invalid_argument("tensor '" + tensor.name() + "' has element type " + onnx_type_name(tensor.data_type()) +
                            ", which Hexir does not support");
  OnnxTensor out;
  out.type = TensorType{*dtype, std::vector<int64_t>(tensor.dims().begin(), tensor.dims().end())};
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    uint64_t offset = 0;
    for (const auto& kv : tensor.external_data()) {
      if (kv.key() == "location") location = kv.value();
      if (kv.key() == "offset") offset = std::strtoull(kv.value().c_str(), nullptr, 10);
    }
    HEXIR_ASSIGN_OR_RETURN(uint64_t size, byte_size(out.type));
    out.bytes.resize(size);
    const std::filesystem::path file = base_dir / location;
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(file.c_str(), "rb"), std::fclose);
    if (location.empty() || !f || fseeko(f.get(), static_cast<off_t>(offset), SEEK_SET) != 0 ||
        std::fread(out.bytes.data(), 1, size, f.get()) != size)
      return data_loss("tensor '" + tensor.name() + "': cannot read " + std::to_string(size) +
                       " bytes of external data from '" + file.string() + "'");
    return out;
  }
  Result<HostTensor> h = Importer::typed_contents(tensor, loc);
  if (!h.ok()) return invalid_argument(h.status().message());
  out.bytes = std::move(h->bytes);
  return out;
}

Result<OnnxTensor> read_onnx_tensor_file(const std::filesystem::path& path) {
  HEXIR_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::open(path.string()));
  onnx::TensorProto tensor;
  if (mapped.size() > static_cast<size_t>(INT32_MAX) ||
      !tensor.ParseFromArray(mapped.data(), static_cast<int>(mapped.size())))
    return invalid_argument("'" + path.string() + "' is not a serialized ONNX TensorProto");
  Result<OnnxTensor> t = tensor_from_proto(tensor, path.parent_path());
  if (!t.ok()) return t.status().annotate(path.string());
  return t;
}

#endif  // HEXIR_HAVE_ONNX

}  // namespace hexir::compiler
