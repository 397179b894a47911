// Element types and tensor types shared by every library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hexir/base/status.h"

namespace hexir {

// Values match hexir.fb.DType in format/hexir.fbs.
enum class DType : uint8_t { kF32 = 0, kF16 = 1, kBF16 = 2, kI32 = 3, kI64 = 4, kI8 = 5, kU8 = 6, kBool = 7 };
inline constexpr int kDTypeCount = 8;

uint32_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "f32"
std::optional<DType> parse_dtype(std::string_view name);
bool dtype_is_valid(uint8_t raw);

// A static tensor type: f32[1,784]. Scalars have no dims.
// A bounded dynamic shape (docs/design-notes.md): one dim may be marked
// bounded, its stored size an upper bound (f32[<=300,4]); the buffer holds
// the bound and the value's actual extent along that dim is known only at
// run time. Byte sizes and plans are the bound's.
struct TensorType {
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;
  int32_t bounded = -1;  // the bounded dim, or -1: every dim is exact

  bool has_bound() const { return bounded >= 0; }

  bool operator==(const TensorType&) const = default;
  size_t rank() const { return dims.size(); }
  std::string to_string() const;  // "f32[1,784]", "f32[]", "i64[2,<=6]"
  // The same dtype and dims, whether bounded or not (what a caller's buffer is checked against).
  bool same_layout(const TensorType& other) const { return dtype == other.dtype && dims == other.dims; }
};

// Element count and byte size, rejecting negative dims and overflow past
// 2^62 so that later offset arithmetic on them cannot wrap.
Result<uint64_t> element_count(const int64_t* dims, size_t rank);
Result<uint64_t> byte_size(const TensorType& type);

}  // namespace hexir
