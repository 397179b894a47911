#include "hexir/compiler/hxir.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "hexir/base/half.h"
#include "hexir/base/npy.h"
#include "ir/constant_data.h"

namespace hexir::compiler {

namespace {

bool is_plain_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '$';
}

std::string quote_text(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (b < 0x20 || b == 0x7f) {
      const char* digits = "0123456789abcdef";
      out += "\\x";
      out += digits[b >> 4];
      out += digits[b & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A double as the shortest text that reads back as the same double; the
// lexer reads "-0" as the integer 0, so negative zero keeps a ".0".
std::string number_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0 && std::signbit(v)) return "-0.0";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;
  return std::string(buf, end);
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string type_text(const TensorType& t) { return std::string(dtype_name(t.dtype)) + dims_text(t.dims); }

// One element of `dtype` at `p` as text the parser reads back to the same bytes.
std::string element_text(DType dtype, const uint8_t* p) {
  switch (dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      return number_text(static_cast<double>(f));
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return number_text(static_cast<double>(half_bits_to_float(h)));
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return number_text(static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(h) << 16)));
    }
    case DType::kI32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return std::to_string(v);
    }
    case DType::kI64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return std::to_string(v);
    }
    case DType::kI8:
      return std::to_string(static_cast<int8_t>(*p));
    case DType::kU8:
      return std::to_string(*p);
    case DType::kBool:
      return *p ? "true" : "false";
  }
  return "0";
}

// Whether an element prints back to the same bytes (NaN payloads and the sign
// of a NaN do not; such constants go to an .npy file or fail).
bool element_round_trips(DType dtype, const uint8_t* p) {
  switch (dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      if (!std::isnan(f)) return true;
      const float canonical = static_cast<float>(std::numeric_limits<double>::quiet_NaN());
      return std::memcmp(&f, &canonical, 4) == 0;
    }
    case DType::kF16:
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      const float f =
          dtype == DType::kF16 ? half_bits_to_float(h) : std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
      if (!std::isnan(f)) return true;
      const float canonical = static_cast<float>(std::numeric_limits<double>::quiet_NaN());
      const uint16_t back = dtype == DType::kF16 ? float_to_half_bits(canonical) : float_to_bfloat16_bits(canonical);
      return back == h;
    }
    default:
      return true;
  }
}

std::string attr_text(const ops::AttrValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v.value)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v.value)) {
    std::string s = number_text(*d);
    // A float attribute must read back as a float: "1" would be an integer.
    if (s.find_first_of(".eninf") == std::string::npos) s += ".0";
    return s;
  }
  if (const auto* s = std::get_if<std::string>(&v.value)) return quote_text(*s);
  std::string out = "[";
  const auto& list = std::get<std::vector<ops::AttrValue>>(v.value);
  for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + attr_text(list[i]);
  return out + "]";
}

ops::AttrValue ints(std::vector<int64_t> v) {
  std::vector<ops::AttrValue> list;
  for (int64_t x : v) {
      ops::AttrValue item;
      item.value = x;
      list.push_back(std::move(item));
    }
  return ops::AttrValue{std::move(list)};
}

