// Turns a graph and its plan into an .hxe: prelude, "HXE1" flatbuffer
// metadata, then the RODATA section on a page boundary, streamed constant by
// constant (a chunk at a time from files) into a sink: a file, or bytes in
// memory. zstd-compressed when asked and when that makes it smaller (the raw
// section is then assembled once in memory for the compressor).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "hexir/base/file_io.h"
#include "hexir/base/status.h"
#include "hexir/compiler/compiler.h"
#include "hexir/compiler/graph.h"
#include "ir/plan.h"

namespace hexir::serializer {

// The writer reads the compiler's graph and plan; it adds nothing to them.
using compiler::Module;
using compiler::ModulePlan;
using compiler::PlanStrategy;
using compiler::SectionCompression;

struct WriteOptions {
  PlanStrategy strategy = PlanStrategy::kArena;
  uint32_t alignment = 64;
  std::string heuristic;
  bool data_checksum = false;
  SectionCompression compression = SectionCompression::kNone;
  int compression_level = 3;
};

// Where the writer puts the file: bytes are appended in order, then the
// prelude is written over the first bytes once the checksums are known.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual Status append(std::span<const uint8_t> bytes) = 0;
  virtual Status overwrite(uint64_t offset, std::span<const uint8_t> bytes) = 0;
  virtual uint64_t size() const = 0;
  // A hint: the file will have `size` bytes in all.
  virtual void reserve(uint64_t size) { (void)size; }
  Status append_zeros(uint64_t count);
};

class VectorSink final : public ByteSink {
 public:
  Status append(std::span<const uint8_t> bytes) override;
  Status overwrite(uint64_t offset, std::span<const uint8_t> bytes) override;
  uint64_t size() const override { return bytes_.size(); }
  void reserve(uint64_t size) override;  // a hint: failing to reserve is not an error
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

// Writes a new temporary beside `path` (created O_CREAT|O_EXCL|O_NOFOLLOW
// under a random name: a planted file or symlink is never written through)
// and renames it over `path` on commit(), so a failed compile never leaves a
// half file behind; without commit() the temporary is removed. A target that
// is not a regular file (/dev/null, a FIFO) is written through, never
// replaced; a directory is refused (hexir/base/file_io.h).
class FileSink final : public ByteSink {
 public:
  static Result<std::unique_ptr<FileSink>> create(const std::filesystem::path& path);
  ~FileSink() override;
  Status append(std::span<const uint8_t> bytes) override;
  Status overwrite(uint64_t offset, std::span<const uint8_t> bytes) override;
  uint64_t size() const override { return size_; }
  Status commit();

 private:
  explicit FileSink(OutputFile file) : file_(std::move(file)) {}
  Status write_error() const;
  OutputFile file_;
  bool committed_ = false;
  uint64_t size_ = 0;
};

// Expects the constant passes (detect/dedupe/pack_constants), and
// assign_storage and plan_function_arena on every function, to have run.
// `head`, when given, receives the prelude and the metadata (what a summary
// of the file reads), without the data sections.
Status write_module(const Module& module, const ModulePlan& plan, const WriteOptions& options, ByteSink& sink,
                    std::vector<uint8_t>* head = nullptr);
// The whole file as bytes.
Result<std::vector<uint8_t>> write_module(const Module& module, const ModulePlan& plan,
                                          const WriteOptions& options);

// Sections smaller than this are never compressed: they cost at most a page.
inline constexpr uint64_t kMinCompressedSectionSize = 4096;

}  // namespace hexir::serializer
