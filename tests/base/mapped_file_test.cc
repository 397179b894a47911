// MappedFile (hexir/base/mapped_file.h), the one file mapping under hexir-dump
// and the VM's Module::load_file: contents, empty files, errors naming the path.
#include "hexir/base/mapped_file.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <utility>

#include "scratch_dir.h"

namespace hexir {
namespace {

using testing::ScratchDir;
using testing::write_all;

TEST_CASE("mapped file: contents and moves") {
  ScratchDir scratch;
  write_all(scratch / "a.bin", "hexir");
  Result<MappedFile> file = MappedFile::open(scratch / "a.bin");
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
  ScratchDir scratch;
  write_all(scratch / "empty.bin", "");
  Result<MappedFile> file = MappedFile::open(scratch / "empty.bin");
  REQUIRE(file.ok());
  CHECK(file->empty());
  REQUIRE(file->data() != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(file->data()) % 64 == 0);
}

TEST_CASE("mapped file: errors name the path") {
  ScratchDir scratch;
  const std::string missing = scratch / "missing.bin";
  Result<MappedFile> file = MappedFile::open(missing);
  REQUIRE_FALSE(file.ok());
  CHECK(file.status().code() == StatusCode::kNotFound);
  CHECK(file.status().message() == "cannot open '" + missing + "': No such file or directory");
  Result<MappedFile> dir = MappedFile::open(scratch.path.string());
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.status().code() == StatusCode::kInvalidArgument);
  CHECK(dir.status().message() == "'" + scratch.path.string() + "' is not a regular file (a directory)");
}

}  // namespace
}  // namespace hexir