// The attributes that lower to a node's parameter words.
ops::AttrMap attributes_of(const Function& fn, const Node& node) {
  using ops::OpId;
  const std::vector<int64_t>& p = node.params;
  ops::AttrMap attrs;
  auto at = [&](size_t i) { return i < p.size() ? p[i] : 0; };
  switch (node.op) {
    case OpId::kGelu:
      if (at(0) == 1) attrs["approximate"] = ops::AttrValue{std::string("tanh")};
      break;
    case OpId::kSoftmax:
    case OpId::kConcat:
    case OpId::kGather:
      attrs["axis"] = ops::AttrValue{at(0)};
      break;
    case OpId::kLayernorm:
      attrs["axis"] = ops::AttrValue{at(0)};
      attrs["epsilon"] = ops::AttrValue{std::bit_cast<double>(at(1))};
      break;
    case OpId::kTranspose:
      attrs["perm"] = ints(p);
      break;
    case OpId::kArgMax:
      attrs["axis"] = ops::AttrValue{at(0)};
      attrs["keepdims"] = ops::AttrValue{at(1)};
      attrs["select_last_index"] = ops::AttrValue{at(2)};
      break;
    case OpId::kDynamicSlice:
      attrs["sizes"] = ints(p);
      break;
    case OpId::kReduceSum:
    case OpId::kReduceMean:
      attrs["keepdims"] = ops::AttrValue{at(0)};
      if (p.size() > 1) attrs["axes"] = ints(std::vector<int64_t>(p.begin() + 1, p.end()));
      break;
    case OpId::kSplit:
      attrs["axis"] = ops::AttrValue{at(0)};
      if (p.size() > 1) attrs["sizes"] = ints(std::vector<int64_t>(p.begin() + 1, p.end()));
      break;
    case OpId::kCast:
      if (dtype_is_valid(static_cast<uint8_t>(at(0))))
        attrs["to"] = ops::AttrValue{std::string(dtype_name(static_cast<DType>(at(0))))};
      break;
    case OpId::kSlice: {
      const TensorType& x = fn.values[static_cast<size_t>(node.inputs[0])].type;
      std::vector<int64_t> starts, ends, axes, steps;
      for (size_t d = 0; d < x.rank() && 3 * d + 2 < p.size(); ++d) {
        const int64_t start = p[3 * d], step = p[3 * d + 1], size = p[3 * d + 2], dim = x.dims[d];
        if (start == 0 && step == 1 && size == dim) continue;
        int64_t end = size == 0 ? 0 : start + size * step;
        int64_t first = size == 0 ? 0 : start;
        if (step < 0 && end < 0) end = -dim - 1;  // reads back as "before index 0"
        starts.push_back(first);
        ends.push_back(end);
        axes.push_back(static_cast<int64_t>(d));
        steps.push_back(size == 0 ? 1 : step);
      }
      attrs["starts"] = ints(starts);
      attrs["ends"] = ints(ends);
      attrs["axes"] = ints(axes);
      attrs["steps"] = ints(steps);
      break;
    }
    case OpId::kSeparableConv2d: {
      attrs["strides"] = ints({at(0), at(1)});
      attrs["pads"] = ints({at(2), at(3), at(4), at(5)});
      attrs["dilations"] = ints({at(6), at(7)});
      // The two epilogues (words 9 and 12), as conv2d's attributes: the
      // depthwise's with the prefix; groups is x's channel count.
      if (p.size() == 16) attrs["biases"] = ints({at(15) & 1, at(15) >> 1 & 1});
      for (const auto& [e, name] : {std::pair<size_t, std::string>{9, "depthwise_activation"}, {12, "activation"}}) {
        int floats = 0;
        if (p.size() < e + 3 || p[e] == 0) continue;
        if (const char* act = ops::activation_name(p[e], &floats)) {
          attrs[name] = ops::AttrValue{std::string(act)};
          if (floats > 0) attrs[name + "_alpha"] = ops::AttrValue{std::bit_cast<double>(p[e + 1])};
          if (floats > 1) attrs[name + "_beta"] = ops::AttrValue{std::bit_cast<double>(p[e + 2])};
        }
      }
      break;
    }
    case OpId::kConv2d:
      attrs["strides"] = ints({at(0), at(1)});
      attrs["pads"] = ints({at(2), at(3), at(4), at(5)});
      attrs["dilations"] = ints({at(6), at(7)});
      attrs["groups"] = ops::AttrValue{at(8)};
      if (ops::conv2d_channels_last(p)) attrs["channels_last"] = ops::AttrValue{int64_t{1}};
      [[fallthrough]];
    case OpId::kMatmul:
    case OpId::kMul:
    case OpId::kAdd: {
      if (node.op == OpId::kMatmul && !p.empty() && p[0] != 0) attrs["transpose_b"] = ops::AttrValue{p[0]};
      // A fused epilogue: [activation, alpha, beta] after the operator's own words.
      const size_t e = ops::epilogue_offset(node.op);
      int floats = 0;
      if (p.size() < e + 3) break;
      if (const char* name = ops::activation_name(p[e], &floats)) {
        attrs["activation"] = ops::AttrValue{std::string(name)};
        if (floats > 0) attrs["activation_alpha"] = ops::AttrValue{std::bit_cast<double>(p[e + 1])};
        if (floats > 1) attrs["activation_beta"] = ops::AttrValue{std::bit_cast<double>(p[e + 2])};
      }
      break;
    }
    default: {
      // Operators with float parameters (the bits of doubles), by name: they
      // may be newer than this printer's switch.
      static const std::map<std::string_view, std::vector<const char*>> kFloatParams = {
          {"leaky_relu", {"alpha"}}, {"clip", {"min", "max"}}, {"hard_sigmoid", {"alpha", "beta"}}};
      const std::string_view name = ops::op_def(node.op).name;
      if (name == "reduce_max") {
        attrs["keepdims"] = ops::AttrValue{at(0)};
        if (p.size() > 1) attrs["axes"] = ints(std::vector<int64_t>(p.begin() + 1, p.end()));
        break;
      }
      if (name == "pad" && p.size() >= 2) {
        static const char* const kModes[] = {"constant", "reflect", "edge", "wrap"};
        if (at(0) >= 0 && at(0) < 4) attrs["mode"] = ops::AttrValue{std::string(kModes[at(0)])};
        attrs["pads"] = ints(std::vector<int64_t>(p.begin() + 2, p.end()));
        const DType dtype = fn.values[static_cast<size_t>(node.inputs[0])].type.dtype;
        const uint64_t word = static_cast<uint64_t>(at(1));
        if (at(0) == 0 && word != 0) {
          switch (dtype) {
            case DType::kF32:
              attrs["value"] = ops::AttrValue{static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(word)))};
              break;
            case DType::kF16:
              attrs["value"] = ops::AttrValue{static_cast<double>(half_bits_to_float(static_cast<uint16_t>(word)))};
              break;
            case DType::kBF16:
              attrs["value"] = ops::AttrValue{
                  static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(word) << 16))};
              break;
            case DType::kI8:
              attrs["value"] = ops::AttrValue{int64_t{static_cast<int8_t>(word)}};
              break;
            case DType::kI32:
              attrs["value"] = ops::AttrValue{int64_t{static_cast<int32_t>(word)}};
              break;
            default:  // u8, bool, i64
              attrs["value"] = ops::AttrValue{static_cast<int64_t>(word)};
              break;
          }
        }
        break;
      }
      if (name == "max_pool" || name == "average_pool") {
        attrs["kernel_shape"] = ints({at(0), at(1)});
        attrs["strides"] = ints({at(2), at(3)});
        attrs["pads"] = ints({at(4), at(5), at(6), at(7)});
        attrs["dilations"] = ints({at(8), at(9)});
        attrs["ceil_mode"] = ops::AttrValue{at(10)};
        if (name == "average_pool") attrs["count_include_pad"] = ops::AttrValue{at(11)};
        break;
      }
      if (name == "resize" && p.size() >= 5) {
        static const char* const kModes[] = {"nearest", "linear"};
        static const char* const kCoordinates[] = {"half_pixel", "align_corners", "asymmetric",
                                                   "pytorch_half_pixel", "tf_half_pixel_for_nn"};
        static const char* const kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
        if (at(0) >= 0 && at(0) < 2) attrs["mode"] = ops::AttrValue{std::string(kModes[at(0)])};
        if (at(1) >= 0 && at(1) < 5) attrs["coordinate_transformation_mode"] = ops::AttrValue{std::string(kCoordinates[at(1)])};
        if (at(0) == 0 && at(2) >= 0 && at(2) < 4) attrs["nearest_mode"] = ops::AttrValue{std::string(kNearest[at(2)])};
        if (p.size() >= 7) {  // stated scales: the sizes follow from them
          std::vector<ops::AttrValue> scales{ops::AttrValue{1.0}, ops::AttrValue{1.0},
                                             ops::AttrValue{std::bit_cast<double>(at(5))},
                                             ops::AttrValue{std::bit_cast<double>(at(6))}};
          attrs["scales"] = ops::AttrValue{std::move(scales)};
        } else {
          attrs["sizes"] = ints({at(3), at(4)});
        }
        break;
      }
      if (name == "conv_transpose") {
        attrs["strides"] = ints({at(0), at(1)});
        attrs["pads"] = ints({at(2), at(3), at(4), at(5)});
        attrs["dilations"] = ints({at(6), at(7)});
        attrs["groups"] = ops::AttrValue{at(8)};
        attrs["output_padding"] = ints({at(9), at(10)});
        break;
      }
      auto it = kFloatParams.find(name);
      if (it != kFloatParams.end())
        for (size_t i = 0; i < it->second.size(); ++i) {
          const double v = std::bit_cast<double>(at(i));
          if (!std::isinf(v)) attrs[it->second[i]] = ops::AttrValue{v};  // absent: unbounded
        }
      break;
    }
  }
  return attrs;
}

