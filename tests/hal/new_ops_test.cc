// split, cast, where, gather, slice, conv2d, argmax, dynamic_slice and
// update_slice on the cpu against references
// written here, independently of hal/cpu and of the plans: plain loops over
// multi-indices, doubles where there is arithmetic, bit patterns for f16.
#include <algorithm>
#include <bit>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <limits>

#include "hal_test_util.h"

namespace hexir::hal::testing {
namespace {

using ops::OpId;
using Dims = std::vector<int64_t>;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();

size_t esize(const HostTensor& t) { return dtype_size(t.dtype); }

// Element i of t as its bytes.
std::vector<uint8_t> element_bytes(const HostTensor& t, int64_t i) {
  const size_t e = esize(t);
  return std::vector<uint8_t>(t.bytes.begin() + static_cast<std::ptrdiff_t>(i * e),
                              t.bytes.begin() + static_cast<std::ptrdiff_t>((i + 1) * e));
}

std::string hex(const std::vector<uint8_t>& bytes) {
  std::string s;
  char buf[4];
  for (uint8_t b : bytes) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    s += buf;
  }
  return s;
}

// Flat offset in a tensor of `dims` of the element numpy broadcasting picks
// for output multi-index `index` (right-aligned; size-1 dims repeat).
int64_t broadcast_offset(const Dims& index, const Dims& dims) {
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
void fill_sentinel(HostTensor& t, uint8_t byte) {
  if (t.bytes.empty()) t.bytes.resize(64);
  std::fill(t.bytes.begin(), t.bytes.end(), byte);
}

// An empty output keeps its 64 sentinel bytes: nothing may be written there.
void check_untouched(const HostTensor& t, uint8_t byte) {
  if (t.count() != 0) return;
  int64_t written = 0;
  for (uint8_t b : t.bytes) written += b != byte;
  CHECK_MESSAGE(written == 0, written << " bytes written past an empty output");
}

// ---- split ----------------------------------------------------------------------

void check_split(DType dtype, const Dims& dims, int64_t axis, const Dims& sizes) {
  INFO("split " << std::string(dtype_name(dtype)) << dims_string(dims) << " axis " << axis << " sizes "
                << dims_string(sizes));
  const HostTensor x = iota_bytes(dtype, dims);
  std::vector<HostTensor> outs;
  for (int64_t s : sizes) {
    Dims d = dims;
    d[static_cast<size_t>(axis)] = s;
    outs.emplace_back(dtype, d);
    fill_sentinel(outs.back(), 0xEE);
  }
  std::vector<HostTensor*> out_ptrs;
  for (HostTensor& o : outs) out_ptrs.push_back(&o);
  Dims params{axis};
  params.insert(params.end(), sizes.begin(), sizes.end());
  HostTensor in = x;
  Status status = run_op(OpId::kSplit, {&in}, out_ptrs, params);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  CHECK(in.bytes == x.bytes);  // the input is untouched
  for (const HostTensor& o : outs) check_untouched(o, 0xEE);
  const Dims x_strides = row_major_strides(dims);
  int64_t start = 0;
  for (size_t k = 0; k < outs.size(); ++k) {
    for (int64_t i = 0; i < outs[k].count(); ++i) {
      Dims index = unravel(i, outs[k].dims);
      index[static_cast<size_t>(axis)] += start;
      int64_t src = 0;
      for (size_t d = 0; d < dims.size(); ++d) src += index[d] * x_strides[d];
      INFO("output " << k << " element " << i);
      REQUIRE(element_bytes(outs[k], i) == element_bytes(x, src));
    }
    start += sizes[k];
  }
}

TEST_CASE("split: several outputs of every element size") {
  check_split(DType::kF32, {4, 9}, 1, {2, 3, 4});
  check_split(DType::kF32, {4, 9}, 0, {1, 3});
  check_split(DType::kI64, {6, 5}, 0, {4, 2});
  check_split(DType::kU8, {3, 2, 7}, 2, {7, 0});
  check_split(DType::kU8, {3, 2, 7}, 2, {0, 3, 4});
  check_split(DType::kF16, {2, 6, 3}, 1, {1, 1, 1, 3});
  check_split(DType::kBool, {5}, 0, {2, 3});
  check_split(DType::kI32, {2, 3, 4, 5}, 3, {1, 1, 1, 1, 1});
  check_split(DType::kI32, {2, 3, 4, 5}, 2, {3, 1});
  check_split(DType::kI64, {3, 1, 4}, 1, {1});                    // one part: a copy
  check_split(DType::kF32, {0, 4}, 1, {1, 3});                    // empty input
  check_split(DType::kF16, {2, 1, 2, 1, 2, 1, 2, 3}, 7, {2, 1});  // rank 8
}

// ---- cast -----------------------------------------------------------------------

// f16 bits to their value, from the IEEE definition.
double half_value(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v;
  if (exponent == 0x1f)
    v = mantissa ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exponent == 0)
    v = std::ldexp(mantissa, -24);
  else
    v = std::ldexp(1024 + mantissa, exponent - 25);
  return (h & 0x8000) ? -v : v;
}

// A (non-NaN) value rounded to the nearest f16, ties to even, overflow to infinity.
uint16_t half_bits(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a >= 65520.0) return sign | 0x7c00;                // 65520 is the tie between 65504 and 2^16
  if (a < std::ldexp(1.0, -14)) {                        // subnormal: multiples of 2^-24
    const double m = std::nearbyint(std::ldexp(a, 24));  // 1024 is the smallest normal, 0x0400
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(m));
  }
  int e;
  const double f = std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  int exponent = e - 1;
  double m = std::nearbyint((2 * f - 1) * 1024);
  if (m == 1024) {
    m = 0;
    ++exponent;
  }
  return static_cast<uint16_t>(sign | ((exponent + 15) << 10) | static_cast<uint16_t>(m));
}

TEST_CASE("cast: the f16 reference itself agrees with known bit patterns") {
  CHECK(half_bits(1.0) == 0x3c00);
  CHECK(half_bits(-2.0) == 0xc000);
  CHECK(half_bits(65504.0) == 0x7bff);
  CHECK(half_bits(65519.0) == 0x7bff);
  CHECK(half_bits(65520.0) == 0x7c00);
  CHECK(half_bits(std::ldexp(1.0, -24)) == 0x0001);
  CHECK(half_bits(std::ldexp(1.0, -25)) == 0x0000);
  CHECK(half_bits(std::ldexp(3.0, -25)) == 0x0002);
  CHECK(half_bits(std::ldexp(1.0, -14) - std::ldexp(1.0, -24)) == 0x03ff);
  CHECK(half_bits(1.0 + std::ldexp(1.0, -11)) == 0x3c00);
  CHECK(half_bits(1.0 + std::ldexp(3.0, -11)) == 0x3c02);
  CHECK(half_bits(0.1) == 0x2e66);
  CHECK(half_bits(-0.0) == 0x8000);
  CHECK(half_value(0x3c00) == 1.0);
  CHECK(half_value(0x7bff) == 65504.0);
  CHECK(half_value(0x0001) == std::ldexp(1.0, -24));
  CHECK(half_value(0x5bf8) == 255.0);
  CHECK(std::isnan(half_value(0x7e00)));
}

// One source element: its exact value (a double for f32/f16, an integer otherwise).
struct Value {
  bool is_float;
  double f;
  int64_t i;
};

struct Source {
  HostTensor tensor;
  std::vector<Value> values;
};

Source f32_source() {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> list = {0.0,
                                    -0.0,
                                    1.0,
                                    -1.0,
                                    0.5,
                                    -0.5,
                                    1.5,
                                    -1.5,
                                    2.5,
                                    -2.5,
                                    2.7,
                                    -2.7,
                                    0.999,
                                    -0.999,
                                    0.1,
                                    -1e-3,
                                    127.9,
                                    128.0,
                                    200.5,
                                    254.99,
                                    255.0,
                                    255.5,
                                    256.0,
                                    257.0,
                                    300.0,
                                    -300.0,
                                    2049.0,
                                    2051.0,
                                    65504.0,
                                    65519.0,
                                    65520.0,
                                    -65520.0,
                                    65536.0,
                                    1e5,
                                    -1e5,
                                    2147483520.0,
                                    2147483648.0,
                                    -2147483648.0,
                                    -2147483904.0,
                                    3e9,
                                    -3e9,
                                    4294967296.0,
                                    9.2e18,
                                    9.3e18,
                                    -9.2e18,
                                    -9.3e18,
                                    1e19,
                                    1e30,
                                    -1e30,
                                    inf,
                                    -inf,
                                    nan,
                                    -nan,
                                    std::ldexp(1.0, -24),
                                    std::ldexp(1.0, -25),
                                    std::ldexp(3.0, -25),
                                    std::ldexp(1.0, -14),
                                    std::ldexp(1.0, -14) - std::ldexp(1.0, -24),
                                    1.0 + std::ldexp(1.0, -11),
                                    1.0 + std::ldexp(3.0, -11),
                                    1e-8,
                                    1e-40,
                                    1.0 / 3.0,
                                    16777217.0};
  Source s{HostTensor(DType::kF32, {static_cast<int64_t>(list.size())}), {}};
  for (size_t k = 0; k < list.size(); ++k) {
    s.tensor.at(static_cast<int64_t>(k)) = static_cast<float>(list[k]);
    s.values.push_back({true, static_cast<double>(static_cast<float>(list[k])), 0});
  }
  return s;
}

