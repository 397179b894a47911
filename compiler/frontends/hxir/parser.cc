#include "hexir/compiler/hxir.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "hexir/base/half.h"
#include "hexir/base/npy.h"
#include "ir/constant_data.h"

namespace hexir::compiler {

namespace {

// A position in the text (1-based).
struct SourceLoc {
  int line = 0;
  int col = 0;
};

enum class Tok : uint8_t {
  kEof,
  kIdent,   // module, f32, axis, true, ...
  kGlobal,  // @name
  kLocal,   // %name
  kInt,
  kFloat,
  kString,
  kPunct,  // ( ) [ ] { } , : =
  kArrow,  // ->
};

struct Token {
  Tok kind = Tok::kEof;
  std::string_view text;  // as written
  std::string str;        // name without sigil, or unescaped string
  int64_t int_value = 0;
  double float_value = 0;
  SourceLoc loc;

  bool is(char c) const { return kind == Tok::kPunct && text.size() == 1 && text[0] == c; }
  bool is_word(std::string_view w) const { return kind == Tok::kIdent && text == w; }
  std::string describe() const {
    if (kind == Tok::kEof) return "end of file";
    return "'" + std::string(text) + "'";
  }
};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '$';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Bounds on recursion and rank, so hostile text cannot exhaust the stack.
constexpr size_t kMaxTypeRank = 64;
constexpr int kMaxAttrDepth = 32;
constexpr int kMaxLoopDepth = 32;
constexpr int64_t kMaxLoopResults = 4096;
// An output index `donate(N)` may name (output counts are int).
constexpr int64_t kMaxDonatedOutput = int64_t{1} << 30;

class Parser {
 public:
  Parser(std::string_view source, std::string_view display_name, const std::filesystem::path& base_dir,
         const ParseOptions& options)
      : src_(source),
        file_(display_name),
        file_name_(std::make_shared<const std::string>(display_name)),
        base_dir_(base_dir),
        options_(options),
        builder_(std::filesystem::path(std::string(display_name)).stem().string()) {
    builder_.set_max_nodes(options.max_instructions);
  }

  Result<Module> parse() {
    HEXIR_RETURN_IF_ERROR(advance());
    bool seen_decl = false, seen_module = false;
    while (tok_.kind != Tok::kEof) {
      if (tok_.is_word("module")) {
        if (seen_module) return error(tok_.loc, "second 'module' declaration");
        if (seen_decl) return error(tok_.loc, "'module' must come before any const or func");
        seen_module = true;
        HEXIR_RETURN_IF_ERROR(advance());
        if (tok_.kind != Tok::kGlobal) return expected("module name like @mlp after 'module'");
        builder_.set_module_name(tok_.str);
        HEXIR_RETURN_IF_ERROR(advance());
      } else if (tok_.is_word("const")) {
        seen_decl = true;
        HEXIR_RETURN_IF_ERROR(parse_const());
      } else if (tok_.is_word("func")) {
        seen_decl = true;
        HEXIR_RETURN_IF_ERROR(parse_func());
      } else {
        return expected("'module', 'const' or 'func'");
      }
    }
    return builder_.finish();
  }

 private:
  // ---- errors --------------------------------------------------------------
  Status error(SourceLoc loc, const std::string& what) const {
    return invalid_argument(std::string(file_) + ":" + std::to_string(loc.line) + ":" +
                            std::to_string(loc.col) + ": " + what);
  }
  Status expected(const std::string& what) const {
    return error(tok_.loc, "expected " + what + ", got " + tok_.describe());
  }
  Location location(SourceLoc loc) const { return Location::text(file_name_, loc.line, loc.col); }

