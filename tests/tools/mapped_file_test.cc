// MappedFile (hexir/base/mapped_file.h), the one file mapping under hexir-dump
// and the VM's Module::load_file: contents, empty files, errors naming the path.
#include "hexir/base/mapped_file.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

namespace hexir {
namespace {

namespace fs = std::filesystem;

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("hexir-mapped-" + std::to_string(getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() { fs::remove_all(dir); }
  std::string file(const std::string& name, const std::string& contents) const {
    const std::string path = (dir / name).string();
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }
};

TEST_CASE("mapped file: contents and moves") {
  Scratch scratch;
  Result<MappedFile> file = MappedFile::open(scratch.file("a.bin", "hexir"));
  REQUIRE(file.ok());
  CHECK(file->size() == 5);
  CHECK(std::string(reinterpret_cast<const char*>(file->data()), file->size()) == "hexir");
  MappedFile moved = std::move(*file);
  CHECK(file->empty());
  CHECK(moved.size() == 5);
  CHECK(moved.data()[0] == 'h');
  MappedFile assigned;
  assigned = std::move(moved);
  CHECK(moved.empty());
  CHECK(assigned.size() == 5);
  CHECK(assigned.data()[4] == 'r');
}

TEST_CASE("mapped file: an empty file is an empty, aligned span") {
  Scratch scratch;
  Result<MappedFile> file = MappedFile::open(scratch.file("empty.bin", ""));
  REQUIRE(file.ok());
  CHECK(file->empty());
  REQUIRE(file->data() != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(file->data()) % 64 == 0);
}

TEST_CASE("mapped file: errors name the path") {
  Scratch scratch;
  const std::string missing = (scratch.dir / "missing.bin").string();
  Result<MappedFile> file = MappedFile::open(missing);
  REQUIRE_FALSE(file.ok());
  CHECK(file.status().code() == StatusCode::kNotFound);
  CHECK(file.status().message() == "cannot open '" + missing + "': No such file or directory");
  Result<MappedFile> dir = MappedFile::open(scratch.dir.string());
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.status().code() == StatusCode::kInvalidArgument);
  CHECK(dir.status().message() == "'" + scratch.dir.string() + "' is not a regular file (a directory)");
}

}  // namespace
}  // namespace hexir