Source f16_source() {
  const std::vector<uint16_t> list = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x3800, 0xb800, 0x3e00, 0xbe00, 0x4170,
                                      0xc170, 0x3bff, 0x57ff, 0x5bf8, 0x5bfc, 0x5c00, 0x5c04, 0x5cb0, 0xdcb0,
                                      0x6400, 0x7800, 0xf800, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfe00,
                                      0x7c01, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3555, 0x2e66};
  Source s{HostTensor(DType::kF16, {static_cast<int64_t>(list.size())}), {}};
  for (size_t k = 0; k < list.size(); ++k) {
    std::memcpy(&s.tensor.bytes[2 * k], &list[k], 2);
    s.values.push_back({true, half_value(list[k]), 0});
  }
  return s;
}

Source int_source(DType dtype) {
  std::vector<int64_t> list;
  if (dtype == DType::kU8) {
    list = {0, 1, 2, 127, 128, 200, 254, 255};
  } else if (dtype == DType::kBool) {
    list = {0, 1, 1, 0, 0, 1};
  } else {
    list = {0,    1,    -1,    2,     127,   128,    255,      256,       257,     300,     -129,       -256,
            2049, 2051, 65504, 65519, 65520, -65520, 16777217, 123456789, kI32Max, kI32Min, kI32Min + 1};
    if (dtype == DType::kI64) {
      const std::vector<int64_t> wide = {int64_t{1} << 31,
                                         -(int64_t{1} << 31) - 1,
                                         int64_t{1} << 32,
                                         (int64_t{1} << 32) + 5,
                                         -(int64_t{1} << 32) - 1,
                                         4294967295,
                                         (int64_t{1} << 40) + 255,
                                         (int64_t{1} << 53) + 1,
                                         kI64Max,
                                         kI64Min,
                                         kI64Min + 1,
                                         -(int64_t{1} << 62)};
      list.insert(list.end(), wide.begin(), wide.end());
    }
  }
  Source s{HostTensor(dtype, {static_cast<int64_t>(list.size())}), {}};
  for (size_t k = 0; k < list.size(); ++k) {
    const int64_t v = list[k];
    switch (dtype) {
      case DType::kI32: {
        const int32_t x = static_cast<int32_t>(v);
        std::memcpy(&s.tensor.bytes[4 * k], &x, 4);
        break;
      }
      case DType::kI64:
        std::memcpy(&s.tensor.bytes[8 * k], &v, 8);
        break;
      default:
        s.tensor.bytes[k] = static_cast<uint8_t>(v);
        break;  // u8, bool
    }
    s.values.push_back({false, 0.0, v});
  }
  return s;
}

Source source_of(DType dtype) {
  if (dtype == DType::kF32) return f32_source();
  if (dtype == DType::kF16) return f16_source();
  return int_source(dtype);
}

// Floats to integers truncate toward zero and saturate, NaN to 0; integers wrap.
template <typename T>
T int_reference(const Value& v) {
  if (!v.is_float) return static_cast<T>(static_cast<uint64_t>(v.i));
  if (std::isnan(v.f)) return T{0};
  const double t = std::trunc(v.f);
  if (t <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (t >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(t);
}

template <typename T>
std::vector<uint8_t> as_bytes(T v) {
  std::vector<uint8_t> b(sizeof(T));
  std::memcpy(b.data(), &v, sizeof(T));
  return b;
}

// The expected bytes of `v` cast to `to`; empty when the result must be a NaN.
std::vector<uint8_t> cast_reference(const Value& v, DType to) {
  const bool nan = v.is_float && std::isnan(v.f);
  switch (to) {
    case DType::kF32:
      if (nan) return {};
      return as_bytes(v.is_float ? static_cast<float>(v.f) : static_cast<float>(v.i));
    case DType::kF16:
      if (nan) return {};
      return as_bytes(half_bits(v.is_float ? v.f : static_cast<double>(v.i)));
    case DType::kI32:
      return as_bytes(int_reference<int32_t>(v));
    case DType::kI64:
      return as_bytes(int_reference<int64_t>(v));
    case DType::kU8:
      return as_bytes(int_reference<uint8_t>(v));
    case DType::kBool:
      return {static_cast<uint8_t>(v.is_float ? v.f != 0.0 : v.i != 0)};  // NaN != 0
    default:
      FAIL("not castable");
      return {};
  }
}

bool is_nan_bytes(const std::vector<uint8_t>& b, DType dtype) {
  if (dtype == DType::kF32) {
    float f;
    std::memcpy(&f, b.data(), 4);
    return std::isnan(f);
  }
  uint16_t h;
  std::memcpy(&h, b.data(), 2);
  return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}

constexpr DType kCastable[] = {DType::kF32, DType::kF16, DType::kI32, DType::kI64, DType::kBool, DType::kU8};

TEST_CASE("cast: every pair of f32/f16/i32/i64/bool/u8 against the reference") {
  for (DType from : kCastable) {
    const Source src = source_of(from);
    for (DType to : kCastable) {
      INFO(std::string(dtype_name(from)) << " -> " << std::string(dtype_name(to)));
      HostTensor in = src.tensor;
      HostTensor out(to, src.tensor.dims);
      fill_sentinel(out, 0xCD);
      Status status = run_kernel(OpId::kCast, {&in}, out, {static_cast<int64_t>(to)});
      REQUIRE_MESSAGE(status.ok(), status.to_string());
      CHECK(in.bytes == src.tensor.bytes);
      int failures = 0;
      for (int64_t i = 0; i < out.count() && failures < 5; ++i) {
        const Value& v = src.values[static_cast<size_t>(i)];
        const std::vector<uint8_t> want = cast_reference(v, to);
        const std::vector<uint8_t> got = element_bytes(out, i);
        const bool ok = want.empty() ? is_nan_bytes(got, to) : got == want;
        if (!ok) {
          ++failures;
          INFO("element " << i << " = " << (v.is_float ? std::to_string(v.f) : std::to_string(v.i))
                          << " (source " << hex(element_bytes(src.tensor, i)) << "): got " << hex(got)
                          << ", want " << (want.empty() ? std::string("NaN") : hex(want)));
          CHECK(ok);
        }
      }
    }
  }
}

// Casts `in` to `to` and returns the result.
HostTensor cast_to(HostTensor in, DType to) {
  HostTensor out(to, in.dims);
  Status status = run_kernel(OpId::kCast, {&in}, out, {static_cast<int64_t>(to)});
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  return out;
}

HostTensor f32_tensor(const std::vector<float>& v) {
  HostTensor t(DType::kF32, {static_cast<int64_t>(v.size())});
  std::memcpy(t.bytes.data(), v.data(), v.size() * 4);
  return t;
}
template <typename T>
std::vector<T> values_of(const HostTensor& t) {
  std::vector<T> v(static_cast<size_t>(t.count()));
  std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(T));
  return v;
}

TEST_CASE("cast: spelled-out cases (truncation, saturation, NaN, wrapping, f16 bits)") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const HostTensor f =
      f32_tensor({nan, inf, -inf, 3e9f, -3e9f, 2.9f, -2.9f, -0.5f, 255.9f, 256.0f, -1.0f, 1e-40f});
  CHECK(values_of<int32_t>(cast_to(f, DType::kI32)) ==
        std::vector<int32_t>{0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 2, -2, 0, 255, 256, -1, 0});
  CHECK(values_of<int64_t>(cast_to(f, DType::kI64)) ==
        std::vector<int64_t>{0, kI64Max, kI64Min, 3000000000, -3000000000, 2, -2, 0, 255, 256, -1, 0});
  CHECK(values_of<uint8_t>(cast_to(f, DType::kU8)) ==
        std::vector<uint8_t>{0, 255, 0, 255, 0, 2, 0, 0, 255, 255, 0, 0});
  CHECK(values_of<uint8_t>(cast_to(f, DType::kBool)) ==
        std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});

  const HostTensor h =
      f32_tensor({1.0f, 65504.0f, 65520.0f, 0x1p-24f, -0.0f, 65519.0f, 0x1p-25f, 1e9f, -1e9f, 0.1f});
  CHECK(values_of<uint16_t>(cast_to(h, DType::kF16)) == std::vector<uint16_t>{0x3c00, 0x7bff, 0x7c00, 0x0001,
                                                                              0x8000, 0x7bff, 0x0000, 0x7c00,
                                                                              0xfc00, 0x2e66});
  const uint16_t h_nan = values_of<uint16_t>(cast_to(f32_tensor({nan}), DType::kF16))[0];
  CHECK((h_nan & 0x7c00) == 0x7c00);
  CHECK((h_nan & 0x3ff) != 0);

  HostTensor ints(DType::kI64, {6});
  const std::vector<int64_t> iv = {
      (int64_t{1} << 32) + 5, int64_t{1} << 31, -(int64_t{1} << 31) - 1, -1, 300, 256};
  std::memcpy(ints.bytes.data(), iv.data(), 48);
  CHECK(values_of<int32_t>(cast_to(ints, DType::kI32)) ==
        std::vector<int32_t>{5, INT32_MIN, INT32_MAX, -1, 300, 256});
  CHECK(values_of<uint8_t>(cast_to(ints, DType::kU8)) == std::vector<uint8_t>{5, 0, 255, 255, 44, 0});
  CHECK(values_of<uint8_t>(cast_to(ints, DType::kBool)) == std::vector<uint8_t>{1, 1, 1, 1, 1, 1});
  CHECK(values_of<uint16_t>(cast_to(ints, DType::kF16)) ==
        std::vector<uint16_t>{0x7c00, 0x7c00, 0xfc00, 0xbc00, 0x5cb0, 0x5c00});

  HostTensor halves(DType::kF16, {6});
  const std::vector<uint16_t> hv = {0x3e00, 0xbe00, 0x7c00, 0x7e00, 0x8000, 0x5bfc};
  std::memcpy(halves.bytes.data(), hv.data(), 12);
  CHECK(values_of<int32_t>(cast_to(halves, DType::kI32)) ==
        std::vector<int32_t>{1, -1, INT32_MAX, 0, 0, 255});
  CHECK(values_of<uint8_t>(cast_to(halves, DType::kBool)) == std::vector<uint8_t>{1, 1, 1, 1, 0, 1});
  const std::vector<float> hf = values_of<float>(cast_to(halves, DType::kF32));
  CHECK(hf[0] == 1.5f);
  CHECK(hf[2] == inf);
  CHECK(std::isnan(hf[3]));
  CHECK(std::signbit(hf[4]));
  CHECK(hf[5] == 255.5f);
}

