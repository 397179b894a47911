#include "ir/constant_data.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

namespace hexir::compiler {

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
  if (!file_.fd.valid()) {
    Result<InputFile> opened = open_input_file(name);
    if (!opened.ok()) return opened.status().annotate("constant @" + constant_->name);
    file_ = std::move(opened).value();
    uint64_t end = 0;
    if (__builtin_add_overflow(range.offset, size_, &end) || end > file_.size)
      return data_loss("'" + name + "' ended before the " + std::to_string(size_) + " bytes of constant @" +
                       constant_->name + " (it has " + std::to_string(file_.size) +
                       " bytes, the data starts at " + std::to_string(range.offset) +
                       "; was it changed while compiling?)");
  }
  Status read = read_exact(file_, range.offset + position_, buffer_, name);
  if (!read.ok()) return read.annotate("constant @" + constant_->name);
  position_ += n;
  return std::span<const uint8_t>(buffer_);
}

namespace {

Status over_constant_limit(const std::string& what, uint64_t bytes, uint64_t max_bytes) {
  return resource_exhausted(what + " (" + std::to_string(bytes) + " bytes), more than the limit of " +
                            std::to_string(max_bytes) +
                            " bytes of constants (hexir-compile --max-constant-bytes)");
}

}  // namespace

Status check_constant_size(std::string_view name, const TensorType& type, uint64_t max_bytes) {
  Result<uint64_t> bytes = byte_size(type);
  if (!bytes.ok()) return bytes.status();
  if (*bytes <= max_bytes) return ok_status();
  return over_constant_limit("constant @" + std::string(name) + " is " + type.to_string(), *bytes, max_bytes);
}

Status check_constant_bytes(const Module& module, uint64_t max_bytes) {
  std::vector<bool> used(module.constants.size(), false);
  for (const Function& fn : module.functions)
    for (const Value& v : fn.values)
      if (v.kind == ValueKind::kConstant) used[static_cast<size_t>(v.constant)] = true;
  uint64_t total = 0;
  size_t count = 0;
  for (size_t i = 0; i < module.constants.size(); ++i) {
    const Constant& c = module.constants[i];
    if (!used[i] || std::holds_alternative<FillPattern>(c.source)) continue;  // a fill stores one element
    HEXIR_RETURN_IF_ERROR(check_constant_size(c.name, c.type, max_bytes));
    ++count;
    if (__builtin_add_overflow(total, c.byte_size, &total)) total = UINT64_MAX;
    if (total > max_bytes)
      return over_constant_limit(std::to_string(count) + " constants up to @" + c.name + " hold", total,
                                 max_bytes);
  }
  return ok_status();
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

Result<std::vector<uint8_t>> constant_bytes(const Constant& constant) {
  std::vector<uint8_t> bytes;
  bytes.reserve(constant.byte_size);
  HEXIR_RETURN_IF_ERROR(for_each_chunk(constant, [&](std::span<const uint8_t> chunk) {
    if (bytes.size() + chunk.size() > constant.byte_size)
      return invalid_argument("constant @" + constant.name + " holds more than its " +
                              std::to_string(constant.byte_size) + " bytes");
    bytes.insert(bytes.end(), chunk.begin(), chunk.end());
    return ok_status();
  }));
  if (bytes.size() != constant.byte_size)
    return invalid_argument("constant @" + constant.name + " holds " + std::to_string(bytes.size()) + " of its " +
                            std::to_string(constant.byte_size) + " bytes");
  return bytes;
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

}  // namespace hexir::compiler
