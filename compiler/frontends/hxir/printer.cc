#include "hexir/compiler/hxir.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
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

// "f32[2,3]", a bounded dim "i64[2,<=12]" (TensorType::to_string's text).
std::string type_text(const TensorType& t) { return t.to_string(); }

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

// The attributes that lower to a node's parameter words: the operator's own
// inverse of its lowering (OpDef::raise).
ops::AttrMap attributes_of(const Function& fn, const Node& node) {
  std::vector<TensorType> inputs;
  for (int v : node.inputs) inputs.push_back(fn.values[static_cast<size_t>(v)].type);
  return ops::raise_attributes(node.op, inputs, node.params);
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
              (!fn.arguments[i].donate          ? ""
               : fn.arguments[i].donate_to < 0 ? " donate"
                                                : " donate(" + std::to_string(fn.arguments[i].donate_to) + ")");
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
