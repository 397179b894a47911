#include "hexir/base/npy.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string_view>

#include "hexir/base/file_io.h"

namespace hexir {
namespace {

constexpr uint8_t kNpyMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr size_t kNpyPreambleV1 = 10;  // magic, version, u16 header length
constexpr size_t kNpyPreambleV2 = 12;  // magic, version, u32 header length
// numpy writes headers of a few hundred bytes; a larger one is hostile.
constexpr uint64_t kMaxNpyHeader = uint64_t{1} << 24;
constexpr size_t kNpyHeaderAlignment = 64;

// numpy has no bfloat16: Hexir writes bf16 as its raw bits ('<u2') and reads
// '<u2' back as bf16, so the round trip is exact.
struct DescrName {
  DType dtype;
  const char* descr;
};
constexpr DescrName kDescrs[] = {
    {DType::kF32, "<f4"}, {DType::kF16, "<f2"}, {DType::kBF16, "<u2"}, {DType::kI32, "<i4"},
    {DType::kI64, "<i8"}, {DType::kI8, "|i1"},  {DType::kU8, "|u1"},   {DType::kBool, "|b1"},
};

const char* descr_for(DType dtype) {
  for (const DescrName& d : kDescrs)
    if (d.dtype == dtype) return d.descr;
  return "|u1";
}

Result<DType> dtype_for_descr(std::string_view descr, const std::string& name) {
  if (descr.size() >= 2) {
    char order = descr[0];
    std::string_view kind = descr.substr(1);
    bool single_byte = kind == "i1" || kind == "u1" || kind == "b1";
    if (order == '>' && !single_byte)
      return invalid_argument(name + ": big-endian dtype '" + std::string(descr) +
                              "' is not supported; save the array as little-endian");
    // '=' is native order, which is little-endian on every target Hexir supports.
    if (order == '<' || order == '=' || order == '|' || (order == '>' && single_byte)) {
      for (const DescrName& d : kDescrs)
        if (kind == d.descr + 1) return d.dtype;
    }
  }
  return invalid_argument(name + ": unsupported dtype '" + std::string(descr) +
                          "' (supported: <f4 <f2 <i4 <i8 |i1 |u1 |b1, and <u2 as bf16 bits)");
}

// A tiny reader for the Python dict literal numpy writes as the header:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  Status parse(std::string* descr, bool* fortran_order, std::vector<int64_t>* shape) {
    bool have_descr = false, have_order = false, have_shape = false;
    skip_space();
    if (!consume('{')) return error("expected '{' at the start of the header");
    while (true) {
      skip_space();
      if (consume('}')) break;
      std::string key;
      HEXIR_RETURN_IF_ERROR(parse_string(&key));
      skip_space();
      if (!consume(':')) return error("expected ':' after key '" + key + "'");
      skip_space();
      if (key == "descr") {
        if (have_descr) return error("duplicate key 'descr'");
        have_descr = true;
        if (peek() != '\'' && peek() != '"')
          return error("structured dtypes are not supported (descr must be a string)");
        HEXIR_RETURN_IF_ERROR(parse_string(descr));
      } else if (key == "fortran_order") {
        if (have_order) return error("duplicate key 'fortran_order'");
        have_order = true;
        if (consume_word("True")) {
          *fortran_order = true;
        } else if (consume_word("False")) {
          *fortran_order = false;
        } else {
          return error("fortran_order must be True or False");
        }
      } else if (key == "shape") {
        if (have_shape) return error("duplicate key 'shape'");
        have_shape = true;
        HEXIR_RETURN_IF_ERROR(parse_shape(shape));
      } else {
        return error("unexpected header key '" + key + "'");
      }
      skip_space();
      if (consume(',')) continue;
      skip_space();
      if (consume('}')) break;
      return error("expected ',' or '}' in the header");
    }
    skip_space();
    if (pos_ != text_.size()) return error("unexpected characters after the header dict");
    if (!have_descr) return error("header has no 'descr'");
    if (!have_order) return error("header has no 'fortran_order'");
    if (!have_shape) return error("header has no 'shape'");
    return ok_status();
  }