  // ---- lexer ---------------------------------------------------------------
  char ch(size_t offset = 0) const { return pos_ + offset < src_.size() ? src_[pos_ + offset] : '\0'; }
  void bump() {
    if (src_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  void skip_space_and_comments() {
    while (pos_ < src_.size()) {
      char c = ch();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        bump();
      } else if (c == '/' && ch(1) == '/') {
        while (pos_ < src_.size() && ch() != '\n') bump();
      } else {
        break;
      }
    }
  }

  Status advance() {
    skip_space_and_comments();
    tok_ = Token();
    tok_.loc = {line_, col_};
    size_t start = pos_;
    if (pos_ >= src_.size()) {
      tok_.kind = Tok::kEof;
      return ok_status();
    }
    char c = ch();
    if (c == '@' || c == '%') {
      bump();
      size_t name_start = pos_;
      if (ch() == '"') {  // a quoted name: %"input:0", @"w/1"
        HEXIR_RETURN_IF_ERROR(lex_string());
        if (tok_.str.empty()) return error(tok_.loc, std::string("empty quoted name after '") + c + "'");
      } else {
        while (pos_ < src_.size() && is_name_char(ch())) bump();
        if (pos_ == name_start) return error(tok_.loc, std::string("expected a name after '") + c + "'");
        tok_.str = std::string(src_.substr(name_start, pos_ - name_start));
      }
      // A result of a loop with several: %r#0, %r#1.
      if (c == '%' && ch() == '#' && is_digit(ch(1))) {
        const size_t hash = pos_;
        bump();
        while (pos_ < src_.size() && is_digit(ch())) bump();
        tok_.str += std::string(src_.substr(hash, pos_ - hash));
      }
      tok_.kind = c == '@' ? Tok::kGlobal : Tok::kLocal;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
      while (pos_ < src_.size() && (is_name_char(ch()) && ch() != '.' && ch() != '$')) bump();
      tok_.kind = Tok::kIdent;
    } else if (c == '-' && ch(1) == '>') {
      bump();
      bump();
      tok_.kind = Tok::kArrow;
    } else if (is_digit(c) || ((c == '-' || c == '+') && (is_digit(ch(1)) || ch(1) == '.' || ch(1) == 'i')) ||
               (c == '.' && is_digit(ch(1)))) {
      HEXIR_RETURN_IF_ERROR(lex_number());
    } else if (c == '"') {
      HEXIR_RETURN_IF_ERROR(lex_string());
    } else if (c == '<' && ch(1) == '=') {  // a bounded dim: f32[<=300,4]
      bump();
      bump();
      tok_.kind = Tok::kPunct;
    } else if (std::strchr("()[]{},:=", c)) {
      bump();
      tok_.kind = Tok::kPunct;
    } else {
      std::string shown = (c >= 0x20 && c < 0x7f) ? std::string(1, c) : "\\x" + hex_byte(c);
      return error(tok_.loc, "unexpected character '" + shown + "'");
    }
    tok_.text = src_.substr(start, pos_ - start);
    return ok_status();
  }

  static std::string hex_byte(char c) {
    const char* digits = "0123456789abcdef";
    auto b = static_cast<uint8_t>(c);
    return {digits[b >> 4], digits[b & 15]};
  }

  Status lex_number() {
    size_t start = pos_;
    bool negative = ch() == '-';
    if (ch() == '-' || ch() == '+') bump();
    if (src_.substr(pos_, 3) == "inf") {
      for (int i = 0; i < 3; ++i) bump();
      tok_.kind = Tok::kFloat;
      tok_.float_value =
          negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
      return ok_status();
    }
    bool is_float = false;
    while (is_digit(ch())) bump();
    if (ch() == '.') {
      is_float = true;
      bump();
      while (is_digit(ch())) bump();
    }
    if (ch() == 'e' || ch() == 'E') {
      is_float = true;
      bump();
      if (ch() == '+' || ch() == '-') bump();
      if (!is_digit(ch())) return error({line_, col_}, "expected digits in the exponent of a number");
      while (is_digit(ch())) bump();
    }
    if (is_name_char(ch()))
      return error({line_, col_}, "unexpected '" + std::string(1, ch()) + "' in a number");
    std::string text(src_.substr(start, pos_ - start));
    if (is_float) {
      tok_.kind = Tok::kFloat;
      errno = 0;
      tok_.float_value = std::strtod(text.c_str(), nullptr);
      // Too small rounds to zero or a subnormal, as it does in any dtype;
      // too large is an error, never a silent infinity.
      if (errno == ERANGE && std::isinf(tok_.float_value))
        return error(tok_.loc, "number " + text + " is out of range (beyond the largest double)");
    } else {
      tok_.kind = Tok::kInt;
      const char* begin = text.c_str() + (text[0] == '+' ? 1 : 0);
      auto [end, ec] = std::from_chars(begin, text.c_str() + text.size(), tok_.int_value);
      if (ec != std::errc() || end != text.c_str() + text.size())
        return error(tok_.loc, "integer " + text + " does not fit in 64 bits");
    }
    return ok_status();
  }

  Status lex_string() {
    bump();  // opening quote
    tok_.kind = Tok::kString;
    while (true) {
      if (pos_ >= src_.size() || ch() == '\n') return error(tok_.loc, "unterminated string");
      char c = ch();
      if (c == '"') {
        bump();
        return ok_status();
      }
      if (c == '\\') {
        bump();
        char e = ch();
        if (e == '"' || e == '\\')
          tok_.str += e;
        else if (e == 'n')
          tok_.str += '\n';
        else if (e == 't')
          tok_.str += '\t';
        else if (e == 'x' && std::isxdigit(static_cast<unsigned char>(ch(1))) &&
                 std::isxdigit(static_cast<unsigned char>(ch(2)))) {  // \xNN: any byte but NUL
          const char hex[3] = {ch(1), ch(2), 0};
          const char byte = static_cast<char>(std::strtol(hex, nullptr, 16));
          // Names and paths end at a NUL wherever they reach C APIs: a
          // string holding one would mean something shorter than written.
          if (byte == '\0') return error({line_, col_ - 1}, "NUL byte (\\x00) in a quoted string");
          tok_.str += byte;
          bump();
          bump();
        } else
          return error({line_, col_}, "unknown escape '\\" + std::string(1, e) + "' in string");
        bump();
        continue;
      }
      if (c == '\0') return error({line_, col_}, "NUL byte in a quoted string");
      tok_.str += c;
      bump();
    }
  }

  // ---- helpers -------------------------------------------------------------
  Status expect_punct(char c, const std::string& context) {
    if (!tok_.is(c)) return expected(std::string("'") + c + "' " + context);
    return advance();
  }

  Result<TensorType> parse_type(SourceLoc* loc_out = nullptr) {
    if (loc_out) *loc_out = tok_.loc;
    SourceLoc loc = tok_.loc;
    if (tok_.kind != Tok::kIdent) return expected("a type like f32[2,3]");
    std::optional<DType> dtype = parse_dtype(tok_.text);
    if (!dtype)
      return error(tok_.loc, "unknown dtype '" + std::string(tok_.text) +
                                 "' (expected f32, f16, bf16, i32, i64, i8, u8 or bool)");
    TensorType type{*dtype, {}};
    HEXIR_RETURN_IF_ERROR(advance());
    HEXIR_RETURN_IF_ERROR(expect_punct('[', "after the dtype of a type"));
    if (!tok_.is(']')) {
      while (true) {
        if (tok_.kind == Tok::kPunct && tok_.text == "<=") {
          if (type.has_bound()) return error(tok_.loc, "a second bounded dim (a type has at most one)");
          type.bounded = static_cast<int32_t>(type.dims.size());
          HEXIR_RETURN_IF_ERROR(advance());
        }
        if (tok_.kind != Tok::kInt) return expected("a dimension (a non-negative integer)");
        if (tok_.int_value < 0)
          return error(tok_.loc, "negative dimension " + std::to_string(tok_.int_value));
        if (type.dims.size() >= kMaxTypeRank)
          return error(tok_.loc, "more than " + std::to_string(kMaxTypeRank) + " dimensions");
        type.dims.push_back(tok_.int_value);
        HEXIR_RETURN_IF_ERROR(advance());
        if (tok_.is(',')) {
          HEXIR_RETURN_IF_ERROR(advance());
          continue;
        }
        break;
      }
    }
    HEXIR_RETURN_IF_ERROR(expect_punct(']', "after the dimensions"));
    Result<uint64_t> size = byte_size(type);
    if (!size.ok()) return error(loc, "type " + type.to_string() + ": " + size.status().message());
    return type;
  }

  // ---- constants -----------------------------------------------------------
  Status parse_const() {
    HEXIR_RETURN_IF_ERROR(advance());
    if (tok_.kind != Tok::kGlobal) return expected("constant name like @w after 'const'");
    const std::string name = tok_.str;
    const SourceLoc name_loc = tok_.loc;
    HEXIR_RETURN_IF_ERROR(builder_.check_constant_name(name, location(name_loc)));
    HEXIR_RETURN_IF_ERROR(advance());
    HEXIR_RETURN_IF_ERROR(expect_punct(':', "after the constant name"));
    HEXIR_ASSIGN_OR_RETURN(TensorType type, parse_type());
    HEXIR_RETURN_IF_ERROR(expect_punct('=', "after the constant type"));
    if (!tok_.is_word("splat"))  // a fill stores one element; dense and file data count
      if (Status s = check_constant_size(name, type, options_.max_constant_bytes); !s.ok())
        return error(name_loc, s.message());
    const uint64_t count = *element_count(type.dims.data(), type.rank());
    const uint32_t element_size = dtype_size(type.dtype);
    ConstantSource source;
    if (tok_.is_word("file")) {
      HEXIR_RETURN_IF_ERROR(advance());
      if (tok_.kind != Tok::kString) return expected("a quoted .npy path after 'file'");
      // Only the header is read now: the type is checked here, the bytes
      // stay in the file until the writer streams them out.
      SourceLoc path_loc = tok_.loc;
      HEXIR_ASSIGN_OR_RETURN(std::filesystem::path path, constant_file_path(name, path_loc));
      Result<NpyHeader> header = read_npy_header(path.string());
      if (!header.ok())
        return error(path_loc, "cannot load constant @" + name + ": " + header.status().message());
      if (header->type != type)
        return error(path_loc, "constant @" + name + " is declared " + type.to_string() + " but '" +
                                   tok_.str + "' holds " + header->type.to_string());
      source = FileRange{std::move(path), header->data_offset};
      HEXIR_RETURN_IF_ERROR(advance());
    } else if (tok_.is_word("splat")) {
      HEXIR_RETURN_IF_ERROR(advance());
      std::vector<uint8_t> element;
      HEXIR_RETURN_IF_ERROR(parse_element(type.dtype, &element));
      source = FillPattern{std::move(element)};
    } else if (tok_.is_word("dense")) {
      SourceLoc dense_loc = tok_.loc;
      HEXIR_RETURN_IF_ERROR(advance());
      std::vector<uint8_t> data;
      // Every element takes at least one character of text: a huge declared
      // type with a short list must not reserve its size.
      data.reserve(static_cast<size_t>(std::min<uint64_t>(*byte_size(type), src_.size() * 8)));
      if (tok_.is('[')) {
        HEXIR_RETURN_IF_ERROR(parse_dense_list(type, 0, &data));
      } else {
        HEXIR_RETURN_IF_ERROR(parse_element(type.dtype, &data));
      }
      uint64_t got = data.size() / element_size;
      if (got != count)
        return error(dense_loc, "dense constant @" + name + " has " + std::to_string(got) +
                                    " element(s), its type " + type.to_string() + " needs " +
                                    std::to_string(count));
      source = InlineBytes{std::move(data)};
    } else {
      return expected("'file', 'splat' or 'dense' after '='");
    }
    return builder_.add_constant(name, std::move(type), std::move(source), location(name_loc)).status();
  }

  // The file a `file "..."` constant names (the string token now), relative
  // to the source's folder. Unless options_.allow_external_files, it must stay
  // inside that folder: no absolute path, and the real path (`..` and every
  // symlink resolved) under the folder's real path; that real path is what
  // gets read.
  Result<std::filesystem::path> constant_file_path(const std::string& name, SourceLoc loc) const {
    const std::filesystem::path written(tok_.str);
    if (options_.allow_external_files) return base_dir_ / written;
    const std::string what = "constant @" + name + ": file '" + tok_.str + "'";
    const std::string allow = " (hexir-compile --allow-external-files allows any path)";
    if (written.is_absolute() || written.has_root_name() || written.has_root_directory())
      return error(loc,
                   what + " is an absolute path; `file` paths are relative to the source's folder" + allow);
    std::error_code ec;
    const std::filesystem::path folder = base_dir_.empty() ? std::filesystem::path(".") : base_dir_;
    const std::filesystem::path root = std::filesystem::canonical(folder, ec);
    if (ec)
      return error(loc,
                   what + ": cannot resolve the source's folder '" + folder.string() + "': " + ec.message());
    const std::filesystem::path target = std::filesystem::canonical(folder / written, ec);
    if (ec)
      return error(loc, "cannot load constant @" + name + ": cannot open '" + (folder / written).string() +
                            "': " + ec.message());
    auto [root_end, target_at] = std::mismatch(root.begin(), root.end(), target.begin(), target.end());
    if (root_end != root.end() || target_at == target.end())
      return error(loc, what + " resolves to '" + target.string() + "', outside the source's folder '" +
                            root.string() + "'" + allow);
    return target;
  }

  // A dense list: either flat (any length; the caller checks the total) or
  // nested exactly as the type's dimensions.
  Status parse_dense_list(const TensorType& type, size_t depth, std::vector<uint8_t>* out) {
    SourceLoc list_loc = tok_.loc;
    HEXIR_RETURN_IF_ERROR(advance());  // '['
    int64_t length = 0;
    bool nested = tok_.is('[');
    if (nested && depth + 1 >= type.rank())
      return error(tok_.loc, "dense list is nested deeper than the rank of " + type.to_string());
    while (!tok_.is(']')) {
      if (nested) {
        if (!tok_.is('[')) return expected("'[' (every entry of a nested list is a list)");
        HEXIR_RETURN_IF_ERROR(parse_dense_list(type, depth + 1, out));
      } else {
        HEXIR_RETURN_IF_ERROR(parse_element(type.dtype, out));
      }
      ++length;
      if (tok_.is(',')) {
        HEXIR_RETURN_IF_ERROR(advance());
        continue;
      }
      if (!tok_.is(']')) return expected("',' or ']' in a dense list");
    }
    HEXIR_RETURN_IF_ERROR(advance());  // ']'
    // A nested list must match the shape at every level; a flat top-level
    // list is checked by element count only.
    bool shaped = nested || depth > 0;
    if (shaped && (depth >= type.rank() || length != type.dims[depth]))
      return error(list_loc,
                   "dense list at depth " + std::to_string(depth) + " has " + std::to_string(length) +
                       " entries, type " + type.to_string() + " needs " +
                       (depth < type.rank() ? std::to_string(type.dims[depth]) : std::string("none")));
    if (!nested && depth > 0 && depth + 1 != type.rank())
      return error(list_loc, "dense list of numbers at depth " + std::to_string(depth) + " but type " +
                                 type.to_string() + " has rank " + std::to_string(type.rank()));
    return ok_status();
  }

  // One element of a splat or dense constant, appended as dtype bytes.
  Status parse_element(DType dtype, std::vector<uint8_t>* out) {
    SourceLoc loc = tok_.loc;
    double number = 0;
    bool is_int = false;
    int64_t integer = 0;
    if (tok_.kind == Tok::kInt) {
      is_int = true;
      integer = tok_.int_value;
      number = static_cast<double>(integer);
    } else if (tok_.kind == Tok::kFloat) {
      number = tok_.float_value;
    } else if (tok_.is_word("true") || tok_.is_word("false")) {
      is_int = true;
      integer = tok_.is_word("true") ? 1 : 0;
      number = static_cast<double>(integer);
    } else if (tok_.is_word("inf") || tok_.is_word("nan")) {
      number = tok_.is_word("inf") ? std::numeric_limits<double>::infinity()
                                   : std::numeric_limits<double>::quiet_NaN();
    } else {
      return expected(std::string("a ") + dtype_name(dtype) + " value");
    }
    auto append = [out](const void* bytes, size_t n) {
      auto* p = static_cast<const uint8_t*>(bytes);
      out->insert(out->end(), p, p + n);
    };
    // Floats: the literal's double rounded once to the dtype; a finite
    // literal that would round to infinity is an error.
    auto out_of_range = [&](const char* largest) {
      return error(loc, std::string(tok_.text) + " is out of range for " + dtype_name(dtype) +
                            " (largest finite value " + largest + ")");
    };
    switch (dtype) {
      case DType::kF32: {
        // Doubles from 2^128 - 2^103 (half an ulp past FLT_MAX) up round to
        // infinity; between FLT_MAX and that the nearest float is FLT_MAX
        // (the conversion itself is defined only inside the float range).
        constexpr double kOverflow = 0x1.ffffffp+127;
        constexpr float kMax = std::numeric_limits<float>::max();
        float f = 0;
        if (!std::isfinite(number))
          f = static_cast<float>(number);
        else if (std::fabs(number) >= kOverflow)
          return out_of_range("3.4028235e+38");
        else if (std::fabs(number) > kMax)
          f = std::copysign(kMax, static_cast<float>(number < 0 ? -1 : 1));
        else
          f = static_cast<float>(number);
        append(&f, 4);
        break;
      }
      case DType::kF16: {
        uint16_t h = double_to_half_bits(number);
        if (std::isfinite(number) && (h & 0x7fff) == 0x7c00) return out_of_range("65504");
        append(&h, 2);
        break;
      }
      case DType::kBF16: {
        uint16_t h = double_to_bfloat16_bits(number);
        if (std::isfinite(number) && (h & 0x7fff) == 0x7f80) return out_of_range("3.3895314e+38");
        append(&h, 2);
        break;
      }
      case DType::kI32:
      case DType::kI64:
      case DType::kI8:
      case DType::kU8:
      case DType::kBool: {
        if (!is_int)
          return error(loc, std::string("expected an integer for a ") + dtype_name(dtype) + " value, got " +
                                tok_.describe());
        int64_t lo = 0, hi = 0;
        switch (dtype) {
          case DType::kI32:
            lo = INT32_MIN, hi = INT32_MAX;
            break;
          case DType::kI64:
            lo = INT64_MIN, hi = INT64_MAX;
            break;
          case DType::kI8:
            lo = -128, hi = 127;
            break;
          case DType::kU8:
            lo = 0, hi = 255;
            break;
          default:
            lo = 0, hi = 1;
            break;
        }
        if (integer < lo || integer > hi)
          return error(loc, std::to_string(integer) + " is out of range for " + dtype_name(dtype));
        if (dtype == DType::kI32) {
          int32_t v = static_cast<int32_t>(integer);
          append(&v, 4);
        } else if (dtype == DType::kI64) {
          append(&integer, 8);
        } else {
          uint8_t v = static_cast<uint8_t>(integer);
          append(&v, 1);
        }
        break;
      }
    }
    return advance();
  }

  // ---- functions -----------------------------------------------------------
  Status parse_func() {
    HEXIR_RETURN_IF_ERROR(advance());
    if (tok_.kind != Tok::kGlobal) return expected("function name like @main after 'func'");
    const std::string fn_name = tok_.str;
    HEXIR_RETURN_IF_ERROR(builder_.begin_function(fn_name, location(tok_.loc)));
    HEXIR_RETURN_IF_ERROR(advance());
    HEXIR_RETURN_IF_ERROR(expect_punct('(', "after the function name"));
    if (!tok_.is(')')) {
      while (true) {
        if (tok_.kind != Tok::kLocal) return expected("an argument like %x: f32[4]");
        const std::string name = tok_.str;
        const SourceLoc name_loc = tok_.loc;
        HEXIR_RETURN_IF_ERROR(builder_.check_value_name(name, location(name_loc)));
        HEXIR_RETURN_IF_ERROR(advance());
        HEXIR_RETURN_IF_ERROR(expect_punct(':', "after the argument name"));
        HEXIR_ASSIGN_OR_RETURN(TensorType type, parse_type());
        bool donate = false;
        int donate_to = -1;  // `donate(N)`: written as output N
        if (tok_.is_word("donate")) {
          donate = true;
          HEXIR_RETURN_IF_ERROR(advance());
          if (tok_.is('(')) {
            HEXIR_RETURN_IF_ERROR(advance());
            if (tok_.kind != Tok::kInt || tok_.int_value < 0 || tok_.int_value > kMaxDonatedOutput)
              return expected("an output index after 'donate('");
            donate_to = static_cast<int>(tok_.int_value);
            HEXIR_RETURN_IF_ERROR(advance());
            HEXIR_RETURN_IF_ERROR(expect_punct(')', "after the donated output's index"));
          }
        }
        HEXIR_RETURN_IF_ERROR(
            builder_.add_input(name, std::move(type), donate, location(name_loc), donate_to).status());
        if (tok_.is(',')) {
          HEXIR_RETURN_IF_ERROR(advance());
          continue;
        }
        break;
      }
    }
    HEXIR_RETURN_IF_ERROR(expect_punct(')', "after the arguments"));
    if (tok_.kind != Tok::kArrow) return expected("'->' and the result types");
    HEXIR_RETURN_IF_ERROR(advance());
    std::vector<TensorType> result_types;
    if (tok_.is('(')) {
      HEXIR_RETURN_IF_ERROR(advance());
      if (!tok_.is(')')) {
        while (true) {
          HEXIR_ASSIGN_OR_RETURN(TensorType type, parse_type());
          result_types.push_back(std::move(type));
          if (tok_.is(',')) {
            HEXIR_RETURN_IF_ERROR(advance());
            continue;
          }
          break;
        }
      }
      HEXIR_RETURN_IF_ERROR(expect_punct(')', "after the result types"));
    } else {
      HEXIR_ASSIGN_OR_RETURN(TensorType type, parse_type());
      result_types.push_back(std::move(type));
    }
    HEXIR_RETURN_IF_ERROR(builder_.set_result_types(std::move(result_types)));
    HEXIR_RETURN_IF_ERROR(expect_punct('{', "to open the function body"));

    HEXIR_RETURN_IF_ERROR(parse_statements(fn_name, 0));
    if (!tok_.is_word("return"))
      return error(tok_.loc, "function @" + fn_name + " ends without 'return'");
    HEXIR_RETURN_IF_ERROR(parse_return());
    if (!tok_.is('}')) return expected("'}' after 'return'");
    HEXIR_RETURN_IF_ERROR(advance());  // '}'
    return builder_.end_function();
  }

  // Statements of a function body (depth 0) or a loop body, up to the
  // 'return' or 'yield' that ends it (or '}' without one: the caller's error).
  Status parse_statements(const std::string& fn_name, int depth) {
    ended_by_fail_ = false;
    while (!tok_.is('}') && !tok_.is_word("return") && !tok_.is_word("yield")) {
      if (tok_.kind == Tok::kLocal) {
        HEXIR_RETURN_IF_ERROR(parse_assignment(fn_name, depth));
      } else if (tok_.is_word("for")) {
        HEXIR_RETURN_IF_ERROR(parse_for({}, {}, fn_name, depth));
      } else if (tok_.is_word("if")) {
        HEXIR_RETURN_IF_ERROR(parse_if({}, {}, fn_name, depth));
      } else if (tok_.is_word("fail")) {  // fail "message"
        const SourceLoc at = tok_.loc;
        HEXIR_RETURN_IF_ERROR(advance());
        if (tok_.kind != Tok::kString) return expected("a quoted message after 'fail'");
        std::string message = tok_.str;
        HEXIR_RETURN_IF_ERROR(advance());
        HEXIR_RETURN_IF_ERROR(builder_.fail(std::move(message), location(at)));
        ended_by_fail_ = true;
        continue;
      } else {
        return expected(tok_.kind == Tok::kEof ? "'}' to close function @" + fn_name
                        : depth == 0           ? "'%name = call ...', 'for', 'if', 'fail' or 'return'"
                                               : "'%name = call ...', 'for', 'if', 'fail' or 'yield'");
      }
      ended_by_fail_ = false;
    }
    if (depth == 0 && tok_.is_word("yield")) return error(tok_.loc, "'yield' outside a loop");
    if (depth > 0 && tok_.is_word("return"))
      return error(tok_.loc, "'return' inside a loop body or branch (close it with 'yield')");
    return ok_status();
  }

  // %a = call ..., %a, %b = call ..., %r = for ..., %r:2 = for ... (then %r#0, %r#1).
  Status parse_assignment(const std::string& fn_name, int depth) {
    std::vector<std::string> names;
    std::vector<Location> locs;
    const SourceLoc first = tok_.loc;
    const std::string first_name = tok_.str;
    HEXIR_RETURN_IF_ERROR(advance());
    if (tok_.is(':')) {  // %r:N
      HEXIR_RETURN_IF_ERROR(advance());
      if (tok_.kind != Tok::kInt || tok_.int_value < 1 || tok_.int_value > kMaxLoopResults)
        return expected("a result count 1.." + std::to_string(kMaxLoopResults) + " after ':'");
      const int64_t count = tok_.int_value;
      HEXIR_RETURN_IF_ERROR(advance());
      HEXIR_RETURN_IF_ERROR(expect_punct('=', "after the result count"));
      if (!tok_.is_word("for") && !tok_.is_word("if"))
        return expected("'for' or 'if' (a result count names the results of a loop or an if)");
      for (int64_t j = 0; j < count; ++j) {
        names.push_back(first_name + "#" + std::to_string(j));
        locs.push_back(location(first));
      }
      if (tok_.is_word("if")) return parse_if(std::move(names), std::move(locs), fn_name, depth);
      return parse_for(std::move(names), std::move(locs), fn_name, depth);
    }
    names.push_back(first_name);
    locs.push_back(location(first));
    while (tok_.is(',')) {
      HEXIR_RETURN_IF_ERROR(advance());
      if (tok_.kind != Tok::kLocal) return expected("another result name like %b after ','");
      names.push_back(tok_.str);
      locs.push_back(location(tok_.loc));
      HEXIR_RETURN_IF_ERROR(advance());
    }
    HEXIR_RETURN_IF_ERROR(expect_punct('=', "after %" + names.back()));
    if (tok_.is_word("for")) return parse_for(std::move(names), std::move(locs), fn_name, depth);
    if (tok_.is_word("if")) return parse_if(std::move(names), std::move(locs), fn_name, depth);
    return parse_call(std::move(names), std::move(locs));
  }

  // A loop bound: an i64[] value, or an integer literal (an i64[] constant).
  Result<int> parse_bound(const char* what) {
    if (tok_.kind == Tok::kLocal || tok_.kind == Tok::kGlobal) return parse_operand();
    if (tok_.kind != Tok::kInt) return expected(std::string(what) + " (an integer or an i64[] value)");
    const int64_t v = tok_.int_value;
    const SourceLoc loc = tok_.loc;
    HEXIR_RETURN_IF_ERROR(advance());
    std::string name = "i64." + std::to_string(v);
    if (std::optional<int> known = builder_.find_constant(name)) return builder_.use_constant(*known, location(loc));
    InlineBytes bytes;
    bytes.bytes.resize(8);
    std::memcpy(bytes.bytes.data(), &v, 8);
    HEXIR_ASSIGN_OR_RETURN(int constant, builder_.add_constant(name, TensorType{DType::kI64, {}}, std::move(bytes),
                                                               location(loc)));
    return builder_.use_constant(constant, location(loc));
  }

  // The `yield %a, %b` ending a region, then its '}'.
  Status parse_yield(std::vector<int>* values, std::vector<Location>* locs, SourceLoc* at, const char* what) {
    if (!tok_.is_word("yield")) {
      if (ended_by_fail_ && tok_.is('}')) {  // a branch ending in a fail yields nothing
        *at = tok_.loc;
        return advance();
      }
      return error(tok_.loc, std::string(what) + " ends without 'yield'");
    }
    *at = tok_.loc;
    HEXIR_RETURN_IF_ERROR(advance());
    while (tok_.kind == Tok::kLocal || tok_.kind == Tok::kGlobal) {
      locs->push_back(location(tok_.loc));
      HEXIR_ASSIGN_OR_RETURN(int value, parse_operand());
      values->push_back(value);
      if (!tok_.is(',')) break;
      HEXIR_RETURN_IF_ERROR(advance());
    }
    if (!tok_.is('}')) return expected("'}' after 'yield'");
    return advance();
  }

  // if %cond -> (TYPES) { ... yield ... } else { ... yield ... }
  Status parse_if(std::vector<std::string> names, std::vector<Location> name_locs, const std::string& fn_name,
                  int depth) {
    (void)name_locs;  // the results are located at their 'yield'
    if (depth >= kMaxLoopDepth)
      return error(tok_.loc, "regions nested more than " + std::to_string(kMaxLoopDepth) + " deep");
    const SourceLoc if_loc = tok_.loc;
    HEXIR_RETURN_IF_ERROR(advance());  // 'if'
    HEXIR_ASSIGN_OR_RETURN(int cond, parse_operand());
    if (tok_.kind != Tok::kArrow) return expected("'->' and the if's result types");
    HEXIR_RETURN_IF_ERROR(advance());
    std::vector<TensorType> types;
    if (tok_.is('(')) {
      HEXIR_RETURN_IF_ERROR(advance());
      while (!tok_.is(')')) {
        HEXIR_ASSIGN_OR_RETURN(TensorType type, parse_type());
        types.push_back(std::move(type));
        if (tok_.is(',')) {
          HEXIR_RETURN_IF_ERROR(advance());
          continue;
        }
        if (!tok_.is(')')) return expected("',' or ')' after a result type");
      }
      HEXIR_RETURN_IF_ERROR(advance());
    } else {
      HEXIR_ASSIGN_OR_RETURN(TensorType type, parse_type());
      types.push_back(std::move(type));
    }
    if (names.size() != types.size())
      return error(if_loc, "the if has " + std::to_string(types.size()) + " result(s) but " +
                               std::to_string(names.size()) + " result name(s) are given");
    HEXIR_RETURN_IF_ERROR(expect_punct('{', "to open the then-branch"));
    HEXIR_RETURN_IF_ERROR(builder_.begin_if(cond, std::move(types), location(if_loc)));
    HEXIR_RETURN_IF_ERROR(parse_statements(fn_name, depth + 1));
    std::vector<int> yielded;
    std::vector<Location> yield_locs;
    SourceLoc yield_loc;
    HEXIR_RETURN_IF_ERROR(parse_yield(&yielded, &yield_locs, &yield_loc, "the then-branch"));
    HEXIR_RETURN_IF_ERROR(builder_.else_branch(yielded, location(yield_loc), yield_locs));
    if (!tok_.is_word("else")) return expected("'else' (an if has both branches)");
    HEXIR_RETURN_IF_ERROR(advance());
    HEXIR_RETURN_IF_ERROR(expect_punct('{', "to open the else-branch"));
    HEXIR_RETURN_IF_ERROR(parse_statements(fn_name, depth + 1));
    yielded.clear();
    yield_locs.clear();
    HEXIR_RETURN_IF_ERROR(parse_yield(&yielded, &yield_locs, &yield_loc, "the else-branch"));
    return builder_.end_if(yielded, std::move(names), location(yield_loc), yield_locs).status();
  }

  // for %i = START to TRIP [step S] [iter(%a = %x, ...)] { ... yield ... }
  Status parse_for(std::vector<std::string> names, std::vector<Location> name_locs, const std::string& fn_name,
                   int depth) {
    (void)name_locs;  // the results are located at their 'yield'
    if (depth >= kMaxLoopDepth)
      return error(tok_.loc, "loops nested more than " + std::to_string(kMaxLoopDepth) + " deep");
    GraphBuilder::LoopSpec spec;
    spec.loc = location(tok_.loc);
    const SourceLoc for_loc = tok_.loc;
    HEXIR_RETURN_IF_ERROR(advance());  // 'for'
    if (tok_.kind != Tok::kLocal) return expected("the induction variable like %i after 'for'");
    spec.induction_name = tok_.str;
    HEXIR_RETURN_IF_ERROR(builder_.check_value_name(tok_.str, location(tok_.loc)));
    HEXIR_RETURN_IF_ERROR(advance());
    HEXIR_RETURN_IF_ERROR(expect_punct('=', "after the induction variable"));
    HEXIR_ASSIGN_OR_RETURN(spec.start, parse_bound("the loop start"));
    if (!tok_.is_word("to")) return expected("'to' and the trip count");
    HEXIR_RETURN_IF_ERROR(advance());
    HEXIR_ASSIGN_OR_RETURN(spec.trip, parse_bound("the trip count"));
    if (tok_.is_word("step")) {
      HEXIR_RETURN_IF_ERROR(advance());
      if (tok_.kind != Tok::kInt || tok_.int_value <= 0) return expected("a positive integer step");
      spec.step = tok_.int_value;
      HEXIR_RETURN_IF_ERROR(advance());
    }
    if (tok_.is_word("iter")) {
      HEXIR_RETURN_IF_ERROR(advance());
      HEXIR_RETURN_IF_ERROR(expect_punct('(', "after 'iter'"));
      while (!tok_.is(')')) {
        if (tok_.kind != Tok::kLocal) return expected("a carried value like %a = %x");
        spec.carried_names.push_back(tok_.str);
        spec.carried_locs.push_back(location(tok_.loc));
        HEXIR_RETURN_IF_ERROR(advance());
        HEXIR_RETURN_IF_ERROR(expect_punct('=', "after the carried value's name"));
        HEXIR_ASSIGN_OR_RETURN(int init, parse_operand());
        spec.inits.push_back(init);
        if (tok_.is(',')) {
          HEXIR_RETURN_IF_ERROR(advance());
          continue;
        }
        if (!tok_.is(')')) return expected("',' or ')' in 'iter(...)'");
      }
      HEXIR_RETURN_IF_ERROR(advance());
    }
    if (names.size() != spec.inits.size())
      return error(for_loc, "the loop carries " + std::to_string(spec.inits.size()) + " value(s) but " +
                                std::to_string(names.size()) + " result name(s) are given" +
                                (spec.inits.size() > 1 ? " (write %r:" + std::to_string(spec.inits.size()) +
                                                             " = for ... for %r#0, %r#1, ...)"
                                                       : ""));
    HEXIR_RETURN_IF_ERROR(expect_punct('{', "to open the loop body"));
    HEXIR_RETURN_IF_ERROR(builder_.begin_loop(std::move(spec)).status());
    HEXIR_RETURN_IF_ERROR(parse_statements(fn_name, depth + 1));
    if (!tok_.is_word("yield")) return error(tok_.loc, "loop body ends without 'yield'");
    const SourceLoc yield_loc = tok_.loc;
    HEXIR_RETURN_IF_ERROR(advance());
    std::vector<int> yielded;
    std::vector<Location> yield_locs;
    while (tok_.kind == Tok::kLocal || tok_.kind == Tok::kGlobal) {
      yield_locs.push_back(location(tok_.loc));
      HEXIR_ASSIGN_OR_RETURN(int value, parse_operand());
      yielded.push_back(value);
      if (!tok_.is(',')) break;
      HEXIR_RETURN_IF_ERROR(advance());
    }
    if (!tok_.is('}')) return expected("'}' after 'yield'");
    HEXIR_RETURN_IF_ERROR(builder_.end_loop(yielded, std::move(names), location(yield_loc), yield_locs).status());
    return advance();  // '}'
  }

  // %name or @const; returns the value id.
  Result<int> parse_operand() {
    if (tok_.kind == Tok::kLocal) {
      std::optional<int> value = builder_.find_value(tok_.str);
      if (!value) return error(tok_.loc, "unknown value %" + tok_.str);
      HEXIR_RETURN_IF_ERROR(advance());
      return *value;
    }
    if (tok_.kind == Tok::kGlobal) {
      std::optional<int> constant = builder_.find_constant(tok_.str);
      if (!constant)
        return error(tok_.loc,
                     "unknown constant @" + tok_.str + " (constants are declared with 'const' before use)");
      HEXIR_ASSIGN_OR_RETURN(int value, builder_.use_constant(*constant, location(tok_.loc)));
      HEXIR_RETURN_IF_ERROR(advance());
      return value;
    }
    return expected("an operand (%value or @constant)");
  }

  Result<ops::AttrValue> parse_attr_value(int depth = 0) {
    ops::AttrValue value;
    if (depth > kMaxAttrDepth)
      return error(tok_.loc, "attribute lists nested more than " + std::to_string(kMaxAttrDepth) + " deep");
    if (tok_.kind == Tok::kInt) {
      value.value = tok_.int_value;
    } else if (tok_.kind == Tok::kFloat) {
      value.value = tok_.float_value;
    } else if (tok_.kind == Tok::kString) {
      value.value = tok_.str;
    } else if (tok_.is_word("true") || tok_.is_word("false")) {
      value.value = int64_t{tok_.is_word("true") ? 1 : 0};
    } else if (tok_.is('[')) {
      HEXIR_RETURN_IF_ERROR(advance());
      std::vector<ops::AttrValue> list;
      while (!tok_.is(']')) {
        HEXIR_ASSIGN_OR_RETURN(ops::AttrValue element, parse_attr_value(depth + 1));
        list.push_back(std::move(element));
        if (tok_.is(',')) {
          HEXIR_RETURN_IF_ERROR(advance());
          continue;
        }
        if (!tok_.is(']')) return expected("',' or ']' in an attribute list");
      }
      value.value = std::move(list);
    } else {
      return expected("an attribute value (integer, float, string or list)");
    }
    HEXIR_RETURN_IF_ERROR(advance());
    return value;
  }

  // %a = call @op(operands) {attrs} : type
  // %a, %b = call @op(operands) {attrs} : type_a, type_b     (one name and type per result)
  Status parse_call(std::vector<std::string> names, std::vector<Location> locs) {
    NodeSpec node;
    node.names = std::move(names);
    node.locs.results = std::move(locs);
    for (size_t i = 0; i < node.names.size(); ++i)
      HEXIR_RETURN_IF_ERROR(builder_.check_value_name(node.names[i], node.locs.results[i]));
    node.locs.node = node.locs.results.front();
    if (!tok_.is_word("call")) return expected("'call', 'for' or 'if'");
    HEXIR_RETURN_IF_ERROR(advance());
    if (tok_.kind != Tok::kGlobal) return expected("a kernel name like @matmul after 'call'");
    node.locs.op = location(tok_.loc);
    std::optional<ops::OpId> op = ops::find_op(tok_.str);
    if (!op && builder_.has_function(tok_.str)) return parse_function_call(std::move(node));
    if (!op) return error(tok_.loc, "unknown kernel or function @" + tok_.str);
    node.op = *op;
    HEXIR_RETURN_IF_ERROR(advance());
    HEXIR_RETURN_IF_ERROR(expect_punct('(', "after the kernel name"));
    if (!tok_.is(')')) {
      while (true) {
        HEXIR_ASSIGN_OR_RETURN(int operand, parse_operand());
        node.inputs.push_back(operand);
        if (tok_.is(',')) {
          HEXIR_RETURN_IF_ERROR(advance());
          continue;
        }
        break;
      }
    }
    HEXIR_RETURN_IF_ERROR(expect_punct(')', "after operands"));
    if (tok_.is('{')) {
      node.locs.attrs = location(tok_.loc);
      HEXIR_RETURN_IF_ERROR(advance());
      while (!tok_.is('}')) {
        if (tok_.kind != Tok::kIdent) return expected("an attribute name");
        std::string name(tok_.text);
        SourceLoc name_loc = tok_.loc;
        HEXIR_RETURN_IF_ERROR(advance());
        HEXIR_RETURN_IF_ERROR(expect_punct('=', "after attribute name '" + name + "'"));
        HEXIR_ASSIGN_OR_RETURN(ops::AttrValue value, parse_attr_value());
        if (!node.attrs.emplace(name, std::move(value)).second)
          return error(name_loc, "attribute '" + name + "' is given twice");
        if (tok_.is(',')) {
          HEXIR_RETURN_IF_ERROR(advance());
          continue;
        }
        if (!tok_.is('}')) return expected("',' or '}' after an attribute");
      }
      HEXIR_RETURN_IF_ERROR(advance());
    }
    HEXIR_RETURN_IF_ERROR(expect_punct(':', node.names.size() == 1 ? "and the result type after the call"
                                                                   : "and the result types after the call"));
    while (true) {
      SourceLoc type_loc;
      HEXIR_ASSIGN_OR_RETURN(TensorType type, parse_type(&type_loc));
      node.declared.push_back(std::move(type));
      node.locs.types.push_back(location(type_loc));
      if (node.declared.size() == node.names.size() || !tok_.is(',')) break;
      HEXIR_RETURN_IF_ERROR(advance());
    }
    if (node.declared.size() != node.names.size())
      return error(tok_.loc, "expected " + std::to_string(node.names.size()) +
                                 " result types (one per name), got " + std::to_string(node.declared.size()));
    // The builder checks operand counts, attributes and the result types.
    return builder_.add_node(std::move(node)).status();
  }

  // %a = call @f(operands) : types -- another function of the module,
  // defined above; the compiler inlines it (docs/control-flow.md).
  Status parse_function_call(NodeSpec node) {
    const std::string callee = tok_.str;
    HEXIR_RETURN_IF_ERROR(advance());
    HEXIR_RETURN_IF_ERROR(expect_punct('(', "after the function name"));
    std::vector<int> args;
    while (!tok_.is(')')) {
      HEXIR_ASSIGN_OR_RETURN(int operand, parse_operand());
      args.push_back(operand);
      if (tok_.is(',')) {
        HEXIR_RETURN_IF_ERROR(advance());
        continue;
      }
      if (!tok_.is(')')) return expected("',' or ')' after an argument");
    }
    HEXIR_RETURN_IF_ERROR(advance());
    if (tok_.is('{')) return error(tok_.loc, "a call of function @" + callee + " takes no attributes");
    HEXIR_RETURN_IF_ERROR(expect_punct(':', "and the result types after the call"));
    std::vector<TensorType> declared;
    while (true) {
      HEXIR_ASSIGN_OR_RETURN(TensorType type, parse_type());
      declared.push_back(std::move(type));
      if (!tok_.is(',')) break;
      HEXIR_RETURN_IF_ERROR(advance());
    }
    return builder_.inline_call(callee, args, std::move(node.names), declared, node.locs.op).status();
  }

  Status parse_return() {
    const SourceLoc return_loc = tok_.loc;
    HEXIR_RETURN_IF_ERROR(advance());
    bool parenthesized = tok_.is('(');
    if (parenthesized) HEXIR_RETURN_IF_ERROR(advance());
    std::vector<int> values;
    std::vector<Location> locs;
    while (tok_.kind == Tok::kLocal || tok_.kind == Tok::kGlobal) {
      locs.push_back(location(tok_.loc));
      HEXIR_ASSIGN_OR_RETURN(int value, parse_operand());
      values.push_back(value);
      if (!tok_.is(',')) break;
      HEXIR_RETURN_IF_ERROR(advance());
    }
    if (parenthesized) HEXIR_RETURN_IF_ERROR(expect_punct(')', "after the returned values"));
    return builder_.set_outputs(values, location(return_loc), locs);
  }

  std::string_view src_;
  std::string_view file_;
  std::shared_ptr<const std::string> file_name_;  // shared by every Location of this file
  std::filesystem::path base_dir_;
  ParseOptions options_;
  GraphBuilder builder_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
  Token tok_;
  bool ended_by_fail_ = false;  // the statements just parsed end with a `fail` (no yield needed)
};

}  // namespace

ParseOptions parse_options_for(const CompileOptions& options) {
  ParseOptions parse;
  parse.allow_external_files = options.allow_external_files;
  parse.max_constant_bytes = options.max_constant_bytes;
  parse.max_instructions = options.max_instructions;
  return parse;
}

Result<Module> parse_hxir(std::string_view source, std::string_view display_name,
                            const std::filesystem::path& base_dir, const ParseOptions& options) {
  return Parser(source, display_name, base_dir, options).parse();
}

}  // namespace hexir::compiler
