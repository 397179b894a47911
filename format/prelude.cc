#include "hexir/format/prelude.h"

#include <cstring>

namespace hexir::format {

uint64_t checksum64(std::span<const uint8_t> bytes) {
  // FNV-1a over 64-bit words: one multiply per 8 bytes, then the tail bytewise.
  constexpr uint64_t kPrime = 0x100000001b3ull;
  uint64_t hash = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    hash = (hash ^ word) * kPrime;
  }
  for (; i < bytes.size(); ++i) hash = (hash ^ bytes[i]) * kPrime;
  return hash ^ bytes.size();
}

}  // namespace hexir::format