TEST_CASE("cast: any non-zero bool byte reads as true; a shape of any rank") {
  HostTensor b(DType::kBool, {2, 3});
  b.bytes = {0, 1, 2, 0x80, 0xff, 0};
  CHECK(values_of<float>(cast_to(b, DType::kF32)) == std::vector<float>{0, 1, 1, 1, 1, 0});
  CHECK(values_of<int64_t>(cast_to(b, DType::kI64)) == std::vector<int64_t>{0, 1, 1, 1, 1, 0});
  CHECK(values_of<uint8_t>(cast_to(b, DType::kU8)) == std::vector<uint8_t>{0, 1, 1, 1, 1, 0});
  CHECK(values_of<uint8_t>(cast_to(b, DType::kBool)) == std::vector<uint8_t>{0, 1, 1, 1, 1, 0});
  CHECK(values_of<uint16_t>(cast_to(b, DType::kF16)) ==
        std::vector<uint16_t>{0, 0x3c00, 0x3c00, 0x3c00, 0x3c00, 0});
  // a scalar and an empty tensor
  HostTensor s(DType::kI32, {});
  const int32_t seven = -7;
  std::memcpy(s.bytes.data(), &seven, 4);
  CHECK(values_of<float>(cast_to(s, DType::kF32)) == std::vector<float>{-7.0f});
  HostTensor empty(DType::kF32, {0, 3}), empty_out(DType::kI64, {0, 3});
  fill_sentinel(empty_out, 0xAB);
  REQUIRE(run_kernel(OpId::kCast, {&empty}, empty_out, {static_cast<int64_t>(DType::kI64)}).ok());
  check_untouched(empty_out, 0xAB);
}

// ---- where ----------------------------------------------------------------------

HostTensor mask(const Dims& dims, uint32_t seed) {
  HostTensor m(DType::kBool, dims);
  std::mt19937 rng(seed);
  for (uint8_t& b : m.bytes) b = static_cast<uint8_t>(rng() & 1);
  return m;
}

void check_where(DType dtype, const Dims& c_dims, const Dims& x_dims, const Dims& y_dims,
                 const Dims& out_dims, uint32_t seed = 1) {
  INFO("where " << std::string(dtype_name(dtype)) << " cond " << dims_string(c_dims) << " x "
                << dims_string(x_dims) << " y " << dims_string(y_dims));
  HostTensor cond = mask(c_dims, seed);
  HostTensor x = iota_bytes(dtype, x_dims);
  HostTensor y = iota_bytes(dtype, y_dims);
  for (uint8_t& b : y.bytes) b ^= 0x5a;  // x and y differ everywhere
  for (HostTensor* t : {&cond, &x, &y})  // empty operands get readable bytes behind them
    if (t->count() == 0) fill_sentinel(*t, 0x33);
  HostTensor out(dtype, out_dims);
  fill_sentinel(out, 0xEE);
  Status status = run_op(OpId::kWhere, {&cond, &x, &y}, {&out});
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  check_untouched(out, 0xEE);
  for (int64_t i = 0; i < out.count(); ++i) {
    const Dims index = unravel(i, out_dims);
    const bool c = cond.bytes[static_cast<size_t>(broadcast_offset(index, c_dims))] != 0;
    const std::vector<uint8_t> want = c ? element_bytes(x, broadcast_offset(index, x_dims))
                                        : element_bytes(y, broadcast_offset(index, y_dims));
    INFO("element " << i);
    REQUIRE(element_bytes(out, i) == want);
  }
}

TEST_CASE("where: equal shapes, every element size") {
  check_where(DType::kF32, {4, 6}, {4, 6}, {4, 6}, {4, 6});
  check_where(DType::kU8, {37}, {37}, {37}, {37});
  check_where(DType::kF16, {3, 5}, {3, 5}, {3, 5}, {3, 5});
  check_where(DType::kI64, {2, 2, 3}, {2, 2, 3}, {2, 2, 3}, {2, 2, 3});
  check_where(DType::kBool, {9}, {9}, {9}, {9});
  check_where(DType::kI32, {}, {}, {}, {});
  check_where(DType::kF32, {1, 6}, {6}, {1, 1, 6}, {1, 1, 6});  // equal counts, different ranks
}

TEST_CASE("where: broadcasting of all three operands") {
  for (DType dtype : {DType::kF32, DType::kU8, DType::kF16, DType::kI64, DType::kBool, DType::kI32})
    check_where(dtype, {2, 1, 4}, {3, 1}, {1, 3, 4}, {2, 3, 4}, 7);
  check_where(DType::kF32, {}, {5}, {5}, {5}, 3);  // scalar condition (one seed gives true, one false)
  check_where(DType::kF32, {}, {5}, {5}, {5}, 4);
  check_where(DType::kF32, {5}, {}, {}, {5});  // scalar x and y
  check_where(DType::kF32, {5}, {}, {5}, {5});
  check_where(DType::kI64, {3, 1, 1, 2}, {1, 4, 1, 1}, {1, 1, 5, 1}, {3, 4, 5, 2});
  check_where(DType::kF16, {6, 1}, {1, 7}, {6, 7}, {6, 7});
  check_where(DType::kU8, {2, 1, 2, 1, 2, 1, 2, 1}, {1, 2, 1, 2, 1, 2, 1, 2}, {2}, {2, 2, 2, 2, 2, 2, 2, 2});
  check_where(DType::kF32, {1, 1}, {1}, {}, {1, 1});
  check_where(DType::kI32, {3, 0}, {3, 1}, {1, 0}, {3, 0});
}

TEST_CASE("where: an empty result reads and writes nothing") {
  // cond [1,3] broadcast against empty x and y [0,3]: the output has no element.
  HostTensor cond(DType::kBool, {1, 3});
  cond.bytes = {1, 0, 1};
  HostTensor x(DType::kF32, {0, 3}), y(DType::kF32, {0, 3}), out(DType::kF32, {0, 3});
  fill_sentinel(x, 0x11);
  fill_sentinel(y, 0x22);
  fill_sentinel(out, 0xEE);
  Status status = run_op(OpId::kWhere, {&cond, &x, &y}, {&out});
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  check_untouched(out, 0xEE);
  // the same with every dtype width and the condition empty too
  check_where(DType::kI32, {0, 3}, {0, 1}, {3}, {0, 3});
  check_where(DType::kU8, {0, 1}, {1, 4}, {0, 4}, {0, 4});
}

// ---- gather ---------------------------------------------------------------------

HostTensor index_tensor(DType dtype, const Dims& dims, const std::vector<int64_t>& values) {
  HostTensor t(dtype, dims);
  REQUIRE(t.count() == static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kI64) {
      std::memcpy(&t.bytes[8 * i], &values[i], 8);
    } else {
      const int32_t v = static_cast<int32_t>(values[i]);
      std::memcpy(&t.bytes[4 * i], &v, 4);
    }
  }
  return t;
}

