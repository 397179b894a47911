#include "hexir/base/mapped_file.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "hexir/base/file_io.h"

namespace hexir {
namespace {

// Where an empty file's span points: a valid, aligned address owning nothing.
alignas(64) const uint8_t kEmpty[1] = {0};

std::span<const uint8_t> empty_bytes() { return {kEmpty, 0}; }

}  // namespace

Result<MappedFile> MappedFile::open(const std::string& path) {
  // Opened without blocking and accepted only when regular (file_io.h): a
  // FIFO would hang here and a device has no size to map.
  HEXIR_ASSIGN_OR_RETURN(InputFile file, open_input_file(path));
  return map(file.fd.get(), file.size, path);
}

Result<MappedFile> MappedFile::map_fd(int fd, const std::string& what) {
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0)
    return invalid_argument("cannot map '" + what + "': file descriptor " + std::to_string(fd) + " is not open");
  if (!S_ISREG(st.st_mode)) return invalid_argument("'" + what + "' is not a regular file");
  return map(fd, static_cast<uint64_t>(st.st_size), what);
}

Result<MappedFile> MappedFile::map(int fd, uint64_t file_size, const std::string& what) {
  if (file_size == 0) return MappedFile(empty_bytes());
  if (file_size > static_cast<uint64_t>(SIZE_MAX))
    return resource_exhausted("cannot map '" + what + "': " + std::to_string(file_size) + " bytes");
  const size_t size = static_cast<size_t>(file_size);
  void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (mapping == MAP_FAILED) return resource_exhausted("cannot map '" + what + "': " + std::strerror(errno));
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
