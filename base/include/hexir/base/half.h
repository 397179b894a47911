// IEEE half precision (f16) and bfloat16 conversions, bit-exact and portable
// (no F16C needed): round to nearest even, overflow to infinity, NaN kept NaN.
#pragma once

#include <bit>
#include <cstdint>

namespace hexir {

inline uint16_t float_to_half_bits(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t exponent = (x >> 23) & 0xff;
  uint32_t mantissa = x & 0x7fffff;
  if (exponent == 0xff)
    return static_cast<uint16_t>(sign | 0x7c00 | (mantissa ? 0x200 | (mantissa >> 13) : 0));
  const int32_t e = static_cast<int32_t>(exponent) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000;
    const int shift = 14 - e;
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fff;
  // A carry out of the mantissa correctly rounds up into the exponent (to inf at the top).
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(sign | half);
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000 | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return std::bit_cast<float>(sign);
    int e = -1;  // subnormal: normalize
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400) == 0);
    return std::bit_cast<float>(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mantissa & 0x3ff) << 13);
  }
  return std::bit_cast<float>(sign | (exponent + 127 - 15) << 23 | mantissa << 13);
}

inline uint16_t float_to_bfloat16_bits(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  if (value != value) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

// From a double, rounded once (a double that first becomes a float can round
// twice: just past a half-way point of f16 it may land on the point itself
// and then go to even, one ulp off). Same rules: nearest even, overflow to
// infinity, NaN kept NaN. Text literals (.hxir dense/splat) use these.
inline uint16_t double_to_half_bits(double value) {
  const uint64_t x = std::bit_cast<uint64_t>(value);
  const uint32_t sign = static_cast<uint32_t>(x >> 48) & 0x8000;
  const uint32_t exponent = static_cast<uint32_t>(x >> 52) & 0x7ff;
  uint64_t mantissa = x & ((uint64_t{1} << 52) - 1);
  if (exponent == 0x7ff)
    return static_cast<uint16_t>(sign | 0x7c00 | (mantissa ? 0x200 | (mantissa >> 42) : 0));
  const int32_t e = static_cast<int32_t>(exponent) - 1023 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mantissa |= uint64_t{1} << 52;
    const int shift = 43 - e;  // 43..53
    uint64_t half = mantissa >> shift;
    const uint64_t rest = mantissa & ((uint64_t{1} << shift) - 1);
    const uint64_t halfway = uint64_t{1} << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(half));
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | static_cast<uint32_t>(mantissa >> 42);
  const uint64_t rest = mantissa & ((uint64_t{1} << 42) - 1);
  const uint64_t halfway = uint64_t{1} << 41;
  if (rest > halfway || (rest == halfway && (half & 1))) ++half;  // a carry rounds into the exponent
  return static_cast<uint16_t>(sign | half);
}

inline uint16_t double_to_bfloat16_bits(double value) {
  const uint64_t x = std::bit_cast<uint64_t>(value);
  const uint32_t sign = static_cast<uint32_t>(x >> 48) & 0x8000;
  const uint32_t exponent = static_cast<uint32_t>(x >> 52) & 0x7ff;
  uint64_t mantissa = x & ((uint64_t{1} << 52) - 1);
  if (exponent == 0x7ff)
    return static_cast<uint16_t>(sign | 0x7f80 | (mantissa ? 0x40 | (mantissa >> 45) : 0));
  const int32_t e = static_cast<int32_t>(exponent) - 1023 + 127;
  if (e >= 255) return static_cast<uint16_t>(sign | 0x7f80);
  if (e <= 0) {
    if (e < -7) return static_cast<uint16_t>(sign);
    mantissa |= uint64_t{1} << 52;
    const int shift = 46 - e;  // 46..53
    uint64_t b = mantissa >> shift;
    const uint64_t rest = mantissa & ((uint64_t{1} << shift) - 1);
    const uint64_t halfway = uint64_t{1} << (shift - 1);
    if (rest > halfway || (rest == halfway && (b & 1))) ++b;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(b));
  }
  uint32_t b = (static_cast<uint32_t>(e) << 7) | static_cast<uint32_t>(mantissa >> 45);
  const uint64_t rest = mantissa & ((uint64_t{1} << 45) - 1);
  const uint64_t halfway = uint64_t{1} << 44;
  if (rest > halfway || (rest == halfway && (b & 1))) ++b;
  return static_cast<uint16_t>(sign | b);
}

}  // namespace hexir