void check_gather(DType dtype, const Dims& data_dims, int64_t axis, DType index_dtype, const Dims& index_dims,
                  const std::vector<int64_t>& indices, const Dims& out_dims) {
  INFO("gather " << std::string(dtype_name(dtype)) << dims_string(data_dims) << " axis " << axis
                 << " indices " << std::string(dtype_name(index_dtype)) << dims_string(index_dims) << " "
                 << dims_string(indices));
  HostTensor data = iota_bytes(dtype, data_dims);
  HostTensor idx = index_tensor(index_dtype, index_dims, indices);
  if (data.count() == 0) fill_sentinel(data, 0x33);
  if (idx.count() == 0) fill_sentinel(idx, 0x33);
  HostTensor out(dtype, out_dims);
  fill_sentinel(out, 0xEE);
  Status status = run_kernel(OpId::kGather, {&data, &idx}, out, {axis});
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  check_untouched(out, 0xEE);
  const size_t a = static_cast<size_t>(axis), r = index_dims.size();
  const Dims data_strides = row_major_strides(data_dims);
  const Dims index_strides = row_major_strides(index_dims);
  for (int64_t i = 0; i < out.count(); ++i) {
    const Dims o = unravel(i, out_dims);  // data[:axis] + indices + data[axis+1:]
    int64_t flat_index = 0;
    for (size_t k = 0; k < r; ++k) flat_index += o[a + k] * index_strides[k];
    int64_t pick = indices[static_cast<size_t>(flat_index)];
    if (pick < 0) pick += data_dims[a];
    int64_t src = pick * data_strides[a];
    for (size_t d = 0; d < a; ++d) src += o[d] * data_strides[d];
    for (size_t d = a + 1; d < data_dims.size(); ++d) src += o[d - 1 + r] * data_strides[d];
    INFO("element " << i);
    REQUIRE(element_bytes(out, i) == element_bytes(data, src));
  }
}

TEST_CASE("gather: rows (axis 0), inner axes, i32 and i64 indices, negative indices") {
  check_gather(DType::kF32, {10, 8}, 0, DType::kI32, {4}, {3, 0, 9, 3}, {4, 8});
  check_gather(DType::kF32, {10, 8}, 0, DType::kI64, {2, 3}, {-1, 0, 5, -10, 9, 2}, {2, 3, 8});
  check_gather(DType::kI32, {5, 6, 3}, 1, DType::kI32, {2, 2}, {5, -6, 0, -1}, {5, 2, 2, 3});
  check_gather(DType::kF16, {5, 6, 3}, 1, DType::kI64, {7}, {1, 1, 2, 3, 5, -6, -3}, {5, 7, 3});
  check_gather(DType::kU8, {2, 3, 7}, 2, DType::kI32, {}, {-2}, {2, 3});  // scalar index drops the axis
  check_gather(DType::kI64, {2, 3, 7}, 2, DType::kI64, {3}, {6, 0, -7}, {2, 3, 3});
  check_gather(DType::kBool, {4}, 0, DType::kI32, {6}, {0, 1, 2, 3, -4, -1}, {6});
  check_gather(DType::kF32, {3, 4}, 1, DType::kI32, {0}, {}, {3, 0});       // no indices
  check_gather(DType::kF32, {0, 4}, 1, DType::kI64, {2}, {1, -1}, {0, 2});  // no rows
}

TEST_CASE("gather: an out-of-range index is kInvalidArgument naming it") {
  struct Bad {
    DType index_dtype;
    int64_t axis;
    std::vector<int64_t> indices;
    std::string named;
  };
  const Bad cases[] = {
      {DType::kI32, 0, {0, 4}, "index 4"},
      {DType::kI32, 0, {1, -5}, "index -5"},
      {DType::kI64, 0, {kI64Min}, "index -9223372036854775808"},
      {DType::kI64, 0, {kI64Max}, "index 9223372036854775807"},
      {DType::kI64, 0, {int64_t{1} << 32}, "index 4294967296"},
      {DType::kI32, 0, {kI32Min}, "index -2147483648"},
      {DType::kI32, 1, {2, 3}, "index 3"},
      {DType::kI64, 1, {-4}, "index -4"},
  };
  for (const Bad& b : cases) {
    INFO("axis " << b.axis << " indices " << dims_string(b.indices));
    HostTensor data = iota_bytes(DType::kF32, {4, 3});
    HostTensor idx = index_tensor(b.index_dtype, {static_cast<int64_t>(b.indices.size())}, b.indices);
    Dims out_dims = {4, 3};
    out_dims[static_cast<size_t>(b.axis)] = static_cast<int64_t>(b.indices.size());
    HostTensor out(DType::kF32, out_dims);
    Status status = run_kernel(OpId::kGather, {&data, &idx}, out, {b.axis});
    CHECK(status.code() == StatusCode::kInvalidArgument);
    INFO("message: " << status.message());
    CHECK(status.message().find(b.named) != std::string::npos);
  }
}

// ---- slice ----------------------------------------------------------------------

ops::AttrValue int_list(const std::vector<int64_t>& v) {
  std::vector<ops::AttrValue> out;
  for (int64_t x : v) out.emplace_back().value = x;
  return {out};
}

// The indices ONNX Slice takes along one dim (clamping as the ONNX spec says).
std::vector<int64_t> onnx_indices(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (dim == 0) return {};
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
  }
  std::vector<int64_t> out;
  for (__int128 i = start; step > 0 ? i < end : i > end; i += step) out.push_back(static_cast<int64_t>(i));
  return out;
}

struct SliceArgs {
  std::vector<int64_t> starts, ends, axes, steps;  // axes / steps empty: left out
};

void check_slice(DType dtype, const Dims& dims, const SliceArgs& a, const Dims& want_dims) {
  INFO("slice " << std::string(dtype_name(dtype)) << dims_string(dims) << " starts " << dims_string(a.starts)
                << " ends " << dims_string(a.ends) << " axes " << dims_string(a.axes) << " steps "
                << dims_string(a.steps));
  ops::AttrMap attrs;
  if (!a.starts.empty() || !a.ends.empty()) {
    attrs["starts"] = int_list(a.starts);
    attrs["ends"] = int_list(a.ends);
  }
  if (!a.axes.empty()) attrs["axes"] = int_list(a.axes);
  if (!a.steps.empty()) attrs["steps"] = int_list(a.steps);
  HostTensor x = iota_bytes(dtype, dims);
  const std::vector<TensorType> types{x.type()};
  auto params = ops::lower_attributes(OpId::kSlice, types, attrs, {});
  REQUIRE_MESSAGE(params.ok(), params.status().to_string());
  auto result = ops::infer_result_type(OpId::kSlice, types, *params);
  REQUIRE_MESSAGE(result.ok(), result.status().to_string());
  REQUIRE(result->dims == want_dims);
  REQUIRE(result->dtype == dtype);

  // the indices taken along every dim
  std::vector<std::vector<int64_t>> taken(dims.size());
  for (size_t d = 0; d < dims.size(); ++d)
    for (int64_t i = 0; i < dims[d]; ++i) taken[d].push_back(i);
  for (size_t k = 0; k < a.starts.size(); ++k) {
    int64_t axis = a.axes.empty() ? static_cast<int64_t>(k) : a.axes[k];
    if (axis < 0) axis += static_cast<int64_t>(dims.size());
    const int64_t step = a.steps.empty() ? 1 : a.steps[k];
    taken[static_cast<size_t>(axis)] =
        onnx_indices(dims[static_cast<size_t>(axis)], a.starts[k], a.ends[k], step);
  }
  for (size_t d = 0; d < dims.size(); ++d) REQUIRE(static_cast<int64_t>(taken[d].size()) == want_dims[d]);

  if (x.count() == 0) fill_sentinel(x, 0x33);
  HostTensor out(dtype, want_dims);
  fill_sentinel(out, 0xEE);
  Status status = run_kernel(OpId::kSlice, {&x}, out, *params);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  check_untouched(out, 0xEE);
  const Dims strides = row_major_strides(dims);
  for (int64_t i = 0; i < out.count(); ++i) {
    const Dims o = unravel(i, want_dims);
    int64_t src = 0;
    for (size_t d = 0; d < dims.size(); ++d) src += taken[d][static_cast<size_t>(o[d])] * strides[d];
    INFO("element " << i);
    REQUIRE(element_bytes(out, i) == element_bytes(x, src));
  }
}

