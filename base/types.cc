#include "hexir/base/types.h"

namespace hexir {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kDataLoss:
      return "DATA_LOSS";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kInternal:
      return "INTERNAL";
    case StatusCode::kCancelled:
      return "CANCELLED";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
  }
  return "UNKNOWN";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(status_code_name(code_)) + ": " + message_;
}

namespace {
struct DTypeInfo {
  const char* name;
  uint32_t size;
};
constexpr DTypeInfo kDTypes[kDTypeCount] = {
    {"f32", 4}, {"f16", 2}, {"bf16", 2}, {"i32", 4}, {"i64", 8}, {"i8", 1}, {"u8", 1}, {"bool", 1},
};
}  // namespace

bool dtype_is_valid(uint8_t raw) { return raw < kDTypeCount; }
uint32_t dtype_size(DType dtype) { return kDTypes[static_cast<int>(dtype)].size; }
const char* dtype_name(DType dtype) { return kDTypes[static_cast<int>(dtype)].name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (int i = 0; i < kDTypeCount; ++i)
    if (name == kDTypes[i].name) return static_cast<DType>(i);
  return std::nullopt;
}

std::string TensorType::to_string() const {
  std::string s = dtype_name(dtype);
  s += '[';
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';
    if (static_cast<int64_t>(i) == bounded) s += "<=";
    s += std::to_string(dims[i]);
  }
  s += ']';
  return s;
}

Result<uint64_t> element_count(const int64_t* dims, size_t rank) {
  constexpr uint64_t kLimit = uint64_t{1} << 62;
  // The product of the non-zero dims is bounded too, so an empty tensor cannot
  // carry dims whose partial products (strides, row sizes) overflow.
  uint64_t nonzero = 1;
  bool empty = false;
  for (size_t i = 0; i < rank; ++i) {
    if (dims[i] < 0) return invalid_argument("negative dimension " + std::to_string(dims[i]));
    const uint64_t d = static_cast<uint64_t>(dims[i]);
    if (d == 0) {
      empty = true;
      continue;
    }
    if (nonzero > kLimit / d) return invalid_argument("tensor element count overflows");
    nonzero *= d;
  }
  return empty ? 0 : nonzero;
}

Result<uint64_t> byte_size(const TensorType& type) {
  HEXIR_ASSIGN_OR_RETURN(uint64_t count, element_count(type.dims.data(), type.dims.size()));
  uint64_t size = dtype_size(type.dtype);
  if (count > (uint64_t{1} << 62) / size) return invalid_argument("tensor byte size overflows");
  return count * size;
}

}  // namespace hexir
