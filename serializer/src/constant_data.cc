#include "constant_data.h"

#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

namespace hexir::serializer {
namespace {

// ---- .npy headers (the format as base/npy.cc reads it, without the data) ----

constexpr uint8_t kNpyMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr size_t kNpyPreambleV1 = 10;  // magic, version, u16 header length
constexpr size_t kNpyPreambleV2 = 12;  // magic, version, u32 header length
// No .npy writer pads its header anywhere near this; a larger one is hostile.
constexpr uint64_t kMaxNpyHeader = uint64_t{1} << 24;

struct DescrName {
  DType dtype;
  const char* descr;
};
// numpy has no bfloat16: '<u2' is read as bf16 bits (as base/npy.cc does).
constexpr DescrName kDescrs[] = {
    {DType::kF32, "<f4"}, {DType::kF16, "<f2"}, {DType::kBF16, "<u2"}, {DType::kI32, "<i4"},
    {DType::kI64, "<i8"}, {DType::kI8, "|i1"},  {DType::kU8, "|u1"},   {DType::kBool, "|b1"},
};

Result<DType> dtype_for_descr(std::string_view descr, const std::string& name) {
  if (descr.size() >= 2) {
    char order = descr[0];
    std::string_view kind = descr.substr(1);
    bool single_byte = kind == "i1" || kind == "u1" || kind == "b1";
    if (order == '>' && !single_byte)
      return invalid_argument(name + ": big-endian dtype '" + std::string(descr) +
                              "' is not supported; save the array as little-endian");
    if (order == '<' || order == '=' || order == '|' || (order == '>' && single_byte)) {
      for (const DescrName& d : kDescrs)
        if (kind == d.descr + 1) return d.dtype;
    }
  }
  return invalid_argument(name + ": unsupported dtype '" + std::string(descr) +
                          "' (supported: <f4 <f2 <i4 <i8 |i1 |u1 |b1, and <u2 as bf16 bits)");
}

// The Python dict literal numpy writes as the header:
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
      consume('L');  // Python 2 era files may write 3L
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

struct CloseFile {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, CloseFile>;

// Reads exactly `size` bytes (fewer only at the end of the file).
size_t read_up_to(std::FILE* file, uint8_t* out, size_t size) {
  size_t got = 0;
  while (got < size) {
    size_t n = std::fread(out + got, 1, size - got, file);
    if (n == 0) break;
    got += n;
  }
  return got;
}

}  // namespace

Result<NpyHeader> read_npy_header(const std::filesystem::path& path) {
  const std::string name = path.string();
  FilePtr file(std::fopen(name.c_str(), "rb"));
  if (!file) return not_found("cannot open '" + name + "': " + std::strerror(errno));
  if (::fseeko(file.get(), 0, SEEK_END) != 0) return data_loss("error reading '" + name + "'");
  const off_t end = ::ftello(file.get());
  if (end < 0 || ::fseeko(file.get(), 0, SEEK_SET) != 0) return data_loss("error reading '" + name + "'");
  const uint64_t file_size = static_cast<uint64_t>(end);

  uint8_t preamble_bytes[kNpyPreambleV2] = {};
  const size_t got = read_up_to(file.get(), preamble_bytes, sizeof(preamble_bytes));
  if (got < kNpyPreambleV1 || std::memcmp(preamble_bytes, kNpyMagic, sizeof(kNpyMagic)) != 0)
    return data_loss(name + ": not a .npy file (bad magic)");
  const uint8_t major = preamble_bytes[6];
  const uint8_t minor = preamble_bytes[7];
  size_t preamble = 0;
  uint64_t header_len = 0;
  if (major == 1) {
    preamble = kNpyPreambleV1;
    header_len = uint32_t{preamble_bytes[8]} | uint32_t{preamble_bytes[9]} << 8;
  } else if (major == 2 || major == 3) {
    if (got < kNpyPreambleV2) return data_loss(name + ": truncated .npy preamble");
    preamble = kNpyPreambleV2;
    header_len = uint32_t{preamble_bytes[8]} | uint32_t{preamble_bytes[9]} << 8 |
                 uint32_t{preamble_bytes[10]} << 16 | uint32_t{preamble_bytes[11]} << 24;
  } else {
    return data_loss(name + ": unsupported .npy format version " + std::to_string(major) + "." +
                     std::to_string(minor));
  }
  if (header_len > file_size - preamble)
    return data_loss(name + ": truncated .npy header (" + std::to_string(header_len) + " bytes declared, " +
                     std::to_string(file_size - preamble) + " present)");
  if (header_len > kMaxNpyHeader)
    return data_loss(name + ": .npy header of " + std::to_string(header_len) + " bytes is too large");
  std::string header(header_len, '\0');
  if (::fseeko(file.get(), static_cast<off_t>(preamble), SEEK_SET) != 0 ||
      read_up_to(file.get(), reinterpret_cast<uint8_t*>(header.data()), header.size()) != header.size())
    return data_loss("error reading '" + name + "'");

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

ConstantReader::ConstantReader(const Constant& constant) : constant_(&constant), size_(constant.byte_size) {}

Result<std::span<const uint8_t>> ConstantReader::next(size_t max_bytes) {
  const size_t n = static_cast<size_t>(std::min<uint64_t>(max_bytes, remaining()));
  if (n == 0) return std::span<const uint8_t>();
  if (const auto* inline_bytes = std::get_if<InlineBytes>(&constant_->source)) {
    std::span<const uint8_t> piece(inline_bytes->bytes.data() + position_, n);
    position_ += n;
    return piece;
  }
  buffer_.resize(n);
  if (const auto* fill = std::get_if<FillPattern>(&constant_->source)) {
    const size_t element = fill->element.size();
    for (size_t i = 0; i < n; ++i) buffer_[i] = fill->element[(position_ + i) % element];
    position_ += n;
    return std::span<const uint8_t>(buffer_);
  }
  const FileRange& range = std::get<FileRange>(constant_->source);
  const std::string name = range.path.string();
  if (!file_) {
    file_.reset(std::fopen(name.c_str(), "rb"));
    if (!file_) return not_found("cannot open '" + name + "': " + std::strerror(errno));
    if (::fseeko(file_.get(), static_cast<off_t>(range.offset), SEEK_SET) != 0)
      return data_loss("error reading '" + name + "' for constant @" + constant_->name);
  }
  if (read_up_to(file_.get(), buffer_.data(), n) != n)
    return data_loss("'" + name + "' ended before the " + std::to_string(size_) + " bytes of constant @" +
                     constant_->name + " (was it changed while compiling?)");
  position_ += n;
  return std::span<const uint8_t>(buffer_);
}

Status for_each_chunk(const Constant& constant,
                      const std::function<Status(std::span<const uint8_t>)>& chunk) {
  ConstantReader reader(constant);
  while (reader.remaining() > 0) {
    HEXIR_ASSIGN_OR_RETURN(std::span<const uint8_t> piece, reader.next());
    HEXIR_RETURN_IF_ERROR(chunk(piece));
  }
  return ok_status();
}

Result<bool> same_bytes(const Constant& a, const Constant& b) {
  if (a.byte_size != b.byte_size) return false;
  ConstantReader ra(a), rb(b);
  while (ra.remaining() > 0) {
    HEXIR_ASSIGN_OR_RETURN(std::span<const uint8_t> pa, ra.next());
    HEXIR_ASSIGN_OR_RETURN(std::span<const uint8_t> pb, rb.next());
    if (std::memcmp(pa.data(), pb.data(), pa.size()) != 0) return false;
  }
  return true;
}

void StreamingChecksum64::update(std::span<const uint8_t> bytes) {
  // FNV-1a over 8-byte words of the whole stream, like format::checksum64.
  constexpr uint64_t kPrime = 0x100000001b3ull;
  if (bytes.empty()) return;
  size_ += bytes.size();
  size_t i = 0;
  if (pending_size_ > 0) {
    const size_t take = std::min(bytes.size(), 8 - pending_size_);
    std::memcpy(pending_ + pending_size_, bytes.data(), take);
    pending_size_ += take;
    i = take;
    if (pending_size_ < 8) return;
    uint64_t word;
    std::memcpy(&word, pending_, 8);
    hash_ = (hash_ ^ word) * kPrime;
    pending_size_ = 0;
  }
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    hash_ = (hash_ ^ word) * kPrime;
  }
  std::memcpy(pending_, bytes.data() + i, bytes.size() - i);
  pending_size_ = bytes.size() - i;
}

uint64_t StreamingChecksum64::finish() const {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  uint64_t hash = hash_;
  for (size_t i = 0; i < pending_size_; ++i) hash = (hash ^ pending_[i]) * kPrime;
  return hash ^ size_;
}

}  // namespace hexir::serializer