TEST_CASE("slice: ONNX attributes lowered, then run") {
  const Dims d = {6, 7, 5};
  check_slice(DType::kI32, d, {{1, -2}, {5, kI64Max}, {0, 2}, {}}, {4, 7, 2});
  check_slice(DType::kI32, d, {{-1}, {kI64Min}, {1}, {-2}}, {6, 4, 5});           // 6, 4, 2, 0
  check_slice(DType::kF32, d, {{4, 6}, {0, -100}, {0, 1}, {-1, -3}}, {4, 3, 5});  // 4..1; 6, 3, 0
  check_slice(DType::kU8, d, {{5, -1, 0}, {-7, 0, 5}, {-3, -2, -1}, {-2, -1, 2}}, {3, 6, 3});
  check_slice(DType::kF16, d, {{2}, {kI64Max}, {1}, {10}}, {6, 1, 5});                 // step past the end
  check_slice(DType::kI64, d, {{kI64Min}, {kI64Max}, {2}, {}}, {6, 7, 5});             // everything
  check_slice(DType::kI64, d, {{kI64Max}, {kI64Min}, {2}, {-1}}, {6, 7, 5});           // everything, reversed
  check_slice(DType::kBool, d, {{3}, {kI64Max}, {0}, {int64_t{1} << 62}}, {1, 7, 5});  // a huge step
  // ONNX clamps a negative-step start to [0, dim-1]: -100 is 0, and element 0 is taken
  check_slice(DType::kI32, d, {{-100}, {-100}, {0}, {-1}}, {1, 7, 5});
  check_slice(DType::kF32, {2, 3, 4, 5}, {{1, 3, -1}, {-100, 0, 0}, {1, 2, 3}, {-1, -2, -3}}, {2, 2, 2, 2});
  check_slice(DType::kF32, {9}, {{1}, {8}, {}, {3}}, {3});
  check_slice(DType::kF32, {}, {}, {});  // a scalar
}

TEST_CASE("slice: empty results") {
  const Dims d = {6, 7, 5};
  check_slice(DType::kI32, d, {{3}, {3}, {}, {}}, {0, 7, 5});
  check_slice(DType::kI32, d, {{5}, {1}, {}, {}}, {0, 7, 5});
  check_slice(DType::kI32, d, {{1}, {5}, {}, {-1}}, {0, 7, 5});
  check_slice(DType::kF16, d, {{100}, {200}, {2}, {}}, {6, 7, 0});
  check_slice(DType::kF16, d, {{-100}, {-50}, {1}, {}}, {6, 0, 5});
  check_slice(DType::kU8, {0, 4}, {{0}, {kI64Max}, {}, {}}, {0, 4});
  check_slice(DType::kU8, {0, 4}, {{-1}, {kI64Min}, {}, {-1}}, {0, 4});
  check_slice(DType::kU8, {4, 0}, {{-1, 1}, {kI64Min, 2}, {}, {-1, 1}}, {4, 0});
}

// ---- conv2d ---------------------------------------------------------------------

struct Conv {
  std::string name;
  Dims x, w;
  bool bias;
  Dims strides, pads, dilations;  // empty: the default
  int64_t groups;
};

// The direct definition: out[n,k,oy,ox] = bias[k] + sum over (c, ky, kx) of the
// group's input channels, zero outside the image.
std::vector<double> conv_reference(const HostTensor& x, const HostTensor& w, const HostTensor* bias,
                                   int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t dh, int64_t dw,
                                   int64_t groups, int64_t oh, int64_t ow) {
  const int64_t N = x.dims[0], C = x.dims[1], H = x.dims[2], W = x.dims[3];
  const int64_t K = w.dims[0], CG = w.dims[1], KH = w.dims[2], KW = w.dims[3];
  const int64_t KG = K / groups;
  REQUIRE(CG * groups == C);
  std::vector<double> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t g = k / KG;
          double sum = bias ? bias->at(k) : 0.0;
          for (int64_t c = 0; c < CG; ++c)
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                const int64_t iy = oy * sh - pt + ky * dh, ix = ox * sw - pl + kx * dw;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                sum += static_cast<double>(x.at(((n * C + g * CG + c) * H + iy) * W + ix)) *
                       static_cast<double>(w.at(((k * CG + c) * KH + ky) * KW + kx));
              }
          out.push_back(sum);
        }
  return out;
}

void check_conv(const Conv& c, uint32_t seed) {
  INFO("conv2d " << c.name << ": x " << dims_string(c.x) << " w " << dims_string(c.w)
                 << (c.bias ? " bias" : ""));
  HostTensor x = random_f32(c.x, seed), w = random_f32(c.w, seed + 1), b = random_f32({c.w[0]}, seed + 2);
  ops::AttrMap attrs;
  if (!c.strides.empty()) attrs["strides"] = int_list(c.strides);
  if (!c.pads.empty()) attrs["pads"] = int_list(c.pads);
  if (!c.dilations.empty()) attrs["dilations"] = int_list(c.dilations);
  if (c.groups != 1) attrs["groups"].value = c.groups;
  std::vector<TensorType> types{x.type(), w.type()};
  if (c.bias) types.push_back(b.type());
  auto params = ops::lower_attributes(OpId::kConv2d, types, attrs, {});
  REQUIRE_MESSAGE(params.ok(), params.status().to_string());
  const std::vector<int64_t>& p = *params;
  // the output extent from the definition, against the rule's
  const int64_t oh = (c.x[2] + p[2] + p[4] - (p[6] * (c.w[2] - 1) + 1)) / p[0] + 1;
  const int64_t ow = (c.x[3] + p[3] + p[5] - (p[7] * (c.w[3] - 1) + 1)) / p[1] + 1;
  auto result = ops::infer_result_type(OpId::kConv2d, types, p);
  REQUIRE_MESSAGE(result.ok(), result.status().to_string());
  REQUIRE(result->dims == Dims{c.x[0], c.w[0], oh, ow});

  HostTensor out(DType::kF32, result->dims);
  std::fill(out.f32(), out.f32() + out.count(), std::numeric_limits<float>::quiet_NaN());
  std::vector<HostTensor*> inputs{&x, &w};
  if (c.bias) inputs.push_back(&b);
  Status status = run_kernel(OpId::kConv2d, inputs, out, p);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  check_close(out,
              conv_reference(x, w, c.bias ? &b : nullptr, p[0], p[1], p[2], p[3], p[6], p[7], p[8], oh, ow),
              1e-4, 1e-5);
}

TEST_CASE("conv2d: against the direct 7-loop definition") {
  const Conv cases[] = {
      {"3x3 pad 1", {1, 3, 8, 8}, {4, 3, 3, 3}, true, {}, {1}, {}, 1},
      {"3x3 pad 1, no bias, batch 2", {2, 3, 8, 8}, {4, 3, 3, 3}, false, {}, {1}, {}, 1},
      {"3x3 unpadded", {1, 2, 7, 6}, {3, 2, 3, 3}, false, {}, {}, {}, 1},
      {"strided 2x3, asymmetric pads", {2, 2, 9, 7}, {3, 2, 3, 3}, false, {2, 3}, {1, 0, 2, 1}, {}, 1},
      {"dilated 2, pad 2", {1, 2, 10, 10}, {2, 2, 3, 3}, true, {}, {2}, {2}, 1},
      {"dilated 1x3, strided 2x1, 2x3 kernel",
       {2, 3, 11, 9},
       {4, 3, 2, 3},
       true,
       {2, 1},
       {0, 2, 1, 2},
       {1, 3},
       1},
      {"grouped 2", {2, 4, 6, 6}, {6, 2, 3, 3}, true, {}, {1}, {}, 2},
      {"grouped 3, strided, no bias", {1, 6, 9, 8}, {3, 2, 3, 3}, false, {2}, {1}, {}, 3},
      {"depthwise", {1, 5, 7, 7}, {5, 1, 3, 3}, true, {}, {1}, {}, 5},
      {"depthwise multiplier 2, strided", {2, 3, 6, 5}, {6, 1, 3, 3}, false, {2}, {1}, {}, 3},
      {"1x1", {2, 8, 5, 5}, {4, 8, 1, 1}, false, {}, {}, {}, 1},
      {"1x1 with bias", {2, 8, 5, 5}, {4, 8, 1, 1}, true, {}, {}, {}, 1},
      {"1x1 grouped", {3, 8, 4, 4}, {6, 4, 1, 1}, true, {}, {}, {}, 2},
      {"1x1 strided", {1, 4, 7, 6}, {3, 4, 1, 1}, true, {2}, {}, {}, 1},
      {"1x1 padded", {1, 4, 3, 3}, {2, 4, 1, 1}, true, {}, {1}, {}, 1},
      {"1x1 trailing pads only", {1, 4, 3, 3}, {2, 4, 1, 1}, false, {}, {0, 0, 1, 2}, {}, 1},
      {"kernel larger than the image, padded", {1, 1, 2, 2}, {1, 1, 3, 3}, true, {}, {1}, {}, 1},
      {"batch 3, stride equals kernel", {3, 2, 8, 8}, {2, 2, 2, 2}, true, {2}, {}, {}, 1},
      {"K 144, 400 outputs (blocked GEMM)", {1, 16, 20, 20}, {32, 16, 3, 3}, true, {}, {1}, {}, 1},
      {"batch 2 grouped 4 large", {2, 8, 13, 11}, {12, 2, 5, 3}, true, {1, 2}, {2, 1}, {1, 2}, 4},
  };
  uint32_t seed = 100;
  for (const Conv& c : cases) check_conv(c, seed += 10);
}

