// Bodies of the fuzz targets, shared by the libFuzzer entry points (fuzz/*.cc,
// built with -Dfuzz=enabled and clang) and the deterministic mutation tests
// of the regular suite (tests/fuzz). Each must never crash, hang or trip a
// sanitizer, whatever the bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include <string>
#include <vector>

namespace hexir::fuzz {

// Loop iterations one invoke of a fuzzed program may run: trip counts are
// data (a mutated constant), and a fuzz input must finish quickly.
inline constexpr uint64_t kFuzzLoopIterations = 10000;

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

// Parses a .npy file, and its header alone against a few file sizes.
void parse_npy_bytes(const uint8_t* data, size_t size);

// The folder .hxir `file` constants resolve in for compile_hxir_text, made
// once per process: small .npy files of several dtypes (w.npy, i.npy, h.npy,
// b.npy, sub/x.npy, and the samples' weights under mlp/, transformer/,
// convnet/), a truncated and an empty .npy, a FIFO (fifo.npy), and symlinks
// leading out of the folder (out.npy -> /etc/passwd, zero.npy -> /dev/zero)
// that the confinement must refuse. $HEXIR_FUZZ_SCRATCH names it (created if
// missing); otherwise a new folder under $TMPDIR, removed at exit.
const std::string& hxir_scratch_dir();

// Compiles .hxir text with its file constants in hxir_scratch_dir(). When it
// compiles, the executable must verify (a refusal aborts: the compiler and
// the verifier disagree) and is then loaded and run as by
// load_and_run_executable.
void compile_hxir_text(const uint8_t* data, size_t size);

// Imports bytes as an ONNX model, written to a file of this process in
// hxir_scratch_dir() so that its external data may name the files there
// (and the FIFO and symlinks out, which must be refused). What imports is
// compiled; the executable must verify and is then run as by
// load_and_run_executable. A no-op in a build without ONNX.
void import_onnx_bytes(const uint8_t* data, size_t size);

// The differential target: bytes -> a random valid program (graph_gen.h),
// compiled under every plan option (naive, arena, free-at-last-use, memory
// schedule, in place off, --align 4 and 256, zstd) and run twice per context
// on deterministic inputs. The naive plan on a one-thread cpu device is the
// reference; every other variant runs on a two-thread device and must give
// bit-identical outputs. Returns "" when all agree, else what differed (or
// which variant failed to compile, load or run: the generator only writes
// valid programs).
std::string compare_plans(const uint8_t* data, size_t size);

}  // namespace hexir::fuzz