 private:
  Status error(const std::string& what) const { return data_loss(name_ + ": bad .npy header: " + what); }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool consume(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  bool consume_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  Status parse_string(std::string* out) {
    char quote = peek();
    if (quote != '\'' && quote != '"') return error("expected a quoted string");
    ++pos_;
    size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') return error("escapes in header strings are not supported");
      ++pos_;
    }
    if (pos_ >= text_.size()) return error("unterminated string");
    *out = std::string(text_.substr(start, pos_ - start));
    ++pos_;
    return ok_status();
  }
  Status parse_shape(std::vector<int64_t>* shape) {
    shape->clear();
    if (!consume('(')) return error("shape must be a tuple");
    while (true) {
      skip_space();
      if (consume(')')) return ok_status();
      if (peek() < '0' || peek() > '9') return error("shape entries must be non-negative integers");
      int64_t value = 0;
      while (peek() >= '0' && peek() <= '9') {
        int digit = peek() - '0';
        if (value > (INT64_MAX - digit) / 10) return error("shape entry overflows");
        value = value * 10 + digit;
        ++pos_;
      }
      // Python 2 era files may write 3L.
      consume('L');
      if (shape->size() >= 64) return error("shape has more than 64 dimensions");
      shape->push_back(value);
      skip_space();
      if (consume(',')) continue;
      skip_space();
      if (consume(')')) return ok_status();
      return error("expected ',' or ')' in the shape");
    }
  }

  std::string_view text_;
  const std::string& name_;
  size_t pos_ = 0;
};

uint32_t read_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace

Result<NpyHeader> parse_npy_header(std::span<const uint8_t> bytes, uint64_t file_size,
                                   const std::string& name) {
  if (bytes.size() < kNpyPreambleV1 || std::memcmp(bytes.data(), kNpyMagic, sizeof(kNpyMagic)) != 0)
    return data_loss(name + ": not a .npy file (bad magic)");
  const uint8_t major = bytes[6];
  const uint8_t minor = bytes[7];
  size_t preamble = 0;
  uint64_t header_len = 0;
  if (major == 1) {
    preamble = kNpyPreambleV1;
    header_len = uint32_t{bytes[8]} | uint32_t{bytes[9]} << 8;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < kNpyPreambleV2) return data_loss(name + ": truncated .npy preamble");
    preamble = kNpyPreambleV2;
    header_len = read_le32(bytes.data() + 8);
  } else {
    return data_loss(name + ": unsupported .npy format version " + std::to_string(major) + "." +
                     std::to_string(minor));
  }
  if (header_len > file_size - preamble)
    return data_loss(name + ": truncated .npy header (" + std::to_string(header_len) + " bytes declared, " +
                     std::to_string(file_size - preamble) + " present)");
  if (header_len > kMaxNpyHeader)
    return data_loss(name + ": .npy header of " + std::to_string(header_len) + " bytes is too large");
  if (header_len > bytes.size() - preamble)
    return internal_error(name + ": parse_npy_header was given less than the header");
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + preamble), header_len);
  // Version 1 and 2 headers are latin-1, 3 is utf-8; ours only need ASCII.
  std::string descr;
  bool fortran_order = false;
  NpyHeader out;
  HEXIR_RETURN_IF_ERROR(HeaderParser(header, name).parse(&descr, &fortran_order, &out.type.dims));
  if (fortran_order)
    return invalid_argument(name +
                            ": fortran_order arrays are not supported; save a C-order array "
                            "(np.ascontiguousarray)");
  HEXIR_ASSIGN_OR_RETURN(out.type.dtype, dtype_for_descr(descr, name));
  Result<uint64_t> data_size = byte_size(out.type);
  if (!data_size.ok()) return data_loss(name + ": " + data_size.status().message());
  out.data_offset = preamble + header_len;
  const uint64_t available = file_size - out.data_offset;
  if (available < *data_size)
    return data_loss(name + ": truncated .npy data: " + out.type.to_string() + " needs " +
                     std::to_string(*data_size) + " bytes, file has " + std::to_string(available));
  if (available > *data_size)
    return data_loss(name + ": " + std::to_string(available - *data_size) + " unexpected bytes after the " +
                     out.type.to_string() + " data");
  return out;
}

Result<NpyArray> parse_npy(std::span<const uint8_t> bytes, const std::string& name) {
  HEXIR_ASSIGN_OR_RETURN(NpyHeader header, parse_npy_header(bytes, bytes.size(), name));
  NpyArray array;
  array.type = std::move(header.type);
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header.data_offset), bytes.end());
  return array;
}