// The depthwise kernels (hal/cpu/spatial.cc) copy the input of each block of
// 4 output rows into a zero-padded buffer split by stride_w phases; 3x3 and 5x5 at
// vertical stride 1 and 2 run unrolled kernels, other windows a tap loop,
// windows too wide for the buffer the direct loop. Their edges: partial
// vectors (widths past 8 and 16), row counts not a multiple of 4, padding
// larger than the window, column tiles (rows wider than 512), strides 1-3,
// dilations, non-square kernels, planes of one element.
TEST_CASE("conv2d depthwise: the fast paths' edges against the direct definition") {
  const Conv cases[] = {
      {"3x3 s1 pad 1, odd sizes", {1, 16, 33, 37}, {16, 1, 3, 3}, true, {}, {1}, {}, 16},
      {"3x3 s2 pad 1, batch 2", {2, 8, 35, 41}, {8, 1, 3, 3}, true, {2}, {1}, {}, 8},
      {"5x5 s1 pad 2 (BlazeFace)", {1, 4, 64, 64}, {4, 1, 5, 5}, true, {}, {2}, {}, 4},
      {"5x5 s2, asymmetric pads", {1, 3, 21, 19}, {3, 1, 5, 5}, false, {2}, {1, 2, 2, 1}, {}, 3},
      {"5x5 unpadded", {1, 2, 9, 30}, {2, 1, 5, 5}, true, {}, {}, {}, 2},
      {"3x3 s1 on 1x1 planes", {1, 6, 1, 1}, {6, 1, 3, 3}, true, {}, {1}, {}, 6},
      {"3x3 s1 on two-row planes (PP-OCR cls; blocks of 2 rows)", {1, 40, 2, 96}, {40, 1, 3, 3}, true, {}, {1}, {}, 40},
      {"5x5 s2x1 to two rows, one row", {1, 8, 3, 37}, {8, 1, 5, 5}, true, {2, 1}, {2}, {}, 8},
      {"3x3 s2 to one row (blocks of 1 row)", {2, 5, 2, 45}, {5, 1, 3, 3}, false, {2}, {1}, {}, 5},
      {"5x5 s1, six rows (a block of 4, then of 2)", {1, 3, 6, 20}, {3, 1, 5, 5}, true, {}, {2}, {}, 3},
      {"5x5 larger than the 2x3 image", {1, 3, 2, 3}, {3, 1, 5, 5}, true, {}, {2}, {}, 3},
      {"pads past the window (bias-only outputs)", {1, 2, 4, 5}, {2, 1, 3, 3}, true, {}, {3}, {}, 2},
      {"3x3 dilated 2 (tap loop)", {1, 5, 17, 23}, {5, 1, 3, 3}, true, {}, {2}, {2}, 5},
      {"7x7 s1 pad 3 (tap loop)", {1, 4, 20, 21}, {4, 1, 7, 7}, false, {}, {3}, {}, 4},
      {"3x5 kernel, strides 1x2", {1, 3, 13, 29}, {3, 1, 3, 5}, true, {1, 2}, {1, 2, 1, 2}, {}, 3},
      {"3x3 stride 3 (three phases)", {1, 4, 19, 26}, {4, 1, 3, 3}, true, {3}, {1}, {}, 4},
      {"5x5 strides 2x1", {1, 3, 22, 17}, {3, 1, 5, 5}, true, {2, 1}, {2}, {}, 3},
      {"3x3 strides 1x2", {2, 2, 11, 40}, {2, 1, 3, 3}, false, {1, 2}, {1}, {}, 2},
      {"3x3 dilated 1x3, strides 2x1", {1, 2, 15, 33}, {2, 1, 3, 3}, true, {2, 1}, {1, 3, 2, 1}, {1, 3}, 2},
      {"rows wider than one tile", {1, 2, 5, 1100}, {2, 1, 3, 3}, true, {}, {1}, {}, 2},
      {"5x5 s2 rows wider than one tile", {1, 1, 6, 1500}, {1, 1, 5, 5}, true, {2}, {2}, {}, 1},
      {"1x300 window (direct loop)", {1, 2, 3, 310}, {2, 1, 1, 300}, true, {}, {}, {}, 2},
      {"dilation 5000 (direct loop)", {1, 2, 5003, 3}, {2, 1, 2, 1}, true, {}, {}, {5000, 1}, 2},
  };
  uint32_t seed = 900;
  for (const Conv& c : cases) check_conv(c, seed += 10);
}

TEST_CASE("conv2d: every output element is written, batches and groups do not mix") {
  // One-hot inputs: each output is exactly one weight (or zero), so a wrong
  // image, group or channel offset shows as a wrong value, not a tolerance miss.
  HostTensor x(DType::kF32, {2, 4, 3, 3}), w(DType::kF32, {4, 2, 1, 1});
  for (int64_t i = 0; i < x.count(); ++i) x.at(i) = static_cast<float>(i);
  for (int64_t i = 0; i < w.count(); ++i) w.at(i) = static_cast<float>(1 << i);  // 1, 2, 4, ... 128
  HostTensor out(DType::kF32, {2, 4, 3, 3});
  std::fill(out.f32(), out.f32() + out.count(), std::numeric_limits<float>::quiet_NaN());
  REQUIRE(run_kernel(OpId::kConv2d, {&x, &w}, out, {1, 1, 0, 0, 0, 0, 1, 1, 2}).ok());
  std::vector<double> want;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t k = 0; k < 4; ++k)
      for (int64_t s = 0; s < 9; ++s) {
        const int64_t g = k / 2;
        double sum = 0;
        for (int64_t c = 0; c < 2; ++c) sum += x.at((n * 4 + g * 2 + c) * 9 + s) * w.at(k * 2 + c);
        want.push_back(sum);
      }
  check_close(out, want, 0, 0);
}

TEST_CASE("empty outputs of the new kernels write nothing") {
  // conv2d over an empty batch
  HostTensor x(DType::kF32, {0, 2, 4, 4}), w = random_f32({3, 2, 3, 3}, 5), b = random_f32({3}, 6);
  HostTensor out(DType::kF32, {0, 3, 4, 4});
  fill_sentinel(x, 0x11);
  fill_sentinel(out, 0xEE);
  REQUIRE(run_kernel(OpId::kConv2d, {&x, &w, &b}, out, {1, 1, 1, 1, 1, 1, 1, 1, 1}).ok());
  check_untouched(out, 0xEE);
  // slice to nothing along one dim
  HostTensor s = iota_bytes(DType::kI32, {3, 4}), s_out(DType::kI32, {3, 0});
  fill_sentinel(s_out, 0xEE);
  REQUIRE(run_kernel(OpId::kSlice, {&s}, s_out, {0, 1, 3, 0, 1, 0}).ok());
  check_untouched(s_out, 0xEE);
  // gather of no indices
  HostTensor data = iota_bytes(DType::kF32, {3, 4}), idx(DType::kI64, {0}), g_out(DType::kF32, {0, 4});
  fill_sentinel(idx, 0x7f);
  fill_sentinel(g_out, 0xEE);
  REQUIRE(run_kernel(OpId::kGather, {&data, &idx}, g_out, {0}).ok());
  check_untouched(g_out, 0xEE);
}

// ---- argmax ---------------------------------------------------------------------

// numpy.argmax along `axis` (NaN: the first one wins; select_last: the
// reversed row's argmax, counted from the end), with keepdims dropped.
std::vector<int64_t> argmax_reference(const HostTensor& x, int64_t axis, bool select_last) {
  const Dims& dims = x.dims;
  const size_t a = static_cast<size_t>(axis);
  const Dims strides = row_major_strides(dims);
  Dims out_dims;
  for (size_t d = 0; d < dims.size(); ++d)
    if (d != a) out_dims.push_back(dims[d]);
  std::vector<int64_t> out(static_cast<size_t>(product(out_dims)));
  for (size_t i = 0; i < out.size(); ++i) {
    const Dims o = unravel(static_cast<int64_t>(i), out_dims);
    int64_t base = 0;
    for (size_t d = 0, k = 0; d < dims.size(); ++d)
      if (d != a) base += o[k++] * strides[d];
    std::vector<double> row;
    for (int64_t j = 0; j < dims[a]; ++j) row.push_back(x.at(base + j * strides[a]));
    if (select_last) std::reverse(row.begin(), row.end());
    size_t best = 0;
    for (size_t j = 0; j < row.size(); ++j) {
      if (std::isnan(row[j])) {
        best = j;
        break;
      }
      if (row[j] > row[best]) best = j;
    }
    out[i] = select_last ? dims[a] - 1 - static_cast<int64_t>(best) : static_cast<int64_t>(best);
  }
  return out;
}

