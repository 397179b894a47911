#include "hexir/base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace hexir {
namespace {

// Where an empty file's span points: a valid, aligned address owning nothing.
alignas(64) const uint8_t kEmpty[1] = {0};

std::span<const uint8_t> empty_bytes() { return {kEmpty, 0}; }

}  // namespace

Result<MappedFile> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string message = "cannot open '" + path + "': " + std::strerror(err);
    return err == ENOENT ? not_found(std::move(message)) : invalid_argument(std::move(message));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument("'" + path + "' is not a regular file");
  }
  if (st.st_size == 0) {
    ::close(fd);
    return MappedFile(empty_bytes());
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (mapping == MAP_FAILED) return resource_exhausted("cannot map '" + path + "': " + std::strerror(err));
  return MappedFile({static_cast<const uint8_t*>(mapping), size});
}

MappedFile::MappedFile(MappedFile&& other) noexcept : bytes_(std::exchange(other.bytes_, {})) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap(bytes_);
    bytes_ = std::exchange(other.bytes_, {});
  }
  return *this;
}

MappedFile::~MappedFile() { unmap(bytes_); }

void MappedFile::unmap(std::span<const uint8_t> released) {
  if (released.empty()) return;
  ::munmap(const_cast<uint8_t*>(released.data()), released.size());
}

}  // namespace hexir
