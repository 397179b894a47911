#include "hexir/base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <new>
#include <utility>

namespace hexir {
namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return nullptr;
}

std::string errno_text(int err) { return std::strerror(err); }

// Writes all of `bytes` to `fd` (partial writes and EINTR retried).
bool write_all(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

Result<InputFile> open_input_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO that has no writer returns at once instead of waiting for one.
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.valid()) {
    const int err = errno;
    std::string message = "cannot open '" + path + "': " + errno_text(err);
    return err == ENOENT ? not_found(std::move(message)) : invalid_argument(std::move(message));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    return invalid_argument("cannot stat '" + path + "': " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) {
    std::string message = "'" + path + "' is not a regular file";
    if (const char* kind = file_kind(st.st_mode)) message += std::string(" (") + kind + ")";
    return invalid_argument(std::move(message));
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0)
    return invalid_argument("cannot read '" + path + "': " + errno_text(errno));
  InputFile file;
  file.fd = std::move(fd);
  file.size = static_cast<uint64_t>(st.st_size);
  return file;
}

Status read_exact(const InputFile& file, uint64_t offset, std::span<uint8_t> out, const std::string& path) {
  size_t done = 0;
  while (done < out.size()) {
    const uint64_t at = offset + done;
    if (at > static_cast<uint64_t>(INT64_MAX)) return data_loss("'" + path + "': read offset out of range");
    const ssize_t n = ::pread(file.fd.get(), out.data() + done, out.size() - done, static_cast<off_t>(at));
    if (n < 0) {
      if (errno == EINTR) continue;
      return data_loss("error reading '" + path + "': " + errno_text(errno));
    }
    if (n == 0)
      return data_loss("'" + path + "' ended after " + std::to_string(at) + " bytes, " +
                       std::to_string(offset + out.size()) + " expected (was it changed while being read?)");
    done += static_cast<size_t>(n);
  }
  return ok_status();
}

Result<std::string> read_file_limited(const std::string& path, uint64_t max_bytes,
                                      std::string_view limit_name) {
  HEXIR_ASSIGN_OR_RETURN(InputFile file, open_input_file(path));
  if (file.size > max_bytes)
    return resource_exhausted("'" + path + "' has " + std::to_string(file.size) + " bytes, more than the " +
                              std::string(limit_name) + " of " + std::to_string(max_bytes));
  std::string text;
  try {
    text.resize(static_cast<size_t>(file.size));
  } catch (const std::bad_alloc&) {
    return resource_exhausted("cannot allocate " + std::to_string(file.size) + " bytes to read '" + path +
                              "'");
  }
  HEXIR_RETURN_IF_ERROR(read_exact(file, 0, {reinterpret_cast<uint8_t*>(text.data()), text.size()}, path));
  return text;
}

// ---- OutputFile ----------------------------------------------------------------