void check_argmax(HostTensor x, int64_t axis, bool keepdims, bool select_last) {
  INFO("argmax " << dims_string(x.dims) << " axis " << axis << " keepdims " << keepdims << " last "
                 << select_last);
  Dims out_dims = x.dims;
  out_dims[static_cast<size_t>(axis)] = 1;
  if (!keepdims) out_dims.erase(out_dims.begin() + axis);
  HostTensor out(DType::kI64, out_dims);
  fill_sentinel(out, 0xEE);
  Status status = run_kernel(OpId::kArgMax, {&x}, out, {axis, keepdims, select_last});
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  check_untouched(out, 0xEE);
  const std::vector<int64_t> want = argmax_reference(x, axis, select_last);
  REQUIRE(out.count() == static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    int64_t got;
    std::memcpy(&got, &out.bytes[8 * i], 8);
    INFO("element " << i);
    CHECK(got == want[i]);
  }
}

TEST_CASE("argmax: every axis, keepdims, select_last_index, ties") {
  HostTensor x = random_f32({3, 4, 5}, 4100);
  for (int i = 0; i < x.count(); i += 3) x.at(i) = std::round(x.at(i));  // ties
  for (int64_t axis = 0; axis < 3; ++axis)
    for (bool keepdims : {false, true})
      for (bool last : {false, true}) check_argmax(x, axis, keepdims, last);
  HostTensor tied(DType::kF32, {2, 4});  // all equal: 0, or the last with select_last
  check_argmax(tied, 1, false, false);
  check_argmax(tied, 1, false, true);
  check_argmax(random_f32({1000}, 4101), 0, false, false);  // a vocabulary row
}

TEST_CASE("argmax: NaN is the largest (numpy: first NaN), infinities, one element, empty results") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  HostTensor x(DType::kF32, {3, 5});
  const float values[] = {1, nan, inf, nan, 2, -inf, -inf, -inf, -inf, -inf, 0, 7, inf, 3, inf};
  std::memcpy(x.bytes.data(), values, sizeof values);
  for (bool last : {false, true}) {
    check_argmax(x, 1, false, last);
    check_argmax(x, 0, true, last);
  }
  HostTensor out(DType::kI64, {3});
  REQUIRE(run_kernel(OpId::kArgMax, {&x}, out, {1, 0, 0}).ok());
  const int64_t* got = reinterpret_cast<const int64_t*>(out.bytes.data());
  CHECK(got[0] == 1);  // the first NaN
  CHECK(got[1] == 0);
  CHECK(got[2] == 2);
  REQUIRE(run_kernel(OpId::kArgMax, {&x}, out, {1, 0, 1}).ok());
  CHECK(got[0] == 3);  // the last NaN
  CHECK(got[1] == 4);
  CHECK(got[2] == 4);
  check_argmax(random_f32({4, 1}, 4102), 1, false, false);         // one element per row
  check_argmax(random_f32({1}, 4103), 0, false, false);            // a single element
  check_argmax(HostTensor(DType::kF32, {0, 3}), 1, false, false);  // no rows: nothing written
}

// ---- dynamic_slice, update_slice --------------------------------------------------

const DType kEveryDType[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI8,
                             DType::kU8,  DType::kI32, DType::kI64,  DType::kBool};

// The start a window of `size` in a dim of `dim` really takes (XLA: clamped into the dim).
int64_t clamped(int64_t start, int64_t dim, int64_t size) {
  return std::min(std::max<int64_t>(start, 0), dim - size);
}

std::vector<HostTensor> start_tensors(const std::vector<int64_t>& starts) {
  std::vector<HostTensor> out;
  for (int64_t s : starts) out.push_back(i64_scalar(s));
  return out;
}

void check_dynamic_slice(DType dtype, const Dims& dims, const std::vector<int64_t>& starts,
                         const Dims& sizes) {
  INFO("dynamic_slice " << std::string(dtype_name(dtype)) << dims_string(dims) << " starts "
                        << dims_string(starts) << " sizes " << dims_string(sizes));
  HostTensor x = iota_bytes(dtype, dims);
  if (x.count() == 0) fill_sentinel(x, 0x33);
  std::vector<HostTensor> s = start_tensors(starts);
  std::vector<HostTensor*> inputs{&x};
  for (HostTensor& t : s) inputs.push_back(&t);
  HostTensor out(dtype, sizes);
  fill_sentinel(out, 0xEE);
  Status status = run_kernel(OpId::kDynamicSlice, inputs, out, sizes);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  check_untouched(out, 0xEE);
  const Dims strides = row_major_strides(dims);
  for (int64_t i = 0; i < out.count(); ++i) {
    const Dims w = unravel(i, sizes);
    int64_t src = 0;
    for (size_t d = 0; d < dims.size(); ++d)
      src += (clamped(starts[d], dims[d], sizes[d]) + w[d]) * strides[d];
    INFO("element " << i);
    REQUIRE(element_bytes(out, i) == element_bytes(x, src));
  }
}

TEST_CASE("dynamic_slice: every dtype, starts inside, clamped from both sides, whole and empty windows") {
  for (DType dtype : kEveryDType) {
    check_dynamic_slice(dtype, {5, 6}, {1, 2}, {2, 3});
    check_dynamic_slice(dtype, {5, 6}, {-3, 9}, {2, 3});             // clamped to 0 and 3
    check_dynamic_slice(dtype, {5, 6}, {kI64Max, kI64Min}, {5, 1});  // whole dim; extremes
    check_dynamic_slice(dtype, {4, 3, 7}, {2, 1, 3}, {1, 2, 4});
  }
  check_dynamic_slice(DType::kF32, {6, 4}, {4, 0}, {1, 4});  // one row (a KV-cache read)
  check_dynamic_slice(DType::kF32, {6, 4}, {2, 7}, {0, 4});  // empty window
  check_dynamic_slice(DType::kI64, {0, 4}, {3, 1}, {0, 2});  // empty tensor
  check_dynamic_slice(DType::kF16, {}, {}, {});              // a scalar: itself
  check_dynamic_slice(DType::kU8, {2, 1, 2, 1, 2, 1, 2, 3}, {1, 0, 1, 0, 1, 0, 1, 1},
                      {1, 1, 1, 1, 1, 1, 2, 2});
}

// update_slice out of place (aliased false) and in place on x (aliased true).
void check_update_slice(DType dtype, const Dims& dims, const Dims& update_dims,
                        const std::vector<int64_t>& starts, bool in_place) {
  INFO("update_slice " << std::string(dtype_name(dtype)) << dims_string(dims) << " update "
                       << dims_string(update_dims) << " starts " << dims_string(starts) << " in place "
                       << in_place);
  HostTensor x = iota_bytes(dtype, dims);
  HostTensor update(dtype, update_dims);
  for (size_t i = 0; i < update.bytes.size(); ++i) update.bytes[i] = static_cast<uint8_t>(0xA0 + i * 3);
  if (dtype == DType::kBool)
    for (uint8_t& b : update.bytes) b &= 1;
  const HostTensor original = x;
  std::vector<HostTensor> s = start_tensors(starts);
  std::vector<HostTensor*> inputs{&x, &update};
  for (HostTensor& t : s) inputs.push_back(&t);
  HostTensor out(dtype, dims);
  fill_sentinel(out, 0xEE);
  Status status = run_op(OpId::kUpdateSlice, inputs, {&out}, {}, in_place ? 0 : -1);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  const HostTensor& got = in_place ? x : out;
  if (!in_place) CHECK(x.bytes == original.bytes);  // x is only read
  const Dims strides = row_major_strides(dims);
  HostTensor want = original;
  for (int64_t i = 0; i < update.count(); ++i) {
    const Dims w = unravel(i, update_dims);
    int64_t dst = 0;
    for (size_t d = 0; d < dims.size(); ++d)
      dst += (clamped(starts[d], dims[d], update_dims[d]) + w[d]) * strides[d];
    const std::vector<uint8_t> e = element_bytes(update, i);
    std::copy(e.begin(), e.end(), want.bytes.begin() + static_cast<std::ptrdiff_t>(dst * esize(want)));
  }
  if (got.count() == 0) {
    if (!in_place) check_untouched(out, 0xEE);
    return;
  }
  CHECK(got.bytes == want.bytes);
}

TEST_CASE("update_slice: every dtype, in place and not, clamped starts, empty updates, the whole tensor") {
  for (DType dtype : kEveryDType)
    for (bool in_place : {false, true}) {
      check_update_slice(dtype, {8, 4}, {1, 4}, {3, 0}, in_place);   // one KV-cache row
      check_update_slice(dtype, {8, 4}, {2, 3}, {7, -2}, in_place);  // clamped to 6 and 0
      check_update_slice(dtype, {3, 5, 4}, {2, 2, 3}, {1, 2, 1}, in_place);
      check_update_slice(dtype, {8, 4}, {8, 4}, {5, 5}, in_place);  // the whole tensor
      check_update_slice(dtype, {8, 4}, {0, 4}, {5, 0}, in_place);  // nothing written
      check_update_slice(dtype, {}, {}, {}, in_place);              // a scalar: the update
    }
  check_update_slice(DType::kF32, {0, 4}, {0, 2}, {1, 1}, false);
  check_update_slice(DType::kI64, {6}, {2}, {kI64Min}, true);
  check_update_slice(DType::kI64, {6}, {2}, {kI64Max}, false);
}

