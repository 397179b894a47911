// Reading a constant's bytes where they are (graph.h ConstantSource): inline,
// a fill pattern, or a range of a file read a chunk at a time. The constant
// passes and the writer see weights only through this, so a compile holds at
// most one chunk of a file constant at once.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "hexir/base/file_io.h"
#include "hexir/base/status.h"
#include "hexir/base/types.h"
#include "hexir/compiler/graph.h"

namespace hexir::compiler {

inline constexpr size_t kConstantChunkSize = size_t{1} << 20;

// kResourceExhausted when a constant @name of `type` is larger than
// `max_bytes`: "constant @c is f32[100000000000] (400000000000 bytes), more
// than the limit of 17179869184 bytes of constants (hexir-compile
// --max-constant-bytes)".
Status check_constant_size(std::string_view name, const TensorType& type, uint64_t max_bytes);
// The same for every stored constant of `module` a function uses, one by one
// and together, before any of their bytes is read.
Status check_constant_bytes(const Module& module, uint64_t max_bytes);

// Reads a constant's byte_size bytes front to back, in pieces.
class ConstantReader {
 public:
  explicit ConstantReader(const Constant& constant);
  ConstantReader(ConstantReader&&) = default;
  ConstantReader& operator=(ConstantReader&&) = default;

  // The next min(max_bytes, remaining()) bytes (empty at the end). Valid
  // until the next call. A file constant's file is opened without blocking
  // and must be a regular file (a FIFO or a device put in its place after
  // parsing is refused) that still holds the whole range (else kDataLoss):
  // exactly byte_size bytes are read, never "until the end".
  Result<std::span<const uint8_t>> next(size_t max_bytes = kConstantChunkSize);
  uint64_t remaining() const { return size_ - position_; }

 private:
  const Constant* constant_;
  uint64_t size_ = 0;
  uint64_t position_ = 0;
  InputFile file_;  // a file constant's file, opened on the first read (regular files only)
  std::vector<uint8_t> buffer_;
};

// Calls `chunk` with the constant's bytes in order, one piece at a time.
Status for_each_chunk(const Constant& constant, const std::function<Status(std::span<const uint8_t>)>& chunk);

// All of a constant's bytes (for the rewrites that read a small constant's
// values or a weight's); fails when they cannot be read or are not byte_size.
Result<std::vector<uint8_t>> constant_bytes(const Constant& constant);

// Whether two constants of equal byte size hold the same bytes.
Result<bool> same_bytes(const Constant& a, const Constant& b);

// format::checksum64 of bytes that arrive in pieces (same value as over all of them at once).
class StreamingChecksum64 {
 public:
  void update(std::span<const uint8_t> bytes);
  uint64_t finish() const;

 private:
  uint64_t hash_ = 0xcbf29ce484222325ull;
  uint64_t size_ = 0;
  uint8_t pending_[8] = {};
  size_t pending_size_ = 0;
};

}  // namespace hexir::compiler