class Printer {
 public:
  Printer(const Module& module, const HxirPrintOptions& options) : module_(module), options_(options) {}

  Result<std::string> run() {
    out_ = "module " + hxir_name('@', module_.name) + "\n";
    if (!module_.constants.empty()) out_ += "\n";
    for (const Constant& c : module_.constants) HEXIR_RETURN_IF_ERROR(print_constant(c));
    for (const Function& fn : module_.functions) HEXIR_RETURN_IF_ERROR(print_function(fn));
    return std::move(out_);
  }

 private:
  Status print_constant(const Constant& c) {
    out_ += "const " + hxir_name('@', c.name) + " : " + type_text(c.type) + " = ";
    const uint32_t es = dtype_size(c.type.dtype);
    if (const auto* fill = std::get_if<FillPattern>(&c.source)) {
      if (element_round_trips(c.type.dtype, fill->element.data())) {
        out_ += "splat " + element_text(c.type.dtype, fill->element.data()) + "\n";
        return ok_status();
      }
    }
    const auto* bytes = std::get_if<InlineBytes>(&c.source);
    bool dense = options_.data_dir.empty() || (bytes && bytes->bytes.size() <= options_.dense_max_bytes);
    if (dense && bytes) {
      for (size_t at = 0; at < bytes->bytes.size(); at += es)
        if (!element_round_trips(c.type.dtype, bytes->bytes.data() + at)) dense = false;
    }
    if (dense) {
      std::string list;
      ConstantReader reader(c);
      while (true) {
        HEXIR_ASSIGN_OR_RETURN(std::span<const uint8_t> piece, reader.next(kConstantChunkSize / es * es));
        if (piece.empty()) break;
        for (size_t at = 0; at < piece.size(); at += es) {
          if (!element_round_trips(c.type.dtype, piece.data() + at))
            return invalid_argument("constant @" + c.name +
                                    " holds a NaN whose bits text cannot keep; print it with a data directory");
          if (!list.empty()) list += ", ";
          list += element_text(c.type.dtype, piece.data() + at);
        }
      }
      out_ += "dense [" + list + "]\n";
      return ok_status();
    }
    HEXIR_ASSIGN_OR_RETURN(std::string file, write_npy_file(c));
    out_ += "file " + quote_text(file) + "\n";
    return ok_status();
  }