TEST_CASE("update_slice: a result in update's storage (update as large as x) is update") {
  HostTensor x = iota_bytes(DType::kI32, {3, 2});
  HostTensor update = random_f32({3, 2}, 4200);
  update.dtype = DType::kI32;
  const HostTensor want = update;
  HostTensor zero = i64_scalar(0), big = i64_scalar(9);
  HostTensor out(DType::kI32, {3, 2});
  REQUIRE(run_op(OpId::kUpdateSlice, {&x, &update, &zero, &big}, {&out}, {}, 1).ok());
  CHECK(update.bytes == want.bytes);
}

}  // namespace
}  // namespace hexir::hal::testing

namespace hexir::hal::testing {
namespace {

// separable_conv2d against the two conv2ds it replaces, run apart: the same
// bits (its cpu kernel runs the depthwise kernels into a thread's scratch,
// then the 1x1's GEMM over those rows).
struct Separable {
  const char* name;
  std::vector<int64_t> x;  // [N, C, H, W]
  int64_t k, kh, kw;
  std::vector<int64_t> conv;  // the depthwise's strides, pads (t, l, b, r), dilations
  bool dw_bias, pw_bias, residual;
  int64_t dw_activation, pw_activation;  // ops::Activation, 0: none
};

void check_separable(const Separable& s, uint32_t seed) {
  INFO(s.name);
  const int64_t c = s.x[1];
  HostTensor x = random_f32(s.x, seed), dw_w = random_f32({c, 1, s.kh, s.kw}, seed + 1);
  HostTensor pw_w = random_f32({s.k, c, 1, 1}, seed + 2), dw_b = random_f32({c}, seed + 3);
  HostTensor pw_b = random_f32({s.k}, seed + 4);
  auto epilogue = [](int64_t a) {
    // hard_sigmoid's alpha and beta; the others take none.
    if (a == static_cast<int64_t>(ops::Activation::kHardSigmoid))
      return std::vector<int64_t>{a, std::bit_cast<int64_t>(0.2), std::bit_cast<int64_t>(0.5)};
    return std::vector<int64_t>{a, 0, 0};
  };
  // The unfused pair.
  std::vector<int64_t> dw_params = s.conv;
  dw_params.push_back(c);
  if (s.dw_activation != 0) for (int64_t w : epilogue(s.dw_activation)) dw_params.push_back(w);
  std::vector<HostTensor*> dw_in{&x, &dw_w};
  if (s.dw_bias) dw_in.push_back(&dw_b);
  std::vector<TensorType> dw_types;
  for (HostTensor* t : dw_in) dw_types.push_back(t->type());
  auto mid_type = ops::infer_result_type(OpId::kConv2d, dw_types, dw_params);
  REQUIRE(mid_type.ok());
  HostTensor mid(DType::kF32, mid_type->dims);
  REQUIRE(run_kernel(OpId::kConv2d, dw_in, mid, dw_params).ok());
  const std::vector<int64_t> out_dims{s.x[0], s.k, mid.dims[2], mid.dims[3]};
  HostTensor residual = random_f32(out_dims, seed + 5);
  std::vector<int64_t> pw_params{1, 1, 0, 0, 0, 0, 1, 1, 1};
  if (s.pw_activation != 0) for (int64_t w : epilogue(s.pw_activation)) pw_params.push_back(w);
  std::vector<HostTensor*> pw_in{&mid, &pw_w};
  if (s.pw_bias) pw_in.push_back(&pw_b);
  if (s.residual) pw_in.push_back(&residual);
  HostTensor want(DType::kF32, out_dims);
  REQUIRE(run_kernel(OpId::kConv2d, pw_in, want, pw_params).ok());
  // The fused operator: (x, dw_w, pw_w, biases, residual); its 16 words.
  std::vector<int64_t> params = s.conv;
  params.push_back(c);
  for (int64_t w : epilogue(s.dw_activation)) params.push_back(s.dw_activation != 0 ? w : 0);
  for (int64_t w : epilogue(s.pw_activation)) params.push_back(s.pw_activation != 0 ? w : 0);
  params.push_back((s.dw_bias ? 1 : 0) | (s.pw_bias ? 2 : 0));
  std::vector<HostTensor*> in{&x, &dw_w, &pw_w};
  if (s.dw_bias) in.push_back(&dw_b);
  if (s.pw_bias) in.push_back(&pw_b);
  if (s.residual) in.push_back(&residual);
  HostTensor got(DType::kF32, out_dims);
  std::fill(got.f32(), got.f32() + got.count(), std::numeric_limits<float>::quiet_NaN());
  const Status status = run_kernel(OpId::kSeparableConv2d, in, got, params);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  CHECK(std::memcmp(got.f32(), want.f32(), static_cast<size_t>(want.count()) * sizeof(float)) == 0);
}

TEST_CASE("separable_conv2d: bit for bit the depthwise conv2d then the 1x1 conv2d") {
  const int64_t relu = static_cast<int64_t>(ops::Activation::kRelu);
  const int64_t hard_swish = static_cast<int64_t>(ops::Activation::kHardSwish);
  const int64_t hard_sigmoid = static_cast<int64_t>(ops::Activation::kHardSigmoid);
  const Separable cases[] = {
      {"BlazeFace's block: 3x3 without a bias, 1x1 + bias + residual + relu", {1, 24, 40, 40}, 24, 3, 3,
       {1, 1, 1, 1, 1, 1, 1, 1}, false, true, true, 0, relu},
      {"5x5 s2, both biases, hard_swish between, hard_sigmoid after, batch 2", {2, 8, 21, 19}, 12, 5, 5,
       {2, 2, 2, 2, 2, 2, 1, 1}, true, true, false, hard_swish, hard_sigmoid},
      {"no biases, 3x3 dilated 2 (the tap loop), odd sizes", {1, 5, 17, 23}, 7, 3, 3, {1, 1, 2, 2, 2, 2, 2, 2},
       false, false, false, 0, 0},
      {"a row of C * OW = 8192 floats (one row per task)", {1, 16, 6, 512}, 9, 3, 3, {1, 1, 1, 1, 1, 1, 1, 1},
       true, true, true, relu, relu},
      {"1x300 window (the direct loop)", {1, 3, 4, 310}, 5, 1, 300, {1, 1, 0, 0, 0, 0, 1, 1}, true, true, false,
       0, relu},
      {"K past a GEMM tile, C past its K block (300 channels)", {1, 300, 5, 6}, 70, 3, 3, {1, 1, 1, 1, 1, 1, 1, 1},
       true, true, true, 0, hard_swish},
      // The depthwise buffer is kept from channel to channel (its padding
      // zeros written once per tile): rows of several tiles, the last one
      // narrower, whose padding columns differ.
      {"rows of two tiles (512 + 188 columns)", {1, 4, 9, 700}, 6, 3, 3, {1, 1, 1, 1, 1, 1, 1, 1}, true, true, true,
       0, relu},
      {"stride 2 rows of six tiles, asymmetric pads", {1, 3, 8, 1500}, 5, 3, 3, {2, 2, 0, 0, 1, 1, 1, 1}, false, true,
       false, relu, 0},
  };
  uint32_t seed = 2000;
  for (const Separable& s : cases) check_separable(s, seed += 10);
}

TEST_CASE("separable_conv2d: the rule refuses a depthwise row past 8192 floats, a wrong bias word, a 3x3 second stage") {
  auto infer = [](std::vector<TensorType> in, std::vector<int64_t> p) {
    return ops::infer_result_type(OpId::kSeparableConv2d, in, p);
  };
  const TensorType x{DType::kF32, {1, 16, 4, 513}}, dw{DType::kF32, {16, 1, 3, 3}}, pw{DType::kF32, {8, 16, 1, 1}};
  const std::vector<int64_t> words{1, 1, 1, 1, 1, 1, 1, 1, 16, 0, 0, 0, 0, 0, 0, 0};
  auto too_wide = infer({x, dw, pw}, words);
  REQUIRE_FALSE(too_wide.ok());
  CHECK(too_wide.status().message().find("8192") != std::string::npos);
  const TensorType narrow{DType::kF32, {1, 16, 4, 500}};
  CHECK(infer({narrow, dw, pw}, words).ok());
  std::vector<int64_t> one_bias = words;
  one_bias.back() = 1;  // says dw_bias, none given
  CHECK(infer({narrow, dw, pw}, one_bias).status().message().find("bias word") != std::string::npos);
  const TensorType pw3{DType::kF32, {8, 16, 3, 3}};
  CHECK(infer({narrow, dw, pw3}, words).status().message().find("pointwise weights") != std::string::npos);
}

}  // namespace
}  // namespace hexir::hal::testing
