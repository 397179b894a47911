// The fixed 64-byte prelude at the start of every .hxe file, little-endian.
#pragma once

#include <bit>
#include <cstdint>
#include <span>

#include "hexir/base/status.h"

namespace hexir::format {

inline constexpr char kMagic[8] = {'H', 'E', 'X', 'I', 'R', 'X', 'E', '\0'};
// What the writer writes, and the oldest version this runtime reads; a file
// outside the range is refused ("compiled for format version X; this runtime
// reads Y..Z; recompile"). Bump kFormatVersion whenever the meaning of a field
// or of an operator's parameter words changes, and raise the minimum unless
// the runtime still reads the old meaning; tests/data/golden fails otherwise
// (docs/design-notes.md, "The format version"). 2: matmul's words with transpose_b.
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kMinReadableFormatVersion = 2;
inline constexpr uint64_t kPageSize = 4096;      // data sections start on this boundary
inline constexpr uint64_t kConstantAlignment = 64;
inline constexpr uint64_t kMaxFailMessageBytes = 4096;  // each of Module.messages (a Fail's error)

enum PreludeFlags : uint32_t {
  kFlagDataChecksum = 1u << 0,  // data_checksum covers [data_offset, data_offset + data_size)
};

struct Prelude {
  char magic[8];
  uint32_t format_version;
  uint32_t flags;
  uint64_t metadata_offset;   // the flatbuffer
  uint64_t metadata_size;
  uint64_t data_offset;       // first data section, page aligned
  uint64_t data_size;
  uint64_t metadata_checksum; // checksum64 of the metadata bytes
  uint64_t data_checksum;     // only when kFlagDataChecksum
};
static_assert(sizeof(Prelude) == 64);
// The file is little-endian and read in host order where it lies: the prelude
// (copied with memcpy), checksum64's words, and constants used straight from
// the mapping by the kernels. x86-64 and aarch64 Linux are little-endian; a
// big-endian target would need byte swaps on every one of those reads.
static_assert(std::endian::native == std::endian::little,
              "Hexir reads .hxe files in host byte order: big-endian targets are not supported");

// 64-bit checksum (FNV-1a over 8-byte words plus tail); cheap enough for
// metadata on every load, opt-in for the data sections.
uint64_t checksum64(std::span<const uint8_t> bytes);

}  // namespace hexir::format
