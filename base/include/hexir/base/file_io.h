// Opening files the one careful way, for every reader and writer of Hexir.
//
// Reading: a path is opened with O_NONBLOCK (opening a FIFO with no writer
// would otherwise hang), checked with fstat to be a regular file (a FIFO, a
// device such as /dev/zero or a directory is refused: they block, never end
// or have no size), then O_NONBLOCK is cleared. The size fstat reports is the
// size the caller checks its header against and reads: exactly that many
// bytes, never "until EOF".
//
// Writing: a file is written to a new temporary beside its target, created
// with O_CREAT|O_EXCL|O_NOFOLLOW (a planted symlink or an existing file is
// never followed or reused), and on commit renamed over the target when the
// target is a regular file or does not exist. Any other target (/dev/null, a
// FIFO, a terminal) is written through: the temporary is made in the temp
// directory and its bytes are copied into the target on commit, so a device
// node is never replaced. A directory is refused.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

#include "hexir/base/status.h"

namespace hexir {

// An owned file descriptor, closed on destruction.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// A regular file open for reading, and its size when it was opened.
struct InputFile {
  FileDescriptor fd;
  uint64_t size = 0;
};

// Opens `path` for reading without blocking and accepts only a regular file.
// Errors name the path: kNotFound when it does not exist; kInvalidArgument
// when it cannot be opened or is not a regular file ("'p' is not a regular
// file (a FIFO)").
Result<InputFile> open_input_file(const std::string& path);

// Reads exactly out.size() bytes at `offset`; kDataLoss naming `path` when
// the file ends first (it shrank) or a read fails.
Status read_exact(const InputFile& file, uint64_t offset, std::span<uint8_t> out, const std::string& path);

// The whole of a regular file, refused (kResourceExhausted, naming the limit
// and `limit_name`) when it is larger than `max_bytes`.
Result<std::string> read_file_limited(const std::string& path, uint64_t max_bytes,
                                      std::string_view limit_name);

// A file being written: see the top of this header. Not committed, the
// temporary is removed on destruction and the target is left untouched.
class OutputFile {
 public:
  // Refuses a directory target; creates the temporary.
  static Result<OutputFile> create(const std::string& path);

  OutputFile() = default;
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  // The temporary, open for writing and seekable (always a regular file).
  std::FILE* stream() const { return stream_; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

  Status write(std::span<const uint8_t> bytes);
  Status write(std::string_view text);
  // Flushes and closes the temporary, then renames it over the target (a
  // regular file or none) or copies it into the target (anything else).
  Status commit();

 private:
  void discard();

  std::string path_, temp_path_;
  std::FILE* stream_ = nullptr;
  bool write_through_ = false;
};

// Writes `bytes` to `path` through an OutputFile. Errors say "cannot write
// 'path': ..." (OutputFile::create's say "cannot create").
Status write_output_file(const std::string& path, std::span<const uint8_t> bytes);

}  // namespace hexir