Result<OutputFile> OutputFile::create(const std::string& path) {
  if (path.empty()) return invalid_argument("cannot write a file with an empty name");
  OutputFile out;
  out.path_ = path;
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return invalid_argument("cannot create '" + path + "': it is a directory");
    if (!S_ISREG(st.st_mode)) {
      // A device or FIFO: write through to it at commit, never rename over it.
      out.write_through_ = true;
      std::error_code ec;
      dir = std::filesystem::temp_directory_path(ec);
      if (ec) dir = "/tmp";
    }
  }
  if (dir.empty()) dir = ".";
  const std::string stem =
      out.write_through_ ? std::string("hexir-out") : std::filesystem::path(path).filename().string();
  // O_EXCL|O_NOFOLLOW: a name someone planted (a file or a symlink) is never
  // written through; another random name is tried instead.
  uint64_t seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                  (static_cast<uint64_t>(::getpid()) << 32) ^ reinterpret_cast<uintptr_t>(&out);
  int fd = -1;
  int err = 0;
  for (int attempt = 0; attempt < 64 && fd < 0; ++attempt) {
    seed = mix(seed + static_cast<uint64_t>(attempt));
    static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    std::string suffix;
    for (int i = 0; i < 8; ++i) suffix += kDigits[(seed >> (6 * i)) % 36];
    out.temp_path_ = (dir / ("." + stem + ".tmp-" + suffix)).string();
    fd = ::open(out.temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    err = errno;
    if (fd < 0 && err != EEXIST) break;
  }
  if (fd < 0) {
    // Named by the target (the caller's path); the temporary is an implementation detail.
    std::string message = "cannot create '" + path + "': " + errno_text(err);
    out.temp_path_.clear();
    return err == ENOENT ? not_found(std::move(message)) : invalid_argument(std::move(message));
  }
  out.stream_ = ::fdopen(fd, "wb");
  if (!out.stream_) {
    err = errno;
    ::close(fd);
    return invalid_argument("cannot write '" + out.temp_path_ + "': " + errno_text(err));
  }
  return out;
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : path_(std::move(other.path_)),
      temp_path_(std::exchange(other.temp_path_, {})),
      stream_(std::exchange(other.stream_, nullptr)),
      write_through_(other.write_through_) {}

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    discard();
    path_ = std::move(other.path_);
    temp_path_ = std::exchange(other.temp_path_, {});
    stream_ = std::exchange(other.stream_, nullptr);
    write_through_ = other.write_through_;
  }
  return *this;
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() {
  if (stream_) std::fclose(stream_);
  stream_ = nullptr;
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

Status OutputFile::write(std::span<const uint8_t> bytes) {
  if (!stream_) return failed_precondition("'" + path_ + "' is not open for writing");
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), stream_) != bytes.size())
    return data_loss("error writing '" + temp_path_ + "': " + errno_text(errno));
  return ok_status();
}

Status OutputFile::write(std::string_view text) {
  return write(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

Status OutputFile::commit() {
  if (!stream_) return failed_precondition("'" + path_ + "' is not open for writing");
  const bool flushed = std::fflush(stream_) == 0;
  int err = errno;
  const bool closed = std::fclose(stream_) == 0;
  if (flushed) err = errno;
  stream_ = nullptr;
  if (!flushed || !closed) {
    Status status = data_loss("error writing '" + temp_path_ + "': " + errno_text(err));
    discard();
    return status;
  }
  struct stat st;
  const bool exists = ::stat(path_.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) {
    discard();
    return invalid_argument("cannot write '" + path_ + "': it is a directory");
  }
  if (!write_through_ && (!exists || S_ISREG(st.st_mode))) {
    if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
      err = errno;
      Status status =
          invalid_argument("cannot rename '" + temp_path_ + "' to '" + path_ + "': " + errno_text(err));
      discard();
      return status;
    }
    temp_path_.clear();
    return ok_status();
  }
  // Write through: copy the finished bytes into the target as it is.
  Status status = ok_status();
  {
    FileDescriptor in(::open(temp_path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    FileDescriptor target(
        ::open(path_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | (exists ? 0 : O_CREAT | O_EXCL), 0666));
    if (!in.valid() || !target.valid()) {
      status = invalid_argument("cannot write '" + path_ + "': " + errno_text(errno));
    } else {
      uint8_t buffer[1 << 16];
      while (status.ok()) {
        const ssize_t n = ::read(in.get(), buffer, sizeof(buffer));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) status = data_loss("error reading '" + temp_path_ + "': " + errno_text(errno));
        if (n <= 0) break;
        if (!write_all(target.get(), buffer, static_cast<size_t>(n)))
          status = data_loss("error writing '" + path_ + "': " + errno_text(errno));
      }
      if (status.ok() && ::close(target.release()) != 0)
        status = data_loss("error writing '" + path_ + "': " + errno_text(errno));
    }
  }
  discard();
  return status;
}

Status write_output_file(const std::string& path, std::span<const uint8_t> bytes) {
  Result<OutputFile> created = OutputFile::create(path);
  if (!created.ok()) {
    // Said as what the caller asked for: "cannot write 'x.svg': No such file or directory".
    std::string message = created.status().message();
    constexpr std::string_view kCreate = "cannot create ";
    if (message.starts_with(kCreate)) message.replace(0, kCreate.size(), "cannot write ");
    return Status(created.status().code(), std::move(message));
  }
  OutputFile out = std::move(created).value();
  HEXIR_RETURN_IF_ERROR(out.write(bytes));
  return out.commit();
}

}  // namespace hexir
