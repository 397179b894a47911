// What the references of several operator tests in this folder share: dims,
// the extreme values, elements as bytes, numpy's broadcast offset, sentinel
// bytes around outputs, and ONNX integer-list attributes.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "hal_test_util.h"

namespace hexir::hal::testing {

using Dims = std::vector<int64_t>;

inline constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
inline constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
inline constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr float kInfF = std::numeric_limits<float>::infinity();
inline constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();

inline size_t esize(const HostTensor& t) { return dtype_size(t.dtype); }

// Element i of t as its bytes.
inline std::vector<uint8_t> element_bytes(const HostTensor& t, int64_t i) {
  const size_t e = esize(t);
  return std::vector<uint8_t>(t.bytes.begin() + static_cast<std::ptrdiff_t>(i * e),
                              t.bytes.begin() + static_cast<std::ptrdiff_t>((i + 1) * e));
}

// Flat offset in a tensor of `dims` of the element numpy broadcasting picks
// for output multi-index `index` (right-aligned; size-1 dims repeat).
inline int64_t broadcast_offset(const Dims& index, const Dims& dims) {
  const size_t shift = index.size() - dims.size();
  int64_t offset = 0, stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    const int64_t i = dims[d] == 1 ? 0 : index[d + shift];
    offset += i * stride;
    stride *= dims[d];
  }
  return offset;
}

// Fills a tensor's bytes with `byte` and gives an empty one 64 such bytes, so
// that a stray write shows as a changed byte instead of a crash.
inline void fill_sentinel(HostTensor& t, uint8_t byte) {
  if (t.bytes.empty()) t.bytes.resize(64);
  std::fill(t.bytes.begin(), t.bytes.end(), byte);
}

// An empty output keeps its 64 sentinel bytes: nothing may be written there.
inline void check_untouched(const HostTensor& t, uint8_t byte) {
  if (t.count() != 0) return;
  int64_t written = 0;
  for (uint8_t b : t.bytes) written += b != byte;
  CHECK_MESSAGE(written == 0, written << " bytes written past an empty output");
}

// An ONNX list-of-ints attribute.
inline ops::AttrValue int_list(const std::vector<int64_t>& v) {
  std::vector<ops::AttrValue> out;
  for (int64_t x : v) out.emplace_back().value = x;
  return {out};
}

}  // namespace hexir::hal::testing
