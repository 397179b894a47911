// Data-section compression, shared by the writer (compress_section), the VM
// and hexir-dump (decompress_section / decompress_sections).
//
// A zstd section stores exactly one zstd frame that records its content size
// and carries zstd's content checksum. The verifier checks the stored range
// and that raw_size is sane; decompression is done once, at load, into memory
// the caller owns (64-byte aligned, so constants keep their alignment), and
// never on invoke. Stored bytes are untrusted: every failure is kDataLoss and
// names the section, never a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/format/verifier.h"

namespace hexir::format {

// The largest raw (decompressed) section size a file may declare.
inline constexpr uint64_t kMaxRawSectionSize = uint64_t{1} << 40;
// zstd cannot expand one stored byte into more than this many raw bytes: the
// smallest block (an RLE block: a 3-byte header and 1 byte) produces at most
// 128 KiB. A raw_size beyond stored size x this is a lie.
inline constexpr uint64_t kMaxZstdExpansion = (uint64_t{1} << 17) / 4;
// The zstd level compress_section uses by default (zstd's own default).
inline constexpr int kDefaultZstdLevel = 3;

// Owned bytes at a 64-byte aligned address (a decompressed section). Movable;
// moving keeps the address, so spans into it stay valid.
class SectionBuffer {
 public:
  SectionBuffer() = default;
  // kResourceExhausted when `size` bytes cannot be allocated.
  static Result<SectionBuffer> allocate(uint64_t size);

  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  uint64_t size() const { return size_; }
  std::span<const uint8_t> span() const { return {data_.get(), static_cast<size_t>(size_)}; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { ::operator delete (p, std::align_val_t{64}); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  uint64_t size_ = 0;
};

// Compresses `raw` into one zstd frame with its content size and a content
// checksum. kInternal if zstd fails.
Result<std::vector<uint8_t>> compress_section(std::span<const uint8_t> raw, int level = kDefaultZstdLevel);

// Decompresses the stored bytes of section `index`: they must be exactly one
// zstd frame whose content size is `raw_size`, decompressing to exactly
// `raw_size` bytes. Corrupt, truncated or lying frames are kDataLoss
// ("section 0: ...").
Result<SectionBuffer> decompress_section(std::span<const uint8_t> stored, uint64_t raw_size, uint64_t index);

// Decompresses every zstd section of a verified module into `owned` (one
// buffer per compressed section) and points module.sections[i] at the raw
// bytes, so users of VerifiedModule::sections see raw bytes whatever the
// compression. `owned` must outlive every use of those spans. When the raw
// sizes together exceed `max_raw_bytes`, nothing is allocated and the status
// is kResourceExhausted naming the limit (a few KB of RLE blocks can declare
// a GiB); the VM passes LoadOptions::max_decompressed_bytes.
Status decompress_sections(VerifiedModule& module, std::vector<SectionBuffer>& owned,
                           uint64_t max_raw_bytes = UINT64_MAX);

}  // namespace hexir::format
