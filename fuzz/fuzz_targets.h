// Bodies of the fuzz targets, shared by the libFuzzer entry points (fuzz/*.cc,
// built with -Dfuzz=enabled and clang) and the deterministic mutation tests
// of the regular suite (tests/fuzz). Each must never crash, hang or trip a
// sanitizer, whatever the bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include <vector>

namespace hexir::fuzz {

// A copy of bytes at 64-byte alignment, as an mmap (or a careful caller) gives the loader.
class AlignedCopy {
 public:
  AlignedCopy(const uint8_t* data, size_t size);
  uint8_t* data() { return reinterpret_cast<uint8_t*>(blocks_.data()); }
  size_t size() const { return size_; }

 private:
  struct alignas(64) Block {
    uint8_t bytes[64];
  };
  std::vector<Block> blocks_;
  size_t size_;
};

// Makes the prelude's metadata checksum match the (mutated) metadata, so
// mutations reach the flatbuffer and semantic checks instead of stopping at
// the checksum. A no-op when the prelude's ranges are out of bounds.
void refresh_metadata_checksum(uint8_t* file, size_t size);

// Loads an executable from bytes (after refresh_metadata_checksum); when the verifier accepts it, prepares it on
// the cpu device and invokes every function once with zeroed inputs, so a
// hole in the verifier shows up as an out-of-bounds kernel access.
void load_and_run_executable(const uint8_t* data, size_t size);

// Parses a .npy file.
void parse_npy_bytes(const uint8_t* data, size_t size);

// Compiles .hxir text (file constants are not resolvable; everything else is).
void compile_hxir_text(const uint8_t* data, size_t size);

}  // namespace hexir::fuzz