namespace {

// The preamble and header of an open .npy file: exactly the bytes the
// preamble says the header has (at most kMaxNpyHeader), never the data.
Result<std::vector<uint8_t>> read_header_bytes(const InputFile& file, const std::string& path) {
  std::vector<uint8_t> bytes(static_cast<size_t>(std::min<uint64_t>(file.size, kNpyPreambleV2)));
  HEXIR_RETURN_IF_ERROR(read_exact(file, 0, bytes, path));
  if (bytes.size() >= kNpyPreambleV1 && std::memcmp(bytes.data(), kNpyMagic, sizeof(kNpyMagic)) == 0) {
    const uint64_t header_len = bytes[6] == 1 ? (uint32_t{bytes[8]} | uint32_t{bytes[9]} << 8)
                                : bytes.size() >= kNpyPreambleV2 ? read_le32(bytes.data() + 8)
                                                                 : 0;
    const uint64_t preamble = bytes[6] == 1 ? kNpyPreambleV1 : kNpyPreambleV2;
    const uint64_t wanted = std::min(file.size, preamble + std::min<uint64_t>(header_len, kMaxNpyHeader));
    if (wanted > bytes.size()) {
      const size_t have = bytes.size();
      bytes.resize(static_cast<size_t>(wanted));
      HEXIR_RETURN_IF_ERROR(read_exact(file, have, std::span<uint8_t>(bytes).subspan(have), path));
    }
  }
  return bytes;
}

}  // namespace

Result<NpyArray> read_npy(const std::string& path, uint64_t max_data_bytes) {
  // A regular file only (a FIFO would block, /dev/zero never end), its
  // header checked against its size before any data is read or allocated.
  HEXIR_ASSIGN_OR_RETURN(InputFile file, open_input_file(path));
  HEXIR_ASSIGN_OR_RETURN(std::vector<uint8_t> head, read_header_bytes(file, path));
  HEXIR_ASSIGN_OR_RETURN(NpyHeader header, parse_npy_header(head, file.size, path));
  const uint64_t data_size = file.size - header.data_offset;  // exactly the declared bytes (checked)
  if (data_size > max_data_bytes)
    return resource_exhausted(path + ": " + header.type.to_string() + " holds " + std::to_string(data_size) +
                              " bytes, more than the .npy data limit of " + std::to_string(max_data_bytes) +
                              " bytes");
  NpyArray array;
  array.type = std::move(header.type);
  try {
    array.data.resize(static_cast<size_t>(data_size));
  } catch (const std::bad_alloc&) {
    return resource_exhausted(path + ": cannot allocate " + std::to_string(data_size) + " bytes for " +
                              array.type.to_string());
  }
  HEXIR_RETURN_IF_ERROR(read_exact(file, header.data_offset, array.data, path));
  return array;
}

Result<NpyHeader> read_npy_header(const std::string& path) {
  HEXIR_ASSIGN_OR_RETURN(InputFile file, open_input_file(path));
  HEXIR_ASSIGN_OR_RETURN(std::vector<uint8_t> head, read_header_bytes(file, path));
  return parse_npy_header(head, file.size, path);
}

std::vector<uint8_t> encode_npy(const TensorType& type, std::span<const uint8_t> data) {
  std::string header = "{'descr': '";
  header += descr_for(type.dtype);
  header += "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < type.dims.size(); ++i) {
    header += std::to_string(type.dims[i]);
    if (type.dims.size() == 1 || i + 1 < type.dims.size()) header += ",";
    if (i + 1 < type.dims.size()) header += " ";
  }
  header += "), }";
  // Pad with spaces so the data starts 64-byte aligned, ending in '\n'.
  size_t preamble = kNpyPreambleV1;
  size_t total = preamble + header.size() + 1;
  if ((total + kNpyHeaderAlignment - 1) / kNpyHeaderAlignment * kNpyHeaderAlignment - preamble > 0xffff) {
    preamble = kNpyPreambleV2;
    total = preamble + header.size() + 1;
  }
  size_t padded = (total + kNpyHeaderAlignment - 1) / kNpyHeaderAlignment * kNpyHeaderAlignment;
  header.append(padded - total, ' ');
  header += '\n';
  uint64_t header_len = header.size();

  std::vector<uint8_t> out(kNpyMagic, kNpyMagic + sizeof(kNpyMagic));
  out.push_back(preamble == kNpyPreambleV1 ? 1 : 2);
  out.push_back(0);
  int length_bytes = preamble == kNpyPreambleV1 ? 2 : 4;
  for (int i = 0; i < length_bytes; ++i) out.push_back(static_cast<uint8_t>(header_len >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Status write_npy(const std::string& path, const TensorType& type, std::span<const uint8_t> data) {
  Result<uint64_t> expected = byte_size(type);
  if (!expected.ok()) return expected.status().annotate("writing '" + path + "'");
  if (*expected != data.size())
    return invalid_argument("writing '" + path + "': " + type.to_string() + " needs " +
                            std::to_string(*expected) + " bytes, got " + std::to_string(data.size()));
  // Written beside the target and renamed over it (or through a device/FIFO): see file_io.h.
  return write_output_file(path, encode_npy(type, data));
}

}  // namespace hexir