  // Writes the constant as DATA_DIR/NAME.npy (streamed); returns the name the text uses.
  Result<std::string> write_npy_file(const Constant& c) {
    std::string base;
    for (char ch : c.name)
      base += (is_plain_name_char(ch) && ch != '$') || ch == '-' ? ch : '_';
    if (base.empty() || base[0] == '.') base = "c" + base;
    std::string file = base + ".npy";
    for (int k = 1; !files_.insert(file).second; ++k) file = base + "_" + std::to_string(k) + ".npy";
    std::error_code ec;
    std::filesystem::create_directories(options_.data_dir, ec);
    if (ec) return invalid_argument("cannot create '" + options_.data_dir.string() + "': " + ec.message());
    const std::filesystem::path path = options_.data_dir / file;
    std::ofstream os(path, std::ios::binary | std::ios::trunc);
    if (!os) return invalid_argument("cannot write '" + path.string() + "'");
    const std::vector<uint8_t> header = encode_npy(c.type, {});
    os.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
    ConstantReader reader(c);
    while (true) {
      HEXIR_ASSIGN_OR_RETURN(std::span<const uint8_t> piece, reader.next());
      if (piece.empty()) break;
      os.write(reinterpret_cast<const char*>(piece.data()), static_cast<std::streamsize>(piece.size()));
    }
    os.close();
    if (!os) return data_loss("error writing '" + path.string() + "'");
    return options_.data_ref.empty() ? file : options_.data_ref + "/" + file;
  }

  std::string operand(const Function& fn, int id) const {
    const Value& v = fn.values[static_cast<size_t>(id)];
    return hxir_name(v.kind == ValueKind::kConstant ? '@' : '%', v.name);
  }

