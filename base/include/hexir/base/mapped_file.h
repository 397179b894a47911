// A file mapped read-only into memory: the one way Hexir maps a file (the VM's
// Module::load_file, hexir-dump). The mapping is private and read-only, so
// nothing can be written through it; it is unmapped when the object goes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "hexir/base/status.h"

namespace hexir {

class MappedFile {
 public:
  // Maps all of `path`. Errors name the path: kNotFound when it does not
  // exist, kInvalidArgument when it cannot be opened or is not a regular
  // file (a FIFO or a device is refused without blocking: file_io.h),
  // kResourceExhausted when the mapping fails. An empty file is not an
  // error: it gives an empty span whose data pointer is still valid and
  // 64-byte aligned (nothing is mapped).
  static Result<MappedFile> open(const std::string& path);
  // Maps all of the file open as `fd`, which must be a regular file (the
  // caller keeps the descriptor; the mapping outlives its closing). `what`
  // names the file in errors.
  static Result<MappedFile> map_fd(int fd, const std::string& what);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return bytes_; }
  const uint8_t* data() const { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }
  bool empty() const { return bytes_.empty(); }

 private:
  static void unmap(std::span<const uint8_t> bytes);
  static Result<MappedFile> map(int fd, uint64_t size, const std::string& what);

  explicit MappedFile(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  std::span<const uint8_t> bytes_;  // empty: nothing mapped
};

}  // namespace hexir