  Status print_function(const Function& fn) {
    out_ += "\nfunc " + hxir_name('@', fn.name) + "(";
    for (size_t i = 0; i < fn.arguments.size(); ++i) {
      const Value& v = fn.values[static_cast<size_t>(fn.arguments[i].value)];
      out_ += (i ? ", " : "") + hxir_name('%', v.name) + ": " + type_text(v.type) +
              (fn.arguments[i].donate ? " donate" : "");
    }
    out_ += ") -> (";
    for (size_t i = 0; i < fn.result_types.size(); ++i) out_ += (i ? ", " : "") + type_text(fn.result_types[i]);
    out_ += ") {\n";
    std::string indent = "  ";
    auto list = [&](const std::vector<int>& ids, size_t from = 0) {
      std::string text;
      for (size_t i = from; i < ids.size(); ++i) text += (i > from ? ", " : "") + operand(fn, ids[i]);
      return text;
    };
    for (size_t k = 0; k < fn.nodes.size(); ++k) {
      const Node& node = fn.nodes[k];
      // Regions (graph.h NodeKind): the markers print as for/if/else/yield.
      if (node.kind == NodeKind::kLoopBegin) {
        const Node& end = fn.nodes[static_cast<size_t>(node.params[1])];
        out_ += indent + (end.results.empty() ? "" : list(end.results) + " = ") + "for " +
                operand(fn, node.results[0]) + " = " + operand(fn, node.inputs[0]) + " to " +
                operand(fn, node.inputs[1]) + " step " + std::to_string(node.params[0]);
        if (node.inputs.size() > 2) {
          out_ += " iter(";
          for (size_t j = 2; j < node.inputs.size(); ++j)
            out_ += (j > 2 ? ", " : "") + operand(fn, node.results[j - 1]) + " = " + operand(fn, node.inputs[j]);
          out_ += ")";
        }
        out_ += " {\n";
        indent += "  ";
        continue;
      }
      if (node.kind == NodeKind::kIfBegin) {
        const Node& end = fn.nodes[static_cast<size_t>(node.params[1])];
        out_ += indent + (end.results.empty() ? "" : list(end.results) + " = ") + "if " + operand(fn, node.inputs[0]) +
                " -> (";
        for (size_t r = 0; r < end.results.size(); ++r)
          out_ += (r ? ", " : "") + type_text(fn.values[static_cast<size_t>(end.results[r])].type);
        out_ += ") {\n";
        indent += "  ";
        continue;
      }
      if (node.kind == NodeKind::kFail) {
        out_ += indent + "fail " + quote_text(node.message) + "\n";
        continue;
      }
      if (node.kind == NodeKind::kLoopEnd || node.kind == NodeKind::kIfElse || node.kind == NodeKind::kIfEnd) {
        const bool failed = node.kind != NodeKind::kLoopEnd && node.inputs.empty() && k > 0 &&
                            fn.nodes[k - 1].kind == NodeKind::kFail;  // a branch ending in a fail yields nothing
        if (!failed) out_ += indent + "yield" + (node.inputs.empty() ? "" : " " + list(node.inputs)) + "\n";
        indent.resize(indent.size() - 2);
        out_ += indent + (node.kind == NodeKind::kIfElse ? "} else {\n" : "}\n");
        if (node.kind == NodeKind::kIfElse) indent += "  ";
        continue;
      }
      const ops::OpDef& def = ops::op_def(node.op);
      std::vector<TensorType> inputs, declared;
      for (int v : node.inputs) inputs.push_back(fn.values[static_cast<size_t>(v)].type);
      for (int v : node.results) declared.push_back(fn.values[static_cast<size_t>(v)].type);
      const ops::AttrMap attrs = attributes_of(fn, node);
      Result<std::vector<int64_t>> lowered = ops::lower_attributes(node.op, inputs, attrs, declared);
      if (!lowered.ok() || *lowered != node.params)
        return error_at(node.loc, "cannot print node " + std::to_string(k) + " (@" + def.name +
                                      ") of @" + fn.name + " as text: its parameters have no attribute form" +
                                      (lowered.ok() ? std::string() : " (" + lowered.status().message() + ")"));
      out_ += indent;
      for (size_t r = 0; r < node.results.size(); ++r) out_ += (r ? ", " : "") + operand(fn, node.results[r]);
      out_ += " = call @" + std::string(def.name) + "(";
      for (size_t i = 0; i < node.inputs.size(); ++i) out_ += (i ? ", " : "") + operand(fn, node.inputs[i]);
      out_ += ")";
      if (!attrs.empty()) {
        out_ += " {";
        bool first = true;
        for (const auto& [name, value] : attrs) {
          out_ += (first ? "" : ", ") + name + " = " + attr_text(value);
          first = false;
        }
        out_ += "}";
      }
      out_ += " :";
      for (size_t r = 0; r < declared.size(); ++r) out_ += (r ? ", " : " ") + type_text(declared[r]);
      out_ += "\n";
    }
    out_ += "  return ";
    for (size_t i = 0; i < fn.outputs.size(); ++i) out_ += (i ? ", " : "") + operand(fn, fn.outputs[i]);
    out_ += "\n}\n";
    return ok_status();
  }

  const Module& module_;
  const HxirPrintOptions& options_;
  std::string out_;
  std::set<std::string> files_;
};

}  // namespace

std::string hxir_name(char sigil, std::string_view name) {
  bool plain = !name.empty();
  for (char c : name) plain = plain && is_plain_name_char(c);
  return std::string(1, sigil) + (plain ? std::string(name) : quote_text(name));
}

Result<std::string> print_hxir(const Module& module, const HxirPrintOptions& options) {
  return Printer(module, options).run();
}

}  // namespace hexir::compiler
